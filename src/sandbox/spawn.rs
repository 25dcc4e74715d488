//! Preparing and starting a sandboxed child: everything that allocates
//! happens here, before `clone(2)`.

use super::child::{ChildPlan, ProcWrite, Stage, init_main};
use super::landlock::{self as ll};
use super::report::{EnforcementReport, LandlockStatus};
use super::supervise::{CancelToken, Running, supervise};
use super::{Command, Outcome, SandboxError, build_env, mounts, program, runtime_dir, seccomp};
use crate::policy::{Enforcement, Grant};
use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
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

fn rlimits(grant: &Grant) -> Vec<(libc::__rlimit_resource_t, libc::rlimit)> {
    let l = &grant.limits;
    let mut out = vec![(
        libc::RLIMIT_CORE,
        libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        },
    )];
    for (res, val) in [
        (libc::RLIMIT_AS, l.address_space),
        (libc::RLIMIT_CPU, l.cpu_seconds),
        (libc::RLIMIT_NPROC, l.processes),
        (libc::RLIMIT_FSIZE, l.file_size),
        (libc::RLIMIT_NOFILE, l.open_files),
    ] {
        if let Some(v) = val {
            out.push((
                res,
                libc::rlimit {
                    rlim_cur: v,
                    rlim_max: v,
                },
            ));
        }
    }
    out
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

struct Spawned {
    pid: libc::pid_t,
    pidfd: OwnedFd,
}

const STACK_SIZE: usize = 256 * 1024;

/// clone(2) the namespace init with `flags`. It shares our memory, so `plan`
/// and `stacks` must stay alive and untouched until it has been reaped.
fn clone_init(plan: &ChildPlan, stack: &mut [u8], flags: libc::c_int) -> std::io::Result<Spawned> {
    let mut pidfd: libc::c_int = -1;
    // SAFETY: the stack and the plan outlive the init (the caller keeps them
    // until it is reaped). Blocking all signals keeps our handlers from
    // running on the child's stack before it resets them.
    let pid = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let top = stack.as_mut_ptr().add(stack.len()).cast::<libc::c_void>();
        let pid = libc::clone(
            init_main,
            top,
            flags | libc::CLONE_VM | libc::CLONE_PIDFD | libc::SIGCHLD,
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
    Ok(Spawned { pid, pidfd })
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
    let private_tmp = grant.private_tmp.then_some(runtime.tmp.as_path());
    let env = build_env(grant, std::env::vars(), &cmd.env, private_tmp);
    let program = program::resolve(
        argv0,
        &grant.project,
        env.get("PATH").map_or("", |s| s),
        |p| program::grant_can_read(grant, &cmd.extra_read, p),
    )?;

    let use_mount_ns = mounts::needed(grant);
    let mut extra_write: Vec<&Path> = Vec::new();
    if let Some(t) = private_tmp {
        extra_write.push(t);
    }
    let mut read_grant;
    let grant_for_rules = if cmd.extra_read.is_empty() {
        grant
    } else {
        read_grant = grant.clone();
        read_grant.read.extend(cmd.extra_read.iter().cloned());
        &read_grant
    };
    let prepared = ll::prepare(grant_for_rules, &extra_write, true)
        .map_err(|e| SandboxError::Prepare(e.to_string()))?;
    let mut report = EnforcementReport {
        landlock: prepared.report.clone(),
        seccomp: true,
        capabilities_dropped: true,
        no_new_privs: true,
        pid_namespace: true,
        mount_namespace: use_mount_ns,
        rlimits: true,
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

    let (mount_calls, missing_protected, protected_links) = if use_mount_ns {
        let plan = mounts::plan(grant, &runtime.mask, private_tmp);
        (plan.calls, plan.missing_protected, plan.protected_links)
    } else {
        (Vec::new(), Vec::new(), Vec::new())
    };

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
    // Two stacks in one allocation: the init's (lower half) and the tool's.
    let mut stacks = vec![0u8; 2 * STACK_SIZE];
    // SAFETY: STACK_SIZE is within the allocation; the pointer is only used
    // by the tool process as the top of its stack.
    let tool_stack_top = unsafe { stacks.as_mut_ptr().add(2 * STACK_SIZE) }.cast();

    // SAFETY: geteuid/getegid cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let rootless = uid != 0;
    let proc_writes = if rootless {
        vec![
            ProcWrite {
                path: CString::new("/proc/self/setgroups").unwrap(),
                content: b"deny".to_vec(),
            },
            ProcWrite {
                path: CString::new("/proc/self/uid_map").unwrap(),
                content: format!("{uid} {uid} 1").into_bytes(),
            },
            ProcWrite {
                path: CString::new("/proc/self/gid_map").unwrap(),
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
        tool_stack_top,
        landlock_fd: prepared.fd.as_ref().map_or(-1, |f| f.as_raw_fd()),
        proc_access: if use_mount_ns && mounts::fresh_proc(grant) {
            prepared.proc_access
        } else {
            0
        },
        seccomp: fprogs,
        rlimits: rlimits(grant),
        proc_writes,
        mounts: mount_calls,
        cap_last: cap_last(),
        _storage: (argv_store, env_store, programs),
    };
    let mut ns_flags = libc::CLONE_NEWPID;
    if use_mount_ns {
        ns_flags |= libc::CLONE_NEWNS;
    }
    if rootless {
        ns_flags |= libc::CLONE_NEWUSER;
    }
    let spawned = clone_init(&plan, &mut stacks[..STACK_SIZE], ns_flags).map_err(|source| {
        SandboxError::Setup {
            stage: "clone (namespaces)",
            source,
        }
    })?;
    drop((report_w, status_w));
    let parent_ends = pipes.map(|(child_ends, parent_ends)| {
        drop(child_ends);
        parent_ends
    });

    // The tool has exec'd (the report pipe closed on exec) or setup failed.
    let mut msg = [0u8; 8];
    let n = nix::unistd::read(&report_r, &mut msg).unwrap_or(0);
    if n == 8 {
        let stage = u32::from_ne_bytes(msg[..4].try_into().unwrap());
        let errno = i32::from_ne_bytes(msg[4..].try_into().unwrap());
        let mut status = 0;
        // SAFETY: reaping our own child, which has exited.
        unsafe { libc::waitpid(spawned.pid, &mut status, 0) };
        let source = std::io::Error::from_raw_os_error(errno);
        let stage = Stage::from_u32(stage).unwrap_or(Stage::Exec);
        let name = argv0.to_string_lossy().into_owned();
        return Err(match (stage, errno) {
            (Stage::Exec, libc::ENOENT) => SandboxError::NotFound(name),
            (Stage::Exec, libc::EACCES) => SandboxError::CannotExecute {
                program: name,
                reason: "permission denied (is the program inside a read root of the policy?)"
                    .into(),
            },
            (Stage::Exec, _) => SandboxError::CannotExecute {
                program: name,
                reason: source.to_string(),
            },
            (stage, _) => SandboxError::Setup {
                stage: stage.describe(),
                source,
            },
        });
    }

    let finished = supervise(
        Running {
            pid: spawned.pid,
            pidfd: spawned.pidfd,
            stdio: parent_ends,
            status: status_r,
            pid_namespace: true,
        },
        &cmd.stdin,
        grant.output,
        grant.timeout,
        grant.kill_grace,
        cancel,
    );
    // The init has been reaped: nothing uses the plan or the stacks now.
    drop((plan, stacks));
    let mut created_protected: Vec<PathBuf> = missing_protected
        .into_iter()
        .filter(|p| p.symlink_metadata().is_ok())
        .collect();
    created_protected.extend(
        protected_links
            .into_iter()
            .filter(|(p, link)| std::fs::read_link(p).ok().as_ref() != Some(link))
            .map(|(p, _)| p),
    );
    Ok(Outcome {
        exit: finished.exit,
        stdout: finished.stdout,
        stderr: finished.stderr,
        duration: start.elapsed(),
        enforcement: report,
        created_protected,
    })
}
