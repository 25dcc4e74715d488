//! What `list` and `check` tell about a tool before it is called: that a
//! person must approve its calls (and why), and that its interpreter will
//! not be found. Through the binary, with controls.

mod common;

use common::Project;
use serde_json::Value;
use std::process::{Command, Output};

fn toolcage(p: &Project, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolcage"))
        .arg("-C")
        .arg(&p.dir)
        .args(args)
        .current_dir(&p.dir)
        .env("XDG_STATE_HOME", p.state_dir())
        .output()
        .unwrap()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

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
    let policy = p.state_dir().with_extension("toml");
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
    let _ = std::fs::remove_file(&policy);
}
