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
    assert!(
        expected.contains(&out),
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

/// `CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET`; `unshare`
/// also takes `CLONE_NEWTIME` (0x80, the exit-signal byte of `clone`).
const CLONE_NS_FLAGS: u32 = 0x7E02_0000;
const UNSHARE_NS_FLAGS: u32 = CLONE_NS_FLAGS | 0x80;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

/// The BPF program of [`without_namespaces`], the same as
/// `integration/nons.c`: `clone3` -> ENOSYS, `unshare` and `clone` with a
/// namespace flag -> EPERM, everything else allowed.
fn no_namespaces_program() -> Vec<libc::sock_filter> {
    const LD: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    const JEQ: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const JSET: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
    const RET: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    // seccomp_data: nr at 0, arch at 4, the low half of args[0] at 16.
    let op = |code, k, jt, jf| libc::sock_filter { code, jt, jf, k };
    let ret = |k| op(RET, k, 0, 0);
    let errno = |e: i32| libc::SECCOMP_RET_ERRNO | e as u32;
    vec![
        op(LD, 4, 0, 0),
        op(JEQ, AUDIT_ARCH, 1, 0),
        ret(libc::SECCOMP_RET_ALLOW),
        op(LD, 0, 0, 0),
        op(JEQ, libc::SYS_clone3 as u32, 0, 1),
        ret(errno(libc::ENOSYS)),
        op(JEQ, libc::SYS_unshare as u32, 0, 2),
        op(LD, 16, 0, 0),
        op(JSET, UNSHARE_NS_FLAGS, 3, 4),
        op(JEQ, libc::SYS_clone as u32, 0, 3),
        op(LD, 16, 0, 0),
        op(JSET, CLONE_NS_FLAGS, 0, 1),
        ret(errno(libc::EPERM)),
        ret(libc::SECCOMP_RET_ALLOW),
    ]
}

/// Namespace-free mode, simulated the way container runtimes refuse
/// namespaces (Docker's default seccomp profile): in the child of `cmd` and
/// everything it starts, `unshare` and `clone` with any `CLONE_NEW*` flag
/// fail with EPERM and `clone3` with ENOSYS (libc then falls back to
/// `clone`). The launcher `integration/nons.c` installs the same filter.
pub fn without_namespaces(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let mut prog = no_namespaces_program();
    // SAFETY: the hook only makes prctl calls (async-signal-safe) on a
    // program built before fork; the filter binds the child alone.
    unsafe {
        cmd.pre_exec(move || {
            let fprog = libc::sock_fprog {
                len: prog.len() as u16,
                filter: prog.as_mut_ptr(),
            };
            let install = || {
                libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &fprog as *const libc::sock_fprog,
                )
            };
            // With CAP_SYS_ADMIN (root) no_new_privs is not needed, as
            // with runc; anyone else must set it first.
            if install() != 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EACCES)
                    || libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                    || install() != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}
