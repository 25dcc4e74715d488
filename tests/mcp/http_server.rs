//! Streamable HTTP: sessions, Origin and Host validation, the body limit,
//! broken bodies, and one client's bad input not disturbing another's
//! session. Fake host; raw HTTP so every header and byte is under control.

use crate::mcp_support;
use crate::serve_http::{ACCEPT, JSON};

use mcp_support::FakeHost;
use mcp_support::http::{Reply, post, request};
use serde_json::{Value, json};
use std::net::SocketAddr;
use tokio_util::sync::CancellationToken;
use toolcage::mcp::auth::{Auth, Token};
use toolcage::mcp::{McpServer, ServeConfig};

/// Every server here requires this bearer token (the auth tests themselves
/// run the binary: tests/mcp/http_auth.rs).
const TOKEN: &str = "mcp-http-test-token";
const AUTH: (&str, &str) = ("Authorization", "Bearer mcp-http-test-token");

struct Running {
    addr: SocketAddr,
    stop: CancellationToken,
    dir: std::path::PathBuf,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.cancel();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn start(tag: &str, max_message_bytes: usize) -> Running {
    let config = ServeConfig {
        max_message_bytes,
        ..ServeConfig::default()
    };
    start_with(tag, config).await
}

async fn start_with(tag: &str, config: ServeConfig) -> Running {
    let d = std::env::temp_dir().join(format!("tc-mcp-http-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let server = McpServer::new(FakeHost::new(&d), config);
    let listener = toolcage::mcp::http::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    tokio::spawn(toolcage::mcp::http::serve_http(
        server,
        listener,
        Auth::Bearer(Token::new(TOKEN).unwrap()),
        stop.clone(),
    ));
    Running { addr, stop, dir: d }
}

fn init_body() -> Vec<u8> {
    serde_json::to_vec(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "http-test", "version": "0"}}}),
    )
    .unwrap()
}

/// initialize + initialized; returns the session id.
async fn session(addr: SocketAddr) -> String {
    let r = post(addr, &[AUTH, ACCEPT, JSON], &init_body()).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let sid = r
        .header("mcp-session-id")
        .expect("no Mcp-Session-Id")
        .to_string();
    let m = r.messages();
    assert_eq!(
        m[0]["result"]["capabilities"]["tools"]["listChanged"], true,
        "{m:?}"
    );
    let n = post(
        addr,
        &[
            AUTH,
            ACCEPT,
            JSON,
            ("Mcp-Session-Id", &sid),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await;
    assert_eq!(n.status, 202, "{}", n.body);
    sid
}

async fn rpc(addr: SocketAddr, sid: &str, id: i64, method: &str, params: Value) -> Value {
    let body = serde_json::to_vec(
        &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
    )
    .unwrap();
    let r = send(addr, sid, &body).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.messages()
        .into_iter()
        .find(|m| m["id"] == id)
        .unwrap_or_else(|| panic!("no response to {id}: {}", r.body))
}

async fn send(addr: SocketAddr, sid: &str, body: &[u8]) -> Reply {
    post(
        addr,
        &[
            AUTH,
            ACCEPT,
            JSON,
            ("Mcp-Session-Id", sid),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        body,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_list_and_call() {
    let s = start("basic", 1 << 20).await;
    let sid = session(s.addr).await;
    let l = rpc(s.addr, &sid, 2, "tools/list", json!({})).await;
    assert!(l["result"]["tools"].as_array().unwrap().len() > 3, "{l}");
    let c = rpc(
        s.addr,
        &sid,
        3,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "over http"}}),
    )
    .await;
    assert_eq!(c["result"]["content"][0]["text"], "over http", "{c}");
    let e = rpc(s.addr, &sid, 4, "tools/call", json!({"name": "fail"})).await;
    assert_eq!(e["result"]["isError"], true, "{e}");
    let u = rpc(s.addr, &sid, 5, "tools/call", json!({"name": "nope"})).await;
    assert_eq!(u["error"]["code"], -32602, "{u}");

    // An unknown session is refused; a deleted one too.
    let r = send(
        s.addr,
        "no-such-session",
        br#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#,
    )
    .await;
    assert_eq!(r.status, 404, "{}", r.body);
    let d = request(s.addr, "DELETE", &[AUTH, ("Mcp-Session-Id", &sid)], b"").await;
    assert!(d.status < 300, "DELETE: {} {}", d.status, d.body);
    let r = send(
        s.addr,
        &sid,
        br#"{"jsonrpc":"2.0","id":10,"method":"ping"}"#,
    )
    .await;
    assert_eq!(r.status, 404, "{}", r.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn origin_and_host_are_validated() {
    let s = start("origin", 1 << 20).await;
    let evil = post(
        s.addr,
        &[AUTH, ACCEPT, JSON, ("Origin", "http://evil.example")],
        &init_body(),
    )
    .await;
    assert_eq!(evil.status, 403, "{}", evil.body);
    let local = post(
        s.addr,
        &[AUTH, ACCEPT, JSON, ("Origin", "http://localhost:6274")],
        &init_body(),
    )
    .await;
    assert_eq!(local.status, 200, "{}", local.body);
    let rebind = post(
        s.addr,
        &[AUTH, ACCEPT, JSON, ("Host", "attacker.example:80")],
        &init_body(),
    )
    .await;
    assert!(
        (400..500).contains(&rebind.status),
        "Host attacker.example accepted: {} {}",
        rebind.status,
        rebind.body
    );
    let other_path = request(s.addr, "GET", &[AUTH], b"").await;
    assert!(other_path.status >= 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bodies_are_refused_and_other_sessions_keep_working() {
    let s = start("bad", 64 * 1024).await;
    let good = session(s.addr).await;
    let victim = session(s.addr).await;

    // Over the limit: 413, whether or not a session is given.
    let huge = vec![b' '; 256 * 1024];
    let r = send(s.addr, &victim, &huge).await;
    assert_eq!(r.status, 413, "{}", r.body);

    // Not JSON, invalid UTF-8: 400 with a Parse error.
    for body in [
        &b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"meth"[..],
        &b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\",\"params\":{\"a\":\"\xff\"}}"[..],
    ] {
        let r = send(s.addr, &victim, body).await;
        assert_eq!(r.status, 400, "{}", r.body);
        let e: Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(e["error"]["code"], -32700, "{e}");
        assert!(e["id"].is_null(), "{e}");
    }

    // Not JSON, invalid UTF-8, wrong shapes: an error status or a JSON-RPC error.
    for body in [
        &b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"meth"[..],
        &b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\",\"params\":{\"a\":\"\xff\"}}"[..],
        &b"[1,2,3]"[..],
        &b"{\"jsonrpc\":\"2.0\",\"id\":3}"[..],
        &b"42"[..],
    ] {
        let r = send(s.addr, &victim, body).await;
        let rpc_error = r.messages().iter().any(|m| m.get("error").is_some());
        assert!(
            r.status >= 400 || rpc_error,
            "{:?} accepted: {} {}",
            String::from_utf8_lossy(body),
            r.status,
            r.body
        );
    }
    let u = rpc(s.addr, &victim, 11, "no/such/method", json!({})).await;
    assert_eq!(u["error"]["code"], -32601, "{u}");

    // The other client is unaffected.
    let p = rpc(s.addr, &good, 12, "ping", json!({})).await;
    assert_eq!(p["result"], json!({}), "{p}");
    let c = rpc(
        s.addr,
        &good,
        13,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "still here"}}),
    )
    .await;
    assert_eq!(c["result"]["content"][0]["text"], "still here", "{c}");
}

/// JSON that is not a JSON-RPC message is an Invalid Request (-32600) with
/// `"id": null`; only a body that is not JSON at all is a Parse error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_that_is_not_a_message_is_an_invalid_request_with_id_null() {
    let s = start("invalid", 64 * 1024).await;
    let sid = session(s.addr).await;
    for body in [
        &b"[]"[..],
        b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]",
        b"\"x\"",
        b"1",
        b"null",
        b"true",
    ] {
        let shown = String::from_utf8_lossy(body);
        let r = send(s.addr, &sid, body).await;
        assert_eq!(r.status, 400, "{shown}: {}", r.body);
        let e: Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(e["error"]["code"], -32600, "{shown}: {e}");
        assert_eq!(e.get("id"), Some(&Value::Null), "{shown}: {e}");
        assert_eq!(e["jsonrpc"], "2.0", "{e}");
    }
    // An object that is not a message keeps its id.
    let r = send(s.addr, &sid, br#"{"jsonrpc":"2.0","id":3}"#).await;
    let e: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(
        (e["error"]["code"].clone(), e["id"].clone()),
        (json!(-32600), json!(3)),
        "{e}"
    );
    // Control: a body that is not JSON is still a Parse error, and the
    // session still answers.
    let r = send(s.addr, &sid, b"[1,").await;
    let e: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(e["error"]["code"], -32700, "{e}");
    let p = rpc(s.addr, &sid, 7, "ping", json!({})).await;
    assert_eq!(p["result"], json!({}), "{p}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_beyond_the_cap_are_refused_until_one_ends() {
    let config = ServeConfig {
        max_sessions: 2,
        ..ServeConfig::default()
    };
    let s = start_with("cap", config).await;
    let a = session(s.addr).await;
    let b = session(s.addr).await;
    let r = post(s.addr, &[AUTH, ACCEPT, JSON], &init_body()).await;
    assert_eq!(r.status, 503, "{}", r.body);
    let e: Value = serde_json::from_str(&r.body).unwrap();
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--max-sessions"),
        "{e}"
    );
    // The open sessions keep working.
    let p = rpc(s.addr, &b, 2, "ping", json!({})).await;
    assert_eq!(p["result"], json!({}), "{p}");
    // Control: once one ends, a new session opens.
    let d = request(s.addr, "DELETE", &[AUTH, ("Mcp-Session-Id", &a)], b"").await;
    assert!(d.status < 300, "DELETE: {} {}", d.status, d.body);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let r = post(s.addr, &[AUTH, ACCEPT, JSON], &init_body()).await;
        if r.status == 200 {
            break;
        }
        assert_eq!(r.status, 503, "{}", r.body);
        assert!(
            std::time::Instant::now() < deadline,
            "no session after DELETE"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
