//! A sandbox prepared ahead of its call ([`Ready`]; `pool.rs` keeps them):
//! phases 1 to 4 up to the seam (see the module), done before the call is
//! known, for a grant and the call's readable paths; the init waits in it
//! for its call (`child/init.rs`, `receive_call`). A call then costs what
//! is left: resolving its program and environment, sending them with its
//! stdio, the tool's own steps and exec.
//!
//! Single use: the init receives one call, and is torn down with it (or
//! killed unused when the pool discards it).

use super::super::child::{CallIn, ChildPlan};
use super::super::command::Command;
use super::super::env::SearchPath;
use super::super::error::SandboxError;
use super::super::init_guard::InitGuard;
use super::super::mode::IsolationMode;
use super::super::outcome::Outcome;
use super::super::report::EnforcementReport;
use super::super::supervise::CancelToken;
use super::after;
use super::prepare::{self, Aftercare, Invocation, RootRecord, Wires};
use super::start::{
    self, Broker, CallInStorage, CallSide, RunError, STACK_SIZE, Started, await_exec, clone_error,
    namespace_flags, spawn_init,
};
use crate::{rootfs, runtime_dir};
use nix::sys::socket::{
    AddressFamily, ControlMessage, MsgFlags, SockFlag, SockType, sendmsg, socketpair,
};
use std::collections::BTreeMap;
use std::ffi::{CString, OsString};
use std::io::IoSlice;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Instant;
use toolcage_policy::{Grant, Network, canon};

/// The most a call sent to a prepared sandbox may weigh: its strings'
/// bytes, and their number. A bigger call starts cold.
const CALL_BYTES: usize = 256 * 1024;
const CALL_STRINGS: usize = 4096;

/// A sandbox made ahead for one grant, its init waiting for the call.
/// Dropped unused, the init is killed and reaped ([`InitGuard`]).
pub(crate) struct Ready {
    init: InitGuard,
    /// Read ends: the setup report (EOF at exec), the tool's status.
    report: OwnedFd,
    status: OwnedFd,
    /// Our end of the socket the init receives its call on.
    call: OwnedFd,
    enforcement: EnforcementReport,
    root: RootRecord,
    /// What the root was built from, as it was: checked again at take.
    sources: Vec<(PathBuf, Option<(u64, u64)>)>,
    /// `PATH` filtered when the root was built.
    search_path: SearchPath,
    /// Freed after the init is gone (see [`Started`]); `None` when the
    /// pool's maker process made it (`maker.rs`: it keeps them).
    after_the_init: Option<KeptForInit>,
}

/// A ready sandbox as it travels from the pool's maker process to
/// toolcage (`maker.rs`): its init's descriptors, and what toolcage needs
/// to check and finish its call.
pub(crate) struct HandedOver {
    pub pid: i32,
    /// The init's pidfd, the read ends of the setup report and the status
    /// pipe, toolcage's end of the call socket.
    pub fds: [OwnedFd; 4],
    pub about: About,
}

/// The data half of [`HandedOver`].
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct About {
    pub enforcement: EnforcementReport,
    pub what: Vec<String>,
    pub missing_protected: Vec<PathBuf>,
    pub protected_links: Vec<(PathBuf, PathBuf)>,
    pub watched: Vec<(PathBuf, (u64, u64))>,
    pub sources: Vec<(PathBuf, Option<(u64, u64)>)>,
    pub search_path: SearchPath,
}

/// The plan and the stacks of a waiting init, kept only so that their
/// memory outlives it.
struct KeptForInit((ChildPlan, Vec<u8>));

// SAFETY: the plan's raw pointers point into memory the plan itself owns
// (its strings, programs and buffers), and toolcage never reads or writes
// through them: the init uses its own copy. Moving the owner to another
// thread (the pool's filler makes it, a call's thread takes it) moves
// nothing they point to.
unsafe impl Send for KeptForInit {}

/// Whether a call can run in a prepared sandbox at all: captured or given
/// stdio (not toolcage's own), no `--explain` (its audit tap is set up
/// before the init), no domain proxy (it serves one call's namespace from
/// toolcage's process, set up with the init), with namespaces.
pub(crate) fn eligible(grant: &Grant, cmd: &Command) -> bool {
    !cmd.inherit_stdio
        && !cmd.tee_stderr
        && !cmd.explain
        && !matches!(grant.network, Network::Domains(_))
        && super::super::namespace_free::namespaces_failed().is_none()
}

/// Prepare a sandbox for `grant` and the call's readable paths
/// `extra_read`, up to the seam; the init is left waiting for its call.
pub(crate) fn make(grant: &Grant, extra_read: &[PathBuf]) -> Result<Ready, RunError> {
    if matches!(grant.network, Network::Domains(_)) {
        return Err(RunError::Failed(SandboxError::Prepare(
            "domain mode is not prepared ahead".into(),
        )));
    }
    let runtime = runtime_dir::get()?;
    let sources = sources(grant, extra_read);
    let memory = canon::remember();
    let search_path = SearchPath::ahead(grant);
    let (sandbox, enforcement, root) = prepare::confine(
        grant,
        extra_read,
        IsolationMode::Namespaces,
        None,
        runtime,
        None,
    )?;
    let wires = Wires::ahead()?;
    let (ours, theirs) = socketpair(
        AddressFamily::Unix,
        SockType::Stream,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|e| SandboxError::Prepare(format!("socketpair: {e}")))?;
    let own_netns = sandbox.new_netns;
    let mut stacks = vec![0u8; 2 * STACK_SIZE];
    let tool_stack_top = stacks.as_mut_ptr_range().end.cast();
    let side = CallSide {
        stdio: [-1; 3],
        explain: false,
        call: Invocation {
            program: CString::default(),
            cwd: CString::default(),
            argv: Vec::new(),
            env: Vec::new(),
        },
        call_in: Some(call_in(theirs.as_raw_fd())),
    };
    let plan = start::child_plan(
        side,
        sandbox,
        &wires,
        &Broker::default(),
        -1,
        tool_stack_top,
    );
    drop(memory);
    let init = spawn_init(
        &plan,
        &mut stacks[..STACK_SIZE],
        namespace_flags(false, own_netns),
    )
    .map_err(|e| clone_error(e, false))?;
    // The init has its own copies.
    drop((theirs, wires.report.1, wires.status.1));
    Ok(Ready {
        init,
        report: wires.report.0,
        status: wires.status.0,
        call: ours,
        enforcement,
        root,
        sources,
        search_path,
        after_the_init: Some(KeptForInit((plan, stacks))),
    })
}

/// The memory the init reads its call into, allocated now (the init gets
/// its own copy at the clone; untouched pages cost nothing).
fn call_in(fd: RawFd) -> (CallIn, CallInStorage) {
    let mut buf = vec![0u8; CALL_BYTES];
    let mut ptrs = vec![std::ptr::null::<libc::c_char>(); CALL_STRINGS];
    let c = CallIn {
        fd,
        buf: buf.as_mut_ptr(),
        cap: buf.len(),
        ptrs: ptrs.as_mut_ptr(),
        ptrs_cap: ptrs.len(),
    };
    (c, (buf, ptrs))
}

/// The paths a root is built from (project, roots, protected and denied
/// paths, the call's readable paths) with their device and inode now.
fn sources(grant: &Grant, extra_read: &[PathBuf]) -> Vec<(PathBuf, Option<(u64, u64)>)> {
    std::iter::once(&grant.project)
        .chain(&grant.read)
        .chain(&grant.write)
        .chain(&grant.protected)
        .chain(&grant.denied)
        .chain(extra_read)
        .map(|p| (p.clone(), dev_ino(p)))
        .collect()
}

fn dev_ino(p: &Path) -> Option<(u64, u64)> {
    p.symlink_metadata().ok().map(|m| (m.dev(), m.ino()))
}

impl Ready {
    /// Still what a cold start would build now: the init alive and
    /// waiting, and every path its root was built from the same file (a
    /// root replaced, a protected path created or changed since: the
    /// sandbox is discarded, and the call starts cold).
    pub(crate) fn fresh(&self) -> bool {
        let mut pfd = libc::pollfd {
            fd: self.init.pidfd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll on one stack struct naming a pidfd we own; POLLIN
        // means the init has exited.
        let exited = unsafe { libc::poll(&mut pfd, 1, 0) } != 0;
        !exited
            && self.sources.iter().all(|(p, id)| dev_ino(p) == *id)
            && rootfs::replaced(&self.root.watched).is_empty()
            && self
                .root
                .missing_protected
                .iter()
                .all(|p| p.symlink_metadata().is_err())
            && self
                .root
                .protected_links
                .iter()
                .all(|(p, target)| std::fs::read_link(p).ok().as_ref() == Some(target))
    }

    /// The process id of the waiting init (for the pool's accounting).
    pub(crate) fn pid(&self) -> i32 {
        self.init.pid
    }

    /// In the pool's maker: what toolcage needs of this sandbox, the init
    /// left running (the maker stays its parent and reaps it). The maker
    /// keeps the plan and the stacks (`KeptForInit`) until then.
    pub(crate) fn hand_over(self) -> Result<(HandedOver, impl Sized), SandboxError> {
        let Ready {
            mut init,
            report,
            status,
            call,
            enforcement,
            root,
            sources,
            search_path,
            after_the_init,
        } = self;
        if root.snapshot.is_some() {
            return Err(SandboxError::Prepare(
                "a namespace-free sandbox is not prepared ahead".into(),
            ));
        }
        // Not killed when this guard goes: the init is toolcage's now.
        init.reaped = true;
        let pidfd = init
            .pidfd
            .try_clone()
            .map_err(|e| SandboxError::Prepare(format!("pidfd: {e}")))?;
        let about = About {
            enforcement,
            what: root.what,
            missing_protected: root.missing_protected,
            protected_links: root.protected_links,
            watched: root
                .watched
                .into_iter()
                .map(|w| (w.path, w.dev_ino))
                .collect(),
            sources,
            search_path,
        };
        let handed = HandedOver {
            pid: init.pid,
            fds: [pidfd, report, status, call],
            about,
        };
        Ok((handed, (init, after_the_init)))
    }

    /// In toolcage: a sandbox the pool's maker process made and handed
    /// over. Its init is not our child ([`InitGuard::adopted`]).
    pub(crate) fn adopt(h: HandedOver) -> Ready {
        let [pidfd, report, status, call] = h.fds;
        let a = h.about;
        Ready {
            init: InitGuard {
                pid: h.pid,
                pidfd,
                reaped: false,
                group: None,
                adopted: true,
                namespaced: true,
            },
            report,
            status,
            call,
            enforcement: a.enforcement,
            root: RootRecord {
                what: a.what,
                snapshot: None,
                missing_protected: a.missing_protected,
                protected_links: a.protected_links,
                watched: a
                    .watched
                    .into_iter()
                    .map(|(path, dev_ino)| rootfs::Watched { path, dev_ino })
                    .collect(),
            },
            sources: a.sources,
            search_path: a.search_path,
            after_the_init: None,
        }
    }

    /// Run `cmd` in this sandbox: the rest of phase 2 (the call's half),
    /// sent to the init, then phases 4 (the wait for exec) to 6.
    /// `Err(None)`: the call does not fit (see [`CALL_BYTES`]); it starts
    /// cold, and this sandbox is discarded.
    pub(crate) fn run(
        self,
        grant: &Grant,
        cmd: &Command,
        cancel: Option<&CancelToken>,
    ) -> Result<Outcome, Option<RunError>> {
        let start = Instant::now();
        let argv0 = cmd
            .argv
            .first()
            .ok_or_else(|| SandboxError::Prepare("no command given".into()))
            .map_err(|e| Some(e.into()))?;
        let memory = canon::remember();
        let (env, cwd, program) =
            prepare::resolve_call(grant, cmd, argv0, None, Some(&self.search_path))
                .map_err(|e| Some(e.into()))?;
        drop(memory);
        let payload = payload(&program, &cwd, &cmd.argv, &env).map_err(|e| Some(e.into()))?;
        if payload.bytes.len() > CALL_BYTES || payload.strings > CALL_STRINGS - 2 {
            return Err(None);
        }
        let Ready {
            init,
            report,
            status,
            call,
            enforcement,
            root,
            sources: _,
            search_path: _,
            after_the_init,
        } = self;
        let (child_stdio, ours) = stdio(cmd).map_err(|e| Some(e.into()))?;
        let sent = send(&call, &payload, child_stdio.fds());
        drop((call, child_stdio));
        let mut started = Started {
            init,
            stdio: ours,
            status,
            proxy: None,
            audit_tap: None,
            call_pids: None,
            teed: None,
            aftercare: Aftercare {
                report: enforcement,
                name: argv0.clone(),
                cwd,
                host_tmp: None,
                root,
            },
            _after_the_init: after_the_init.map(|k| k.0),
        };
        // A setup that failed in the init says so here, whether or not
        // the call could be sent.
        await_exec(&mut started.init, &report, false, &started.aftercare)
            .map_err(|e| Some(e.into()))?;
        if let Err(e) = sent {
            return Err(Some(RunError::Failed(SandboxError::Setup {
                stage: "sending the call to a sandbox prepared ahead",
                source: e.into(),
            })));
        }
        let finished = after::supervise(grant, cmd, cancel, &mut started);
        Ok(after::after_call(grant, started, finished, start))
    }
}

/// The call's strings as the init reads them (see `child::CallIn`).
struct Payload {
    bytes: Vec<u8>,
    argc: u32,
    envc: u32,
    strings: usize,
}

fn payload(
    program: &Path,
    cwd: &Path,
    argv: &[OsString],
    env: &BTreeMap<String, String>,
) -> Result<Payload, SandboxError> {
    let mut bytes = Vec::new();
    let mut push = |s: &[u8]| -> Result<(), SandboxError> {
        if s.contains(&0) {
            return Err(SandboxError::Prepare(format!(
                "{}: contains a NUL byte",
                String::from_utf8_lossy(s)
            )));
        }
        bytes.extend_from_slice(s);
        bytes.push(0);
        Ok(())
    };
    push(program.as_os_str().as_bytes())?;
    push(cwd.as_os_str().as_bytes())?;
    for a in argv {
        push(a.as_bytes())?;
    }
    for (k, v) in env {
        push(format!("{k}={v}").as_bytes())?;
    }
    Ok(Payload {
        bytes,
        argc: argv.len() as u32,
        envc: env.len() as u32,
        strings: argv.len() + env.len(),
    })
}

/// The child's stdio: the caller's descriptors, or pipes (ours returned).
enum ChildStdio {
    Given([RawFd; 3]),
    Pipes([OwnedFd; 3]),
}

impl ChildStdio {
    fn fds(&self) -> [RawFd; 3] {
        match self {
            ChildStdio::Given(fds) => *fds,
            ChildStdio::Pipes(p) => [p[0].as_raw_fd(), p[1].as_raw_fd(), p[2].as_raw_fd()],
        }
    }
}

fn stdio(cmd: &Command) -> Result<(ChildStdio, Option<[OwnedFd; 3]>), SandboxError> {
    if let Some(fds) = cmd.stdio_fds {
        return Ok((ChildStdio::Given(fds), None));
    }
    let (stdin_r, stdin_w) = prepare::pipe()?;
    let (stdout_r, stdout_w) = prepare::pipe()?;
    let (stderr_r, stderr_w) = prepare::pipe()?;
    Ok((
        ChildStdio::Pipes([stdin_r, stdout_w, stderr_w]),
        Some([stdin_w, stdout_r, stderr_r]),
    ))
}

/// The header with the stdio, then the strings; never SIGPIPE.
fn send(call: &OwnedFd, payload: &Payload, stdio: [RawFd; 3]) -> nix::Result<()> {
    let header: [u32; 3] = [payload.bytes.len() as u32, payload.argc, payload.envc];
    let header: Vec<u8> = header.iter().flat_map(|v| v.to_ne_bytes()).collect();
    let rights = [ControlMessage::ScmRights(&stdio)];
    let n = sendmsg::<()>(
        call.as_raw_fd(),
        &[IoSlice::new(&header)],
        &rights,
        MsgFlags::MSG_NOSIGNAL,
        None,
    )?;
    if n != header.len() {
        return Err(nix::errno::Errno::EPIPE);
    }
    let mut at = 0;
    while at < payload.bytes.len() {
        match nix::sys::socket::send(
            call.as_fd().as_raw_fd(),
            &payload.bytes[at..],
            MsgFlags::MSG_NOSIGNAL,
        ) {
            Ok(n) => at += n,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
