//! The call pipeline, written once for every surface:
//!
//! look up → validate → resolve grant ([`Toolbox::prepare`]) → gate:
//! approval, rate limits, concurrency cap ([`crate::gate::admit`]) → the
//! surface's turn ([`Surface::turn`]) → the `started` record → encode → run
//! → format ([`Toolbox::execute`]) → the final record.
//!
//! Every call that enters leaves a record: refused before the gate
//! ([`crate::gate::Gatekeeper::reject`]), denied by it, or admitted (the
//! [`crate::gate::Admission`] records itself as abandoned if it is dropped
//! unfinished). The run and its final record happen inside the [`Job`] the
//! surface carries, so a surface that stops waiting (a client that went
//! away) cannot lose the record.
//!
//! A surface ([`Surface`]) provides what differs: who approves (the
//! terminal, MCP elicitation), what may stop a call before it runs (a
//! client's cancellation, a server stopping, a signal), when it may run
//! (the MCP server's fair run slots), and how the blocking run is carried
//! (inline for `toolcage call`; on a blocking thread with progress
//! notifications for the MCP server).

use super::definition;
use super::toolbox::Toolbox;
use super::{CallError, CallResult, PreparedCall};
use crate::gate::{
    Admission, Approval, ApprovalChannel, BoxFuture, DenyReason, GateDenial, Gatekeeper, Gone, Ran,
    Rejected, SessionId, StoppedBy, admit,
};
use crate::sandbox::{CancelToken, Exit};
use futures::future::{Either, select};
use serde_json::Value;
use std::sync::Arc;
use std::time::Instant;

/// Why a surface stopped a call before it ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotRunKind {
    /// Too many calls pending: refused at once.
    Busy,
    /// The client cancelled it.
    Cancelled,
    /// The server is stopping.
    Stopping,
    /// toolcage got a signal.
    Interrupted,
}

/// A call its surface stopped before it ran: what to tell the caller, and
/// what stopped it (for the record's `stopped_by`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotRun {
    pub kind: NotRunKind,
    pub text: String,
    pub stopped_by: Option<String>,
}

/// Held from a call's turn until its final record is written (the MCP
/// server's run slot and pending-call ticket).
pub type Turn = Box<dyn Send>;

/// The run and its final record: called by [`Surface::carry`] with the
/// call's cancel token.
pub type Job = Box<dyn FnOnce(Option<&CancelToken>) -> JobDone + Send>;

/// What a [`Job`] returns: the call's result, and whether its final record
/// was written.
pub struct JobDone {
    pub result: Result<CallResult, CallError>,
    pub recorded: Result<(), String>,
}

/// What a surface (the CLI, the MCP server) gives one call.
pub trait Surface: Send + Sync + 'static {
    fn session(&self) -> &SessionId;
    /// Who is asked when the call needs approval.
    fn approval(&self) -> &dyn ApprovalChannel;
    /// The call as prepared (its grant), for what the surface prints.
    fn prepared(&self, _call: &Arc<PreparedCall>) {}
    /// The scripts whose `ctx.tool` made this call, outermost first; none
    /// for a client's call.
    fn callers(&self) -> &[String] {
        &[]
    }
    /// Resolves when the call must stop before it is admitted (the client
    /// cancelled, the server is stopping); never, where nothing can stop
    /// it. Polled first: a call stopped already does not reach the gate.
    fn interrupted<'a>(&'a self, name: &'a str) -> BoxFuture<'a, NotRun>;
    /// Wait until the admitted call may run.
    fn turn<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Turn, NotRun>>;
    /// Run `job` with the call's cancel token, carrying cancellation and
    /// progress meanwhile, and return what it returned. `Err`: the job could
    /// not be run (it is dropped: its admission records the call).
    fn carry<'a>(&'a self, name: &'a str, job: Job) -> BoxFuture<'a, Result<JobDone, CallError>>;
    /// What stopped a run that ended cancelled (`SIGTERM to toolcage serve`),
    /// if it was stopped from outside the client.
    fn stopped_by(&self) -> Option<String>;
    /// The exit status toolcage returns for a run it cancelled because it
    /// got a signal (128 + its number), for the record; `None`: the run's
    /// own (130 for a cancelled one).
    fn stop_status(&self) -> Option<i32> {
        None
    }
    /// The text recorded for `name` when the call is dropped before it runs.
    fn gone(&self, name: &str) -> String;
}

/// The tools and the gate a surface calls through. Without a gate nothing
/// is asked, limited or recorded (tests, embedders).
#[derive(Clone)]
pub struct Pipeline {
    pub tools: Arc<dyn Toolbox>,
    pub gate: Option<Arc<dyn Gatekeeper>>,
}

impl Pipeline {
    /// One call, end to end; the result only once its record is written.
    pub async fn call(
        &self,
        name: &str,
        args: Value,
        surface: Arc<dyn Surface>,
    ) -> Result<CallResult, CallError> {
        let session = surface.session().clone();
        // Look up, validate, resolve. The arguments are kept for the record
        // only while preparing: after that the prepared call holds them.
        let kept = self.gate.as_ref().map(|_| args.clone());
        // A call made by scripts carries their chain; one too deep is
        // refused before the gate (nobody is asked to approve it).
        let prepared = self.tools.prepare(name, args).and_then(|mut p| {
            p.callers = surface.callers().to_vec();
            match nested::too_deep(&p.tool, &p.callers) {
                None => Ok(p),
                Some(why) => Err(CallError::Unsupported(why)),
            }
        });
        let prepared = match prepared {
            Ok(p) => Arc::new(p),
            Err(e) => {
                return Err(match kept {
                    Some(args) => self.refuse(name, &args, &session, e),
                    None => e,
                });
            }
        };
        drop(kept);
        surface.prepared(&prepared);

        // The gate, unless the surface stops the call first.
        let gone: Gone = {
            let (surface, name) = (surface.clone(), name.to_string());
            Arc::new(move || surface.gone(&name))
        };
        // Asked now: from here a dropped call is recorded, even one the
        // surface stops before the gate is polled.
        let verdict = (self.gate.as_ref())
            .map(|g| admit(g, prepared.clone(), &session, surface.approval(), gone));
        let admitted = async move {
            match verdict {
                Some(v) => v.await.map(Some),
                None => Ok(None),
            }
        };
        let admission = match select(surface.interrupted(name), Box::pin(admitted)).await {
            // The pending verdict is dropped: the gate records the call.
            Either::Left((stopped, _)) => return Err(CallError::NotRun(stopped)),
            Either::Right((Ok(admission), _)) => admission,
            Either::Right((Err(refused), _)) => {
                let denied = CallError::Denied(refused.denial);
                return Err(match refused.recorded {
                    Ok(()) => denied,
                    Err(error) => audit_failed(error, Some(denied)),
                });
            }
        };

        let mut admission = self.still_approved(admission)?;

        let turn = match surface.turn(name).await {
            Ok(t) => t,
            Err(stopped) => {
                if let Some(a) = admission
                    && let Err(e) = a.not_run(&stopped.text, stopped.stopped_by.as_deref())
                {
                    return Err(audit_failed(e, Some(CallError::NotRun(stopped))));
                }
                return Err(CallError::NotRun(stopped));
            }
        };
        if let Some(a) = &mut admission {
            a.start().map_err(|e| audit_failed(e, None))?;
        }
        let job = self.job(prepared, admission, turn, surface.clone());
        let done = surface.carry(name, job).await?;
        done.recorded.map_err(|e| audit_failed(e, None))?;
        done.result
    }

    /// A call a person approved runs only if its definition is still the
    /// one they were shown: a file edited while the prompt was open (a
    /// `custom_script edit` from another session, a hand edit) refuses it.
    /// The digest covers the spec, the grant and the files the tool runs.
    fn still_approved(&self, admission: Option<Admission>) -> Result<Option<Admission>, CallError> {
        let Some(a) = admission else {
            return Ok(None);
        };
        let asked = matches!(
            a.permit().map(|p| &p.approval),
            Some(Approval::Approved { .. })
        );
        let call = a.call().clone();
        if !asked {
            return Ok(Some(a));
        }
        let now = definition::digest(&call.tool, &call.resolved.grant);
        if now == call.definition_sha256 {
            return Ok(Some(a));
        }
        let message = format!(
            "{}: not run: its definition changed after it was approved (approved {}, now {}); \
             call it again to be asked about the current one",
            call.tool.name,
            &call.definition_sha256[..12.min(call.definition_sha256.len())],
            &now[..12.min(now.len())],
        );
        let denied = CallError::Denied(GateDenial::new(
            DenyReason::ChangedSinceApproval,
            message.clone(),
        ));
        match a.not_run(&message, None) {
            Ok(()) => Err(denied),
            Err(e) => Err(audit_failed(e, Some(denied))),
        }
    }

    /// The run and its final record, as one job for the surface to carry.
    fn job(
        &self,
        prepared: Arc<PreparedCall>,
        admission: Option<Admission>,
        turn: Turn,
        surface: Arc<dyn Surface>,
    ) -> Job {
        let tools = self.tools.clone();
        let pipeline = self.clone();
        Box::new(move |cancel| {
            let _turn = turn;
            let started = Instant::now();
            // Calls the tool's run makes (a script's ctx.tool) come back
            // through this pipeline.
            let running = nested::Running::enter(&pipeline, &surface, &prepared.tool.name);
            let result = tools.execute(&prepared, cancel);
            drop(running);
            let recorded = match admission {
                None => Ok(()),
                Some(a) => {
                    let cancelled = matches!(&result, Ok(r) if r.outcome.exit == Exit::Cancelled);
                    let stopped_by = cancelled.then(|| surface.stopped_by()).flatten();
                    let stop_status = cancelled.then(|| surface.stop_status()).flatten();
                    let error;
                    let ran = match &result {
                        Ok(r) => Ran::Finished {
                            outcome: &r.outcome,
                            is_error: r.is_error,
                            content: r.content_kinds.as_ref(),
                        },
                        Err(CallError::Denied(denial)) => Ran::Refused {
                            denial,
                            after: started.elapsed(),
                        },
                        Err(e) => {
                            error = e.to_string();
                            Ran::Failed {
                                error: &error,
                                after: started.elapsed(),
                            }
                        }
                    };
                    let stopped = stopped_by.as_deref().map(|by| StoppedBy {
                        by,
                        exit_status: stop_status,
                    });
                    a.complete(ran, stopped)
                }
            };
            JobDone { result, recorded }
        })
    }

    /// Record a call refused before the gate (by the toolbox, or by its
    /// surface: too many pending) and return the error to report: `error`
    /// itself, or [`CallError::Audit`] when the record could not be
    /// written.
    pub fn refuse(
        &self,
        name: &str,
        args: &Value,
        session: &SessionId,
        error: CallError,
    ) -> CallError {
        let Some(gate) = &self.gate else {
            return error;
        };
        let tool = self.tools.spec(name);
        let message = error.to_string();
        let rejected = Rejected {
            tool: tool.as_ref(),
            name,
            args,
            session,
            // A denial's own code (`definition_changed`), not just `denied`.
            reason: match &error {
                CallError::Denied(d) => d.reason.code(),
                other => other.code(),
            },
            message: &message,
        };
        match gate.reject(&rejected) {
            Ok(()) => error,
            Err(e) => audit_failed(e, Some(error)),
        }
    }
}

fn audit_failed(error: String, refused: Option<CallError>) -> CallError {
    CallError::Audit {
        error,
        refused: refused.map(Box::new),
    }
}

pub(crate) mod nested;
#[cfg(test)]
mod tests;
