//! The bounded server, through the binary: pending calls are capped per
//! session and overall (beyond: an `isError` result at once), a second
//! session is served while the first has many pending calls, an HTTP client
//! that does not finish its headers is disconnected, and connections beyond
//! `--max-connections` do not break existing sessions. Every refusal has
//! its positive control; nothing asserts a timing threshold.

use crate::common;
use crate::mcp_support::http;
use crate::serve_http::{ACCEPT, JSON, address_after, serve_command, token_file, wait_for};

use common::Project;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TOKEN: &str = "bounded-server-test-token";
const AUTH: (&str, &str) = ("Authorization", "Bearer bounded-server-test-token");

/// A project with `noop` (prints ok) and `slow` (sleeps SECS, prints slept).
fn project(tag: &str) -> Project {
    let p = Project::new(tag);
    for (name, body) in [
        ("noop", "#!/bin/sh\n# @description Print ok.\necho ok\n"),
        (
            "slow",
            "#!/bin/sh\n# @description Sleep a while.\n# @param *secs string Seconds\nsleep \"$OCTOMIND_PARAM_SECS\"\necho slept\n",
        ),
    ] {
        let path = p.write(&format!(".agents/tools/{name}"), body);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    p
}

fn text(answer: &Value) -> String {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn slow(secs: &str) -> Value {
    json!({"name": "slow", "arguments": {"secs": secs}})
}

// ------------------------------------------------------------------ stdio

struct Stdio1 {
    child: Child,
    stdin: std::process::ChildStdin,
    answers: mpsc::Receiver<Value>,
}

impl Drop for Stdio1 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Stdio1 {
    fn start(p: &Project, extra: &[&str]) -> Stdio1 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_toolcage"))
            .arg("-C")
            .arg(&p.dir)
            .args(["serve", "--no-watch"])
            .args(extra)
            .current_dir(&p.dir)
            .env("XDG_STATE_HOME", p.state_dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let stdin = child.stdin.take().unwrap();
        let (tx, answers) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && tx.send(v).is_err()
                {
                    break;
                }
            }
        });
        let mut s = Stdio1 {
            child,
            stdin,
            answers,
        };
        s.send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "bounded", "version": "0"}}}),
        );
        s.answer(1);
        s.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        s
    }

    fn send(&mut self, v: Value) {
        let mut line = serde_json::to_vec(&v).unwrap();
        line.push(b'\n');
        self.stdin.write_all(&line).unwrap();
    }

    fn call(&mut self, id: u64, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}));
    }

    /// The answers to `ids`, in the order they arrived.
    fn answers(&mut self, ids: &[u64]) -> Vec<Value> {
        let mut got = Vec::new();
        while got.len() < ids.len() {
            let m = self
                .answers
                .recv_timeout(Duration::from_secs(60))
                .expect("the server answers");
            if ids.iter().any(|id| m["id"] == *id) {
                got.push(m);
            }
        }
        got
    }

    fn answer(&mut self, id: u64) -> Value {
        self.answers(&[id]).remove(0)
    }
}

#[test]
fn calls_beyond_the_session_cap_are_refused_at_once_and_those_below_run() {
    let p = project("pending-session");
    let mut s = Stdio1::start(
        &p,
        &["--max-concurrent", "1", "--max-pending-per-session", "3"],
    );
    for id in 10..15 {
        s.call(id, slow("1"));
    }
    let got = s.answers(&[10, 11, 12, 13, 14]);
    // Two are beyond the cap (which two depends on the order the server
    // takes them in): answered first, before any call finished.
    for refused in &got[..2] {
        assert_eq!(refused["result"]["isError"], true, "{refused}");
        assert_eq!(
            text(refused),
            "toolcage: 3 calls already pending for this session (limit 3); retry later"
        );
        assert_eq!(refused["result"]["_meta"]["toolcage/error"], "busy");
    }
    // Positive control: the three below the cap ran.
    for ran in &got[2..] {
        assert_eq!(ran["result"]["isError"], false, "{ran}");
        assert_eq!(text(ran), "slept\n", "{ran}");
    }
    // Once they ended, the session may call again.
    s.call(20, json!({"name": "noop", "arguments": {}}));
    let again = s.answer(20);
    assert_eq!(again["result"]["isError"], false, "{again}");
}

#[test]
fn calls_beyond_the_server_cap_are_refused_and_ping_still_answers() {
    let p = project("pending-server");
    let mut s = Stdio1::start(&p, &["--max-concurrent", "1", "--max-pending", "2"]);
    for id in 10..13 {
        s.call(id, slow("1"));
    }
    s.send(json!({"jsonrpc": "2.0", "id": 99, "method": "ping"}));
    let got = s.answers(&[10, 11, 12, 99]);
    let pong = got.iter().find(|m| m["id"] == 99).unwrap();
    assert_eq!(pong["result"], json!({}), "{pong}");
    let calls: Vec<&Value> = got.iter().filter(|m| m["id"] != 99).collect();
    // One of the three (whichever the server took last) is beyond the cap,
    // answered before any call finished; the other two ran.
    let refused = calls[0];
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert_eq!(
        text(refused),
        "toolcage: 2 calls already pending on this server (limit 2); retry later"
    );
    for ran in &calls[1..] {
        assert_eq!(ran["result"]["isError"], false, "{ran}");
    }
}

// ------------------------------------------------------------------- HTTP

struct Server {
    child: Child,
    addr: SocketAddr,
    /// The token file and the server's log, beside the project.
    files: [std::path::PathBuf; 2],
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
    }
}

fn serve_http(p: &Project, extra: &[&str]) -> Server {
    let token = token_file(p, TOKEN);
    let log = p.dir.with_extension("serve.log");
    let mut child = serve_command(p, &token, extra)
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let addr = wait_for(&mut child, &log, |s| {
        address_after(s, "MCP over HTTP at http://")
    });
    Server {
        child,
        addr,
        files: [token, log],
    }
}

async fn open_session(addr: SocketAddr) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "bounded", "version": "0"}}});
    let r = http::post(addr, &[AUTH, ACCEPT, JSON], init.to_string().as_bytes()).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let sid = r.header("mcp-session-id").expect("session").to_string();
    let n = http::post(
        addr,
        &[AUTH, ACCEPT, JSON, ("Mcp-Session-Id", &sid)],
        br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await;
    assert_eq!(n.status, 202, "{}", n.body);
    sid
}

async fn call(addr: SocketAddr, sid: &str, id: u64, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    let r = http::post(
        addr,
        &[
            AUTH,
            ACCEPT,
            JSON,
            ("Mcp-Session-Id", sid),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        body.to_string().as_bytes(),
    )
    .await;
    r.messages()
        .into_iter()
        .find(|m| m["id"] == id)
        .unwrap_or_else(|| panic!("no answer to {id}: {} {}", r.status, r.body))
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn a_second_session_is_served_while_the_first_has_many_pending_calls() {
    let p = project("fair");
    let server = serve_http(&p, &["--max-concurrent", "1"]);
    let addr = server.addr;
    rt().block_on(async {
        let (a, b) = (open_session(addr).await, open_session(addr).await);
        let (done, finished) = tokio::sync::mpsc::unbounded_channel::<String>();
        let mut flood = Vec::new();
        for i in 0..10 {
            let (a, done) = (a.clone(), done.clone());
            flood.push(tokio::spawn(async move {
                let r = call(addr, &a, 100 + i, slow("0.5")).await;
                assert_eq!(r["result"]["isError"], false, "{r}");
                let _ = done.send(format!("A{i}"));
            }));
        }
        // Let session A's ten calls queue up behind its first.
        tokio::time::sleep(Duration::from_millis(800)).await;
        let r = call(addr, &b, 7, json!({"name": "noop", "arguments": {}})).await;
        assert_eq!(r["result"]["isError"], false, "{r}");
        let _ = done.send("B".into());
        drop(done);
        for f in flood {
            f.await.unwrap();
        }
        let mut finished = finished;
        let mut order = Vec::new();
        while let Some(x) = finished.recv().await {
            order.push(x);
        }
        let b_at = order.iter().position(|x| x == "B").unwrap();
        // Session B got the slot after the call running when it arrived (or
        // the one after it), not after all of A's.
        assert!(b_at <= 3, "session B waited behind session A: {order:?}");
    });
}

/// Connect and send the first half of a request head, then nothing.
async fn half_header(addr: SocketAddr) -> tokio::net::TcpStream {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty")
        .await
        .unwrap();
    s
}

/// Whether the server closes `s` within `limit` (reads to EOF; a 408
/// answer before the close is fine).
async fn closed_within(mut s: tokio::net::TcpStream, limit: Duration) -> bool {
    let mut buf = Vec::new();
    tokio::time::timeout(limit, s.read_to_end(&mut buf))
        .await
        .is_ok()
}

#[test]
fn a_connection_that_sends_half_a_header_is_closed_and_a_long_call_is_not() {
    let p = project("header-timeout");
    let server = serve_http(&p, &["--header-timeout", "1s"]);
    let addr = server.addr;
    rt().block_on(async {
        let stuck = half_header(addr).await;
        // Positive control: an idle client is not disconnected while its
        // call runs longer than the header timeout.
        let sid = open_session(addr).await;
        let r = call(addr, &sid, 5, slow("2")).await;
        assert_eq!(text(&r), "slept\n", "{r}");
        assert!(
            closed_within(stuck, Duration::from_secs(20)).await,
            "a half-sent header kept its connection open"
        );
    });
}

#[test]
fn connections_beyond_the_limit_do_not_break_existing_sessions() {
    let p = project("max-connections");
    // A header timeout longer than the test: only the limit's own rule
    // (the oldest connection that never sent an admitted request makes
    // room) can let the session through.
    let server = serve_http(&p, &["--max-connections", "4", "--header-timeout", "5m"]);
    let addr = server.addr;
    rt().block_on(async {
        let sid = open_session(addr).await;
        let r = call(addr, &sid, 2, json!({"name": "noop", "arguments": {}})).await;
        assert_eq!(text(&r), "ok\n", "{r}");
        // Twelve connections that never finish their headers: three times
        // the limit.
        let mut stuck = Vec::new();
        for _ in 0..12 {
            stuck.push(half_header(addr).await);
        }
        // The session still works, and so does a new one.
        let r = call(addr, &sid, 3, json!({"name": "noop", "arguments": {}})).await;
        assert_eq!(text(&r), "ok\n", "{r}");
        let other = open_session(addr).await;
        let r = call(addr, &other, 4, json!({"name": "noop", "arguments": {}})).await;
        assert_eq!(text(&r), "ok\n", "{r}");
        // The stuck ones made room: all but the newest few were closed.
        let checks = stuck
            .into_iter()
            .map(|s| tokio::spawn(closed_within(s, Duration::from_secs(5))));
        let mut closed = 0;
        for c in checks {
            closed += usize::from(c.await.unwrap());
        }
        assert!(
            closed >= 12 - 4,
            "only {closed} of 12 stuck connections were closed"
        );
    });
}

#[test]
fn a_low_open_files_limit_lowers_the_connection_limit_and_calls_still_run() {
    let p = project("emfile");
    // A hard limit of 64 open files (serve raises the soft limit to it):
    // the default 512 connections would hit EMFILE, and the sandbox would
    // find no descriptor left for a call.
    let token = token_file(&p, TOKEN);
    let log = p.dir.with_extension("serve.log");
    let script = "ulimit -n 64 && exec \"$0\" -C \"$1\" serve --no-watch --http 127.0.0.1:0 \
                  --token-file \"$2\" --header-timeout 5m";
    let child = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_toolcage"))
        .arg(&p.dir)
        .arg(&token)
        .env("XDG_STATE_HOME", p.state_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut server = Server {
        child,
        addr: "127.0.0.1:1".parse().unwrap(),
        files: [token, log.clone()],
    };
    server.addr = wait_for(&mut server.child, &log, |s| {
        address_after(s, "MCP over HTTP at http://")
    });
    let addr = server.addr;
    rt().block_on(async {
        let sid = open_session(addr).await;
        let mut stuck = Vec::new();
        for _ in 0..100 {
            stuck.push(half_header(addr).await);
        }
        // Still serving, and a call still gets its descriptors: the stuck
        // connections made room.
        let r = call(addr, &sid, 2, json!({"name": "noop", "arguments": {}})).await;
        assert_eq!(text(&r), "ok\n", "{r}");
        drop(stuck);
    });
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(server.child.try_wait().unwrap().is_none(), "{text}");
    assert!(
        text.contains("--max-connections lowered from 512 to 4: the open files limit is 64"),
        "{text}"
    );
}
