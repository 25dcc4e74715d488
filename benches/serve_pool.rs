//! `toolcage serve` with and without its pool of sandboxes prepared ahead
//! (issue 25), against the same script spawned with no sandbox, in one
//! run, side by side:
//!
//! 1. sequential: a trivial `.agents/tools` script (`echo ok`) called over
//!    stdio by one client, interleaved with a plain spawn of the script;
//!    medians and ratios (target: pool on ≤ 2.0× the plain spawn), with
//!    each step 5 ms after the last (as an agent's calls come: the work a
//!    step leaves behind is done before the next) and back to back;
//! 2. 8 concurrent sessions (`serve --http`, one client each) against 8
//!    threads spawning the script: calls per second and the ratio
//!    (target: ≥ 0.5× the plain spawns' throughput);
//! 3. the pool's memory: the ready inits' and the maker's RSS and PSS (`smaps_rollup`),
//!    and the server's own RSS with the pool on and off.
//!
//! Run with `cargo bench --bench serve_pool`. Prints numbers; asserts
//! nothing (the machine may be busy).

#[allow(dead_code)]
#[path = "../tests/mcp_support/http.rs"]
mod http;

#[path = "common/mod.rs"]
mod common;
#[path = "common/stdio.rs"]
mod stdio;
use common::median;
use serde_json::json;
use std::io::Write;
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use stdio::StdioClient;

const ROUNDS: usize = 200;
const SESSIONS: usize = 8;
const CONCURRENT_SECS: u64 = 5;
const EXE: &str = env!("CARGO_BIN_EXE_toolcage");
const TOKEN: &str = "toolcage-bench-token";

fn project() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tc-bench-pool-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let tools = dir.join(".agents/tools");
    std::fs::create_dir_all(&tools).unwrap();
    let noop = tools.join("noop");
    std::fs::write(&noop, "#!/bin/sh\n# @description Print ok.\necho ok\n").unwrap();
    std::fs::set_permissions(&noop, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir.canonicalize().unwrap()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The script with no sandbox, as an agent host would spawn it: its
/// arguments on stdin, its output captured.
fn plain(script: &Path) {
    let mut c = Command::new(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The script does not read it: a closed pipe is fine.
    let _ = c.stdin.take().unwrap().write_all(b"{}");
    let out = c.wait_with_output().unwrap();
    assert_eq!(out.stdout, b"ok\n");
}

/// `toolcage serve` on stdio for `dir`, initialized, its pool of `pool`.
fn start(dir: &Path, pool: &str) -> StdioClient {
    let mut c = Command::new(EXE);
    c.arg("-C")
        .arg(dir)
        .args(["serve", "--no-watch", "--pool", pool])
        .env("XDG_STATE_HOME", dir.with_extension("state"));
    StdioClient::spawn(c)
}

/// One call of the trivial script.
fn call(s: &mut StdioClient) {
    let r = s.request("tools/call", json!({"name": "noop", "arguments": {}}));
    assert_eq!(r["result"]["isError"], false, "{r}");
}

fn sequential(dir: &Path) {
    let script = dir.join(".agents/tools/noop");
    let mut on = start(dir, "4");
    let mut off = start(dir, "0");
    for _ in 0..20 {
        plain(&script);
        call(&mut on);
        call(&mut off);
    }
    println!("sequential, median of {ROUNDS} interleaved calls of a trivial .agents/tools script:");
    // With a pause before each step, as an agent's calls come (seconds
    // apart): the work each step leaves behind (the pool's refill, a cold
    // call's namespaces torn down after its answer) is done before the
    // next step starts. Back to back, it lands in the next step's time.
    for (pause, how) in [
        (Duration::from_millis(5), "5 ms apart"),
        (Duration::ZERO, "back to back"),
    ] {
        let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
        let step = |f: &mut dyn FnMut(), into: &mut Vec<Duration>| {
            std::thread::sleep(pause);
            let t = Instant::now();
            f();
            into.push(t.elapsed());
        };
        for _ in 0..ROUNDS {
            step(&mut || plain(&script), &mut a);
            step(&mut || call(&mut on), &mut b);
            step(&mut || call(&mut off), &mut c);
        }
        let (a, b, c) = (median(a), median(b), median(c));
        println!(" {how}:");
        println!("  spawned with no sandbox     : {:7.3} ms", ms(a));
        println!(
            "  toolcage serve, pool on (4) : {:7.3} ms  {:5.2}x  (target <= 2.0x)",
            ms(b),
            ms(b) / ms(a)
        );
        println!(
            "  toolcage serve, pool off    : {:7.3} ms  {:5.2}x",
            ms(c),
            ms(c) / ms(a)
        );
    }
    memory(&on, &off);
}

/// `/proc/<pid>/status` VmRSS, or `smaps_rollup` Pss, in KiB.
fn kib(pid: u32, file: &str, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/{file}"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

/// The children of `parent` named `toolcage-pool`: the server's is the
/// pool's maker, the maker's are the ready inits (they keep the name until
/// their tool execs).
fn pool_children(parent: u32) -> Vec<u32> {
    let parent = parent.to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok()?.parse::<u32>().ok())
        .filter(|p| {
            let s = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            let Some(close) = s.rfind(')') else {
                return false;
            };
            // Fields after the name: state, parent. A zombie (an init
            // whose call ended, not reaped yet) is not ready.
            let mut fields = s[close + 2..].split_whitespace();
            s.contains("(toolcage-pool)")
                && fields.next() != Some("Z")
                && fields.next() == Some(parent.as_str())
        })
        .collect()
}

fn memory(on: &StdioClient, off: &StdioClient) {
    std::thread::sleep(Duration::from_millis(500));
    let makers = pool_children(on.pid());
    let inits: Vec<u32> = makers.iter().flat_map(|m| pool_children(*m)).collect();
    let rss: u64 = inits.iter().map(|p| kib(*p, "status", "VmRSS:")).sum();
    let pss: u64 = inits.iter().map(|p| kib(*p, "smaps_rollup", "Pss:")).sum();
    let n = inits.len().max(1) as f64;
    println!("the pool's memory ({} ready sandboxes):", inits.len());
    println!(
        "  per ready init: RSS {:6.1} MiB, PSS {:6.1} MiB (shared with the maker: copy on write)",
        rss as f64 / n / 1024.0,
        pss as f64 / n / 1024.0
    );
    for m in &makers {
        println!(
            "  the pool's maker: RSS {:6.1} MiB, PSS {:6.1} MiB",
            kib(*m, "status", "VmRSS:") as f64 / 1024.0,
            kib(*m, "smaps_rollup", "Pss:") as f64 / 1024.0
        );
    }
    println!(
        "  server RSS: pool on {:6.1} MiB, pool off {:6.1} MiB",
        kib(on.pid(), "status", "VmRSS:") as f64 / 1024.0,
        kib(off.pid(), "status", "VmRSS:") as f64 / 1024.0
    );
}

/// 8 threads spawning the script for `CONCURRENT_SECS`: calls per second.
fn plain_throughput(script: &Path) -> f64 {
    let done = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + Duration::from_secs(CONCURRENT_SECS);
    let t = Instant::now();
    let threads: Vec<_> = (0..SESSIONS)
        .map(|_| {
            let (done, script) = (done.clone(), script.to_path_buf());
            std::thread::spawn(move || {
                while Instant::now() < deadline {
                    plain(&script);
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for th in threads {
        th.join().unwrap();
    }
    done.load(Ordering::Relaxed) as f64 / t.elapsed().as_secs_f64()
}

struct Http {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Http {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http_server(dir: &Path, pool: &str) -> Http {
    let log = dir.with_extension(format!("log-{pool}"));
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
        f.write_all(TOKEN.as_bytes()).unwrap();
    }
    let mut child = Command::new(EXE)
        .arg("-C")
        .arg(dir)
        .args([
            "--log",
            "info",
            "serve",
            "--no-watch",
            "--http",
            "127.0.0.1:0",
        ])
        .arg("--token-file")
        .arg(&token_file)
        .args(["--max-concurrent", &SESSIONS.to_string(), "--pool", pool])
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
            let addr = rest[..rest.find('/').unwrap()].parse().unwrap();
            return Http { child, addr };
        }
        if t.elapsed() > Duration::from_secs(30) || child.try_wait().unwrap().is_some() {
            panic!("the server did not start: {s}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

const AUTH: (&str, &str) = ("Authorization", "Bearer toolcage-bench-token");
const ACCEPT: (&str, &str) = ("Accept", "application/json, text/event-stream");
const JSON: (&str, &str) = ("Content-Type", "application/json");

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

async fn http_call(addr: SocketAddr, sid: &str, id: usize) {
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
    let m = r.messages().into_iter().find(|m| m["id"] == id);
    assert!(
        m.is_some_and(|m| m["result"]["isError"] == false),
        "{} {}",
        r.status,
        r.body
    );
}

/// 8 sessions calling `noop` for `CONCURRENT_SECS`: calls per second.
async fn serve_throughput(dir: &Path, pool: &str) -> f64 {
    let server = http_server(dir, pool);
    let addr = server.addr;
    let mut sessions = Vec::new();
    for _ in 0..SESSIONS {
        sessions.push(open_session(addr).await);
    }
    for (i, sid) in sessions.iter().enumerate() {
        http_call(addr, sid, 2 + i).await; // warm up (and teach the pool)
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let next = Arc::new(AtomicUsize::new(100));
    let done = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + Duration::from_secs(CONCURRENT_SECS);
    let t = Instant::now();
    let tasks: Vec<_> = sessions
        .into_iter()
        .map(|sid| {
            let (next, done) = (next.clone(), done.clone());
            tokio::spawn(async move {
                while Instant::now() < deadline {
                    http_call(addr, &sid, next.fetch_add(1, Ordering::Relaxed)).await;
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    done.load(Ordering::Relaxed) as f64 / t.elapsed().as_secs_f64()
}

fn concurrent(dir: &Path) {
    let script = dir.join(".agents/tools/noop");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let base = plain_throughput(&script);
    let on = rt.block_on(serve_throughput(dir, "8"));
    let on4 = rt.block_on(serve_throughput(dir, "4"));
    let off = rt.block_on(serve_throughput(dir, "0"));
    println!("{SESSIONS} concurrent sessions, {CONCURRENT_SECS} s each, calls per second:");
    println!("  spawned with no sandbox ({SESSIONS} threads): {base:7.0}");
    println!(
        "  serve --http, pool 8                 : {on:7.0}  {:5.2}x  (target >= 0.5x)",
        on / base
    );
    println!(
        "  serve --http, pool 4 (the default)   : {on4:7.0}  {:5.2}x",
        on4 / base
    );
    println!(
        "  serve --http, pool off               : {off:7.0}  {:5.2}x",
        off / base
    );
}

fn main() {
    let dir = project();
    let only = std::env::var("TOOLCAGE_BENCH").unwrap_or_default();
    if only.is_empty() || only == "sequential" {
        sequential(&dir);
    }
    if only.is_empty() || only == "concurrent" {
        concurrent(&dir);
    }
    let _ = std::fs::remove_dir_all(&dir);
    for ext in ["state", "token", "log-0", "log-4", "log-8"] {
        let _ = std::fs::remove_dir_all(dir.with_extension(ext));
        let _ = std::fs::remove_file(dir.with_extension(ext));
    }
}
