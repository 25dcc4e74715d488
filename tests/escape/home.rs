//! Escape suite, the operator's home, through the binary as a user runs it:
//! the credential stores in a home are denied under any read root (`--read
//! ~` included), only the operator's own policy file outside the project
//! lifts one, and the text an agent reads after a refusal never suggests
//! granting one. Each with its control: an ordinary home file, and the
//! keys' neighbours (`known_hosts`), stay readable.

use crate::common;
use crate::common::{stderr as err, stdout_trimmed as out};

use common::Project;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A home with keys, credentials and ordinary files, and a project beside it.
struct Home {
    base: Project,
    home: PathBuf,
    project: PathBuf,
}

impl Home {
    fn new(tag: &str) -> Home {
        let base = Project::new(tag);
        let home = base.dir.join("home");
        make_home(&home);
        let project = base.dir.join("work");
        std::fs::create_dir_all(&project).unwrap();
        Home {
            base,
            home,
            project,
        }
    }

    fn h(&self) -> String {
        self.home.display().to_string()
    }

    /// `toolcage -C <project> ARGS` with this home as `$HOME`, namespace-free
    /// when the suite runs so.
    fn run(&self, args: &[&str]) -> Output {
        run_with_home(&self.home, &self.project, &self.base.state_dir(), args)
    }
}

fn make_home(home: &Path) {
    for (f, text) in [
        (".ssh/id_ed25519", "PRIVATE-KEY"),
        (".ssh/id_rsa", "PRIVATE-KEY"),
        (".ssh/known_hosts", "known-host"),
        (".ssh/id_ed25519.pub", "public-key"),
        (".aws/credentials", "AWS-SECRET"),
        (".npmrc", "NPM-TOKEN"),
        ("notes.txt", "notes"),
    ] {
        let p = home.join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

fn run_with_home(home: &Path, project: &Path, state: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolcage"));
    cmd.arg("-C")
        .arg(project)
        .args(args)
        .current_dir(project)
        .env("HOME", home)
        .env("XDG_STATE_HOME", state)
        .stdin(Stdio::null());
    if common::namespace_free_run() {
        common::without_namespaces(&mut cmd);
    }
    cmd.output().unwrap()
}

#[test]
fn read_home_cannot_read_keys_or_credentials_but_ordinary_files() {
    let t = Home::new("home-read");
    let h = t.h();
    let script = format!(
        "cat '{h}/.ssh/id_ed25519' && echo LEAK-SSH; cat '{h}/.aws/credentials' && echo LEAK-AWS; \
         cat '{h}/notes.txt'; echo; cat '{h}/.ssh/known_hosts'; echo; cat '{h}/.ssh/id_ed25519.pub'"
    );
    let o = t.run(&["exec", "--read", &h, "--", "sh", "-c", &script]);
    // Control: the ordinary files and the key's public half are read.
    assert_eq!(out(&o), "notes\nknown-host\npublic-key", "{}", err(&o));
    assert!(!out(&o).contains("LEAK"), "{}", out(&o));
    // Through ~/.ssh as the root: the keys stay denied, known_hosts not.
    let script = format!("cat '{h}/.ssh/id_rsa' && echo LEAK; cat '{h}/.ssh/known_hosts'");
    let o = t.run(&[
        "exec",
        "--read",
        &format!("{h}/.ssh"),
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert_eq!(out(&o), "known-host", "{}", err(&o));
    // A root inside a secret is refused before anything runs.
    let o = t.run(&["exec", "--read", &format!("{h}/.aws"), "--", "true"]);
    assert_eq!(o.status.code(), Some(125), "{}", err(&o));
    assert!(err(&o).contains("home secret"), "{}", err(&o));
}

#[test]
fn allow_secrets_in_the_operators_file_lifts_exactly_one_entry() {
    let t = Home::new("home-allow");
    let h = t.h();
    let script = format!(
        "cat '{h}/.npmrc' && echo; cat '{h}/.aws/credentials' && echo LEAK-AWS; \
         cat '{h}/.ssh/id_rsa' && echo LEAK-SSH; echo END"
    );
    // Control: without the key, .npmrc is denied like the others.
    let o = t.run(&["exec", "--read", &h, "--", "sh", "-c", &script]);
    assert_eq!(out(&o), "END", "{}", err(&o));
    // The operator's file, outside the project: .npmrc and nothing else.
    let policy = t.base.dir.join("operator.toml");
    std::fs::write(&policy, "[fs]\nallow_secrets = [\"~/.npmrc\"]\n").unwrap();
    let policy_s = policy.display().to_string();
    let o = t.run(&[
        "exec", "--policy", &policy_s, "--read", &h, "--", "sh", "-c", &script,
    ]);
    assert_eq!(out(&o), "NPM-TOKEN\nEND", "{}", err(&o));
    // The same file inside the project (which calls write, and which may
    // have come with the files) lifts nothing: refused.
    let inside = t.project.join("toolcage.toml");
    std::fs::copy(&policy, &inside).unwrap();
    let o = t.run(&[
        "exec",
        "--policy",
        "toolcage.toml",
        "--read",
        &h,
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert_eq!(o.status.code(), Some(125), "{}", err(&o));
    assert!(
        err(&o).contains("only a --policy file outside the project"),
        "{}",
        err(&o)
    );
    assert!(out(&o).is_empty(), "nothing ran: {}", out(&o));
}

/// The lines toolcage printed about `target`.
fn lines_about<'a>(stderr: &'a str, target: &str) -> Vec<&'a str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("toolcage: blocked:") && l.contains(target))
        .collect()
}

#[test]
fn the_denial_an_agent_reads_never_suggests_granting_a_secret() {
    let t = Home::new("home-text");
    let h = t.h();
    let key = format!("{h}/.ssh/id_rsa");
    let o = t.run(&["exec", "--explain", "--read", &h, "--", "cat", &key]);
    assert_ne!(o.status.code(), Some(0), "the key was read: {}", out(&o));
    let e = err(&o);
    let lines = lines_about(&e, &key);
    assert!(!lines.is_empty(), "the refusal is explained: {e}");
    for l in &lines {
        assert!(
            !l.contains("to allow it") && !l.contains("--read"),
            "a fix that grants the key: {l}"
        );
        assert!(l.contains("SSH private keys"), "{l}");
    }
    // Control: an ordinary file outside the grant is explained with its fix.
    let other = t.base.dir.join("elsewhere.txt");
    std::fs::write(&other, "x").unwrap();
    let other_s = other.display().to_string();
    let o = t.run(&["exec", "--explain", "--read", &h, "--", "cat", &other_s]);
    let e = err(&o);
    // Under /tmp the call has its own /tmp: nothing to infer there.
    if !other.starts_with("/tmp") {
        assert!(
            lines_about(&e, &other_s)
                .iter()
                .any(|l| l.contains(&format!("to allow it: --read {other_s}"))),
            "{e}"
        );
    }
}

#[test]
fn a_key_outside_every_root_is_not_offered_either() {
    // The home must lie outside /tmp, which is each call's own: only where
    // the build's scratch directory is writable (as the user who built).
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("tc-home-outside-{}", std::process::id()));
    if std::fs::create_dir_all(&scratch).is_err() {
        eprintln!("skipped: {} is not writable here", scratch.display());
        return;
    }
    let home = scratch.join("home");
    make_home(&home);
    let project = scratch.join("work");
    std::fs::create_dir_all(&project).unwrap();
    let key = home.join(".ssh/id_rsa").display().to_string();
    let note = home.join("notes.txt").display().to_string();
    let o = run_with_home(
        &home,
        &project,
        &scratch.join("state"),
        &[
            "exec",
            "--explain",
            "--",
            "sh",
            "-c",
            &format!("cat '{key}'; cat '{note}'"),
        ],
    );
    let e = err(&o);
    let _ = std::fs::remove_dir_all(&scratch);
    let key_lines = lines_about(&e, &key);
    assert!(!key_lines.is_empty(), "{e}");
    assert!(
        key_lines.iter().all(|l| !l.contains("to allow it")),
        "{key_lines:?}"
    );
    // Control: the ordinary file next to it gets its fix.
    assert!(
        lines_about(&e, &note)
            .iter()
            .any(|l| l.contains(&format!("to allow it: --read {note}"))),
        "{e}"
    );
}
