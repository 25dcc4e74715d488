//! The init's steps ([`init_main`]), under the child's contract (see the
//! parent module): async-signal-safe, no allocation, no locks.

use super::super::steps;
use super::{
    CallIn, ChildPlan, Stage, ToolArgs, ToolCall, close_all_but, errno, fail, fail_at, loopback_up,
};
use std::ptr;
use std::sync::atomic::{AtomicI32, Ordering};

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
    unsafe { default_signals(plan.reset_signals) };
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
    // The seam: above, the sandbox (what the grant decides); below, the
    // call (see `spawn/mod.rs`). A sandbox prepared ahead waits here.
    // SAFETY: reads our own socket into memory of our own copy.
    let call = unsafe { receive_call(plan) };
    // SAFETY: the subreaper flag is ours.
    unsafe { become_subreaper(plan) };
    // SAFETY: the tool runs on its own stack from the plan, in our memory,
    // while we are suspended (vfork) until it execs.
    let tool = unsafe { start_tool(plan, call) };
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
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
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
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
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

/// Init step: default dispositions for the signals toolcage ignored or
/// caught when the plan was made (`reset`, bit `sig - 1`; the parent
/// computed it once, see `ChildPlan::reset_signals`): every other one is
/// default already, and a reset of those would be a syscall for nothing.
/// The raw syscall: libc's wrapper refuses the two signals it reserves for
/// itself (32 and 33), which an ignored disposition inherited by toolcage
/// would otherwise pass on to the tool.
///
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
///
/// # Safety
/// The child's contract: in the init, with every signal blocked (as the
/// parent cloned it); in toolcage's process this would undo its handlers.
unsafe fn default_signals(reset: u64) {
    let dfl = KernelSigaction {
        handler: libc::SIG_DFL,
        flags: 0,
        restorer: 0,
        mask: 0,
    };
    for sig in 1..=64 {
        if reset & (1u64 << (sig - 1)) == 0 || sig == libc::SIGKILL || sig == libc::SIGSTOP {
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
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
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
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
///
/// # Safety
/// The child's contract: in the init, after [`map_ids`].
unsafe fn undumpable() {
    // SAFETY: prctl takes plain integers.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
}

/// Init step: join the network namespace made ahead (`netns.rs`), if any.
///
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
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
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
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
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
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
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
///
/// # Safety
/// The child's contract: in the init, in the call's network namespace.
unsafe fn open_listeners(plan: &ChildPlan) {
    if let Some(l) = &plan.listeners {
        // SAFETY: `open_and_send` is async-signal-safe and `l` lives in the
        // plan; `fail` keeps the child's contract.
        unsafe {
            if !super::super::proxy::open_and_send(l) {
                fail(plan, Stage::Proxy);
            }
        }
    }
}

/// Init step: the call. In the plan, or for a sandbox prepared ahead
/// ([`CallIn`]), received: its stdio with the header, then its strings
/// into memory the parent allocated. The socket closed unused (the pool
/// discarded us): exit.
///
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
///
/// # Safety
/// The child's contract: in the init, after the sandbox's steps.
unsafe fn receive_call(plan: &ChildPlan) -> ToolCall {
    let Some(c) = &plan.call_in else {
        return ToolCall::of_plan(plan);
    };
    // SAFETY: our caller keeps the child's contract; the memory written is
    // the plan's `CallIn` buffers, in our own copy.
    unsafe {
        let (header, stdio) = receive_header(plan, c);
        let [len, argc, envc] = header.map(|v| v as usize);
        if len > c.cap || argc + envc + 2 > c.ptrs_cap || !read_exact(c.fd, c.buf, len) {
            fail(plan, Stage::Call);
        }
        let bytes = std::slice::from_raw_parts(c.buf, len);
        let ptrs = std::slice::from_raw_parts_mut(c.ptrs, c.ptrs_cap);
        // program, cwd, argv..., envp...: 2 + argc + envc strings.
        let mut starts = [ptr::null::<libc::c_char>(); 2];
        let mut n = 0;
        let mut at = 0;
        for (i, b) in bytes.iter().enumerate() {
            if *b != 0 {
                continue;
            }
            let s = c.buf.add(at) as *const libc::c_char;
            match n {
                0 | 1 => starts[n] = s,
                k if k < 2 + argc => ptrs[k - 2] = s,
                k if k < 2 + argc + envc => ptrs[k - 1] = s,
                _ => fail(plan, Stage::Call),
            }
            n += 1;
            at = i + 1;
        }
        if n != 2 + argc + envc || at != len {
            fail(plan, Stage::Call);
        }
        ptrs[argc] = ptr::null();
        ptrs[argc + 1 + envc] = ptr::null();
        ToolCall {
            program: starts[0],
            cwd: starts[1],
            argv: c.ptrs,
            envp: c.ptrs.add(argc + 1),
            stdio,
        }
    }
}

/// The call's header (length, argc, envc) and its three descriptors,
/// each moved to 3 or above (0 to 2 are closed in the init: a received
/// descriptor there could be overwritten by another's `dup2`).
///
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
///
/// # Safety
/// The child's contract: in the init, `c` its plan's.
unsafe fn receive_header(plan: &ChildPlan, c: &CallIn) -> ([u32; 3], [libc::c_int; 3]) {
    let mut header = [0u32; 3];
    let mut control = [0u64; 8];
    // SAFETY: recvmsg into stack buffers described by the msghdr; the
    // CMSG_* helpers walk that control buffer within its length.
    unsafe {
        let mut iov = libc::iovec {
            iov_base: header.as_mut_ptr().cast(),
            iov_len: std::mem::size_of_val(&header),
        };
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control);
        let n = loop {
            let n = libc::recvmsg(c.fd, &mut msg, libc::MSG_CMSG_CLOEXEC | libc::MSG_WAITALL);
            if n >= 0 || errno() != libc::EINTR {
                break n;
            }
        };
        if n == 0 {
            libc::_exit(0); // discarded before any call
        }
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        let want = libc::CMSG_LEN(3 * std::mem::size_of::<libc::c_int>() as u32) as usize;
        if n as usize != std::mem::size_of_val(&header)
            || msg.msg_flags & libc::MSG_CTRUNC != 0
            || cmsg.is_null()
            || (*cmsg).cmsg_level != libc::SOL_SOCKET
            || (*cmsg).cmsg_type != libc::SCM_RIGHTS
            || (*cmsg).cmsg_len as usize != want
        {
            fail(plan, Stage::Call);
        }
        let mut fds = [-1 as libc::c_int; 3];
        ptr::copy_nonoverlapping(
            libc::CMSG_DATA(cmsg) as *const libc::c_int,
            fds.as_mut_ptr(),
            3,
        );
        for fd in &mut fds {
            if *fd < 3 {
                let moved = libc::fcntl(*fd, libc::F_DUPFD_CLOEXEC, 3);
                if moved < 0 {
                    fail(plan, Stage::Call);
                }
                *fd = moved;
            }
        }
        (header, fds)
    }
}

/// Read exactly `len` bytes from `fd` into `buf`; false on EOF or error.
///
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
///
/// # Safety
/// `buf` is valid for `len` bytes of writes.
unsafe fn read_exact(fd: libc::c_int, buf: *mut u8, len: usize) -> bool {
    let mut got = 0;
    while got < len {
        // SAFETY: read(2) into the rest of `buf`, valid per our contract.
        let n = unsafe { libc::read(fd, buf.add(got).cast(), len - got) };
        match n {
            n if n > 0 => got += n as usize,
            n if n < 0 && errno() == libc::EINTR => continue,
            _ => return false,
        }
    }
    true
}

/// Init step, namespace-free: orphans of the call become our children, so
/// we can reap them.
///
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
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
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
///
/// # Safety
/// The child's contract: in the init, with `plan.tool_stack_top` the top
/// of a stack no one else uses.
unsafe fn start_tool(plan: &ChildPlan, call: ToolCall) -> libc::pid_t {
    // On our stack, which stays put while we are suspended (vfork).
    let args = ToolArgs { plan, call };
    // SAFETY: `tool_main` runs on the tool's own stack, reading the plan
    // and the call we pass it, while we wait (vfork); `fail` keeps the
    // child's contract.
    unsafe {
        let tool = libc::clone(
            super::tool::tool_main,
            plan.tool_stack_top,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            &args as *const ToolArgs as *mut libc::c_void,
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
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
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
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
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
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
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

/// Init step, with namespaces: reap every child until the tool exits,
/// kill and reap whatever else the call left in the namespace, then report
/// the tool's status and exit. Nothing the call started is alive when the
/// parent hears, so it need not wait for this exit (the kernel's teardown
/// of the namespaces) before it answers.
///
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
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
                kill_the_rest();
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

/// As PID 1 of the call's namespace: SIGKILL every other process in it
/// and reap them until none is left. The kill is sent again before each
/// wait, so a child forked while the first one went out dies as well.
/// Anywhere but PID 1 it does nothing (`kill(-1)` would reach the user's
/// processes outside); the kernel's teardown at our exit covers that case.
///
/// Async-signal-safe: raw syscalls only.
fn kill_the_rest() {
    // SAFETY: getpid/kill/waitpid take plain integers and a null pointer.
    unsafe {
        if libc::getpid() != 1 {
            return;
        }
        loop {
            libc::kill(-1, libc::SIGKILL);
            if libc::waitpid(-1, ptr::null_mut(), 0) < 0 && errno() != libc::EINTR {
                return;
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
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
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
