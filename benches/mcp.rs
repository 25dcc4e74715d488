//! The MCP server's cost, measured in one run (issue 4 targets):
//!
//! 1. added latency: the same trivial sandboxed call through the engine
//!    directly (`toolcage call`'s runner path) and through the MCP layer
//!    (stdio transport, in process), interleaved; medians and the difference;
//! 2. throughput: `toolcage serve --http` as a separate process with 4
//!    concurrent clients (one session each) calling the trivial tool;
//! 3. the server's RSS when idle and after 10,000 calls;
//! 4. a flood (the bounded server): 2,000 pipelined calls with 1 MiB
//!    arguments over stdio (`--max-concurrent 1`): peak RSS and `ping`
//!    latency meanwhile; then over HTTP, one session with 48 clients calling a
//!    slow tool while a second session makes simple calls: its latency;
//!    and 1,100 connections trickling headers: other sessions' latency.
//!
//! Run with `cargo bench --bench mcp` (`TOOLCAGE_BENCH=flood` runs only the
//! flood). Prints numbers; asserts nothing.

#[path = "mcp/flood.rs"]
mod flood;
#[allow(dead_code)]
#[path = "../tests/mcp_support/http.rs"]
mod http;
#[allow(dead_code)]
#[path = "../tests/mcp_support/wire.rs"]
mod wire;

#[path = "common/mod.rs"]
mod common;
use common::median;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use toolcage::call::Engine;
use toolcage::discover::Options;
use toolcage::mcp::{EngineHost, ServeConfig};
use toolcage::policy::{Overrides, Sources};

const LATENCY_ROUNDS: usize = 300;
const CLIENTS: usize = 4;
const THROUGHPUT_SECS: u64 = 5;
const MANY_CALLS: usize = 10_000;

fn project() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tc-bench-mcp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let tools = dir.join(".agents/tools");
    std::fs::create_dir_all(&tools).unwrap();
    let noop = tools.join("noop");
    std::fs::write(&noop, "#!/bin/sh\n# @description Print ok.\necho ok\n").unwrap();
    std::fs::set_permissions(&noop, std::fs::Permissions::from_mode(0o755)).unwrap();
    let slow = tools.join("slow");
    std::fs::write(
        &slow,
        "#!/bin/sh\n# @description Read stdin, sleep 0.2 s, print ok.\n# @param data string Ballast\ncat >/dev/null\nsleep 0.2\necho ok\n",
    )
    .unwrap();
    std::fs::set_permissions(&slow, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir.canonicalize().unwrap()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

async fn latency(dir: &Path) {
    let engine = Engine::load(
        dir,
        &Sources::default(),
        Overrides::default(),
        Options::default(),
    )
    .expect("engine");
    let direct = Arc::new(engine.clone());
    let (mut c, _s, _t) = wire::start(Arc::new(EngineHost::new(engine)), ServeConfig::default());
    c.initialize().await;
    let call = json!({"name": "noop", "arguments": {}});
    let run_direct = || {
        let e = direct.clone();
        async move {
            let t = Instant::now();
            tokio::task::spawn_blocking(move || e.call("noop", json!({}), None).unwrap())
                .await
                .unwrap();
            t.elapsed()
        }
    };
    for _ in 0..20 {
        run_direct().await;
        c.request("tools/call", call.clone()).await;
    }
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..LATENCY_ROUNDS {
        a.push(run_direct().await);
        let t = Instant::now();
        let r = c.request("tools/call", call.clone()).await;
        b.push(t.elapsed());
        assert_eq!(r["result"]["isError"], false, "{r}");
    }
    let (a, b) = (median(a), median(b));
    println!("latency, median of {LATENCY_ROUNDS} interleaved calls of a trivial sandboxed tool:");
    println!("  engine (toolcage call's runner path): {:8.3} ms", ms(a));
    println!("  through MCP (stdio transport)       : {:8.3} ms", ms(b));
    println!(
        "  MCP layer added                     : {:8.3} ms",
        ms(b) - ms(a)
    );
}

struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn_server(dir: &Path) -> Server {
    spawn_server_with(dir, &["--max-concurrent", &CLIENTS.to_string()])
}

fn spawn_server_with(dir: &Path, extra: &[&str]) -> Server {
    let log = dir.with_extension("log");
    // The bench's own bearer token (a file only we can read).
    let token_file = dir.with_extension("token");
    {
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&token_file)
            .unwrap();
        std::io::Write::write_all(&mut f, TOKEN.as_bytes()).unwrap();
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolcage"))
        .arg("-C")
        .arg(dir)
        .args(["--log", "info", "serve", "--http", "127.0.0.1:0"])
        .arg("--token-file")
        .arg(&token_file)
        .args(extra)
        .env("XDG_STATE_HOME", dir.with_extension("state"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let t = Instant::now();
    loop {
        let s = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(i) = s.find("http://127.0.0.1:") {
            let rest = &s[i + "http://".len()..];
            let end = rest.find('/').unwrap();
            let addr = rest[..end].parse().unwrap();
            return Server { child, addr };
        }
        if t.elapsed() > Duration::from_secs(30) || child.try_wait().unwrap().is_some() {
            panic!("the server did not start: {s}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

const ACCEPT: (&str, &str) = ("Accept", "application/json, text/event-stream");
const JSON: (&str, &str) = ("Content-Type", "application/json");
const TOKEN: &str = "toolcage-bench-token";
const AUTH: (&str, &str) = ("Authorization", "Bearer toolcage-bench-token");

async fn open_session(addr: SocketAddr) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"}}});
    let r = http::post(addr, &[AUTH, ACCEPT, JSON], init.to_string().as_bytes()).await;
    let sid = r.header("mcp-session-id").expect("session").to_string();
    http::post(
        addr,
        &[AUTH, ACCEPT, JSON, ("Mcp-Session-Id", &sid)],
        br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await;
    sid
}

async fn call(addr: SocketAddr, sid: &str, id: usize) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "noop", "arguments": {}}});
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
        .unwrap_or_else(|| panic!("no response: {} {}", r.status, r.body))
}

/// Request ids, unique across rounds (a session remembers finished ones).
static NEXT_ID: AtomicUsize = AtomicUsize::new(10);

/// 4 clients (one session each, kept across rounds) calling until
/// `deadline` or `budget` calls in total.
async fn hammer(
    addr: SocketAddr,
    sessions: &[String],
    deadline: Option<Instant>,
    budget: usize,
) -> (usize, Duration) {
    let done = Arc::new(AtomicUsize::new(0));
    let errors = Arc::new(AtomicUsize::new(0));
    let t = Instant::now();
    let mut tasks = Vec::new();
    for sid in sessions {
        let (done, errors, sid) = (done.clone(), errors.clone(), sid.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                if done.fetch_add(1, Ordering::SeqCst) >= budget {
                    break;
                }
                let id = NEXT_ID.fetch_add(1, Ordering::SeqCst);
                let r = call(addr, &sid, id).await;
                if r["result"]["isError"] != false {
                    errors.fetch_add(1, Ordering::SeqCst);
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let n = done.load(Ordering::SeqCst).min(budget);
    let e = errors.load(Ordering::SeqCst);
    if e > 0 {
        println!("  ({e} calls returned isError)");
    }
    (n, t.elapsed())
}

async fn throughput_and_memory(dir: &Path) {
    let server = spawn_server(dir);
    let pid = server.child.id();
    let sid = open_session(server.addr).await;
    call(server.addr, &sid, 2).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle = rss_kib(pid);

    let deadline = Instant::now() + Duration::from_secs(THROUGHPUT_SECS);
    let mut sessions = Vec::new();
    for _ in 0..CLIENTS {
        sessions.push(open_session(server.addr).await);
    }
    let (n, took) = hammer(server.addr, &sessions, Some(deadline), usize::MAX).await;
    println!(
        "throughput, {CLIENTS} concurrent HTTP clients, {THROUGHPUT_SECS} s: {n} calls, {:.0} calls/s",
        n as f64 / took.as_secs_f64()
    );
    let after_first = rss_kib(pid);
    let (m, took) = hammer(server.addr, &sessions, None, MANY_CALLS).await;
    let after_many = rss_kib(pid);
    println!(
        "  then {m} more calls in {:.1} s ({:.0} calls/s)",
        took.as_secs_f64(),
        m as f64 / took.as_secs_f64()
    );
    println!("server RSS (toolcage serve --http, separate process):");
    println!(
        "  idle (after initialize + 1 call): {:6.1} MiB",
        idle as f64 / 1024.0
    );
    println!(
        "  after {n} calls                 : {:6.1} MiB",
        after_first as f64 / 1024.0
    );
    println!(
        "  after {} calls in total       : {:6.1} MiB",
        n + m + 1,
        after_many as f64 / 1024.0
    );
    // rmcp keeps each finished request's channel cache for 60 s (its
    // completed_cache_ttl, for clients resuming with Last-Event-ID), so the
    // rounds above grow while that window fills. After it has passed, the
    // freed memory is reused: a leak would still grow here.
    tokio::time::sleep(Duration::from_secs(65)).await;
    let (k, _) = hammer(server.addr, &sessions, None, MANY_CALLS).await;
    let after_more = rss_kib(pid);
    println!(
        "  after {} calls in total       : {:6.1} MiB  ({:+.1} MiB over the last {k} calls)",
        n + m + k + 1,
        after_more as f64 / 1024.0,
        (after_more as f64 - after_many as f64) / 1024.0
    );
}

fn main() {
    let dir = project();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let only_flood = std::env::var("TOOLCAGE_BENCH").is_ok_and(|v| v == "flood");
    rt.block_on(async {
        if !only_flood {
            latency(&dir).await;
            throughput_and_memory(&dir).await;
        }
        flood::stdio_flood(&dir);
        flood::http_flood(&dir).await;
        flood::trickle_flood(&dir).await;
    });
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(dir.with_extension("log"));
    let _ = std::fs::remove_dir_all(dir.with_extension("state"));
}
