//! The tool's steps (`tool_main`), under the child's contract (see the
//! parent module): async-signal-safe, no allocation, no locks.

use super::{ChildPlan, FreshRule, Stage, ToolArgs, ToolCall, errno, fail};
use std::os::fd::RawFd;
use std::ptr;

/// The tool's entry point: its steps, in order (drop everything, then
/// exec). Any failure reports its stage and exits 125.
pub(super) extern "C" fn tool_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: the init passes its ToolArgs, on its stack, and is
    // suspended (vfork) until we exec; the plan is in the memory we share.
    let ToolArgs { plan, call } = unsafe { &*(arg as *const ToolArgs) };
    // SAFETY: we are the tool, just cloned: the session is ours to lead.
    unsafe { new_session(plan) };
    // SAFETY: the death signal set is ours.
    unsafe { die_with_init() };
    // SAFETY: the limits set are ours.
    unsafe { set_rlimits(plan) };
    // SAFETY: the working directory changed is ours (the init shares our
    // memory, not our filesystem context).
    unsafe { enter_cwd(plan, call) };
    // SAFETY: the capabilities dropped are ours.
    unsafe { drop_capabilities(plan) };
    // SAFETY: no_new_privs is set on us alone.
    unsafe { no_new_privs(plan) };
    // SAFETY: the Landlock domain restricts us alone.
    unsafe { restrict_landlock(plan) };
    // SAFETY: the descriptors marked are our own table's (no CLONE_FILES).
    unsafe { close_inherited(plan) };
    // SAFETY: as above.
    unsafe { set_stdio(plan, call) };
    // SAFETY: the signal mask is ours; dispositions are all default.
    unsafe { unblock_signals(plan) };
    // SAFETY: a read of the gate the plan names, our own copy.
    unsafe { wait_exec_gate(plan) };
    // SAFETY: the filters confine us alone; nothing runs here after them
    // but exec.
    unsafe { install_seccomp(plan) };
    // SAFETY: the program, argv and envp are C strings and null-terminated
    // pointer arrays in the plan.
    unsafe { exec(plan, call) }
}

/// Tool step: lead a new session (and process group).
///
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
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
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
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
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
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
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
///
/// # Safety
/// The child's contract: in the tool.
unsafe fn enter_cwd(plan: &ChildPlan, call: &ToolCall) {
    // SAFETY: chdir with a C string of the call; `fail` keeps the
    // child's contract.
    unsafe {
        if libc::chdir(call.cwd) != 0 {
            fail(plan, Stage::Chdir);
        }
    }
}

/// Tool step: no exec may grant privileges again.
///
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
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
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
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
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
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
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
///
/// # Safety
/// The child's contract: in the tool, after [`close_inherited`].
unsafe fn set_stdio(plan: &ChildPlan, call: &ToolCall) {
    for (target, &fd) in call.stdio.iter().enumerate() {
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
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
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
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
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
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
///
/// # Safety
/// The child's contract: in the tool, last.
unsafe fn exec(plan: &ChildPlan, call: &ToolCall) -> ! {
    // SAFETY: execve with a C string and null-terminated arrays of C
    // strings of the call; `fail` keeps the child's contract.
    unsafe {
        libc::execve(call.program, call.argv, call.envp);
        fail(plan, Stage::Exec)
    }
}

/// Grant `rule.access` beneath a filesystem mounted inside the call (a
/// fresh tmpfs or procfs), whose root inode no parent-side rule can name.
///
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
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
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
///
/// # Safety
/// The child's contract: in the tool.
unsafe fn drop_capabilities(plan: &ChildPlan) {
    // NOROOT|NOROOT_LOCKED|NO_SETUID_FIXUP|NO_SETUID_FIXUP_LOCKED|KEEP_CAPS_LOCKED
    // plus NO_CAP_AMBIENT_RAISE and its lock (0x40 | 0x80).
    const SECBITS: libc::c_ulong = 0x2f | 0xc0;
    // SAFETY: prctl and geteuid take plain integers;
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
    }
    // SAFETY: our caller keeps `empty_capability_sets`' contract.
    unsafe { empty_capability_sets(plan) };
}

/// Empty the effective, permitted and inheritable sets (`capset(2)`).
///
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
///
/// # Safety
/// The child's contract: in the tool, from [`drop_capabilities`].
unsafe fn empty_capability_sets(plan: &ChildPlan) {
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
    // SAFETY: capset with pointers to our stack; `fail` keeps the child's
    // contract.
    unsafe {
        if libc::syscall(libc::SYS_capset, &header, data.as_ptr()) != 0 {
            fail(plan, Stage::Capabilities);
        }
    }
}

/// Tool step: an empty signal mask (the init cloned it with every signal
/// blocked). Dispositions are the init's, all default (it reset them before
/// cloning us and sets its own only after we exec): only the mask is left.
///
/// Async-signal-safe: raw syscalls only, no allocation, no locks.
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
