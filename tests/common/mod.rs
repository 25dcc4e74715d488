//! Shared helpers for the sandbox tests: a scratch project and a grant
//! shaped like the `default` profile.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;
use toolcage::policy::{Grant, Network};
use toolcage::sandbox::{self, Command, Outcome};

pub struct Project {
    pub dir: PathBuf,
}

impl Project {
    pub fn new(tag: &str) -> Project {
        let base = std::env::temp_dir().join(format!(
            "tc-test-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).unwrap();
        Project {
            dir: base.canonicalize().unwrap(),
        }
    }
    /// A state directory beside the project (outside its write roots),
    /// removed with it.
    pub fn state_dir(&self) -> PathBuf {
        self.dir.with_extension("state")
    }
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }
    pub fn write(&self, rel: &str, content: &str) -> PathBuf {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, content).unwrap();
        p
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_dir_all(self.state_dir());
    }
}

/// `toolcage -C <project> ARGS` run from the project, with the gate state
/// and the audit log beside the project (never in $HOME), stdin closed.
pub fn toolcage(p: &Project, args: &[&str]) -> std::process::Output {
    toolcage_env(p, &[], args)
}

/// [`toolcage`] with more environment variables.
pub fn toolcage_env(p: &Project, env: &[(&str, &str)], args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_toolcage"))
        .arg("-C")
        .arg(&p.dir)
        .args(args)
        .current_dir(&p.dir)
        .env("XDG_STATE_HOME", p.state_dir())
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

/// A finished command's exit status (-1 when a signal ended it).
pub fn status(o: &std::process::Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// A finished command's standard output, as text.
pub fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// [`stdout`] without the white space around it.
pub fn stdout_trimmed(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// A finished command's standard error, as text.
pub fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The `default` profile's grant, built by hand so sandbox tests don't
/// depend on policy parsing.
pub fn default_grant(project: &Path) -> Grant {
    let mut g = Grant::closed(project.to_path_buf());
    g.read = [
        "/usr",
        "/bin",
        "/lib",
        "/lib64",
        "/etc",
        "/proc",
        "/dev/urandom",
        "/dev/zero",
    ]
    .iter()
    .map(PathBuf::from)
    .filter(|p| p.exists())
    .collect();
    g.write = vec![project.to_path_buf(), PathBuf::from("/dev/null")];
    g.protected = [
        ".agents",
        ".clawd",
        "tools",
        "tools.toml",
        ".mcp.json",
        ".git",
    ]
    .iter()
    .map(|p| project.join(p))
    .collect();
    g.env_allow = vec!["PATH".into(), "LANG".into(), "LC_*".into(), "TERM".into()];
    g.network = Network::Off;
    g.timeout = Duration::from_secs(20);
    g
}

pub fn sh(grant: &Grant, script: &str) -> Outcome {
    let cmd = Command {
        argv: vec!["/bin/sh".into(), "-c".into(), script.into()],
        ..Default::default()
    };
    namespace_free_if_asked();
    sandbox::run(grant, &cmd, None).expect("sandbox run")
}

/// `TOOLCAGE_TEST_NAMESPACE_FREE=1` runs the suite the way container
/// runtimes refuse namespaces: this thread gets a seccomp filter that makes
/// `unshare`/`setns` and `clone` with any `CLONE_NEW*` flag fail with EPERM
/// and `clone3` with ENOSYS (Docker's default profile), so every call the
/// thread makes runs in toolcage's namespace-free mode.
pub fn namespace_free_if_asked() {
    if std::env::var_os("TOOLCAGE_TEST_NAMESPACE_FREE").is_some_and(|v| v == "1") {
        deny_namespaces_on_this_thread();
    }
}

/// Whether the suite runs namespace-free (see [`namespace_free_if_asked`]).
pub fn namespace_free_run() -> bool {
    std::env::var_os("TOOLCAGE_TEST_NAMESPACE_FREE").is_some_and(|v| v == "1")
}

/// Install the container-like filter on the calling thread (once).
pub fn deny_namespaces_on_this_thread() {
    thread_local!(static DONE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) });
    if DONE.with(|d| d.replace(true)) {
        return;
    }
    let prog = container_filter();
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: prctl with a valid, live BPF program; affects this thread only.
    unsafe {
        assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
        assert_eq!(
            libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &fprog),
            0,
            "installing the namespace-refusing filter"
        );
    }
}

/// Make `cmd` start the way a container runtime's default seccomp profile
/// (Docker's, Kubernetes' `RuntimeDefault`) leaves a process: `unshare` and
/// `setns` fail with EPERM, `clone` with any `CLONE_NEW*` flag fails with
/// EPERM and `clone3` with ENOSYS (so libc falls back to `clone`), with
/// `no_new_privs` set. Everything else is allowed. Self-contained: a
/// hand-written BPF program installed in `pre_exec`.
pub fn without_namespaces(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let prog = crate::common::container_filter();
    // SAFETY: the closure runs in the forked child before exec and calls
    // only prctl (async-signal-safe); the program was built before the fork
    // and lives in the closure, so the pointer stays valid in the child.
    unsafe {
        cmd.pre_exec(move || {
            let fprog = libc::sock_fprog {
                len: prog.len() as u16,
                filter: prog.as_ptr() as *mut libc::sock_filter,
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &fprog) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The seccomp program of a container runtime's default profile (Docker's,
/// Kubernetes' `RuntimeDefault`) as far as namespaces go: `unshare` and
/// `setns` fail with EPERM, `clone` with any `CLONE_NEW*` flag with EPERM,
/// `clone3` with ENOSYS (so libc falls back to `clone`); everything else is
/// allowed, and so is any other architecture's ABI (not ours to judge).
pub fn container_filter() -> Vec<libc::sock_filter> {
    #[cfg(target_arch = "x86_64")]
    const ARCH: u32 = 0xc000_003e; // AUDIT_ARCH_X86_64
    #[cfg(target_arch = "aarch64")]
    const ARCH: u32 = 0xc000_00b7; // AUDIT_ARCH_AARCH64
    const LD: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    const JEQ: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const JSET: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
    const RET: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    let op = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let errno = |e: i32| libc::SECCOMP_RET_ERRNO | e as u32;
    let new_ns = (libc::CLONE_NEWNS
        | libc::CLONE_NEWCGROUP
        | libc::CLONE_NEWUTS
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUSER
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWNET) as u32;
    // struct seccomp_data: nr at 0, arch at 4, args[0] at 16 (low half
    // first on these little-endian targets).
    vec![
        op(LD, 0, 0, 4),
        op(JEQ, 1, 0, ARCH),
        op(RET, 0, 0, libc::SECCOMP_RET_ALLOW),
        op(LD, 0, 0, 0),
        op(JEQ, 0, 1, libc::SYS_unshare as u32),
        op(RET, 0, 0, errno(libc::EPERM)),
        op(JEQ, 0, 1, libc::SYS_setns as u32),
        op(RET, 0, 0, errno(libc::EPERM)),
        op(JEQ, 0, 1, libc::SYS_clone3 as u32),
        op(RET, 0, 0, errno(libc::ENOSYS)),
        op(JEQ, 0, 3, libc::SYS_clone as u32),
        op(LD, 0, 0, 16),
        op(JSET, 0, 1, new_ns),
        op(RET, 0, 0, errno(libc::EPERM)),
        op(RET, 0, 0, libc::SECCOMP_RET_ALLOW),
    ]
}

/// The processes (not this test's own, not zombies: theirs is empty) whose
/// command line holds `marker` anywhere, as `pgrep -f` finds them.
pub fn processes_naming(marker: &str) -> Vec<String> {
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().into_string().ok()?;
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            (pid != me && String::from_utf8_lossy(&cmdline).contains(marker)).then_some(pid)
        })
        .collect()
}
