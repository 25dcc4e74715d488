//! Preparing and starting a sandboxed child: everything that allocates
//! happens here, before `clone(2)`.

use super::child::{ChildPlan, ProcWrite, Stage, child_main};
use super::landlock::{self as ll};
use super::report::{EnforcementReport, LandlockStatus};
use super::supervise::{CancelToken, Running, supervise};
use super::{Command, Outcome, SandboxError, build_env, mounts, seccomp};
use crate::policy::{Enforcement, Grant};
use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Per-call scratch space: `<base>/tmp` is the call's TMPDIR, `<base>/mask`
/// an unreadable empty file used to cover denied files. Removed on drop.
struct Scratch {
    base: PathBuf,
}

impl Scratch {
    fn new() -> Result<Scratch, SandboxError> {
        let dir = std::env::temp_dir().join("toolcage-XXXXXX");
        let base = nix::unistd::mkdtemp(&dir)
            .map_err(|e| SandboxError::Prepare(format!("cannot create a private tmp dir: {e}")))?;
        let scratch = Scratch { base };
        let io = |e: std::io::Error| SandboxError::Prepare(format!("private tmp dir: {e}"));
        std::fs::create_dir(scratch.tmp()).map_err(io)?;
        std::fs::write(scratch.mask(), b"").map_err(io)?;
        std::fs::set_permissions(scratch.mask(), std::fs::Permissions::from_mode(0o000))
            .map_err(io)?;
        Ok(scratch)
    }
    fn tmp(&self) -> PathBuf {
        self.base.join("tmp")
    }
    fn mask(&self) -> PathBuf {
        self.base.join("mask")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

fn cstring(s: &OsStr) -> Result<CString, SandboxError> {
    CString::new(s.as_bytes())
        .map_err(|_| SandboxError::Prepare(format!("{}: contains a NUL byte", s.display())))
}

fn is_executable_file(p: &Path) -> bool {
    p.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Resolve the program: `/` in the name means a path (relative to the
/// project); otherwise search the sandbox's PATH.
fn resolve_program(argv0: &OsStr, project: &Path, path_var: &str) -> Result<PathBuf, SandboxError> {
    let name = argv0.to_string_lossy().into_owned();
    if name.is_empty() {
        return Err(SandboxError::NotFound(name));
    }
    if argv0.as_bytes().contains(&b'/') {
        let p = project.join(argv0);
        return match p.metadata() {
            Err(_) => Err(SandboxError::NotFound(name)),
            Ok(m) if m.is_dir() => Err(SandboxError::CannotExecute {
                program: name,
                reason: "is a directory".into(),
            }),
            Ok(_) if !is_executable_file(&p) => Err(SandboxError::CannotExecute {
                program: name,
                reason: "permission denied (not executable: chmod +x)".into(),
            }),
            Ok(_) => Ok(p),
        };
    }
    path_var
        .split(':')
        .filter(|d| !d.is_empty())
        .map(|d| project.join(d).join(argv0))
        .find(|p| is_executable_file(p))
        .ok_or(SandboxError::NotFound(name))
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

/// clone(2) the child with `flags`; waits (vfork) until it has exec'd or failed.
fn clone_child(plan: &ChildPlan, flags: libc::c_int) -> std::io::Result<Spawned> {
    const STACK: usize = 256 * 1024;
    let mut stack = vec![0u8; STACK];
    let mut pidfd: libc::c_int = -1;
    // SAFETY: the stack is ours and outlives the child's use of it (VFORK:
    // we are suspended until execve or exit); `plan` likewise. Blocking all
    // signals keeps our handlers from running on the child's stack.
    let pid = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let top = stack.as_mut_ptr().add(STACK).cast::<libc::c_void>();
        let pid = libc::clone(
            child_main,
            top,
            flags | libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::SIGCHLD,
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
    drop(stack);
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
    let scratch = grant.private_tmp.then(Scratch::new).transpose()?;
    let scratch_tmp = scratch.as_ref().map(|s| s.tmp());
    let env = build_env(grant, std::env::vars(), &cmd.env, scratch_tmp.as_deref());
    let program = resolve_program(argv0, &grant.project, env.get("PATH").map_or("", |s| s))?;

    let use_mount_ns = mounts::needed(grant);
    let mut extra_write: Vec<&Path> = Vec::new();
    if let Some(t) = &scratch_tmp {
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

    let (mount_calls, missing_protected, protected_links) =
        match scratch.as_ref().filter(|_| use_mount_ns) {
            Some(s) => {
                let plan = mounts::plan(grant, &s.mask());
                (plan.calls, plan.missing_protected, plan.protected_links)
            }
            None => (Vec::new(), Vec::new(), Vec::new()),
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

    let (stdin_r, stdin_w) = pipe()?;
    let (stdout_r, stdout_w) = pipe()?;
    let (stderr_r, stderr_w) = pipe()?;
    let (report_r, report_w) = pipe()?;

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
        stdio: [
            stdin_r.as_raw_fd(),
            stdout_w.as_raw_fd(),
            stderr_w.as_raw_fd(),
        ],
        report_fd: report_w.as_raw_fd(),
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
    let spawned = clone_child(&plan, ns_flags).map_err(|source| SandboxError::Setup {
        stage: "clone (namespaces)",
        source,
    })?;
    drop((stdin_r, stdout_w, stderr_w, report_w));
    drop(plan);

    // The child has exec'd (the report pipe closed on exec) or failed.
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
            stdin: Some(stdin_w),
            stdout: stdout_r,
            stderr: stderr_r,
            pid_namespace: true,
        },
        &cmd.stdin,
        grant.output,
        grant.timeout,
        grant.kill_grace,
        cancel,
    );
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
    drop(scratch);
    Ok(Outcome {
        exit: finished.exit,
        stdout: finished.stdout,
        stderr: finished.stderr,
        duration: start.elapsed(),
        enforcement: report,
        created_protected,
    })
}
