//! The child side of a sandboxed spawn: two processes.
//!
//! * the **init** (PID 1 of the call's PID namespace) sets up the mount
//!   namespace, starts the tool, forwards SIGTERM/SIGINT/SIGHUP to every
//!   process in the namespace, reaps orphans, and when the tool exits writes
//!   its wait status to the parent and exits, which makes the kernel kill
//!   whatever the tool left behind;
//! * the **tool** (PID 2) drops every privilege, installs Landlock and
//!   seccomp, and execs the command.
//!
//! Everything they need is prepared by the parent in a [`ChildPlan`] (C
//! strings, pointer arrays, the Landlock descriptor, the BPF programs, the
//! steps that build the root, two stacks). The init is created like a
//! `fork` (its own copy of toolcage's memory, so a panic or a free in the
//! parent cannot reach it, and its errno and TLS are its own); the tool
//! shares the init's copy until it execs (`CLONE_VM | CLONE_VFORK`). Toolcage
//! is multi-threaded, so both make only raw syscalls: no allocation, no
//! locks.

use super::steps::{self, Step};
use std::ffi::CString;
use std::os::fd::{OwnedFd, RawFd};
use std::ptr;
use std::sync::atomic::{AtomicI32, Ordering};

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
    pub listeners: Option<super::proxy::listen::ListenPlan>,
    /// A network namespace made ahead (`netns.rs`) to join; -1 for none.
    pub netns_fd: RawFd,
    pub cap_last: libc::c_int,
    pub sigrtmax: libc::c_int,
    /// No namespaces: the init is a subreaper that kills the tool's process
    /// group (pinned by seccomp) and reaps every descendant before it
    /// reports; it tells the parent the group on the report pipe.
    pub namespace_free: bool,
    /// Read end of a pipe the tool reads to EOF just before exec, or -1:
    /// under `--explain` with the audit log, toolcage names the tool's
    /// process (the audit records name its Landlock domain by that pid)
    /// while it is certain to be alive, then closes the write end.
    pub exec_gate_fd: RawFd,
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
/// # Safety
/// As for [`fail_at`].
unsafe fn fail(plan: &ChildPlan, stage: Stage) -> ! {
    // SAFETY: our caller keeps `fail_at`'s contract, which is ours.
    unsafe { fail_at(plan, stage, u32::MAX) }
}

/// Close every descriptor except the sorted `keep` list.
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

/// Where the init forwards termination signals: -1 (every process in the
/// namespace) or minus the tool's process group (namespace-free mode); 0
/// before it is known. The init's own memory: it is not shared with toolcage.
static FORWARD_TO: AtomicI32 = AtomicI32::new(0);

/// Forward a termination signal to every other process of the call.
extern "C" fn forward_signal(sig: libc::c_int) {
    let target = FORWARD_TO.load(Ordering::Relaxed);
    if target != 0 {
        // SAFETY: kill(2) is async-signal-safe; -1 from a namespace init
        // means every process in the namespace except the init itself.
        unsafe {
            libc::kill(target, sig);
        }
    }
}

/// The init's parent-death signal in namespace-free mode.
const PARENT_GONE: libc::c_int = libc::SIGUSR2;

/// toolcage died: kill the tool's group (it would outlive us), then exit.
extern "C" fn parent_gone(_sig: libc::c_int) {
    let target = FORWARD_TO.load(Ordering::Relaxed);
    // SAFETY: kill(2) and _exit(2) are async-signal-safe.
    unsafe {
        if target < -1 {
            libc::kill(target, libc::SIGKILL);
        }
        libc::_exit(125);
    }
}

/// The kernel's `struct sigaction` for `rt_sigaction(2)`.
#[repr(C)]
struct KernelSigaction {
    handler: libc::sighandler_t,
    flags: libc::c_ulong,
    restorer: usize,
    mask: u64,
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

/// The init's entry point, called by `clone(2)` on its own stack: the
/// init's steps, in order. Up to [`open_listeners`] they depend only on
/// the grant (the sandbox); from [`become_subreaper`] on, on the call.
pub extern "C" fn init_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: the parent passes a pointer to a ChildPlan; we run in a copy
    // of its memory, so the plan stays valid for our whole life.
    let plan = unsafe { &*(arg as *const ChildPlan) };
    // SAFETY: we are the init, just cloned: the death signal set is ours.
    unsafe { die_with_parent(plan) };
    // SAFETY: the descriptors closed are our copies of the parent's.
    unsafe { close_all_but(&plan.keep_fds) };
    // SAFETY: a poll of our own status pipe; _exit ends only us.
    unsafe { exit_if_parent_gone(plan) };
    // SAFETY: the dispositions are ours; every signal is still blocked.
    unsafe { default_signals(plan.sigrtmax) };
    // SAFETY: /proc/self is us, in our new user namespace.
    unsafe { map_ids(plan) };
    // SAFETY: the dumpable flag set is ours.
    unsafe { undumpable() };
    // SAFETY: setns moves only us, into the namespace made for the call.
    unsafe { join_network(plan) };
    // SAFETY: the mounts are in our own mount namespace.
    unsafe { build_root(plan) };
    // SAFETY: the `lo` brought up is our fresh network namespace's.
    unsafe { bring_up_loopback(plan) };
    // SAFETY: the listeners are made in our network namespace, sent on
    // the channel the plan names, and closed.
    unsafe { open_listeners(plan) };
    // SAFETY: the subreaper flag is ours.
    unsafe { become_subreaper(plan) };
    // SAFETY: the tool runs on its own stack from the plan, in our memory,
    // while we are suspended (vfork) until it execs.
    let tool = unsafe { start_tool(plan) };
    // SAFETY: writes our own report pipe and our own static.
    unsafe { forward_to(plan, tool) };
    // SAFETY: the handlers installed are async-signal-safe and ours.
    unsafe { catch_signals(plan) };
    // SAFETY: as for the first `close_all_but`.
    unsafe { close_all_but(&[plan.status_fd]) };
    // SAFETY: the signal mask is ours; the handlers are installed.
    unsafe { unblock_all_signals() };
    if plan.namespace_free {
        // SAFETY: `tool` is our child; the processes killed are the call's.
        unsafe { reap_namespace_free(plan, tool) };
    }
    // SAFETY: `tool` is our child; in the call's PID namespace every
    // process we reap is the call's.
    unsafe { wait_for_tool(plan, tool) }
}

/// Init step: die with the thread that spawned us. Namespace-free our
/// death would not end the tool's group: we catch the signal instead and
/// kill the group first ([`parent_gone`]).
///
/// # Safety
/// The child's contract (see the module): in the init, just cloned.
unsafe fn die_with_parent(plan: &ChildPlan) {
    let death_signal = if plan.namespace_free {
        PARENT_GONE
    } else {
        libc::SIGKILL
    };
    // SAFETY: prctl takes plain integers.
    unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            death_signal as libc::c_ulong,
            0,
            0,
            0,
        )
    };
}

/// Init step: close the race where toolcage's thread died before
/// [`die_with_parent`]. The parent holds the read end of the status pipe,
/// so once our own copy is closed ([`close_all_but`]), POLLERR on the
/// write end means nobody is left to read it: exit.
///
/// # Safety
/// The child's contract: in the init, after `close_all_but`.
unsafe fn exit_if_parent_gone(plan: &ChildPlan) {
    let mut pfd = libc::pollfd {
        fd: plan.status_fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: poll on a stack struct; _exit is async-signal-safe.
    unsafe {
        if libc::poll(&mut pfd, 1, 0) == 1 && pfd.revents & libc::POLLERR != 0 {
            libc::_exit(125);
        }
    }
}

/// Init step: default dispositions for every signal but SIGKILL and
/// SIGSTOP. The raw syscall: libc's wrapper refuses the two signals it
/// reserves for itself (32 and 33), which an ignored disposition inherited
/// by toolcage would otherwise pass on to the tool.
///
/// # Safety
/// The child's contract: in the init, with every signal blocked (as the
/// parent cloned it); in toolcage's process this would undo its handlers.
unsafe fn default_signals(sigrtmax: libc::c_int) {
    let dfl = KernelSigaction {
        handler: libc::SIG_DFL,
        flags: 0,
        restorer: 0,
        mask: 0,
    };
    for sig in 1..=sigrtmax {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: rt_sigaction with a stack-allocated argument of the
        // kernel's layout and size 8 for the mask.
        unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                sig,
                &dfl as *const KernelSigaction,
                ptr::null_mut::<KernelSigaction>(),
                8usize,
            )
        };
    }
}

/// Init step: write the user namespace's maps (not root: ourselves to
/// ourselves, `setgroups` denied); nothing to write as root.
///
/// # Safety
/// The child's contract: in the init, before [`undumpable`] (a
/// non-dumpable process's `/proc/self` files belong to root).
unsafe fn map_ids(plan: &ChildPlan) {
    for w in &plan.proc_writes {
        // SAFETY: open/write/close with a C string and bytes from the plan;
        // `fail` keeps the child's contract, which our caller keeps.
        unsafe {
            let fd = libc::open(w.path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 || libc::write(fd, w.content.as_ptr().cast(), w.content.len()) < 0 {
                fail(plan, Stage::UserNamespace);
            }
            libc::close(fd);
        }
    }
}

/// Init step: from here on nobody can ptrace us or read our memory
/// through /proc (which matters without Landlock).
///
/// # Safety
/// The child's contract: in the init, after [`map_ids`].
unsafe fn undumpable() {
    // SAFETY: prctl takes plain integers.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
}

/// Init step: join the network namespace made ahead (`netns.rs`), if any.
///
/// # Safety
/// The child's contract: in the init.
unsafe fn join_network(plan: &ChildPlan) {
    // SAFETY: setns on a descriptor the plan kept open for us; `fail`
    // keeps the child's contract, which our caller keeps.
    unsafe {
        if plan.netns_fd >= 0 && libc::setns(plan.netns_fd, libc::CLONE_NEWNET) != 0 {
            fail(plan, Stage::Network);
        }
    }
}

/// Init step: build the constructed root, step by step; a failure names
/// its step (none namespace-free).
///
/// # Safety
/// The child's contract: in the init, in its own mount namespace.
unsafe fn build_root(plan: &ChildPlan) {
    for (i, step) in plan.steps.iter().enumerate() {
        // SAFETY: `execute`'s contract (raw syscalls in a child before
        // exec) is the child's, which our caller keeps.
        unsafe {
            if steps::execute(step).is_err() {
                fail_at(plan, Stage::Mount, i as u32);
            }
        }
    }
}

/// Init step: bring up `lo` when the call's network namespace is our own
/// (`CLONE_NEWNET`, none made ahead).
///
/// # Safety
/// The child's contract: in the init, in that namespace.
unsafe fn bring_up_loopback(plan: &ChildPlan) {
    if let Some(req) = &plan.loopback {
        // SAFETY: we are in the call's fresh network namespace
        // (`loopback_up`'s contract); `fail` keeps the child's.
        unsafe {
            if !loopback_up(req) {
                fail(plan, Stage::Network);
            }
        }
    }
}

/// Init step, domain mode: the proxy's listeners, created while we still
/// hold every right in the network namespace, sent to toolcage and closed
/// here (and the channel with them) before the tool exists.
///
/// # Safety
/// The child's contract: in the init, in the call's network namespace.
unsafe fn open_listeners(plan: &ChildPlan) {
    if let Some(l) = &plan.listeners {
        // SAFETY: `open_and_send` is async-signal-safe and `l` lives in the
        // plan; `fail` keeps the child's contract.
        unsafe {
            if !super::proxy::listen::open_and_send(l) {
                fail(plan, Stage::Proxy);
            }
        }
    }
}

/// Init step, namespace-free: orphans of the call become our children, so
/// we can reap them.
///
/// # Safety
/// The child's contract: in the init.
unsafe fn become_subreaper(plan: &ChildPlan) {
    if plan.namespace_free {
        // SAFETY: prctl takes plain integers.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    }
}

/// Init step: clone the tool into our memory (`CLONE_VM | CLONE_VFORK`):
/// we are suspended until it execs or exits. Its pid.
///
/// # Safety
/// The child's contract: in the init, with `plan.tool_stack_top` the top
/// of a stack no one else uses.
unsafe fn start_tool(plan: &ChildPlan) -> libc::pid_t {
    // SAFETY: `tool_main` runs on the tool's own stack, reading the plan we
    // pass it, while we wait (vfork); `fail` keeps the child's contract.
    unsafe {
        let tool = libc::clone(
            tool_main,
            plan.tool_stack_top,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            plan as *const ChildPlan as *mut libc::c_void,
        );
        if tool < 0 {
            fail(plan, Stage::Spawn);
        }
        tool
    }
}

/// Init step: where termination signals go ([`FORWARD_TO`]). Namespace-
/// free the tool leads its own session and group (setsid), which seccomp
/// keeps every descendant in: the parent is told it, to kill it too if it
/// has to kill us.
///
/// # Safety
/// The child's contract: in the init, after [`start_tool`].
unsafe fn forward_to(plan: &ChildPlan, tool: libc::pid_t) {
    if plan.namespace_free {
        let bytes = tool.to_ne_bytes();
        // SAFETY: write(2) of stack bytes to our report pipe.
        unsafe { libc::write(plan.report_fd, bytes.as_ptr().cast(), bytes.len()) };
        FORWARD_TO.store(-tool, Ordering::Relaxed);
    } else {
        FORWARD_TO.store(-1, Ordering::Relaxed);
    }
}

/// Init step: forward SIGTERM, SIGINT and SIGHUP; namespace-free, catch
/// [`PARENT_GONE`]. Signals are still blocked (as when the parent cloned
/// us): one that arrived meanwhile runs its handler once unblocked.
///
/// # Safety
/// The child's contract: in the init, after [`forward_to`].
unsafe fn catch_signals(plan: &ChildPlan) {
    // SAFETY: sigaction with stack structs (all-zero is a valid value)
    // naming handlers that only make async-signal-safe calls.
    unsafe {
        let mut forward: libc::sigaction = std::mem::zeroed();
        forward.sa_sigaction = forward_signal as *const () as libc::sighandler_t;
        libc::sigfillset(&mut forward.sa_mask);
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaction(sig, &forward, ptr::null_mut());
        }
        if plan.namespace_free {
            let mut gone: libc::sigaction = std::mem::zeroed();
            gone.sa_sigaction = parent_gone as *const () as libc::sighandler_t;
            libc::sigfillset(&mut gone.sa_mask);
            libc::sigaction(PARENT_GONE, &gone, ptr::null_mut());
        }
    }
}

/// Init step: an empty signal mask (the tool has exec'd or failed, and the
/// handlers are in place).
///
/// # Safety
/// The child's contract: in the init, after [`catch_signals`].
unsafe fn unblock_all_signals() {
    // SAFETY: sigprocmask with a stack-allocated argument.
    unsafe {
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, ptr::null_mut());
    }
}

/// Init step, with namespaces: reap every child until the tool exits, then
/// report its status and exit, which makes the kernel kill whatever is
/// left in the namespace.
///
/// # Safety
/// The child's contract: in the init, `tool` its child.
unsafe fn wait_for_tool(plan: &ChildPlan, tool: libc::pid_t) -> ! {
    // SAFETY: waitpid/write/_exit are async-signal-safe raw syscalls on
    // stack memory.
    unsafe {
        loop {
            let mut status = 0;
            let pid = libc::waitpid(-1, &mut status, 0);
            if pid == tool {
                let bytes = status.to_ne_bytes();
                libc::write(plan.status_fd, bytes.as_ptr().cast(), bytes.len());
                libc::_exit(0);
            }
            if pid < 0 && errno() == libc::ECHILD {
                libc::_exit(0);
            }
        }
    }
}

/// Init step, namespace-free: wait for the tool (reaping orphans
/// meanwhile), kill its process group while the tool's zombie still holds
/// the group's ID, then reap every descendant until none is left, and only
/// then report the tool's status. Nothing the call started is alive when
/// the parent hears.
///
/// # Safety
/// The child's contract: in the init, a subreaper, `tool` its child.
unsafe fn reap_namespace_free(plan: &ChildPlan, tool: libc::pid_t) -> ! {
    // SAFETY: waitid/waitpid/kill/write/_exit are async-signal-safe raw
    // syscalls on stack memory.
    unsafe {
        loop {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            if libc::waitid(libc::P_ALL, 0, &mut info, libc::WEXITED | libc::WNOWAIT) < 0 {
                if errno() == libc::EINTR {
                    continue;
                }
                libc::_exit(0); // no children: the tool is gone already
            }
            let pid = info.si_pid();
            if pid != tool {
                libc::waitpid(pid, ptr::null_mut(), 0); // an orphan
                continue;
            }
            libc::kill(-tool, libc::SIGKILL);
            let mut status = 0;
            libc::waitpid(tool, &mut status, 0);
            // Every descendant is in the killed group (seccomp refuses
            // setsid and setpgid), and each one's children are handed to us
            // before it dies: when waitpid says ECHILD, none is left.
            loop {
                if libc::waitpid(-1, ptr::null_mut(), 0) < 0 && errno() != libc::EINTR {
                    break;
                }
            }
            let bytes = status.to_ne_bytes();
            libc::write(plan.status_fd, bytes.as_ptr().cast(), bytes.len());
            libc::_exit(0);
        }
    }
}

/// The tool's entry point: its steps, in order (drop everything, then
/// exec). Any failure reports its stage and exits 125.
extern "C" fn tool_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: as for `init_main`; the init is suspended (vfork) until we exec.
    let plan = unsafe { &*(arg as *const ChildPlan) };
    // SAFETY: we are the tool, just cloned: the session is ours to lead.
    unsafe { new_session(plan) };
    // SAFETY: the death signal set is ours.
    unsafe { die_with_init() };
    // SAFETY: the limits set are ours.
    unsafe { set_rlimits(plan) };
    // SAFETY: the working directory changed is ours (the init shares our
    // memory, not our filesystem context).
    unsafe { enter_cwd(plan) };
    // SAFETY: the capabilities dropped are ours.
    unsafe { drop_capabilities(plan) };
    // SAFETY: no_new_privs is set on us alone.
    unsafe { no_new_privs(plan) };
    // SAFETY: the Landlock domain restricts us alone.
    unsafe { restrict_landlock(plan) };
    // SAFETY: the descriptors marked are our own table's (no CLONE_FILES).
    unsafe { close_inherited(plan) };
    // SAFETY: as above.
    unsafe { set_stdio(plan) };
    // SAFETY: the signal mask is ours; dispositions are all default.
    unsafe { unblock_signals(plan) };
    // SAFETY: a read of the gate the plan names, our own copy.
    unsafe { wait_exec_gate(plan) };
    // SAFETY: the filters confine us alone; nothing runs here after them
    // but exec.
    unsafe { install_seccomp(plan) };
    // SAFETY: the program, argv and envp are C strings and null-terminated
    // pointer arrays in the plan.
    unsafe { exec(plan) }
}

/// Tool step: lead a new session (and process group).
///
/// # Safety
/// The child's contract (see the module): in the tool.
unsafe fn new_session(plan: &ChildPlan) {
    // SAFETY: setsid takes nothing; `fail` keeps the child's contract.
    unsafe {
        if libc::setsid() < 0 {
            fail(plan, Stage::Session);
        }
    }
}

/// Tool step: die with the init.
///
/// # Safety
/// The child's contract: in the tool.
unsafe fn die_with_init() {
    // SAFETY: prctl takes plain integers.
    unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        )
    };
}

/// Tool step: the grant's resource limits.
///
/// # Safety
/// The child's contract: in the tool.
unsafe fn set_rlimits(plan: &ChildPlan) {
    for (resource, limit) in &plan.rlimits {
        // SAFETY: setrlimit with a limit in the plan; `fail` keeps the
        // child's contract.
        unsafe {
            if libc::setrlimit(*resource, limit) != 0 {
                fail(plan, Stage::Rlimit);
            }
        }
    }
}

/// Tool step: change to the call's working directory.
///
/// # Safety
/// The child's contract: in the tool.
unsafe fn enter_cwd(plan: &ChildPlan) {
    // SAFETY: chdir with a C string from the plan; `fail` keeps the
    // child's contract.
    unsafe {
        if libc::chdir(plan.cwd.as_ptr()) != 0 {
            fail(plan, Stage::Chdir);
        }
    }
}

/// Tool step: no exec may grant privileges again.
///
/// # Safety
/// The child's contract: in the tool.
unsafe fn no_new_privs(plan: &ChildPlan) {
    // SAFETY: prctl takes plain integers; `fail` keeps the child's contract.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            fail(plan, Stage::NoNewPrivs);
        }
    }
}

/// Tool step: add the rules for the filesystems mounted inside the call,
/// then restrict ourselves with the ruleset (when Landlock is available).
///
/// # Safety
/// The child's contract: in the tool, after [`no_new_privs`].
unsafe fn restrict_landlock(plan: &ChildPlan) {
    if plan.landlock_fd < 0 {
        return;
    }
    for rule in &plan.fresh_rules {
        // SAFETY: our caller keeps `add_fresh_rule`'s contract.
        unsafe { add_fresh_rule(plan, rule) };
    }
    // SAFETY: landlock_restrict_self on the plan's ruleset descriptor;
    // `fail` keeps the child's contract.
    unsafe {
        if libc::syscall(
            libc::SYS_landlock_restrict_self,
            plan.landlock_fd,
            plan.landlock_flags,
        ) != 0
        {
            fail(plan, Stage::Landlock);
        }
    }
}

/// Tool step: nothing toolcage inherited may leak into the tool: every
/// descriptor from 3 up is closed on exec.
///
/// # Safety
/// The child's contract: in the tool.
unsafe fn close_inherited(plan: &ChildPlan) {
    // SAFETY: close_range takes plain integers; `fail` keeps the child's
    // contract.
    unsafe {
        if libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        ) != 0
        {
            fail(plan, Stage::Descriptors);
        }
    }
}

/// Tool step: the call's stdin, stdout and stderr on 0, 1 and 2, kept
/// across exec.
///
/// # Safety
/// The child's contract: in the tool, after [`close_inherited`].
unsafe fn set_stdio(plan: &ChildPlan) {
    for (target, &fd) in plan.stdio.iter().enumerate() {
        let target = target as RawFd;
        // SAFETY: fcntl/dup2 on descriptors of our own table; `fail` keeps
        // the child's contract.
        unsafe {
            if fd == target {
                if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                    fail(plan, Stage::Descriptors);
                }
            } else if libc::dup2(fd, target) < 0 {
                fail(plan, Stage::Descriptors);
            }
        }
    }
}

/// Tool step: wait, under `--explain` with the audit log, until toolcage
/// has named our process (it closes the gate's write end).
///
/// # Safety
/// The child's contract: in the tool.
unsafe fn wait_exec_gate(plan: &ChildPlan) {
    if plan.exec_gate_fd < 0 {
        return;
    }
    let mut byte = 0u8;
    // SAFETY: read(2) of one byte into the stack.
    while unsafe { libc::read(plan.exec_gate_fd, (&raw mut byte).cast(), 1) } < 0
        && errno() == libc::EINTR
    {}
}

/// Tool step: the seccomp filters, last before exec (they may refuse what
/// the steps before need).
///
/// # Safety
/// The child's contract: in the tool, after [`no_new_privs`].
unsafe fn install_seccomp(plan: &ChildPlan) {
    for prog in &plan.seccomp {
        // SAFETY: seccomp(2) with a program whose filter lives in the
        // plan's storage; `fail` keeps the child's contract.
        unsafe {
            if libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                0u32,
                prog as *const libc::sock_fprog,
            ) != 0
            {
                fail(plan, Stage::Seccomp);
            }
        }
    }
}

/// Tool step: exec the program; only returns (by reporting) on failure.
///
/// # Safety
/// The child's contract: in the tool, last.
unsafe fn exec(plan: &ChildPlan) -> ! {
    // SAFETY: execve with a C string and null-terminated arrays of C
    // strings from the plan; `fail` keeps the child's contract.
    unsafe {
        libc::execve(
            plan.program.as_ptr(),
            plan.argv.as_ptr(),
            plan.envp.as_ptr(),
        );
        fail(plan, Stage::Exec)
    }
}

/// Grant `rule.access` beneath a filesystem mounted inside the call (a
/// fresh tmpfs or procfs), whose root inode no parent-side rule can name.
///
/// # Safety
/// The child's contract (see the module): in the tool, before it restricts
/// itself with `plan.landlock_fd`, a ruleset descriptor.
unsafe fn add_fresh_rule(plan: &ChildPlan, rule: &FreshRule) {
    #[repr(C, packed)]
    struct PathBeneathAttr {
        allowed_access: u64,
        parent_fd: i32,
    }
    const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;
    // SAFETY: open/syscall/close with a C string from the plan and a stack
    // struct; `fail` keeps the child's contract.
    unsafe {
        let fd = libc::open(
            rule.path.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            fail(plan, Stage::Landlock);
        }
        let attr = PathBeneathAttr {
            allowed_access: rule.access,
            parent_fd: fd,
        };
        if libc::syscall(
            libc::SYS_landlock_add_rule,
            plan.landlock_fd,
            LANDLOCK_RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0u32,
        ) != 0
        {
            fail(plan, Stage::Landlock);
        }
        libc::close(fd);
    }
}

/// Tool step: lock root out of its privileges and empty every capability
/// set.
///
/// # Safety
/// The child's contract: in the tool.
unsafe fn drop_capabilities(plan: &ChildPlan) {
    // NOROOT|NOROOT_LOCKED|NO_SETUID_FIXUP|NO_SETUID_FIXUP_LOCKED|KEEP_CAPS_LOCKED
    // plus NO_CAP_AMBIENT_RAISE and its lock (0x40 | 0x80).
    const SECBITS: libc::c_ulong = 0x2f | 0xc0;
    // SAFETY: prctl/capset take plain integers or pointers to our stack;
    // `fail` keeps the child's contract.
    unsafe {
        // An ordinary user without a user namespace holds no capability:
        // nothing to lock, and the bounding set cannot be changed without
        // CAP_SETPCAP (no_new_privs keeps it from mattering).
        let no_setpcap = plan.namespace_free && libc::geteuid() != 0;
        if libc::prctl(libc::PR_SET_SECUREBITS, SECBITS, 0, 0, 0) != 0 && !no_setpcap {
            fail(plan, Stage::Capabilities);
        }
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        ) != 0
        {
            fail(plan, Stage::Capabilities);
        }
        for cap in 0..=plan.cap_last {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) != 0 && !no_setpcap
            {
                fail(plan, Stage::Capabilities);
            }
        }
        #[repr(C)]
        struct Header {
            version: u32,
            pid: i32,
        }
        #[repr(C)]
        struct Data {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        let header = Header {
            version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
            pid: 0,
        };
        let data = [
            Data {
                effective: 0,
                permitted: 0,
                inheritable: 0,
            },
            Data {
                effective: 0,
                permitted: 0,
                inheritable: 0,
            },
        ];
        if libc::syscall(libc::SYS_capset, &header, data.as_ptr()) != 0 {
            fail(plan, Stage::Capabilities);
        }
    }
}

/// Tool step: an empty signal mask (the init cloned it with every signal
/// blocked). Dispositions are the init's, all default (it reset them before
/// cloning us and sets its own only after we exec): only the mask is left.
///
/// # Safety
/// The child's contract: in the tool.
unsafe fn unblock_signals(plan: &ChildPlan) {
    // SAFETY: sigprocmask with a stack-allocated argument; `fail` keeps
    // the child's contract.
    unsafe {
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        if libc::sigprocmask(libc::SIG_SETMASK, &empty, ptr::null_mut()) != 0 {
            fail(plan, Stage::Signals);
        }
    }
}
