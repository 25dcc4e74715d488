//! How a call passes the gate, and why no call can leave it without an
//! audit record.
//!
//! [`admit`] asks a [`Gatekeeper`] for its [`Verdict`]. A denial is recorded
//! at once; an allowed call comes back as an [`Admission`], which is
//! `#[must_use]` and ends in exactly one final record:
//!
//! - [`Admission::start`] writes the `started` record right before the run
//!   (it survives a SIGKILL of toolcage);
//! - [`Admission::complete`] writes the final record (the run's outcome, or
//!   why it failed) and releases the tool's concurrency slot;
//! - [`Admission::not_run`] ends a call that was admitted but stopped before
//!   it ran (a signal, a client that cancelled while it waited);
//! - dropping an admission without ending it records it as abandoned, with
//!   the text its surface gave ([`Gone`]). The same holds while the verdict
//!   is pending: a call whose [`admit`] future is dropped (the client went
//!   away during approval) is recorded as refused before the gate.
//!
//! [`Gatekeeper`] is what [`admit`] needs from a gate: [`super::Gate`] is
//! the real one; tests install fakes that decide and record differently.

use super::approval::{ApprovalChannel, BoxFuture};
use super::verdict::{GateDenial, Permit, Verdict};
use super::{PreparedCall, SessionId};
use crate::discover::ToolSpec;
use crate::sandbox::Outcome;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// The text recorded for a call that was dropped before it ran ("the
/// client went away before the call ran", "the server stopped ..."):
/// asked when it happens, since the reason may be known only then.
pub(crate) type Gone = Arc<dyn Fn() -> String + Send + Sync>;

/// What a gate does: decide, and write records. Object-safe.
pub trait Gatekeeper: Send + Sync + 'static {
    /// Whether `call` may run, asking `channel` when approval is needed.
    /// Writes nothing; dropping the future withdraws the question.
    fn decide<'a>(
        &'a self,
        call: &'a PreparedCall,
        session: &'a SessionId,
        channel: &'a dyn ApprovalChannel,
    ) -> BoxFuture<'a, Verdict>;

    /// Append one record of a call that reached the gate. `Err`: it was not
    /// written and the policy (`[audit] fail_closed`) says the call must
    /// fail (not run, or its result withheld).
    fn record(&self, entry: &CallEvent<'_>) -> Result<(), String>;

    /// Append the record of a call refused before the gate (unknown tool,
    /// invalid arguments, a surface that refused it). `Err`: not written.
    fn reject(&self, rejected: &Rejected<'_>) -> Result<(), String>;

    /// `[audit] redact = true`: the surface's own log lines must not quote
    /// what a client sent either.
    fn redact(&self) -> bool {
        false
    }
}

/// One record of a call that reached the gate.
#[derive(Debug, Clone, Copy)]
pub struct CallEvent<'a> {
    pub call: &'a PreparedCall,
    pub session: &'a SessionId,
    pub verdict: &'a Verdict,
    pub ran: Ran<'a>,
    /// What stopped the call from outside (`SIGTERM to toolcage call`).
    pub stopped_by: Option<StoppedBy<'a>>,
}

/// What stopped a running call from outside, for its record.
#[derive(Debug, Clone, Copy)]
pub struct StoppedBy<'a> {
    /// `SIGTERM to toolcage call`.
    pub by: &'a str,
    /// The exit status toolcage returns for the call (128 + the signal it
    /// got), recorded instead of the outcome's own (130 for a cancelled
    /// run). `None`: the outcome's.
    pub exit_status: Option<i32>,
}

impl<'a> StoppedBy<'a> {
    /// Stopped by `by`, the status the outcome's own.
    pub(crate) fn by(by: &'a str) -> StoppedBy<'a> {
        StoppedBy {
            by,
            exit_status: None,
        }
    }
}

/// What happened after the gate.
#[derive(Debug, Clone, Copy)]
pub enum Ran<'a> {
    /// Denied, or ended without running: nothing ran.
    NotRun,
    /// Allowed and about to run: the `started` record.
    Starting,
    /// The tool ran (whatever its exit).
    Finished {
        outcome: &'a Outcome,
        is_error: bool,
        /// An upstream tool's content, by kind (`CallResult::content_kinds`).
        content: Option<&'a serde_json::Value>,
    },
    /// The call could not run, or was stopped before it did, after `after`.
    Failed { error: &'a str, after: Duration },
    /// Allowed by the gate, then refused by its runner before anything ran
    /// (an http tool whose grant has no network): recorded as denied, as
    /// its exit status (3) says.
    Refused {
        denial: &'a super::GateDenial,
        after: Duration,
    },
}

/// A call refused before it reached the gate.
#[derive(Debug, Clone, Copy)]
pub struct Rejected<'a> {
    /// The tool, when the name is known.
    pub tool: Option<&'a ToolSpec>,
    pub name: &'a str,
    pub args: &'a serde_json::Value,
    pub session: &'a SessionId,
    /// The machine code (`unknown_tool`, `invalid_arguments`, ...).
    pub reason: &'a str,
    pub message: &'a str,
}

/// A denied call: the denial, and whether its record was written.
#[derive(Debug)]
pub struct DeniedCall {
    pub denial: GateDenial,
    /// `Err`: the denial's record could not be written.
    pub recorded: Result<(), String>,
}

/// Ask `gate` whether `call` may run. Denied: recorded, `Err`. Allowed: an
/// [`Admission`] that must end in a record. From the moment this is called,
/// dropping the future (even before it is first polled) records the call
/// with `gone`'s text.
pub fn admit<'a>(
    gate: &Arc<dyn Gatekeeper>,
    call: Arc<PreparedCall>,
    session: &SessionId,
    channel: &'a dyn ApprovalChannel,
    gone: Gone,
) -> impl Future<Output = Result<Admission, DeniedCall>> + Send + 'a {
    let mut pending = Undecided {
        gate: gate.clone(),
        call,
        session: session.clone(),
        gone,
        armed: true,
    };
    async move {
        let verdict = pending
            .gate
            .decide(&pending.call, &pending.session, channel)
            .await;
        pending.armed = false;
        match verdict {
            Verdict::Denied(denial) => {
                let recorded = pending.gate.record(&CallEvent {
                    call: &pending.call,
                    session: &pending.session,
                    verdict: &Verdict::Denied(denial.clone()),
                    ran: Ran::NotRun,
                    stopped_by: None,
                });
                Err(DeniedCall { denial, recorded })
            }
            allowed => Ok(Admission {
                gate: pending.gate.clone(),
                call: pending.call.clone(),
                session: pending.session.clone(),
                verdict: allowed,
                gone: pending.gone.clone(),
                ended: false,
            }),
        }
    }
}

/// Records a call whose verdict never came (its future was dropped) as
/// refused before the gate.
struct Undecided {
    gate: Arc<dyn Gatekeeper>,
    call: Arc<PreparedCall>,
    session: SessionId,
    gone: Gone,
    armed: bool,
}

impl Drop for Undecided {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let name = &self.call.tool.name;
        let message = (self.gone)();
        let args = serde_json::Value::Object(self.call.args.clone());
        let rejected = Rejected {
            tool: Some(&self.call.tool),
            name,
            args: &args,
            session: &self.session,
            reason: "denied",
            message: &message,
        };
        if let Err(e) = self.gate.reject(&rejected) {
            tracing::error!("{name}: audit log: {e}");
        }
    }
}

/// An allowed call, from its verdict to its final record. Holds the tool's
/// concurrency slot until it ends.
#[must_use = "an admitted call must end with complete or not_run; dropped, it is recorded as abandoned"]
pub struct Admission {
    gate: Arc<dyn Gatekeeper>,
    call: Arc<PreparedCall>,
    session: SessionId,
    /// Always [`Verdict::Allowed`].
    verdict: Verdict,
    gone: Gone,
    ended: bool,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission")
            .field("tool", &self.call.tool.name)
            .field("verdict", &self.verdict)
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl Admission {
    /// The call admitted.
    pub(crate) fn call(&self) -> &Arc<PreparedCall> {
        &self.call
    }

    /// The permit: how the call got past approval, its call id.
    pub(crate) fn permit(&self) -> Option<&Permit> {
        match &self.verdict {
            Verdict::Allowed(p) => Some(p),
            Verdict::Denied(_) => None,
        }
    }

    fn write(&self, ran: Ran<'_>, stopped_by: Option<StoppedBy<'_>>) -> Result<(), String> {
        self.gate.record(&CallEvent {
            call: &self.call,
            session: &self.session,
            verdict: &self.verdict,
            ran,
            stopped_by,
        })
    }

    /// Write the `started` record, right before the run. `Err`: it could
    /// not be written and the call must not run; the call is then ended
    /// (recorded as not run, as far as the log takes it).
    pub fn start(&mut self) -> Result<(), String> {
        let written = self.write(Ran::Starting, None);
        if let Err(e) = &written {
            let why = format!("{}: not run: {e}", self.call.tool.name);
            let _ = self.write(
                Ran::Failed {
                    error: &why,
                    after: Duration::ZERO,
                },
                None,
            );
            self.ended = true;
        }
        written
    }

    /// Write the final record and release the slot. `Err`: the record was
    /// not written and the result must be withheld.
    pub fn complete(
        mut self,
        ran: Ran<'_>,
        stopped_by: Option<StoppedBy<'_>>,
    ) -> Result<(), String> {
        let written = self.write(ran, stopped_by);
        self.ended = true;
        written
    }

    /// End a call that was admitted but did not run: `why` is recorded as
    /// its error.
    pub(crate) fn not_run(self, why: &str, stopped_by: Option<&str>) -> Result<(), String> {
        let ran = Ran::Failed {
            error: why,
            after: Duration::ZERO,
        };
        self.complete(ran, stopped_by.map(StoppedBy::by))
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        let why = (self.gone)();
        let ran = Ran::Failed {
            error: &why,
            after: Duration::ZERO,
        };
        if let Err(e) = self.write(ran, None) {
            tracing::error!("{}: audit log: {e}", self.call.tool.name);
        }
    }
}
