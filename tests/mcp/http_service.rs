//! `toolcage serve --http` as a replica behind a load balancer, through the
//! binary: `--allow-host` for a proxy's Host and Origin (the token still
//! required), 404 for a session this replica does not hold, `/healthz` and
//! `/readyz` without a token (`/readyz` as `doctor` and a trial run decide,
//! 503 where the policy cannot be enforced or a call would fail closed;
//! 200 "degraded" while the shared store is away), `--metrics` (counters move, unknown tools
//! bucketed), `[audit] path = "-"` (stdout under --http, refused for
//! stdio), and `--drain` on SIGTERM. Every refusal has its control; no
//! timing asserts beyond generous bounds.

use crate::common;
use crate::mcp_support::http;
use crate::serve_http::{ACCEPT, JSON, address_after, rt, serve_command, token_file, wait_for};
use crate::store_support;

use common::Project;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

const TOKEN: &str = "service-test-token";
const AUTH: (&str, &str) = ("Authorization", "Bearer service-test-token");
const VERSION: (&str, &str) = ("MCP-Protocol-Version", "2025-11-25");

/// A project with `noop` (prints ok) and `slow` (touches `started`, sleeps
/// SECS, prints slept). Under `TOOLCAGE_TEST_NAMESPACE_FREE=1` the servers
/// this thread starts run namespace-free.
fn project(tag: &str) -> Project {
    common::namespace_free_if_asked();
    let p = Project::new(tag);
    for (name, body) in [
        ("noop", "#!/bin/sh\n# @description Print ok.\necho ok\n"),
        (
            "slow",
            "#!/bin/sh\n# @description Sleep a while.\n# @param *secs string Seconds\ntouch started\nsleep \"$OCTOMIND_PARAM_SECS\"\necho slept\n",
        ),
    ] {
        let path = p.write(&format!(".agents/tools/{name}"), body);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    p
}

struct Server {
    child: Child,
    addr: SocketAddr,
    metrics: Option<SocketAddr>,
    log: std::path::PathBuf,
    files: Vec<std::path::PathBuf>,
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

impl Server {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn signal(&self, sig: nix::sys::signal::Signal) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, sig).unwrap();
    }

    /// Wait (at most 60 s) for the server to exit.
    fn wait(&mut self) -> std::process::ExitStatus {
        let t = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "the server did not exit: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn command(p: &Project, extra: &[&str]) -> (Command, Vec<std::path::PathBuf>) {
    let token = token_file(p, TOKEN);
    let c = serve_command(p, &token, extra);
    (c, vec![token])
}

/// Start `serve --http` with `extra`; wait for its address (and the
/// metrics address when `--metrics` is given).
fn serve(p: &Project, extra: &[&str]) -> Server {
    let (c, files) = command(p, extra);
    start(p, c, files, extra.contains(&"--metrics"))
}

fn start(p: &Project, mut c: Command, mut files: Vec<std::path::PathBuf>, metrics: bool) -> Server {
    let log = p.dir.with_extension("serve.log");
    let child = c
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    files.push(log.clone());
    let mut server = Server {
        child,
        addr: "127.0.0.1:1".parse().unwrap(),
        metrics: None,
        log,
        files,
    };
    let (addr, m) = wait_for(&mut server.child, &server.log, |s| {
        let mcp = address_after(s, "MCP over HTTP at http://")?;
        let m = address_after(s, "metrics at http://");
        (!metrics || m.is_some()).then_some((mcp, m))
    });
    server.addr = addr;
    server.metrics = m;
    server
}

fn init_body() -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "service-test", "version": "0"}}})
    .to_string()
    .into_bytes()
}

async fn open_session(addr: SocketAddr) -> String {
    let r = http::post(addr, &[AUTH, ACCEPT, JSON], &init_body()).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let sid = r.header("mcp-session-id").expect("session").to_string();
    let n = http::post(
        addr,
        &[AUTH, ACCEPT, JSON, VERSION, ("Mcp-Session-Id", &sid)],
        br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await;
    assert_eq!(n.status, 202, "{}", n.body);
    sid
}

async fn rpc(addr: SocketAddr, sid: &str, id: u64, method: &str, params: Value) -> http::Reply {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    http::post(
        addr,
        &[AUTH, ACCEPT, JSON, VERSION, ("Mcp-Session-Id", sid)],
        body.to_string().as_bytes(),
    )
    .await
}

/// The answer to request `id` in a reply.
fn answer(r: &http::Reply, id: u64) -> Value {
    r.messages()
        .into_iter()
        .find(|m| m["id"] == id)
        .unwrap_or_else(|| panic!("no answer to {id}: {} {}", r.status, r.body))
}

fn text(answer: &Value) -> String {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> http::Reply {
    rt().block_on(http::request_to(addr, "GET", path, headers, b""))
}

// ------------------------------------------------------------ allow-host

#[test]
fn a_proxy_host_is_refused_without_allow_host_and_accepted_with_it() {
    let p = project("svc-host");
    let proxy = ("Host", "mcp.example.com");
    // Without --allow-host: a proxy's Host is refused (DNS rebinding rule).
    let s = serve(&p, &[]);
    let r = rt().block_on(http::post(
        s.addr,
        &[AUTH, ACCEPT, JSON, proxy],
        &init_body(),
    ));
    assert_eq!(r.status, 403, "{}", r.body);
    // Control: the loopback Host of the same server opens a session.
    rt().block_on(open_session(s.addr));
    drop(s);

    let s = serve(&p, &["--allow-host", "mcp.example.com"]);
    let r = rt().block_on(http::post(
        s.addr,
        &[AUTH, ACCEPT, JSON, proxy],
        &init_body(),
    ));
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.header("mcp-session-id").is_some());
    // Its origin too, on any port; another name and another origin stay refused.
    let origin = ("Origin", "https://mcp.example.com");
    let r = rt().block_on(http::post(
        s.addr,
        &[AUTH, ACCEPT, JSON, proxy, origin],
        &init_body(),
    ));
    assert_eq!(r.status, 200, "{}", r.body);
    let other = ("Host", "evil.example.com");
    let r = rt().block_on(http::post(
        s.addr,
        &[AUTH, ACCEPT, JSON, other],
        &init_body(),
    ));
    assert_eq!(r.status, 403, "{}", r.body);
    let evil = ("Origin", "https://evil.example.com");
    let r = rt().block_on(http::post(
        s.addr,
        &[AUTH, ACCEPT, JSON, proxy, evil],
        &init_body(),
    ));
    assert_eq!(r.status, 403, "{}", r.body);
    // --allow-host never waives the token.
    let r = rt().block_on(http::post(s.addr, &[ACCEPT, JSON, proxy], &init_body()));
    assert_eq!(r.status, 401, "{}", r.body);
    drop(s);

    // NAME:PORT: only that port.
    let s = serve(&p, &["--allow-host", "mcp.example.com:8443"]);
    let r = rt().block_on(http::post(
        s.addr,
        &[AUTH, ACCEPT, JSON, ("Host", "mcp.example.com:8443")],
        &init_body(),
    ));
    assert_eq!(r.status, 200, "{}", r.body);
    let r = rt().block_on(http::post(
        s.addr,
        &[AUTH, ACCEPT, JSON, ("Host", "mcp.example.com:9000")],
        &init_body(),
    ));
    assert_eq!(r.status, 403, "{}", r.body);
}

#[test]
fn a_bad_allow_host_is_refused_before_serving() {
    let p = project("svc-host-bad");
    for bad in ["*.example.com", "http://mcp.example.com", "user@mcp", ""] {
        let o = common::toolcage(&p, &["serve", "--http", "127.0.0.1:0", "--allow-host", bad]);
        assert_eq!(o.status.code(), Some(125), "{bad}: {o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("--allow-host"), "{bad}: {err}");
    }
}

// ------------------------------------------------------- unknown sessions

#[test]
fn a_session_this_replica_does_not_hold_gets_404() {
    let p = project("svc-404");
    let s = serve(&p, &[]);
    let sid = rt().block_on(open_session(s.addr));
    // Control: the real session id works.
    let r = rt().block_on(rpc(s.addr, &sid, 2, "tools/list", json!({})));
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(answer(&r, 2)["result"]["tools"].is_array(), "{}", r.body);
    // Another replica's session (or an ended one): 404, for POST, GET and DELETE.
    let other = "b7f3c0de-0000-4000-8000-000000000000";
    let r = rt().block_on(rpc(s.addr, other, 3, "tools/list", json!({})));
    assert_eq!(r.status, 404, "{}", r.body);
    assert!(r.body.contains("start a new session"), "{}", r.body);
    for method in ["GET", "DELETE"] {
        let r = rt().block_on(http::request(
            s.addr,
            method,
            &[AUTH, ACCEPT, VERSION, ("Mcp-Session-Id", other)],
            b"",
        ));
        assert_eq!(r.status, 404, "{method}: {}", r.body);
    }
    // A session ended by DELETE is unknown from then on.
    let r = rt().block_on(http::request(
        s.addr,
        "DELETE",
        &[AUTH, VERSION, ("Mcp-Session-Id", &sid)],
        b"",
    ));
    assert_eq!(r.status, 200, "{}", r.body);
    let r = rt().block_on(rpc(s.addr, &sid, 4, "tools/list", json!({})));
    assert_eq!(r.status, 404, "{}", r.body);
}

// ------------------------------------------------------ healthz / readyz

#[test]
fn probes_answer_without_a_token_while_mcp_requires_it() {
    let p = project("svc-probes");
    let s = serve(&p, &[]);
    let h = get(s.addr, "/healthz", &[]);
    assert_eq!((h.status, h.body.as_str()), (200, "ok\n"));
    let r = get(s.addr, "/readyz", &[]);
    assert_eq!((r.status, r.body.as_str()), (200, "ready\n"), "{}", s.log());
    // With a proxy's Host too (a kubelet probes the pod's IP).
    let h = get(s.addr, "/healthz", &[("Host", "10.1.2.3:8080")]);
    assert_eq!(h.status, 200);
    // Control: the MCP endpoint without a token is 401.
    let m = rt().block_on(http::post(s.addr, &[ACCEPT, JSON], &init_body()));
    assert_eq!(m.status, 401, "{}", m.body);
    // The probes take no other method and reveal no other path.
    let post = rt().block_on(http::request_to(s.addr, "POST", "/readyz", &[], b""));
    assert_eq!(post.status, 405);
    assert_eq!(get(s.addr, "/metrics", &[]).status, 401);
}

/// Serve under a container runtime's seccomp filter (no namespaces) with
/// `--profile NAME`.
fn serve_without_namespaces(p: &Project, profile: &str) -> Server {
    let (mut c, files) = command(p, &["--profile", profile]);
    common::without_namespaces(&mut c);
    start(p, c, files, false)
}

#[test]
fn readyz_is_503_with_the_reason_where_the_policy_cannot_be_enforced() {
    let p = project("svc-readyz");
    // `untrusted` refuses namespace-free mode (`doctor` says "refused"
    // under this filter): no namespaces here, so not ready, saying why.
    let s = serve_without_namespaces(&p, "untrusted");
    let r = get(s.addr, "/readyz", &[]);
    assert_eq!(r.status, 503, "{}", r.body);
    assert!(r.body.starts_with("not ready: "), "{}", r.body);
    assert!(r.body.contains("namespace_free = \"refuse\""), "{}", r.body);
    assert_eq!(r.body.lines().count(), 1, "{}", r.body);
    // Alive all the same, and a call is refused for the same reason.
    assert_eq!(get(s.addr, "/healthz", &[]).status, 200);
    let sid = rt().block_on(open_session(s.addr));
    let c = rt().block_on(rpc(
        s.addr,
        &sid,
        2,
        "tools/call",
        json!({"name": "noop", "arguments": {}}),
    ));
    let c = answer(&c, 2);
    assert_eq!(c["result"]["isError"], true, "{c}");
    assert!(text(&c).contains("namespace_free"), "{c}");
    drop(s);
    // Control: the same machine and filter under `default`, which accepts
    // namespace-free mode, is ready.
    let s = serve_without_namespaces(&p, "default");
    let r = get(s.addr, "/readyz", &[]);
    assert_eq!((r.status, r.body.as_str()), (200, "ready\n"), "{}", s.log());
}

/// `c` under a masked `/proc` (when `masked`), as in a pod whose runtime
/// covers parts of it: a user and mount namespace in which `/proc/uptime`
/// is covered, and `c` in a user and mount namespace below it, where those
/// mounts are locked. The kernel then refuses every fresh `/proc`, as it
/// does a call's. Control (`masked` false): the same namespaces, nothing
/// covered. `None` when `unshare` is missing.
fn under_masked_proc(c: &Command, masked: bool) -> Option<Command> {
    if Command::new("unshare").arg("--version").output().is_err() {
        eprintln!("masked /proc: SKIPPED: unshare (util-linux) is not installed");
        return None;
    }
    let cover = if masked {
        "mount --bind /dev/null /proc/uptime && "
    } else {
        ""
    };
    let mut w = Command::new("unshare");
    w.args(["--user", "--map-root-user", "--mount", "sh", "-c"])
        .arg(format!(
            "{cover}exec unshare --user --map-root-user --mount \"$@\""
        ))
        .arg("sh")
        .arg(c.get_program())
        .args(c.get_args())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null());
    for (k, v) in c.get_envs() {
        match v {
            Some(v) => w.env(k, v),
            None => w.env_remove(k),
        };
    }
    if let Some(d) = c.get_current_dir() {
        w.current_dir(d);
    }
    Some(w)
}

#[test]
fn readyz_is_503_with_the_reason_where_a_trial_call_fails_closed() {
    if common::namespace_free_run() {
        // Namespace-free calls mount no /proc: the condition does not apply.
        eprintln!("masked /proc: SKIPPED: calls run namespace-free here");
        return;
    }
    let p = project("svc-masked");
    let (c, files) = command(&p, &[]);
    let Some(w) = under_masked_proc(&c, true) else {
        return;
    };
    let s = start(&p, w, files, false);
    // Every call fails closed here (the sandbox cannot mount its /proc) ...
    let sid = rt().block_on(open_session(s.addr));
    let call = |id| {
        let r = rt().block_on(rpc(
            s.addr,
            &sid,
            id,
            "tools/call",
            json!({"name": "noop", "arguments": {}}),
        ));
        answer(&r, id)
    };
    let refused = call(2);
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert!(
        text(&refused).contains("mounting a fresh /proc"),
        "{refused}"
    );
    // ... and readyz says so, with the reason, in one line.
    let r = get(s.addr, "/readyz", &[]);
    assert_eq!(r.status, 503, "{}", r.body);
    assert!(r.body.starts_with("not ready: "), "{}", r.body);
    assert!(r.body.contains("mounting a fresh /proc"), "{}", r.body);
    assert_eq!(r.body.lines().count(), 1, "{}", r.body);
    assert_eq!(get(s.addr, "/healthz", &[]).status, 200);
    drop(s);
    // Control: the same namespaces with nothing of /proc covered: ready,
    // and a call runs.
    let (c, files) = command(&p, &[]);
    let s = start(&p, under_masked_proc(&c, false).unwrap(), files, false);
    let r = get(s.addr, "/readyz", &[]);
    assert_eq!((r.status, r.body.as_str()), (200, "ready\n"), "{}", s.log());
    let sid = rt().block_on(open_session(s.addr));
    let r = rt().block_on(rpc(
        s.addr,
        &sid,
        2,
        "tools/call",
        json!({"name": "noop", "arguments": {}}),
    ));
    assert_eq!(text(&answer(&r, 2)).trim(), "ok");
}

// ---------------------------------------------------------------- metrics

fn metrics(s: &Server) -> String {
    let r = get(s.metrics.expect("--metrics"), "/metrics", &[]);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        r.header("content-type")
            .is_some_and(|c| c.starts_with("text/plain; version=0.0.4")),
        "{:?}",
        r.headers
    );
    r.body
}

#[test]
fn metrics_count_calls_by_decision_and_bucket_unknown_tools() {
    let p = project("svc-metrics");
    let policy = p.dir.with_extension("rl.toml");
    std::fs::write(&policy, "[rate_limit]\nrequests = 1\nwindow = \"1h\"\n").unwrap();
    let mut s = serve(
        &p,
        &[
            "--metrics",
            "127.0.0.1:0",
            "--policy",
            policy.to_str().unwrap(),
        ],
    );
    s.files.push(policy);
    let before = metrics(&s);
    assert!(!before.contains("toolcage_calls_total{"), "{before}");
    assert!(before.contains("toolcage_sessions 0\n"), "{before}");
    assert!(
        before.contains("toolcage_store_errors_total 0\n"),
        "{before}"
    );

    let sid = rt().block_on(open_session(s.addr));
    let call = |id, name: &str| {
        let r = rt().block_on(rpc(
            s.addr,
            &sid,
            id,
            "tools/call",
            json!({"name": name, "arguments": {}}),
        ));
        answer(&r, id)
    };
    let first = call(2, "noop");
    assert_eq!(text(&first).trim(), "ok", "{first}");
    let second = call(3, "noop");
    assert_eq!(second["result"]["isError"], true, "{second}");
    assert!(text(&second).contains("rate limit"), "{second}");
    let unknown = call(4, "made-up-name\"\n");
    assert!(unknown["error"].is_object(), "{unknown}");

    let after = metrics(&s);
    for line in [
        "toolcage_calls_total{tool=\"noop\",decision=\"allowed\",outcome=\"ok\"} 1\n",
        "toolcage_calls_total{tool=\"noop\",decision=\"denied\",outcome=\"denied\"} 1\n",
        "toolcage_calls_total{tool=\"(unknown)\",decision=\"refused\",outcome=\"invalid\"} 1\n",
        "toolcage_denials_total{layer=\"rate_limit\"} 1\n",
        "toolcage_call_duration_seconds_count 1\n",
        "toolcage_call_duration_seconds_bucket{le=\"+Inf\"} 1\n",
        "toolcage_sessions 1\n",
        "toolcage_pending_calls 0\n",
    ] {
        assert!(after.contains(line), "missing {line:?} in:\n{after}");
    }
    assert!(!after.contains("made-up"), "{after}");
}

// ------------------------------------------------------ audit to stdout

#[test]
fn audit_to_stdout_is_json_lines_under_http_and_refused_for_stdio() {
    let p = project("svc-audit-stdout");
    let policy = p.dir.with_extension("audit.toml");
    std::fs::write(&policy, "[audit]\npath = \"-\"\n").unwrap();
    let policy_arg = policy.to_str().unwrap().to_string();

    // stdio: stdout is MCP's, refused with the reason before serving.
    let o = common::toolcage(&p, &["serve", "--no-watch", "--policy", &policy_arg]);
    assert_ne!(o.status.code(), Some(0), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("[audit] path = \"-\"") && err.contains("--http"),
        "{err}"
    );
    assert!(
        o.stdout.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&o.stdout)
    );

    // `toolcage call`: stdout is the result; the log cannot open there, so
    // the call fails closed, and nothing but the refusal is printed.
    let o = common::toolcage(&p, &["call", "--policy", &policy_arg, "noop"]);
    assert_eq!(o.status.code(), Some(125), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("only for `toolcage serve --http`"), "{err}");
    assert!(
        o.stdout.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&o.stdout)
    );

    // --http: the records are JSON lines on stdout.
    let out = p.dir.with_extension("stdout");
    let (mut c, mut files) = command(&p, &["--policy", &policy_arg]);
    c.stdout(std::fs::File::create(&out).unwrap());
    files.push(out.clone());
    files.push(policy);
    let mut s = start(&p, c, files, false);
    let sid = rt().block_on(open_session(s.addr));
    let r = rt().block_on(rpc(
        s.addr,
        &sid,
        2,
        "tools/call",
        json!({"name": "noop", "arguments": {}}),
    ));
    assert_eq!(text(&answer(&r, 2)).trim(), "ok");
    s.signal(nix::sys::signal::Signal::SIGTERM);
    s.wait();
    let lines = std::fs::read_to_string(&out).unwrap();
    let records: Vec<Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    assert!(
        records.iter().any(|r| r["tool"] == "noop"),
        "no record of noop on stdout: {lines}"
    );
    // Control: no audit.jsonl was written in the state directory.
    let found = walk(&p.state_dir())
        .into_iter()
        .any(|f| f.ends_with("audit.jsonl"));
    assert!(!found, "an audit.jsonl was written");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = e.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

// ----------------------------------------------------------------- drain

/// Start `slow` for `secs` in a session of `s` on another thread; return
/// once it has started, with the thread that brings back its answer.
fn slow_call(p: &Project, s: &Server, secs: &'static str) -> std::thread::JoinHandle<Value> {
    let addr = s.addr;
    let handle = std::thread::spawn(move || {
        let rt = rt();
        let sid = rt.block_on(open_session(addr));
        let r = rt.block_on(rpc(
            addr,
            &sid,
            2,
            "tools/call",
            json!({"name": "slow", "arguments": {"secs": secs}}),
        ));
        answer(&r, 2)
    });
    let started = p.path("started");
    let t = Instant::now();
    while !started.exists() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "slow never started: {}",
            s.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    handle
}

#[test]
fn drain_lets_a_running_call_finish_and_refuses_new_sessions() {
    let p = project("svc-drain");
    let mut s = serve(&p, &["--drain", "30s"]);
    let open = rt().block_on(open_session(s.addr));
    let running = slow_call(&p, &s, "2");
    s.signal(nix::sys::signal::Signal::SIGTERM);
    // Draining: not ready, and a new session gets 503 with Retry-After.
    let t = Instant::now();
    let r = loop {
        let r = get(s.addr, "/readyz", &[]);
        if r.status == 503 || t.elapsed() > Duration::from_secs(10) {
            break r;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(r.status, 503, "{}", r.body);
    assert!(r.body.contains("draining"), "{}", r.body);
    let n = rt().block_on(http::post(s.addr, &[AUTH, ACCEPT, JSON], &init_body()));
    assert_eq!(n.status, 503, "{}", n.body);
    assert!(n.header("retry-after").is_some(), "{:?}", n.headers);
    assert!(n.body.contains("draining"), "{}", n.body);
    // A new call in a session opened before is refused, saying why.
    let c = rt().block_on(rpc(
        s.addr,
        &open,
        2,
        "tools/call",
        json!({"name": "noop", "arguments": {}}),
    ));
    let c = answer(&c, 2);
    assert_eq!(c["result"]["isError"], true, "{c}");
    assert!(text(&c).contains("draining"), "{c}");
    // Alive while it drains.
    assert_eq!(get(s.addr, "/healthz", &[]).status, 200);
    // The running call finishes and its result is delivered; exit 0.
    let a = running.join().unwrap();
    assert_eq!(a["result"]["isError"], false, "{a}");
    assert_eq!(text(&a).trim(), "slept", "{a}");
    let status = s.wait();
    assert_eq!(status.code(), Some(0), "{status:?}: {}", s.log());
}

#[test]
fn without_drain_a_signal_cancels_the_running_call() {
    let p = project("svc-no-drain");
    let mut s = serve(&p, &[]);
    let running = slow_call(&p, &s, "2");
    s.signal(nix::sys::signal::Signal::SIGTERM);
    let status = s.wait();
    assert_eq!(status.code(), Some(128 + 15), "{status:?}: {}", s.log());
    assert!(status.signal().is_none());
    // The call did not finish: its answer (if the connection delivered
    // one) is not the tool's "slept".
    let a = std::thread::spawn(move || running.join());
    let outcome = a.join().unwrap();
    if let Ok(answer) = outcome {
        assert_ne!(text(&answer).trim(), "slept", "{answer}");
    }
}

#[test]
fn a_drain_that_runs_out_cancels_the_calls_still_running() {
    let p = project("svc-drain-out");
    let mut s = serve(&p, &["--drain", "1s"]);
    let running = slow_call(&p, &s, "30");
    s.signal(nix::sys::signal::Signal::SIGTERM);
    // Not all finished within the drain: cancelled and recorded as
    // without --drain, exit 128+15.
    let status = s.wait();
    assert_eq!(status.code(), Some(128 + 15), "{status:?}: {}", s.log());
    assert!(s.log().contains("the drain ran out"), "{}", s.log());
    if let Ok(answer) = std::thread::spawn(move || running.join()).join().unwrap() {
        assert_ne!(text(&answer).trim(), "slept", "{answer}");
    }
}

// ------------------------------------------------------ the shared store

/// Poll `/readyz` until its status is `want` (it is re-decided at most
/// every 5 s); the last reply.
fn readyz_until(s: &Server, want: u16) -> http::Reply {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let r = get(s.addr, "/readyz", &[]);
        if r.status == want || Instant::now() > until {
            return r;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Poll `/readyz` until its body is `want` or, unless `want` ends a line,
/// holds it; the last reply.
fn readyz_body_until(s: &Server, want: &str) -> http::Reply {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let r = get(s.addr, "/readyz", &[]);
        let hit = if want.ends_with('\n') {
            r.body == want
        } else {
            r.body.contains(want)
        };
        if hit || Instant::now() > until {
            return r;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_store_away_leaves_the_replica_ready_but_degraded_and_recovers() {
    let Some(mut redis) = store_support::start("store metrics") else {
        return;
    };
    let p = project("svc-store");
    let policy = p.dir.with_extension("store.toml");
    std::fs::write(&policy, "[rate_limit]\nrequests = 100\nwindow = \"1h\"\n").unwrap();
    let url = redis.url();
    let mut s = serve(
        &p,
        &[
            "--metrics",
            "127.0.0.1:0",
            "--store",
            &url,
            "--policy",
            policy.to_str().unwrap(),
        ],
    );
    s.files.push(policy);
    let r = readyz_until(&s, 200);
    assert_eq!((r.status, r.body.as_str()), (200, "ready\n"), "{}", s.log());
    let sid = rt().block_on(open_session(s.addr));
    let call = |id| {
        let r = rt().block_on(rpc(
            s.addr,
            &sid,
            id,
            "tools/call",
            json!({"name": "noop", "arguments": {}}),
        ));
        answer(&r, id)
    };
    assert_eq!(text(&call(2)).trim(), "ok");
    let m = metrics(&s);
    assert!(m.contains("toolcage_store_errors_total 0\n"), "{m}");
    assert!(m.contains("toolcage_store_up 1\n"), "{m}");
    redis.stop();
    // The limited call is refused, naming the store; the errors counted;
    // the store reported down.
    let refused = call(3);
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert!(
        text(&refused).contains(&format!("store {url} did not answer")),
        "{refused}"
    );
    let m = metrics(&s);
    assert!(!m.contains("toolcage_store_errors_total 0\n"), "{m}");
    assert!(
        m.contains("toolcage_denials_total{layer=\"gate\"} 1\n"),
        "{m}"
    );
    assert!(m.contains("toolcage_store_up 0\n"), "{m}");
    assert!(
        s.log().contains(&format!("store {url} degraded")),
        "{}",
        s.log()
    );
    // Still ready: every replica shares the store, and taking them all out
    // of the balancer would stop the calls that need no store too. The
    // body says what is degraded, in one line.
    let r = readyz_body_until(&s, "degraded");
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.starts_with("ready, degraded: "), "{}", r.body);
    assert!(r.body.contains(&format!("store {url}")), "{}", r.body);
    assert_eq!(r.body.lines().count(), 1, "{}", r.body);
    // Back: plainly ready again, and the same session's call runs.
    redis.restart();
    let r = readyz_body_until(&s, "ready\n");
    assert_eq!((r.status, r.body.as_str()), (200, "ready\n"));
    assert_eq!(text(&call(4)).trim(), "ok");
    assert!(metrics(&s).contains("toolcage_store_up 1\n"));
    assert!(
        s.log().contains(&format!("store {url} answers again")),
        "{}",
        s.log()
    );
}
