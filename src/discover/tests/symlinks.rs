//! Tool entries that are symlinks: a link that stays inside its tool
//! directory loads; one that leads out of it (or a tool directory or
//! `tools.toml` that leads out of the project) is refused unread, with a
//! diagnostic naming the link and where it points.

use super::{Proj, assert_one_line_with_fix, names};
use std::os::unix::fs::symlink;

const SECRET: &str = "name = \"SECRET-CONTENT\"\n[[tools]]\n";

/// A file outside the project holding text that must never be echoed.
fn outside_file(dir: &tempfile::TempDir) -> std::path::PathBuf {
    let f = dir.path().join("secret.toml");
    std::fs::write(&f, SECRET).unwrap();
    f
}

fn all_text(c: &crate::discover::Catalog) -> String {
    c.diagnostics
        .iter()
        .map(|d| format!("{d}\n"))
        .collect::<String>()
}

#[test]
fn octomind_link_out_of_the_tool_dir_is_refused_and_one_inside_loads() {
    let p = Proj::new();
    // One tool could rewrite this file for the next call: refused.
    p.exec("scripts/helper", "#!/bin/sh\n# @description H\n");
    std::fs::create_dir_all(p.path(".agents/tools")).unwrap();
    symlink("../../scripts/helper", p.path(".agents/tools/helper")).unwrap();
    // Control: a link to a file inside the tool dir still loads.
    let real = p.exec(".agents/tools/impl/real", "#!/bin/sh\n# @description R\n");
    symlink("impl/real", p.path(".agents/tools/linked")).unwrap();
    let c = p.discover();
    assert_eq!(names(&c), vec!["linked"]);
    let t = c.get("linked").unwrap();
    assert_eq!(t.needs_read, vec![p.path(".agents/tools/linked"), real]);
    let d = &c.diagnostics[0];
    assert_eq!(d.file, p.path(".agents/tools/helper"));
    assert_eq!(
        d.message,
        format!(
            "symlink to ../../scripts/helper leads outside .agents/tools (to {}); not read, tool skipped",
            p.path("scripts/helper").display()
        )
    );
    assert_one_line_with_fix(&c);
}

#[test]
fn a_tool_dir_linked_out_of_the_project_is_not_listed() {
    let p = Proj::new();
    let out = tempfile::tempdir().unwrap();
    std::fs::write(out.path().join("t"), "#!/bin/sh\n# @description T\n").unwrap();
    std::fs::create_dir_all(p.path(".agents")).unwrap();
    symlink(out.path(), p.path(".agents/tools")).unwrap();
    std::fs::create_dir_all(p.path(".clawd")).unwrap();
    symlink(out.path(), p.path(".clawd/tools")).unwrap();
    symlink(out.path(), p.path("tools")).unwrap();
    let c = p.discover();
    assert!(c.tools.is_empty(), "{:?}", names(&c));
    let files: Vec<_> = c.diagnostics.iter().map(|d| d.file.clone()).collect();
    assert_eq!(
        files,
        vec![
            p.path(".agents/tools"),
            p.path(".clawd/tools"),
            p.path("tools")
        ]
    );
    assert!(
        c.diagnostics
            .iter()
            .all(|d| d.message.contains("leads outside the project")),
        "{}",
        all_text(&c)
    );
}

#[test]
fn clawd_dir_tool_json_and_entrypoint_links_out_are_refused() {
    let p = Proj::new();
    let out = tempfile::tempdir().unwrap();
    let secret = outside_file(&out);
    let tj = |id: &str, entry: &str| {
        format!(
            r#"{{"name": "{id}", "description": "d", "entrypoint": "{entry}", "interpreter": "sh"}}"#
        )
    };
    // The tool directory itself links out.
    std::fs::write(out.path().join("tool.json"), tj("dirlink", "run.sh")).unwrap();
    std::fs::write(out.path().join("run.sh"), "").unwrap();
    std::fs::create_dir_all(p.path(".clawd/tools")).unwrap();
    symlink(out.path(), p.path(".clawd/tools/dirlink")).unwrap();
    // tool.json links to a file outside.
    p.write(".clawd/tools/jsonlink/run.sh", "");
    symlink(&secret, p.path(".clawd/tools/jsonlink/tool.json")).unwrap();
    // The entrypoint links to a file elsewhere in the project.
    p.write(".clawd/tools/entry/tool.json", tj("entry", "run.sh"));
    p.write("scripts/run.sh", "");
    symlink(
        "../../../scripts/run.sh",
        p.path(".clawd/tools/entry/run.sh"),
    )
    .unwrap();
    // Control: an entrypoint linked within its own tool dir loads.
    p.write(".clawd/tools/ok/tool.json", tj("ok", "run.sh"));
    p.write(".clawd/tools/ok/lib/run.sh", "");
    symlink("lib/run.sh", p.path(".clawd/tools/ok/run.sh")).unwrap();
    let c = p.discover();
    assert_eq!(names(&c), vec!["ct_ok"]);
    let text = all_text(&c);
    assert!(!text.contains("SECRET-CONTENT"), "{text}");
    assert!(
        text.contains(".clawd/tools/dirlink/tool.json: symlink to ")
            || text.contains(".clawd/tools/dirlink: symlink to "),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "jsonlink/tool.json: symlink to {} leads outside .clawd/tools/jsonlink",
            secret.display()
        )),
        "{text}"
    );
    assert!(
        text.contains(
            "entry/run.sh: symlink to ../../../scripts/run.sh leads outside .clawd/tools/entry"
        ),
        "{text}"
    );
    assert_eq!(c.diagnostics.len(), 3, "{text}");
    assert_one_line_with_fix(&c);
}

#[test]
fn tools_toml_and_agentdir_links_out_are_refused_unread() {
    let p = Proj::new();
    let out = tempfile::tempdir().unwrap();
    let secret = outside_file(&out);
    symlink(&secret, p.path("tools.toml")).unwrap();
    std::fs::create_dir_all(p.path("tools")).unwrap();
    symlink(&secret, p.path("tools/leak.md")).unwrap();
    // Control: a page linked within tools/ loads.
    p.write(
        "tools/pages/greet.md",
        "---\nkind: script\nname: greet\npath: scripts/g.js\n---\nGreets.\n",
    );
    p.write("scripts/g.js", "");
    symlink("pages/greet.md", p.path("tools/greet.md")).unwrap();
    let c = p.discover();
    let text = all_text(&c);
    assert!(!text.contains("SECRET-CONTENT"), "{text}");
    assert!(
        text.contains(&format!(
            "tools.toml: symlink to {} leads outside the project",
            secret.display()
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "tools/leak.md: symlink to {} leads outside tools/",
            secret.display()
        )),
        "{text}"
    );
    assert_eq!(names(&c), vec!["greet"], "{text}");
    // Control: a tools.toml linked to a file inside the project loads.
    std::fs::remove_file(p.path("tools.toml")).unwrap();
    p.write(
        "config/tools.toml",
        "[[tools]]\nname = \"hi\"\ndescription = \"d\"\nexecutor = \"shell\"\ncommand = \"echo hi\"\n",
    );
    symlink("config/tools.toml", p.path("tools.toml")).unwrap();
    let c = p.discover();
    assert!(c.get("hi").is_some(), "{}", all_text(&c));
}
