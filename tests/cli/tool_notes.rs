//! What `list` and `check` tell about a tool before it is called: that a
//! person must approve its calls (and why), and that its interpreter will
//! not be found. Through the binary, with controls.

use crate::common;
use crate::common::stdout as out;

use common::{Project, toolcage};
use serde_json::Value;
use std::process::Output;

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", out(o)))
}

const CRABS: &str = r#"
[[tools]]
name = "deploy"
description = "Says nothing about approval"
executor = "shell"
command = "echo deployed"

[[tools]]
name = "asks"
description = "Asks for approval itself"
executor = "shell"
requires_approval = true
command = "echo asked"

[[tools]]
name = "free"
description = "Runs freely"
executor = "shell"
requires_approval = false
command = "echo free"
"#;

const DEFAULTED: &str =
    "requires_approval defaults to true in OpenCrabs; set requires_approval = false in tools.toml";

#[test]
fn an_opencrabs_tool_without_requires_approval_shows_that_it_asks_and_why() {
    let p = Project::new("notes-approval");
    p.write("tools.toml", CRABS);

    let o = toolcage(&p, &["list"]);
    assert_eq!(o.status.code(), Some(0));
    let text = out(&o);
    let line = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} not listed: {text}"))
            .to_string()
    };
    assert!(
        line("deploy").contains("asks for approval before every call"),
        "{text}"
    );
    assert!(line("deploy").contains(DEFAULTED), "{text}");
    // The tool's own explicit yes: it asks, and the reason is not a default.
    assert!(line("asks").contains("asks for approval"), "{text}");
    assert!(!line("asks").contains("defaults to true"), "{text}");
    // Control: requires_approval = false asks nothing.
    assert!(!line("free").contains("asks for approval"), "{text}");

    let rows = json(&toolcage(&p, &["list", "--json"]));
    let row = |name: &str| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(row("deploy")["approval"]["mode"], "always", "{rows}");
    assert!(
        row("deploy")["approval"]["why"]
            .as_str()
            .unwrap()
            .contains(DEFAULTED),
        "{rows}"
    );
    assert!(row("free")["approval"].is_null(), "{rows}");

    let o = toolcage(&p, &["check"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let text = out(&o);
    assert!(
        text.lines().any(
            |l| l.starts_with("note     tools.toml:2: tool deploy asks for approval")
                && l.contains(DEFAULTED)
        ),
        "{text}"
    );
    assert!(!text.contains("tool free asks"), "{text}");
    let report = json(&toolcage(&p, &["check", "--json"]));
    let approvals = report["approvals"].as_array().unwrap();
    let names: Vec<&str> = approvals
        .iter()
        .map(|a| a["tool"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["asks", "deploy"], "{report}");
    let deploy = &approvals[1];
    assert_eq!(
        (
            deploy["file"].as_str(),
            deploy["line"].as_u64(),
            deploy["mode"].as_str()
        ),
        (Some("tools.toml"), Some(2), Some("always")),
        "{report}"
    );
    assert!(
        deploy["why"].as_str().unwrap().contains(DEFAULTED),
        "{report}"
    );
    // Visible, not a problem: no warning counted.
    assert_eq!(report["warnings"], 0, "{report}");
}

#[test]
fn approval_set_by_the_operator_names_the_policy() {
    let p = Project::new("notes-approval-policy");
    p.write("tools.toml", CRABS);
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[tools.free.approval]\nmode = \"once\"\n").unwrap();
    let o = toolcage(&p, &["list", "--policy", policy.to_str().unwrap()]);
    let text = out(&o);
    let free = text.lines().find(|l| l.starts_with("free ")).unwrap();
    assert!(
        free.contains(
            "asks for approval at its first call in a session: approval mode once (policy "
        ),
        "{text}"
    );
}

fn executable(p: &std::path::Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The `check` warnings (file, message, fix) that mention `needle`.
fn warnings_about(report: &Value, needle: &str) -> Vec<(String, String, String)> {
    report["files"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["diagnostics"].as_array().unwrap().iter())
        .filter(|d| d["severity"] == "warning" && d["message"].as_str().unwrap().contains(needle))
        .map(|d| {
            let s = |k: &str| d[k].as_str().unwrap_or_default().to_string();
            (s("file"), s("message"), s("fix"))
        })
        .collect()
}

#[test]
fn an_interpreter_the_call_will_not_find_is_a_warning_and_the_tool_stays() {
    let p = Project::new("notes-interp");
    // clawd picks bun for a .ts entry point.
    p.write(
        ".clawd/tools/hi/tool.json",
        r#"{"name": "hi", "description": "Say hi", "entrypoint": "hi.ts"}"#,
    );
    p.write(".clawd/tools/hi/hi.ts", "console.log('hi')\n");
    // A stand-in bun, found only when its directory is on the PATH.
    executable(&p.path("fakebin/bun"), "#!/bin/sh\necho bun ran\n");
    let outside = tempfile::tempdir().unwrap();
    let interp = outside.path().join("interp");
    executable(&interp, "#!/bin/sh\necho interp ran\n");
    let tools = p.path(".agents/tools");
    executable(
        &tools.join("envmiss"),
        "#!/usr/bin/env toolcage-no-such-interpreter\n# @description Env\necho x\n",
    );
    executable(
        &tools.join("outside"),
        &format!("#!{}\n# @description Outside\n", interp.display()),
    );
    executable(
        &tools.join("fine"),
        "#!/bin/sh\n# @description Fine\necho fine\n",
    );
    let bare = "PATH=/usr/bin:/bin";
    if ["/usr/bin/bun", "/bin/bun"]
        .iter()
        .any(|b| std::path::Path::new(b).exists())
    {
        eprintln!("skipped: bun is installed in /usr/bin or /bin");
        return;
    }

    let o = toolcage(&p, &["check", "--json", "--env", bare]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "warnings do not fail: {}",
        out(&o)
    );
    let r = json(&o);
    let bun = warnings_about(&r, "interpreter bun");
    assert_eq!(bun.len(), 1, "{r}");
    assert_eq!(bun[0].0, ".clawd/tools/hi/tool.json");
    assert!(
        bun[0]
            .1
            .contains("not found on the sandbox's PATH (/usr/bin:/bin)"),
        "{bun:?}"
    );
    assert!(
        bun[0].2.starts_with("install bun, or set \"interpreter\""),
        "{bun:?}"
    );
    let env = warnings_about(&r, "toolcage-no-such-interpreter");
    assert_eq!(env.len(), 1, "{r}");
    assert_eq!(env[0].0, ".agents/tools/envmiss");
    let out_of_grant = warnings_about(&r, "tool outside:");
    assert_eq!(out_of_grant.len(), 1, "{r}");
    assert!(
        out_of_grant[0].1.contains("the grant cannot read it"),
        "{out_of_grant:?}"
    );
    let dir = outside.path().canonicalize().unwrap();
    assert!(
        out_of_grant[0]
            .2
            .contains(&format!("--read {}", dir.display())),
        "{out_of_grant:?}"
    );
    // Control: a script whose interpreter is there gets no warning.
    assert!(warnings_about(&r, "tool fine:").is_empty(), "{r}");
    // The tools stay listed; the text report says it too.
    let names: Vec<Value> = json(&toolcage(&p, &["list", "--json"]))
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].clone())
        .collect();
    for name in ["ct_hi", "envmiss", "outside", "fine"] {
        assert!(names.contains(&Value::from(name)), "{name}: {names:?}");
    }
    let text = out(&toolcage(&p, &["check", "--env", bare]));
    assert!(
        text.contains(
            "warning  .clawd/tools/hi/tool.json:1: tool ct_hi: interpreter bun: not found"
        ),
        "{text}"
    );
    // The calls themselves: command not found, and for the script, the
    // interpreter named with the fix (not the script's own directory).
    let o = toolcage(&p, &["call", "--env", bare, "ct_hi"]);
    assert_eq!(
        o.status.code(),
        Some(127),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = toolcage(&p, &["call", "outside"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(127), "{err}");
    assert!(
        err.contains("cannot start: the #! line's interpreter")
            && err.contains(&format!("--read {}", dir.display())),
        "{err}"
    );

    // Controls: bun on the PATH, the outside directory readable: no
    // warning, and the calls run.
    let with_bun = format!("PATH={}:/usr/bin:/bin", p.path("fakebin").display());
    let read = dir.to_str().unwrap();
    let r = json(&toolcage(
        &p,
        &["check", "--json", "--env", &with_bun, "--read", read],
    ));
    assert!(warnings_about(&r, "interpreter bun").is_empty(), "{r}");
    assert!(warnings_about(&r, "tool outside:").is_empty(), "{r}");
    let o = toolcage(&p, &["call", "--env", &with_bun, "ct_hi"]);
    assert_eq!(
        out(&o),
        "bun ran\n",
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = toolcage(&p, &["call", "--read", read, "outside"]);
    assert_eq!(
        out(&o),
        "interp ran\n",
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn a_script_with_windows_line_endings_is_named_with_the_fix() {
    let p = Project::new("crlf");
    executable(
        &p.path(".agents/tools/crlf"),
        "#!/bin/sh\r\n# @description CRLF\r\necho crlf\r\n",
    );
    executable(
        &p.path(".agents/tools/unix"),
        "#!/bin/sh\n# @description LF\necho unix\n",
    );
    let r = json(&toolcage(&p, &["check", "--json"]));
    let w = warnings_about(&r, "carriage return");
    assert_eq!(w.len(), 1, "{r}");
    assert!(
        w[0].0.ends_with("crlf") && w[0].2.contains("Unix line endings"),
        "{w:?}"
    );
    let o = toolcage(&p, &["call", "crlf"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(127), "{err}");
    assert!(
        err.contains("carriage return") && err.contains("dos2unix"),
        "{err}"
    );
    // Control: the same script with Unix line endings runs, unwarned.
    let o = toolcage(&p, &["call", "unix"]);
    assert_eq!(out(&o), "unix\n", "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn a_nested_git_repository_calls_may_write_is_a_warning_with_the_fix() {
    let p = Project::new("nested-git");
    std::fs::create_dir_all(p.path("sub/.git/hooks")).unwrap();
    // A submodule's .git is a file pointing into the project's own .git.
    p.write("module/.git", "gitdir: ../.git/modules/module\n");
    let r = json(&toolcage(&p, &["check", "--json"]));
    let w = warnings_about(&r, "nested git repository");
    assert_eq!(w.len(), 1, "{r}");
    assert!(w[0].0.ends_with("sub/.git"), "{w:?}");
    assert!(w[0].2.contains("\"{project}/sub/.git\""), "{w:?}");
    // What it warns about is real: a call writes a hook there.
    let hook = "echo evil > sub/.git/hooks/pre-commit";
    let o = toolcage(&p, &["exec", "--", "sh", "-c", hook]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // The fix: protected, no warning, and the same write is refused.
    let policy = p.state_dir().with_extension("toml");
    std::fs::write(&policy, "[fs]\nadd_protected = [\"{project}/sub/.git\"]\n").unwrap();
    let pol = policy.to_str().unwrap();
    let r = json(&toolcage(&p, &["check", "--json", "--policy", pol]));
    assert!(
        warnings_about(&r, "nested git repository").is_empty(),
        "{r}"
    );
    let o = toolcage(&p, &["exec", "--policy", pol, "--", "sh", "-c", hook]);
    assert_ne!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let _ = std::fs::remove_file(policy);
}

#[test]
fn a_script_without_a_shebang_is_a_warning_and_its_call_exits_126() {
    let p = Project::new("no-shebang");
    executable(
        &p.path(".agents/tools/bare"),
        "# @description No #! line\necho bare\n",
    );
    let r = json(&toolcage(&p, &["check", "--json"]));
    let w = warnings_about(&r, "no #! line");
    assert_eq!(w.len(), 1, "{r}");
    assert!(w[0].2.contains("#!/bin/sh"), "{w:?}");
    let o = toolcage(&p, &["call", "bare"]);
    assert_eq!(
        o.status.code(),
        Some(126),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Control: the same script with a #! line runs, unwarned.
    executable(
        &p.path(".agents/tools/bare"),
        "#!/bin/sh\n# @description No #! line\necho bare\n",
    );
    let r = json(&toolcage(&p, &["check", "--json"]));
    assert!(warnings_about(&r, "no #! line").is_empty(), "{r}");
    assert_eq!(out(&toolcage(&p, &["call", "bare"])), "bare\n");
}

#[test]
fn check_names_an_audit_log_every_call_would_refuse() {
    let p = Project::new("audit-inside");
    executable(
        &p.path(".agents/tools/ok"),
        "#!/bin/sh\n# @description Fine\necho ok\n",
    );
    let policy = p.state_dir().with_extension("toml");
    std::fs::write(&policy, "[audit]\npath = \"{project}/audit.jsonl\"\n").unwrap();
    let pol = policy.to_str().unwrap();
    let o = toolcage(&p, &["check", "--json", "--policy", pol]);
    assert_eq!(o.status.code(), Some(1));
    let r = json(&o);
    assert!(
        r["policy"].to_string().contains("audit log")
            && r["policy"].to_string().contains("write root"),
        "{r}"
    );
    // It is what a call then says, with exit 125.
    assert_eq!(
        toolcage(&p, &["call", "--policy", pol, "ok"]).status.code(),
        Some(125)
    );
    // Control: without that policy, check is clean and the call runs.
    assert_eq!(toolcage(&p, &["check"]).status.code(), Some(0));
    assert_eq!(out(&toolcage(&p, &["call", "ok"])), "ok\n");
    let _ = std::fs::remove_file(policy);
}
