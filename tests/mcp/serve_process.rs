//! `toolcage serve` as a process: stdout carries only MCP (every line is a
//! JSON-RPC message), logs go to stderr, and the server exits 0 when stdin
//! closes; a bad `--http` address or a zero limit is a usage failure;
//! `--no-watch` serves the tools found at start; every result, a refused
//! call's too, carries the enforcement report and the denials.

use crate::common;
use crate::stdio_client;

use common::Project;
use serde_json::Value;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn stdio_serve_writes_only_mcp_to_stdout_and_exits_on_eof() {
    let p = Project::new("mcp-cli");
    let tool = p.write(
        ".agents/tools/hi",
        "#!/bin/sh\n# @description Say hi.\necho hi\n",
    );
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    // The audit log and state go here, not into the user's state dir.
    let state = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolcage"))
        .arg("-C")
        .arg(&p.dir)
        .args(["--log", "debug", "serve"])
        .env("XDG_STATE_HOME", state.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = concat!(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#,
        "\n",
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        "\n",
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hi","arguments":{}}}"#,
        "\n",
        "this is not json\n",
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#,
        "\n",
    );
    stdin.write_all(input.as_bytes()).unwrap();
    // Give the call time to answer before EOF (EOF ends the session).
    let t = Instant::now();
    std::thread::sleep(Duration::from_millis(1500));
    drop(stdin);
    let out = loop {
        if child.try_wait().unwrap().is_some() {
            break child.wait_with_output().unwrap();
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "serve did not exit on EOF"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let msgs: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("non-MCP on stdout ({e}): {l}")))
        .collect();
    assert!(msgs.iter().any(|m| m["id"] == 1 && m["result"].is_object()));
    let call = msgs.iter().find(|m| m["id"] == 2).expect("call answered");
    assert_eq!(call["result"]["content"][0]["text"], "hi\n", "{call}");
    assert!(
        msgs.iter()
            .any(|m| m["id"] == 3 && m["result"]["tools"].is_array())
    );
    // Logs went to stderr.
    assert!(!String::from_utf8_lossy(&out.stderr).is_empty());
}

#[test]
fn a_client_that_closes_before_initializing_ends_serve_cleanly() {
    let p = Project::new("mcp-cli-eof");
    let run = |input: &'static [u8]| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_toolcage"))
            .arg("-C")
            .arg(&p.dir)
            .arg("serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(input).unwrap();
        child.wait_with_output().unwrap()
    };
    let out = run(b"");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    // A request before initializing is answered (an error), then EOF ends
    // the session the same way.
    let out = run(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}\n");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("\"error\""),
        "{out:?}"
    );
}

#[test]
fn a_bad_http_address_is_refused() {
    let p = Project::new("mcp-cli-addr");
    let out = Command::new(env!("CARGO_BIN_EXE_toolcage"))
        .arg("-C")
        .arg(&p.dir)
        .args(["serve", "--http", "not an address"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--http"),
        "{out:?}"
    );
}

/// `serve` with stderr into a file: one start-up line for many tool file
/// problems (pointing at `toolcage check`), no escape byte, and with
/// `--quiet` nothing. Control: `--log debug` prints each problem (a file
/// name holding an escape sequence among them), still without one.
#[test]
fn serve_start_is_short_and_has_no_escape_bytes_in_a_file() {
    let p = Project::new("mcp-cli-start");
    let state = tempfile::tempdir().unwrap();
    for i in 0..14 {
        // Not executable: each is skipped with a diagnostic.
        p.write(
            &format!(".agents/tools/tool{i}"),
            "#!/bin/sh\n# @description x\n",
        );
    }
    p.write(
        ".agents/tools/red\u{1b}[31mname",
        "#!/bin/sh\n# @description x\n",
    );
    let logs = tempfile::tempdir().unwrap();
    let serve = |args: &[&str], log: &str| -> Vec<u8> {
        let path = logs.path().join(log);
        let mut child = Command::new(env!("CARGO_BIN_EXE_toolcage"))
            .arg("-C")
            .arg(&p.dir)
            .args(args)
            .arg("serve")
            .env("XDG_STATE_HOME", state.path())
            .env("NO_COLOR", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&path).unwrap())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let input = concat!(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
            "\n",
        );
        stdin.write_all(input.as_bytes()).unwrap();
        std::thread::sleep(Duration::from_millis(500));
        drop(stdin);
        assert!(child.wait().unwrap().success());
        std::fs::read(&path).unwrap()
    };
    let lines = |b: &[u8]| String::from_utf8_lossy(b).lines().count();

    let start = serve(&[], "default.log");
    let text = String::from_utf8_lossy(&start);
    assert!(!start.contains(&0x1b), "{text:?}");
    assert_eq!(lines(&start), 1, "{text}");
    assert!(
        text.contains("15 error(s)") && text.contains("`toolcage check` explains each"),
        "{text}"
    );
    let quiet = serve(&["--quiet"], "quiet.log");
    assert_eq!(String::from_utf8_lossy(&quiet), "");
    // Control: every problem is there to be folded, and an escape sequence
    // in a file name stays neutralised.
    let debug = serve(&["--log", "debug"], "debug.log");
    let text = String::from_utf8_lossy(&debug);
    assert!(lines(&debug) > 15, "{text}");
    assert!(text.contains("tool13: not executable"), "{text}");
    assert!(!debug.contains(&0x1b), "{text:?}");
}

fn serve_cmd(p: &Project, state: &std::path::Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_toolcage"));
    c.arg("-C")
        .arg(&p.dir)
        .arg("serve")
        .args(args)
        .env("XDG_STATE_HOME", state);
    c
}

fn executable(p: &Project, rel: &str, text: &str) {
    let f = p.write(rel, text);
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn zero_limits_are_refused_naming_the_flag() {
    let p = Project::new("mcp-cli-zero");
    let state = tempfile::tempdir().unwrap();
    let cases: [&[&str]; 7] = [
        &["--max-message-bytes", "0"],
        &["--page-size", "0"],
        &["--max-concurrent", "0"],
        &["--max-sessions", "0"],
        &["--max-pending-per-session", "0"],
        &["--max-pending", "0"],
        &["--http", "127.0.0.1:0", "--max-connections", "0"],
    ];
    for args in cases {
        let flag = args[args.len() - 2];
        let out = serve_cmd(&p, state.path(), args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        // As a bad --http address or size is: 125, one line, the flag and the fix.
        assert_eq!(out.status.code(), Some(125), "{flag}: {err}");
        assert_eq!(err.lines().count(), 1, "{flag}: {err}");
        assert!(err.contains(&format!("{flag} 0")), "{flag}: {err}");
        assert!(err.contains("at least 1") && err.contains("fix:"), "{err}");
        assert!(out.stdout.is_empty(), "{flag}");
    }
    // A bad size names its flag too.
    let out = serve_cmd(&p, state.path(), &["--max-message-bytes", "abc"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(err.contains("--max-message-bytes"), "{err}");
    // Control: the smallest accepted values serve (one tool per page, one call at once).
    executable(
        &p,
        ".agents/tools/a",
        "#!/bin/sh\n# @description A.\necho a\n",
    );
    executable(
        &p,
        ".agents/tools/b",
        "#!/bin/sh\n# @description B.\necho b\n",
    );
    let mut s = stdio_client::Serve::spawn(
        serve_cmd(
            &p,
            state.path(),
            &[
                "--no-watch",
                "--page-size",
                "1",
                "--max-concurrent",
                "1",
                "--max-message-bytes",
                "4KiB",
            ],
        ),
        None,
    );
    let page = s.request("tools/list", serde_json::json!({}));
    assert_eq!(
        page["result"]["tools"].as_array().unwrap().len(),
        1,
        "{page}"
    );
    assert_eq!(page["result"]["nextCursor"], "n:a", "{page}");
    assert_eq!(
        s.call_text("b", serde_json::json!({})),
        (false, "b\n".into())
    );
    assert_eq!(s.finish(), 0);
}

#[test]
fn no_watch_serves_the_tools_found_at_start_and_a_removed_one_is_an_honest_error() {
    let p = Project::new("mcp-cli-nowatch");
    let state = tempfile::tempdir().unwrap();
    executable(
        &p,
        ".agents/tools/hi",
        "#!/bin/sh\n# @description Hi.\necho hi\n",
    );
    executable(
        &p,
        ".agents/tools/bye",
        "#!/bin/sh\n# @description Bye.\necho bye\n",
    );
    // Initialized: the tools are discovered before anything below changes.
    let mut s = stdio_client::Serve::spawn(serve_cmd(&p, state.path(), &["--no-watch"]), None);
    assert_eq!(s.tools(), ["bye", "hi"]);
    executable(
        &p,
        ".agents/tools/late",
        "#!/bin/sh\n# @description Late.\necho late\n",
    );
    std::fs::remove_file(p.path(".agents/tools/bye")).unwrap();
    // Longer than the reload debounce: nothing is picked up, nothing announced.
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(s.tools(), ["bye", "hi"]);
    assert_eq!(s.list_changed(), 0);
    let late = s.request(
        "tools/call",
        serde_json::json!({"name": "late", "arguments": {}}),
    );
    assert_eq!(late["error"]["code"], -32602, "{late}");
    // The removed tool: an unknown tool now (a JSON-RPC error, as for a name
    // never listed), saying what happened and what to do; not a policy failure.
    let bye = s.request(
        "tools/call",
        serde_json::json!({"name": "bye", "arguments": {}}),
    );
    assert_eq!(bye["error"]["code"], -32602, "{bye}");
    let msg = bye["error"]["message"].as_str().unwrap();
    assert!(msg.contains("'bye' was removed"), "{msg}");
    assert!(msg.contains(".agents/tools/bye"), "{msg}");
    assert!(
        msg.contains("--no-watch") && msg.contains("restart"),
        "{msg}"
    );
    assert!(!msg.contains("policy"), "{msg}");
    // Control: the tool still there runs.
    assert_eq!(
        s.call_text("hi", serde_json::json!({})),
        (false, "hi\n".into())
    );
    assert_eq!(s.finish(), 0);
    // Recorded as an unknown tool.
    let o = common::toolcage_env(
        &p,
        &[("XDG_STATE_HOME", state.path().to_str().unwrap())],
        &["audit", "--json"],
    );
    let text = String::from_utf8_lossy(&o.stdout);
    let bye: Value = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|r| r["tool"] == "bye")
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(bye["decision"]["reason"], "unknown_tool", "{bye}");
}

#[test]
fn refused_and_invalid_calls_carry_enforcement_and_denials_in_meta() {
    let p = Project::new("mcp-cli-meta");
    let state = tempfile::tempdir().unwrap();
    p.write(
        "tools.toml",
        r#"
[[tools]]
name = "health"
description = "An http tool; the default grant has no network"
executor = "http"
requires_approval = false
method = "GET"
url = "https://example.com/"

[[tools]]
name = "ask"
description = "Asks for approval; this client cannot answer"
executor = "shell"
command = "echo asked"

[[tools]]
name = "echo"
description = "Echo"
executor = "shell"
requires_approval = false
command = "echo {{text}}"

[[tools.params]]
name = "text"
type = "string"
required = true
"#,
    );
    let mut s = stdio_client::Serve::spawn(serve_cmd(&p, state.path(), &["--no-watch"]), None);
    // Control: a call that ran carries what was enforced.
    let ok = s.call("echo", serde_json::json!({"text": "x"}));
    assert_eq!(ok["isError"], false, "{ok}");
    assert_ne!(
        ok["_meta"]["toolcage/enforcement"]["mode"], "not-run",
        "{ok}"
    );
    assert_eq!(
        ok["_meta"]["toolcage/denials"],
        serde_json::json!([]),
        "{ok}"
    );
    let cases = [
        ("health", serde_json::json!({}), "denied"),
        ("ask", serde_json::json!({}), "denied"),
        ("echo", serde_json::json!({}), "invalid_arguments"),
    ];
    for (name, args, error) in cases {
        let r = s.call(name, args);
        assert_eq!(r["isError"], true, "{r}");
        let meta = &r["_meta"];
        assert_eq!(meta["toolcage/error"], error, "{r}");
        let e = &meta["toolcage/enforcement"];
        assert_eq!(e["mode"], "not-run", "{r}");
        assert!(
            e["note"].as_str().unwrap().starts_with("nothing ran"),
            "{r}"
        );
        let denials = meta["toolcage/denials"]
            .as_array()
            .unwrap_or_else(|| panic!("{r}"));
        if error == "denied" {
            // What was refused, by which layer and rule.
            assert_eq!(denials.len(), 1, "{r}");
            assert_eq!(denials[0]["target"], name, "{r}");
            assert_eq!(denials[0]["rule"], meta["toolcage/denial"], "{r}");
            assert!(denials[0]["reason"].as_str().unwrap().len() > 10, "{r}");
        } else {
            assert!(denials.is_empty(), "{r}");
        }
    }
    assert_eq!(s.finish(), 0);
}
