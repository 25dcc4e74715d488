//! Without `-C`, toolcage finds the project as git and cargo find their
//! roots: the nearest directory up from the current one that holds a tool
//! directory or a `.git`. `exec` still runs its command where it was typed.
//! Each with its control: `-C .` from the same place sees no project.

mod common;

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
