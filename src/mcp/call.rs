//! One `tools/call`, end to end:
//!
//! ```text
//! admission (pending calls per session and overall; beyond: isError at once)
//!   → host.prepare (validate, resolve the grant)
//!   → gate (concurrency cap, rate limits, approval via elicitation; a
//!     denial is audited and returned as an isError result)
//!   → wait for a run slot (--max-concurrent; round robin across sessions)
//!   → host.run on a blocking thread, with a CancelToken
//!       (notifications/cancelled or a dropped request kills the process tree;
//!        progress notifications at the start and every second after when the
//!        client sent a token)
//!   → a `started` audit record before the run (it survives a SIGKILL)
//!   → the final audit record (before the result; a failed write withholds
//!     it; a server stopping on SIGTERM/SIGINT/SIGHUP cancels the run and
//!     records `stopped_by`)
//!   → CallToolResult (isError, text, _meta with the enforcement report)
//! ```
//!
//! Tool failures are results with `isError: true`; only an unknown tool is a
//! JSON-RPC error (-32602, as in the spec's examples).
#![allow(deprecated)] // LoggingLevel: see server.rs

use super::McpServer;
use super::admission::Refusal;
use crate::call::{CallError, CallResult, PreparedCall};
use crate::gate::{Decision, Denial, Ran};
use crate::sandbox::{CancelToken, Exit};
use rmcp::model::{CallToolRequestParams, CallToolResult, LoggingLevel, ProgressNotificationParam};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, Peer, RoleServer};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Instant;

pub async fn call_tool(
    server: &McpServer,
    request: CallToolRequestParams,
    context: RequestContext<RoleServer>,
) -> Result<CallToolResult, McpError> {
    let name = request.name.to_string();
    let args = Value::Object(request.arguments.unwrap_or_default());
    let host = server.shared.host.clone();

    let session = server.session.id.clone();
    let gate = server.shared.gate.clone();
    // Counted until its audit record is written: a stopping server waits.
    let _in_flight = server.shared.calls.token();

    // Too many calls pending (this session's, or the server's): refused at
    // once, audited, and the arguments dropped with the request.
    let ticket = match server.shared.admission.admit(server.session.key) {
        Ok(t) => t,
        Err(refusal) => {
            let why = CallError::Denied(refusal.to_string());
            if let Some(g) = &gate {
                let tool = host.spec(&name);
                if let Err(audit) = g.reject(tool.as_ref(), &name, &args, &session, &why) {
                    return Ok(audit_failed(&name, &audit));
                }
            }
            drop(args);
            return Ok(busy(&name, &refusal));
        }
    };

    // The arguments are kept for the audit record only while preparing:
    // after that the prepared call holds the one copy.
    let kept = gate.as_ref().map(|_| args.clone());
    let prepared = match host.prepare(&name, args) {
        Ok(p) => Arc::new(p),
        Err(e) => {
            // Refused before the gate: audited too, nothing ran.
            if let (Some(g), Some(args)) = (&gate, &kept) {
                let tool = host.spec(&name);
                if let Err(audit) = g.reject(tool.as_ref(), &name, args, &session, &e) {
                    return Ok(audit_failed(&name, &audit));
                }
            }
            if let CallError::UnknownTool { .. } = e {
                return Err(McpError::invalid_params(
                    e.to_string(),
                    Some(json!({"tool": name})),
                ));
            }
            return Ok(refused(server, &name, &e));
        }
    };
    drop(kept);

    // From here until the call is handed to its blocking thread, a dropped
    // request (client gone, session closed, server stopping) still leaves
    // an audit record.
    let mut gone = AuditIfGone {
        gate: gate.clone(),
        host: host.clone(),
        prepared: prepared.clone(),
        session: session.clone(),
        shared: server.shared.clone(),
    };
    if server.shared.stopping.is_cancelled() {
        return Ok(error_result(
            format!("{name}: not run: the server is shutting down"),
            json!({"toolcage/error": "stopping"}),
        ));
    }

    // Approval (elicitation), rate limits, concurrency cap: nothing has run
    // yet. A denial is audited and becomes an `isError` result.
    let decision = match &gate {
        Some(g) => {
            let timeout = server.shared.config.approval_timeout;
            let checked = tokio::select! {
                d = g.check(&prepared, &session, &context.peer, timeout) => d,
                // Cancelled, or the connection closed, while a person was
                // being asked: `gone` records it; the question is withdrawn.
                _ = context.ct.cancelled() => {
                    return Ok(error_result(
                        format!("{name}: cancelled before it ran (approval was pending)"),
                        json!({}),
                    ));
                }
                _ = server.shared.stopping.cancelled() => {
                    return Ok(error_result(
                        format!("{name}: not run: the server is shutting down (approval was pending)"),
                        json!({"toolcage/error": "stopping"}),
                    ));
                }
            };
            match checked {
                Decision::Denied(d) => {
                    gone.disarm();
                    let result = denied(&name, &d);
                    return match g.finish(&prepared, &session, Decision::Denied(d), Ran::NotRun) {
                        Ok(()) => Ok(result),
                        Err(e) => Ok(audit_failed(&name, &e)),
                    };
                }
                allowed => Some(allowed),
            }
        }
        None => None,
    };

    // A run slot (--max-concurrent), in this session's turn.
    let waited = tokio::select! {
        s = ticket.slot() => {
            Ok(s.ok_or_else(|| McpError::internal_error("the server is shutting down", None))?)
        }
        _ = context.ct.cancelled() => {
            Err(format!("{name}: cancelled by the client before it started"))
        }
        _ = server.shared.stopping.cancelled() => {
            Err(format!("{name}: not run: the server is shutting down"))
        }
    };
    let slot = match waited {
        Ok(s) => s,
        Err(text) => {
            gone.disarm();
            if let (Some(g), Some(decision)) = (&gate, decision) {
                let why = CallError::Denied(text.clone());
                if let Err(e) = g.finish(
                    &prepared,
                    &session,
                    decision,
                    Ran::Failed(&why, Default::default()),
                ) {
                    return Ok(audit_failed(&name, &e));
                }
            }
            return Ok(error_result(text, json!({})));
        }
    };

    server
        .log(
            &context.peer,
            LoggingLevel::Info,
            json!({"event": "call", "tool": name}),
        )
        .await;

    let cancel = CancelToken::new().map_err(|e| {
        McpError::internal_error(format!("cannot create a cancel token: {e}"), None)
    })?;
    let _kill_if_dropped = KillOnDrop(Some(cancel.clone()));
    let run_cancel = cancel.clone();
    let started = Instant::now();
    // The audit record is written on the blocking thread, right after the
    // run, so it is written even if this request is dropped meanwhile. It is
    // written before the result is returned; a failed write withholds it
    // (unless the policy says `fail_closed = false`).
    let (run_gate, run_session) = (gate.clone(), session.clone());
    gone.disarm();
    // The `started` record, before anything runs: it survives a SIGKILL.
    if let (Some(g), Some(d)) = (&gate, &decision)
        && let Err(e) = g.start(&prepared, &session, d)
    {
        let why = CallError::Denied(format!("{name}: not run: {e}"));
        if let Some(d) = decision {
            let _ = g.finish(
                &prepared,
                &session,
                d,
                Ran::Failed(&why, Default::default()),
            );
        }
        return Ok(audit_failed(&name, &e));
    }
    let shared = server.shared.clone();
    let in_flight = server.shared.calls.token();
    let mut task = tokio::task::spawn_blocking(move || {
        // Pending (and holding its slot) until the run and its record end.
        let _pending = (ticket, slot);
        let _in_flight = in_flight;
        let result = host.run(&prepared, Some(&run_cancel));
        let audit = match (&run_gate, decision) {
            (Some(g), Some(decision)) => {
                let ran = match &result {
                    Ok(r) => Ran::Finished(r),
                    Err(e) => Ran::Failed(e, started.elapsed()),
                };
                let cancelled = matches!(&result, Ok(r) if r.outcome.exit == Exit::Cancelled);
                let stopped_by = shared.stop_reason.get().filter(|_| cancelled);
                g.finish_stopped(
                    &prepared,
                    &run_session,
                    decision,
                    ran,
                    stopped_by.map(String::as_str),
                )
            }
            _ => Ok(()),
        };
        (result, audit)
    });

    let progress = context.meta.get_progress_token();
    let every = server.shared.config.progress_interval;
    // The first tick is immediate: progress 0 says the call has started.
    let mut ticks = tokio::time::interval(every);
    let mut cancelled = false;
    let joined = loop {
        tokio::select! {
            r = &mut task => break r,
            _ = context.ct.cancelled(), if !cancelled => {
                tracing::info!("{name}: cancelled by the client; killing its process tree");
                cancel.cancel();
                cancelled = true;
            }
            _ = server.shared.stopping.cancelled(), if !cancelled => {
                tracing::info!("{name}: the server is stopping; killing its process tree");
                cancel.cancel();
                cancelled = true;
            }
            _ = ticks.tick(), if progress.is_some() && !cancelled => {
                let secs = started.elapsed().as_secs_f64().floor();
                if let Some(token) = progress.clone() {
                    let p = ProgressNotificationParam::new(token, secs)
                        .with_message(format!("{name}: running for {secs:.0}s"));
                    if let Err(e) = context.peer.notify_progress(p).await {
                        tracing::debug!("cannot send progress: {e}");
                    }
                }
            }
        }
    };

    let (result, audit) = match joined {
        Ok(x) => x,
        Err(e) => {
            tracing::error!("{name}: the call failed internally: {e}");
            return Err(McpError::internal_error(
                format!("{name}: the call failed inside toolcage (see the server log)"),
                None,
            ));
        }
    };
    if let Err(e) = audit {
        return Ok(audit_failed(&name, &e));
    }
    let result = match result {
        Ok(r) => r,
        Err(e) => return Ok(refused(server, &name, &e)),
    };
    log_outcome(server, &context.peer, &name, &result).await;
    Ok(success(&name, &result))
}

/// A call the gate refused (approval, rate limit, concurrency cap).
fn denied(name: &str, d: &Denial) -> CallToolResult {
    tracing::info!("{name}: denied ({}): {}", d.reason.code(), d.message);
    let mut meta = json!({"toolcage/error": "denied", "toolcage/denial": d.reason.code()});
    if let Some(wait) = d.retry_after {
        meta["toolcage/retryAfterSeconds"] = json!(wait.as_secs_f64().ceil());
    }
    error_result(format!("toolcage: {}", d.message), meta)
}

/// Too many calls pending: refused before anything was looked at.
fn busy(name: &str, refusal: &Refusal) -> CallToolResult {
    tracing::info!("{name}: refused: {refusal}");
    error_result(
        format!("toolcage: {refusal}"),
        json!({"toolcage/error": "busy"}),
    )
}

/// The audit record could not be written: the result is withheld.
fn audit_failed(name: &str, e: &str) -> CallToolResult {
    tracing::error!("{name}: audit log: {e}");
    error_result(
        format!("toolcage: {name}: cannot write the audit log: {e}"),
        json!({"toolcage/error": "audit"}),
    )
}

/// Records a call whose request was dropped before it reached the sandbox
/// (client disconnected while approval was pending or while waiting for a
/// permit), so every call leaves an audit record.
struct AuditIfGone {
    gate: Option<Arc<dyn super::Gate>>,
    host: Arc<dyn super::ToolHost>,
    prepared: Arc<PreparedCall>,
    session: crate::gate::SessionId,
    shared: std::sync::Arc<super::server::Shared>,
}

impl AuditIfGone {
    /// Someone else writes this call's record.
    fn disarm(&mut self) {
        self.gate = None;
    }
}

impl Drop for AuditIfGone {
    fn drop(&mut self) {
        if let Some(g) = self.gate.take() {
            let name = &self.prepared.tool.name;
            let why = match self.shared.stop_reason.get() {
                Some(reason) => CallError::Denied(format!(
                    "{name}: not run: the server stopped ({reason}) before the call ran"
                )),
                None => CallError::Denied(format!(
                    "{name}: the client went away before the call ran (request cancelled or connection closed)"
                )),
            };
            let tool = self.host.spec(name);
            let args = Value::Object(self.prepared.args.clone());
            if let Err(e) = g.reject(tool.as_ref(), name, &args, &self.session, &why) {
                tracing::error!("{name}: audit log: {e}");
            }
        }
    }
}

/// Cancels the run if the request future is dropped before it finishes
/// (client disconnected, session closed): nothing it started outlives it.
struct KillOnDrop(Option<CancelToken>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(c) = self.0.take() {
            c.cancel();
        }
    }
}

async fn log_outcome(server: &McpServer, peer: &Peer<RoleServer>, name: &str, r: &CallResult) {
    let enforcement = r.outcome.enforcement.summary();
    let level = if r.outcome.enforcement.degraded.is_empty() {
        LoggingLevel::Info
    } else {
        LoggingLevel::Warning
    };
    server
        .log(
            peer,
            level,
            json!({"event": "sandbox", "tool": name, "enforcement": enforcement}),
        )
        .await;
    let level = if r.is_error {
        LoggingLevel::Notice
    } else {
        LoggingLevel::Info
    };
    let data = json!({
        "event": "result",
        "tool": name,
        "isError": r.is_error,
        "exit": r.outcome.exit,
        "duration": r.outcome.duration.as_secs_f64(),
    });
    tracing::info!("{name}: {data}");
    server.log(peer, level, data).await;
}

/// The result of a call that ran (successfully or not).
pub fn success(name: &str, r: &CallResult) -> CallToolResult {
    let mut text = r.text.clone();
    if let Some(note) = exit_note(name, r) {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&note);
    }
    let meta = json!({
        "toolcage/enforcement": r.outcome.enforcement,
        "toolcage/denials": r.outcome.denials,
        "toolcage/exit": r.outcome.exit,
        "toolcage/duration": r.outcome.duration.as_secs_f64(),
    });
    build(text, r.is_error, meta)
}

/// What to tell the agent about an exit that the tool's own output may not
/// explain (timeout, cancellation), unless the text already says it.
fn exit_note(name: &str, r: &CallResult) -> Option<String> {
    let lower = r.text.to_lowercase();
    match r.outcome.exit {
        Exit::Timeout if !lower.contains("timed out") => Some(format!(
            "[toolcage: {name} timed out after {:.1}s and was killed; \
             raise the tool's timeout in the operator policy if it needs longer]",
            r.outcome.duration.as_secs_f64()
        )),
        Exit::Cancelled if !lower.contains("cancel") => {
            Some(format!("[toolcage: {name} was cancelled and killed]"))
        }
        _ => None,
    }
}

/// A call that did not run: invalid arguments, denied, unsupported, policy
/// or sandbox failure. `isError: true` with what to do about it.
fn refused(server: &McpServer, name: &str, e: &CallError) -> CallToolResult {
    let (kind, hint) = match e {
        CallError::UnknownTool { .. } => ("unknown_tool", None),
        CallError::InvalidArguments { .. } => {
            let schema = server
                .shared
                .host
                .tools()
                .iter()
                .find(|t| t.name == name)
                .map(|t| t.input_schema.to_string());
            (
                "invalid_arguments",
                schema.map(|s| format!("Fix the arguments to match the input schema: {s}")),
            )
        }
        CallError::Denied(_) => ("denied", None),
        CallError::Unsupported(_) => ("unsupported", None),
        CallError::Policy(_) => (
            "policy",
            Some("The operator's policy could not be applied; run `toolcage check` and `toolcage policy NAME`.".to_string()),
        ),
        CallError::Sandbox(_) => ("sandbox", None),
    };
    let mut text = format!("toolcage: {e}");
    if let Some(h) = hint {
        text.push('\n');
        text.push_str(&h);
    }
    tracing::info!("{name}: refused ({kind}): {e}");
    error_result(text, json!({"toolcage/error": kind}))
}

fn error_result(text: String, meta: Value) -> CallToolResult {
    build(text, true, meta)
}

fn build(text: String, is_error: bool, meta: Value) -> CallToolResult {
    let v = json!({
        "content": [{"type": "text", "text": text}],
        "isError": is_error,
        "_meta": meta,
    });
    match serde_json::from_value::<CallToolResult>(v) {
        Ok(r) => r,
        Err(e) => {
            tracing::error!("building a tool result: {e}");
            CallToolResult::error(vec![rmcp::model::ContentBlock::text(text)])
        }
    }
}
