//! MCP over stdio: one client, newline-delimited JSON-RPC on stdin/stdout.
//! Nothing but MCP goes to stdout (logs go to stderr).
//!
//! rmcp's line transport silently ignores a line it cannot parse, which
//! leaves a client waiting for an answer that never comes. So every line
//! from the client passes through [`frame_input`] first: a line that is not
//! UTF-8 or not JSON gets a `-32700` Parse error, a line over
//! `max_message_bytes` is skipped without being buffered and gets a
//! `-32600` Invalid Request (both with `"id": null`, as JSON-RPC 2.0
//! section 5.1 says when the id cannot be read), so does valid JSON that is
//! not an object, and only JSON objects reach rmcp, which answers wrong
//! shapes with Invalid Request and
//! unknown methods with Method not found. The server keeps serving after
//! each. Our error lines and rmcp's responses share one writer that only
//! ever writes whole lines, so they never interleave.

use super::McpServer;
use rmcp::ServiceExt;
use rmcp::transport::async_rw::AsyncRwTransport;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// Serve one client on this process's stdin/stdout until stdin closes.
pub(crate) async fn serve_stdio(server: McpServer) -> anyhow::Result<()> {
    let (read, write) = rmcp::transport::stdio_pipes();
    serve_io(server, read, write).await
}

/// Serve one client over any byte stream pair (tests use a duplex pipe).
pub async fn serve_io<R, W>(server: McpServer, read: R, write: W) -> anyhow::Result<()>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let max = server.shared.config.max_message_bytes;
    let (to_rmcp, rmcp_in) = tokio::io::duplex(64 * 1024);
    let (rmcp_out, from_rmcp) = tokio::io::duplex(64 * 1024);
    let (lines, outgoing) = mpsc::channel::<Vec<u8>>(64);
    let input = tokio::spawn(frame_input(read, to_rmcp, lines.clone(), max));
    let output = tokio::spawn(forward_lines(from_rmcp, lines));
    let writer = tokio::spawn(write_lines(outgoing, write));

    let transport = AsyncRwTransport::new_server(rmcp_in, rmcp_out).with_max_line_length(max);
    let served = match server.serve(transport).await {
        Ok(running) => running
            .waiting()
            .await
            .map(|reason| tracing::info!("stdio client gone: {reason:?}"))
            .map_err(anyhow::Error::from),
        // A client that closes its end without a word (`serve </dev/null`,
        // a host probing that the binary starts) ends the session cleanly.
        Err(rmcp::service::ServerInitializeError::ConnectionClosed(why)) => {
            tracing::info!("stdio client gone before initializing: {why}");
            Ok(())
        }
        Err(e) => Err(anyhow::anyhow!("MCP initialization failed: {e}")),
    };
    // rmcp is done: stop reading, let the last lines out, then return.
    input.abort();
    let _ = output.await;
    let _ = writer.await;
    served
}

/// How one line from the client ended.
enum Line {
    /// A complete line is in the buffer (without its newline).
    Complete,
    /// The line was longer than the limit; it was read and discarded.
    TooLong,
    Eof,
}

/// Read one `\n`-terminated line into `buf`, never holding more than
/// `max` bytes of it. A final line without a newline counts as a line.
async fn read_line_capped<R: AsyncRead + Unpin>(
    r: &mut BufReader<R>,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Line> {
    buf.clear();
    let mut too_long = false;
    loop {
        let chunk = r.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(match (too_long, buf.is_empty()) {
                (true, _) => Line::TooLong,
                (false, true) => Line::Eof,
                (false, false) => Line::Complete,
            });
        }
        let (part, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (&chunk[..i], Some(i + 1)),
            None => (chunk, None),
        };
        if !too_long && buf.len() + part.len() > max {
            too_long = true;
            buf.clear();
        }
        if !too_long {
            buf.extend_from_slice(part);
        }
        let used = done.unwrap_or(chunk.len());
        r.consume(used);
        if done.is_some() {
            return Ok(if too_long {
                Line::TooLong
            } else {
                Line::Complete
            });
        }
    }
}

/// The error for a line that cannot be handed to rmcp, if any.
fn reject(line: &[u8]) -> Option<serde_json::Value> {
    let text = match std::str::from_utf8(line) {
        Ok(t) => t,
        Err(e) => {
            let msg = format!(
                "Parse error: invalid UTF-8 at byte {} (messages must be UTF-8 JSON)",
                e.valid_up_to()
            );
            return Some(error(-32700, msg));
        }
    };
    match serde_json::from_str::<serde::de::IgnoredAny>(text) {
        // Valid JSON that is not an object (a number, a string, a batch
        // array, which MCP no longer has): answered here, with the `"id":
        // null` JSON-RPC 2.0 asks for when the id cannot be known.
        Ok(_) if !text.trim_start().starts_with('{') => Some(error(
            -32600,
            "Invalid Request: a message must be a JSON object".into(),
        )),
        Ok(_) => None,
        Err(e) => Some(error(
            -32700,
            format!("Parse error: {e} (each message must be one line of JSON)"),
        )),
    }
}

fn error(code: i64, message: String) -> serde_json::Value {
    json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}})
}

fn encode(v: &serde_json::Value) -> Vec<u8> {
    let mut out = v.to_string().into_bytes();
    out.push(b'\n');
    out
}

/// Client → rmcp: pass well-formed JSON lines on, answer the rest.
async fn frame_input<R, W>(read: R, mut to_rmcp: W, errors: mpsc::Sender<Vec<u8>>, max: usize)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut r = BufReader::with_capacity(64 * 1024, read);
    let mut buf = Vec::new();
    loop {
        let line = match read_line_capped(&mut r, &mut buf, max).await {
            Ok(l) => l,
            Err(e) => {
                tracing::info!("stdin: {e}");
                return;
            }
        };
        match line {
            Line::Eof => return,
            Line::TooLong => {
                tracing::warn!("dropped a message over {max} bytes");
                let msg = format!(
                    "Invalid Request: message over {max} bytes dropped (raise --max-message-bytes)"
                );
                if errors.send(encode(&error(-32600, msg))).await.is_err() {
                    return;
                }
            }
            Line::Complete => {
                let line = buf.strip_suffix(b"\r").unwrap_or(&buf);
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                if let Some(e) = reject(line) {
                    tracing::warn!("stdin: {}", e["error"]["message"]);
                    if errors.send(encode(&e)).await.is_err() {
                        return;
                    }
                    continue;
                }
                let sent = async {
                    to_rmcp.write_all(line).await?;
                    to_rmcp.write_all(b"\n").await?;
                    to_rmcp.flush().await
                };
                if sent.await.is_err() {
                    return;
                }
            }
        }
    }
}

/// rmcp → writer, a whole line at a time.
async fn forward_lines<R: AsyncRead + Unpin>(from_rmcp: R, lines: mpsc::Sender<Vec<u8>>) {
    let mut r = BufReader::new(from_rmcp);
    loop {
        let mut line = Vec::new();
        match r.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                if lines.send(line).await.is_err() {
                    return;
                }
            }
        }
    }
}

async fn write_lines<W: AsyncWrite + Unpin>(mut lines: mpsc::Receiver<Vec<u8>>, mut out: W) {
    while let Some(line) = lines.recv().await {
        if out.write_all(&line).await.is_err() || out.flush().await.is_err() {
            return;
        }
    }
}

/// Fuzz entry (`fuzz/fuzz_targets/jsonrpc_input.rs`): bytes from a client,
/// framed and checked as [`frame_input`] does, and every line that passes
/// decoded as rmcp decodes a client message. Must never panic.
pub fn fuzz_input(data: &[u8]) {
    for line in data.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        match reject(line) {
            Some(e) => assert!(e["id"].is_null()),
            None => {
                let text = std::str::from_utf8(line).expect("passed lines are UTF-8");
                let _ = serde_json::from_str::<rmcp::model::ClientJsonRpcMessage>(text);
            }
        }
    }
}

/// Fuzz entry (`fuzz/fuzz_targets/jsonrpc_framer.rs`): bytes from a
/// client, framed by [`read_line_capped`] under several caps and buffer
/// sizes. The lines must be exactly the input split at `\n` (a last line
/// without one included), each over the cap reported as too long instead
/// of returned, and no line returned longer than the cap.
pub fn fuzz_framer(data: &[u8]) {
    let small = 1 + usize::from(data.first().copied().unwrap_or(0) % 64);
    for max in [small, 4096] {
        let mut expected: Vec<Option<&[u8]>> = data
            .split(|&b| b == b'\n')
            .map(|l| (l.len() <= max).then_some(l))
            .collect();
        if data.is_empty() || data.ends_with(b"\n") {
            expected.pop(); // nothing after the last newline
        }
        for capacity in [1, 7, 4096] {
            let mut r = BufReader::with_capacity(capacity, data);
            let mut buf = Vec::new();
            let mut got: Vec<Option<Vec<u8>>> = Vec::new();
            loop {
                let line = {
                    let read = std::pin::pin!(read_line_capped(&mut r, &mut buf, max));
                    // A byte slice never makes a read wait: one poll finishes it.
                    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
                    match read.poll(&mut cx) {
                        std::task::Poll::Ready(line) => line,
                        std::task::Poll::Pending => panic!("reading a byte slice was pending"),
                    }
                };
                match line.expect("reading a byte slice fails") {
                    Line::Eof => break,
                    Line::TooLong => got.push(None),
                    Line::Complete => {
                        assert!(
                            buf.len() <= max,
                            "a line of {} over the cap {max}",
                            buf.len()
                        );
                        got.push(Some(buf.clone()));
                    }
                }
            }
            let expected: Vec<Option<Vec<u8>>> =
                expected.iter().map(|l| l.map(<[u8]>::to_vec)).collect();
            assert_eq!(got, expected, "cap {max}, buffer {capacity}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], max: usize) -> Vec<String> {
        let mut r = BufReader::with_capacity(8, input);
        let mut buf = Vec::new();
        let mut out = Vec::new();
        loop {
            match read_line_capped(&mut r, &mut buf, max).await.unwrap() {
                Line::Eof => return out,
                Line::TooLong => out.push("<too long>".into()),
                Line::Complete => out.push(String::from_utf8_lossy(&buf).into_owned()),
            }
        }
    }

    #[tokio::test]
    async fn lines_are_capped_without_buffering_and_the_next_line_survives() {
        let got = lines(b"short\n0123456789abcdef\nok\nlast", 10).await;
        assert_eq!(got, ["short", "<too long>", "ok", "last"]);
        assert_eq!(lines(b"exactly10!\n", 10).await, ["exactly10!"]);
        assert_eq!(lines(b"", 10).await, Vec::<String>::new());
    }

    #[test]
    fn only_utf8_json_passes() {
        assert!(reject(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).is_none());
        // Not an object: Invalid Request with a null id, here. Other shape
        // errors (an object without a method) are rmcp's to answer.
        for not_an_object in [&b"[1,2]"[..], b"42", b" \"x\""] {
            let e = reject(not_an_object).unwrap();
            assert_eq!(e["error"]["code"], -32600);
            assert_eq!(e.get("id"), Some(&serde_json::Value::Null));
        }
        assert!(reject(br#"{"jsonrpc":"2.0","id":8}"#).is_none());
        let e = reject(b"{\"a\": \"\xff\"}").unwrap();
        assert_eq!(e["error"]["code"], -32700);
        assert!(e["id"].is_null());
        let e = reject(b"{\"jsonrpc\": \"2.0\", \"method").unwrap();
        assert_eq!(e["error"]["code"], -32700);
        assert!(
            e["error"]["message"]
                .as_str()
                .unwrap()
                .contains("one line of JSON")
        );
    }

    /// The committed corpus of the two fuzz targets over this module
    /// (`fuzz/corpus/`), replayed on stable.
    #[test]
    fn committed_fuzz_corpus_holds() {
        let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
        type Entry = (&'static str, fn(&[u8]));
        let targets: [Entry; 2] = [
            ("jsonrpc_framer", fuzz_framer),
            ("jsonrpc_input", fuzz_input),
        ];
        for (name, run) in targets {
            let dir = corpus.join(name);
            let entries =
                std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
            let mut n = 0;
            for entry in entries {
                let path = entry.unwrap().path();
                let data = std::fs::read(&path).unwrap();
                let run = std::panic::AssertUnwindSafe(|| run(&data));
                assert!(
                    std::panic::catch_unwind(run).is_ok(),
                    "{name}: {} fails",
                    path.display()
                );
                n += 1;
            }
            assert!(n > 0, "{name}: no corpus");
        }
    }

    #[test]
    fn nasty_client_input_never_panics() {
        let deep = "[".repeat(100_000);
        for input in [
            &b"\xff\xfe\n\r\n\0"[..],
            deep.as_bytes(),
            br#"{"jsonrpc":"2.0","id":{"x":1},"method":"tools/call","params":{"name":1}}"#,
            br#"{"jsonrpc":"2.0","id":1e400,"method":"ping"}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":"no"}}"#,
            b"\"\\ud800\"",
        ] {
            fuzz_input(input);
        }
    }
}
