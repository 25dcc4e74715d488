//! Running one call, as a list of phases ([`run_in`]), each a function of
//! its own file here; the child's side of it is `child/`.
//!
//! 1. [`decide`] the mode: namespace-free only where the grant's policy
//!    accepts what that mode lacks;
//! 2. [`prepare::prepare`] the call (program, arguments, environment,
//!    working directory), its confinement (Landlock, seccomp, rlimits, the
//!    plan of the root) and the pipes; everything that allocates happens
//!    before `clone(2)`;
//! 3. [`start::broker`]: what serves the call from toolcage's own process
//!    (the domain proxy and DNS stub, the Landlock audit tap), set up
//!    before the init exists and serving once it does;
//! 4. [`start::clone_init`]: the child's plan, `clone(2)`, the broker
//!    serving, then the wait until the tool has exec'd (or setup failed);
//! 5. [`after::supervise`]: stdin, output, timeout and cancellation until
//!    the tool's status;
//! 6. [`after::after_call`]: denials, protected paths restored or
//!    quarantined, the outcome.
//!
//! # The seam for sandboxes made ahead of their call
//!
//! What depends only on the grant and the mode is
//! [`prepare::Confinement`] (`prepare::confine`: Landlock, seccomp,
//! rlimits, the root's steps, the network namespace, the report) and, in
//! the child, the init's steps up to `open_listeners` (`child/init.rs`:
//! namespaces, id maps, the root, loopback, the proxy's listeners). What
//! depends on the call is [`prepare::Invocation`] (argv, environment,
//! working directory, program), its stdio, the broker's audit tap, and
//! from `receive_call` on the init's steps and all of the tool's.
//! [`ready`] stops the init at that line (`serve --pool`, `pool.rs`): the
//! call's half reaches it over a socket. What still crosses the seam, and
//! so is part of a prepared sandbox's key: the call's own readable paths
//! (`Command::extra_read`, the parameters file) are in the Landlock
//! ruleset and the root's plan. Not prepared ahead: namespace-free mode
//! (its private tmp and its snapshot of protected paths are made per
//! call), domain mode (the proxy is set up with the init), `--explain`
//! and toolcage's own stdio (`exec`).

mod after;
mod prepare;
pub(crate) mod ready;
pub(crate) mod start;

pub(crate) use start::RunError;
use start::RunError::{Failed, Unavailable};

use super::command::Command;
use super::error::SandboxError;
use super::landlock as ll;
use super::mode::{self, HostFeatures, IsolationMode, ModeDecision};
use super::namespace_free::{NAMESPACES_FAILED, namespaces_failed, namespaces_unavailable_reason};
use super::outcome::Outcome;
use super::supervise::CancelToken;
use std::sync::atomic::Ordering;
use std::time::Instant;
use toolcage_policy::Grant;

/// Run `cmd` under `grant`. Blocks until the call is over; use
/// `tokio::task::spawn_blocking` from async code. Where the kernel or a
/// container runtime refuses namespaces, the call runs namespace-free if
/// the grant's policy accepts what that mode lacks (see [`mode`]).
pub fn run(
    grant: &Grant,
    cmd: &Command,
    cancel: Option<&CancelToken>,
) -> Result<Outcome, SandboxError> {
    if let Some(ran) = run_ready(grant, cmd, cancel) {
        return ran;
    }
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

/// The call in a sandbox prepared ahead (`pool.rs`), when one is ready
/// for its grant; `None`: none is, or the call does not fit one (it starts
/// cold).
fn run_ready(
    grant: &Grant,
    cmd: &Command,
    cancel: Option<&CancelToken>,
) -> Option<Result<Outcome, SandboxError>> {
    if !ready::eligible(grant, cmd) {
        return None;
    }
    let (sandbox, _running) = super::pool::take(grant, &cmd.extra_read)?;
    match sandbox.run(grant, cmd, cancel) {
        Ok(outcome) => Some(Ok(outcome)),
        Err(Some(Failed(e))) => Some(Err(e)),
        Err(None | Some(Unavailable(_))) => None,
    }
}

/// One call in `isolation`, phase by phase (see the module).
fn run_in(
    grant: &Grant,
    cmd: &Command,
    cancel: Option<&CancelToken>,
    isolation: IsolationMode,
) -> Result<Outcome, RunError> {
    let start = Instant::now();
    let decision = decide(grant, isolation)?;
    let prepared = prepare::prepare(grant, cmd, isolation, decision)?;
    let broker = start::broker(cmd, prepared.sandbox.domains)?;
    let mut started = start::clone_init(cmd, prepared, broker)?;
    let finished = after::supervise(grant, cmd, cancel, &mut started);
    Ok(after::after_call(grant, started, finished, start))
}

/// Phase 1: whether `isolation` may run the call. With namespaces nothing
/// is lacking (`None`); namespace-free, what the mode lacks for this grant,
/// or a refusal when the grant's policy does not accept it.
fn decide(grant: &Grant, isolation: IsolationMode) -> Result<Option<ModeDecision>, SandboxError> {
    if isolation != IsolationMode::NamespaceFree {
        return Ok(None);
    }
    let why = namespaces_unavailable_reason(namespaces_failed().unwrap_or(libc::EPERM));
    let d = mode::decide(
        grant,
        HostFeatures {
            namespaces: false,
            landlock_abi: ll::kernel_abi(),
        },
        &why,
    );
    match d.refusal {
        Some(refusal) => Err(SandboxError::Refused(refusal)),
        None => Ok(Some(d)),
    }
}
