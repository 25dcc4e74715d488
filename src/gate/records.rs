//! The audit records of the calls that reach the gate (denied, started,
//! ended) and of those refused before it, built from what the gate saw.

use super::admission::{CallEvent, Ran, Rejected};
use super::approval::args_digest;
use super::mode_name;
use super::verdict::{Approval, Verdict};
use crate::audit::GrantSummary;
use crate::audit::record::{
    AuditRecord, Phase, RecordedDecision as Recorded, StreamBytes, not_ran, rfc3339,
};
use std::time::{Duration, SystemTime};

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn format_name(format: crate::spec::Format) -> String {
    serde_json::to_value(format)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The record of a call that reached the gate; `redact`: keep only the
/// arguments' digest.
pub(crate) fn of_event(event: &CallEvent<'_>, redact: bool) -> AuditRecord {
    let call = event.call;
    let args = serde_json::Value::Object(call.args.clone());
    let call_id = match event.verdict {
        Verdict::Allowed(p) => Some(p.call_id.clone()),
        Verdict::Denied(_) => None,
    };
    // Hashed once per call: the gate's own digest, kept in the permit.
    let args_sha256 = match event.verdict {
        Verdict::Allowed(p) => p.args_sha256(|| args_digest(&args)).to_string(),
        Verdict::Denied(_) => args_digest(&args),
    };
    let decision = match event.verdict {
        Verdict::Allowed(p) => match &p.approval {
            Approval::NotNeeded => Recorded::Allowed,
            Approval::Approved { by, remembered } => Recorded::Approved {
                by: by.clone(),
                remembered: *remembered,
            },
        },
        Verdict::Denied(d) => Recorded::Denied {
            reason: d.reason.code().into(),
            message: d.message.clone(),
        },
    };
    let mut r = AuditRecord {
        time: rfc3339(SystemTime::now()),
        phase: None,
        call_id,
        session: event.session.0.clone(),
        tool: call.tool.name.clone(),
        format: format_name(call.tool.format),
        source: call.tool.source.display().to_string(),
        upstream: upstream_ref(&call.tool.kind),
        definition_sha256: Some(call.definition_sha256.clone()),
        args_sha256,
        args: None,
        args_cut: None,
        decision,
        approval_mode: Some(mode_name(call.resolved.grant.approval).into()),
        grant: Some(GrantSummary::of(&call.resolved.grant)),
        enforcement: None,
        exit: None,
        exit_status: None,
        is_error: None,
        error: None,
        stopped_by: event.stopped_by.map(|s| s.by.to_string()),
        duration_ms: None,
        stdout: None,
        stderr: None,
        denials: None,
        change: None,
        content: None,
    };
    match event.ran {
        Ran::NotRun => {
            if let Verdict::Denied(d) = event.verdict {
                r.enforcement = Some(not_ran(format!(
                    "nothing ran: the call was denied ({}) before anything started",
                    d.reason.code()
                )));
                r.denials = serde_json::to_value([d.entry(&call.tool.name)]).ok();
            }
        }
        Ran::Starting => r.phase = Some(Phase::Started),
        Ran::Finished {
            outcome,
            is_error,
            content,
        } => {
            r.content = content.cloned();
            r.enforcement = serde_json::to_value(&outcome.enforcement).ok();
            r.exit = serde_json::to_value(outcome.exit).ok();
            // What toolcage returned for it: 128 + the signal that stopped it.
            r.exit_status = Some(
                (event.stopped_by.and_then(|s| s.exit_status))
                    .unwrap_or_else(|| outcome.exit.shell_status()),
            );
            r.is_error = Some(is_error);
            // Ran, but left a protected path toolcage could not put back.
            r.error = outcome.not_undone();
            r.duration_ms = Some(millis(outcome.duration));
            r.stdout = Some(StreamBytes {
                kept: outcome.stdout.bytes_kept,
                omitted: outcome.stdout.bytes_omitted,
            });
            r.stderr = Some(StreamBytes {
                kept: outcome.stderr.bytes_kept,
                omitted: outcome.stderr.bytes_omitted,
            });
            if !outcome.denials.is_empty() {
                r.denials = serde_json::to_value(&outcome.denials).ok();
            }
        }
        Ran::Failed { error, after } => {
            r.is_error = Some(true);
            r.error = Some(error.to_string());
            r.duration_ms = Some(millis(after));
        }
        Ran::Refused { denial, after } => {
            r.decision = Recorded::Denied {
                reason: denial.reason.code().into(),
                message: denial.message.clone(),
            };
            r.enforcement = Some(not_ran(format!(
                "nothing ran: the call was denied ({}) when it was about to run",
                denial.reason.code()
            )));
            r.denials = serde_json::to_value([denial.entry(&call.tool.name)]).ok();
            r.is_error = Some(true);
            r.error = Some(denial.message.clone());
            r.duration_ms = Some(millis(after));
        }
    }
    if redact {
        return r.redacted(&args);
    }
    r.args = Some(args);
    r
}

/// The record of a call refused before the gate (nothing ran): the tool
/// when the name is known, the reason code and message say why.
pub(crate) fn of_rejected(rejected: &Rejected<'_>, redact: bool) -> AuditRecord {
    let tool = rejected.tool;
    let r = AuditRecord {
        time: rfc3339(SystemTime::now()),
        phase: None,
        call_id: None,
        session: rejected.session.0.clone(),
        tool: rejected.name.to_string(),
        format: tool.map(|t| format_name(t.format)).unwrap_or_default(),
        source: tool
            .map(|t| t.source.display().to_string())
            .unwrap_or_default(),
        upstream: tool.and_then(|t| upstream_ref(&t.kind)),
        definition_sha256: None,
        args_sha256: args_digest(rejected.args),
        args: Some(rejected.args.clone()),
        args_cut: None,
        decision: Recorded::Denied {
            reason: rejected.reason.into(),
            message: rejected.message.to_string(),
        },
        approval_mode: None,
        grant: None,
        enforcement: Some(not_ran(format!(
            "nothing ran: refused before the gate ({})",
            rejected.reason
        ))),
        exit: None,
        exit_status: None,
        is_error: Some(true),
        error: None,
        stopped_by: None,
        duration_ms: None,
        stdout: None,
        stderr: None,
        denials: None,
        change: None,
        content: None,
    };
    if redact { r.redacted(rejected.args) } else { r }
}

/// The server and tool behind a gateway call, for its record.
fn upstream_ref(kind: &crate::discover::ToolKind) -> Option<crate::audit::record::UpstreamRef> {
    match kind {
        crate::discover::ToolKind::Upstream { server, tool, .. } => {
            Some(crate::audit::record::UpstreamRef {
                server: server.clone(),
                tool: tool.clone(),
            })
        }
        _ => None,
    }
}
