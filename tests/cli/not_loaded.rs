//! A tool that is not loaded is named with why, wherever a user names it
//! (`schema`, `policy`, `call`): the skipped file with its line and fix,
//! as `check` says it, and exit 2. Controls: a tool of the same project
//! that loaded works, and a name nothing defines is just unknown.

use crate::common;
use common::{Project, toolcage};

fn project() -> Project {
    let p = Project::new("not-loaded");
    // A TOML syntax error loses the entry it is in.
    p.write(
        "tools.toml",
        "[[tools]]\nname = \"first\"\ndescription = \"d\"\nexecutor = \"shell\"\ncommand = \"echo 1\"\n\n[[tools]]\nname = \"second\ndescription = \"x\"\n",
    );
    // clawd: JSON that does not parse; its directory is not the name.
    p.write(
        ".clawd/tools/dir-a/tool.json",
        "{\"name\": \"jsontool\", \"description\": \"d\", \"entrypoint\": \"r.sh\",}",
    );
    // clawd: a parameter named like the lost TOML tool must not be blamed.
    p.write(
        ".clawd/tools/dir-b/tool.json",
        "{\"name\": \"other\", \"description\": \"d\", \"entrypoint\": \"r.sh\", \"parameters\": {\"second\": {\"type\": \"strin\"}}}",
    );
    p.write(".clawd/tools/dir-b/r.sh", "#!/bin/sh\n");
    // Octomind: skipped for its header.
    let script = p.write(".agents/tools/nodesc", "#!/bin/sh\necho\n");
    let ok = p.write(
        ".agents/tools/fine",
        "#!/bin/sh\n# @description works\necho fine\n",
    );
    use std::os::unix::fs::PermissionsExt;
    for f in [script, ok] {
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    p
}

#[test]
fn schema_policy_and_call_say_why_a_tool_was_not_loaded() {
    let p = project();
    for (name, file) in [
        ("second", "tools.toml:8"),
        ("jsontool", "dir-a/tool.json"),
        ("nodesc", ".agents/tools/nodesc"),
    ] {
        for cmd in [&["schema", name][..], &["policy", name], &["call", name]] {
            let o = toolcage(&p, cmd);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{cmd:?}: {err}");
            assert!(
                err.contains("not loaded") && err.contains(file) && err.contains("fix:"),
                "{cmd:?}: {err}"
            );
            assert!(
                !err.contains("dir-b"),
                "{cmd:?} blames the wrong file: {err}"
            );
        }
    }
    // Controls: the file's other entry, and a tool of another format.
    for name in ["first", "fine"] {
        let o = toolcage(&p, &["schema", name]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{name}: {err}");
    }
    let o = toolcage(&p, &["schema", "nothing-defines-this"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err.contains("unknown tool") && !err.contains("not loaded"),
        "{err}"
    );
}
