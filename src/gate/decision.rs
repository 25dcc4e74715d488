//! What the gate decided, and the audit record built from it.

use super::approval::{GrantSummary, Refusal, args_digest};
use super::persist::Slot;
use super::{Gate, SessionId, mode_name};
use crate::audit::record::{AuditRecord, Decision as Recorded, Phase, StreamBytes, rfc3339};
use crate::call::{CallError, CallResult, PreparedCall};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

/// The gate's answer for one call.
#[derive(Debug)]
pub enum Decision {
    /// Run it; keep the permit (it holds the concurrency slot) until
    /// [`Gate::finish`].
    Allowed(Permit),
    Denied(Denial),
}

/// How an allowed call got past approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    /// Mode `never`.
    NotNeeded,
    /// A person said yes through `by` (`terminal`, `elicitation`, `--yes`);
    /// `remembered`: an earlier yes in the session covered it.
    Approved { by: String, remembered: bool },
}

/// Permission to run one call.
#[derive(Debug)]
pub struct Permit {
    pub approval: Approval,
    /// Pairs the call's `started` audit record with its final one.
    pub call_id: String,
    _slot: Slot,
}

/// `<pid>-<nanoseconds since the epoch>-<counter>`: unique per process and
/// across processes writing the same log.
fn fresh_call_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{}-{nanos}-{n}", std::process::id())
}

impl Permit {
    pub(super) fn new(approval: Approval, slot: Slot) -> Permit {
        Permit {
            approval,
            call_id: fresh_call_id(),
            _slot: slot,
        }
    }

    /// A permit that holds no concurrency slot, for gates other than
    /// [`Gate`] (tests, surfaces with their own limits).
    pub fn without_slot(approval: Approval) -> Permit {
        Permit::new(approval, Slot::Unlimited)
    }
}

/// Why a call was denied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DenyReason {
    Approval(Refusal),
    RateLimited,
    /// The tool's concurrency cap is reached.
    Concurrency,
    /// The gate cannot work safely: its state or the audit log is unusable
    /// or lies inside a write root. A configuration problem, not a refusal.
    Unavailable,
}

impl DenyReason {
    /// The machine code recorded in the audit log.
    pub fn code(self) -> &'static str {
        match self {
            DenyReason::Approval(Refusal::Declined) => "approval_declined",
            DenyReason::Approval(Refusal::Cancelled) => "approval_cancelled",
            DenyReason::Approval(Refusal::TimedOut) => "approval_timed_out",
            DenyReason::Approval(Refusal::NoChannel) => "approval_no_channel",
            DenyReason::Approval(Refusal::PreApprovalNotAllowed) => "pre_approval_not_allowed",
            DenyReason::Approval(Refusal::Interrupted) => "approval_interrupted",
            DenyReason::RateLimited => "rate_limited",
            DenyReason::Concurrency => "concurrency",
            DenyReason::Unavailable => "gate_unavailable",
        }
    }
}

/// A denied call: the reason, the text for the caller, and for rate limits
/// how long to wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub reason: DenyReason,
    pub message: String,
    pub retry_after: Option<Duration>,
}

impl Denial {
    pub fn new(reason: DenyReason, message: String) -> Denial {
        Denial {
            reason,
            message,
            retry_after: None,
        }
    }
}

/// What happened after the gate.
#[derive(Debug, Clone, Copy)]
pub enum Ran<'a> {
    /// Denied: nothing ran.
    NotRun,
    /// Allowed and about to run: the `started` record ([`Gate::start`]).
    Starting,
    /// The sandbox ran the tool (whatever its exit).
    Finished(&'a CallResult),
    /// The call could not run (encoding, sandbox setup), after `Duration`.
    Failed(&'a CallError, Duration),
}

pub(super) fn record(
    gate: &Gate,
    call: &PreparedCall,
    session: &SessionId,
    decision: &Decision,
    ran: &Ran<'_>,
) -> AuditRecord {
    let args = serde_json::Value::Object(call.args.clone());
    let call_id = match decision {
        Decision::Allowed(p) => Some(p.call_id.clone()),
        Decision::Denied(_) => None,
    };
    let decision = match decision {
        Decision::Allowed(p) => match &p.approval {
            Approval::NotNeeded => Recorded::Allowed,
            Approval::Approved { by, remembered } => Recorded::Approved {
                by: by.clone(),
                remembered: *remembered,
            },
        },
        Decision::Denied(d) => Recorded::Denied {
            reason: d.reason.code().into(),
            message: d.message.clone(),
        },
    };
    let mut r = AuditRecord {
        time: rfc3339(SystemTime::now()),
        phase: None,
        call_id,
        session: session.0.clone(),
        tool: call.tool.name.clone(),
        format: serde_json::to_value(call.tool.format)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        source: call.tool.source.display().to_string(),
        definition_sha256: Some(call.definition_sha256.clone()),
        args_sha256: args_digest(&args),
        args: (!gate.session.audit.redact).then_some(args),
        args_cut: None,
        decision,
        approval_mode: Some(mode_name(call.resolved.grant.approval).into()),
        grant: Some(GrantSummary::of(&call.resolved.grant)),
        enforcement: None,
        exit: None,
        exit_status: None,
        is_error: None,
        error: None,
        stopped_by: None,
        duration_ms: None,
        stdout: None,
        stderr: None,
    };
    match ran {
        Ran::NotRun => {}
        Ran::Starting => r.phase = Some(Phase::Started),
        Ran::Finished(res) => {
            let o = &res.outcome;
            r.enforcement = serde_json::to_value(&o.enforcement).ok();
            r.exit = serde_json::to_value(o.exit).ok();
            r.exit_status = Some(o.exit.shell_status());
            r.is_error = Some(res.is_error);
            r.duration_ms = Some(u64::try_from(o.duration.as_millis()).unwrap_or(u64::MAX));
            r.stdout = Some(StreamBytes {
                kept: o.stdout.bytes_kept,
                omitted: o.stdout.bytes_omitted,
            });
            r.stderr = Some(StreamBytes {
                kept: o.stderr.bytes_kept,
                omitted: o.stderr.bytes_omitted,
            });
        }
        Ran::Failed(e, d) => {
            r.is_error = Some(true);
            r.error = Some(e.to_string());
            r.duration_ms = Some(u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        }
    }
    r
}

/// The record of a call refused before the gate (nothing ran): `tool` when
/// the name is known, `error` says why.
pub(super) fn rejected(
    gate: &Gate,
    tool: Option<&crate::discover::ToolSpec>,
    name: &str,
    args: &serde_json::Value,
    session: &SessionId,
    error: &CallError,
) -> AuditRecord {
    let reason = match error {
        CallError::UnknownTool { .. } => "unknown_tool",
        CallError::InvalidArguments { .. } => "invalid_arguments",
        CallError::Unsupported(_) => "unsupported",
        CallError::Denied(_) => "denied",
        CallError::Policy(_) => "policy",
        CallError::Sandbox(_) => "sandbox",
    };
    AuditRecord {
        time: rfc3339(SystemTime::now()),
        phase: None,
        call_id: None,
        session: session.0.clone(),
        tool: name.to_string(),
        format: tool
            .and_then(|t| serde_json::to_value(t.format).ok())
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        source: tool
            .map(|t| t.source.display().to_string())
            .unwrap_or_default(),
        definition_sha256: None,
        args_sha256: args_digest(args),
        args: (!gate.session.audit.redact).then(|| args.clone()),
        args_cut: None,
        decision: Recorded::Denied {
            reason: reason.into(),
            message: error.to_string(),
        },
        approval_mode: None,
        grant: None,
        enforcement: None,
        exit: None,
        exit_status: None,
        is_error: Some(true),
        error: None,
        stopped_by: None,
        duration_ms: None,
        stdout: None,
        stderr: None,
    }
}
