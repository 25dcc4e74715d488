//! The README's quick start, run exactly as the README writes it: the
//! first `sh` block under "## Quick start" is taken from README.md and run
//! by bash in a fresh directory, with the built binary first on `PATH`, as
//! a newcomer who just ran `cargo install` would. Each command's comment
//! says what it shows; the checks below hold the block to those comments.

use crate::common;
use crate::stdio_client;

use std::path::{Path, PathBuf};
use std::process::Command;

fn readme() -> String {
    let top = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(top.join("README.md")).expect("README.md")
}

/// The first ```sh block after the heading `## Quick start`.
fn quick_start_block(readme: &str) -> Option<String> {
    let after = &readme[readme.find("\n## Quick start\n")?..];
    let open = after.find("```sh\n")? + "```sh\n".len();
    let body = &after[open..];
    Some(body[..body.find("\n```")?].to_string())
}

/// A directory holding only a `toolcage` link to the built binary: what
/// `cargo install` leaves on `PATH`.
fn bin_dir(scratch: &Path) -> PathBuf {
    let bin = scratch.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_toolcage"), bin.join("toolcage")).unwrap();
    bin
}

#[test]
fn the_quick_start_runs_as_written_from_a_fresh_directory() {
    let block = quick_start_block(&readme()).expect("README: a ```sh block under ## Quick start");
    let scratch = tempfile::tempdir().unwrap();
    let bin = bin_dir(scratch.path());
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // The block's own `cd "$(mktemp -d)"` makes the fresh directory; TMPDIR
    // keeps it inside this test's scratch directory.
    let tmp = scratch.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    // A home of its own beside it, as a newcomer's is beside `mktemp -d`'s
    // directory (the harness's HOME may hold the scratch directory).
    let home = scratch.path().join("home");
    std::fs::create_dir(&home).unwrap();
    common::namespace_free_if_asked();
    let out = Command::new("bash")
        .arg("-c")
        .arg(&block)
        .current_dir(scratch.path())
        .env("PATH", path)
        .env("TMPDIR", &tmp)
        .env("HOME", &home)
        .env("XDG_STATE_HOME", scratch.path().join("state"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let both = format!("{stdout}\n[stderr]\n{stderr}");
    assert_eq!(out.status.code(), Some(0), "{both}");
    // No step needs something the README did not give.
    assert!(!stderr.contains("command not found"), "{both}");
    assert!(!stderr.contains("hello.c: No such file"), "{both}");
    // Each comment's claim.
    assert!(stdout.contains("hello from the sandbox\n"), "{both}");
    assert!(stdout.contains("hi\n"), "{both}");
    // "Read-only file system" with namespaces, "Permission denied" without.
    assert!(stderr.contains("cannot create /etc/motd"), "{both}");
    assert!(
        stdout.contains("exit 2\nexit 2\n"),
        "ls ~ and the write: {both}"
    );
    assert!(stderr.contains("PermissionError"), "{both}");
    assert!(
        stderr.contains("to allow it: --allow-net"),
        "--explain names the flag: {both}"
    );
    assert!(stdout.contains("exit 124\n"), "{both}");
    assert!(stdout.contains("policy defaults"), "{both}");
    if common::namespace_free_run() {
        // Domain mode refuses to run without namespaces, and says why.
        assert!(stdout.contains("exit 125\n"), "{both}");
    } else {
        assert!(stdout.contains("403 Forbidden"), "{both}");
        assert!(
            stderr.contains("toolcage: blocked: example.org:443"),
            "{both}"
        );
        assert!(stdout.contains("exit 56\n"), "{both}");
    }
}

/// The rest of a newcomer's path, as the README gives it: one CI workload
/// (a build under `--profile ci`, as "In CI" says) and one MCP client call
/// through the exact command the README registers with Claude Code.
#[test]
fn a_ci_build_and_an_mcp_call_as_the_readme_gives_them() {
    let readme = readme();
    let scratch = tempfile::tempdir().unwrap();
    let bin = bin_dir(scratch.path());
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let project = scratch.path().join("project");
    std::fs::create_dir(&project).unwrap();
    std::fs::write(
        project.join("hello.c"),
        "#include <stdio.h>\nint main(void) { puts(\"built\"); return 0; }\n",
    )
    .unwrap();
    std::fs::write(
        project.join("Makefile"),
        "hello: hello.c\n\tcc -o hello hello.c\n",
    )
    .unwrap();
    let state = scratch.path().join("state");
    common::namespace_free_if_asked();
    let run = |args: &[&str]| {
        Command::new("toolcage")
            .args(args)
            .current_dir(&project)
            .env("PATH", &path)
            .env("XDG_STATE_HOME", &state)
            .output()
            .unwrap()
    };
    assert!(
        readme.contains("toolcage exec --profile ci"),
        "the README's CI line"
    );
    let o = run(&["exec", "--profile", "ci", "--", "make"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = run(&["exec", "--profile", "ci", "--", "./hello"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "built\n");

    // The server command the README registers, with the demo project.
    let line = readme
        .lines()
        .find(|l| l.starts_with("claude mcp add"))
        .expect("README: the claude mcp add line");
    let (_, command) = line.split_once(" -- ").expect("a `--` before the command");
    let demo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/demo");
    let words: Vec<String> = command
        .split_whitespace()
        .map(|w| w.replace("/path/to/project", &demo.display().to_string()))
        .collect();
    assert_eq!(words[0], "toolcage", "{line}");
    let mut serve = Command::new("toolcage");
    serve
        .args(&words[1..])
        .env("PATH", &path)
        .env("XDG_STATE_HOME", &state);
    let mut client = stdio_client::Serve::spawn(serve, None);
    let (is_error, text) =
        client.call_text("word_count", serde_json::json!({"text": "hello big world"}));
    assert!(!is_error, "{text}");
    assert!(text.contains('3'), "{text}");
    assert_eq!(client.finish(), 0);
}

/// Control for the extraction: a README without the heading, or without a
/// closed block under it, gives nothing to run (the test above then fails
/// instead of passing on an empty script).
#[test]
fn the_block_is_found_only_under_its_heading() {
    assert_eq!(
        quick_start_block("# t\n\n## Quick start\n\n```sh\necho a\n```\n").as_deref(),
        Some("echo a")
    );
    assert_eq!(quick_start_block("# t\n\n```sh\necho a\n```\n"), None);
    assert_eq!(
        quick_start_block("# t\n\n## Quick start\n```sh\necho a\n"),
        None
    );
}
