//! Name collisions: config-defined (A3S) over dynamic (OpenCrabs) over
//! local (clawd, then Octomind), every loser reported.

use super::{Proj, names};
use crate::discover::Severity;
use crate::discover::collide::tier;
use crate::spec::Format;

#[test]
fn tiers_follow_octomind_priority() {
    assert!(tier(Format::Agentdir) > tier(Format::Opencrabs));
    assert_eq!(tier(Format::McpJson), tier(Format::Agentdir));
    assert!(tier(Format::Opencrabs) > tier(Format::Clawd));
    assert!(tier(Format::Clawd) > tier(Format::Octomind));
}

#[test]
fn config_over_dynamic_over_local_each_shadowed_tool_listed() {
    let p = Proj::new();
    // `shell` in all four places (clawd's is ct_shell, so it needs its own
    // clash: an Octomind script named ct_shell).
    p.exec(".agents/tools/shell", "#!/bin/sh\n# @description local\n");
    p.exec(
        ".agents/tools/ct_shell",
        "#!/bin/sh\n# @description local ct\n",
    );
    p.write(
        ".clawd/tools/shell/tool.json",
        r#"{"name":"shell","description":"clawd","entrypoint":"r.sh"}"#,
    );
    p.write(".clawd/tools/shell/r.sh", "");
    p.write(
        "tools.toml",
        "[[tools]]\nname = \"shell\"\ndescription = \"dynamic\"\nexecutor = \"shell\"\ncommand = \"true\"\n",
    );
    p.write("s.js", "");
    p.write(
        "tools/shell.md",
        "---\nkind: script\nname: shell\npath: s.js\n---\nconfig\n",
    );
    let c = p.discover();
    assert_eq!(names(&c), vec!["ct_shell", "shell"]);
    assert_eq!(c.get("shell").unwrap().format, Format::Agentdir);
    assert_eq!(c.get("ct_shell").unwrap().format, Format::Clawd);
    let lost: Vec<(String, Format, Format)> = c
        .shadowed
        .iter()
        .map(|s| (s.name.clone(), s.winner_format, s.loser_format))
        .collect();
    assert_eq!(
        lost,
        vec![
            ("ct_shell".into(), Format::Clawd, Format::Octomind),
            ("shell".into(), Format::Agentdir, Format::Opencrabs),
            ("shell".into(), Format::Agentdir, Format::Octomind),
        ]
    );
    let warnings: Vec<String> = c
        .diagnostics
        .iter()
        .filter(|d| d.message.contains("shadowed"))
        .map(|d| {
            assert_eq!(d.severity, Severity::Warning);
            d.to_string()
                .replace(&format!("{}/", p.root().display()), "")
        })
        .collect();
    assert_eq!(
        warnings,
        vec![
            ".agents/tools/ct_shell:2: tool 'ct_shell' is shadowed by the Clawd tool at .clawd/tools/shell/tool.json:1 (fix: rename one of the tools if both should be visible)",
            ".agents/tools/shell:2: tool 'shell' is shadowed by the Agentdir tool at tools/shell.md:1 (fix: rename one of the tools if both should be visible)",
            "tools.toml:1: tool 'shell' is shadowed by the Agentdir tool at tools/shell.md:1 (fix: rename one of the tools if both should be visible)",
        ]
    );
}

#[test]
fn same_format_duplicates_in_two_tools_toml_files() {
    let p = Proj::new();
    let t =
        "[[tools]]\nname = \"d\"\ndescription = \"D\"\nexecutor = \"shell\"\ncommand = \"true\"\n";
    p.write("tools.toml", format!("{t}{t}"));
    let c = p.discover();
    assert_eq!(names(&c), vec!["d"]);
    assert_eq!(c.get("d").unwrap().line, Some(1));
    let e: Vec<String> = c.diagnostics.iter().map(|d| d.message.clone()).collect();
    assert_eq!(
        e,
        vec![format!(
            "duplicate tool name 'd' (first defined at {}:1); skipped",
            p.path("tools.toml").display()
        )]
    );
}

#[test]
fn discovery_is_deterministic() {
    let p = Proj::new();
    for i in 0..20 {
        p.exec(
            &format!(".agents/tools/t{i}"),
            "#!/bin/sh\n# @description D\n",
        );
    }
    p.exec(".agents/tools/bad.sh", "#!/bin/sh\n");
    let a = serde_json::to_string(&p.discover()).unwrap();
    let b = serde_json::to_string(&p.discover()).unwrap();
    assert_eq!(a, b);
}
