//! The default denied and protected paths: wildcards, the built-in secrets,
//! toolcage's own state, the operator's policy file, the protected list.

use super::*;
use crate::floor::{HOME_SECRET_SOURCE, POLICY_FILE_SOURCE, SECRET_SOURCE, STATE_SOURCE};
use crate::secrets::SECRETS;

fn sources_of(r: &Resolved, key: &str, value: &Path) -> Vec<String> {
    let value = value.display().to_string();
    r.provenance
        .iter()
        .filter(|p| p.key == key && p.value == value)
        .map(|p| p.source.clone())
        .collect()
}

fn with_policy_at(e: &Env, path: &Path, profile: Option<&str>, cli: &Overrides) -> Resolved {
    try_policy_at(e, path, profile, cli).unwrap()
}

fn try_policy_at(
    e: &Env,
    path: &Path,
    profile: Option<&str>,
    cli: &Overrides,
) -> Result<Resolved, PolicyError> {
    let sources = Sources {
        profile: profile.map(str::to_string),
        policy_file: Some(path.to_path_buf()),
    };
    load(&sources, &e.ctx)?.resolve(&e.ctx, cli, None)
}

#[test]
fn a_wildcard_in_the_last_component_is_expanded_against_what_exists() {
    let e = Env::new();
    for f in ["keys/a.pem", "keys/.b.pem", "keys/c.txt", "keys/pem"] {
        std::fs::create_dir_all(e.p("project/keys")).unwrap();
        std::fs::write(e.p("project").join(f), "x").unwrap();
    }
    let text = "[fs]\nadd_denied = [\"keys/*.pem\", \"none/*.pem\", \"keys/*.zzz\"]\n\
                add_protected = [\"{project}/keys/*.txt\"]\n";
    let r = e.resolve(None, Some(text), &Overrides::default()).unwrap();
    let from_file: Vec<&PathBuf> = r
        .grant
        .denied
        .iter()
        .filter(|p| p.starts_with(e.p("project")))
        .collect();
    assert_eq!(
        from_file,
        [&e.p("project/keys/.b.pem"), &e.p("project/keys/a.pem")],
        "matching names only (a leading dot included); no match gives nothing"
    );
    assert!(r.grant.protected.contains(&e.p("project/keys/c.txt")));
    assert!(!r.grant.protected.contains(&e.p("project/keys/*.txt")));
    let label = format!("policy {}", e.p("p.toml").display());
    assert_eq!(
        sources_of(&r, "denied", &e.p("project/keys/a.pem")),
        [label]
    );
    // A file created later is covered by the next resolution.
    std::fs::write(e.p("project/keys/d.pem"), "x").unwrap();
    let r = e.resolve(None, Some(text), &Overrides::default()).unwrap();
    assert!(r.grant.denied.contains(&e.p("project/keys/d.pem")));
}

#[test]
fn a_wildcard_elsewhere_is_an_error_with_the_line() {
    let e = Env::new();
    assert_eq!(
        e.err("[fs]\nadd_denied = [\n  \"{home}\",\n  \"{home}/*/.ssh\",\n]\n"),
        "policy $T/p.toml:4: fs.add_denied: \"{home}/*/.ssh\": a * wildcard may only appear \
         in the last path component (list each directory instead)"
    );
    assert_eq!(
        e.err("[fs]\nadd_read = [\"src/*.rs\"]\n"),
        "policy $T/p.toml:2: fs.add_read: $T/project/src/*.rs does not exist (create it or \
         remove it from fs.add_read) (a * wildcard is expanded only in protected and denied paths)"
    );
}

#[test]
fn the_built_in_secrets_are_denied_under_every_profile() {
    let e = Env::new();
    let existing: Vec<PathBuf> = SECRETS
        .iter()
        .filter(|(p, _)| !p.contains('*'))
        .map(|(p, _)| PathBuf::from(p))
        .filter(|p| p.symlink_metadata().is_ok())
        .map(|p| canonical_lenient(&p))
        .collect();
    let host_keys: Vec<PathBuf> = std::fs::read_dir("/etc/ssh")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|d| d.path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with("ssh_host_") && n.ends_with("_key")
        })
        .collect();
    for name in profile_names() {
        let r = e.resolve(Some(name), None, &Overrides::default()).unwrap();
        for p in existing.iter().chain(&host_keys) {
            assert!(r.grant.denied.contains(p), "{name}: {}", p.display());
            assert_eq!(sources_of(&r, "denied", p), [SECRET_SOURCE], "{name}");
        }
        // Missing secrets are left out.
        for (raw, _) in SECRETS {
            if !raw.contains('*') && Path::new(raw).symlink_metadata().is_err() {
                assert!(!r.grant.denied.contains(&PathBuf::from(raw)), "{raw}");
            }
        }
        assert!(
            !r.grant
                .denied
                .iter()
                .any(|p| p.to_string_lossy().contains('*')),
            "{name}: wildcards never reach the grant"
        );
    }
    // On any Linux this machine has at least /etc/shadow: the test is not vacuous.
    assert!(existing.contains(&PathBuf::from("/etc/shadow")));
}

#[test]
fn the_secrets_survive_a_policy_that_replaces_the_denied_list() {
    let e = Env::new();
    let r = e
        .resolve(
            None,
            Some("[fs]\ndenied = [\"{home}/x\"]\n"),
            &Overrides::default(),
        )
        .unwrap();
    assert!(r.grant.denied.contains(&e.p("home/x")));
    assert!(r.grant.denied.contains(&PathBuf::from("/etc/shadow")));
    assert!(r.grant.denied.contains(&e.p("home/.local/state/toolcage")));
    // A tool section that empties the list does not remove them either.
    let r = e.tool(
        Some("[tools.t.fs]\ndenied = []\n"),
        "t",
        &Requests::default(),
    );
    assert!(r.grant.denied.contains(&PathBuf::from("/etc/shadow")));
}

#[test]
fn a_root_inside_a_secret_is_refused_with_the_fix() {
    let e = Env::new();
    let cli = Overrides {
        read: vec!["/etc/shadow".into()],
        ..Overrides::default()
    };
    assert_eq!(
        e.cli_err(&cli),
        "--read: /etc/shadow is also denied (/etc/shadow, built-in secret (always denied)), \
         which no policy can lift; remove the read root"
    );
    // Control: /etc as a whole stays readable, with the secret masked.
    let cli = Overrides {
        read: vec!["/etc".into()],
        ..Overrides::default()
    };
    e.resolve(None, None, &cli).unwrap();
}

#[test]
fn toolcage_state_is_denied_in_every_grant() {
    let mut e = Env::new();
    let base = e.p("home/.local/state/toolcage");
    for name in profile_names() {
        let r = e.resolve(Some(name), None, &Overrides::default()).unwrap();
        assert!(r.grant.denied.contains(&base), "{name}");
        assert_eq!(sources_of(&r, "denied", &base), [STATE_SOURCE]);
    }
    let r = e.tool(None, "t", &Requests::default());
    assert!(r.grant.denied.contains(&base));
    assert_eq!(e.ctx.state_base(), base);

    // Reading it on purpose is refused.
    std::fs::create_dir_all(&base).unwrap();
    let cli = Overrides {
        read: vec![base.join("..")],
        ..Overrides::default()
    };
    e.resolve(None, None, &cli).unwrap();
    let cli = Overrides {
        read: vec![base.clone()],
        ..Overrides::default()
    };
    assert!(
        e.cli_err(&cli)
            .contains("toolcage state (audit log, rate limits)), which no policy can lift"),
    );

    // $XDG_STATE_HOME moves it (a relative value is ignored, as the spec says).
    e.ctx.xdg_state_home = Some(e.p("xdg"));
    let r = e.resolve(None, None, &Overrides::default()).unwrap();
    assert!(r.grant.denied.contains(&e.p("xdg/toolcage")));
    assert!(!r.grant.denied.contains(&base));
    e.ctx.xdg_state_home = Some("rel".into());
    let r = e.resolve(None, None, &Overrides::default()).unwrap();
    assert!(r.grant.denied.contains(&base));
}

#[test]
fn a_policy_file_inside_a_write_root_is_protected() {
    let e = Env::new();
    let inside = e.p("project/build.toml");
    std::fs::write(&inside, "[limits]\ntimeout = \"1m\"\n").unwrap();
    let r = with_policy_at(&e, &inside, None, &Overrides::default());
    assert!(r.grant.protected.contains(&inside));
    assert_eq!(sources_of(&r, "protected", &inside), [POLICY_FILE_SOURCE]);
    let text = render_text(&r, &[]);
    let line = text
        .lines()
        .find(|l| l.contains(&inside.display().to_string()))
        .unwrap();
    assert!(line.trim_start().starts_with("protected"), "{line}");
    assert!(
        line.ends_with("  (--policy file inside a write root)"),
        "{line}"
    );
    // Relative to the cwd, through `..`: the same file.
    let rel = PathBuf::from("../project/./build.toml");
    let r = with_policy_at(&e, &rel, None, &Overrides::default());
    assert!(r.grant.protected.contains(&inside));

    // Outside every write root: nothing to add.
    let outside = e.file("[limits]\ntimeout = \"1m\"\n");
    let r = with_policy_at(&e, &outside, None, &Overrides::default());
    assert!(!r.grant.protected.contains(&outside));
    assert!(sources_of(&r, "protected", &outside).is_empty());
    // ... unless a flag makes its directory writable.
    let cli = Overrides {
        write: vec![e.p("tooldir")],
        ..Overrides::default()
    };
    let in_tooldir = e.p("tooldir/p.toml");
    std::fs::write(&in_tooldir, "").unwrap();
    let r = with_policy_at(&e, &in_tooldir, None, &cli);
    assert!(r.grant.protected.contains(&in_tooldir));

    // The project is read-only under `untrusted`: not in a write root.
    let r = with_policy_at(&e, &inside, Some("untrusted"), &Overrides::default());
    assert!(!r.grant.protected.contains(&inside));

    // Making the policy file itself a write root is refused.
    let cli = Overrides {
        write: vec![in_tooldir.clone()],
        ..Overrides::default()
    };
    let err = try_policy_at(&e, &in_tooldir, None, &cli)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("--write: ")
            && err.contains("is also protected")
            && err.ends_with("remove the write root"),
        "{err}"
    );

    // /dev/null is a write root that contains nothing.
    let r = with_policy_at(&e, Path::new("/dev/null"), None, &Overrides::default());
    assert!(!r.grant.protected.contains(&PathBuf::from("/dev/null")));
}

#[test]
fn a_symlinked_policy_file_is_protected_under_each_name_inside_a_write_root() {
    let e = Env::new();
    // A link inside the project to a file outside: replacing the link
    // changes the policy, so the link is protected; the target is not in a
    // write root.
    let outside = e.file("");
    let link = e.p("project/policy.toml");
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    let r = with_policy_at(&e, &link, None, &Overrides::default());
    assert!(r.grant.protected.contains(&link));
    assert!(!r.grant.protected.contains(&outside));
    // A link outside to a file inside: the canonical file is protected.
    let inside = e.p("project/real.toml");
    std::fs::write(&inside, "").unwrap();
    let out_link = e.p("cwd/p.toml");
    std::os::unix::fs::symlink(&inside, &out_link).unwrap();
    let r = with_policy_at(&e, &out_link, None, &Overrides::default());
    assert!(r.grant.protected.contains(&inside));
    assert!(!r.grant.protected.contains(&out_link));
}

#[test]
fn the_protected_list_covers_tools_and_config_that_run_commands_later() {
    let e = Env::new();
    let r = e.resolve(None, None, &Overrides::default()).unwrap();
    for name in [
        ".agents",
        ".clawd",
        "tools.toml",
        ".mcp.json",
        ".git",
        ".tools",
        ".claude",
        ".codex",
        ".gemini",
        ".cursor",
        ".vscode",
        ".idea",
        ".zed",
        ".devcontainer",
        ".envrc",
        ".pre-commit-config.yaml",
        ".husky",
    ] {
        let p = e.p("project").join(name);
        assert!(r.grant.protected.contains(&p), "{name}");
        assert_eq!(sources_of(&r, "protected", &p), ["profile default"]);
    }
    // tools/ only as an A3S tool directory (tests/with.rs).
    std::fs::create_dir_all(e.p("project/tools")).unwrap();
    std::fs::write(
        e.p("project/tools/t.md"),
        "---
kind: script
---
",
    )
    .unwrap();
    let r = e.resolve(None, None, &Overrides::default()).unwrap();
    assert!(r.grant.protected.contains(&e.p("project/tools")));
}

#[test]
fn the_default_profile_documents_every_built_in_secret() {
    let text = crate::profiles::profile_text("default").unwrap();
    for (raw, why) in SECRETS {
        assert!(
            text.contains(raw),
            "policies/default.toml does not list {raw} ({why})"
        );
    }
}

/// A home with keys, credentials and ordinary files (`Env`'s home).
fn home_with_secrets(e: &Env) {
    for (f, text) in [
        ("home/.ssh/id_ed25519", "KEY"),
        ("home/.ssh/work_key", "KEY"),
        ("home/.ssh/known_hosts", "host"),
        ("home/.ssh/config", "Host x"),
        ("home/.ssh/id_ed25519.pub", "pub"),
        ("home/.aws/credentials", "AWS"),
        ("home/.npmrc", "//registry/:_authToken=T"),
        ("home/.cargo/credentials.toml", "token"),
        ("home/notes.txt", "notes"),
    ] {
        std::fs::create_dir_all(e.p(f).parent().unwrap()).unwrap();
        std::fs::write(e.p(f), text).unwrap();
    }
}

fn read_home(e: &Env) -> Overrides {
    Overrides {
        read: vec![e.p("home")],
        ..Default::default()
    }
}

#[test]
fn home_secrets_are_denied_under_a_read_root_and_ordinary_files_are_not() {
    let e = Env::new();
    home_with_secrets(&e);
    let r = e.resolve(None, None, &read_home(&e)).unwrap();
    for secret in [
        "home/.ssh/id_ed25519",
        "home/.ssh/work_key",
        "home/.aws",
        "home/.npmrc",
        "home/.cargo/credentials.toml",
    ] {
        assert!(r.grant.denied.contains(&e.p(secret)), "{secret}");
        assert_eq!(
            sources_of(&r, "denied", &e.p(secret)),
            [HOME_SECRET_SOURCE],
            "{secret}"
        );
    }
    // Controls: the keys' neighbours and ordinary files stay readable.
    for open in [
        "home",
        "home/.ssh",
        "home/.ssh/known_hosts",
        "home/.ssh/config",
        "home/.ssh/id_ed25519.pub",
        "home/notes.txt",
    ] {
        assert!(!r.grant.denied.contains(&e.p(open)), "{open}");
    }
    // Where no root reaches the home, nothing is looked up or listed.
    let r = e.resolve(None, None, &Overrides::default()).unwrap();
    assert!(!r.grant.denied.contains(&e.p("home/.aws")));
    // A root inside a secret is an error; its message offers no lift.
    let cli = Overrides {
        read: vec![e.p("home/.aws")],
        ..Default::default()
    };
    let msg = e.cli_err(&cli);
    assert!(msg.contains("which no flag can lift"), "{msg}");
}

#[test]
fn allow_secrets_lifts_exactly_the_entry_it_names() {
    let e = Env::new();
    home_with_secrets(&e);
    let r = e
        .resolve(
            None,
            Some("[fs]\nallow_secrets = [\"~/.npmrc\"]\n"),
            &read_home(&e),
        )
        .unwrap();
    assert!(!r.grant.denied.contains(&e.p("home/.npmrc")));
    // Control: every other secret stays denied.
    assert!(r.grant.denied.contains(&e.p("home/.aws")));
    assert!(r.grant.denied.contains(&e.p("home/.ssh/id_ed25519")));
    assert!(
        r.provenance
            .iter()
            .any(|p| p.key == "allow_secrets" && p.value == "~/.npmrc")
    );
    // Per tool, too.
    let r = e.tool(
        Some("[tools.pub.fs]\nallow_secrets = [\"{home}/.ssh\"]\nadd_read = [\"{home}\"]\n"),
        "pub",
        &Requests::default(),
    );
    assert!(!r.grant.denied.contains(&e.p("home/.ssh/id_ed25519")));
    assert!(r.grant.denied.contains(&e.p("home/.npmrc")));
    // A name that is no entry, or an /etc secret, is an error.
    assert!(
        e.err("[fs]\nallow_secrets = [\"~/.ssh/id_ed25519\"]\n")
            .contains("is not a home secret"),
    );
    assert!(
        e.err("[fs]\nallow_secrets = [\"/etc/shadow\"]\n")
            .contains("never lifted")
    );
}

#[test]
fn a_policy_file_inside_the_project_can_lift_nothing() {
    let e = Env::new();
    home_with_secrets(&e);
    let inside = e.p("project/toolcage.toml");
    std::fs::write(&inside, "[fs]\nallow_secrets = [\"~/.npmrc\"]\n").unwrap();
    let err = try_policy_at(&e, &inside, None, &read_home(&e)).unwrap_err();
    assert!(
        err.to_string()
            .contains("only a --policy file outside the project"),
        "{err}"
    );
    // Control: the same file outside the project lifts it.
    let outside = e.p("toolcage.toml");
    std::fs::copy(&inside, &outside).unwrap();
    let r = with_policy_at(&e, &outside, None, &read_home(&e));
    assert!(!r.grant.denied.contains(&e.p("home/.npmrc")));
}

#[test]
fn allow_home_project_comes_only_from_a_file_outside_that_home() {
    let mut e = Env::new();
    e.ctx.project = e.p("home");
    assert!(e.ctx.project_refusal().is_some());
    let sources = |p: &Path| Sources {
        profile: None,
        policy_file: Some(p.to_path_buf()),
    };
    let outside = e.p("op.toml");
    std::fs::write(&outside, "allow_home_project = true\n").unwrap();
    let stack = load(&sources(&outside), &e.ctx).unwrap();
    assert!(stack.allows_home_project(&e.ctx).unwrap());
    // Inside the home (the project): refused, with the line.
    let inside = e.p("home/.config/toolcage.toml");
    std::fs::create_dir_all(inside.parent().unwrap()).unwrap();
    std::fs::copy(&outside, &inside).unwrap();
    let stack = load(&sources(&inside), &e.ctx).unwrap();
    let err = stack.allows_home_project(&e.ctx).unwrap_err().to_string();
    assert!(
        err.contains(":1: allow_home_project: only a --policy file outside"),
        "{err}"
    );
    // Not said, or said false: not allowed. `/` never is.
    std::fs::write(&outside, "allow_home_project = false\n").unwrap();
    let stack = load(&sources(&outside), &e.ctx).unwrap();
    assert!(!stack.allows_home_project(&e.ctx).unwrap());
    // Control: a project beside the home is no home.
    e.ctx.project = e.p("project");
    assert!(e.ctx.project_refusal().is_none());
    // Not in a tool section.
    std::fs::write(&outside, "[tools.x]\nallow_home_project = true\n").unwrap();
    assert!(load(&sources(&outside), &e.ctx).is_err());
}

#[test]
fn the_default_profile_documents_every_home_secret() {
    let text = crate::profiles::profile_text("default").unwrap();
    for s in crate::secrets::HOME_SECRETS {
        assert!(
            text.contains(&s.name()),
            "policies/default.toml does not list {} ({})",
            s.name(),
            s.what
        );
    }
}
