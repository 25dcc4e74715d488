//! The flood section of the MCP bench: what one greedy client costs the
//! server and everyone else (the bounded server's targets: under 256 MiB RSS
//! and `ping` within 50 ms under 2,000 queued 1 MiB calls; another
//! session's simple call under 100 ms while one session floods).

use super::{ACCEPT, AUTH, JSON, NEXT_ID, http, median, ms, open_session, rss_kib};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const FLOOD_CALLS: usize = 2_000;
const BALLAST: usize = 1 << 20;
const PING_EVERY: usize = 100;
const FLOOD_CLIENTS: usize = 48;
const SECOND_SESSION_CALLS: usize = 30;

/// 2,000 pipelined `tools/call`s with 1 MiB arguments on one stdio session,
/// `--max-concurrent 1`, pings in between.
pub fn stdio_flood(dir: &Path) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolcage"))
        .arg("-C")
        .arg(dir)
        .args(["serve", "--no-watch", "--max-concurrent", "1"])
        .env("XDG_STATE_HOME", dir.with_extension("state"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel::<(Value, Instant)>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Ok(v) = serde_json::from_str::<Value>(&line)
                && tx.send((v, Instant::now())).is_err()
            {
                break;
            }
        }
    });
    let mut send = |v: &Value| {
        let mut line = serde_json::to_vec(v).unwrap();
        line.push(b'\n');
        stdin.write_all(&line).unwrap();
        Instant::now()
    };
    send(
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "flood", "version": "0"}}}),
    );
    rx.recv_timeout(Duration::from_secs(30)).unwrap();
    send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    std::thread::sleep(Duration::from_millis(300));
    let idle = rss_kib(pid);

    let peak = Arc::new(AtomicU64::new(idle));
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (peak, sampling) = (peak.clone(), sampling.clone());
        std::thread::spawn(move || {
            while sampling.load(Ordering::Relaxed) {
                peak.fetch_max(rss_kib(pid), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };

    // A NUL first: the value travels on stdin only (not the environment).
    let ballast = format!("\0{}", "x".repeat(BALLAST - 1));
    let t = Instant::now();
    let mut pings = Vec::new();
    for i in 0..FLOOD_CALLS {
        send(
            &json!({"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call",
            "params": {"name": "slow", "arguments": {"data": ballast}}}),
        );
        if i % PING_EVERY == PING_EVERY - 1 {
            let id = 1_000_000 + i;
            pings.push((
                id,
                send(&json!({"jsonrpc": "2.0", "id": id, "method": "ping"})),
            ));
        }
    }
    let written = t.elapsed();
    let (mut busy, mut ran, mut other) = (0, 0, 0);
    let mut ping_latency = Vec::new();
    let mut answers = 0;
    while answers < FLOOD_CALLS + pings.len() {
        let Ok((m, at)) = rx.recv_timeout(Duration::from_secs(120)) else {
            println!("  (no answer for 120 s: {answers} answers so far)");
            break;
        };
        answers += 1;
        if let Some((_, sent)) = pings.iter().find(|(id, _)| m["id"] == *id) {
            ping_latency.push(at.saturating_duration_since(*sent));
        } else if m["result"]["_meta"]["toolcage/error"] == "busy" {
            busy += 1;
        } else if m["result"]["isError"] == false {
            ran += 1;
        } else {
            other += 1;
        }
    }
    let all = t.elapsed();
    sampling.store(false, Ordering::Relaxed);
    sampler.join().unwrap();
    let after = rss_kib(pid);
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    let worst = ping_latency.iter().max().copied().unwrap_or_default();
    println!(
        "flood over stdio: {FLOOD_CALLS} tools/call with 1 MiB arguments, pipelined, --max-concurrent 1:"
    );
    println!(
        "  written in {:.1} s; all answered in {:.1} s: {ran} ran, {busy} refused as busy, {other} other",
        written.as_secs_f64(),
        all.as_secs_f64()
    );
    println!(
        "  server RSS: idle {:6.1} MiB | peak {:6.1} MiB | after {:6.1} MiB  (target: under 256 MiB)",
        idle as f64 / 1024.0,
        peak.load(Ordering::Relaxed) as f64 / 1024.0,
        after as f64 / 1024.0
    );
    println!(
        "  ping during the flood ({} pings): median {:.1} ms | max {:.1} ms  (target: within 50 ms)",
        ping_latency.len(),
        ms(median(if ping_latency.is_empty() {
            vec![Duration::ZERO]
        } else {
            ping_latency.clone()
        })),
        ms(worst)
    );
}

async fn call_tool(addr: std::net::SocketAddr, sid: &str, params: Value) -> Value {
    let id = NEXT_ID.fetch_add(1, Ordering::SeqCst);
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
        .unwrap_or_else(|| json!({"status": r.status, "body": r.body}))
}

/// Session A: 48 clients calling a 0.2 s tool in a loop; session B: simple
/// calls one after another, before and during the flood.
pub async fn http_flood(dir: &Path) {
    let server = super::spawn_server_with(dir, &["--max-concurrent", "4"]);
    let addr = server.addr;
    let (a, b) = (open_session(addr).await, open_session(addr).await);
    let noop = json!({"name": "noop", "arguments": {}});
    let mut quiet = Vec::new();
    for _ in 0..10 {
        let t = Instant::now();
        call_tool(addr, &b, noop.clone()).await;
        quiet.push(t.elapsed());
    }
    let stop = Arc::new(AtomicBool::new(false));
    let (ran, busy) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut flooders = Vec::new();
    for _ in 0..FLOOD_CLIENTS {
        let (a, stop, ran, busy) = (a.clone(), stop.clone(), ran.clone(), busy.clone());
        flooders.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let r = call_tool(
                    addr,
                    &a,
                    json!({"name": "slow", "arguments": {"data": "x"}}),
                )
                .await;
                if r["result"]["_meta"]["toolcage/error"] == "busy" {
                    busy.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                } else {
                    ran.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut flooded = Vec::new();
    let mut ping = Vec::new();
    for _ in 0..SECOND_SESSION_CALLS {
        let t = Instant::now();
        let r = call_tool(addr, &b, noop.clone()).await;
        flooded.push(t.elapsed());
        assert_eq!(r["result"]["isError"], false, "{r}");
        let t = Instant::now();
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
        http::post(
            addr,
            &[
                AUTH,
                ACCEPT,
                JSON,
                ("Mcp-Session-Id", &b),
                ("MCP-Protocol-Version", "2025-11-25"),
            ],
            body.to_string().as_bytes(),
        )
        .await;
        ping.push(t.elapsed());
    }
    stop.store(true, Ordering::Relaxed);
    for f in flooders {
        let _ = f.await;
    }
    let worst = |v: &[Duration]| ms(v.iter().max().copied().unwrap_or_default());
    println!(
        "flood over HTTP, --max-concurrent 4: session A with {FLOOD_CLIENTS} clients calling a 0.2 s tool \
         ({} ran, {} refused as busy); session B's simple calls:",
        ran.load(Ordering::Relaxed),
        busy.load(Ordering::Relaxed)
    );
    println!(
        "  session B, no flood : median {:6.1} ms | max {:6.1} ms",
        ms(median(quiet.clone())),
        worst(&quiet)
    );
    println!(
        "  session B, flooded  : median {:6.1} ms | max {:6.1} ms  (target: under 100 ms)",
        ms(median(flooded.clone())),
        worst(&flooded)
    );
    println!(
        "  session B's ping    : median {:6.1} ms | max {:6.1} ms",
        ms(median(ping.clone())),
        worst(&ping)
    );
}

const TRICKLERS: usize = 1_100;

/// 1,100 connections trickling a request head (a byte a second, never
/// finished), then an existing session's call and a new session's
/// initialize + call.
pub async fn trickle_flood(dir: &Path) {
    if let Err(e) = rlimit::increase_nofile_limit(u64::MAX) {
        println!("  (cannot raise the bench's open files limit: {e})");
    }
    let server = super::spawn_server_with(dir, &["--max-concurrent", "4"]);
    let addr = server.addr;
    let existing = open_session(addr).await;
    let noop = json!({"name": "noop", "arguments": {}});
    call_tool(addr, &existing, noop.clone()).await;
    let stop = Arc::new(AtomicBool::new(false));
    let mut tricklers = Vec::new();
    let opened = Arc::new(AtomicUsize::new(0));
    for _ in 0..TRICKLERS {
        let (stop, opened) = (stop.clone(), opened.clone());
        tricklers.push(tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            let Ok(mut s) = tokio::net::TcpStream::connect(addr).await else {
                return;
            };
            opened.fetch_add(1, Ordering::Relaxed);
            let head = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
            for b in head.iter().chain(std::iter::repeat(&b'a')) {
                if stop.load(Ordering::Relaxed) || s.write_all(&[*b]).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let t = Instant::now();
    let r = call_tool(addr, &existing, noop.clone()).await;
    let existing_took = t.elapsed();
    let t = Instant::now();
    let fresh = open_session(addr).await;
    let r2 = call_tool(addr, &fresh, noop.clone()).await;
    let fresh_took = t.elapsed();
    stop.store(true, Ordering::Relaxed);
    for t in tricklers {
        let _ = t.await;
    }
    println!(
        "{TRICKLERS} connections trickling headers ({} connected), default --max-connections and --header-timeout:",
        opened.load(Ordering::Relaxed)
    );
    println!(
        "  existing session's call      : {:7.1} ms (isError {})",
        ms(existing_took),
        r["result"]["isError"]
    );
    println!(
        "  new session's initialize+call: {:7.1} ms (isError {})",
        ms(fresh_took),
        r2["result"]["isError"]
    );
}
