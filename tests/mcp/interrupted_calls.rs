//! Every call that starts leaves an audit record, through the binary:
//! SIGTERM, SIGINT and SIGHUP to `toolcage call`, to a stdio `toolcage
//! serve` and to an HTTP `toolcage serve` while a tool runs kill the tool's
//! process tree, record the call as cancelled (`stopped_by`) and exit with
//! 128 + the signal; SIGKILL leaves the `started` record, shown as such by
//! `toolcage audit`. Controls: an uninterrupted call records its result.
//! (Ctrl-C at the approval prompt is in `tests/engine/approval_binding.rs`.)

use crate::common;
use crate::common::stdout as out;

use common::Project;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// A unique `sleep` argument, so the tool's processes can be found.
fn marker(n: u32) -> String {
    format!("{}.{:03}", 400 + n, std::process::id() % 1000)
}

/// A project with `slow` (touches `started`, then two sleeps carrying the
/// marker: one in the background, one in the foreground) and `quick`.
fn project(tag: &str, mark: &str) -> Project {
    let p = Project::new(tag);
    for (name, body) in [
        (
            "slow",
            format!(
                "#!/bin/sh\n# @description Sleeps.\nsleep {mark} &\ntouch started\nsleep {mark}\nwait\n"
            ),
        ),
        (
            "quick",
            "#!/bin/sh\n# @description Quick.\necho quick\n".to_string(),
        ),
    ] {
        let path = p.write(&format!(".agents/tools/{name}"), &body);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    p
}

fn toolcage(p: &Project) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_toolcage"));
    c.arg("-C")
        .arg(&p.dir)
        .current_dir(&p.dir)
        .env("XDG_STATE_HOME", p.state_dir())
        // Its own process group: a signal to it reaches nobody else.
        .process_group(0);
    c
}

fn run(p: &Project, args: &[&str]) -> Output {
    toolcage(p)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The records `toolcage audit --json` shows (with `--all`: every line).
fn records(p: &Project, all: bool) -> Vec<Value> {
    let mut args = vec!["audit", "--json"];
    if all {
        args.push("--all");
    }
    let o = run(p, &args);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    out(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// PIDs of live processes with `marker` as one argument.
fn alive_with(marker: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if cmdline.split(|b| *b == 0).any(|a| a == marker.as_bytes()) {
            found.push(pid);
        }
    }
    found
}

fn survivors(marker: &str) -> Vec<i32> {
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until && !alive_with(marker).is_empty() {
        std::thread::sleep(Duration::from_millis(50));
    }
    alive_with(marker)
}

fn wait_for_file(p: &Project, rel: &str, child: &mut Child) {
    let until = Instant::now() + Duration::from_secs(30);
    while !p.path(rel).exists() {
        if let Ok(Some(s)) = child.try_wait() {
            panic!("toolcage ended before the tool started: {s:?}");
        }
        assert!(Instant::now() < until, "the tool never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_exit(child: &mut Child) -> ExitStatus {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > until {
            let _ = child.kill();
            panic!("toolcage did not exit after the signal");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Wait (up to 10 s) until `n` processes carry `marker`: the tool forks
/// its sleepers after it touched its `started` file.
fn wait_alive(marker: &str, n: usize) -> usize {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let alive = alive_with(marker).len();
        if alive >= n || Instant::now() > until {
            return alive;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(child: &Child, sig: Signal) {
    kill(Pid::from_raw(child.id() as i32), sig).unwrap();
}

/// The final record of the one call of `tool`, checked to be a call that
/// was cancelled by `expect_by` with its `started` record before it, and
/// with the exit status toolcage returned for it (128 + the signal).
fn assert_cancelled(p: &Project, tool: &str, expect_by: &str, status: i32) {
    let shown = records(p, false);
    let finals: Vec<&Value> = shown.iter().filter(|r| r["tool"] == tool).collect();
    assert_eq!(finals.len(), 1, "{shown:?}");
    let r = finals[0];
    assert!(r.get("phase").is_none(), "{r}");
    assert_eq!(r["exit"]["kind"], "cancelled", "{r}");
    assert_eq!(r["stopped_by"], expect_by, "{r}");
    assert_eq!(r["exit_status"], status, "{r}");
    assert_eq!(r["is_error"], true, "{r}");
    let all = records(p, true);
    let started: Vec<&Value> = all
        .iter()
        .filter(|x| x["phase"] == "started" && x["call_id"] == r["call_id"])
        .collect();
    assert_eq!(started.len(), 1, "a started record precedes it: {all:?}");
}

const SIGNALS: [(Signal, &str); 3] = [
    (Signal::SIGTERM, "SIGTERM"),
    (Signal::SIGINT, "SIGINT"),
    (Signal::SIGHUP, "SIGHUP"),
];

#[test]
fn a_signal_to_call_kills_the_tool_tree_and_records_the_call() {
    for (i, (sig, name)) in SIGNALS.into_iter().enumerate() {
        let mark = marker(i as u32);
        let p = project(&format!("sig-call-{name}"), &mark);
        let mut child = toolcage(&p)
            .args(["call", "slow"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_for_file(&p, "started", &mut child);
        assert_eq!(wait_alive(&mark, 2), 2, "control: the tool runs");
        signal(&child, sig);
        let status = wait_exit(&mut child);
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert_eq!(status.code(), Some(128 + sig as i32), "{name}: {err}");
        assert!(err.contains(name) && err.contains("audit log"), "{err}");
        assert_eq!(survivors(&mark), Vec::<i32>::new(), "{name}");
        assert_cancelled(
            &p,
            "slow",
            &format!("{name} to toolcage call"),
            128 + sig as i32,
        );
        let text = out(&run(&p, &["audit"]));
        assert!(
            text.contains(&format!("exit {}  (cancelled: {name}", 128 + sig as i32)),
            "{text}"
        );
    }
}

#[test]
fn kill_9_leaves_the_started_record_and_no_tool_process() {
    let mark = marker(10);
    let p = project("sig-call-kill", &mark);
    let mut child = toolcage(&p)
        .args(["call", "slow"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_file(&p, "started", &mut child);
    signal(&child, Signal::SIGKILL);
    let status = wait_exit(&mut child);
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    assert_eq!(survivors(&mark), Vec::<i32>::new());
    let r = records(&p, false);
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(r[0]["phase"], "started", "{}", r[0]);
    assert_eq!(r[0]["tool"], "slow");
    let o = run(&p, &["audit"]);
    let text = out(&o);
    assert!(
        text.contains("slow  allowed  started, no result (toolcage was killed?)"),
        "{text}"
    );
}

#[test]
fn an_uninterrupted_call_records_its_result_once() {
    let p = project("sig-call-control", &marker(11));
    let o = run(&p, &["call", "quick"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert_eq!(out(&o), "quick\n");
    let r = records(&p, false);
    assert_eq!(r.len(), 1, "the started record is folded in: {r:?}");
    assert_eq!(r[0]["exit_status"], 0);
    assert!(r[0].get("stopped_by").is_none(), "{}", r[0]);
    assert_eq!(r[0]["definition_sha256"].as_str().unwrap().len(), 64);
    let all = records(&p, true);
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!(all[0]["phase"], "started");
    assert_eq!(all[0]["call_id"], all[1]["call_id"]);
    let text = out(&run(&p, &["audit"]));
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains("quick  allowed  exit 0"), "{text}");
}

/// Send one JSON-RPC message on a stdio server's stdin.
fn send(stdin: &mut impl Write, v: Value) {
    let mut line = serde_json::to_string(&v).unwrap();
    line.push('\n');
    stdin.write_all(line.as_bytes()).unwrap();
    stdin.flush().unwrap();
}

#[test]
fn a_signal_to_a_stdio_server_cancels_the_running_call_and_records_it() {
    for (i, (sig, name)) in SIGNALS.into_iter().enumerate() {
        let mark = marker(20 + i as u32);
        let p = project(&format!("sig-stdio-{name}"), &mark);
        let mut child = toolcage(&p)
            .args(["serve", "--no-watch"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .collect::<Vec<String>>()
        });
        send(
            &mut stdin,
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"}}}),
        );
        send(
            &mut stdin,
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        );
        send(
            &mut stdin,
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                   "params": {"name": "slow", "arguments": {}}}),
        );
        wait_for_file(&p, "started", &mut child);
        signal(&child, sig);
        let status = wait_exit(&mut child);
        assert_eq!(status.code(), Some(128 + sig as i32), "{name}");
        drop(stdin);
        let _ = reader.join();
        assert_eq!(survivors(&mark), Vec::<i32>::new(), "{name}");
        assert_cancelled(
            &p,
            "slow",
            &format!("{name} to toolcage serve"),
            128 + sig as i32,
        );
    }
}

/// A minimal HTTP/1.1 POST to `/mcp`; returns the head and the body read
/// until the server closes or `done` matches the text so far.
fn http_post(port: u16, session: Option<&str>, body: &Value, done: &str) -> (String, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let body = body.to_string();
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
         MCP-Protocol-Version: 2025-11-25\r\n",
        body.len()
    );
    if let Some(id) = session {
        req.push_str(&format!("Mcp-Session-Id: {id}\r\n"));
    }
    req.push_str("Connection: close\r\n\r\n");
    req.push_str(&body);
    s.write_all(req.as_bytes()).unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
        }
        if !done.is_empty() && String::from_utf8_lossy(&got).contains(done) {
            break;
        }
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    match text.split_once("\r\n\r\n") {
        Some((h, b)) => (h.to_string(), b.to_string()),
        None => (text, String::new()),
    }
}

#[test]
fn sigterm_to_an_http_server_cancels_the_running_call_and_records_it() {
    let mark = marker(30);
    let p = project("sig-http", &mark);
    let mut child = toolcage(&p)
        // Loopback without a token: this test is about signals, not auth.
        .args(["serve", "--no-watch", "--no-auth", "--http", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let port: u16 = loop {
        let mut line = String::new();
        assert!(err.read_line(&mut line).unwrap() > 0, "no address printed");
        if let Some(rest) = line.split("http://127.0.0.1:").nth(1) {
            break rest.split('/').next().unwrap().parse().unwrap();
        }
    };
    std::thread::spawn(move || {
        let mut sink = String::new();
        let _ = err.read_to_string(&mut sink);
    });
    let (head, _) = http_post(
        port,
        None,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}}),
        "\"result\"",
    );
    let session = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("mcp-session-id")
                .then(|| v.trim().to_string())
        })
        .unwrap_or_else(|| panic!("no session id: {head}"));
    http_post(
        port,
        Some(&session),
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        "",
    );
    let call = std::thread::spawn(move || {
        http_post(
            port,
            Some(&session),
            &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "slow", "arguments": {}}}),
            "\"id\":2",
        )
    });
    wait_for_file(&p, "started", &mut child);
    signal(&child, Signal::SIGTERM);
    let status = wait_exit(&mut child);
    assert_eq!(status.code(), Some(128 + libc::SIGTERM));
    let _ = call.join();
    assert_eq!(survivors(&mark), Vec::<i32>::new());
    assert_cancelled(&p, "slow", "SIGTERM to toolcage serve", 128 + libc::SIGTERM);
}
