//! Preparing and starting a sandboxed child: everything that allocates
//! happens here, before `clone(2)`.

use super::child::{ChildPlan, FreshRule, ProcWrite, Stage, init_main};
pub use super::init_guard::InitGuard;
use super::landlock::{self as ll, Layout};
use super::limits::{check_enforcement, rlimits};
use super::mode::{self, HostFeatures, IsolationMode};
use super::namespace_free::{
    HostTmp, NAMESPACES_FAILED, namespaces_failed, namespaces_unavailable_reason,
    retarget_private_tmp,
};
use super::report::{EnforcementReport, LandlockStatus};
use super::rootfs::{self, FreshAccess};
use super::supervise::{CancelToken, Running, supervise};
use super::{
    Command, Outcome, SandboxError, build_env, netns, program, proxy, runtime_dir, seccomp,
};
use super::{quarantine, restore};
use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Instant;
use toolcage_policy::{Grant, Network, canon};

fn cstring(s: &OsStr) -> Result<CString, SandboxError> {
    CString::new(s.as_bytes())
        .map_err(|_| SandboxError::Prepare(format!("{}: contains a NUL byte", s.display())))
}

fn pipe() -> Result<(OwnedFd, OwnedFd), SandboxError> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| SandboxError::Prepare(format!("pipe: {e}")))
}

fn cap_last() -> libc::c_int {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(40)
}

const STACK_SIZE: usize = 256 * 1024;

/// clone(2) the namespace init with `flags`, like fork: it runs in its own
/// copy of our memory, so nothing the parent frees or unwinds can reach it.
fn clone_init(
    plan: &ChildPlan,
    stack: &mut [u8],
    flags: libc::c_int,
) -> std::io::Result<InitGuard> {
    let mut pidfd: libc::c_int = -1;
    // SAFETY: the child gets a copy of the plan and the stack (no CLONE_VM).
    // Blocking all signals keeps our handlers from running in the child
    // before it resets them.
    let pid = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let top = stack.as_mut_ptr().add(stack.len()).cast::<libc::c_void>();
        let pid = libc::clone(
            init_main,
            top,
            flags | libc::CLONE_PIDFD | libc::SIGCHLD,
            plan as *const ChildPlan as *mut libc::c_void,
            &mut pidfd as *mut libc::c_int,
        );
        let err = std::io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if pid < 0 {
            return Err(err);
        }
        pid
    };
    // SAFETY: CLONE_PIDFD stored a new descriptor that we now own.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    Ok(InitGuard {
        pid,
        pidfd,
        reaped: false,
        group: None,
    })
}

/// Where the command runs: `cmd.cwd` when it is a directory inside the
/// project (what a constructed root shows of it), else the project.
fn working_dir(grant: &Grant, cmd: &Command) -> Result<PathBuf, SandboxError> {
    let Some(dir) = &cmd.cwd else {
        return Ok(grant.project.clone());
    };
    let real = canon::canonical(dir).unwrap_or_else(|_| dir.clone());
    if !real.starts_with(&grant.project) || !real.is_dir() {
        return Err(SandboxError::Prepare(format!(
            "working directory {} is not a directory inside the project {}",
            dir.display(),
            grant.project.display()
        )));
    }
    Ok(real)
}

/// toolcage's own directories that no call may see, wherever a root would
/// show them: the runtime directory (the staging mount point).
fn hidden_dirs(runtime: &runtime_dir::RuntimeDir) -> Vec<PathBuf> {
    vec![runtime.base.clone()]
}

/// Files a call with network needs that may live outside the grant:
/// `/etc/resolv.conf` is often a link into `/run`. (Domain mode binds its
/// own over it instead.)
fn network_files(grant: &Grant) -> Vec<PathBuf> {
    if matches!(grant.network, Network::Off | Network::Domains(_)) {
        return Vec::new();
    }
    match canon::canonical("/etc/resolv.conf") {
        Ok(real) if !real.starts_with("/etc") => vec![real],
        _ => Vec::new(),
    }
}

pub(super) fn loopback_request() -> libc::ifreq {
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    req
}

/// Name the step that failed in the constructed root.
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

/// Run `cmd` under `grant`. Blocks until the call is over; use
/// `tokio::task::spawn_blocking` from async code. Where the kernel or a
/// container runtime refuses namespaces, the call runs namespace-free if
/// the grant's policy accepts what that mode lacks (see [`mode`]).
pub fn run(
    grant: &Grant,
    cmd: &Command,
    cancel: Option<&CancelToken>,
) -> Result<Outcome, SandboxError> {
    if namespaces_failed().is_none() {
        match run_in(grant, cmd, cancel, IsolationMode::Namespaces) {
            Err(Unavailable(errno)) => NAMESPACES_FAILED.store(errno, Ordering::Relaxed),
            Ok(outcome) => return Ok(outcome),
            Err(Failed(e)) => return Err(e),
        }
    }
    match run_in(grant, cmd, cancel, IsolationMode::NamespaceFree) {
        Ok(outcome) => Ok(outcome),
        Err(Failed(e)) => Err(e),
        Err(Unavailable(errno)) => Err(SandboxError::Setup {
            stage: "clone",
            source: std::io::Error::from_raw_os_error(errno),
        }),
    }
}

/// Why `run_in` did not run the call.
enum RunError {
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

fn run_in(
    grant: &Grant,
    cmd: &Command,
    cancel: Option<&CancelToken>,
    isolation: IsolationMode,
) -> Result<Outcome, RunError> {
    let start = Instant::now();
    let namespace_free = isolation == IsolationMode::NamespaceFree;
    let decision = if namespace_free {
        let why = namespaces_unavailable_reason(namespaces_failed().unwrap_or(libc::EPERM));
        let d = mode::decide(
            grant,
            HostFeatures {
                namespaces: false,
                landlock_abi: ll::kernel_abi(),
            },
            &why,
        );
        if let Some(refusal) = d.refusal {
            return Err(Failed(SandboxError::Refused(refusal)));
        }
        Some(d)
    } else {
        None
    };
    let argv0 = cmd
        .argv
        .first()
        .ok_or_else(|| SandboxError::Prepare("no command given".into()))?;
    // As root the call's network namespace is made meanwhile (netns.rs).
    let early_netns =
        (grant.network == Network::Off && !namespace_free && nix::unistd::geteuid().is_root())
            .then(netns::ahead_or_start)
            .flatten();
    let runtime = runtime_dir::get()?;
    if namespace_free {
        runtime.refuse_in_write_roots(grant)?;
    }
    let host_tmp = match namespace_free && grant.private_tmp {
        true => Some(HostTmp::create(runtime)?),
        false => None,
    };
    // From here to the clone the same few dozen paths (PATH entries, the
    // grant's roots, denied paths) are canonicalized again and again, and
    // nothing toolcage looks at is created or replaced by it: one memory.
    let paths_memory = canon::remember();
    let mut env = build_env(grant, std::env::vars(), &cmd.env);
    if let Some(tmp) = &host_tmp {
        retarget_private_tmp(&mut env, &tmp.0);
    }
    let cwd = working_dir(grant, cmd)?;
    let program = program::resolve(argv0, &cwd, env.get("PATH").map_or("", |s| s), |p| {
        program::grant_can_read(grant, &cmd.extra_read, p)
    })?;

    let mut extra_read = cmd.extra_read.clone();
    extra_read.extend(network_files(grant));
    let layout = if namespace_free {
        Layout::Host {
            private_tmp: host_tmp.as_ref().map(|t| t.0.clone()),
            hidden: hidden_dirs(runtime),
        }
    } else {
        Layout::Constructed
    };
    let prepared = ll::prepare(grant, &extra_read, &layout)
        .map_err(|e| SandboxError::Prepare(e.to_string()))?;
    let (rlimits, rlimit_notes) = rlimits(grant);
    let domains = match &grant.network {
        Network::Domains(d) if !namespace_free => Some(d),
        _ => None,
    };
    let new_netns = (grant.network == Network::Off || domains.is_some()) && !namespace_free;
    let mut report = EnforcementReport {
        mode: isolation,
        lacking: decision
            .as_ref()
            .map_or_else(Vec::new, |d| d.lacking.clone()),
        landlock: prepared.report.clone(),
        seccomp: true,
        capabilities_dropped: true,
        no_new_privs: true,
        pid_namespace: !namespace_free,
        mount_namespace: !namespace_free,
        constructed_root: !namespace_free,
        ipc_namespace: !namespace_free,
        network_namespace: new_netns,
        tmp_bytes: (!namespace_free).then_some(grant.limits.tmp),
        rlimits: true,
        rlimits_clamped: rlimit_notes,
        degraded: prepared
            .report
            .missing
            .iter()
            .filter(|d| !d.compensated)
            .map(|d| d.feature.clone())
            .collect(),
    };
    if report.landlock.status == LandlockStatus::NotEnforced {
        report.degraded.insert(
            0,
            "landlock: not available (no filesystem or TCP restriction)".into(),
        );
    }
    check_enforcement(grant, &report)?;
    // Judged by the policy's namespace_free setting, not by `enforcement`.
    report.degraded.extend(
        report
            .lacking
            .iter()
            .filter(|l| l.compensated_by.is_none())
            .map(|l| format!("namespace-free: '{}' not confined (toolcage doctor)", l.id)),
    );

    let filter = seccomp::compile(&grant.network)
        .map_err(|e| SandboxError::Prepare(format!("seccomp: {e}")))?;
    let mut programs = vec![filter];
    if namespace_free {
        programs.push(
            seccomp::namespace_free_program(&grant.network)
                .map_err(|e| SandboxError::Prepare(format!("seccomp: {e}")))?,
        );
    }
    let fprogs: Vec<libc::sock_fprog> = programs
        .iter()
        .map(|p| libc::sock_fprog {
            len: p.len() as u16,
            filter: p.as_ptr() as *mut libc::sock_filter,
        })
        .collect();

    let files = domains.map_or_else(Vec::new, |_| proxy::resolv_conf(&runtime.resolv_conf));
    let hidden = hidden_dirs(runtime);
    let mut root = rootfs::plan(grant, &extra_read, &runtime.root, &hidden, &files)?;
    if namespace_free {
        // Only its record of protected paths is used: nothing is mounted.
        root.steps.clear();
        root.what.clear();
        root.fresh_rules.clear();
    }
    // Landlock cannot keep them read-only without a mount namespace: save
    // them now, put them back after the call.
    let snapshot = match namespace_free {
        true => {
            let (protected, denied) = restore::guarded(grant);
            let snap = restore::Snapshot::take(&protected, &denied).map_err(|e| {
                SandboxError::Refused(format!(
                    "namespace-free: {e} (fix: run where namespaces are available)"
                ))
            })?;
            Some(snap)
        }
        false => None,
    };
    let fresh_rules = root
        .fresh_rules
        .iter()
        .map(|(path, access)| FreshRule {
            path: path.clone(),
            access: match access {
                FreshAccess::Read => prepared.read_access,
                FreshAccess::All => prepared.all_access,
            },
        })
        .collect();

    let argv_store: Vec<CString> = cmd
        .argv
        .iter()
        .map(|a| cstring(a))
        .collect::<Result<_, _>>()?;
    let env_store: Vec<CString> = env
        .iter()
        .map(|(k, v)| cstring(&OsString::from(format!("{k}={v}"))))
        .collect::<Result<_, _>>()?;
    let mut argv: Vec<*const libc::c_char> = argv_store.iter().map(|c| c.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = env_store.iter().map(|c| c.as_ptr()).collect();
    envp.push(std::ptr::null());

    // Pipes for captured stdio: (child end, parent end) per stream.
    let pipes = if cmd.inherit_stdio || cmd.stdio_fds.is_some() {
        None
    } else {
        let (stdin_r, stdin_w) = pipe()?;
        let (stdout_r, stdout_w) = pipe()?;
        let (stderr_r, stderr_w) = pipe()?;
        Some(([stdin_r, stdout_w, stderr_w], [stdin_w, stdout_r, stderr_r]))
    };
    let tee = match cmd.inherit_stdio && cmd.tee_stderr {
        true => Some(pipe()?),
        false => None,
    };
    let stdio = match (&pipes, &tee) {
        (Some((child_ends, _)), _) => [
            child_ends[0].as_raw_fd(),
            child_ends[1].as_raw_fd(),
            child_ends[2].as_raw_fd(),
        ],
        (None, Some((_, w))) => [0, 1, w.as_raw_fd()],
        (None, None) => cmd.stdio_fds.unwrap_or([0, 1, 2]),
    };
    let (report_r, report_w) = pipe()?;
    let (status_r, status_w) = pipe()?;
    let landlock_fd = prepared.fd.as_ref().map_or(-1, |f| f.as_raw_fd());
    let proxy_setup = domains.map(proxy::Setup::new).transpose()?;
    // Subscribed before the call starts, so no record is missed.
    let audit_tap = cmd.explain.then(super::landlock_log::open).flatten();
    let exec_gate = audit_tap.as_ref().map(|_| pipe()).transpose()?;
    let exec_gate_fd = exec_gate.as_ref().map_or(-1, |(r, _)| r.as_raw_fd());
    let mut keep_fds: Vec<RawFd> = stdio.to_vec();
    let netns = early_netns.and_then(netns::Early::finish);
    let netns_fd = netns.as_ref().map_or(-1, |f| f.as_raw_fd());
    keep_fds.extend([
        report_w.as_raw_fd(),
        status_w.as_raw_fd(),
        landlock_fd,
        netns_fd,
        exec_gate_fd,
    ]);
    keep_fds.extend(proxy_setup.as_ref().and_then(proxy::Setup::child_fd));
    keep_fds.retain(|fd| *fd >= 0);
    keep_fds.sort_unstable();
    keep_fds.dedup();
    // Two stacks in one allocation: the init's (lower half) and the tool's.
    let mut stacks = vec![0u8; 2 * STACK_SIZE];
    // SAFETY: 2 * STACK_SIZE is the end of the allocation; the pointer is
    // only used (in the init's copy of it) as the top of the tool's stack.
    let tool_stack_top = unsafe { stacks.as_mut_ptr().add(2 * STACK_SIZE) }.cast();

    // SAFETY: geteuid/getegid cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let rootless = uid != 0;
    let proc_writes = if rootless && !namespace_free {
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
    } else {
        vec![]
    };

    let plan = ChildPlan {
        program: cstring(program.as_os_str())?,
        argv,
        envp,
        cwd: cstring(cwd.as_os_str())?,
        stdio,
        report_fd: report_w.as_raw_fd(),
        status_fd: status_w.as_raw_fd(),
        keep_fds,
        tool_stack_top,
        landlock_fd,
        // LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON (ABI 7): off unless asked,
        // so routine refusals do not flood an operator's audit log.
        landlock_flags: match cmd.explain && ll::kernel_abi() >= 7 {
            true => 1 << 1,
            false => 0,
        },
        fresh_rules,
        seccomp: fprogs,
        rlimits,
        proc_writes,
        steps: root.steps,
        loopback: (new_netns && netns.is_none()).then(loopback_request),
        netns_fd,
        listeners: proxy_setup.as_ref().and_then(proxy::Setup::listen_plan),
        cap_last: cap_last(),
        sigrtmax: libc::SIGRTMAX(),
        namespace_free,
        exec_gate_fd,
        _storage: (argv_store, env_store, programs),
    };
    // UTS too: a root tool without capabilities still passes the owner
    // check of /proc/sys/kernel/hostname.
    let mut ns_flags =
        libc::CLONE_NEWPID | libc::CLONE_NEWNS | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS;
    if new_netns && netns.is_none() {
        ns_flags |= libc::CLONE_NEWNET;
    }
    if rootless {
        ns_flags |= libc::CLONE_NEWUSER;
    }
    if namespace_free {
        ns_flags = 0;
    }
    drop(paths_memory);
    let mut init = match clone_init(&plan, &mut stacks[..STACK_SIZE], ns_flags) {
        Ok(init) => init,
        Err(e)
            if !namespace_free
                && e.raw_os_error()
                    .is_some_and(super::probe::blocks_namespaces) =>
        {
            return Err(Unavailable(e.raw_os_error().unwrap_or(libc::EPERM)));
        }
        Err(source) => {
            return Err(Failed(SandboxError::Setup {
                stage: if namespace_free {
                    "clone"
                } else {
                    "clone (namespaces)"
                },
                source,
            }));
        }
    };
    // The init has its own copy of all of this.
    let (exec_gate_r, exec_gate_w) = exec_gate.unzip();
    drop((report_w, status_w, netns, exec_gate_r));
    let call_pids = exec_gate_w.map(|w| super::landlock_log::name_the_tool(init.pid, &report_r, w));
    let teed = tee.map(|(r, w)| {
        drop(w);
        super::output::tee_to_stderr(r, 64 * 1024)
    });
    // The plan and the stacks are freed after the init is gone: until then
    // every page the allocator writes is copied (the init shares them).
    let _after_the_init = (plan, stacks);
    // Domain mode: serve the call's network as long as it runs (stopped
    // when dropped, on every way out).
    let proxy = proxy_setup.map(proxy::Setup::start).transpose()?.flatten();
    let parent_ends = pipes.map(|(child_ends, parent_ends)| {
        drop(child_ends);
        parent_ends
    });

    // The tool has exec'd (the report pipe closed on exec) or setup failed.
    let mut msg = [0u8; 12];
    let n = read_full(&report_r, &mut msg);
    if n == 4 && namespace_free {
        init.group = Some(i32::from_ne_bytes(msg[..4].try_into().unwrap()));
    }
    if n >= 8 {
        let stage = u32::from_ne_bytes(msg[..4].try_into().unwrap());
        let errno = i32::from_ne_bytes(msg[4..8].try_into().unwrap());
        let step = if n == 12 {
            u32::from_ne_bytes(msg[8..].try_into().unwrap())
        } else {
            u32::MAX
        };
        let mut status = 0;
        // SAFETY: reaping our own child, which has exited.
        unsafe { libc::waitpid(init.pid, &mut status, 0) };
        init.reaped = true;
        let stage = Stage::from_u32(stage).unwrap_or(Stage::Exec);
        return Err(Failed(setup_error(stage, errno, step, &root.what, argv0)));
    }

    if let Some(tx) = &cmd.report_to {
        let _ = tx.try_send(report.clone());
    }
    let finished = supervise(
        Running {
            init: &mut init,
            stdio: parent_ends,
            status: status_r,
        },
        &cmd.stdin,
        grant.output,
        grant.timeout,
        grant.kill_grace,
        cancel,
    );
    let mut denials = proxy.map_or_else(Vec::new, proxy::Proxy::finish);
    // The tool's own error messages, when toolcage has them (not under
    // `exec`, whose output goes straight to the terminal).
    let teed = teed.and_then(|t| t.join().ok()).unwrap_or_default();
    let text = format!("{}\n{}\n{teed}", finished.stderr.text, finished.stdout.text);
    let signal = match finished.exit {
        crate::Exit::Signal(s) => Some(s),
        _ => None,
    };
    denials.extend(super::inferred::cpu_limit(grant, signal, &text));
    if namespace_free {
        let own = host_tmp.as_ref().map(|t| t.0.as_path());
        denials.extend(super::inferred::host_tmp(grant, own, &text));
    }
    let exact = match (audit_tap, &call_pids) {
        (Some(t), Some(pids)) => t.finish(grant, pids),
        _ => Vec::new(),
    };
    denials.extend(
        super::inferred::from_output(grant, namespace_free, &cwd, &text)
            .into_iter()
            .filter(|d| !exact.iter().any(|e| e.target == d.target)),
    );
    denials.extend(exact);
    drop(host_tmp);
    let mut after = quarantine::AfterCall::default();
    let mut restored = Vec::new();
    let mut unchecked = Vec::new();
    // The trees first: what the call left inside them is removed, so a
    // missing protected path inside one is gone before the quarantine.
    if let Some(snapshot) = snapshot {
        let r = snapshot.restore();
        restored = r.restored;
        after.removed = r.removed;
        after.failed = r.unrestorable;
        unchecked = snapshot.incomplete;
    }
    quarantine::after_call(root.missing_protected, root.protected_links, &mut after);
    after.created.extend(quarantine::reachable(
        rootfs::replaced(&root.watched),
        &grant.write,
    ));
    Ok(Outcome {
        exit: finished.exit,
        stdout: finished.stdout,
        stderr: finished.stderr,
        duration: start.elapsed(),
        enforcement: report,
        created_protected: after.created,
        quarantined: after.quarantined,
        restored,
        removed: after.removed,
        unrestorable: after.failed,
        unchecked,
        denials,
    })
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
