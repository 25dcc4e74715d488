//! MCP annotations from the grant and the tool's declaration together, as
//! `toolcage schema` (and so `tools/list`) serves them.

use crate::common;

use common::Project;
use serde_json::{Value, json};
use std::process::Command;

const TOOLS: &str = r#"
[[tools]]
name = "sh_tool"
description = "A shell tool: declares nothing"
executor = "shell"
requires_approval = false
command = "echo x"

[[tools]]
name = "get_tool"
description = "An http GET"
executor = "http"
requires_approval = false
method = "GET"
url = "https://example.com/"

[[tools]]
name = "delete_tool"
description = "An http DELETE"
executor = "http"
requires_approval = false
method = "DELETE"
url = "https://example.com/x"
"#;

fn annotations(p: &Project, extra: &[&str], name: &str) -> Value {
    let o = Command::new(env!("CARGO_BIN_EXE_toolcage"))
        .arg("-C")
        .arg(&p.dir)
        .arg("schema")
        .args(extra)
        .arg(name)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    v["annotations"].clone()
}

#[test]
fn a_read_only_grant_is_not_destructive_and_a_writable_one_is_unless_declared() {
    let p = Project::new("annotations");
    p.write("tools.toml", TOOLS);
    // The default profile: the project is writable, the tool declares
    // nothing: it may destroy.
    assert_eq!(
        annotations(&p, &[], "sh_tool"),
        json!({"readOnlyHint": false, "destructiveHint": true, "openWorldHint": false})
    );
    // The same tool with a read-only grant from the operator.
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[tools.sh_tool.fs]\nwrite = [\"/dev/null\"]\n").unwrap();
    let ro = ["--policy", policy.to_str().unwrap()];
    assert_eq!(
        annotations(&p, &ro, "sh_tool"),
        json!({"readOnlyHint": true, "destructiveHint": false, "openWorldHint": false})
    );
    // An http tool writes no file whatever the grant: its method decides.
    assert_eq!(
        annotations(&p, &[], "get_tool"),
        json!({"readOnlyHint": true, "destructiveHint": false,
               "idempotentHint": true, "openWorldHint": false})
    );
    let delete = annotations(&p, &["--allow-net"], "delete_tool");
    assert_eq!(
        delete,
        json!({"readOnlyHint": false, "destructiveHint": true,
               "idempotentHint": true, "openWorldHint": true})
    );
}
