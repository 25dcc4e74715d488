//! Phases 3 and 4: the broker (what serves the call from toolcage's own
//! process), then the init: the pipes, the child's plan, `clone(2)`, and
//! the wait until the tool has exec'd.

use super::super::child::{
    CallIn, ChildPlan, PlanStorage, ProcWrite, Stage, init_main, loopback_request,
};
use super::super::command::Command;
use super::super::error::SandboxError;
use super::super::init_guard::InitGuard;
use super::super::landlock as ll;
use super::prepare::{Aftercare, Confinement, Invocation, Prepared, Wires, pipe};
use crate::{netns, output, probe, proxy};
use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use toolcage_broker::landlock_log;
use toolcage_policy::{DomainPolicy, canon};

pub(in crate::spawn) const STACK_SIZE: usize = 256 * 1024;

/// Why `run_in` did not run the call.
pub(crate) enum RunError {
    /// The namespaces could not be created (errno): try without them.
    Unavailable(i32),
    Failed(SandboxError),
}
use RunError::{Failed, Unavailable};

impl From<SandboxError> for RunError {
    fn from(e: SandboxError) -> Self {
        Failed(e)
    }
}

/// Phase 3's product: what serves the call from toolcage's process, set up
/// before the init exists (its descriptors go into the child's plan).
#[derive(Default)]
pub(in crate::spawn) struct Broker {
    /// Domain mode: the proxy's listener plan and the channel on which the
    /// init sends it the listeners it made in the call's network namespace.
    proxy: Option<proxy::Setup>,
    /// `--explain` where the audit log can be read: the call's Landlock
    /// records, subscribed before the call starts so none is missed.
    audit_tap: Option<landlock_log::Tap>,
    /// With the tap: the pipe the tool reads to EOF just before exec, while
    /// toolcage names its process.
    exec_gate: Option<(OwnedFd, OwnedFd)>,
}

/// Phase 3 (see [`Broker`]). The proxy serves once the init has sent its
/// listeners ([`clone_init`]).
pub(in crate::spawn) fn broker(
    cmd: &Command,
    domains: Option<&DomainPolicy>,
) -> Result<Broker, SandboxError> {
    let proxy = domains.map(proxy::Setup::new).transpose()?;
    let audit_tap = cmd.explain.then(landlock_log::open).flatten();
    let exec_gate = audit_tap.as_ref().map(|_| pipe()).transpose()?;
    Ok(Broker {
        proxy,
        audit_tap,
        exec_gate,
    })
}

/// Phase 4's product: the call, running (its tool has exec'd).
pub(in crate::spawn) struct Started {
    /// The init: dropped unreaped, it takes the call's processes with it.
    pub init: InitGuard,
    /// Our ends of the tool's stdin, stdout and stderr (captured stdio).
    pub stdio: Option<[OwnedFd; 3]>,
    /// Read end of the pipe where the init writes the tool's wait status.
    pub status: OwnedFd,
    /// Domain mode: the proxy, serving.
    pub proxy: Option<proxy::Proxy>,
    pub audit_tap: Option<landlock_log::Tap>,
    /// With the audit tap: the processes whose records are the call's.
    pub call_pids: Option<BTreeSet<i32>>,
    /// `exec --explain`: the thread copying the tool's stderr to ours.
    pub teed: Option<std::thread::JoinHandle<String>>,
    pub aftercare: Aftercare,
    /// The plan and the stacks are freed after the init is gone: until
    /// then every page the allocator writes is copied (the init shares
    /// them).
    /// (`None`: the pool's maker process made the init and keeps them.)
    pub _after_the_init: Option<(ChildPlan, Vec<u8>)>,
}

/// Phase 4: clone the init with the plan made of phases 2 and 3, start the
/// broker's serving, and return once the tool has exec'd. A setup failure
/// in the child comes back as the step that failed; namespaces the kernel
/// or a container refuses, as [`Unavailable`].
pub(in crate::spawn) fn clone_init(
    cmd: &Command,
    prepared: Prepared<'_>,
    broker: Broker,
) -> Result<Started, RunError> {
    let Prepared {
        call,
        sandbox,
        wires,
        aftercare,
        paths_memory,
    } = prepared;
    let namespace_free = sandbox.namespace_free;
    let (mut init, after_the_init) =
        clone_child(cmd, call, sandbox, &wires, &broker, paths_memory)?;
    // The init has its own copy of all of this.
    let Wires {
        pipes,
        tee,
        report,
        status,
    } = wires;
    let (exec_gate_r, exec_gate_w) = broker.exec_gate.unzip();
    drop((report.1, status.1, exec_gate_r));
    let call_pids = exec_gate_w.map(|w| landlock_log::name_the_tool(init.pid, &report.0, w));
    let teed = tee.map(|(r, w)| {
        drop(w);
        output::tee_to_stderr(r, 64 * 1024)
    });
    // Domain mode: serve the call's network as long as it runs (stopped
    // when dropped, on every way out).
    let proxy = broker.proxy.map(proxy::Setup::start).transpose()?.flatten();
    let stdio = pipes.map(|(child_ends, ours)| {
        drop(child_ends);
        ours
    });
    await_exec(&mut init, &report.0, namespace_free, &aftercare)?;
    Ok(Started {
        init,
        stdio,
        status: status.0,
        proxy,
        audit_tap: broker.audit_tap,
        call_pids,
        teed,
        aftercare,
        _after_the_init: Some(after_the_init),
    })
}

/// Join the network namespace made ahead, build the child's plan and clone
/// the init. The plan and the stacks are returned to be kept until the init
/// is gone.
fn clone_child(
    cmd: &Command,
    call: Invocation,
    mut sandbox: Confinement<'_>,
    wires: &Wires,
    broker: &Broker,
    paths_memory: canon::Memory,
) -> Result<(InitGuard, (ChildPlan, Vec<u8>)), RunError> {
    let namespace_free = sandbox.namespace_free;
    let netns = sandbox.early_netns.take().and_then(netns::Early::finish);
    // None made ahead: the init makes it (CLONE_NEWNET) and brings up lo.
    let own_netns = sandbox.new_netns && netns.is_none();
    // Two stacks in one allocation: the init's (lower half) and the tool's.
    let mut stacks = vec![0u8; 2 * STACK_SIZE];
    let tool_stack_top = stacks.as_mut_ptr_range().end.cast();
    let netns_fd = netns.as_ref().map_or(-1, |f| f.as_raw_fd());
    let side = CallSide {
        stdio: wires.stdio(cmd),
        explain: cmd.explain,
        call,
        call_in: None,
    };
    let plan = child_plan(side, sandbox, wires, broker, netns_fd, tool_stack_top);
    let flags = namespace_flags(namespace_free, own_netns);
    drop(paths_memory);
    let init = spawn_init(&plan, &mut stacks[..STACK_SIZE], flags)
        .map_err(|e| clone_error(e, namespace_free))?;
    Ok((init, (plan, stacks)))
}

/// What the plan holds of the call: its strings and stdio (a sandbox
/// prepared ahead has neither yet, and receives them on `call_in`).
pub(in crate::spawn) struct CallSide {
    pub stdio: [RawFd; 3],
    pub explain: bool,
    pub call: Invocation,
    pub call_in: Option<(CallIn, CallInStorage)>,
}

/// What a [`CallIn`]'s pointers point into.
pub(in crate::spawn) type CallInStorage = (Vec<u8>, Vec<*const libc::c_char>);

/// Everything the init and the tool need, in memory they will have a copy
/// of: pointers into the call's strings and programs (owned by the plan),
/// the descriptors to keep, the steps of the root.
pub(in crate::spawn) fn child_plan(
    side: CallSide,
    sandbox: Confinement<'_>,
    wires: &Wires,
    broker: &Broker,
    netns_fd: RawFd,
    tool_stack_top: *mut libc::c_void,
) -> ChildPlan {
    let CallSide {
        stdio,
        explain,
        call,
        call_in,
    } = side;
    let landlock_fd = sandbox.landlock.fd.as_ref().map_or(-1, |f| f.as_raw_fd());
    let exec_gate_fd = broker.exec_gate.as_ref().map_or(-1, |(r, _)| r.as_raw_fd());
    let call_fd = call_in.as_ref().map_or(-1, |(c, _)| c.fd);
    let mut keep_fds = keep_fds(stdio, wires, broker, [landlock_fd, netns_fd, exec_gate_fd]);
    if call_fd >= 0 {
        keep_fds.push(call_fd);
        keep_fds.sort_unstable();
    }
    let (call_in, call_in_storage) = call_in.unzip();
    ChildPlan {
        program: call.program,
        argv: null_terminated(&call.argv),
        envp: null_terminated(&call.env),
        cwd: call.cwd,
        stdio,
        report_fd: wires.report.1.as_raw_fd(),
        status_fd: wires.status.1.as_raw_fd(),
        keep_fds,
        tool_stack_top,
        landlock_fd,
        // LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON (ABI 7): off unless asked,
        // so routine refusals do not flood an operator's audit log.
        landlock_flags: match explain && ll::kernel_abi() >= 7 {
            true => 1 << 1,
            false => 0,
        },
        fresh_rules: sandbox.fresh_rules,
        seccomp: sandbox
            .seccomp
            .iter()
            .map(|p| libc::sock_fprog {
                len: p.len() as u16,
                filter: p.as_ptr() as *mut libc::sock_filter,
            })
            .collect(),
        rlimits: sandbox.rlimits,
        proc_writes: id_maps(sandbox.namespace_free),
        steps: sandbox.steps,
        loopback: (sandbox.new_netns && netns_fd < 0).then(loopback_request),
        netns_fd,
        listeners: broker.proxy.as_ref().and_then(proxy::Setup::listen_plan),
        cap_last: cap_last(),
        reset_signals: signals_to_reset(),
        namespace_free: sandbox.namespace_free,
        exec_gate_fd,
        call_in,
        _storage: PlanStorage {
            _argv: call.argv,
            _env: call.env,
            _seccomp: sandbox.seccomp,
            _landlock: sandbox.landlock.fd,
            _call_in: call_in_storage.unwrap_or_default(),
        },
    }
}

/// Pointers to `strings`, then a null pointer (`execve`'s argv and envp).
fn null_terminated(strings: &[std::ffi::CString]) -> Vec<*const libc::c_char> {
    let mut ptrs: Vec<*const libc::c_char> = strings.iter().map(|c| c.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    ptrs
}

/// The descriptors the init keeps (sorted): the child's stdio, its ends
/// of the report and status pipes, the proxy's channel, and `more` (-1:
/// none). It closes every other one first.
fn keep_fds(stdio: [RawFd; 3], wires: &Wires, broker: &Broker, more: [RawFd; 3]) -> Vec<RawFd> {
    let mut keep_fds: Vec<RawFd> = stdio.to_vec();
    keep_fds.extend([wires.report.1.as_raw_fd(), wires.status.1.as_raw_fd()]);
    keep_fds.extend(more);
    keep_fds.extend(broker.proxy.as_ref().and_then(proxy::Setup::child_fd));
    keep_fds.retain(|fd| *fd >= 0);
    keep_fds.sort_unstable();
    keep_fds.dedup();
    keep_fds
}

/// Not root: the init's user namespace maps us to ourselves (and
/// `setgroups` is denied, as an unprivileged map requires).
pub(in crate::spawn) fn id_maps(namespace_free: bool) -> Vec<ProcWrite> {
    let (uid, gid) = (nix::unistd::geteuid(), nix::unistd::getegid());
    if uid.is_root() || namespace_free {
        return Vec::new();
    }
    vec![
        ProcWrite {
            path: c"/proc/self/setgroups".into(),
            content: b"deny".to_vec(),
        },
        ProcWrite {
            path: c"/proc/self/uid_map".into(),
            content: format!("{uid} {uid} 1").into_bytes(),
        },
        ProcWrite {
            path: c"/proc/self/gid_map".into(),
            content: format!("{gid} {gid} 1").into_bytes(),
        },
    ]
}

/// The namespaces the init is cloned into; none namespace-free.
pub(in crate::spawn) fn namespace_flags(namespace_free: bool, own_netns: bool) -> libc::c_int {
    if namespace_free {
        return 0;
    }
    // UTS too: a root tool without capabilities still passes the owner
    // check of /proc/sys/kernel/hostname.
    let mut flags =
        libc::CLONE_NEWPID | libc::CLONE_NEWNS | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS;
    if own_netns {
        flags |= libc::CLONE_NEWNET;
    }
    if !nix::unistd::geteuid().is_root() {
        flags |= libc::CLONE_NEWUSER;
    }
    flags
}

/// The kernel's highest capability, read once (it never changes while
/// the kernel runs).
pub(in crate::spawn) fn cap_last() -> libc::c_int {
    static CAP_LAST: std::sync::OnceLock<libc::c_int> = std::sync::OnceLock::new();
    *CAP_LAST.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(40)
    })
}

/// The signals whose disposition the init resets (bit `sig - 1`): those
/// this process ignores or catches now (`SigIgn`, `SigCgt` of
/// `/proc/self/status`, one read instead of a query per signal), and
/// those toolcage's runtime may catch from another thread after this read
/// (tokio's SIGCHLD and the termination signals, std's SIGPIPE, SIGSEGV,
/// SIGBUS). Unreadable: every signal, as before the set was computed.
/// SIGKILL and SIGSTOP cannot be changed and are left out.
pub(in crate::spawn) fn signals_to_reset() -> u64 {
    const RUNTIME: [libc::c_int; 8] = [
        libc::SIGHUP,
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGCHLD,
        libc::SIGPIPE,
        libc::SIGSEGV,
        libc::SIGBUS,
        libc::SIGQUIT,
    ];
    let bit = |sig: libc::c_int| 1u64 << (sig - 1);
    let all = match libc::SIGRTMAX() {
        n if n >= 64 => u64::MAX,
        n => (1u64 << n) - 1,
    };
    let current = read_signal_masks().unwrap_or(all);
    let set = RUNTIME.iter().fold(current, |m, &s| m | bit(s));
    set & all & !bit(libc::SIGKILL) & !bit(libc::SIGSTOP)
}

/// `SigIgn | SigCgt` of `/proc/self/status` (dispositions are the
/// process's, shared by its threads); `None` when it cannot be read or
/// parsed.
fn read_signal_masks() -> Option<u64> {
    use std::io::Read;
    let mut buf = [0u8; 4096];
    let mut file = std::fs::File::open("/proc/self/status").ok()?;
    let mut len = 0;
    while len < buf.len() {
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        }
    }
    let text = std::str::from_utf8(&buf[..len]).ok()?;
    let mask = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
    };
    Some(mask("SigIgn:")? | mask("SigCgt:")?)
}

/// clone(2) the namespace init with `flags`, like fork: it runs in its own
/// copy of our memory, so nothing the parent frees or unwinds can reach it.
pub(in crate::spawn) fn spawn_init(
    plan: &ChildPlan,
    stack: &mut [u8],
    flags: libc::c_int,
) -> std::io::Result<InitGuard> {
    let mut pidfd: libc::c_int = -1;
    let top = stack.as_mut_ptr_range().end.cast::<libc::c_void>();
    // Blocking all signals keeps our handlers from running in the child
    // before it resets them.
    let old = block_all_signals();
    // SAFETY: no CLONE_VM: the child runs `init_main` in its own copy of
    // our memory, on `stack` (whose end `top` is; the stack grows down),
    // with `arg` pointing at the plan's copy. The kernel writes a new
    // descriptor into `pidfd`.
    let pid = unsafe {
        libc::clone(
            init_main,
            top,
            flags | libc::CLONE_PIDFD | libc::SIGCHLD,
            plan as *const ChildPlan as *mut libc::c_void,
            &mut pidfd as *mut libc::c_int,
        )
    };
    let err = std::io::Error::last_os_error();
    restore_signal_mask(&old);
    if pid < 0 {
        return Err(err);
    }
    // SAFETY: CLONE_PIDFD stored a new descriptor that we now own.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    Ok(InitGuard {
        pid,
        pidfd,
        reaped: false,
        group: None,
        adopted: false,
        // Its own PID namespace: as its PID 1 it reports last.
        namespaced: flags & libc::CLONE_NEWPID != 0,
    })
}

/// Block every signal on this thread; the mask it had.
fn block_all_signals() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data (all-zero is a valid value);
    // sigfillset and pthread_sigmask write only into these two.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        old
    }
}

/// Put back the mask [`block_all_signals`] returned.
fn restore_signal_mask(old: &libc::sigset_t) {
    // SAFETY: pthread_sigmask only reads `old`, a mask it filled itself.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, old, std::ptr::null_mut()) };
}

/// Why the init could not be cloned: namespaces refused (try without
/// them), or a failure of its own.
pub(in crate::spawn) fn clone_error(source: std::io::Error, namespace_free: bool) -> RunError {
    match source.raw_os_error() {
        Some(errno) if !namespace_free && probe::blocks_namespaces(errno) => Unavailable(errno),
        _ => Failed(SandboxError::Setup {
            stage: match namespace_free {
                true => "clone",
                false => "clone (namespaces)",
            },
            source,
        }),
    }
}

/// Wait until the tool has exec'd (the report pipe closes on exec) or
/// setup failed; then reap the init and name the step that failed.
/// Namespace-free, the init first sends the tool's process group.
pub(in crate::spawn) fn await_exec(
    init: &mut InitGuard,
    report: &OwnedFd,
    namespace_free: bool,
    aftercare: &Aftercare,
) -> Result<(), SandboxError> {
    let mut msg = [0u8; 12];
    let n = read_full(report, &mut msg);
    let word = |i: usize| <[u8; 4]>::try_from(&msg[i..i + 4]).unwrap_or_default();
    if n == 4 && namespace_free {
        init.group = Some(i32::from_ne_bytes(word(0)));
    }
    if n < 8 {
        return Ok(());
    }
    let stage = u32::from_ne_bytes(word(0));
    let errno = i32::from_ne_bytes(word(4));
    let step = match n {
        12 => u32::from_ne_bytes(word(8)),
        _ => u32::MAX,
    };
    init.wait(true);
    let stage = Stage::from_u32(stage).unwrap_or(Stage::Exec);
    Err(setup_error(
        stage,
        errno,
        step,
        &aftercare.root.what,
        &aftercare.name,
    ))
}

/// Name the step that failed in the child.
fn setup_error(
    stage: Stage,
    errno: i32,
    step: u32,
    what: &[String],
    argv0: &OsStr,
) -> SandboxError {
    let source = std::io::Error::from_raw_os_error(errno);
    let name = argv0.to_string_lossy().into_owned();
    match (stage, errno) {
        (Stage::Exec, libc::ENOENT) => SandboxError::NotFound(name),
        (Stage::Exec, libc::EACCES) => SandboxError::CannotExecute {
            program: name,
            reason: "permission denied (is the program inside a read root of the policy?)".into(),
        },
        (Stage::Exec, _) => SandboxError::CannotExecute {
            program: name,
            reason: source.to_string(),
        },
        (Stage::Mount, _) if (step as usize) < what.len() => SandboxError::Setup {
            stage: stage.describe(),
            source: std::io::Error::new(
                source.kind(),
                format!("{}: {source}", what[step as usize]),
            ),
        },
        (stage, _) => SandboxError::Setup {
            stage: stage.describe(),
            source,
        },
    }
}

/// Read until `buf` is full or EOF; the number of bytes read.
fn read_full(fd: &OwnedFd, buf: &mut [u8]) -> usize {
    let mut n = 0;
    while n < buf.len() {
        match nix::unistd::read(fd, &mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => break,
        }
    }
    n
}
