//! A raw JSON-RPC line client for the stdio transport: the tests write
//! exactly the bytes they want (including broken ones) and read what the
//! server answers.

use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf};
use toolcage::mcp::{McpServer, ServeConfig, ToolHost};

/// How long any single expected message may take (generous: the machine is shared).
pub const WAIT: Duration = Duration::from_secs(30);

pub struct LineClient {
    w: Option<WriteHalf<DuplexStream>>,
    r: BufReader<ReadHalf<DuplexStream>>,
    /// Notifications and server requests seen while waiting for responses.
    pub notes: Vec<Value>,
    next_id: i64,
}

/// Start a server over an in-memory pipe; returns the client, the server
/// handle (for `notify_tools_changed`, `client_count`) and its task.
pub fn start(
    host: Arc<dyn ToolHost>,
    config: ServeConfig,
) -> (
    LineClient,
    McpServer,
    tokio::task::JoinHandle<anyhow::Result<()>>,
) {
    serve(McpServer::new(host, config))
}

/// Like [`start`], for a server built by the caller (e.g. with a gate).
pub fn serve(
    server: McpServer,
) -> (
    LineClient,
    McpServer,
    tokio::task::JoinHandle<anyhow::Result<()>>,
) {
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let (sr, sw) = tokio::io::split(theirs);
    let task = tokio::spawn(toolcage::mcp::stdio::serve_io(server.clone(), sr, sw));
    let (cr, cw) = tokio::io::split(ours);
    let client = LineClient {
        w: Some(cw),
        r: BufReader::new(cr),
        notes: Vec::new(),
        next_id: 1000,
    };
    (client, server, task)
}

impl LineClient {
    pub async fn send_raw(&mut self, bytes: &[u8]) {
        let w = self.w.as_mut().expect("client input closed");
        w.write_all(bytes).await.unwrap();
        w.flush().await.unwrap();
    }

    pub async fn send(&mut self, v: Value) {
        let mut line = serde_json::to_vec(&v).unwrap();
        line.push(b'\n');
        self.send_raw(&line).await;
    }

    /// Close our end of stdin (EOF for the server).
    pub async fn close_input(&mut self) {
        if let Some(mut w) = self.w.take() {
            let _ = w.shutdown().await;
        }
    }

    /// The next message, or None on EOF. Panics after [`WAIT`].
    pub async fn recv(&mut self) -> Option<Value> {
        self.recv_within(WAIT)
            .await
            .unwrap_or_else(|| panic!("no message from the server within {WAIT:?}"))
    }

    /// Some(next message or None on EOF), or None if nothing came in `d`.
    pub async fn recv_within(&mut self, d: Duration) -> Option<Option<Value>> {
        let mut line = String::new();
        match tokio::time::timeout(d, self.r.read_line(&mut line)).await {
            Err(_) => None,
            Ok(Ok(0)) => Some(None),
            Ok(Ok(_)) => Some(Some(serde_json::from_str(&line).unwrap_or_else(|e| {
                panic!("the server wrote something that is not JSON ({e}): {line:?}")
            }))),
            Ok(Err(e)) => panic!("reading from the server: {e}"),
        }
    }

    /// Read until the response with `id`; keep everything else in `notes`.
    pub async fn response(&mut self, id: &Value) -> Value {
        loop {
            let m = self.recv().await.expect("server closed before responding");
            if m.get("id") == Some(id) && (m.get("result").is_some() || m.get("error").is_some()) {
                return m;
            }
            self.notes.push(m);
        }
    }

    pub fn fresh_id(&mut self) -> i64 {
        self.next_id += 1;
        self.next_id
    }

    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.fresh_id();
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        self.response(&json!(id)).await
    }

    pub async fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await;
    }

    /// initialize + notifications/initialized; returns the initialize result.
    pub async fn initialize(&mut self) -> Value {
        let r = self
            .request(
                "initialize",
                json!({
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "toolcage-tests", "version": "0"}
                }),
            )
            .await;
        self.notify("notifications/initialized", json!({})).await;
        r["result"].clone()
    }

    /// A notification with `method`, from those already seen or the next ones.
    pub async fn wait_note(&mut self, method: &str) -> Value {
        if let Some(i) = self.notes.iter().position(|n| n["method"] == method) {
            return self.notes.remove(i);
        }
        loop {
            let m = self
                .recv()
                .await
                .unwrap_or_else(|| panic!("server closed while waiting for {method}"));
            if m["method"] == method {
                return m;
            }
            self.notes.push(m);
        }
    }

    /// Whether a notification with `method` arrives within `d`.
    pub async fn sees_note_within(&mut self, method: &str, d: Duration) -> bool {
        if self.notes.iter().any(|n| n["method"] == method) {
            return true;
        }
        let until = tokio::time::Instant::now() + d;
        loop {
            let left = until.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            match self.recv_within(left).await {
                None | Some(None) => return false,
                Some(Some(m)) => {
                    if m["method"] == method {
                        return true;
                    }
                    self.notes.push(m);
                }
            }
        }
    }
}

/// The text of a tools/call result's first content block.
pub fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}
