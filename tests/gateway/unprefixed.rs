//! `[upstreams.NAME] prefix = false`: a server's tools, prompts and
//! resources under their own names (for hosts that front one server); a
//! name another tool has is not offered, `upstreams` names both, and it is
//! an error (`check` fails, `serve` logs it when it starts the server).

use crate::gateway_support;

use gateway_support::{Fixture, text};
use serde_json::{Value, json};

fn listed(s: &mut gateway_support::Serve, method: &str, key: &str) -> Vec<String> {
    let r = s.request(method, json!({}));
    r["result"][key]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"))
        .iter()
        .filter_map(|p| p["name"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn an_unprefixed_server_is_offered_under_its_own_names() {
    let f = Fixture::new("unprefixed", json!({}), "[upstreams.fx]\nprefix = false\n");
    let mut s = f.serve();
    let tools = s.tools();
    assert!(tools.contains(&"echo".to_string()), "{tools:?}");
    assert!(!tools.iter().any(|t| t.starts_with("fx__")), "{tools:?}");
    let r = s.call("echo", json!({"text": "own name"}));
    assert_eq!(text(&r), "own name", "{r}");
    let resources = listed(&mut s, "resources/list", "resources");
    assert!(resources.contains(&"hello".to_string()), "{resources:?}");
    let prompts = listed(&mut s, "prompts/list", "prompts");
    assert!(prompts.contains(&"greet".to_string()), "{prompts:?}");
    let r = s.request(
        "prompts/get",
        json!({"name": "greet", "arguments": {"name": "Ann"}}),
    );
    assert_eq!(
        r["result"]["messages"][0]["content"]["text"], "Hello Ann",
        "{r}"
    );
    drop(s);
    // Control: without the setting the same server's names carry it.
    let f = Fixture::new("prefixed", json!({}), "");
    let mut s = f.serve();
    let tools = s.tools();
    assert!(tools.contains(&"fx__echo".to_string()), "{tools:?}");
    assert!(!tools.contains(&"echo".to_string()), "{tools:?}");
    let prompts = listed(&mut s, "prompts/list", "prompts");
    assert!(prompts.contains(&"fx__greet".to_string()), "{prompts:?}");
}

#[test]
fn an_unprefixed_name_a_local_tool_has_is_an_error_naming_both() {
    let f = Fixture::new(
        "unprefixed-clash",
        json!({}),
        "[upstreams.fx]\nprefix = false\n",
    );
    let local = f.write(
        ".agents/tools/echo",
        "#!/bin/sh\n# @description local echo\necho local\n",
    );
    std::process::Command::new("chmod")
        .arg("755")
        .arg(&local)
        .status()
        .unwrap();
    let (_, up, err) = f.run(&["upstreams"]);
    assert!(
        up.contains("not offered: echo (echo)")
            && up.contains("is also the name of the local tool 'echo'")
            && up.contains("tool 'echo' of upstream server 'fx'"),
        "{up}{err}"
    );
    // The local tool keeps its name; the server's other tools are offered.
    let (code, out, _) = f.run(&["call", "echo"]);
    assert_eq!((code, out.as_str()), (0, "local\n"));
    let (code, out, err) = f.run(&["call", "counter"]);
    assert_eq!((code, out.as_str()), (0, "1\n"), "{err}");
    // An error of the operator's configuration: `check` names both and
    // fails; `serve` says so when it starts the server.
    let (code, out, err) = f.run(&["check"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.lines().any(|l| l.starts_with("error")
            && l.contains("tool 'echo' of upstream server 'fx'")
            && l.contains("the local tool 'echo'")),
        "{out}"
    );
    let logged = serve_stderr(&f, "tools/list");
    assert!(
        logged.lines().any(|l| l.contains("ERROR")
            && l.contains("tool 'echo' of upstream server 'fx'")
            && l.contains("the local tool 'echo'")),
        "{logged}"
    );
    // Control: prefixed, the server's echo is offered beside the local one,
    // and neither `check` nor `serve` reports an error.
    f.write_outside("policy.toml", "");
    let (code, out, err) = f.run(&["call", "fx__echo", "text=upstream"]);
    assert_eq!((code, out.as_str()), (0, "upstream\n"), "{err}");
    let (code, out, err) = f.run(&["check"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("prefix = false"), "{out}");
    let logged = serve_stderr(&f, "tools/list");
    assert!(!logged.contains("ERROR"), "{logged}");
}

/// What `serve` writes on stderr while a client initializes and sends
/// `method` (`tools/list`: the session starts the servers), until the
/// client leaves.
fn serve_stderr(f: &Fixture, method: &str) -> String {
    use std::io::Write;
    let mut c = f.toolcage(&["serve", "--no-watch"]);
    c.arg("--policy").arg(f.policy());
    c.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for m in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": method}),
    ] {
        writeln!(stdin, "{m}").unwrap();
    }
    // The answer to tools/list arrives once the servers are started.
    let stdout = child.stdout.take().unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stdout));
    while let Some(Ok(l)) = lines.next() {
        if l.contains("\"id\":2") {
            break;
        }
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `fx` and `gx`, both the fixture (`gx`'s tools named `g_...`, so only
/// their prompts share names), each with a prompt of its own
/// (`fx_only`, `gx_only`); `gx_prefix`: `gx`'s `prefix` setting.
fn two_servers(tag: &str, gx_prefix: bool) -> Fixture {
    let policy =
        format!("[upstreams.fx]\nprefix = false\n\n[upstreams.gx]\nprefix = {gx_prefix}\n");
    let f = Fixture::new(tag, json!({}), &policy);
    let fx = f.server_with(json!({"EXTRA_PROMPT": "fx_only"}), &[]);
    let gx = f.server_with(json!({"EXTRA_PROMPT": "gx_only", "TOOL_PREFIX": "g_"}), &[]);
    f.write(
        ".mcp.json",
        &json!({"mcpServers": {"fx": fx, "gx": gx}}).to_string(),
    );
    f
}

fn get(s: &mut gateway_support::Serve, name: &str) -> Value {
    s.request("prompts/get", json!({"name": name, "arguments": {}}))
}

#[test]
fn a_prompt_name_two_unprefixed_servers_share_is_an_error_and_neither_is_offered() {
    let f = two_servers("prompt-clash", false);
    // `check` names both servers' prompts and fails.
    let (code, out, err) = f.run(&["check"]);
    assert_eq!(code, 1, "{out}{err}");
    let errors: Vec<&str> = out.lines().filter(|l| l.starts_with("error")).collect();
    for (server, other) in [("fx", "gx"), ("gx", "fx")] {
        assert!(
            errors.iter().any(|l| l.contains(&format!(
                "prompt 'plain' of upstream server '{server}': its name 'plain' is also the name \
                 of prompt 'plain' of upstream server '{other}'"
            ))),
            "{out}"
        );
    }
    assert!(
        out.contains("set prefix = true in [upstreams.fx] or [upstreams.gx]"),
        "{out}"
    );
    // Only prompts collide: the tools do not.
    assert!(!errors.iter().any(|l| l.contains(" tool ")), "{out}");
    let (_, up, err) = f.run(&["upstreams"]);
    assert!(
        up.contains("not offered: prompt greet (greet)"),
        "{up}{err}"
    );
    // `serve` offers neither (not "the first one wins") and says why once.
    let mut s = f.serve();
    let prompts = listed(&mut s, "prompts/list", "prompts");
    for shared in ["greet", "plain", "long"] {
        assert!(!prompts.contains(&shared.to_string()), "{prompts:?}");
        let r = get(&mut s, shared);
        assert_eq!(r["error"]["code"], -32602, "{r}");
    }
    // Control: the prompts only one server has are offered and served.
    assert!(prompts.contains(&"fx_only".to_string()), "{prompts:?}");
    assert!(prompts.contains(&"gx_only".to_string()), "{prompts:?}");
    let r = get(&mut s, "gx_only");
    assert_eq!(
        r["result"]["messages"][0]["content"]["text"], "Extra gx_only",
        "{r}"
    );
    drop(s);
    let logged = serve_stderr(&f, "prompts/list");
    let clash: Vec<&str> = logged
        .lines()
        .filter(|l| l.contains("ERROR") && l.contains("its name 'greet'"))
        .collect();
    assert_eq!(clash.len(), 2, "{logged}");
    assert!(
        clash
            .iter()
            .all(|l| l.contains("'fx'") && l.contains("'gx'")),
        "{logged}"
    );

    // Control: `gx` prefixed, its prompts carry its name; nothing collides,
    // `check` passes and every prompt is offered.
    let f = two_servers("prompt-no-clash", true);
    let (code, out, err) = f.run(&["check"]);
    assert_eq!(code, 0, "{out}{err}");
    let mut s = f.serve();
    let prompts = listed(&mut s, "prompts/list", "prompts");
    for name in [
        "greet",
        "gx__greet",
        "plain",
        "gx__plain",
        "fx_only",
        "gx__gx_only",
    ] {
        assert!(prompts.contains(&name.to_string()), "{name}: {prompts:?}");
    }
    let r = get(&mut s, "plain");
    assert_eq!(
        r["result"]["messages"][0]["content"]["text"], "Just plain",
        "{r}"
    );
}
