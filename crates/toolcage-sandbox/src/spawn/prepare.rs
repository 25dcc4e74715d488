//! Phase 2: everything the call needs that allocates, made before
//! `clone(2)`: [`Invocation`], what the call brings (program, arguments,
//! environment, working directory); [`Confinement`], what the grant and
//! the mode decide (Landlock, seccomp, rlimits, the root's plan, the
//! network namespace); [`Wires`], the pipes between toolcage and the call;
//! [`Aftercare`], what toolcage keeps to explain a failed setup and to
//! check after the call.

use super::super::child::FreshRule;
use super::super::command::Command;
use super::super::env::{SearchPath, build_env_with};
use super::super::error::SandboxError;
use super::super::landlock::{self as ll, Layout};
use super::super::limits::{check_enforcement, rlimits};
use super::super::mode::{IsolationMode, ModeDecision};
use super::super::namespace_free::{HostTmp, retarget_private_tmp};
use super::super::report::{EnforcementReport, LandlockStatus};
use super::super::rootfs::{self, FreshAccess, RootPlan, Watched};
use super::super::steps::Step;
use crate::{netns, program, proxy, restore};
use crate::{runtime_dir, seccomp};
use std::collections::BTreeMap;
use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use toolcage_policy::{DomainPolicy, Grant, Network, canon};

/// What [`prepare`] made.
pub(in crate::spawn) struct Prepared<'g> {
    pub call: Invocation,
    pub sandbox: Confinement<'g>,
    /// The pipes between toolcage and the call.
    pub wires: Wires,
    pub aftercare: Aftercare,
    /// From here to the clone the same few dozen paths (PATH entries, the
    /// grant's roots, denied paths) are canonicalized again and again, and
    /// nothing toolcage looks at is created or replaced by it: one memory,
    /// dropped just before the clone.
    pub paths_memory: canon::Memory,
}

/// What the call itself brings, as the child needs it.
pub(in crate::spawn) struct Invocation {
    pub program: CString,
    pub cwd: CString,
    pub argv: Vec<CString>,
    /// `KEY=value` strings.
    pub env: Vec<CString>,
}

/// What the grant and the mode decide (all of it but the call's own
/// readable paths, `Command::extra_read`, in the ruleset and the root).
pub(in crate::spawn) struct Confinement<'g> {
    pub namespace_free: bool,
    /// The Landlock ruleset (its descriptor), and the rights the tool
    /// grants itself beneath the filesystems mounted inside the call.
    pub landlock: ll::Prepared,
    pub fresh_rules: Vec<FreshRule>,
    /// The BPF programs, in the order the tool installs them.
    pub seccomp: Vec<Vec<libc::sock_filter>>,
    pub rlimits: Vec<(libc::__rlimit_resource_t, libc::rlimit)>,
    /// Building the constructed root (none namespace-free).
    pub steps: Vec<Step>,
    /// Domain mode (namespaces only): the policy the proxy enforces.
    pub domains: Option<&'g DomainPolicy>,
    /// The call gets its own network namespace.
    pub new_netns: bool,
    /// That namespace, being made on a helper thread (root only).
    pub early_netns: Option<netns::Early>,
}

/// What toolcage keeps for itself: to explain a failed setup, to report,
/// and to check and undo after the call.
pub(in crate::spawn) struct Aftercare {
    pub report: EnforcementReport,
    /// The program as the command named it.
    pub name: OsString,
    pub cwd: PathBuf,
    /// Namespace-free: the directory that is the call's `/tmp`.
    pub host_tmp: Option<HostTmp>,
    pub root: RootRecord,
}

/// What toolcage keeps of the root's plan: the names of its steps (for
/// errors) and the protected paths as they were before the call.
pub(in crate::spawn) struct RootRecord {
    pub what: Vec<String>,
    /// Namespace-free: the protected and denied paths, saved.
    pub snapshot: Option<restore::Snapshot>,
    pub missing_protected: Vec<PathBuf>,
    pub protected_links: Vec<(PathBuf, PathBuf)>,
    pub watched: Vec<Watched>,
}

/// The pipes between toolcage and the call: (read end, write end) each.
pub(in crate::spawn) struct Wires {
    /// Captured stdio: the child's ends (stdin's read, stdout's and
    /// stderr's write), then ours.
    pub pipes: Option<([OwnedFd; 3], [OwnedFd; 3])>,
    /// `exec --explain`: the tool's stderr, copied to ours as it comes.
    pub tee: Option<(OwnedFd, OwnedFd)>,
    /// The setup report: stage and errno on failure, EOF at exec
    /// (namespace-free, the tool's process group first).
    pub report: (OwnedFd, OwnedFd),
    /// The tool's wait status, from the init.
    pub status: (OwnedFd, OwnedFd),
}

impl Wires {
    /// A sandbox prepared ahead: its stdio comes with its call.
    pub fn ahead() -> Result<Wires, SandboxError> {
        Ok(Wires {
            pipes: None,
            tee: None,
            report: pipe()?,
            status: pipe()?,
        })
    }

    fn new(cmd: &Command) -> Result<Wires, SandboxError> {
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
        Ok(Wires {
            pipes,
            tee,
            report: pipe()?,
            status: pipe()?,
        })
    }

    /// The child's stdin, stdout and stderr.
    pub fn stdio(&self, cmd: &Command) -> [RawFd; 3] {
        match (&self.pipes, &self.tee) {
            (Some((child_ends, _)), _) => [
                child_ends[0].as_raw_fd(),
                child_ends[1].as_raw_fd(),
                child_ends[2].as_raw_fd(),
            ],
            (None, Some((_, w))) => [0, 1, w.as_raw_fd()],
            (None, None) => cmd.stdio_fds.unwrap_or([0, 1, 2]),
        }
    }
}

/// Phase 2 (see the module). `decision` is phase 1's, for namespace-free.
pub(in crate::spawn) fn prepare<'g>(
    grant: &'g Grant,
    cmd: &Command,
    isolation: IsolationMode,
    decision: Option<ModeDecision>,
) -> Result<Prepared<'g>, SandboxError> {
    let namespace_free = isolation == IsolationMode::NamespaceFree;
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
    let paths_memory = canon::remember();
    let (env, cwd, program) = resolve_call(grant, cmd, argv0, host_tmp.as_ref(), None)?;
    let (sandbox, report, root) = confine(
        grant,
        &cmd.extra_read,
        isolation,
        decision,
        runtime,
        host_tmp.as_ref(),
    )?;
    let call = Invocation {
        argv: cmd
            .argv
            .iter()
            .map(|a| cstring(a))
            .collect::<Result<_, _>>()?,
        env: env_strings(&env)?,
        program: cstring(program.as_os_str())?,
        cwd: cstring(cwd.as_os_str())?,
    };
    Ok(Prepared {
        call,
        sandbox: Confinement {
            early_netns,
            ..sandbox
        },
        wires: Wires::new(cmd)?,
        aftercare: Aftercare {
            report,
            name: argv0.clone(),
            cwd,
            host_tmp,
            root,
        },
        paths_memory,
    })
}

/// The confinement the grant and the mode decide (see [`Confinement`]),
/// what it will be reported as (refused when that is less than the grant's
/// `enforcement` accepts), and what toolcage keeps of the root's plan.
pub(in crate::spawn) fn confine<'g>(
    grant: &'g Grant,
    extra_read: &[PathBuf],
    isolation: IsolationMode,
    decision: Option<ModeDecision>,
    runtime: &runtime_dir::RuntimeDir,
    host_tmp: Option<&HostTmp>,
) -> Result<(Confinement<'g>, EnforcementReport, RootRecord), SandboxError> {
    let namespace_free = isolation == IsolationMode::NamespaceFree;
    let mut extra_read = extra_read.to_vec();
    extra_read.extend(network_files(grant));
    let landlock = landlock(grant, &extra_read, runtime, namespace_free, host_tmp)?;
    let (rlimits, rlimit_notes) = rlimits(grant);
    let domains = match &grant.network {
        Network::Domains(d) if !namespace_free => Some(d),
        _ => None,
    };
    let new_netns = (grant.network == Network::Off || domains.is_some()) && !namespace_free;
    let report = enforcement(
        grant,
        isolation,
        decision,
        &landlock,
        rlimit_notes,
        new_netns,
    )?;
    let seccomp = seccomp_programs(&grant.network, namespace_free)?;
    let root = root_plan(
        grant,
        &extra_read,
        runtime,
        domains.is_some(),
        namespace_free,
    )?;
    let snapshot = snapshot(grant, namespace_free)?;
    let fresh_rules = fresh_rules(&root, &landlock);
    let sandbox = Confinement {
        namespace_free,
        landlock,
        fresh_rules,
        seccomp,
        rlimits,
        steps: root.steps,
        domains,
        new_netns,
        early_netns: None,
    };
    let record = RootRecord {
        what: root.what,
        snapshot,
        missing_protected: root.missing_protected,
        protected_links: root.protected_links,
        watched: root.watched,
    };
    Ok((sandbox, report, record))
}

/// The call's environment, working directory and program (resolved on the
/// sandbox's `PATH`, and readable under the grant); `known_path`: the
/// `PATH` a prepared sandbox filtered ahead.
pub(in crate::spawn) fn resolve_call(
    grant: &Grant,
    cmd: &Command,
    argv0: &OsStr,
    host_tmp: Option<&HostTmp>,
    known_path: Option<&SearchPath>,
) -> Result<(BTreeMap<String, String>, PathBuf, PathBuf), SandboxError> {
    let mut env = build_env_with(grant, std::env::vars(), &cmd.env, known_path);
    if let Some(tmp) = host_tmp {
        retarget_private_tmp(&mut env, &tmp.0);
    }
    let cwd = working_dir(grant, cmd)?;
    let program = program::resolve(argv0, &cwd, env.get("PATH").map_or("", |s| s), |p| {
        program::grant_can_read(grant, &cmd.extra_read, p)
    })?;
    Ok((env, cwd, program))
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

/// The Landlock ruleset for the constructed root, or namespace-free
/// (`host_tmp` is then `Some` if the grant has a private tmp) for the
/// host's own tree, around toolcage's hidden directories.
fn landlock(
    grant: &Grant,
    extra_read: &[PathBuf],
    runtime: &runtime_dir::RuntimeDir,
    namespace_free: bool,
    host_tmp: Option<&HostTmp>,
) -> Result<ll::Prepared, SandboxError> {
    let layout = if namespace_free {
        Layout::Host {
            private_tmp: host_tmp.map(|t| t.0.clone()),
            hidden: hidden_dirs(runtime),
        }
    } else {
        Layout::Constructed
    };
    ll::prepare(grant, extra_read, &layout).map_err(|e| SandboxError::Prepare(e.to_string()))
}

/// What the call will be told it runs under; refused when it is less than
/// the grant's `enforcement` accepts.
fn enforcement(
    grant: &Grant,
    isolation: IsolationMode,
    decision: Option<ModeDecision>,
    landlock: &ll::Prepared,
    rlimit_notes: Vec<String>,
    new_netns: bool,
) -> Result<EnforcementReport, SandboxError> {
    let namespace_free = isolation == IsolationMode::NamespaceFree;
    let mut report = EnforcementReport {
        mode: isolation,
        lacking: decision.map_or_else(Vec::new, |d| d.lacking),
        landlock: landlock.report.clone(),
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
        degraded: landlock
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
    Ok(report)
}

/// The seccomp programs, compiled: the grant's, and namespace-free the one
/// that keeps the tool's descendants in its process group.
fn seccomp_programs(
    network: &Network,
    namespace_free: bool,
) -> Result<Vec<Vec<libc::sock_filter>>, SandboxError> {
    let compiled =
        |p: Result<_, String>| p.map_err(|e| SandboxError::Prepare(format!("seccomp: {e}")));
    let mut programs = vec![compiled(seccomp::compile(network))?];
    if namespace_free {
        programs.push(compiled(seccomp::namespace_free_program(network))?);
    }
    Ok(programs)
}

/// The plan of the constructed root. Namespace-free only its record of
/// protected paths is used: nothing is mounted.
fn root_plan(
    grant: &Grant,
    extra_read: &[PathBuf],
    runtime: &runtime_dir::RuntimeDir,
    domains: bool,
    namespace_free: bool,
) -> Result<RootPlan, SandboxError> {
    let files = match domains {
        true => proxy::resolv_conf(&runtime.resolv_conf),
        false => Vec::new(),
    };
    let hidden = hidden_dirs(runtime);
    let mut root = rootfs::plan(grant, extra_read, &runtime.root, &hidden, &files)?;
    if namespace_free {
        root.steps.clear();
        root.what.clear();
        root.fresh_rules.clear();
    }
    Ok(root)
}

/// Namespace-free, Landlock cannot keep the protected and denied paths
/// read-only without a mount namespace: save them now, put them back after
/// the call. Refused when they cannot all be saved.
fn snapshot(
    grant: &Grant,
    namespace_free: bool,
) -> Result<Option<restore::Snapshot>, SandboxError> {
    if !namespace_free {
        return Ok(None);
    }
    let (protected, denied) = restore::guarded(grant);
    let snap = restore::Snapshot::take(&protected, &denied).map_err(|e| {
        SandboxError::Refused(format!(
            "namespace-free: {e} (fix: run where namespaces are available)"
        ))
    })?;
    Ok(Some(snap))
}

/// The rules the tool adds for the filesystems mounted inside the call,
/// with the rights the ruleset gives them.
fn fresh_rules(root: &RootPlan, landlock: &ll::Prepared) -> Vec<FreshRule> {
    root.fresh_rules
        .iter()
        .map(|(path, access)| FreshRule {
            path: path.clone(),
            access: match access {
                FreshAccess::Read => landlock.read_access,
                FreshAccess::All => landlock.all_access,
            },
        })
        .collect()
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

pub(in crate::spawn) fn cstring(s: &OsStr) -> Result<CString, SandboxError> {
    CString::new(s.as_bytes())
        .map_err(|_| SandboxError::Prepare(format!("{}: contains a NUL byte", s.display())))
}

/// The environment as `KEY=value` C strings.
pub(in crate::spawn) fn env_strings(
    env: &BTreeMap<String, String>,
) -> Result<Vec<CString>, SandboxError> {
    env.iter()
        .map(|(k, v)| cstring(&OsString::from(format!("{k}={v}"))))
        .collect()
}

pub(in crate::spawn) fn pipe() -> Result<(OwnedFd, OwnedFd), SandboxError> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| SandboxError::Prepare(format!("pipe: {e}")))
}
