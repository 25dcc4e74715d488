//! toolcage never reaches the network (or reads a file) on a tool's behalf:
//! a clawd tool whose parameters schema has a `$ref` to a URL is a `check`
//! error naming the file and is not loaded, so `call` cannot run it, and
//! the URL's listener sees no connection. Control: a local
//! `#/definitions/...` reference loads and validates.

use crate::common;

use common::{Project, toolcage};
use std::net::TcpListener;
use std::process::Output;

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A clawd tool `<id>` whose `parameters` is `parameters` (JSON text); its
/// script prints what it got.
fn clawd_tool(p: &Project, id: &str, parameters: &str) {
    p.write(
        &format!(".clawd/tools/{id}/tool.json"),
        &format!(
            "{{\n  \"name\": \"{id}\",\n  \"description\": \"schema refs\",\n  \
             \"entrypoint\": \"run.sh\",\n  \"parameters\": {parameters}\n}}\n"
        ),
    );
    p.write(
        &format!(".clawd/tools/{id}/run.sh"),
        "#!/bin/sh\necho \"got $(cat)\"\n",
    );
}

#[test]
fn a_remote_ref_is_a_check_error_and_is_never_fetched() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}/x.json");
    let p = Project::new("schema-remote-ref");
    // The $ref is on line 7 of tool.json.
    clawd_tool(
        &p,
        "fetchy",
        &format!(
            "{{\"type\": \"object\",\n    \"properties\": {{\"u\":\n      {{\"$ref\": \"{url}\"}}}}}}"
        ),
    );
    clawd_tool(
        &p,
        "nested",
        &format!("{{\"u\": {{\"type\": \"array\", \"items\": {{\"$ref\": \"{url}#/a\"}}}}}}"),
    );

    let o = toolcage(&p, &["check"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out
        .lines()
        .find(|l| l.contains(".clawd/tools/fetchy/tool.json:7:"))
        .unwrap_or_else(|| panic!("no error naming tool.json:7 in\n{}", text(&o)));
    assert!(line.starts_with("error"), "{line}");
    assert!(line.contains(&url), "{line}");
    assert!(
        line.contains("inline the definition under definitions/$defs and use a local #/ reference"),
        "{line}"
    );
    assert!(
        out.contains(".clawd/tools/nested/tool.json"),
        "{}",
        text(&o)
    );

    for tool in ["ct_fetchy", "ct_nested"] {
        let o = toolcage(&p, &["call", tool, "u=x"]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("unknown tool"),
            "{}",
            text(&o)
        );
        assert!(!String::from_utf8_lossy(&o.stdout).contains("got"));
    }
    // `list` and `schema` load the catalog too.
    let o = toolcage(&p, &["list"]);
    assert!(
        !String::from_utf8_lossy(&o.stdout).contains("ct_fetchy"),
        "{}",
        text(&o)
    );
    let _ = toolcage(&p, &["schema"]);

    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        Ok((_, peer)) => panic!("toolcage connected to the $ref's address from {peer}"),
        Err(e) => panic!("accept: {e}"),
    }
}

#[test]
fn a_local_ref_loads_and_validates() {
    let p = Project::new("schema-local-ref");
    clawd_tool(
        &p,
        "paint",
        r##"{"type": "object",
    "properties": {"color": {"$ref": "#/definitions/color"}},
    "required": ["color"],
    "definitions": {"color": {"type": "string", "enum": ["red", "green"]}}}"##,
    );
    let o = toolcage(&p, &["check"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = toolcage(&p, &["call", "ct_paint", "color=red"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "got {\"color\":\"red\"}\n",
        "{}",
        text(&o)
    );
    let o = toolcage(&p, &["call", "ct_paint", "color=blue"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("color"),
        "{}",
        text(&o)
    );
    let o = toolcage(&p, &["call", "ct_paint"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}
