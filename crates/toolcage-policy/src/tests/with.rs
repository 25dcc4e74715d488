//! Presets in resolution (`with = [...]`, `--with`), the `{a3s_tools}`
//! guard, explicit `TMPDIR`/`HOME` values and the PATH directories a call
//! does not get.

use super::*;
use crate::presets::HostEnv;
use crate::search_path::DroppedDir;

fn line<'a>(r: &'a Resolved, key: &str, value: &str) -> Option<&'a Provenance> {
    r.provenance
        .iter()
        .find(|p| p.key == key && p.value == value)
}

fn with(names: &[&str]) -> Overrides {
    Overrides {
        with: names.iter().map(|n| n.to_string()).collect(),
        ..Overrides::default()
    }
}

fn mkdirs(e: &Env, dirs: &[&str]) {
    for d in dirs {
        std::fs::create_dir_all(e.p(d)).unwrap();
    }
}

#[test]
fn presets_from_a_file_and_the_flag_show_what_they_add_and_where_from() {
    let e = Env::new();
    mkdirs(
        &e,
        &["home/.cargo/bin", "home/.rustup", "home/.pyenv/shims"],
    );
    std::fs::write(e.p("home/.cargo/credentials.toml"), "token").unwrap();
    let text = "with = [\"rust\"]\n[limits]\ntimeout = \"1m\"\n";
    let r = e.resolve(None, Some(text), &with(&["python"])).unwrap();
    let file_src = format!("preset rust (policy {})", e.p("p.toml").display());
    let cargo = e.p("home/.cargo").display().to_string();
    assert_eq!(
        line(&r, "with", "rust").unwrap().source,
        format!("policy {}", e.p("p.toml").display())
    );
    assert_eq!(line(&r, "with", "python").unwrap().source, "--with");
    assert_eq!(line(&r, "read", &cargo).unwrap().source, file_src);
    let creds = e.p("home/.cargo/credentials.toml").display().to_string();
    assert_eq!(line(&r, "denied", &creds).unwrap().source, file_src);
    let pyenv = e.p("home/.pyenv").display().to_string();
    assert_eq!(
        line(&r, "read", &pyenv).unwrap().source,
        "preset python (--with)"
    );
    assert_eq!(r.grant.env_set["CARGO_HOME"], cargo);
    assert_eq!(r.grant.env_set["PYENV_ROOT"], pyenv);
    assert_eq!(
        line(
            &r,
            "env.set",
            &format!("RUSTUP_HOME={}", e.p("home/.rustup").display())
        )
        .unwrap()
        .source,
        file_src
    );
    // Control: without presets none of it.
    let r = e.resolve(None, None, &Overrides::default()).unwrap();
    assert!(!r.grant.read.contains(&e.p("home/.cargo")));
    assert!(!r.grant.env_set.contains_key("CARGO_HOME"));
    assert!(!r.provenance.iter().any(|p| p.key == "with"));
}

#[test]
fn a_tool_section_preset_applies_to_that_tool_only() {
    let e = Env::new();
    mkdirs(&e, &["home/.cargo"]);
    let text = "[tools.build]\nwith = [\"rust\"]\n";
    let req = Requests::default();
    assert!(
        e.tool(Some(text), "build", &req)
            .grant
            .read
            .contains(&e.p("home/.cargo"))
    );
    assert!(
        !e.tool(Some(text), "lint", &req)
            .grant
            .read
            .contains(&e.p("home/.cargo"))
    );
}

#[test]
fn an_unknown_preset_names_the_file_line_and_the_valid_presets() {
    let e = Env::new();
    assert_eq!(
        e.err("# build\nwith = [\"rust\",\n  \"nodejs\"]\n"),
        "policy $T/p.toml:3: with: unknown preset \"nodejs\" (valid presets: rust, node, python)"
    );
    assert_eq!(
        e.err("[tools.x]\nwith = [\"go\"]\n"),
        "policy $T/p.toml:2: tools.x.with: unknown preset \"go\" (valid presets: rust, node, python)"
    );
    assert_eq!(
        e.cli_err(&with(&["go"])),
        "--with: unknown preset \"go\" (valid presets: rust, node, python)"
    );
    assert!(
        e.err("with = \"rust\"\n")
            .starts_with("policy $T/p.toml:1: with: ")
    );
}

#[test]
fn presets_compose_with_any_profile_and_explicit_values_win() {
    let e = Env::new();
    mkdirs(&e, &["home/.cargo", "other"]);
    let r = e
        .resolve(Some("untrusted"), None, &with(&["rust"]))
        .unwrap();
    assert!(r.grant.read.contains(&e.p("home/.cargo")));
    assert!(!r.grant.write.contains(&e.p("project")), "still untrusted");
    let mut cli = with(&["rust"]);
    cli.env = vec![format!("CARGO_HOME={}", e.p("other").display())];
    cli.read = vec![e.p("other")];
    let r = e.resolve(None, None, &cli).unwrap();
    assert_eq!(
        r.grant.env_set["CARGO_HOME"],
        e.p("other").display().to_string()
    );
    assert_eq!(source_of_set(&r, "CARGO_HOME"), "--env");
}

fn source_of_set<'a>(r: &'a Resolved, name: &str) -> &'a str {
    let prefix = format!("{name}=");
    &r.provenance
        .iter()
        .find(|p| p.key == "env.set" && p.value.starts_with(&prefix))
        .unwrap()
        .source
}

#[test]
fn a_preset_root_inside_a_denied_path_is_reported_with_the_preset() {
    let e = Env::new();
    mkdirs(&e, &["home/.cargo"]);
    let err = e
        .resolve(
            None,
            Some("[fs]\nadd_denied = [\"{home}\"]\n"),
            &with(&["rust"]),
        )
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("--with: "), "{err}");
    assert!(err.contains("home/.cargo is inside denied"), "{err}");
    assert!(err.contains("remove one of them"), "{err}");
}

#[test]
fn tools_is_protected_only_when_it_holds_a3s_tool_files() {
    let e = Env::new();
    let tools = e.p("project/tools");
    // No tools/ at all: nothing to protect, nothing to explain.
    let r = e.resolve(None, None, &Overrides::default()).unwrap();
    assert!(!r.grant.protected.contains(&tools));
    assert!(!r.provenance.iter().any(|p| p.key == "not_protected"));
    // An ordinary repository: tools/ is source, writable with the project.
    std::fs::create_dir_all(&tools).unwrap();
    std::fs::write(tools.join("build.sh"), "#!/bin/sh\n").unwrap();
    std::fs::write(tools.join("README.md"), "# tools\n").unwrap();
    let r = e.resolve(None, None, &Overrides::default()).unwrap();
    assert!(!r.grant.protected.contains(&tools));
    assert!(r.grant.write.contains(&e.p("project")));
    let shown = line(&r, "not_protected", &tools.display().to_string()).unwrap();
    assert!(
        shown.source.contains("no A3S tool files"),
        "{}",
        shown.source
    );
    // An A3S tool file, valid or not, makes it a tool directory.
    std::fs::write(tools.join("x.md"), "---\nkind: nonsense\n---\n").unwrap();
    let r = e.resolve(None, None, &Overrides::default()).unwrap();
    assert!(r.grant.protected.contains(&tools));
    let shown = line(&r, "protected", &tools.display().to_string()).unwrap();
    assert_eq!(
        shown.source,
        "profile default: {a3s_tools}, it holds A3S tool files"
    );
    assert!(!r.provenance.iter().any(|p| p.key == "not_protected"));
    // A policy that replaces the list drops the note with the entry.
    std::fs::remove_file(tools.join("x.md")).unwrap();
    let r = e
        .resolve(
            None,
            Some("[fs]\nprotected = [\"{project}/tools\"]\n"),
            &Overrides::default(),
        )
        .unwrap();
    assert!(r.grant.protected.contains(&tools), "named explicitly");
    assert!(!r.provenance.iter().any(|p| p.key == "not_protected"));
}

#[test]
fn a3s_tools_stands_alone_in_guard_lists() {
    let e = Env::new();
    for text in [
        "[fs]\nadd_read = [\"{a3s_tools}\"]\n",
        "[fs]\nadd_protected = [\"{a3s_tools}/x.md\"]\n",
    ] {
        let err = e.err(text);
        assert!(err.contains("{a3s_tools} stands alone"), "{err}");
        assert!(err.starts_with("policy $T/p.toml:2: fs.add_"), "{err}");
    }
}

#[test]
fn an_explicit_tmpdir_must_be_writable_and_a_home_readable() {
    let e = Env::new();
    mkdirs(&e, &["outside"]);
    let set = |v: &str| Overrides {
        env: vec![v.to_string()],
        ..Overrides::default()
    };
    let outside = e.p("outside").display().to_string();
    assert_eq!(
        e.cli_err(&set(&format!("TMPDIR={outside}"))),
        "--env: TMPDIR=$T/outside: no write root of the grant holds it, so it cannot be the \
         call's temp directory (fix: --write $T/outside, or leave TMPDIR unset: the call then \
         gets its private tmp)"
    );
    let protected = e.cli_err(&set(&format!("TMP={}", e.p("project/.git/tmp").display())));
    assert!(
        protected.contains("it is protected ($T/project/.git, profile default)"),
        "{protected}"
    );
    // No flag can grant a protected path: the fix does not offer one.
    assert!(
        protected.contains("fix: give TMP a directory that is not denied or protected")
            && !protected.contains("--write"),
        "{protected}"
    );
    assert!(
        e.cli_err(&set("TEMP=build/tmp"))
            .contains("not an absolute path")
    );
    // Controls: inside the project, and the private tmp itself.
    let mut cli = set(&format!("TMPDIR={}", e.p("project/build-tmp").display()));
    cli.env.push("TMP=/tmp".into());
    cli.env.push(format!("HOME={}", e.p("project").display()));
    e.resolve(None, None, &cli).unwrap();
    let mut cli = set(&format!("TMPDIR={outside}"));
    cli.write = vec![e.p("outside")];
    e.resolve(None, None, &cli).unwrap();

    // A home from a policy file names the file and line.
    let text = "[env]\nset = { HOME = \"/nonexistent-home\" }\n";
    assert_eq!(
        e.err(text),
        "policy $T/p.toml:2: env.set.HOME: HOME=/nonexistent-home: no read or write root of \
         the grant holds it, so it cannot be the call's home (fix: --read /nonexistent-home, \
         or leave HOME unset: the call then gets its private tmp)"
    );
}

#[test]
fn passing_the_operators_home_by_name_is_checked_like_a_value() {
    let mut e = Env::new();
    let home = e.p("home");
    e.ctx.env = HostEnv::from_pairs([("HOME".to_string(), home.display().to_string())]);
    let pass = |names: &[&str], read: Vec<PathBuf>| Overrides {
        env: names.iter().map(|n| n.to_string()).collect(),
        read,
        ..Overrides::default()
    };
    let err = e.cli_err(&pass(&["HOME"], vec![]));
    assert!(err.starts_with("--env: HOME (passed through: "), "{err}");
    // The operator's home is never a fix an agent could relay.
    assert!(
        err.contains("(fix: give HOME a directory a root of the grant holds")
            && !err.contains("--read"),
        "{err}"
    );
    // Controls: a pattern is no request for the value; a granted home is fine.
    e.resolve(None, None, &pass(&["HO*"], vec![])).unwrap();
    e.resolve(None, None, &pass(&["HOME"], vec![home])).unwrap();
}

#[test]
fn path_directories_the_grant_cannot_read_are_listed_with_the_flag() {
    let e = Env::new();
    mkdirs(&e, &["home/.pyenv/shims", "home/bin"]);
    let path = format!(
        "{}:/usr/bin:{}:{}",
        e.p("home/.pyenv/shims").display(),
        e.p("home/bin").display(),
        e.p("missing").display()
    );
    let mut e = e;
    e.ctx.env = HostEnv::from_pairs([
        ("PATH".to_string(), path),
        ("HOME".to_string(), e.p("home").display().to_string()),
    ]);
    let r = e.resolve(None, None, &Overrides::default()).unwrap();
    assert_eq!(
        r.path_dropped(&e.ctx),
        [
            DroppedDir {
                dir: e.p("home/.pyenv/shims").display().to_string(),
                fix: "--with python".into()
            },
            DroppedDir {
                dir: e.p("home/bin").display().to_string(),
                fix: format!("--read {}", e.p("home/bin").display())
            }
        ]
    );
    let r = e.resolve(None, None, &with(&["python"])).unwrap();
    assert_eq!(r.path_dropped(&e.ctx).len(), 1);
    // Not passed through: the default PATH, nothing of the operator's.
    let r = e
        .resolve(
            None,
            Some("[env]\nallow = [\"LANG\"]\n"),
            &Overrides::default(),
        )
        .unwrap();
    assert!(r.path_dropped(&e.ctx).is_empty());
}
