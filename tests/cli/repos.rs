//! Ordinary repositories under `toolcage exec`: `tools/` is source unless it
//! holds A3S tool files, and an explicit `TMPDIR` or `HOME` either wins or is
//! refused with the reason, each with its control.

use crate::common;
use crate::common::{status, stderr as err, stdout_trimmed as out};

use common::{Project, toolcage_env as toolcage};
use serde_json::Value;

const WRITE_TOOLS: &str = "echo built > tools/out.txt && echo WROTE || echo REFUSED";

#[test]
fn tools_is_writable_source_unless_it_holds_a3s_tool_files() {
    let p = Project::new("repo-tools");
    p.write("tools/build.sh", "#!/bin/sh\necho build\n");
    p.write("tools/README.md", "# Scripts\n\nRun build.sh.\n");
    let o = toolcage(&p, &[], &["exec", "--", "sh", "-c", WRITE_TOOLS]);
    assert_eq!(out(&o), "WROTE", "{}", err(&o));
    assert_eq!(
        std::fs::read_to_string(p.path("tools/out.txt")).unwrap(),
        "built\n"
    );
    let o = toolcage(&p, &[], &["check"]);
    let text = out(&o);
    assert!(
        text.contains("note     tools/: writable by calls: no A3S tool files"),
        "{text}"
    );
    let o = toolcage(&p, &[], &["policy"]);
    let tools = p.path("tools").display().to_string();
    assert!(
        out(&o)
            .lines()
            .any(|l| l.starts_with("  not_protected") && l.contains(&tools)),
        "{}",
        out(&o)
    );

    // An A3S tool file makes it a tool directory: read-only for calls.
    std::fs::remove_file(p.path("tools/out.txt")).unwrap();
    p.write(
        "tools/lint.md",
        "---\nkind: script\nname: lint\npath: scripts/lint.js\n---\nLint the project.\n",
    );
    let o = toolcage(&p, &[], &["exec", "--", "sh", "-c", WRITE_TOOLS]);
    assert_eq!(out(&o), "REFUSED", "{}", err(&o));
    assert!(!p.path("tools/out.txt").exists());
    // Control: the rest of the project stays writable in the same setup.
    let o = toolcage(
        &p,
        &[],
        &["exec", "--", "sh", "-c", "echo x > other.txt && echo WROTE"],
    );
    assert_eq!(out(&o), "WROTE", "{}", err(&o));
    let o = toolcage(&p, &[], &["check", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["tools_dir"]["protected"], true);
    assert_eq!(
        v["tools_dir"]["a3s_tool_files"],
        serde_json::json!(["tools/lint.md"])
    );
    let o = toolcage(&p, &[], &["policy"]);
    let line = out(&o)
        .lines()
        .find(|l| l.starts_with("  protected") && l.contains(&format!("{tools} ")))
        .map(str::to_string)
        .unwrap_or_else(|| panic!("{}", out(&o)));
    assert!(
        line.ends_with("(profile default: {a3s_tools}, it holds A3S tool files)"),
        "{line}"
    );
}

#[test]
fn an_explicit_tmpdir_or_home_wins_when_the_grant_can_use_it() {
    let p = Project::new("repo-tmpdir");
    std::fs::create_dir_all(p.path("build/tmp")).unwrap();
    let tmp = p.path("build/tmp").display().to_string();
    let script = "f=$(mktemp) && echo \"$f\" && echo \"$HOME\"";
    let o = toolcage(
        &p,
        &[],
        &[
            "exec",
            "--env",
            &format!("TMPDIR={tmp}"),
            "--env",
            &format!("HOME={}", p.dir.display()),
            "--",
            "sh",
            "-c",
            script,
        ],
    );
    assert_eq!(status(&o), 0, "{}", err(&o));
    let lines: Vec<String> = out(&o).lines().map(str::to_string).collect();
    assert!(lines[0].starts_with(&format!("{tmp}/")), "{lines:?}");
    assert_eq!(lines[1], p.dir.display().to_string());
    // Control: without them, the call's private tmp for both.
    let o = toolcage(&p, &[], &["exec", "--", "sh", "-c", script]);
    let lines: Vec<String> = out(&o).lines().map(str::to_string).collect();
    assert!(lines[0].starts_with("/tmp/"), "{lines:?}");
    assert_eq!(lines[1], "/tmp");
}

#[test]
fn an_explicit_tmpdir_or_home_the_call_cannot_use_is_refused_with_the_fix() {
    let p = Project::new("repo-tmpdir-refused");
    let outside = p.state_dir().join("tmp");
    std::fs::create_dir_all(&outside).unwrap();
    let outside = outside.canonicalize().unwrap().display().to_string();
    let o = toolcage(
        &p,
        &[],
        &["exec", "--env", &format!("TMPDIR={outside}"), "--", "true"],
    );
    assert_eq!(status(&o), 125);
    let e = err(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.contains(&format!("(fix: --write {outside}, or leave TMPDIR unset")),
        "{e}"
    );
    // Control: granting it lets it win.
    let o = toolcage(
        &p,
        &[],
        &[
            "exec",
            "--write",
            &outside,
            "--env",
            &format!("TMPDIR={outside}"),
            "--",
            "sh",
            "-c",
            "mktemp",
        ],
    );
    assert!(out(&o).starts_with(&format!("{outside}/")), "{}", err(&o));

    // The same from a policy file, and the operator's own HOME passed by name.
    let file = p.write("p.toml", "[env]\nset = { HOME = \"/nonexistent-home\" }\n");
    let o = toolcage(&p, &[], &["exec", "--policy", "p.toml", "--", "true"]);
    assert_eq!(status(&o), 125);
    let e = err(&o);
    assert!(
        e.starts_with(&format!(
            "toolcage: policy {}:2: env.set.HOME: ",
            file.display()
        )),
        "{e}"
    );
    assert!(e.contains("(fix: --read /nonexistent-home"), "{e}");
    let o = toolcage(
        &p,
        &[("HOME", &outside)],
        &["exec", "--env", "HOME", "--", "true"],
    );
    assert_eq!(status(&o), 125);
    assert!(
        err(&o).contains(&format!("HOME (passed through: {outside})")),
        "{}",
        err(&o)
    );
}
