//! Every error, with its one-line message.

use super::*;

#[test]
fn errors_in_tool_sections_surface_at_load() {
    let e = Env::new();
    let err = e.err("[tools.x.limits]\n\ntimeout = 0\n");
    assert_eq!(
        err,
        "policy $T/p.toml:3: tools.x.limits.timeout: must be greater than zero"
    );
}

/// A policy file and the one-line error it must give.
const FILE_ERRORS: &[(&str, &str)] = &[
    (
        "[limits]\naddress_space = \"1KiB\"\n",
        "policy $T/p.toml:2: limits.address_space: too small for any program to start (at least 16MiB)",
    ),
    (
        "[limits]\ntmp = \"512KiB\"\n",
        "policy $T/p.toml:2: limits.tmp: 512KiB is too small for the call's private /tmp and /dev/shm (at least 1MiB, e.g. tmp = \"256MiB\")",
    ),
    (
        "[limits]\ntmp = \"lots\"\n",
        "policy $T/p.toml:2: limits.tmp: invalid size \"lots\" (use e.g. \"64KiB\", \"4GiB\", \"1MB\" or a number of bytes)",
    ),
    (
        "[limits]\ntmp = \"unlimited\"\n",
        "policy $T/p.toml:2: limits.tmp: invalid size \"unlimited\" (use e.g. \"64KiB\", \"4GiB\", \"1MB\" or a number of bytes)",
    ),
    (
        "[limits]\ntimeout = \"3x\"\n",
        "policy $T/p.toml:2: limits.timeout: invalid duration \"3x\" (use e.g. \"30s\", \"500ms\", \"5m\")",
    ),
    (
        "\n\n[netwrk]\n",
        "policy $T/p.toml:3: unknown key 'netwrk' (expected one of with, fs, network, env, limits, sandbox, requests, approval, rate_limit, global_rate_limit, audit, manage, store, tools, upstreams, allow_home_project)",
    ),
    (
        "[fs]\nadd_read = [\n  \"src\",\n  \"nope\",\n]\n",
        "policy $T/p.toml:4: fs.add_read: $T/project/nope does not exist (create it or remove it from fs.add_read)",
    ),
    (
        "[fs]\nadd_denied = [\"src\"]\nadd_write = [\"src\"]\n",
        "policy $T/p.toml:3: fs.add_write: $T/project/src is also denied ($T/project/src, policy $T/p.toml); remove one of them",
    ),
    (
        "[fs]\nadd_denied = [\"{project}\"]\n",
        "policy $T/p.toml:2: fs.add_denied: $T/project is also a write root ($T/project, profile default); remove one of them",
    ),
    (
        "[fs]\nadd_write = [\".git\"]\n",
        "policy $T/p.toml:2: fs.add_write: $T/project/.git is also protected ($T/project/.git, profile default); remove one of them",
    ),
    (
        "[network]\nmode = \"off\"\nconnect = [443]\n",
        "policy $T/p.toml:3: network.connect: ports only apply with network.mode = \"tcp\" (this file sets mode = \"off\")",
    ),
    (
        "[network]\nbind = [8080]\n",
        "policy $T/p.toml:2: network.bind: ports only apply with network.mode = \"tcp\", but the mode is \"off\" (profile default); set mode = \"tcp\" or remove the ports",
    ),
    (
        "[network]\nmode = \"tcp\"\nconnect = [443,\n 70000]\n",
        "policy $T/p.toml:4: network.connect: invalid port 70000 (use 1-65535)",
    ),
    (
        "[network]\nmode = \"tcp\"\nconnect = [0]\n",
        "policy $T/p.toml:3: network.connect: invalid port 0 (use 1-65535)",
    ),
    (
        "[limits]\ntimeout = \"0s\"\n",
        "policy $T/p.toml:2: limits.timeout: must be greater than zero",
    ),
    (
        "[limits]\nstdout = 0\n",
        "policy $T/p.toml:2: limits.stdout: must be greater than zero (an output cap of zero hides all output)",
    ),
    (
        "[limits]\nprocesses = 0\n",
        "policy $T/p.toml:2: limits.processes: must be greater than zero (or \"unlimited\" to keep the inherited limit)",
    ),
    (
        "[env]\nallow = [\"PATH\", \"BAD NAME\"]\n",
        "policy $T/p.toml:2: env.allow: invalid variable name \"BAD NAME\" (use NAME or PREFIX*)",
    ),
    (
        "[env.set]\n\"1X\" = \"v\"\n",
        "policy $T/p.toml:2: env.set.1X: invalid variable name \"1X\" (use letters, digits and _)",
    ),
    (
        "[rate_limit]\nwindow = \"1m\"\n",
        "policy $T/p.toml:2: rate_limit.window: a window without rate_limit.requests (add requests = N)",
    ),
    (
        "[rate_limit]\nrequests = 0\n",
        "policy $T/p.toml:2: rate_limit.requests: must be greater than zero (to forbid a tool, do not expose it)",
    ),
    (
        "[fs]\nread = [\"{projct}/x\"]\n",
        "policy $T/p.toml:2: fs.read: \"{projct}/x\": unknown variable {projct} (use {project}, {home} or {tmp})",
    ),
    (
        "[sandbox]\nenforcement = \"lax\"\n",
        "policy $T/p.toml:2: sandbox.enforcement: invalid value \"lax\" (expected one of standard, strict, degraded)",
    ),
];

#[test]
fn file_errors_name_file_line_and_key() {
    let e = Env::new();
    for (text, want) in FILE_ERRORS {
        assert_eq!(e.err(text), *want, "for {text:?}");
    }
}

#[test]
fn contradiction_is_reported_at_the_later_layer() {
    let e = Env::new();
    // Denied first (file), write later (CLI): the CLI flag is named.
    let cli = Overrides {
        write: vec![e.p("home/.ssh")],
        ..Overrides::default()
    };
    let err = e
        .resolve(None, Some("[fs]\nadd_denied = [\"{home}\"]\n"), &cli)
        .unwrap_err()
        .to_string()
        .replace(&e.root.display().to_string(), "$T");
    assert_eq!(
        err,
        "--write: $T/home/.ssh is inside denied ($T/home, policy $T/p.toml); remove one of them"
    );
    // Ports set before a later layer turns the mode off are dropped.
    let r = e.resolve(
        None,
        Some("[network]\nmode = \"tcp\"\nconnect = [443]\n"),
        &Overrides {
            allow_net: true,
            ..Overrides::default()
        },
    );
    assert_eq!(r.unwrap().grant.network, Network::On);
}

#[test]
fn cli_errors_name_the_flag() {
    let e = Env::new();
    let o = |f: fn(&mut Overrides)| {
        let mut o = Overrides::default();
        f(&mut o);
        o
    };
    assert_eq!(
        e.cli_err(&o(|o| o.read = vec!["missing".into()])),
        "--read: $T/cwd/missing does not exist (create it or remove it from --read)"
    );
    assert_eq!(
        e.cli_err(&o(|o| o.timeout = Some("soon".into()))),
        "--timeout: invalid duration \"soon\" (use e.g. \"30s\", \"500ms\", \"5m\")"
    );
    assert_eq!(
        e.cli_err(&o(|o| o.timeout = Some("0".into()))),
        "--timeout: must be greater than zero"
    );
    assert_eq!(
        e.cli_err(&o(|o| o.env = vec!["A B".into()])),
        "--env: invalid variable name \"A B\" (use NAME or PREFIX*)"
    );
    assert_eq!(
        e.cli_err(&o(|o| o.env = vec!["=x".into()])),
        "--env: invalid variable name \"\" (use letters, digits and _)"
    );
}

#[test]
fn unreadable_policy_file() {
    let e = Env::new();
    let sources = Sources {
        profile: None,
        policy_file: Some("nope.toml".into()),
    };
    let err = load(&sources, &e.ctx)
        .unwrap_err()
        .to_string()
        .replace(&e.root.display().to_string(), "$T");
    assert!(
        err.starts_with("policy $T/cwd/nope.toml: cannot read: "),
        "{err}"
    );
}

#[test]
fn tmp_as_a_root_is_refused_while_the_private_tmp_covers_it() {
    let e = Env::new();
    assert_eq!(
        e.err("[fs]\nadd_write = [\"/tmp\"]\n"),
        "policy $T/p.toml:2: fs.add_write: /tmp as a write root would be hidden by the call's \
         private /tmp (private_tmp = true, profile default); grant a directory beneath /tmp \
         instead, or set [fs] private_tmp = false to share the host's /tmp"
    );
    // Control: without the private tmp, the host's /tmp can be granted.
    let shared = "[fs]\nadd_write = [\"/tmp\"]\nprivate_tmp = false\n";
    let r = e
        .resolve(None, Some(shared), &Overrides::default())
        .expect("host /tmp without a private tmp");
    assert!(
        r.grant
            .write
            .iter()
            .any(|w| w == std::path::Path::new("/tmp"))
    );
}

#[test]
fn a_root_through_a_link_inside_any_write_root_of_the_session_is_refused() {
    let e = Env::new();
    std::fs::create_dir_all(e.p("shared/real")).unwrap();
    std::os::unix::fs::symlink(e.p("home/.ssh"), e.p("shared/x")).unwrap();
    // `shared` is a write root of tool a only: the defaults' read root
    // through a link in it is refused all the same.
    let text = format!(
        "[tools.a.fs]\nadd_write = [\"{0}/shared\"]\n[fs]\nadd_read = [\"{0}/shared/x\"]\n",
        e.root.display()
    );
    assert_eq!(
        e.err(&text),
        "policy $T/p.toml:4: fs.add_read: $T/shared/x resolves through the symlink $T/shared/x -> $T/home/.ssh, \
         which lies inside the write root $T/shared (a call can replace that link to point anywhere); \
         name the directory itself ($T/home/.ssh) in fs.add_read instead, or replace the link with a real directory"
    );
    // Control: the real directory beside it, and the link with no write
    // root around it.
    let ok = text.replace("shared/x", "shared/real");
    assert!(e.resolve(None, Some(&ok), &Overrides::default()).is_ok());
    let alone = format!("[fs]\nadd_read = [\"{}/shared/x\"]\n", e.root.display());
    let r = e
        .resolve(None, Some(&alone), &Overrides::default())
        .unwrap();
    assert!(r.grant.read.contains(&e.p("home/.ssh")));
    // The project counts even where a profile makes it read-only, and a
    // --write flag makes a base too.
    std::os::unix::fs::symlink(e.p("tooldir"), e.p("project/docs")).unwrap();
    let cli = Overrides {
        read: vec![e.p("project/docs")],
        ..Default::default()
    };
    let err = e.resolve(Some("untrusted"), None, &cli).unwrap_err();
    assert!(err.to_string().contains("inside the write root"), "{err}");
    let cli = Overrides {
        write: vec![e.p("shared")],
        read: vec![e.p("shared/x")],
        ..Default::default()
    };
    let err = e.cli_err(&cli);
    assert!(
        err.starts_with("--read: $T/shared/x resolves through the symlink"),
        "{err}"
    );
}

#[test]
fn every_grant_carries_the_sessions_write_roots_for_its_use_time_check() {
    // Tool a writes `shared`; tool b reads `shared/docs`. A call of a can
    // replace `docs` with a link after b's grant is resolved (while b's
    // call waits for approval): b's grant names `shared` among the places
    // its roots are opened without following a link, though it is none of
    // b's write roots.
    let e = Env::new();
    std::fs::create_dir_all(e.p("shared/docs")).unwrap();
    let text = format!(
        "[tools.a.fs]\nadd_write = [\"{0}/shared\"]\n[tools.b.fs]\nadd_read = [\"{0}/shared/docs\"]\n",
        e.root.display()
    );
    let none = Requests::default();
    let b = e.tool(Some(&text), "b", &none);
    assert!(
        !b.grant.write.contains(&e.p("shared")),
        "{:?}",
        b.grant.write
    );
    assert!(b.grant.link_bases().contains(&e.p("shared")));
    assert!(b.grant.link_bases().contains(&e.p("project")));
    // Control: with no tool writing it, `shared` is nobody's base.
    let alone = format!(
        "[tools.b.fs]\nadd_read = [\"{}/shared/docs\"]\n",
        e.root.display()
    );
    let b = e.tool(Some(&alone), "b", &none);
    assert!(!b.grant.link_bases().contains(&e.p("shared")));
}
