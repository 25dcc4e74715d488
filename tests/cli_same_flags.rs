//! The policy flags are the same on every command that resolves a grant:
//! `policy` previews exactly what `exec` gets with the same flags, and
//! `call` takes them too. Each with its control (without the flag).

mod common;

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
