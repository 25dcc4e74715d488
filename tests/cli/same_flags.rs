//! The policy flags are the same on every command that resolves a grant:
//! `policy` previews exactly what `exec` gets with the same flags, and
//! `call` takes them too. Each with its control (without the flag).

use crate::common;

use common::{Project, toolcage};
use std::process::{Command, Output};

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

fn json(o: &Output, stream_err: bool) -> serde_json::Value {
    let raw = if stream_err { &o.stderr } else { &o.stdout };
    serde_json::from_slice(raw).unwrap_or_else(|e| panic!("{e}: {}", text(o)))
}

const FLAGS: [&str; 6] = [
    "--allow-net",
    "--read",
    "/opt",
    "--timeout",
    "7s",
    "--env=LANGUAGE",
];

#[test]
fn policy_previews_what_exec_gets() {
    let p = Project::new("same-flags");
    std::fs::create_dir_all("/opt").unwrap();
    let mut args = vec!["policy", "--json"];
    args.extend(FLAGS);
    let o = toolcage(&p, &args);
    assert!(o.status.success(), "{}", text(&o));
    let preview = json(&o, false);
    let mut args = vec!["exec", "--json"];
    args.extend(FLAGS);
    args.extend(["--", "true"]);
    let o = toolcage(&p, &args);
    assert!(o.status.success(), "{}", text(&o));
    let ran = json(&o, true);
    let grant = &preview["grant"];
    assert_eq!(grant["network"]["mode"], "on", "{grant}");
    assert_eq!(grant["timeout"], 7.0, "{grant}");
    assert!(
        grant["read"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r == "/opt"),
        "{grant}"
    );
    // exec with the same flags ran with the network on: no namespace of its own.
    assert_eq!(ran["enforcement"]["network_namespace"], false, "{ran}");
    // Controls: without the flags, no network in the preview, and exec's
    // call gets its own (empty) network namespace.
    let o = toolcage(&p, &["policy", "--json"]);
    assert_eq!(json(&o, false)["grant"]["network"]["mode"], "off");
    let o = toolcage(&p, &["exec", "--json", "--", "true"]);
    assert_eq!(json(&o, true)["enforcement"]["network_namespace"], true);
}

#[test]
fn call_takes_the_policy_flags() {
    let p = Project::new("same-flags-call");
    p.write(
        ".agents/tools/peek",
        "#!/bin/sh\n# @description Read a file outside the project.\ncat /opt/tc-same-flags && echo READ\n",
    );
    Command::new("chmod")
        .arg("+x")
        .arg(p.dir.join(".agents/tools/peek"))
        .status()
        .unwrap();
    std::fs::create_dir_all("/opt").unwrap();
    std::fs::write("/opt/tc-same-flags", "x\n").unwrap();
    let o = toolcage(&p, &["call", "peek", "--read", "/opt"]);
    let granted = text(&o);
    // Control: without --read the file is not there.
    let o2 = toolcage(&p, &["call", "peek"]);
    let _ = std::fs::remove_file("/opt/tc-same-flags");
    assert!(granted.contains("READ"), "{granted}");
    assert!(!text(&o2).contains("READ"), "{}", text(&o2));
}

/// `--tools-toml FILE` names a file the user chose: when it is missing (or
/// not a file), every command that discovers tools refuses with exit 125
/// and a one-line error naming it, instead of quietly leaving its tools
/// out; `check` reports it as an error in its report (exit 1).
#[test]
fn a_missing_tools_toml_is_refused_by_every_command_that_discovers_tools() {
    use std::os::unix::fs::PermissionsExt;
    let p = Project::new("same-flags-tools-toml");
    let hi = p.write(
        ".agents/tools/hi",
        "#!/bin/sh\n# @description Hi.\necho hi\n",
    );
    std::fs::set_permissions(&hi, std::fs::Permissions::from_mode(0o755)).unwrap();
    let extra = p.dir.with_extension("extra.toml");
    std::fs::write(
        &extra,
        "[[tools]]\nname = \"ext\"\ndescription = \"d\"\nexecutor = \"shell\"\nrequires_approval = false\ncommand = \"echo ext\"\n",
    )
    .unwrap();
    let commands: [&[&str]; 8] = [
        &["list"],
        &["list", "--json"],
        &["schema"],
        &["schema", "hi"],
        &["call", "hi"],
        &["policy", "hi"],
        &["upstreams"],
        &["serve"],
    ];
    // Control: the file given is discovered with the project's tools.
    let given = extra.to_str().unwrap();
    let o = toolcage(&p, &["--tools-toml", given, "list"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("ext") && text(&o).contains("hi"),
        "{}",
        text(&o)
    );
    let o = toolcage(&p, &["--tools-toml", given, "call", "ext"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "ext\n", "{}", text(&o));
    let missing = p.dir.with_extension("missing.toml");
    let dir = p.dir.with_extension("state");
    std::fs::create_dir_all(&dir).unwrap();
    for (bad, why) in [(&missing, "no such file"), (&dir, "is a directory")] {
        let bad = bad.to_str().unwrap();
        for cmd in commands {
            let mut args = vec!["--tools-toml", bad];
            args.extend(cmd);
            let o = toolcage(&p, &args);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(125), "{cmd:?}: {}", text(&o));
            assert!(
                err.contains(&format!("--tools-toml {bad}")),
                "{cmd:?}: {err}"
            );
            assert!(err.contains(why), "{cmd:?}: {err}");
            assert_eq!(err.lines().count(), 1, "{cmd:?}: {err}");
            assert!(o.stdout.is_empty(), "{cmd:?}: {}", text(&o));
        }
        // check explains it among the rest.
        let o = toolcage(&p, &["--tools-toml", bad, "check"]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(text(&o).contains("--tools-toml"), "{}", text(&o));
    }
    // Control: without the flag, every one of them works.
    for cmd in &commands[..7] {
        let o = toolcage(&p, cmd);
        assert!(o.status.success(), "{cmd:?}: {}", text(&o));
    }
    let _ = std::fs::remove_file(&extra);
}
