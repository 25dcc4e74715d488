//! The MCP protocol layer over the stdio transport, against a fake host
//! (no sandbox): initialize, tools/list with pagination, tools/call results
//! and errors, ping, logging, progress, cancellation, concurrency, bad
//! input, hot reload and EOF.

use crate::mcp_support;

use mcp_support::FakeHost;
use mcp_support::wire::{self, text};
use serde_json::{Value, json};
use std::sync::atomic::Ordering;
use std::time::Duration;
use toolcage::gate::Gatekeeper;
use toolcage::mcp::ServeConfig;

/// A fresh directory, removed when the test ends.
fn dir(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("tc-mcp-{tag}-"))
        .tempdir()
        .unwrap()
}

fn config() -> ServeConfig {
    ServeConfig {
        progress_interval: Duration::from_millis(100),
        reload_debounce: Duration::from_millis(100),
        ..ServeConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_declares_tools_list_changed_and_logging() {
    let tmp = dir("init");
    let d = tmp.path().to_path_buf();
    let (mut c, _s, _t) = wire::start(FakeHost::new(&d), config());
    let r = c.initialize().await;
    assert_eq!(r["protocolVersion"], "2025-11-25", "{r}");
    assert_eq!(r["capabilities"]["tools"]["listChanged"], true, "{r}");
    assert!(r["capabilities"]["logging"].is_object(), "{r}");
    assert_eq!(r["serverInfo"]["name"], "toolcage");
    let pong = c.request("ping", json!({})).await;
    assert_eq!(pong["result"], json!({}), "{pong}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_list_pages_through_every_tool_with_schemas_and_annotations() {
    let tmp = dir("page");
    let d = tmp.path().to_path_buf();
    let host = FakeHost::new(&d);
    let want: Vec<String> = toolcage::mcp::ToolHost::tools(&*host)
        .iter()
        .map(|t| t.name.clone())
        .collect();
    let cfg = ServeConfig {
        page_size: 3,
        ..config()
    };
    let (mut c, _s, _t) = wire::start(host, cfg);
    c.initialize().await;
    let mut seen = Vec::new();
    let mut params = json!({});
    let mut pages = 0;
    loop {
        let r = c.request("tools/list", params.clone()).await;
        let result = &r["result"];
        let tools = result["tools"].as_array().unwrap_or_else(|| panic!("{r}"));
        assert!(tools.len() <= 3);
        for t in tools {
            assert_eq!(t["inputSchema"]["type"], "object", "{t}");
            assert!(t["annotations"]["readOnlyHint"].is_boolean(), "{t}");
            seen.push(t["name"].as_str().unwrap().to_string());
        }
        pages += 1;
        match result["nextCursor"].as_str() {
            Some(cur) => params = json!({"cursor": cur}),
            None => break,
        }
    }
    assert_eq!(seen, want);
    assert!(pages >= 3, "{pages} pages");
    let bad = c
        .request("tools/list", json!({"cursor": "not-a-cursor"}))
        .await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_results_errors_and_unknown_tools() {
    let tmp = dir("call");
    let d = tmp.path().to_path_buf();
    let (mut c, _s, _t) = wire::start(FakeHost::new(&d), config());
    c.initialize().await;

    let ok = c
        .request(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "hi"}}),
        )
        .await;
    let r = &ok["result"];
    assert_eq!(r["isError"], false, "{ok}");
    assert_eq!(text(r), "hi");
    assert!(r["_meta"]["toolcage/enforcement"].is_object(), "{ok}");

    let fail = c
        .request("tools/call", json!({"name": "fail", "arguments": {}}))
        .await;
    assert_eq!(fail["result"]["isError"], true, "{fail}");
    assert!(text(&fail["result"]).contains("boom"), "{fail}");

    let denied = c
        .request("tools/call", json!({"name": "denied", "arguments": {}}))
        .await;
    assert_eq!(denied["result"]["isError"], true, "{denied}");
    assert!(text(&denied["result"]).contains("--allow-net"), "{denied}");

    let invalid = c
        .request("tools/call", json!({"name": "echo", "arguments": {}}))
        .await;
    assert_eq!(invalid["result"]["isError"], true, "{invalid}");
    let t = text(&invalid["result"]);
    assert!(t.contains("text") && t.contains("input schema"), "{t}");

    let unknown = c
        .request("tools/call", json!({"name": "nope", "arguments": {}}))
        .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nope")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logging_set_level_enables_log_notifications() {
    let tmp = dir("log");
    let d = tmp.path().to_path_buf();
    let (mut c, _s, _t) = wire::start(FakeHost::new(&d), config());
    c.initialize().await;
    let r = c
        .request("logging/setLevel", json!({"level": "debug"}))
        .await;
    assert!(r.get("result").is_some(), "{r}");
    c.request(
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "x"}}),
    )
    .await;
    let m = c.wait_note("notifications/message").await;
    assert_eq!(m["params"]["logger"], "toolcage", "{m}");
    let bad = c
        .request("logging/setLevel", json!({"level": "loud"}))
        .await;
    assert!(bad.get("error").is_some(), "{bad}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_notifications_follow_the_progress_token() {
    let tmp = dir("progress");
    let d = tmp.path().to_path_buf();
    let (mut c, _s, _t) = wire::start(FakeHost::new(&d), config());
    c.initialize().await;
    let id = c.fresh_id();
    c.send(
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "sleep", "arguments": {"secs": 0.5}, "_meta": {"progressToken": "tok-1"}}}),
    )
    .await;
    let r = c.response(&json!(id)).await;
    assert_eq!(r["result"]["isError"], false, "{r}");
    let p: Vec<&Value> = c
        .notes
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .collect();
    assert!(!p.is_empty(), "no progress: {:?}", c.notes);
    assert!(p.iter().all(|n| n["params"]["progressToken"] == "tok-1"));

    // Without a token: no progress.
    c.notes.clear();
    c.request(
        "tools/call",
        json!({"name": "sleep", "arguments": {"secs": 0.4}}),
    )
    .await;
    assert!(
        !c.notes
            .iter()
            .any(|n| n["method"] == "notifications/progress")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_stops_the_run_and_a_control_completes() {
    let tmp = dir("cancel");
    let d = tmp.path().to_path_buf();
    let host = FakeHost::new(&d);
    let (mut c, _s, _t) = wire::start(host.clone(), config());
    c.initialize().await;

    // Control: the same tool, not cancelled, completes.
    let ok = c
        .request(
            "tools/call",
            json!({"name": "sleep", "arguments": {"secs": 0.2}}),
        )
        .await;
    assert_eq!(text(&ok["result"]), "slept", "{ok}");
    assert_eq!(host.cancelled.load(Ordering::SeqCst), 0);

    c.send(json!({"jsonrpc": "2.0", "id": 77, "method": "tools/call",
        "params": {"name": "sleep", "arguments": {"secs": 60}}}))
        .await;
    // Wait until it runs, then cancel it.
    let t0 = std::time::Instant::now();
    while host.running.load(Ordering::SeqCst) == 0 {
        assert!(t0.elapsed() < wire::WAIT, "the call never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    c.notify(
        "notifications/cancelled",
        json!({"requestId": 77, "reason": "test"}),
    )
    .await;
    while host.cancelled.load(Ordering::SeqCst) == 0 {
        assert!(t0.elapsed() < wire::WAIT, "the call was not cancelled");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The server keeps serving; the cancelled request gets no response.
    let pong = c.request("ping", json!({})).await;
    assert_eq!(pong["result"], json!({}));
    assert!(!c.notes.iter().any(|m| m["id"] == 77), "{:?}", c.notes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_call_blocks_neither_list_nor_other_calls_and_the_limit_holds() {
    let tmp = dir("conc");
    let d = tmp.path().to_path_buf();
    let host = FakeHost::new(&d);
    let cfg = ServeConfig {
        max_concurrent: 2,
        ..config()
    };
    let (mut c, _s, _t) = wire::start(host.clone(), cfg);
    c.initialize().await;
    for id in [901, 902, 903] {
        c.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "sleep", "arguments": {"secs": 60}}}))
            .await;
    }
    let t0 = std::time::Instant::now();
    while host.running.load(Ordering::SeqCst) < 2 {
        assert!(t0.elapsed() < wire::WAIT);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // tools/list answers while every permit is taken.
    let l = c.request("tools/list", json!({})).await;
    assert!(l["result"]["tools"].is_array(), "{l}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(host.max_running.load(Ordering::SeqCst), 2, "limit exceeded");
    // Cancel one hung call: the queued one gets its permit, and with the
    // other two cancelled an echo runs.
    for id in [901, 902, 903] {
        c.notify("notifications/cancelled", json!({"requestId": id}))
            .await;
    }
    let ok = c
        .request(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "free"}}),
        )
        .await;
    assert_eq!(text(&ok["result"]), "free", "{ok}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_json_rpc_error_and_the_server_keeps_serving() {
    let tmp = dir("bad");
    let d = tmp.path().to_path_buf();
    let cfg = ServeConfig {
        max_message_bytes: 64 * 1024,
        ..config()
    };
    let (mut c, _s, _t) = wire::start(FakeHost::new(&d), cfg);
    c.initialize().await;

    // Unknown method: Method not found.
    let r = c.request("tools/frobnicate", json!({})).await;
    assert_eq!(r["error"]["code"], -32601, "{r}");

    // Malformed JSON, invalid UTF-8: a Parse error with a null id. A huge
    // line: dropped unread and answered with Invalid Request.
    c.send_raw(b"{\"jsonrpc\": \"2.0\", \"id\": 5, \"method\n")
        .await;
    c.send_raw(
        b"{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"ping\",\"params\":{\"x\":\"\xff\xfe\"}}\n",
    )
    .await;
    let mut huge =
        b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\",\"params\":{\"pad\":\"".to_vec();
    huge.extend(std::iter::repeat_n(b'a', 200 * 1024));
    huge.extend(b"\"}}\n");
    c.send_raw(&huge).await;
    let pong = c.request("ping", json!({})).await;
    assert_eq!(pong["result"], json!({}), "{pong}");
    assert!(
        !c.notes.iter().any(|m| m["id"] == 7),
        "oversized message was served"
    );
    let null_id_errors: Vec<i64> = c
        .notes
        .iter()
        .filter(|m| m["id"].is_null() && m.get("error").is_some())
        .map(|m| m["error"]["code"].as_i64().unwrap())
        .collect();
    assert_eq!(null_id_errors, [-32700, -32700, -32600], "{:?}", c.notes);
    c.notes.clear();

    // Valid JSON of the wrong shape: an Invalid Request error.
    for bad in [
        json!({"jsonrpc": "2.0", "id": 8}),
        json!([1, 2]),
        json!(42),
        json!({"jsonrpc": "1.0", "id": 9, "method": "ping"}),
    ] {
        c.send(bad).await;
    }
    let pong = c.request("ping", json!({})).await;
    assert_eq!(pong["result"], json!({}), "{pong}");
    let errors = c
        .notes
        .iter()
        .filter(|m| m["error"]["code"] == -32600)
        .count();
    assert!(errors >= 1, "no Invalid Request error: {:?}", c.notes);
    // The two that are not objects (a batch array, a number): each its own
    // Invalid Request, with the `"id": null` member JSON-RPC 2.0 requires
    // (absent is not null).
    let null_id = c
        .notes
        .iter()
        .filter(|m| m["error"]["code"] == -32600 && m.get("id") == Some(&Value::Null))
        .count();
    assert_eq!(null_id, 2, "{:?}", c.notes);

    // Wrong params on a real method: Invalid params, not a crash.
    let r = c
        .request("tools/call", json!({"arguments": {"text": "no name"}}))
        .await;
    assert!(r.get("error").is_some(), "{r}");
    let pong = c.request("ping", json!({})).await;
    assert_eq!(pong["result"], json!({}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_tool_file_sends_list_changed_and_a_half_written_one_is_not_served() {
    let tmp = dir("reload");
    let d = tmp.path().to_path_buf();
    let host = FakeHost::new(&d);
    let (mut c, s, _t) = wire::start(host, config());
    c.initialize().await;
    let _reloader = toolcage::mcp::reload::start(s.clone()).unwrap();
    // Let the watch settle and the server register the client.
    let t0 = std::time::Instant::now();
    while s.client_count() == 0 {
        assert!(t0.elapsed() < wire::WAIT);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // A half-written file (content not "ok") changes nothing: no notification.
    std::fs::write(d.join("partial"), "o").unwrap();
    assert!(
        !c.sees_note_within(
            "notifications/tools/list_changed",
            Duration::from_millis(800)
        )
        .await
    );

    std::fs::write(d.join("new"), "ok").unwrap();
    c.wait_note("notifications/tools/list_changed").await;
    let l = c.request("tools/list", json!({})).await;
    let names: Vec<&str> = l["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"file_new"), "{names:?}");
    assert!(!names.contains(&"file_partial"), "{names:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_eof_ends_the_server() {
    let tmp = dir("eof");
    let d = tmp.path().to_path_buf();
    let (mut c, _s, t) = wire::start(FakeHost::new(&d), config());
    c.initialize().await;
    c.close_input().await;
    let r = tokio::time::timeout(wire::WAIT, t).await;
    assert!(matches!(r, Ok(Ok(Ok(())))), "{r:?}");
}

/// Refuses `sleep`, allows the rest, and counts what it was asked to record.
#[derive(Default)]
struct RefuseSleep {
    finished: std::sync::Mutex<Vec<(String, bool)>>,
}

impl Gatekeeper for RefuseSleep {
    fn decide<'a>(
        &'a self,
        call: &'a toolcage::call::PreparedCall,
        _session: &'a toolcage::gate::SessionId,
        _channel: &'a dyn toolcage::gate::ApprovalChannel,
    ) -> toolcage::gate::BoxFuture<'a, toolcage::gate::Verdict> {
        use toolcage::gate::{Approval, DenyReason, GateDenial, Permit, Refusal, Verdict};
        let name = call.tool.name.clone();
        Box::pin(async move {
            if name == "sleep" {
                Verdict::Denied(GateDenial::new(
                    DenyReason::Approval(Refusal::Declined),
                    format!("{name}: approval refused by the operator"),
                ))
            } else {
                Verdict::Allowed(Permit::without_slot(Approval::NotNeeded))
            }
        })
    }

    fn reject(&self, rejected: &toolcage::gate::Rejected<'_>) -> Result<(), String> {
        self.finished
            .lock()
            .unwrap()
            .push((format!("rejected {}", rejected.name), false));
        Ok(())
    }

    fn record(&self, entry: &toolcage::gate::CallEvent<'_>) -> Result<(), String> {
        use toolcage::gate::{Ran, Verdict};
        if let Ran::Starting = entry.ran {
            return Ok(());
        }
        let ran = matches!(entry.ran, Ran::Finished { .. });
        assert_eq!(ran, matches!(entry.verdict, Verdict::Allowed(_)));
        self.finished
            .lock()
            .unwrap()
            .push((entry.call.tool.name.clone(), ran));
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_refusal_is_an_error_result_and_nothing_runs() {
    let tmp = dir("gate");
    let d = tmp.path().to_path_buf();
    let host = FakeHost::new(&d);
    let gate = std::sync::Arc::new(RefuseSleep::default());
    let server = toolcage::mcp::McpServer::new(host.clone(), config()).with_gate(gate.clone());
    let (mut c, _s, _t) = wire::serve(server);
    c.initialize().await;
    let r = c
        .request(
            "tools/call",
            json!({"name": "sleep", "arguments": {"secs": 5}}),
        )
        .await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(text(&r["result"]).contains("approval refused"), "{r}");
    assert_eq!(host.max_running.load(Ordering::SeqCst), 0, "the tool ran");
    let ok = c
        .request(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "through"}}),
        )
        .await;
    assert_eq!(text(&ok["result"]), "through", "{ok}");
    let unknown = c
        .request("tools/call", json!({"name": "nope", "arguments": {}}))
        .await;
    assert!(unknown["error"].is_object(), "{unknown}");
    // Every call reached the gate's record before its result came back.
    assert_eq!(
        *gate.finished.lock().unwrap(),
        vec![
            ("sleep".to_string(), false),
            ("echo".to_string(), true),
            ("rejected nope".to_string(), false)
        ]
    );
}

/// Allows everything but leaves `sleep`'s approval pending forever (a person
/// who never answers), and records what it is asked to record.
#[derive(Default)]
struct NeverAnswers(RefuseSleep);

impl Gatekeeper for NeverAnswers {
    fn decide<'a>(
        &'a self,
        call: &'a toolcage::call::PreparedCall,
        session: &'a toolcage::gate::SessionId,
        channel: &'a dyn toolcage::gate::ApprovalChannel,
    ) -> toolcage::gate::BoxFuture<'a, toolcage::gate::Verdict> {
        if call.tool.name == "sleep" {
            return Box::pin(std::future::pending());
        }
        self.0.decide(call, session, channel)
    }

    fn reject(&self, rejected: &toolcage::gate::Rejected<'_>) -> Result<(), String> {
        assert!(
            rejected.message.contains("went away"),
            "{}",
            rejected.message
        );
        self.0.reject(rejected)
    }

    fn record(&self, entry: &toolcage::gate::CallEvent<'_>) -> Result<(), String> {
        self.0.record(entry)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_client_goes_away_before_it_runs_is_still_recorded() {
    let tmp = dir("gone");
    let d = tmp.path().to_path_buf();
    let host = FakeHost::new(&d);
    let gate = std::sync::Arc::new(NeverAnswers::default());
    let server = toolcage::mcp::McpServer::new(host.clone(), config()).with_gate(gate.clone());
    let (mut c, _s, t) = wire::serve(server);
    c.initialize().await;
    // Control: a call that runs is recorded once, as having run.
    let ok = c
        .request(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "ran"}}),
        )
        .await;
    assert_eq!(text(&ok["result"]), "ran", "{ok}");
    // The pending call: the client disconnects while approval is pending.
    c.send(json!({"jsonrpc": "2.0", "id": 77, "method": "tools/call",
                  "params": {"name": "sleep", "arguments": {"secs": 5}}}))
        .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    c.close_input().await;
    let r = tokio::time::timeout(wire::WAIT, t).await;
    assert!(matches!(r, Ok(Ok(_))), "{r:?}");
    let deadline = std::time::Instant::now() + wire::WAIT;
    while gate.0.finished.lock().unwrap().len() < 2 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        *gate.0.finished.lock().unwrap(),
        vec![
            ("echo".to_string(), true),
            ("rejected sleep".to_string(), false)
        ]
    );
    assert_eq!(
        host.max_running.load(Ordering::SeqCst),
        1,
        "sleep never ran"
    );
}
