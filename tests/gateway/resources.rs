//! Upstream servers' resources through the gateway, over `toolcage serve`:
//! listed with the server in their names and their URIs unchanged, each
//! read routed to the server that listed it (an unknown URI is an error)
//! and passed through the gate: `[upstreams.NAME] resources` (`deny`
//! refuses what `allow` serves; `approve` asks), the server's rate limit,
//! its stdout cap, and an audit record with the URI, size and digest.

use crate::gateway_support;

use gateway_support::Fixture;
use serde_json::{Value, json};

fn audit(f: &Fixture) -> Vec<Value> {
    let (code, out, err) = f.run(&["audit", "--json"]);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The final records of resource reads (`fx/resources/read`).
fn reads(f: &Fixture) -> Vec<Value> {
    audit(f)
        .into_iter()
        .filter(|r| r["tool"] == "fx/resources/read" && r.get("phase").is_none())
        .collect()
}

/// The fixture logging what it is asked to `out/log` (its grant writes
/// there), with `section` in its `[upstreams.fx]`.
fn logging(tag: &str, section: &str) -> Fixture {
    let policy = format!(
        "[upstreams.fx]\n{section}\n[upstreams.fx.fs]\nadd_write = [\"{{project}}/out\"]\n"
    );
    let f = Fixture::new(tag, json!({}), &policy);
    std::fs::create_dir(f.dir.path().join("out")).unwrap();
    let log = f.root().join("out/log").to_string_lossy().to_string();
    f.set_server(f.server_with(json!({"FX_LOG": log}), &[]));
    f
}

fn read(s: &mut gateway_support::Serve, uri: &str) -> Value {
    s.request("resources/read", json!({"uri": uri}))
}

fn text_of(r: &Value) -> String {
    r["result"]["contents"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn resources_are_listed_with_the_server_and_read_from_the_server_that_listed_them() {
    let f = Fixture::new("res-allow", json!({}), "");
    let mut s = f.serve();
    let listed = s.request("resources/list", json!({}));
    let items = listed["result"]["resources"].as_array().unwrap().clone();
    let hello = items
        .iter()
        .find(|r| r["uri"] == "fx://notes/hello")
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(hello["name"], "fx__hello", "{hello}");
    let templates = s.request("resources/templates/list", json!({}));
    let names: Vec<&str> = templates["result"]["resourceTemplates"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"fx__note"), "{templates}");

    // A listed URI, a blob, and one of a template: as the server sent them.
    let r = read(&mut s, "fx://notes/hello");
    assert_eq!(text_of(&r), "note hello", "{r}");
    let r = read(&mut s, "fx://bin/logo");
    assert_eq!(r["result"]["contents"][0]["blob"], "iVBORw0KGgo=", "{r}");
    let r = read(&mut s, "fx://notes/other");
    assert_eq!(text_of(&r), "note other", "{r}");
    // An URI no server listed or templates: an error, never a guess.
    let r = read(&mut s, "elsewhere://x");
    assert_eq!(r["error"]["code"], -32002, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not one an upstream server listed"),
        "{r}"
    );
    drop(s);

    // Each read is recorded: server, URI, bytes, digest of what passed.
    let recs = reads(&f);
    assert_eq!(recs.len(), 3, "{recs:?}");
    let first = &recs[0];
    assert_eq!(first["upstream"]["server"], "fx", "{first}");
    assert_eq!(first["args"]["uri"], "fx://notes/hello", "{first}");
    assert_eq!(first["stdout"]["kept"], "note hello".len(), "{first}");
    assert_eq!(
        first["content"]["sha256"].as_str().map(str::len),
        Some(64),
        "{first}"
    );
    assert_eq!(recs[1]["content"]["resource"]["kept"], 12, "{}", recs[1]);
}

#[test]
fn a_denied_servers_resources_are_not_listed_and_a_read_is_refused() {
    let f = logging("res-deny", "resources = \"deny\"\n");
    let log = f.root().join("out/log");
    let mut s = f.serve();
    let listed = s.request("resources/list", json!({}));
    assert_eq!(listed["result"]["resources"], json!([]), "{listed}");
    let templates = s.request("resources/templates/list", json!({}));
    assert_eq!(
        templates["result"]["resourceTemplates"],
        json!([]),
        "{templates}"
    );
    // Not listed, and a read of one of its URIs is refused by the gate
    // (the server is never asked to read it).
    let r = read(&mut s, "fx://notes/hello");
    assert_eq!(r["error"]["data"]["toolcage/denial"], "grant_denied", "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("resources = \"deny\""),
        "{r}"
    );
    assert!(text_of(&r).is_empty(), "{r}");
    // A URI no server has is still not found (and not recorded).
    let r = read(&mut s, "elsewhere://x");
    assert_eq!(r["error"]["code"], -32002, "{r}");
    // Nor through tools/call under the read's internal name.
    let r = s.request(
        "tools/call",
        json!({"name": "fx/resources/read", "arguments": {"uri": "fx://notes/hello"}}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let asked = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!asked.contains("resources/read"), "{asked}");
    // The tools of the same server still run.
    let r = s.call("fx__echo", json!({"text": "still here"}));
    assert_eq!(r["content"][0]["text"], "still here", "{r}");
    drop(s);
    // The refused read left its record: the server's read, the URI, why.
    let recs = reads(&f);
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert_eq!(recs[0]["args"]["uri"], "fx://notes/hello", "{}", recs[0]);
    assert_eq!(recs[0]["decision"]["kind"], "denied", "{}", recs[0]);
    assert!(recs[0].to_string().contains("grant_denied"), "{}", recs[0]);
    // Control: the same read with `allow` is served (the test above), and
    // with the default (no section) too, recorded as allowed.
    let f = logging("res-default", "");
    let log = f.root().join("out/log");
    let mut s = f.serve();
    assert_eq!(text_of(&read(&mut s, "fx://notes/hello")), "note hello");
    drop(s);
    let asked = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(asked.contains("resources/read fx://notes/hello"), "{asked}");
    let recs = reads(&f);
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert_ne!(recs[0]["decision"]["kind"], "denied", "{}", recs[0]);
}

#[test]
fn an_approve_servers_read_asks_and_runs_only_when_accepted() {
    let f = Fixture::new(
        "res-approve",
        json!({}),
        "[upstreams.fx]\nresources = \"approve\"\n",
    );
    let mut s = f.serve_answering(Some("decline"));
    let r = read(&mut s, "fx://notes/hello");
    assert_eq!(s.asked.len(), 1, "{r}");
    assert!(s.asked[0].contains("fx/resources/read"), "{:?}", s.asked);
    assert!(r.get("error").is_some(), "{r}");
    assert_eq!(
        r["error"]["data"]["toolcage/denial"], "approval_declined",
        "{r}"
    );
    // Control: accepted, the same read is served.
    s.answer_with("accept");
    let r = read(&mut s, "fx://notes/hello");
    assert_eq!(s.asked.len(), 2, "{r}");
    assert_eq!(text_of(&r), "note hello", "{r}");
    drop(s);
    let recs = reads(&f);
    assert_eq!(recs.len(), 2, "{recs:?}");
    assert_eq!(recs[0]["decision"]["kind"], "denied", "{}", recs[0]);
    // Control: `allow` asks nothing.
    let f = Fixture::new("res-noask", json!({}), "");
    let mut s = f.serve_answering(Some("decline"));
    assert_eq!(text_of(&read(&mut s, "fx://notes/hello")), "note hello");
    assert!(s.asked.is_empty(), "{:?}", s.asked);
}

#[test]
fn reads_share_the_servers_rate_limit_and_stdout_cap() {
    let policy = "[upstreams.fx.rate_limit]\nrequests = 2\nwindow = \"1h\"\n\n\
                  [upstreams.fx.limits]\nstdout = \"1KiB\"\n";
    let f = Fixture::new("res-limits", json!({}), policy);
    let mut s = f.serve();
    // Under the cap: whole (the control); over it: cut with the marker.
    let r = read(&mut s, "fx://big/500");
    assert_eq!(text_of(&r).len(), 500, "{r}");
    let r = read(&mut s, "fx://big/100000");
    let t = text_of(&r);
    assert!(t.len() < 2048, "{} bytes", t.len());
    assert!(t.contains("TRUNCATED"), "{t:.200}");
    // The third read in the window is refused.
    let r = read(&mut s, "fx://notes/hello");
    assert_eq!(r["error"]["data"]["toolcage/denial"], "rate_limited", "{r}");
    drop(s);
    let recs = reads(&f);
    assert!(
        recs[1]["stdout"]["omitted"].as_u64().unwrap() > 90_000,
        "{}",
        recs[1]
    );
}

/// The `notifications/resources/updated` the client got, by URI.
fn updates(s: &gateway_support::Serve, uri: &str) -> usize {
    s.notifications
        .iter()
        .filter(|n| n["method"] == "notifications/resources/updated" && n["params"]["uri"] == uri)
        .count()
}

/// Wait until the client got an update of `uri`.
fn wait_update(s: &mut gateway_support::Serve, uri: &str) {
    for _ in 0..100 {
        if updates(s, uri) > 0 {
            return;
        }
        s.wait_for("never/arrives", std::time::Duration::from_millis(100));
    }
    panic!("no update of {uri}: {:?}", s.notifications);
}

#[test]
fn updates_reach_the_client_only_for_what_it_subscribed_to() {
    let f = logging("res-sub", "");
    let mut s = f.serve();
    let r = s.request("resources/subscribe", json!({"uri": "fx://notes/hello"}));
    assert!(r.get("result").is_some(), "{r}");
    // Control first: an update of a URI not subscribed is dropped; the
    // subscribed one (sent after it) reaches the client.
    s.call("fx__touch", json!({"uri": "fx://notes/other"}));
    s.call("fx__touch", json!({"uri": "fx://notes/hello"}));
    wait_update(&mut s, "fx://notes/hello");
    assert_eq!(updates(&s, "fx://notes/other"), 0, "{:?}", s.notifications);
    assert!(s.wait_for(
        "notifications/resources/list_changed",
        std::time::Duration::from_secs(30)
    ));
    // Unsubscribed: no more updates of it (a subscribed sentinel's update
    // comes after).
    let r = s.request("resources/unsubscribe", json!({"uri": "fx://notes/hello"}));
    assert!(r.get("result").is_some(), "{r}");
    s.request("resources/subscribe", json!({"uri": "fx://notes/sentinel"}));
    s.call("fx__touch", json!({"uri": "fx://notes/hello"}));
    s.call("fx__touch", json!({"uri": "fx://notes/sentinel"}));
    wait_update(&mut s, "fx://notes/sentinel");
    assert_eq!(updates(&s, "fx://notes/hello"), 1, "{:?}", s.notifications);
    drop(s);
    let asked = std::fs::read_to_string(f.root().join("out/log")).unwrap_or_default();
    assert!(
        asked.contains("resources/subscribe fx://notes/hello"),
        "{asked}"
    );
    assert!(
        asked.contains("resources/unsubscribe fx://notes/hello"),
        "{asked}"
    );

    // A denied server: subscribing is refused and the server never asked.
    let f = logging("res-sub-deny", "resources = \"deny\"\n");
    let mut s = f.serve();
    let r = s.request("resources/subscribe", json!({"uri": "fx://notes/hello"}));
    assert_eq!(r["error"]["code"], -32002, "{r}");
    s.call("fx__touch", json!({"uri": "fx://notes/hello"}));
    s.call("fx__echo", json!({"text": "x"}));
    assert!(
        !s.notifications
            .iter()
            .any(|n| n["method"] == "notifications/resources/list_changed"),
        "{:?}",
        s.notifications
    );
    drop(s);
    let asked = std::fs::read_to_string(f.root().join("out/log")).unwrap_or_default();
    assert!(!asked.contains("resources/subscribe"), "{asked}");
}
