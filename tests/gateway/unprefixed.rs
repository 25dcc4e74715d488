//! `[upstreams.NAME] prefix = false`: a server's tools, prompts and
//! resources under their own names (for hosts that front one server); a
//! name another tool has is not offered, and `upstreams` names both.

use crate::gateway_support;

use gateway_support::{Fixture, text};
use serde_json::json;

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
    // Control: prefixed, the server's echo is offered beside the local one.
    f.write_outside("policy.toml", "");
    let (code, out, err) = f.run(&["call", "fx__echo", "text=upstream"]);
    assert_eq!((code, out.as_str()), (0, "upstream\n"), "{err}");
}
