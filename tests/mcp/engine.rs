//! The MCP server over the real engine (discovery, policy, sandbox): tools
//! from a scratch project, annotations from the grant, results and errors
//! from sandboxed runs, a timeout, cancellation killing the whole process
//! tree (with its control), and hot reload of a real tool file.

use crate::common;
use crate::mcp_support;

use common::Project;
use mcp_support::wire::{self, text};
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use toolcage::call::Engine;
use toolcage::discover::Options;
use toolcage::mcp::{EngineHost, ServeConfig};
use toolcage::policy::{Overrides, Sources};

fn exe(p: &Project, rel: &str, body: &str) {
    let path = p.write(rel, body);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Writes `beat` in the project every 0.1 s from a background child for
/// SECS seconds, then prints done.
const SPIN: &str = r#"#!/bin/sh
# @description Heartbeat from a background child for SECS seconds.
# @param *secs integer Seconds to run
( i=0; while [ "$i" -lt $((OCTOMIND_PARAM_SECS * 10)) ]; do date +%s%N > beat; sleep 0.1; i=$((i+1)); done ) &
wait
echo done
"#;

fn project(tag: &str) -> (Project, Engine) {
    let p = Project::new(tag);
    exe(
        &p,
        ".agents/tools/hello",
        "#!/bin/sh\n# @description Say hello.\n# @param *who string Who\necho \"hello $OCTOMIND_PARAM_WHO\"\n",
    );
    exe(
        &p,
        ".agents/tools/broken",
        "#!/bin/sh\n# @description Fail.\necho partial\necho 'disk on fire' >&2\nexit 3\n",
    );
    exe(
        &p,
        ".agents/tools/slowpoke",
        "#!/bin/sh\n# @description Sleep too long.\nsleep 30\n",
    );
    exe(&p, ".agents/tools/spin", SPIN);
    let policy = p.dir.with_extension("policy.toml");
    std::fs::write(&policy, "[tools.slowpoke.limits]\ntimeout = \"1s\"\n").unwrap();
    let sources = Sources {
        profile: None,
        policy_file: Some(policy),
    };
    let engine =
        Engine::load(&p.dir, &sources, Overrides::default(), Options::default()).expect("engine");
    (p, engine)
}

fn config() -> ServeConfig {
    ServeConfig {
        reload_debounce: Duration::from_millis(100),
        ..ServeConfig::default()
    }
}

async fn call(c: &mut wire::LineClient, name: &str, args: Value) -> Value {
    let r = c
        .request("tools/call", json!({"name": name, "arguments": args}))
        .await;
    r.get("result")
        .cloned()
        .unwrap_or_else(|| panic!("no result: {r}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_and_calls_real_tools_in_the_sandbox() {
    let (_p, engine) = project("mcp-engine");
    let (mut c, _s, _t) = wire::start(Arc::new(EngineHost::new(engine)), config());
    c.initialize().await;

    let l = c.request("tools/list", json!({})).await;
    let tools = l["result"]["tools"].as_array().unwrap();
    let hello = tools.iter().find(|t| t["name"] == "hello").expect("hello");
    assert_eq!(hello["inputSchema"]["required"], json!(["who"]), "{hello}");
    // The default profile lets tools write the project, without network.
    assert_eq!(
        hello["annotations"],
        json!({"readOnlyHint": false, "destructiveHint": true, "openWorldHint": false})
    );

    let r = call(&mut c, "hello", json!({"who": "mcp"})).await;
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(text(&r).trim(), "hello mcp");
    let enf = &r["_meta"]["toolcage/enforcement"];
    assert!(enf["landlock"].is_object(), "{r}");

    let r = call(&mut c, "broken", json!({})).await;
    assert_eq!(r["isError"], true, "{r}");
    let t = text(&r);
    assert!(t.contains("partial") && t.contains("disk on fire"), "{t}");

    let r = call(&mut c, "hello", json!({"who": 5, "extra": true})).await;
    assert_eq!(r["isError"], true, "{r}");
    assert!(text(&r).contains("invalid arguments"), "{r}");

    let r = call(&mut c, "slowpoke", json!({})).await;
    assert_eq!(r["isError"], true, "{r}");
    assert!(text(&r).contains("timed out"), "{}", text(&r));

    let u = c
        .request("tools/call", json!({"name": "ghost", "arguments": {}}))
        .await;
    assert_eq!(u["error"]["code"], -32602, "{u}");
}

fn mtime(p: &std::path::Path) -> Option<SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_kills_the_process_tree_and_the_uncancelled_control_completes() {
    let (p, engine) = project("mcp-cancel");
    let (mut c, _s, _t) = wire::start(Arc::new(EngineHost::new(engine)), config());
    c.initialize().await;
    let beat = p.path("beat");

    // Control: the same tool, not cancelled, runs to completion.
    let r = call(&mut c, "spin", json!({"secs": 1})).await;
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(text(&r).trim(), "done");
    assert!(beat.exists(), "the control never wrote its heartbeat");
    std::fs::remove_file(&beat).unwrap();

    c.send(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "spin", "arguments": {"secs": 120}}}))
        .await;
    let t0 = Instant::now();
    while !beat.exists() {
        assert!(t0.elapsed() < wire::WAIT, "the call never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    c.notify("notifications/cancelled", json!({"requestId": 5}))
        .await;
    // The heartbeat stops: the background child died with the tool.
    let t1 = Instant::now();
    loop {
        let a = mtime(&beat);
        tokio::time::sleep(Duration::from_millis(600)).await;
        if mtime(&beat) == a {
            break;
        }
        assert!(
            t1.elapsed() < wire::WAIT,
            "heartbeat still going after cancellation"
        );
    }
    let a = mtime(&beat);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(mtime(&beat), a, "a process of the cancelled call survived");
    let pong = c.request("ping", json!({})).await;
    assert_eq!(pong["result"], json!({}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adding_a_tool_file_sends_list_changed() {
    let (p, engine) = project("mcp-reload");
    let (mut c, s, _t) = wire::start(Arc::new(EngineHost::new(engine)), config());
    c.initialize().await;
    let _reloader = toolcage::mcp::reload::start(s.clone()).unwrap();
    let t0 = Instant::now();
    while s.client_count() == 0 {
        assert!(t0.elapsed() < wire::WAIT);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Written in two steps with a pause: the first half is not a tool
    // (no shebang, not executable), so nothing is served from it.
    let path = p.path(".agents/tools/late");
    std::fs::write(&path, "# @description Arrived late.\n").unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    exe(
        &p,
        ".agents/tools/late",
        "#!/bin/sh\n# @description Arrived late.\necho late\n",
    );
    c.wait_note("notifications/tools/list_changed").await;
    let r = call(&mut c, "late", json!({})).await;
    assert_eq!(text(&r).trim(), "late", "{r}");
}
