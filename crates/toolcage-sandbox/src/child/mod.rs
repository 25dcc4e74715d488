//! The child side of a sandboxed spawn: two processes.
//!
//! * the **init** (PID 1 of the call's PID namespace, `init.rs`) sets up
//!   the mount namespace, starts the tool, forwards SIGTERM/SIGINT/SIGHUP
//!   to every process in the namespace, reaps orphans, and when the tool
//!   exits writes its wait status to the parent and exits, which makes the
//!   kernel kill whatever the tool left behind;
//! * the **tool** (PID 2, `tool.rs`) drops every privilege, installs
//!   Landlock and seccomp, and execs the command.
//!
//! Everything they need is prepared by the parent in a [`ChildPlan`] (C
//! strings, pointer arrays, the Landlock descriptor, the BPF programs, the
//! steps that build the root, two stacks). The init is created like a
//! `fork` (its own copy of toolcage's memory, so a panic or a free in the
//! parent cannot reach it, and its errno and TLS are its own); the tool
//! shares the init's copy until it execs (`CLONE_VM | CLONE_VFORK`).
//!
//! Each process's entry point ([`init_main`], `tool_main`) is the list of
//! its steps, in order, each a small `unsafe fn`.
//!
//! # The child's contract
//!
//! Every step, and every helper here that is an `unsafe fn`, may only be
//! called in the init or the tool, after `clone(2)` and before exec, with
//! the plan the parent prepared: what it changes (descriptors, signal
//! dispositions and mask, namespaces, mounts, credentials, limits) is the
//! child's own, and in toolcage's process it would change toolcage's.
//! Toolcage is multi-threaded, and a lock another thread held at the clone
//! is held forever in the child: so every step stays async-signal-safe,
//! making only raw syscalls (or libc's thin wrappers of them) on the plan
//! and the stack: no allocation, no locks, no panics. A failing step
//! reports its [`Stage`] and errno on the report pipe and exits 125.

mod init;
mod tool;

pub use init::init_main;

use super::steps::Step;
use std::ffi::CString;
use std::os::fd::{OwnedFd, RawFd};

/// The step at which setup failed, reported to the parent with the errno.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Stage {
    UserNamespace = 1,
    Session = 2,
    Mount = 3,
    Rlimit = 4,
    Capabilities = 5,
    NoNewPrivs = 6,
    Landlock = 7,
    Chdir = 8,
    Descriptors = 9,
    Signals = 10,
    Seccomp = 11,
    Exec = 12,
    Spawn = 13,
    Network = 14,
    Proxy = 15,
    Call = 16,
}

impl Stage {
    pub fn from_u32(v: u32) -> Option<Stage> {
        use Stage::*;
        [
            UserNamespace,
            Session,
            Mount,
            Rlimit,
            Capabilities,
            NoNewPrivs,
            Landlock,
            Chdir,
            Descriptors,
            Signals,
            Seccomp,
            Exec,
            Spawn,
            Network,
            Proxy,
            Call,
        ]
        .into_iter()
        .find(|s| *s as u32 == v)
    }

    pub fn describe(self) -> &'static str {
        match self {
            Stage::UserNamespace => "user namespace mapping",
            Stage::Session => "new session",
            Stage::Mount => "building the sandbox's root",
            Stage::Rlimit => "resource limits",
            Stage::Capabilities => "dropping capabilities",
            Stage::NoNewPrivs => "no_new_privs",
            Stage::Landlock => "Landlock restriction",
            Stage::Chdir => "changing to the project directory",
            Stage::Descriptors => "standard descriptors",
            Stage::Signals => "signal dispositions",
            Stage::Seccomp => "seccomp filter",
            Stage::Exec => "execve",
            Stage::Spawn => "starting the tool inside the namespace",
            Stage::Network => "bringing up loopback in the network namespace",
            Stage::Proxy => "creating the proxy's listeners in the network namespace",
            Stage::Call => "receiving the call in a sandbox prepared ahead",
        }
    }
}

/// A file written in the child before anything else (user namespace maps).
pub struct ProcWrite {
    pub path: CString,
    pub content: Vec<u8>,
}

/// A Landlock rule the tool adds for a filesystem mounted inside the call.
pub struct FreshRule {
    pub path: CString,
    pub access: u64,
}

/// Everything the child needs, prepared before clone. The init runs in its
/// own copy of toolcage's memory (no `CLONE_VM`), so nothing here can be
/// freed under it; the tool shares the init's copy until it execs.
pub struct ChildPlan {
    pub program: CString,
    pub argv: Vec<*const libc::c_char>,
    pub envp: Vec<*const libc::c_char>,
    pub cwd: CString,
    /// stdin, stdout, stderr for the child.
    pub stdio: [RawFd; 3],
    /// Write end of the setup-report pipe (close-on-exec).
    pub report_fd: RawFd,
    /// Write end of the pipe on which the init reports the tool's wait status.
    pub status_fd: RawFd,
    /// Descriptors the init keeps (sorted); every other one is closed first.
    pub keep_fds: Vec<RawFd>,
    /// Top of the tool's stack (the init runs on another one).
    pub tool_stack_top: *mut libc::c_void,
    pub landlock_fd: RawFd,
    /// `landlock_restrict_self` flags (log refusals after exec: explain).
    pub landlock_flags: u32,
    /// Landlock rules for the fresh `/tmp`, `/dev/shm` and `/proc`.
    pub fresh_rules: Vec<FreshRule>,
    pub seccomp: Vec<libc::sock_fprog>,
    pub rlimits: Vec<(libc::__rlimit_resource_t, libc::rlimit)>,
    pub proc_writes: Vec<ProcWrite>,
    /// Building the constructed root.
    pub steps: Vec<Step>,
    /// Bring up `lo` (the call has its own network namespace).
    pub loopback: Option<libc::ifreq>,
    /// Domain mode: the listeners to create in the call's network
    /// namespace and send to toolcage, before the tool starts.
    pub listeners: Option<super::proxy::ListenPlan>,
    /// A network namespace made ahead (`netns.rs`) to join; -1 for none.
    pub netns_fd: RawFd,
    pub cap_last: libc::c_int,
    /// The signals the init resets to their default disposition, bit
    /// `sig - 1` each: those ignored or caught in toolcage when the plan
    /// was made (`spawn/start.rs`, `signals_to_reset`), never SIGKILL or
    /// SIGSTOP. A default disposition needs no reset.
    pub reset_signals: u64,
    /// No namespaces: the init is a subreaper that kills the tool's process
    /// group (pinned by seccomp) and reaps every descendant before it
    /// reports; it tells the parent the group on the report pipe.
    pub namespace_free: bool,
    /// Read end of a pipe the tool reads to EOF just before exec, or -1:
    /// under `--explain` with the audit log, toolcage names the tool's
    /// process (the audit records name its Landlock domain by that pid)
    /// while it is certain to be alive, then closes the write end.
    pub exec_gate_fd: RawFd,
    /// A sandbox prepared ahead (`pool.rs`): the init waits for its call
    /// here after the sandbox's steps; `None`: the call is in the plan.
    pub call_in: Option<CallIn>,
    /// Owners of the memory `argv`/`envp`/`seccomp` point into and of the
    /// Landlock ruleset.
    pub _storage: PlanStorage,
}

/// What a [`ChildPlan`]'s pointers and descriptors point into, owned by
/// the plan (which the parent frees only after the init is gone).
/// Never read: owning is their whole job.
pub struct PlanStorage {
    pub _argv: Vec<CString>,
    pub _env: Vec<CString>,
    pub _seccomp: Vec<Vec<libc::sock_filter>>,
    /// The ruleset `landlock_fd` is.
    pub _landlock: Option<OwnedFd>,
    /// What [`CallIn`]'s pointers point into.
    pub _call_in: (Vec<u8>, Vec<*const libc::c_char>),
}

/// Where a prepared sandbox's init receives its call (`init.rs`,
/// `receive_call`): a unix stream socket, and memory allocated by the
/// parent before the clone (the init's own copy) that the call is read
/// into, so that receiving it allocates nothing.
///
/// The wire: one message of three `u32` (the payload's length, argc,
/// envc) carrying the tool's stdin, stdout and stderr (`SCM_RIGHTS`);
/// then the payload: program, working directory, each argument, each
/// `KEY=value`, each NUL-terminated.
pub struct CallIn {
    pub fd: RawFd,
    pub buf: *mut u8,
    pub cap: usize,
    /// Room for argv, a null, envp, a null.
    pub ptrs: *mut *const libc::c_char,
    pub ptrs_cap: usize,
}

/// What the tool runs: from the plan, or received by a prepared
/// sandbox's init. Pointers into the plan or [`CallIn`]'s memory.
pub(crate) struct ToolCall {
    pub program: *const libc::c_char,
    pub cwd: *const libc::c_char,
    pub argv: *const *const libc::c_char,
    pub envp: *const *const libc::c_char,
    pub stdio: [RawFd; 3],
}

impl ToolCall {
    /// The call the parent put in the plan.
    fn of_plan(plan: &ChildPlan) -> ToolCall {
        ToolCall {
            program: plan.program.as_ptr(),
            cwd: plan.cwd.as_ptr(),
            argv: plan.argv.as_ptr(),
            envp: plan.envp.as_ptr(),
            stdio: plan.stdio,
        }
    }
}

/// What the init hands the tool (on the init's stack, which stays put
/// while it is suspended until the tool execs).
pub(crate) struct ToolArgs<'a> {
    pub plan: &'a ChildPlan,
    pub call: ToolCall,
}

fn errno() -> i32 {
    // SAFETY: reads this thread's errno (the init's own copy of the TLS).
    unsafe { *libc::__errno_location() }
}

/// `ifreq` naming `lo`, for [`loopback_up`] (prepared by the parent).
pub(super) fn loopback_request() -> libc::ifreq {
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    req
}

/// Report `stage`, the current errno and the failing step to the parent,
/// then exit.
///
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
///
/// # Safety
/// The child's contract (see the module): called in the init or the tool,
/// never in toolcage's own process, which it would end.
unsafe fn fail_at(plan: &ChildPlan, stage: Stage, step: u32) -> ! {
    let err = errno();
    let mut msg = [0u8; 12];
    msg[..4].copy_from_slice(&(stage as u32).to_ne_bytes());
    msg[4..8].copy_from_slice(&err.to_ne_bytes());
    msg[8..].copy_from_slice(&step.to_ne_bytes());
    // SAFETY: write(2) and _exit(2) are async-signal-safe; `msg` is on our stack.
    unsafe {
        libc::write(plan.report_fd, msg.as_ptr().cast(), msg.len());
        libc::_exit(125)
    }
}

/// [`fail_at`] a stage that has no steps.
///
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
///
/// # Safety
/// As for [`fail_at`].
unsafe fn fail(plan: &ChildPlan, stage: Stage) -> ! {
    // SAFETY: our caller keeps `fail_at`'s contract, which is ours.
    unsafe { fail_at(plan, stage, u32::MAX) }
}

/// Close every descriptor except the sorted `keep` list.
///
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
///
/// # Safety
/// The child's contract: the descriptors closed are the child's copies; in
/// toolcage's process this would close descriptors other code owns.
unsafe fn close_all_but(keep: &[RawFd]) {
    let mut from: u32 = 0;
    for &fd in keep {
        let fd = fd as u32;
        if fd > from {
            // SAFETY: close_range takes plain integers; our caller owns
            // every descriptor in the range.
            unsafe { libc::syscall(libc::SYS_close_range, from, fd - 1, 0u32) };
        }
        from = fd + 1;
    }
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_close_range, from, u32::MAX, 0u32) };
}

/// Bring up `lo` in the calling thread's network namespace.
///
/// # Safety
/// The caller's thread is in the call's fresh network namespace (the init,
/// or `netns.rs`'s helper thread after `unshare`): in toolcage's own
/// namespace this would change the host's interface. Async-signal-safe.
pub(super) unsafe fn loopback_up(req: &libc::ifreq) -> bool {
    // SAFETY: socket/ioctl/close on our own descriptor and a stack copy.
    unsafe {
        let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if s < 0 {
            return false;
        }
        let mut r: libc::ifreq = *req;
        let mut ok = libc::ioctl(s, libc::SIOCGIFFLAGS, &mut r) == 0;
        if ok {
            r.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
            ok = libc::ioctl(s, libc::SIOCSIFFLAGS, &r) == 0;
        }
        libc::close(s);
        ok
    }
}
