//! What this machine and user can enforce: kernel, Landlock, seccomp,
//! capabilities and, above all, whether the sandbox's namespaces can be
//! created here, and if not, why (with the fix, in one line).
//!
//! [`host`] probes once per process, on first use: nothing runs until a
//! caller asks. [`classify`] names the cause of a namespace failure seen
//! elsewhere (a failed `clone` in the spawn path) without forking.

mod cause;

pub use cause::{BlockCause, NamespaceBlock, Sysctls};
pub(crate) use cause::{blocks_namespaces, classify};
use std::sync::OnceLock;

/// What this machine and user offer the sandbox.
#[derive(Debug, Clone)]
pub struct HostSupport {
    /// `uname -r`.
    pub kernel: String,
    /// The kernel's Landlock ABI version (0: none).
    pub landlock_abi: i32,
    /// The kernel can install seccomp filters.
    pub seccomp: bool,
    /// toolcage itself already runs under a seccomp filter (a container
    /// runtime's profile, a systemd unit's `SystemCallFilter`, ...).
    pub seccomp_filtered: bool,
    pub euid: u32,
    /// CAP_SYS_ADMIN in the effective set (what namespaces need as root).
    pub cap_sys_admin: bool,
    /// Whether the exact namespaces the sandbox creates can be created.
    pub namespaces: Result<(), NamespaceBlock>,
}

/// The clone flags the sandbox uses for euid `euid` (as in `spawn`: a
/// network namespace is added only with the network off, which the probe
/// always includes to test the most the sandbox asks for).
pub(crate) fn namespace_flags(euid: u32) -> libc::c_int {
    let mut flags = libc::CLONE_NEWNS
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS
        | libc::CLONE_NEWNET;
    if euid != 0 {
        flags |= libc::CLONE_NEWUSER;
    }
    flags
}

/// The namespaces in [`namespace_flags`], by name.
pub fn namespace_names(euid: u32) -> Vec<&'static str> {
    let mut names = vec!["mount", "pid", "ipc", "uts", "net"];
    if euid != 0 {
        names.push("user");
    }
    names
}

/// The probe: run once per process, on first call.
pub fn host() -> &'static HostSupport {
    static HOST: OnceLock<HostSupport> = OnceLock::new();
    HOST.get_or_init(|| {
        let status = ProcStatus::read();
        // SAFETY: geteuid cannot fail and takes no pointers.
        let euid = unsafe { libc::geteuid() };
        let namespaces = try_namespaces(namespace_flags(euid)).map_err(classify);
        HostSupport {
            kernel: kernel_release(),
            landlock_abi: super::landlock_abi::kernel_abi(),
            seccomp: seccomp_available(),
            seccomp_filtered: status.seccomp_mode == 2,
            euid,
            cap_sys_admin: status.cap_sys_admin(),
            namespaces,
        }
    })
}

/// What Landlock will enforce for a grant on this kernel (`constructed`:
/// in the sandbox's namespaces and constructed root).
pub use super::landlock::report_for as landlock_report;

/// The fields of `/proc/self/status` the probe needs.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ProcStatus {
    /// 0 none, 1 strict, 2 filter.
    pub seccomp_mode: u32,
    pub no_new_privs: bool,
    pub cap_eff: u64,
}

impl ProcStatus {
    pub fn read() -> ProcStatus {
        std::fs::read_to_string("/proc/self/status")
            .map(|s| ProcStatus::parse(&s))
            .unwrap_or_default()
    }

    fn parse(text: &str) -> ProcStatus {
        let mut out = ProcStatus::default();
        for line in text.lines() {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            match key {
                "Seccomp" => out.seccomp_mode = value.parse().unwrap_or(0),
                "NoNewPrivs" => out.no_new_privs = value == "1",
                "CapEff" => out.cap_eff = u64::from_str_radix(value, 16).unwrap_or(0),
                _ => {}
            }
        }
        out
    }

    pub fn cap_sys_admin(&self) -> bool {
        const CAP_SYS_ADMIN: u32 = 21; // linux/capability.h
        self.cap_eff & (1 << CAP_SYS_ADMIN) != 0
    }
}

/// This process has `no_new_privs` set (inherited from whoever started it).
pub fn no_new_privs() -> bool {
    ProcStatus::read().no_new_privs
}

fn kernel_release() -> String {
    // SAFETY: utsname is plain old data; uname fills it in.
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: uname writes into the struct we own.
    if unsafe { libc::uname(&mut uts) } != 0 {
        return "unknown".into();
    }
    let bytes: Vec<u8> = uts
        .release
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn seccomp_available() -> bool {
    if std::path::Path::new("/proc/sys/kernel/seccomp/actions_avail").exists() {
        return true;
    }
    // SAFETY: PR_GET_SECCOMP takes no pointers; EINVAL means no seccomp.
    unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) >= 0 }
}

/// Fork a child that calls `unshare(flags)` and exits with the errno (0:
/// success). The caller may be multi-threaded: the child makes only raw
/// syscalls, with every signal blocked, and never returns.
fn try_namespaces(flags: libc::c_int) -> Result<(), i32> {
    // SAFETY: the signal masks are our own stack values. The forked child
    // runs only async-signal-safe code (unshare, _exit) with all signals
    // blocked, so no handler or lock of the parent's runs in it.
    let pid = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let pid = libc::fork();
        if pid == 0 {
            let r = libc::syscall(libc::SYS_unshare, flags as libc::c_long);
            let code = if r == 0 { 0 } else { *libc::__errno_location() };
            libc::_exit(code & 0xff);
        }
        let err = *libc::__errno_location();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if pid < 0 {
            return Err(err);
        }
        pid
    };
    let mut status = 0;
    loop {
        // SAFETY: reaping our own child into our own int.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            break;
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return Err(libc::ECHILD);
        }
    }
    match (libc::WIFEXITED(status), libc::WEXITSTATUS(status)) {
        (true, 0) => Ok(()),
        (true, errno) => Err(errno),
        // Killed before it could tell: nothing known.
        _ => Err(libc::ECHILD),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_status_fields() {
        let s =
            ProcStatus::parse("Name:\tx\nCapEff:\t00000000a80425fb\nNoNewPrivs:\t1\nSeccomp:\t2\n");
        assert_eq!(s.seccomp_mode, 2);
        assert!(s.no_new_privs);
        // Docker's default set has no CAP_SYS_ADMIN (bit 21).
        assert!(!s.cap_sys_admin());
        assert!(ProcStatus::parse("CapEff:\t000001ffffffffff\n").cap_sys_admin());
    }

    #[test]
    fn flags_match_the_sandbox() {
        assert_eq!(namespace_flags(0) & libc::CLONE_NEWUSER, 0);
        assert_ne!(namespace_flags(1000) & libc::CLONE_NEWUSER, 0);
        assert_eq!(namespace_names(1000).len(), 6);
    }
}
