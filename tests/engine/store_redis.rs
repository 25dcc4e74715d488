//! `--store redis://…`: rate limits and upstream pins shared by processes
//! that do not share a state directory (replicas on separate machines),
//! through the binary, against a real `redis-server`; a store that goes
//! away refuses what needs it and recovery follows its return.

use crate::common;
use crate::common::{status as code, stderr as err};
use crate::gateway_support;
use crate::store_support;

use serde_json::{Value, json};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;
use toolcage::gate::persist::{RateCheck, RateRefusal};
use toolcage::gate::ratelimit::RateLimiter;
use toolcage::gate::store::redis::RedisStore;
use toolcage::policy::RateLimit;

const TOOLS_TOML: &str = r#"
[[tools]]
name = "limited"
description = "Limited to 4 calls a minute by the policy"
executor = "shell"
requires_approval = false
command = "echo limited"

[[tools]]
name = "free"
description = "No limit"
executor = "shell"
requires_approval = false
command = "echo free"
"#;

const POLICY: &str = "[tools.limited.rate_limit]\nrequests = 4\nwindow = \"60s\"\n";

/// A project with `limited` and `free`, and a policy file outside it.
struct Project {
    dir: tempfile::TempDir,
    outside: tempfile::TempDir,
}

impl Project {
    fn new(tag: &str) -> Project {
        // Under TOOLCAGE_TEST_NAMESPACE_FREE=1 the calls run namespace-free.
        common::namespace_free_if_asked();
        let dir = tempfile::Builder::new()
            .prefix(&format!("tc-store-{tag}-"))
            .tempdir()
            .unwrap();
        std::fs::write(dir.path().join("tools.toml"), TOOLS_TOML).unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("policy.toml"), POLICY).unwrap();
        Project { dir, outside }
    }

    /// A state directory of its own: a replica on another machine.
    fn replica(&self, name: &str) -> std::path::PathBuf {
        let p = self.outside.path().join(name);
        std::fs::create_dir_all(&p).unwrap();
        p
    }

    /// `toolcage call TOOL --policy … [extra]` with `state` as its state base.
    fn call(&self, state: &Path, tool: &str, extra: &[&str], env: &[(&str, &str)]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_toolcage"))
            .arg("-C")
            .arg(self.dir.path())
            .args(["call", tool, "--policy"])
            .arg(self.outside.path().join("policy.toml"))
            .args(extra)
            .current_dir(self.dir.path())
            .env("XDG_STATE_HOME", state)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// The audit records `state`'s replica wrote.
    fn records(&self, state: &Path) -> Vec<Value> {
        let out = Command::new(env!("CARGO_BIN_EXE_toolcage"))
            .arg("-C")
            .arg(self.dir.path())
            .args(["audit", "--json"])
            .env("XDG_STATE_HOME", state)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// Ten calls of `limited`, alternating between replicas `a` and `b`: how
/// many were admitted, and every refusal was the rate limit's.
fn ten_calls(p: &Project, a: &Path, b: &Path, extra: &[&str]) -> usize {
    let mut admitted = 0;
    for i in 0..10 {
        let state = if i % 2 == 0 { a } else { b };
        let o = p.call(state, "limited", extra, &[]);
        match code(&o) {
            0 => admitted += 1,
            3 => assert!(err(&o).contains("rate limit"), "{}", err(&o)),
            c => panic!("call {i}: exit {c}: {}", err(&o)),
        }
    }
    admitted
}

#[test]
fn a_rate_limit_counts_the_calls_of_every_replica_sharing_the_store() {
    let Some(redis) = store_support::start("shared rate limit") else {
        return;
    };
    let p = Project::new("rate");
    let url = redis.url();
    let (a, b) = (p.replica("a"), p.replica("b"));
    // 4 per minute across both replicas: exactly 4 of 10.
    assert_eq!(ten_calls(&p, &a, &b, &["--store", &url]), 4);
    // Each replica recorded its own calls, denials with the limit's reason.
    let reasons: Vec<Value> = p
        .records(&a)
        .into_iter()
        .chain(p.records(&b))
        .filter(|r| r["decision"]["kind"] == "denied")
        .map(|r| r["decision"]["reason"].clone())
        .collect();
    assert_eq!(reasons, vec![json!("rate_limited"); 6]);
    // Control: without the store each replica counts alone, 4 each.
    let (c, d) = (p.replica("c"), p.replica("d"));
    assert_eq!(ten_calls(&p, &c, &d, &[]), 8);
}

#[test]
fn a_store_that_goes_away_refuses_limited_calls_until_it_is_back() {
    let Some(mut redis) = store_support::start("store away") else {
        return;
    };
    let p = Project::new("away");
    let url = redis.url();
    let a = p.replica("a");
    let store = ["--store", url.as_str()];
    assert_eq!(code(&p.call(&a, "limited", &store, &[])), 0);
    redis.stop();
    // Limited: it cannot be counted, so it is refused (125), naming the
    // store and the error, and recorded as such.
    let o = p.call(&a, "limited", &store, &[]);
    assert_eq!(code(&o), 125, "{}", err(&o));
    let e = err(&o);
    assert!(e.contains(&format!("store {url} did not answer")), "{e}");
    let last = p.records(&a).pop().unwrap();
    assert_eq!(last["tool"], "limited", "{last}");
    assert_eq!(last["decision"]["reason"], "gate_unavailable", "{last}");
    // Control: a tool without a limit needs no store and runs.
    let o = p.call(&a, "free", &store, &[]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "free\n");
    // Back: the next call reconnects, nothing to do by hand.
    redis.restart();
    let o = p.call(&a, "limited", &store, &[]);
    assert_eq!(code(&o), 0, "{}", err(&o));
}

#[test]
fn a_store_password_comes_from_the_variable_named_never_the_url() {
    let Some(redis) = store_support::start_with("store password", Some("s3cret-pw")) else {
        return;
    };
    let p = Project::new("auth");
    let a = p.replica("a");
    let url = redis.url();
    let with_env = [
        "--store",
        url.as_str(),
        "--store-password-env",
        "TC_STORE_PW",
    ];
    let o = p.call(&a, "limited", &with_env, &[("TC_STORE_PW", "s3cret-pw")]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    // From a file (its trailing newline is not part of it).
    let file = p.outside.path().join("pw");
    std::fs::write(&file, "s3cret-pw\n").unwrap();
    let f = file.to_str().unwrap();
    let with_file = ["--store", url.as_str(), "--store-password-file", f];
    assert_eq!(code(&p.call(&a, "limited", &with_file, &[])), 0);
    // Without it the store refuses us: the limited call is refused.
    let o = p.call(&a, "limited", &["--store", &url], &[]);
    assert_eq!(code(&o), 125, "{}", err(&o));
    assert!(err(&o).contains("did not answer"), "{}", err(&o));
    // A wrong one too, and it is never shown.
    let o = p.call(&a, "limited", &with_env, &[("TC_STORE_PW", "wrong-pw")]);
    assert_eq!(code(&o), 125, "{}", err(&o));
    assert!(!err(&o).contains("wrong-pw"), "{}", err(&o));
    // A password in the URL is refused before anything runs, not shown.
    let bad = format!("redis://:s3cret-pw@127.0.0.1:{}/0", redis.port);
    let o = p.call(&a, "free", &["--store", &bad], &[]);
    assert_eq!(code(&o), 125, "{}", err(&o));
    assert!(err(&o).contains("--store-password-file"), "{}", err(&o));
    assert!(!err(&o).contains("s3cret-pw"), "{}", err(&o));
}

/// `toolcage serve` of the gateway fixture with `state` as its state base.
fn serve(f: &gateway_support::Fixture, state: &Path, store: &[&str]) -> gateway_support::Serve {
    let mut c = f.toolcage(&["serve", "--no-watch"]);
    c.arg("--policy")
        .arg(f.policy())
        .args(store)
        .env("XDG_STATE_HOME", state);
    gateway_support::Serve::spawn(c, None)
}

/// `toolcage ARGS --policy …` of the fixture with `state` as its state base.
fn run(f: &gateway_support::Fixture, state: &Path, args: &[&str]) -> (i32, String, String) {
    let mut c = f.toolcage(args);
    c.arg("--policy")
        .arg(f.policy())
        .env("XDG_STATE_HOME", state);
    let o = c.output().unwrap();
    (
        code(&o),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        err(&o),
    )
}

#[test]
fn an_approval_in_the_store_is_honoured_by_a_replica_with_another_state_dir() {
    let Some(mut redis) = store_support::start("shared pins") else {
        return;
    };
    // Upstream servers run under `untrusted`, which refuses namespace-free
    // mode: this test runs in the normal mode whatever is asked (as the
    // gateway's tests do).
    let f = gateway_support::Fixture::new("store-pins", json!({"ECHO_DESC": "Echo v1"}), "");
    let url = redis.url();
    let store = ["--store", url.as_str()];
    let states = tempfile::tempdir().unwrap();
    let replica = |n: &str| {
        let p = states.path().join(n);
        std::fs::create_dir_all(&p).unwrap();
        p
    };
    let (a, b, c) = (replica("a"), replica("b"), replica("c"));
    // Replica a pins echo as v1 in the store.
    let (code, out, e) = run(&f, &a, &["list", "--store", &url]);
    assert_eq!(code, 0, "{e}");
    assert!(out.contains("fx__echo"), "{out}");
    // The server changes echo. Replica b has never seen it, but the store
    // has: held back there too.
    f.set_env(json!({"ECHO_DESC": "Echo v2, and mail it to someone"}));
    let mut s = serve(&f, &b, &store);
    let tools = s.tools();
    assert!(!tools.contains(&"fx__echo".to_string()), "{tools:?}");
    assert!(tools.contains(&"fx__counter".to_string()), "{tools:?}");
    let (is_error, text) = s.call_text("fx__echo", json!({"text": "x"}));
    assert!(
        is_error && text.contains("changed since it was approved"),
        "{text}"
    );
    s.finish();
    // Control: a replica without the store pins what it sees first.
    let mut s = serve(&f, &c, &[]);
    assert!(s.tools().contains(&"fx__echo".to_string()));
    s.finish();
    // The operator approves on replica a, in the store.
    let (code, out, e) = run(&f, &a, &["upstreams", "show", "fx__echo", "--store", &url]);
    assert_eq!(code, 0, "{e}");
    let digest = out
        .lines()
        .find(|l| l.contains("--digest "))
        .and_then(|l| l.rsplit(' ').next())
        .unwrap_or_else(|| panic!("no digest in {out}"))
        .to_string();
    let approve = ["upstreams", "approve", "fx__echo", "--digest", &digest];
    let (code, out, e) = run(&f, &a, &[&approve[..], &store[..]].concat());
    assert_eq!(code, 0, "{e}");
    assert!(out.contains("pinned fx__echo"), "{out}");
    // Replica b serves it now, as approved.
    let mut s = serve(&f, &b, &store);
    assert!(s.tools().contains(&"fx__echo".to_string()));
    let (is_error, text) = s.call_text("fx__echo", json!({"text": "x"}));
    assert!(!is_error, "{text}");
    assert_eq!(text.trim(), "x");
    s.finish();
    // Nothing of it went to b's state directory: the pins are in the store.
    assert!(!holds(&b, "pins.json"), "{}", b.display());
    // The store away: the pins cannot be read, so no upstream tool runs
    // (125, recorded as gate_unavailable) ...
    redis.stop();
    let call = ["call", "fx__echo", "text=x", "--store", url.as_str()];
    let (code, _, e) = run(&f, &b, &call);
    assert_eq!(code, 125, "{e}");
    assert!(e.contains(&format!("store {url} did not answer")), "{e}");
    // ... while a local tool's call needs no store (control).
    f.write("tools.toml", "[[tools]]\nname = \"hello\"\ndescription = \"hi\"\nexecutor = \"shell\"\nrequires_approval = false\ncommand = \"echo hello\"\n");
    let (code, out, e) = run(&f, &b, &["call", "hello", "--store", &url]);
    assert_eq!((code, out.as_str()), (0, "hello\n"), "{e}");
    // A session that starts while the store is away offers no upstream
    // tool and refuses their calls ...
    let mut s = serve(&f, &b, &store);
    let (is_error, text) = s.call_text("fx__echo", json!({"text": "x"}));
    assert!(is_error && text.contains("did not answer"), "{text}");
    // ... and, the store back (empty: pinned anew as the server reports it
    // now), the same session serves them: no restart, no new session.
    redis.restart();
    let (is_error, text) = s.call_text("fx__echo", json!({"text": "x"}));
    assert!(!is_error, "{text}");
    assert_eq!(text.trim(), "x");
    s.finish();
    let (code, out, e) = run(&f, &b, &call);
    assert_eq!((code, out.as_str()), (0, "x\n"), "{e}");
}

/// Whether a file named `name` is anywhere beneath `dir`.
fn holds(dir: &Path, name: &str) -> bool {
    std::fs::read_dir(dir).unwrap().flatten().any(|e| {
        let p = e.path();
        e.file_name() == name || (p.is_dir() && holds(&p, name))
    })
}

#[test]
fn redis_windows_are_the_file_stores_windows() {
    let Some(redis) = store_support::start("redis windows") else {
        return;
    };
    let store = RedisStore::new(&redis.url(), None)
        .unwrap()
        .with_caller_clock();
    let memory = RateLimiter::default();
    let limits = [
        (
            "tool:cmp".to_string(),
            RateLimit {
                requests: 3,
                window: Duration::from_secs(10),
            },
        ),
        (
            "global-cmp".to_string(),
            RateLimit {
                requests: 5,
                window: Duration::from_secs(30),
            },
        ),
    ];
    // The same calls at the same times, some at once, some seconds apart:
    // each store admits and refuses alike, with the same wait.
    let mut now = Duration::from_secs(1_000_000);
    let mut seed: u64 = 7;
    let mut refused = 0;
    for i in 0..200 {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        now += Duration::from_millis((seed >> 33) % 4000);
        let only_tool = &limits[..1 + (i % 2)];
        let r = store.check(only_tool, now);
        let m = memory.check(only_tool, now);
        assert_eq!(r, m, "call {i} at {now:?}");
        refused += usize::from(matches!(r, Err(RateRefusal::Limited(_))));
    }
    // Both ways were exercised.
    assert!(refused > 20 && refused < 180, "{refused}");
}

#[test]
fn a_store_in_the_operators_policy_file_is_used_and_one_in_the_project_refused() {
    let Some(redis) = store_support::start("store in policy") else {
        return;
    };
    let p = Project::new("policy-key");
    let text = format!("{POLICY}\n[store]\nurl = \"{}\"\n", redis.url());
    std::fs::write(p.outside.path().join("policy.toml"), &text).unwrap();
    let (a, b) = (p.replica("a"), p.replica("b"));
    assert_eq!(ten_calls(&p, &a, &b, &[]), 4);
    // The same file inside the project: a call could point the limits at
    // a store of its own. Refused before anything runs.
    let inside = p.dir.path().join("policy.toml");
    std::fs::write(&inside, &text).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_toolcage"))
        .arg("-C")
        .arg(p.dir.path())
        .args(["call", "free", "--policy"])
        .arg(&inside)
        .env("XDG_STATE_HOME", &a)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(code(&o), 125, "{}", err(&o));
    assert!(err(&o).contains("store.url"), "{}", err(&o));
    assert!(
        err(&o).contains("only a --policy file outside"),
        "{}",
        err(&o)
    );
    // Control: the same file outside the project is taken.
    let o = p.call(&a, "free", &[], &[]);
    assert_eq!(code(&o), 0, "{}", err(&o));
}

/// `openssl ARGS` in `dir`.
fn openssl(dir: &Path, args: &[&str]) {
    let o = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl");
    assert!(o.status.success(), "openssl {args:?}: {}", err(&o));
}

#[test]
fn rediss_checks_the_servers_certificate() {
    if store_support::binary().is_none() {
        eprintln!("rediss: SKIPPED: redis-server is not installed");
        return;
    }
    if Command::new("openssl").arg("version").output().is_err() {
        eprintln!("rediss: SKIPPED: openssl is not installed (it makes the test's certificates)");
        return;
    }
    // A CA of the test's own, and a certificate it signed for localhost.
    let certs = tempfile::tempdir().unwrap();
    let d = certs.path();
    openssl(
        d,
        &[
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
        ]
        .iter()
        .chain(&[
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=toolcage-test-ca",
        ])
        .copied()
        .collect::<Vec<_>>(),
    );
    openssl(
        d,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "leaf.key",
            "-out",
            "leaf.csr",
            "-subj",
            "/CN=localhost",
        ],
    );
    std::fs::write(d.join("ext.cnf"), "subjectAltName=DNS:localhost\n").unwrap();
    openssl(
        d,
        &[
            "x509",
            "-req",
            "-in",
            "leaf.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "leaf.pem",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ],
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = Command::new(store_support::binary().unwrap())
        .args([
            "--port",
            "0",
            "--tls-port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .args([
            "--tls-auth-clients",
            "no",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .arg("--tls-cert-file")
        .arg(d.join("leaf.pem"))
        .arg("--tls-key-file")
        .arg(d.join("leaf.key"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < until,
            "redis-server with TLS did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let p = Project::new("tls");
    let a = p.replica("a");
    let url = format!("rediss://localhost:{port}/0");
    // Its CA trusted (rustls-native-certs reads SSL_CERT_FILE): counted.
    let ca = d.join("ca.pem");
    let trusted = [("SSL_CERT_FILE", ca.to_str().unwrap())];
    let o = p.call(&a, "limited", &["--store", &url], &trusted);
    assert_eq!(code(&o), 0, "{}", err(&o));
    // Control: a certificate no trusted CA signed is refused.
    let o = p.call(&a, "limited", &["--store", &url], &[]);
    assert_eq!(code(&o), 125, "{}", err(&o));
    assert!(err(&o).contains("certificate"), "{}", err(&o));
    let _ = server.kill();
    let _ = server.wait();
}

#[test]
fn two_projects_on_one_store_share_no_limit_and_replicas_of_one_project_do() {
    let Some(redis) = store_support::start("store namespaces") else {
        return;
    };
    let url = redis.url();
    let store = ["--store", url.as_str()];
    let (p, q) = (Project::new("ns-p"), Project::new("ns-q"));
    // Two replicas of project p share its limit: 4 of 10 (control).
    let (a, b) = (p.replica("a"), p.replica("b"));
    assert_eq!(ten_calls(&p, &a, &b, &store), 4);
    // Project q, the same tool name and limit key, the same Redis: p's
    // calls are not q's. Its own 4 are admitted, then its own limit binds.
    let (c, d) = (q.replica("c"), q.replica("d"));
    assert_eq!(ten_calls(&q, &c, &d, &store), 4);
    // The keys say whose they are.
    let keys = store_support::keys(&redis);
    let spaces: std::collections::BTreeSet<&str> = keys
        .iter()
        .filter_map(|k| k.strip_prefix("toolcage:")?.split(':').next())
        .collect();
    assert_eq!(spaces.len(), 2, "{keys:?}");
    assert!(keys.iter().all(|k| k.starts_with("toolcage:")), "{keys:?}");
    // One namespace named for both (a deployment serving the project from
    // two paths): they share it, from the flag or the operator's policy.
    let (e, g) = (p.replica("e"), q.replica("g"));
    let named = ["--store", url.as_str(), "--store-prefix", "team-a"];
    for _ in 0..4 {
        assert_eq!(code(&p.call(&e, "limited", &named, &[])), 0);
    }
    let o = q.call(&g, "limited", &named, &[]);
    assert_eq!(code(&o), 3, "{}", err(&o));
    assert!(err(&o).contains("rate limit"), "{}", err(&o));
    let policy = format!("{POLICY}\n[store]\nurl = \"{url}\"\nprefix = \"team-a\"\n");
    std::fs::write(q.outside.path().join("policy.toml"), policy).unwrap();
    let o = q.call(&g, "limited", &[], &[]);
    assert_eq!(code(&o), 3, "{}", err(&o));
    assert!(keys_of(&redis, "team-a") > 0);
    // A name that could reach into another namespace is refused before
    // anything runs.
    for bad in ["team:a", "team*", ""] {
        let o = p.call(&e, "free", &["--store", &url, "--store-prefix", bad], &[]);
        assert_eq!(code(&o), 125, "{bad}: {}", err(&o));
        assert!(err(&o).contains("not a namespace name"), "{}", err(&o));
    }
}

/// How many keys namespace `name` holds.
fn keys_of(redis: &store_support::Redis, name: &str) -> usize {
    let start = format!("toolcage:{name}:");
    store_support::keys(redis)
        .iter()
        .filter(|k| k.starts_with(&start))
        .count()
}

#[test]
fn a_pin_of_one_project_does_not_hold_back_another_projects_tool() {
    let Some(redis) = store_support::start("store namespaces pins") else {
        return;
    };
    let url = redis.url();
    let store = ["--store", url.as_str()];
    let states = tempfile::tempdir().unwrap();
    let replica = |n: &str| {
        let p = states.path().join(n);
        std::fs::create_dir_all(&p).unwrap();
        p
    };
    // Project one pins fx__echo as v1 in the store.
    let one = gateway_support::Fixture::new("ns-one", json!({"ECHO_DESC": "Echo v1"}), "");
    let (code, out, e) = run(&one, &replica("a"), &["list", "--store", &url]);
    assert_eq!(code, 0, "{e}");
    assert!(out.contains("fx__echo"), "{out}");
    // Project two's server describes its echo otherwise. Its first sight
    // pins it: project one's approval is not its own, so nothing is held.
    let two = gateway_support::Fixture::new("ns-two", json!({"ECHO_DESC": "Echo v2"}), "");
    let mut s = serve(&two, &replica("c"), &store);
    assert!(s.tools().contains(&"fx__echo".to_string()));
    let (is_error, text) = s.call_text("fx__echo", json!({"text": "x"}));
    assert!(!is_error, "{text}");
    s.finish();
    // Control: a replica of project one that sees the same change holds it
    // back, by project one's pin from the other replica.
    one.set_env(json!({"ECHO_DESC": "Echo v2"}));
    let mut s = serve(&one, &replica("b"), &store);
    assert!(!s.tools().contains(&"fx__echo".to_string()));
    let (is_error, text) = s.call_text("fx__echo", json!({"text": "x"}));
    assert!(
        is_error && text.contains("changed since it was approved"),
        "{text}"
    );
    s.finish();
    // Two pins documents, one per project.
    let pins: Vec<String> = store_support::keys(&redis)
        .into_iter()
        .filter(|k| k.ends_with(":doc:pins"))
        .collect();
    assert_eq!(pins.len(), 2, "{pins:?}");
}
