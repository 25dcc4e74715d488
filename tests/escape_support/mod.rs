//! Helpers for the escape suite: every attack runs twice, once under a grant
//! that allows the action (the positive control, which must succeed) and once
//! under a grant that denies it (which must fail with the expected error).
//!
//! Python snippets print exact markers: `OK` / `OK:<value>` on success,
//! `DENIED:<ERRNO NAME>` when the action raised `OSError`.
#![allow(dead_code)]

use crate::common::Project;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toolcage::policy::Grant;
use toolcage::sandbox::{self, Command, Outcome};

/// The system Python (the pyenv shim on `PATH` lives under /root, outside
/// every read root).
pub const PY: &str = "/usr/bin/python3";

/// Prepended to every Python snippet: `t(f)` prints the marker for `f()`,
/// `sc(nr, *args)` makes a raw syscall through ctypes.
pub const PRELUDE: &str = r#"
import os, sys, errno, socket, ctypes, time
def t(f):
    try:
        r = f()
    except OSError as e:
        print("DENIED:" + errno.errorcode.get(e.errno, str(e.errno)), flush=True)
    else:
        print("OK" if r is None else "OK:" + str(r), flush=True)
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    if r == -1:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r
"#;

pub fn run_argv(grant: &Grant, argv: &[&str]) -> Outcome {
    let cmd = Command {
        argv: argv.iter().map(|a| (*a).into()).collect(),
        ..Default::default()
    };
    crate::common::namespace_free_if_asked();
    sandbox::run(grant, &cmd, None).expect("sandbox run")
}

/// Run a Python snippet (with [`PRELUDE`]) under `grant`.
pub fn py(grant: &Grant, code: &str) -> Outcome {
    let full = format!("{PRELUDE}\n{code}");
    run_argv(grant, &[PY, "-c", &full])
}

pub fn describe(o: &Outcome) -> String {
    format!(
        "exit={:?}\n--- stdout\n{}--- stderr\n{}",
        o.exit, o.stdout.text, o.stderr.text
    )
}

/// The control must print `OK` (or `OK:...`) and exit 0.
pub fn assert_ok(o: &Outcome, what: &str) {
    let out = o.stdout.text.trim();
    assert!(
        o.exit.success() && (out == "OK" || out.starts_with("OK:")),
        "positive control failed ({what}): the action must succeed under the allowing grant\n{}",
        describe(o)
    );
}

/// The attack must print one of the `expected` markers (e.g. `DENIED:EPERM`).
pub fn assert_denied(o: &Outcome, expected: &[&str], what: &str) {
    let out = o.stdout.text.trim();
    // Namespace-free, Landlock refuses what a missing path (ENOENT), a
    // read-only mount (EROFS) or a mount boundary (EXDEV) refuses otherwise.
    let landlock_says = crate::common::namespace_free_run()
        && out == "DENIED:EACCES"
        && expected
            .iter()
            .any(|e| ["DENIED:ENOENT", "DENIED:EROFS", "DENIED:EXDEV"].contains(e));
    assert!(
        expected.contains(&out) || landlock_says,
        "ESCAPE ({what}): expected one of {expected:?}\n{}",
        describe(o)
    );
}

/// The pattern of the suite: `code` succeeds under `allow` and fails with
/// one of `expected` under `deny`. Returns both outcomes for extra checks.
pub fn attack(
    allow: &Grant,
    deny: &Grant,
    code: &str,
    expected: &[&str],
    what: &str,
) -> (Outcome, Outcome) {
    let ok = py(allow, code);
    assert_ok(&ok, what);
    let bad = py(deny, code);
    assert_denied(&bad, expected, what);
    (ok, bad)
}

/// Same as [`attack`] for a shell script that prints its own markers.
pub fn attack_sh(
    allow: &Grant,
    deny: &Grant,
    script: &str,
    expected: &[&str],
    what: &str,
) -> (Outcome, Outcome) {
    let ok = run_argv(allow, &["/bin/sh", "-c", script]);
    assert_ok(&ok, what);
    let bad = run_argv(deny, &["/bin/sh", "-c", script]);
    assert_denied(&bad, expected, what);
    (ok, bad)
}

/// A scratch directory outside the project (a fake home, a host socket dir).
pub fn outside_dir(tag: &str) -> Project {
    Project::new(&format!("outside-{tag}"))
}

/// PIDs of live host processes whose command line contains `marker`
/// (as one argument), excluding this test process.
pub fn alive_with(marker: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if cmdline
            .split(|b| *b == 0)
            .any(|arg| arg == marker.as_bytes())
        {
            found.push(pid);
        }
    }
    found
}

/// Wait (briefly) until no process carries `marker`; returns the survivors.
pub fn survivors(marker: &str) -> Vec<i32> {
    for _ in 0..20 {
        let alive = alive_with(marker);
        if alive.is_empty() {
            return alive;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    alive_with(marker)
}

/// A unique-looking `sleep` duration so survivors can be found by argument.
/// The escape tests share one process, so each `n` is used by one test only
/// (`proc.rs`: 1, 2, 21-23; `tree.rs`: 11-13).
pub fn marker(n: u32) -> String {
    format!("{}.{:03}", 300 + n, std::process::id() % 1000)
}

/// The suite runs as root and as an ordinary user (`tests/unprivileged.sh`);
/// a few controls differ.
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

pub fn paths(ps: &[&str]) -> Vec<PathBuf> {
    ps.iter().map(PathBuf::from).collect()
}

pub fn with_read(g: &Grant, p: &Path) -> Grant {
    let mut g = g.clone();
    g.read.push(p.to_path_buf());
    g
}

pub fn with_write(g: &Grant, p: &Path) -> Grant {
    let mut g = g.clone();
    g.write.push(p.to_path_buf());
    g
}

/// In a namespace-free run, a test of something that mode lacks checks
/// instead that the call's report names the gap (`id` as in
/// `sandbox::mode::lacks`) and returns true: nothing may claim protection
/// it does not give.
pub fn lacking_in_namespace_free_run(o: &Outcome, id: &str) -> bool {
    if !crate::common::namespace_free_run() {
        return false;
    }
    assert_eq!(
        o.enforcement.mode,
        toolcage::sandbox::mode::IsolationMode::NamespaceFree
    );
    assert!(
        o.enforcement.lacking.iter().any(|l| l.id == id),
        "namespace-free run: the report must name the gap '{id}': {:?}",
        o.enforcement.lacking
    );
    true
}
