//! Preparing and starting a sandboxed child: everything that allocates
//! happens here, before `clone(2)`.

use super::child::{ChildPlan, FreshRule, ProcWrite, Stage, init_main};
use super::landlock::{self as ll};
use super::quarantine;
use super::report::{EnforcementReport, LandlockStatus};
use super::rootfs::{self, FreshAccess};
use super::supervise::{CancelToken, Running, supervise};
use super::{Command, Outcome, SandboxError, build_env, program, runtime_dir, seccomp};
use crate::policy::{Enforcement, Grant, Network};
use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

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

/// The grant's rlimits, each clamped to the current hard limit (a lower
/// limit set by the operator, say `ulimit -n 512` in a CI container, is
/// kept rather than failing the call or, with CAP_SYS_RESOURCE, raised).
/// Returns the limits and a note for each clamp.
fn rlimits(grant: &Grant) -> (Vec<(libc::__rlimit_resource_t, libc::rlimit)>, Vec<String>) {
    let l = &grant.limits;
    let mut out = vec![(
        libc::RLIMIT_CORE,
        libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        },
    )];
    let mut notes = Vec::new();
    for (res, name, val) in [
        (libc::RLIMIT_AS, "address_space", l.address_space),
        (libc::RLIMIT_CPU, "cpu", l.cpu_seconds),
        (libc::RLIMIT_NPROC, "processes", l.processes),
        (libc::RLIMIT_FSIZE, "file_size", l.file_size),
        (libc::RLIMIT_NOFILE, "open_files", l.open_files),
    ] {
        let Some(want) = val else { continue };
        let mut cur = libc::rlimit {
            rlim_cur: 0,
            rlim_max: libc::RLIM_INFINITY,
        };
        // SAFETY: getrlimit writes into our stack struct.
        unsafe { libc::getrlimit(res, &mut cur) };
        let v = if cur.rlim_max != libc::RLIM_INFINITY && want > cur.rlim_max {
            notes.push(format!(
                "limits.{name}: {want} lowered to the inherited hard limit {}",
                cur.rlim_max
            ));
            cur.rlim_max
        } else {
            want
        };
        out.push((
            res,
            libc::rlimit {
                rlim_cur: v,
                rlim_max: v,
            },
        ));
    }
    (out, notes)
}

/// Decide whether the enforcement we can get is enough for the grant.
fn check_enforcement(grant: &Grant, report: &EnforcementReport) -> Result<(), SandboxError> {
    match grant.enforcement {
        Enforcement::Degraded => Ok(()),
        Enforcement::Standard => {
            if report.landlock.status == LandlockStatus::NotEnforced {
                Err(SandboxError::NotEnforceable(
                    "Landlock is not available on this kernel".into(),
                ))
            } else if report.degraded.iter().any(|d| d.contains("TCP port rules")) {
                Err(SandboxError::NotEnforceable(report.degraded.join("; ")))
            } else {
                Ok(())
            }
        }
        Enforcement::Strict => {
            if report.degraded.is_empty() && report.landlock.status != LandlockStatus::NotEnforced {
                Ok(())
            } else if report.landlock.status == LandlockStatus::NotEnforced {
                Err(SandboxError::NotEnforceable(
                    "Landlock is not available on this kernel (strict enforcement)".into(),
                ))
            } else {
                Err(SandboxError::NotEnforceable(format!(
                    "strict enforcement refuses degraded features: {}",
                    report.degraded.join("; ")
                )))
            }
        }
    }
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
    })
}

/// The init of a running call, from `clone` until it is reaped. Dropping it
/// unreaped (an error or a panic on the way) kills the call's whole process
/// tree through the pidfd and reaps the init, so no tool outlives its call.
pub struct InitGuard {
    pub pid: libc::pid_t,
    pub pidfd: OwnedFd,
    pub reaped: bool,
}

impl Drop for InitGuard {
    fn drop(&mut self) {
        if self.reaped {
            return;
        }
        // SAFETY: pidfd_send_signal on our own pidfd, then reaping our own child.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.pidfd.as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0u32,
            );
            let mut status = 0;
            libc::waitpid(self.pid, &mut status, 0);
        }
        self.reaped = true;
    }
}

/// toolcage's own directories that no call may see, wherever a root would
/// show them: the runtime directory (the staging mount point).
fn hidden_dirs(runtime: &runtime_dir::RuntimeDir) -> Vec<PathBuf> {
    vec![runtime.base.clone()]
}

/// Files a call with network needs that may live outside the grant:
/// `/etc/resolv.conf` is often a link into `/run`.
fn network_files(grant: &Grant) -> Vec<PathBuf> {
    if grant.network == Network::Off {
        return Vec::new();
    }
    match Path::new("/etc/resolv.conf").canonicalize() {
        Ok(real) if !real.starts_with("/etc") => vec![real],
        _ => Vec::new(),
    }
}

fn loopback_request() -> libc::ifreq {
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
/// `tokio::task::spawn_blocking` from async code.
pub fn run(
    grant: &Grant,
    cmd: &Command,
    cancel: Option<&CancelToken>,
) -> Result<Outcome, SandboxError> {
    let start = Instant::now();
    let argv0 = cmd
        .argv
        .first()
        .ok_or_else(|| SandboxError::Prepare("no command given".into()))?;
    let runtime = runtime_dir::get()?;
    let env = build_env(grant, std::env::vars(), &cmd.env);
    let program = program::resolve(
        argv0,
        &grant.project,
        env.get("PATH").map_or("", |s| s),
        |p| program::grant_can_read(grant, &cmd.extra_read, p),
    )?;

    let mut extra_read = cmd.extra_read.clone();
    extra_read.extend(network_files(grant));
    let prepared =
        ll::prepare(grant, &extra_read).map_err(|e| SandboxError::Prepare(e.to_string()))?;
    let (rlimits, rlimit_notes) = rlimits(grant);
    let new_netns = grant.network == Network::Off;
    let mut report = EnforcementReport {
        landlock: prepared.report.clone(),
        seccomp: true,
        capabilities_dropped: true,
        no_new_privs: true,
        pid_namespace: true,
        mount_namespace: true,
        constructed_root: true,
        ipc_namespace: true,
        network_namespace: new_netns,
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

    let filters = seccomp::compile(&grant.network)
        .map_err(|e| SandboxError::Prepare(format!("seccomp: {e}")))?;
    let main_prog: Vec<libc::sock_filter> = filters
        .main
        .iter()
        .map(|f| libc::sock_filter {
            code: f.code,
            jt: f.jt,
            jf: f.jf,
            k: f.k,
        })
        .collect();
    let programs = vec![filters.guard, main_prog];
    let fprogs: Vec<libc::sock_fprog> = programs
        .iter()
        .map(|p| libc::sock_fprog {
            len: p.len() as u16,
            filter: p.as_ptr() as *mut libc::sock_filter,
        })
        .collect();

    let root = rootfs::plan(grant, &extra_read, &runtime.root, &hidden_dirs(runtime))?;
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
    let pipes = if cmd.inherit_stdio {
        None
    } else {
        let (stdin_r, stdin_w) = pipe()?;
        let (stdout_r, stdout_w) = pipe()?;
        let (stderr_r, stderr_w) = pipe()?;
        Some(([stdin_r, stdout_w, stderr_w], [stdin_w, stdout_r, stderr_r]))
    };
    let stdio = match &pipes {
        Some((child_ends, _)) => [
            child_ends[0].as_raw_fd(),
            child_ends[1].as_raw_fd(),
            child_ends[2].as_raw_fd(),
        ],
        None => [0, 1, 2],
    };
    let (report_r, report_w) = pipe()?;
    let (status_r, status_w) = pipe()?;
    let landlock_fd = prepared.fd.as_ref().map_or(-1, |f| f.as_raw_fd());
    let mut keep_fds: Vec<RawFd> = stdio.to_vec();
    keep_fds.extend([report_w.as_raw_fd(), status_w.as_raw_fd(), landlock_fd]);
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
    let proc_writes = if rootless {
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
        cwd: cstring(grant.project.as_os_str())?,
        stdio,
        report_fd: report_w.as_raw_fd(),
        status_fd: status_w.as_raw_fd(),
        keep_fds,
        tool_stack_top,
        landlock_fd,
        fresh_rules,
        seccomp: fprogs,
        rlimits,
        proc_writes,
        steps: root.steps,
        loopback: new_netns.then(loopback_request),
        cap_last: cap_last(),
        sigrtmax: libc::SIGRTMAX(),
        _storage: (argv_store, env_store, programs),
    };
    // UTS too: a root tool without capabilities still passes the owner
    // check of /proc/sys/kernel/hostname.
    let mut ns_flags =
        libc::CLONE_NEWPID | libc::CLONE_NEWNS | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS;
    if new_netns {
        ns_flags |= libc::CLONE_NEWNET;
    }
    if rootless {
        ns_flags |= libc::CLONE_NEWUSER;
    }
    let mut init = clone_init(&plan, &mut stacks[..STACK_SIZE], ns_flags).map_err(|source| {
        // Name the cause and its fix, not only the errno.
        let errno = source.raw_os_error().unwrap_or(0);
        let source = if super::probe::blocks_namespaces(errno) {
            std::io::Error::new(source.kind(), super::probe::classify(errno).message())
        } else {
            source
        };
        SandboxError::Setup {
            stage: "clone (namespaces)",
            source,
        }
    })?;
    // The init has its own copy of all of this.
    drop((plan, stacks, report_w, status_w));
    let parent_ends = pipes.map(|(child_ends, parent_ends)| {
        drop(child_ends);
        parent_ends
    });

    // The tool has exec'd (the report pipe closed on exec) or setup failed.
    let mut msg = [0u8; 12];
    let n = read_full(&report_r, &mut msg);
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
        return Err(setup_error(stage, errno, step, &root.what, argv0));
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
    let (created_protected, quarantined) = quarantine::after_call(
        root.missing_protected,
        root.protected_links,
        rootfs::replaced(&root.watched),
    );
    Ok(Outcome {
        exit: finished.exit,
        stdout: finished.stdout,
        stderr: finished.stderr,
        duration: start.elapsed(),
        enforcement: report,
        created_protected,
        quarantined,
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
