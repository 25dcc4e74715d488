//! A client's registration of toolcage written into the project's
//! `.mcp.json` (`toolcage -C . serve`, by name or by the binary's path)
//! is recognised and skipped with a note: toolcage never starts itself as
//! an upstream, `check` stays clean, and no tool shows twice as
//! `toolcage__*`. The control: the file's other server still loads and is
//! listed and called.

use crate::gateway_support;

use gateway_support::Fixture;
use serde_json::json;

/// The fixture server `fx`, plus toolcage itself under two names: by the
/// name `toolcage` (what `claude mcp add --scope project` writes) and by
/// the path of the running binary under another key.
fn with_self_entries(f: &Fixture) {
    let fx = f.server_with(json!({}), &[]);
    let me = json!({"command": "toolcage", "args": ["-C", ".", "serve"]});
    let by_path =
        json!({"command": env!("CARGO_BIN_EXE_toolcage"), "args": ["serve", "--no-watch"]});
    f.write(
        ".mcp.json",
        &json!({"mcpServers": {"fx": fx, "toolcage": me, "agent-tools": by_path}}).to_string(),
    );
}

#[test]
fn an_entry_that_runs_toolcage_serve_is_skipped_with_a_note() {
    let f = Fixture::new("self", json!({}), "");
    with_self_entries(&f);

    let (code, out, err) = f.run(&["check"]);
    assert_eq!(code, 0, "notes are not errors: {out}{err}");
    for name in ["'toolcage'", "'agent-tools'"] {
        assert!(
            out.lines().any(|l| l.starts_with("note")
                && l.contains(name)
                && l.contains("runs toolcage itself")
                && l.contains("docs/clients.md")),
            "{name}: {out}"
        );
    }
    assert!(!out.lines().any(|l| l.starts_with("error")), "{out}");

    let (code, out, err) = f.run(&["list"]);
    assert_eq!(code, 0, "{err}");
    // Control: the other server's tools are listed; none of toolcage's own
    // twice.
    assert!(out.contains("fx__echo"), "{out}");
    assert!(
        !out.contains("toolcage__") && !out.contains("agent-tools__"),
        "{out}"
    );
    assert!(
        err.contains("note: .mcp.json") && err.contains("runs toolcage itself"),
        "{err}"
    );

    let (code, out, err) = f.run(&["upstreams", "--json"]);
    assert_eq!(code, 0, "{err}");
    let servers: serde_json::Value = serde_json::from_str(&out).unwrap();
    let state = |name: &str| {
        servers
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .map(|s| s["state"].as_str().unwrap_or_default().to_string())
    };
    assert_eq!(state("toolcage").as_deref(), Some("skipped"), "{out}");
    assert_eq!(state("agent-tools").as_deref(), Some("skipped"), "{out}");
    assert_eq!(state("fx").as_deref(), Some("running"), "{out}");

    // Control: the other server is called through the gateway.
    let (code, out, err) = f.run(&["call", "fx__echo", "text=still here"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("still here"), "{out}");
}

/// Control for the recognition: a server whose arguments say `serve` but
/// whose program is not toolcage is an ordinary upstream, started as
/// written (here it is not an MCP server, so it fails to start, and `check`
/// says so as an error, not a note).
#[test]
fn another_program_with_a_serve_argument_is_not_taken_for_toolcage() {
    let f = Fixture::new("notself", json!({}), "");
    f.write(
        ".mcp.json",
        &json!({"mcpServers": {"web": {"command": "/bin/sh", "args": ["-c", "exit 3", "serve"]}}})
            .to_string(),
    );
    let (_, out, err) = f.run(&["check"]);
    assert!(!out.contains("runs toolcage itself"), "{out}{err}");
    let (code, out, err) = f.run(&["upstreams", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("\"skipped\""), "{out}");
}
