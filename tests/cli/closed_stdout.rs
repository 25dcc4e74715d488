//! A reader that goes away early (`toolcage check | head -1`) is not
//! toolcage's failure: every command keeps its own exit status and says
//! nothing about it (no panic, no backtrace). Control: the same command
//! into a pipe that is read prints its output, with the same status.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn demo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/demo")
}

/// (exit status, stdout, stderr) with stdout a pipe; `read: false` closes
/// the read end before toolcage writes.
fn run(args: &[&str], state: &std::path::Path, read: bool) -> (Option<i32>, String, String) {
    // Close-on-exec: toolcage must not hold the read end itself.
    let (r, w): (OwnedFd, OwnedFd) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
    // `completions` and `man` have no project (and refuse -C).
    let project: Vec<std::ffi::OsString> = match args[0] {
        "completions" | "man" => vec![],
        _ => vec!["-C".into(), demo().into()],
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolcage"))
        .args(project)
        .args(args)
        .env("XDG_STATE_HOME", state)
        .env("RUST_BACKTRACE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::from(w))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = String::new();
    if read {
        std::fs::File::from(r).read_to_string(&mut out).unwrap();
    } else {
        drop(r);
    }
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    (status.code(), out, err)
}

#[test]
fn every_command_keeps_its_status_when_the_reader_is_gone() {
    let state = tempfile::tempdir().unwrap();
    for args in [
        &["list"][..],
        &["list", "--json"],
        &["schema"],
        &["schema", "search_notes"],
        &["check"],
        &["check", "--json"],
        &["policy"],
        &["policy", "--json"],
        &["doctor"],
        &["doctor", "--json"],
        &["upstreams"],
        &["upstreams", "--json"],
        // The call leaves the audit log the next one reads.
        &["call", "search_notes", "pattern=x"],
        &["audit"],
        &["completions", "bash"],
        &["man"],
    ] {
        let (code, out, err) = run(args, state.path(), true);
        assert!(!out.is_empty(), "{args:?}: control printed nothing: {err}");
        let (gone_code, _, gone_err) = run(args, state.path(), false);
        assert_eq!(gone_code, code, "{args:?}: {gone_err}");
        assert!(
            !gone_err.contains("panicked") && !gone_err.contains("Broken pipe"),
            "{args:?}: {gone_err}"
        );
    }
}
