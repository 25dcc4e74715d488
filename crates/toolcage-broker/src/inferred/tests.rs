use super::files::*;
use super::*;

fn grant() -> Grant {
    let mut g = Grant::closed("/work/p".into());
    g.read = vec!["/usr".into(), "/etc".into()];
    g.write = vec!["/work/p".into()];
    g.protected = vec!["/work/p/.git".into()];
    g.denied = vec!["/etc/shadow".into(), "/etc/app".into()];
    g.homes = vec!["/root".into()];
    g
}

/// The fix was withheld, and the reason says so.
fn withheld(d: &Denial) -> bool {
    d.fix.is_none() && d.reason.ends_with(": no fix is offered")
}

fn one(text: &str) -> Option<Denial> {
    let mut v = from_output(&grant(), false, Path::new("/work/p/sub"), text);
    assert!(v.len() <= 1, "{v:?}");
    v.pop()
}

#[test]
fn each_message_shape_names_its_path_and_the_fix() {
    let d = one("cat: /etc/shadow: Permission denied").unwrap();
    assert_eq!((d.op, d.target.as_str()), ("read", "/etc/shadow"));
    assert!(
        d.reason.contains("built-in secret") && d.fix.is_none(),
        "{d:?}"
    );
    let d = one("cat: /etc/ssh/ssh_host_ed25519_key: Permission denied").unwrap();
    assert!(d.reason.contains("SSH host private keys"), "{d:?}");
    let d = one("cat: /etc/app/token: Permission denied").unwrap();
    assert!(
        d.fix
            .as_deref()
            .is_some_and(|f| f.contains("toolcage policy") && f.contains("/etc/app")),
        "{d:?}"
    );
    // A write to a system directory: refused, and no fix suggests it.
    let d = one("touch: cannot touch '/usr/x': Read-only file system").unwrap();
    assert!(
        withheld(&d) && d.reason.contains("a system directory"),
        "{d:?}"
    );
    let d = one("PermissionError: [Errno 13] Permission denied: '/work/p/.git/config'").unwrap();
    assert!(d.reason.starts_with("protected"), "{}", d.reason);
    let d = one("sh: 1: cannot create /etc/x.conf: Permission denied").unwrap();
    assert!(withheld(&d), "{d:?}");
    // A script naming itself first: only the refused path counts.
    let d = one("/work/p/.agents/tools/t: 3: cannot create /etc/x: Read-only file system");
    assert_eq!(d.unwrap().target, "/etc/x");
    // Outside every root and present on the host: the missing path is
    // the sandbox's doing.
    // The operator's home itself is never offered.
    let d = one("ls: cannot access '/root': No such file or directory").unwrap();
    assert!(withheld(&d) && d.reason.contains("home"), "{d:?}");
    assert!(
        d.inferred && d.line().ends_with(", inferred)"),
        "{}",
        d.line()
    );
    // Control: a directory outside the system trees gets its fix.
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut g = grant();
    g.read.push(crate_dir.to_path_buf());
    g.homes = vec![crate_dir.parent().unwrap().to_path_buf()];
    let text = format!(
        "touch: cannot touch '{}/x': Read-only file system",
        crate_dir.display()
    );
    let d = from_output(&g, false, Path::new("/work/p"), &text);
    assert_eq!(
        d[0].fix.as_deref(),
        Some(format!("--write {}", crate_dir.display()).as_str())
    );
}

#[test]
fn a_home_secret_is_named_and_never_offered() {
    // Outside /tmp, which is the call's own.
    let home = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
    let h = home.path().canonicalize().unwrap();
    std::fs::create_dir_all(h.join(".ssh")).unwrap();
    std::fs::write(h.join(".ssh/id_rsa"), "k").unwrap();
    std::fs::write(h.join(".ssh/known_hosts"), "k").unwrap();
    let mut g = grant();
    g.homes = vec![h.clone()];
    let text = format!(
        "cat: {}/.ssh/id_rsa: No such file or directory",
        h.display()
    );
    let d = from_output(&g, false, Path::new("/work/p"), &text);
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(
        d[0].fix.is_none() && d[0].reason.contains("SSH private keys"),
        "{d:?}"
    );
    // Control: known_hosts is no secret; reading it is a fix like any.
    let text = format!(
        "cat: {}/.ssh/known_hosts: No such file or directory",
        h.display()
    );
    let d = from_output(&g, false, Path::new("/work/p"), &text);
    assert_eq!(
        d[0].fix.as_deref(),
        Some(format!("--read {}/.ssh/known_hosts", h.display()).as_str())
    );
}

#[test]
fn the_host_tmp_namespace_free_is_named_with_the_fix() {
    let mut g = grant();
    g.private_tmp = true;
    let own = Path::new("/tmp/.toolcage-0/tmp-1-0");
    let d = host_tmp(&g, Some(own), "tmpfile: Permission denied\n").unwrap();
    assert_eq!((d.op, d.target.as_str()), ("create", "/tmp"));
    assert!(d.reason.contains("tmpfile()"), "{d:?}");
    assert!(
        d.fix
            .as_deref()
            .is_some_and(|f| f.contains("add_write = [\"/tmp\"]"))
    );
    let text = "mktemp: failed to create file via template '/tmp/x.XXXX': Permission denied\n\
                sh: 1: cannot create /tmp/y: Permission denied\n";
    assert_eq!(host_tmp(&g, Some(own), text).unwrap().count, 2);
    // Not a refusal, the call's own tmp, a missing file: nothing.
    assert!(host_tmp(&g, Some(own), "tmpfile: made /tmp/z").is_none());
    let mine = format!("cat: {}/f: Permission denied", own.display());
    assert!(host_tmp(&g, Some(own), &mine).is_none());
    assert!(host_tmp(&g, Some(own), "cat: /tmp/gone: No such file or directory").is_none());
    // /tmp granted: the refusal is the file's own.
    g.write.push("/tmp".into());
    assert!(host_tmp(&g, None, "tmpfile: Permission denied").is_none());
}

#[test]
fn relative_paths_are_taken_from_the_working_directory() {
    // cwd is /work/p/sub.
    let d = one("touch: cannot touch '../../../usr/x': Read-only file system").unwrap();
    assert!(d.target == "/usr/x" && withheld(&d), "{d:?}");
    let d = one("sh: 1: cannot create ../.git/config: Read-only file system").unwrap();
    assert_eq!(d.target, "/work/p/.git/config");
    assert!(d.reason.starts_with("protected"), "{d:?}");
    let d = one("cat: ../../../../etc/shadow: Permission denied").unwrap();
    assert!(d.reason.contains("built-in secret"), "{d:?}");
    // Control: the same relative file inside the write root is the
    // file's own business; a number or a phrase is no path.
    assert!(one("touch: cannot touch 'x.txt': Permission denied").is_none());
    assert!(one("sh: 1: cannot create x: Permission denied").is_none());
}

#[test]
fn a_symlink_is_classified_where_it_leads_and_tmp_projects_count() {
    // The project is under /tmp (the call's private /tmp elsewhere).
    let project = tempfile::tempdir().unwrap();
    let p = project.path().canonicalize().unwrap();
    std::os::unix::fs::symlink("/etc/shadow", p.join("link")).unwrap();
    let mut g = grant();
    g.write = vec![p.clone()];
    g.protected = vec![p.join("tools.toml")];
    let d = from_output(&g, false, &p, "cat: link: Permission denied");
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].target, "/etc/shadow");
    let text = format!(
        "sh: 1: cannot create {}/tools.toml: Read-only file system",
        p.display()
    );
    let d = from_output(&g, false, &p, &text);
    assert!(
        d.len() == 1 && d[0].reason.starts_with("protected"),
        "{d:?}"
    );
    // Control: a plain file in the project is not explained.
    std::fs::write(p.join("plain"), "").unwrap();
    assert!(from_output(&g, false, &p, "cat: plain: Permission denied").is_empty());
}

#[test]
fn creating_in_a_host_directory_outside_every_root_is_explained() {
    for line in [
        "touch: cannot touch '/root/tc-no-such': No such file or directory",
        "sh: 1: cannot create /var/tc-no-such: Directory nonexistent",
    ] {
        let d = one(line).unwrap_or_else(|| panic!("{line}"));
        assert_eq!(d.op, "create", "{d:?}");
        // /root is the operator's home, /var a system directory.
        assert!(withheld(&d), "{d:?}");
    }
    // Control: a host directory elsewhere gets its fix.
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let line = format!(
        "touch: cannot touch '{}/tc-no-such': No such file or directory",
        crate_dir.display()
    );
    let mut g = grant();
    g.homes = vec![crate_dir.parent().unwrap().to_path_buf()];
    let d = from_output(&g, false, Path::new("/work/p"), &line);
    assert_eq!(
        d[0].fix.as_deref(),
        Some(format!("--write {}", crate_dir.display()).as_str())
    );
    // Control: a directory the host does not have either.
    assert!(one("touch: cannot touch '/tc-no-dir/x': No such file or directory").is_none());
}

#[test]
fn what_the_grant_does_not_explain_is_left_out() {
    // Inside the write root: the file's own permissions.
    assert!(one("cat: /work/p/secret: Permission denied").is_none());
    // Missing on the host as well: really missing.
    assert!(one("cat: /no/such/tc-path: No such file or directory").is_none());
    assert!(one("cat: /etc/sudoers.d/tc-no-such: No such file or directory").is_none());
    assert!(one("cat: /etc/app/tc-no-such: No such file or directory").is_none());
    // Missing inside a read root: really missing.
    assert!(one("cat: /usr/tc-no-such: No such file or directory").is_none());
    // The call's own /tmp, and lines without an error.
    assert!(one("mkdir: cannot create directory '/tmp/x': Permission denied").is_none());
    assert!(one("reading /etc/passwd").is_none());
}

#[test]
fn a_resolver_failure_in_tcp_mode_names_why() {
    let mut g = grant();
    g.network = Network::Tcp {
        connect: vec![443],
        bind: vec![],
    };
    let d = from_output(
        &g,
        false,
        Path::new("/work/p"),
        "curl: (6) Could not resolve host: x.test",
    );
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(d[0].reason.contains("TCP sockets only"), "{d:?}");
    // Control: network on, a resolver failure is the network's own.
    g.network = Network::On;
    assert!(
        from_output(
            &g,
            false,
            Path::new("/work/p"),
            "curl: (6) Could not resolve host: x.test"
        )
        .is_empty()
    );
}

#[test]
fn no_network_messages_are_denials_only_with_the_network_off() {
    let text = "curl: (6) Could not resolve host: example.com";
    let d = one(text).unwrap();
    assert_eq!((d.layer, d.op), ("seccomp", "connect"));
    assert!(d.fix.unwrap().contains("--allow-net"));
    let mut on = grant();
    on.network = Network::On;
    assert!(
        from_output(&on, false, Path::new("/work/p"), text).is_empty(),
        "control: network on"
    );
}

#[test]
fn a_refused_system_call_is_named_whatever_the_grant() {
    for (line, op) in [
        (
            "unshare: unshare failed: Operation not permitted",
            "unshare",
        ),
        ("ptrace: Operation not permitted.", "ptrace"),
        (
            "strace: ptrace(PTRACE_TRACEME, ...): Operation not permitted",
            "ptrace",
        ),
        ("mount: /mnt: permission denied.", "mount"),
        (
            "chroot: cannot change root directory to '/x': Operation not permitted",
            "chroot",
        ),
    ] {
        let d = one(line).unwrap_or_else(|| panic!("{line}"));
        assert_eq!((d.layer, d.op, d.inferred), ("seccomp", op, true), "{line}");
        assert!(d.fix.is_none(), "{d:?}");
    }
    // Controls: the name in a path, or no refusal, is no syscall denial.
    assert!(one("cat: /work/p/mount/x: Permission denied").is_none());
    assert!(one("unshare: unshare failed: Invalid argument").is_none());
    assert!(one("remount: done").is_none());
}

/// What `text` gives namespace-free (`nsfree`) under the test grant.
fn in_mode(nsfree: bool, text: &str) -> Vec<Denial> {
    from_output(&grant(), nsfree, Path::new("/work/p"), text)
}

#[test]
fn namespace_free_refusals_of_another_process_and_bind_are_named() {
    // The lines util-linux, Go, socat and ssh-agent print (checked
    // through the binary namespace-free for the first four).
    for (line, op) in [
        (
            "prlimit: failed to set the NOFILE resource limit: Operation not permitted",
            "prlimit64",
        ),
        (
            "renice: failed to set priority for 6053 (process ID): Operation not permitted",
            "setpriority",
        ),
        (
            "renice: failed to set priority for 1000 (user ID): Operation not permitted",
            "setpriority",
        ),
        (
            "taskset: failed to set pid 6053's affinity: Operation not permitted",
            "sched_setaffinity",
        ),
        (
            "ionice: ioprio_set failed: Operation not permitted",
            "ioprio_set",
        ),
        ("listen unix @squat: bind: operation not permitted", "bind"),
        (
            "2026/01/01 socat[12] E bind(5, {AF=1 \"\\0x\"}, 5): Operation not permitted",
            "bind",
        ),
        (
            "Error: listen EPERM: operation not permitted /w/s.sock",
            "listen",
        ),
    ] {
        let v = in_mode(true, line);
        assert_eq!(v.len(), 1, "{line}: {v:?}");
        let d = &v[0];
        assert_eq!((d.layer, d.op, d.inferred), ("seccomp", op, true), "{line}");
        assert!(d.fix.is_none(), "{d:?}");
        // Control: with namespaces none of these is the filter's (the
        // host's pids are not visible, bind is the call's own).
        assert!(in_mode(false, line).is_empty(), "namespaced: {line}");
    }
    // Controls: the same programs on the tool's own process (pid 0),
    // reading rather than setting, another error, or a path that
    // merely holds the name.
    for line in [
        "taskset: failed to set pid 0's affinity: Invalid argument",
        "taskset: failed to set pid 0's affinity: Operation not permitted",
        "renice: failed to set priority for 0 (process ID): Operation not permitted",
        "renice: failed to set priority for 6053 (process ID): Permission denied",
        "prlimit: failed to get the NOFILE resource limit: Operation not permitted",
        "ionice: ioprio_get failed: Operation not permitted",
        "taskset: failed to set pid 6053's affinity: Invalid argument",
        "pid 6053's current affinity mask: 3",
    ] {
        assert!(in_mode(true, line).is_empty(), "control: {line}");
    }
    // bind and listen are refused only with the network off, or in
    // tcp mode (in both modes there: it has no namespace of its own).
    let mut on = grant();
    on.network = Network::On;
    let line = "listen unix @squat: bind: operation not permitted";
    assert!(from_output(&on, true, Path::new("/work/p"), line).is_empty());
    on.network = Network::Tcp {
        connect: vec![443],
        bind: vec![],
    };
    assert_eq!(from_output(&on, false, Path::new("/work/p"), line).len(), 1);
    // A bind refused by the filesystem (EACCES) is not the filter's.
    assert!(in_mode(true, "ssh-agent: bind: Permission denied").is_empty());
}

#[test]
fn a_refused_line_discipline_is_named_in_both_modes() {
    for nsfree in [false, true] {
        let v = in_mode(
            nsfree,
            "ldattach: can't set line discipline: Operation not permitted",
        );
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!((v[0].layer, v[0].op), ("seccomp", "ioctl"));
        assert!(v[0].target.contains("TIOCSETD"), "{v:?}");
    }
    // Controls: reading it, or a tty that is not a serial line.
    assert!(
        in_mode(
            false,
            "ldattach: can't get line discipline: Operation not permitted"
        )
        .is_empty()
    );
    assert!(in_mode(false, "ldattach: /dev/null is not a serial line").is_empty());
}

#[test]
fn repeats_are_counted_and_paths_normalised() {
    let v = from_output(
        &grant(),
        false,
        Path::new("/work/p"),
        "cat: /etc/../etc/shadow: Permission denied\ncat: /etc/shadow: Permission denied\n",
    );
    assert_eq!(v.len(), 1);
    assert_eq!((v[0].target.as_str(), v[0].count), ("/etc/shadow", 2));
}

#[test]
fn git_without_an_identity_names_both_ways_to_give_it_one() {
    let d = one("Author identity unknown").unwrap();
    assert_eq!(d.target, "git's identity");
    let fix = d.fix.unwrap();
    assert!(fix.contains("--env GIT_AUTHOR_NAME=") && fix.contains("--read ~/.gitconfig"));
    // Control: git's other failures are not an identity.
    assert!(one("fatal: not a git repository (or any of the parent directories): .git").is_none());
}

#[test]
fn a_package_managers_download_is_told_to_fetch_first() {
    let text = "    Updating crates.io index\nwarning: spurious network error: Could not resolve host: index.crates.io";
    let d = one(text).unwrap();
    assert!(
        d.fix
            .unwrap()
            .starts_with("fetch dependencies before the run")
    );
    // Control: another program's refusal keeps the flag.
    let d = one("curl: (6) Could not resolve host: example.com").unwrap();
    assert!(d.fix.unwrap().starts_with("--allow-net"));
}

#[test]
fn localhost_is_the_calls_own_in_domain_mode_only() {
    let line =
        "curl: (7) Failed to connect to localhost port 8099 after 0 ms: Couldn't connect to server";
    let mut g = grant();
    g.network = Network::Domains(toolcage_policy::DomainPolicy::default());
    let d = from_output(&g, false, Path::new("/work/p"), line);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].target, "localhost:8099");
    assert!(
        d[0].fix
            .as_deref()
            .unwrap()
            .starts_with("--allow-domain 127.0.0.1:8099")
    );
    let node = "Error: connect ECONNREFUSED 127.0.0.1:3000";
    let d = from_output(&g, false, Path::new("/work/p"), node);
    assert_eq!(d[0].target, "localhost:3000", "{d:?}");
    // Control: with the host's network, localhost is the host's.
    g.network = Network::On;
    assert!(from_output(&g, false, Path::new("/work/p"), line).is_empty());
}

#[test]
fn a_variable_the_command_did_not_get_is_named_with_its_flag() {
    // HOME is set for the test process; the grant passes nothing.
    let d = one("bash: HOME: unbound variable").unwrap();
    assert_eq!(
        (d.target.as_str(), d.fix.as_deref()),
        ("$HOME", Some("--env HOME"))
    );
    let d = one("KeyError: 'HOME'").unwrap();
    assert_eq!(d.target, "$HOME");
    // Controls: a variable unset here too was not dropped; one the
    // grant passes was not either.
    assert!(one("sh: 1: TOOLCAGE_NEVER_SET_ANYWHERE: parameter not set").is_none());
    let mut g = grant();
    g.env_allow = vec!["HO*".into()];
    assert!(
        from_output(
            &g,
            false,
            Path::new("/work/p"),
            "bash: HOME: unbound variable"
        )
        .is_empty()
    );
}
