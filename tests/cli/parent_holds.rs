//! toolcage's own process against a hostile project and a hostile MCP
//! client, through the binary: text output cannot drive the operator's
//! terminal, discovery does not follow links out of the tool directories,
//! audit records stay small, every CLI call and every server share one
//! rate-limit state, and `check` / `--yes` do not set traps.
//! (Approval on a real terminal is in `gate.rs`.)

use crate::common;
use crate::common::{status as code, stderr as err, stdout as out};

use common::{Project, toolcage};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

fn exe(p: &Project, rel: &str, body: &str) -> PathBuf {
    let path = p.write(rel, body);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// No raw control character (but newlines): JSON output, where bidi
/// controls are ordinary string content.
fn assert_no_controls(text: &str) {
    let bad = text.chars().find(|&c| c.is_control() && c != '\n');
    assert_eq!(bad, None, "raw control character in {text:?}");
}

/// No raw control character (but newlines) and no bidi control.
fn assert_inert(text: &str) {
    let bad = text.chars().find(|&c| {
        (c.is_control() && c != '\n')
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    });
    assert_eq!(bad, None, "raw control character in {text:?}");
}

/// Run `toolcage serve` over stdio, send `calls` (tools/call params) with
/// ids 10, 11, ..., and return the results in order.
fn serve_calls(p: &Project, extra: &[&str], calls: &[Value]) -> Vec<Value> {
    serve(p, extra, calls, false).0
}

/// [`serve_calls`], and the server's log (stderr) when `logged`.
fn serve(p: &Project, extra: &[&str], calls: &[Value], logged: bool) -> (Vec<Value>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolcage"))
        .arg("-C")
        .arg(&p.dir)
        .arg("serve")
        .arg("--no-watch")
        .args(extra)
        .current_dir(&p.dir)
        .env("XDG_STATE_HOME", p.state_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(if logged {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let log = child.stderr.take().map(|mut e| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut e, &mut text);
            text
        })
    });
    let (tx, rx) = mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Ok(v) = serde_json::from_str(&line)
                && tx.send(v).is_err()
            {
                break;
            }
        }
    });
    let mut stdin = child.stdin.take().unwrap();
    let mut send = |v: Value| {
        let mut line = serde_json::to_string(&v).unwrap();
        line.push('\n');
        stdin.write_all(line.as_bytes()).unwrap();
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}}),
    );
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let mut results = Vec::new();
    // One call at a time, in order.
    for (i, params) in calls.iter().enumerate() {
        let id = 10 + i;
        send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}));
        let answer = loop {
            let m = rx
                .recv_timeout(Duration::from_secs(60))
                .expect("the server answers");
            if m["id"] == id {
                break m;
            }
        };
        results.push(answer);
    }
    drop(stdin);
    let _ = child.wait();
    let log = log.map(|t| t.join().unwrap()).unwrap_or_default();
    (results, log)
}

fn text_of(answer: &Value) -> String {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

// ---------------------------------------------------------------- terminal

const FORGED: &str = "\r\u{1b}[2K2026-01-01T00:00:00Z  deploy  approved by terminal  exit 0";

#[test]
fn a_client_cannot_forge_an_audit_line_with_a_tool_name() {
    let p = Project::new("ph-audit-forge");
    exe(
        &p,
        ".agents/tools/hi",
        "#!/bin/sh\n# @description Hi.\necho hi\n",
    );
    let r = serve_calls(
        &p,
        &[],
        &[
            json!({"name": FORGED, "arguments": {"note": "\u{1b}[8m\u{202e}"}}),
            json!({"name": "hi", "arguments": {}}),
        ],
    );
    assert_eq!(text_of(&r[1]), "hi\n", "{}", r[1]);
    let o = toolcage(&p, &["audit"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let text = out(&o);
    assert_inert(&text);
    // Two records, two lines: the forged name stays inside its own line.
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(
        text.lines().next().unwrap().contains(
            "\\u{d}\\u{1b}[2K2026-01-01T00:00:00Z  deploy  approved by terminal  exit 0  denied (unknown_tool)"
        ),
        "{text}"
    );
    // Control: --json keeps the exact name (JSON escapes it).
    let o = toolcage(&p, &["audit", "--json"]);
    let first: Value = serde_json::from_str(out(&o).lines().next().unwrap()).unwrap();
    assert_eq!(first["tool"], FORGED);
    assert_no_controls(&out(&o));
}

#[test]
fn server_log_lines_cannot_be_forged_by_a_client() {
    let p = Project::new("ph-log-forge");
    exe(
        &p,
        ".agents/tools/hi",
        "#!/bin/sh\n# @description Hi.\necho hi\n",
    );
    let forged = "x\r\n2026-01-01T00:00:00Z  INFO deploy: approved\u{202e}";
    let (r, log) = serve(
        &p,
        &["--log", "info"],
        &[
            json!({"name": "hi", "arguments": {forged: 1}}),
            json!({"name": "hi", "arguments": {}}),
        ],
        true,
    );
    assert_eq!(text_of(&r[1]), "hi\n", "{}", r[1]);
    assert_inert(&log);
    let refused: Vec<&str> = log.lines().filter(|l| l.contains("refused")).collect();
    assert_eq!(refused.len(), 1, "{log}");
    assert!(
        refused[0].contains("x\\u{d}\\u{a}2026-01-01T00:00:00Z  INFO deploy: approved\\u{202e}"),
        "{log}"
    );
    // Control: ordinary log lines still read as before.
    assert!(log.contains("tool(s) discovered"), "{log}");
}

#[test]
fn list_and_check_show_project_text_escaped() {
    let p = Project::new("ph-list-check");
    exe(
        &p,
        ".agents/tools/hidden",
        "#!/bin/sh\n# @description Vanishes \u{1b}[2K\u{1b}[1A\necho x\n",
    );
    exe(
        &p,
        ".agents/tools/plain",
        "#!/bin/sh\n# @description Plain.\n",
    );
    // A file name with ESC and a right-to-left override: skipped, reported.
    exe(
        &p,
        ".agents/tools/evil\u{1b}[31m\u{202e}txt",
        "#!/bin/sh\n# @description E\n",
    );
    let o = toolcage(&p, &["list"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let text = out(&o);
    assert_inert(&text);
    let hidden = text.lines().find(|l| l.starts_with("hidden")).unwrap();
    assert!(hidden.ends_with("Vanishes \\u{1b}[2K\\u{1b}[1A"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("plain")), "{text}");
    // Control: --json keeps the description exact.
    let o = toolcage(&p, &["list", "--json"]);
    let v: Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(v[0]["description"], "Vanishes \u{1b}[2K\u{1b}[1A");
    assert_no_controls(&out(&o));

    let o = toolcage(&p, &["check"]);
    let text = out(&o);
    assert_inert(&text);
    assert!(
        text.contains(".agents/tools/evil\\u{1b}[31m\\u{202e}txt"),
        "{text}"
    );
    let o = toolcage(&p, &["check", "--json"]);
    assert_no_controls(&out(&o));
    let v: Value = serde_json::from_str(&out(&o)).unwrap();
    assert!(
        v["files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["file"] == ".agents/tools/evil\u{1b}[31m\u{202e}txt"),
        "{v}"
    );
}

#[test]
fn tool_output_into_a_pipe_stays_byte_exact() {
    // Output on a terminal is escaped (gate.rs); into a pipe or a file
    // it is exactly what the agent would see.
    let p = Project::new("ph-output-pipe");
    exe(
        &p,
        ".agents/tools/colour",
        "#!/bin/sh\n# @description C\nprintf 'a\\033[31mred\\r\\n\\tb'\n",
    );
    let o = toolcage(&p, &["call", "colour"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert_eq!(o.stdout, b"a\x1b[31mred\r\n\tb");
}

// --------------------------------------------------------------- symlinks

#[test]
fn tool_links_out_of_their_directory_are_refused_and_links_inside_work() {
    let p = Project::new("ph-links");
    exe(
        &p,
        "scripts/helper",
        "#!/bin/sh\n# @description H\necho helper\n",
    );
    std::fs::create_dir_all(p.path(".agents/tools")).unwrap();
    symlink("../../scripts/helper", p.path(".agents/tools/helper")).unwrap();
    // Control: a link inside the tool dir.
    exe(
        &p,
        ".agents/tools/impl/real",
        "#!/bin/sh\n# @description R\necho inside\n",
    );
    symlink("impl/real", p.path(".agents/tools/linked")).unwrap();
    // tools.toml and an A3S page linked to a file the operator can read.
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret");
    std::fs::write(&secret, "[[tools]]\nname = \"TOPSECRET-LINE\n").unwrap();
    symlink(&secret, p.path("tools.toml")).unwrap();
    std::fs::create_dir_all(p.path("tools")).unwrap();
    symlink(&secret, p.path("tools/leak.md")).unwrap();

    let o = toolcage(&p, &["check"]);
    assert_eq!(code(&o), 1, "{}", out(&o));
    let text = out(&o);
    assert!(!text.contains("TOPSECRET"), "{text}");
    assert!(
        text.contains(&format!(
            "error    .agents/tools/helper: symlink to ../../scripts/helper leads outside .agents/tools (to {}); not read, tool skipped",
            p.path("scripts/helper").display()
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "tools.toml: symlink to {} leads outside the project",
            secret.display()
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "tools/leak.md: symlink to {} leads outside tools/",
            secret.display()
        )),
        "{text}"
    );
    let o = toolcage(&p, &["check", "--json"]);
    assert!(!out(&o).contains("TOPSECRET"), "{}", out(&o));
    let o = toolcage(&p, &["call", "helper"]);
    assert_eq!(code(&o), 2, "{}", err(&o));
    let o = toolcage(&p, &["call", "linked"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert_eq!(out(&o), "inside\n");
}

// ------------------------------------------------------------------ audit

/// The project's state directory (rate limits, audit log).
fn state_dir(p: &Project) -> PathBuf {
    let base = p.state_dir().join("toolcage");
    std::fs::read_dir(&base)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
}

#[test]
fn huge_names_and_arguments_do_not_bloat_the_audit_log() {
    let p = Project::new("ph-audit-cap");
    exe(
        &p,
        ".agents/tools/hi",
        "#!/bin/sh\n# @description Hi.\n# @param x string X\necho hi\n",
    );
    let name = "N".repeat(2 << 20);
    let mut calls: Vec<Value> = (0..5)
        .map(|_| json!({"name": name, "arguments": {}}))
        .collect();
    calls.push(json!({"name": "hi", "arguments": {"x": "v".repeat(1 << 20)}}));
    // Control: a short call is stored whole.
    calls.push(json!({"name": "hi", "arguments": {"x": "short"}}));
    let r = serve_calls(&p, &[], &calls);
    assert_eq!(text_of(&r[6]), "hi\n", "{}", r[6]);
    let log = state_dir(&p).join("audit.jsonl");
    let size = std::fs::metadata(&log).unwrap().len();
    assert!(size < 64 * 1024, "audit log is {size} bytes");
    let o = toolcage(&p, &["audit", "--json"]);
    let recs: Vec<Value> = out(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(recs.len(), 7);
    let tool = recs[0]["tool"].as_str().unwrap();
    assert!(tool.starts_with(&"N".repeat(64)), "{tool}");
    assert!(
        tool.contains(&format!("[{} bytes, sha256 ", 2 << 20)),
        "{tool}"
    );
    assert!(recs[5].get("args").is_none(), "{}", recs[5]);
    assert_eq!(
        recs[5]["args_cut"]["bytes"],
        (1 << 20) + r#"{"x":""}"#.len()
    );
    assert_eq!(recs[5]["args_sha256"].as_str().unwrap().len(), 64);
    assert_eq!(recs[6]["tool"], "hi");
    assert_eq!(recs[6]["args"], json!({"x": "short"}));
}

// ------------------------------------------------------------ rate limits

const FREE: &str = "[[tools]]\nname = \"free\"\ndescription = \"d\"\nexecutor = \"shell\"\nrequires_approval = false\ncommand = \"echo free\"\n";

fn rate_policy(p: &Project) -> String {
    let path = p.state_dir().with_extension("rl.toml");
    std::fs::write(&path, "[rate_limit]\nrequests = 2\nwindow = \"1h\"\n").unwrap();
    path.display().to_string()
}

#[test]
fn servers_and_cli_calls_share_one_rate_limit_that_survives_a_restart() {
    let p = Project::new("ph-rate-shared");
    p.write("tools.toml", FREE);
    let policy = rate_policy(&p);
    let call = json!({"name": "free", "arguments": {}});
    let r = serve_calls(&p, &["--policy", &policy], std::slice::from_ref(&call));
    assert_eq!(text_of(&r[0]), "free\n", "{}", r[0]);
    // A restarted server does not start from zero.
    let r = serve_calls(&p, &["--policy", &policy], &[call.clone(), call.clone()]);
    assert_eq!(text_of(&r[0]), "free\n", "{}", r[0]);
    assert_eq!(r[1]["result"]["isError"], true, "{}", r[1]);
    assert!(text_of(&r[1]).contains("rate limit"), "{}", r[1]);
    // The CLI counts against the same limit.
    let o = toolcage(&p, &["call", "--policy", &policy, "free"]);
    assert_eq!(code(&o), 3, "{}", err(&o));
    assert!(err(&o).contains("rate limit"), "{}", err(&o));
    // Control: another project has its own state.
    let q = Project::new("ph-rate-other");
    q.write("tools.toml", FREE);
    let o = toolcage(&q, &["call", "--policy", &policy, "free"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let _ = std::fs::remove_file(&policy);
}

#[test]
fn an_emptied_rate_state_refuses_calls_and_says_how_to_reset() {
    let p = Project::new("ph-rate-empty");
    p.write("tools.toml", FREE);
    let policy = rate_policy(&p);
    let o = toolcage(&p, &["call", "--policy", &policy, "free"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let state = state_dir(&p).join("ratelimit.json");
    let hint = format!("rm {}", state.display());
    for damaged in ["", "garbage{"] {
        std::fs::write(&state, damaged).unwrap();
        // Every call is refused, not only the rate-limited ones: a damaged
        // state file may be tampering, and the limits it held are unknown.
        for limited in [true, false] {
            let mut args = vec!["call"];
            if limited {
                args.extend(["--policy", &policy]);
            }
            args.push("free");
            let o = toolcage(&p, &args);
            assert_eq!(code(&o), 125, "{damaged:?} {limited}: {}", err(&o));
            assert!(err(&o).contains(&hint), "{}", err(&o));
            assert!(err(&o).contains("is damaged"), "{}", err(&o));
            let extra: &[&str] = if limited { &["--policy", &policy] } else { &[] };
            let r = serve_calls(&p, extra, &[json!({"name": "free", "arguments": {}})]);
            assert_eq!(r[0]["result"]["isError"], true, "{}", r[0]);
            assert!(text_of(&r[0]).contains(&hint), "{}", r[0]);
        }
        // Refusing leaves the file as it was, for the operator to look at.
        assert_eq!(std::fs::read_to_string(&state).unwrap(), damaged);
    }
    // Control: doing what the hint says resets the limits; an unlimited
    // call then leaves no state behind.
    std::fs::remove_file(&state).unwrap();
    let o = toolcage(&p, &["call", "free"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert!(!state.exists());
    let o = toolcage(&p, &["call", "--policy", &policy, "free"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let _ = std::fs::remove_file(&policy);
}

// ------------------------------------------------------------------ traps

fn write_policy(p: &Project, name: &str, text: &str) -> String {
    let path: PathBuf = p.state_dir().with_extension(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn clawd_deploy(p: &Project) {
    p.write(
        ".clawd/tools/deploy/tool.json",
        r#"{"name": "deploy", "description": "Deploy.", "entrypoint": "run.sh", "interpreter": "sh"}"#,
    );
    p.write(".clawd/tools/deploy/run.sh", "echo deployed\n");
}

#[test]
fn check_warns_about_policy_sections_that_match_no_tool() {
    let p = Project::new("ph-sections");
    clawd_deploy(&p);
    let policy = write_policy(
        &p,
        "sec.toml",
        "[approval]\nmode = \"never\"\n\n[tools.deploy.approval]\nmode = \"always\"\n",
    );
    let o = toolcage(&p, &["check", "--policy", &policy]);
    assert_eq!(code(&o), 0, "a warning does not fail check: {}", out(&o));
    assert!(
        out(&o).contains(&format!(
            "warning  {policy}:4: policy section [tools.deploy] matches no discovered tool; the nearest is ct_deploy (fix: rename the section to [tools.ct_deploy])"
        )),
        "{}",
        out(&o)
    );
    let o = toolcage(&p, &["check", "--json", "--policy", &policy]);
    let v: Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(v["policy_warnings"][0]["nearest"], "ct_deploy");
    assert_eq!(v["warnings"], 1);
    // Control: the right name draws no warning.
    let policy = write_policy(
        &p,
        "sec2.toml",
        "[tools.ct_deploy.approval]\nmode = \"always\"\n",
    );
    let o = toolcage(&p, &["check", "--policy", &policy]);
    assert!(
        !out(&o).contains("matches no discovered tool"),
        "{}",
        out(&o)
    );
}

#[test]
fn yes_is_off_for_a_tool_that_asked_for_approval_under_mode_once() {
    let p = Project::new("ph-yes-once");
    p.write(
        "tools.toml",
        &format!(
            "{FREE}\n[[tools]]\nname = \"deploy\"\ndescription = \"d\"\nexecutor = \"shell\"\nrequires_approval = true\ncommand = \"echo deployed\"\n"
        ),
    );
    let once = write_policy(&p, "once.toml", "[approval]\nmode = \"once\"\n");
    let o = toolcage(&p, &["call", "--policy", &once, "--yes", "deploy"]);
    assert_eq!(code(&o), 3, "{}", err(&o));
    assert!(err(&o).contains("--yes is not permitted"), "{}", err(&o));
    let o = toolcage(&p, &["policy", "--policy", &once, "deploy"]);
    assert!(
        out(&o).contains("--yes is off for a tool that asks for approval"),
        "{}",
        out(&o)
    );
    // Control: a tool that did not ask takes --yes under the same mode.
    let o = toolcage(&p, &["call", "--policy", &once, "--yes", "free"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    // Control: the operator turns it on.
    let on = write_policy(
        &p,
        "on.toml",
        "[approval]\nmode = \"once\"\nallow_yes = true\n",
    );
    let o = toolcage(&p, &["call", "--policy", &on, "--yes", "deploy"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert_eq!(out(&o), "deployed\n");
}
