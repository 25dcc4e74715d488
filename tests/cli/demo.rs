//! The README's `examples/demo` commands (and docs/commands.md's), through the real binary, so
//! the demo and the documentation cannot rot.

use std::path::PathBuf;
use std::process::{Command, Output};

fn demo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/demo")
}

fn toolcage(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolcage"))
        .arg("-C")
        .arg(demo())
        .args(args)
        .output()
        .expect("run toolcage")
}

fn ok(args: &[&str]) -> String {
    let o = toolcage(args);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{args:?}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).expect("utf-8")
}

#[test]
fn list_shows_a_tool_of_every_format() {
    let out = ok(&["list"]);
    let rows: Vec<(&str, &str)> = out
        .lines()
        .map(|l| {
            let mut w = l.split_whitespace();
            (w.next().unwrap(), w.next().unwrap())
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            ("check_api_health", "opencrabs"),
            ("ct_greet", "clawd"),
            ("find-todos", "agentdir"),
            ("search_notes", "opencrabs"),
            ("word_count", "octomind"),
        ]
    );
}

#[test]
fn check_is_clean() {
    let out = ok(&["check"]);
    assert!(
        out.lines()
            .next()
            .unwrap()
            .ends_with("4 files examined, 5 tools loaded, 0 errors, 0 warnings"),
        "{out}"
    );
    assert!(!out.contains("calls are refused"), "{out}");
    assert!(!out.contains("check_api_health': http executor"), "{out}");
    let v: serde_json::Value = serde_json::from_str(&ok(&["check", "--json"])).unwrap();
    assert_eq!(v["ok"], true);
    assert_eq!(v["tools"], 5);
}

#[test]
fn schema_of_a_tool() {
    let v: serde_json::Value = serde_json::from_str(&ok(&["schema", "word_count"])).unwrap();
    assert_eq!(v["name"], "word_count");
    assert_eq!(v["inputSchema"]["properties"]["text"]["type"], "string");
    assert_eq!(toolcage(&["schema", "nope"]).status.code(), Some(2));
}

#[test]
fn calls_in_every_runnable_format() {
    assert_eq!(
        ok(&["call", "word_count", "text=hello big world"]),
        "1 lines, 3 words, 16 characters\n"
    );
    assert_eq!(
        ok(&["call", "ct_greet", "name=Ada", "times=2"]),
        "Hello, Ada!\nHello, Ada!\n"
    );
    assert_eq!(
        ok(&["call", "search_notes", "pattern=todo", "ignore_case=true"]),
        "2:TODO: write the MCP gateway.\n"
    );
    // A value is text, never shell.
    assert_eq!(
        ok(&["call", "search_notes", "pattern=$(touch pwned); x"]),
        "no match for $(touch pwned); x\n"
    );
    assert!(!demo().join("pwned").exists());
    // The A3S script calls search_notes through ctx.tool.
    assert_eq!(
        ok(&[
            "call",
            "find-todos",
            "--args",
            r#"{"inputs":{"pattern":"todo"}}"#
        ]),
        r#"{"pattern":"todo","hits":["2:TODO: write the MCP gateway."]}"#
    );
}

#[test]
fn calls_that_cannot_run_say_why() {
    let o = toolcage(&["call", "ct_greet"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("missing required parameter 'name'"));
    let o = toolcage(&["call", "check_api_health"]);
    assert_ne!(o.status.code(), Some(0));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("its grant has no network"), "{err}");
}
