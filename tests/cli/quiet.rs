//! `--quiet`: toolcage's own warnings, notes, hints and tips leave stderr;
//! errors, the tool's own output and what was asked for (`--explain`)
//! stay. Each case with its control: the same command without `--quiet`.

use crate::common;
use crate::common::stderr as err;

use common::{Project, toolcage};
use std::os::unix::fs::PermissionsExt;

#[test]
fn notes_and_tips_go_errors_stay() {
    let p = Project::new("quiet-notes");
    // A note: an empty project has no tools.
    let o = toolcage(&p, &["list"]);
    assert!(err(&o).contains("no tools found"), "{}", err(&o));
    for quiet in [&["-q", "list"][..], &["list", "--quiet"]] {
        let o = toolcage(&p, quiet);
        assert_eq!(o.status.code(), Some(0));
        assert_eq!(err(&o), "", "{quiet:?}");
    }
    // A note: no audit log yet.
    let o = toolcage(&p, &["audit"]);
    assert!(err(&o).contains("no audit log yet"), "{}", err(&o));
    assert_eq!(err(&toolcage(&p, &["audit", "--quiet"])), "");

    // A usage error keeps its message and status; only the tip goes.
    let o = toolcage(&p, &["exec", "true"]);
    assert_eq!(o.status.code(), Some(125));
    assert!(
        err(&o).contains("error:") && err(&o).contains("tip:"),
        "{}",
        err(&o)
    );
    let o = toolcage(&p, &["--quiet", "exec", "true"]);
    assert_eq!(o.status.code(), Some(125));
    assert!(err(&o).contains("error:"), "{}", err(&o));
    assert!(!err(&o).contains("tip:"), "{}", err(&o));
    // toolcage's own failure: still said.
    let o = toolcage(&p, &["-q", "exec", "--profile", "nope", "--", "true"]);
    assert_eq!(o.status.code(), Some(125));
    assert!(err(&o).contains("nope"), "{}", err(&o));
}

#[test]
fn the_tools_output_and_what_was_asked_for_stay() {
    let p = Project::new("quiet-output");
    let tool = p.write(
        ".agents/tools/shout",
        "#!/bin/sh\n# @description Say on both streams.\necho out; echo err >&2\n",
    );
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = toolcage(
        &p,
        &["exec", "-q", "--", "sh", "-c", "echo out; echo err >&2"],
    );
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "out\n");
    assert_eq!(err(&o), "err\n");
    // --explain is asked for: it answers under --quiet too.
    let o = toolcage(&p, &["call", "-q", "--explain", "shout"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "out\n[stderr]\nerr\n");
    assert!(err(&o).contains("no denials seen"), "{}", err(&o));
}
