//! One `tools/call`: the server as a surface of the call pipeline
//! ([`crate::call::pipeline`], which looks up, validates, gates, runs and
//! records the call). This module adds what is the server's own:
//!
//! ```text
//! the call queue (pending calls per session and overall; beyond: isError at once)
//!   → the pipeline, with
//!       approval by elicitation ([`Elicitation`]);
//!       a client's notifications/cancelled or a stopping server ending a
//!         call that waits for approval or for a run slot;
//!       a run slot (--max-concurrent; round robin across sessions);
//!       the run on a blocking thread, with a CancelToken (cancellation or
//!         a dropped request kills the process tree; progress notifications
//!         at the start and every second after when the client sent a token)
//!   → CallToolResult (isError, text, _meta with the enforcement report)
//! ```
//!
//! Tool failures are results with `isError: true`; only an unknown tool is a
//! JSON-RPC error (-32602, as in the spec's examples).
#![allow(deprecated)] // LoggingLevel: see server.rs

use super::McpServer;
use super::answer::build;
use super::elicitation::Elicitation;
use super::manage::Handled;
use super::queue::Place;
use crate::audit::record::not_ran;
use crate::call::pipeline::{Job, JobDone, Turn};
use crate::call::{CallError, CallResult, NotRun, NotRunKind, Surface};
use crate::gate::{ApprovalChannel, BoxFuture, GateDenial, SessionId};
use crate::sandbox::{CancelToken, Exit};
use crate::upstream::exposed::{CALL_MCP_TOOL, FIND_TOOLS};
use crate::upstream::{Gateway, deferred};
use rmcp::model::{CallToolRequestParams, CallToolResult, LoggingLevel, ProgressNotificationParam};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, Peer, RoleServer};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Instant;

pub(crate) async fn call_tool(
    server: &McpServer,
    request: CallToolRequestParams,
    context: RequestContext<RoleServer>,
) -> Result<CallToolResult, McpError> {
    let mut name = request.name.to_string();
    let mut args = Value::Object(request.arguments.unwrap_or_default());
    // A resource read is `resources/read`, routed by its URI, and a
    // prompt's get is `prompts/get`, its arguments checked first: never tools.
    if name.ends_with(crate::upstream::resources::READ) {
        return Err(McpError::invalid_params(
            format!("unknown tool '{name}' (read resources with resources/read)"),
            Some(json!({"tool": name})),
        ));
    }
    if name.ends_with(crate::upstream::prompts::GET) {
        return Err(McpError::invalid_params(
            format!("unknown tool '{name}' (get prompts with prompts/get)"),
            Some(json!({"tool": name})),
        ));
    }
    // This session's upstream servers (their tools join the pipeline's).
    if let Some(gw) = server.gateway(&context.peer).await
        && let Some(answer) = deferred_call(&gw, &mut name, &mut args)
    {
        return Ok(answer);
    }
    // custom_script / tool_manage: answered here, or (execute) a call of
    // the named tool through the pipeline.
    if let Some(m) = server.shared.manage.get()
        && m.offers(&name)
    {
        match m
            .call(server, &context.peer, &context.ct, &name, &args)
            .await
        {
            Handled::Answer(result) => return Ok(result),
            Handled::Run { name: n, args: a } => (name, args) = (n, a),
        }
    }
    let pipeline = server.pipeline();
    // Counted until its audit record is written: a stopping server waits.
    let _in_flight = server.shared.calls.token();
    let started = Instant::now();
    let label = metrics_label(server, &pipeline, &name);
    let result = admit_and_run(server, &pipeline, &context, &name, args).await;
    server
        .shared
        .metrics
        .call(&label, &result, started.elapsed());
    match result {
        Ok(result) => {
            log_outcome(server, &context.peer, &name, &result).await;
            Ok(success(&name, &result))
        }
        Err(e) => respond(server, &name, e),
    }
}

/// The `tool` label of a call in the metrics: a tool this session offers,
/// else `(unknown)`, so made-up names do not make new series.
fn metrics_label(server: &McpServer, pipeline: &crate::call::Pipeline, name: &str) -> String {
    let managed = server.shared.manage.get().is_some_and(|m| m.offers(name));
    if managed || pipeline.tools.spec(name).is_some() {
        name.to_string()
    } else {
        super::metrics::UNKNOWN_TOOL.to_string()
    }
}

/// The call queue's caps (and a drain), then the pipeline.
pub(super) async fn admit_and_run(
    server: &McpServer,
    pipeline: &crate::call::Pipeline,
    context: &RequestContext<RoleServer>,
    name: &str,
    args: Value,
) -> Result<CallResult, CallError> {
    // A draining server finishes what runs and starts nothing new: the
    // client's next session lands on another replica.
    if server.shared.draining.is_cancelled() {
        let stopped = CallError::NotRun(stopping(format!(
            "{name}: not run: this server is draining (it is shutting down and only finishes \
             the calls already running); start a new session, which goes to another replica"
        )));
        return Err(pipeline.refuse(name, &args, &server.session.id, stopped));
    }
    // Too many calls pending (this session's, or the server's): refused at
    // once, audited, and the arguments dropped with the request.
    let place = match server.shared.queue.enqueue(server.session.key) {
        Ok(t) => t,
        Err(busy) => {
            let stopped = CallError::NotRun(NotRun {
                kind: NotRunKind::Busy,
                text: busy.to_string(),
                stopped_by: None,
            });
            return Err(pipeline.refuse(name, &args, &server.session.id, stopped));
        }
    };
    let call = Arc::new(ServerCall {
        server: server.clone(),
        approval: Elicitation {
            peer: context.peer.clone(),
            timeout: server.shared.config.approval_timeout,
        },
        context: context.clone(),
        place: Mutex::new(Some(place)),
    });
    pipeline.call(name, args, call).await
}

/// Octo's `find_tools` is answered here (it runs nothing); its
/// `call_mcp_tool` names the upstream tool the pipeline then calls like
/// any other (`name` and `args` are rewritten). An answer ends the call.
fn deferred_call(gw: &Gateway, name: &mut String, args: &mut Value) -> Option<CallToolResult> {
    let exposed = gw.exposed();
    if !exposed.deferred || gw.local_names.iter().any(|n| n == name) {
        return None;
    }
    let meta = json!({});
    match name.as_str() {
        FIND_TOOLS => {
            let Some(query) = args.get("query").and_then(Value::as_str) else {
                return Some(error_result(
                    "find_tools: missing required parameter 'query' (a string)".into(),
                    meta,
                ));
            };
            let servers: Vec<String> = gw
                .servers
                .iter()
                .filter(|s| s.settings.expose == crate::policy::Expose::Deferred)
                .map(|s| s.spec.name.clone())
                .collect();
            Some(build(
                deferred::find_tools(&exposed, &servers, query),
                false,
                meta,
            ))
        }
        CALL_MCP_TOOL => {
            let Some(tool) = args.get("tool_name").and_then(Value::as_str) else {
                return Some(error_result(
                    "call_mcp_tool: missing required parameter 'tool_name' (a string)".into(),
                    meta,
                ));
            };
            match deferred::resolve(&exposed, tool) {
                Ok(flat) => {
                    let inner = match args.get("arguments") {
                        None | Some(Value::Null) => json!({}),
                        Some(v) => v.clone(),
                    };
                    *name = flat;
                    *args = inner;
                    None
                }
                Err(text) => Some(error_result(text, meta)),
            }
        }
        _ => None,
    }
}

/// Stops passing on a call's upstream progress when the call is over.
struct UnrouteProgress(Arc<Gateway>, CancelToken);

impl Drop for UnrouteProgress {
    fn drop(&mut self) {
        self.0.unroute_progress(&self.1);
    }
}

/// The MCP server as the surface of one call.
struct ServerCall {
    server: McpServer,
    approval: Elicitation,
    context: RequestContext<RoleServer>,
    /// The call's place in the queue until its turn (then the turn holds it).
    place: Mutex<Option<Place>>,
}

impl Surface for ServerCall {
    fn session(&self) -> &SessionId {
        &self.server.session.id
    }

    fn approval(&self) -> &dyn ApprovalChannel {
        &self.approval
    }

    /// Cancelled, or the connection closed, or the server stopping while a
    /// person is being asked: the question is withdrawn.
    fn interrupted<'a>(&'a self, name: &'a str) -> BoxFuture<'a, NotRun> {
        let shared = &self.server.shared;
        Box::pin(async move {
            if shared.stopping.is_cancelled() {
                return stopping(format!("{name}: not run: the server is shutting down"));
            }
            tokio::select! {
                _ = self.context.ct.cancelled() => NotRun {
                    kind: NotRunKind::Cancelled,
                    text: format!("{name}: cancelled before it ran (approval was pending)"),
                    stopped_by: None,
                },
                _ = shared.stopping.cancelled() => stopping(format!(
                    "{name}: not run: the server is shutting down (approval was pending)"
                )),
            }
        })
    }

    /// A run slot (--max-concurrent), in this session's turn.
    fn turn<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Turn, NotRun>> {
        let shared = &self.server.shared;
        Box::pin(async move {
            let taken = self.place.lock().unwrap_or_else(|p| p.into_inner()).take();
            let Some(place) = taken else {
                return Err(stopping(format!("{name}: not run: no place in the queue")));
            };
            let slot = tokio::select! {
                s = place.slot() => s,
                _ = self.context.ct.cancelled() => {
                    return Err(NotRun {
                        kind: NotRunKind::Cancelled,
                        text: format!("{name}: cancelled by the client before it started"),
                        stopped_by: None,
                    });
                }
                _ = shared.stopping.cancelled() => None,
            };
            let Some(slot) = slot else {
                return Err(stopping(format!(
                    "{name}: not run: the server is shutting down"
                )));
            };
            // Pending (and holding its slot) until the run and its record
            // end; a stopping server waits for it.
            let turn: Turn = Box::new((place, slot, shared.calls.token()));
            Ok(turn)
        })
    }

    /// On a blocking thread; meanwhile progress notifications, and the
    /// client's cancellation or a stopping server kill the process tree.
    fn carry<'a>(&'a self, name: &'a str, job: Job) -> BoxFuture<'a, Result<JobDone, CallError>> {
        Box::pin(async move {
            let (server, context) = (&self.server, &self.context);
            server
                .log(
                    &context.peer,
                    LoggingLevel::Info,
                    json!({"event": "call", "tool": name}),
                )
                .await;
            let cancel = CancelToken::new()
                .map_err(|e| CallError::Internal(format!("cannot create a cancel token: {e}")))?;
            let _kill_if_dropped = KillOnDrop(Some(cancel.clone()));
            let run_cancel = cancel.clone();
            let started = Instant::now();
            // An upstream tool's own progress is passed on (see below).
            let (upstream_tx, mut upstream_rx) = tokio::sync::mpsc::unbounded_channel();
            let gateway = match server.session_gateway() {
                Some(gw) => {
                    gw.route_progress(&cancel, upstream_tx);
                    Some(gw)
                }
                None => None,
            };
            let _unroute = gateway.map(|gw| UnrouteProgress(gw, cancel.clone()));
            let mut task = tokio::task::spawn_blocking(move || job(Some(&run_cancel)));
            let progress = context.meta.get_progress_token();
            let mut last_sent = -1.0_f64;
            let mut upstream_driven = false;
            // The first tick is immediate: progress 0 says the call has started.
            let mut ticks = tokio::time::interval(server.shared.config.progress_interval);
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
                    _ = ticks.tick(), if progress.is_some() && !cancelled && !upstream_driven => {
                        let secs = started.elapsed().as_secs_f64().floor();
                        if let Some(token) = progress.clone() {
                            last_sent = secs;
                            let p = ProgressNotificationParam::new(token, secs)
                                .with_message(format!("{name}: running for {secs:.0}s"));
                            if let Err(e) = context.peer.notify_progress(p).await {
                                tracing::debug!("cannot send progress: {e}");
                            }
                        }
                    }
                    // The upstream server's progress replaces toolcage's
                    // ticks, its values kept increasing.
                    Some(up) = upstream_rx.recv(), if progress.is_some() && !cancelled => {
                        upstream_driven = true;
                        if let Some(token) = progress.clone() {
                            let value = match up.progress > last_sent {
                                true => up.progress,
                                false => last_sent + 0.001,
                            };
                            last_sent = value;
                            let mut p = ProgressNotificationParam::new(token, value);
                            p.total = up.total;
                            p.message = up.message.map(|m| crate::text::one_line(&m));
                            if let Err(e) = context.peer.notify_progress(p).await {
                                tracing::debug!("cannot send progress: {e}");
                            }
                        }
                    }
                }
            };
            joined.map_err(|e| {
                tracing::error!("{name}: the call failed internally: {e}");
                CallError::Internal(format!(
                    "{name}: the call failed inside toolcage (see the server log)"
                ))
            })
        })
    }

    fn stopped_by(&self) -> Option<String> {
        self.server.shared.stop_reason.get().cloned()
    }

    fn stop_status(&self) -> Option<i32> {
        (self.server.shared.stop_signal.get()).map(|sig| 128 + sig)
    }

    fn gone(&self, name: &str) -> String {
        match self.server.shared.stop_reason.get() {
            Some(reason) => {
                format!("{name}: not run: the server stopped ({reason}) before the call ran")
            }
            None => format!(
                "{name}: the client went away before the call ran (request cancelled or connection closed)"
            ),
        }
    }
}

fn stopping(text: String) -> NotRun {
    NotRun {
        kind: NotRunKind::Stopping,
        text,
        stopped_by: None,
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

/// `[audit] redact = true`: the server's log names what happened, not the
/// values (a validation message quotes the argument it refused).
fn redacting(server: &McpServer) -> bool {
    server.shared.gate.as_ref().is_some_and(|g| g.redact())
}

/// A call that did not run, or whose result is withheld, as MCP shows it.
fn respond(server: &McpServer, name: &str, e: CallError) -> Result<CallToolResult, McpError> {
    match e {
        CallError::UnknownTool { .. } => Err(McpError::invalid_params(
            e.to_string(),
            Some(json!({"tool": name})),
        )),
        // Gone since the list was made: unknown now, and what to do.
        CallError::Removed { .. } => {
            let next = match server.shared.config.watch {
                true => "the tool list is reloaded as the files change; list the tools again",
                false => {
                    "this server does not reload tool files (--no-watch): restart it to serve \
                     the current ones"
                }
            };
            Err(McpError::invalid_params(
                format!("{e}; {next}"),
                Some(json!({"tool": name})),
            ))
        }
        CallError::Internal(text) => Err(McpError::internal_error(text, None)),
        CallError::Denied(d) => Ok(denied(name, &d, redacting(server))),
        CallError::NotRun(n) => Ok(not_run(name, &n)),
        CallError::Audit { error, refused } => Ok(audit_failed(name, &error, refused.is_some())),
        other => Ok(refused(server, name, &other)),
    }
}

/// A call the gate refused (approval, rate limit, concurrency cap), or
/// the tool's grant (an http tool's host), or a held upstream tool: one
/// denial, by its layer and rule.
fn denied(name: &str, d: &GateDenial, redact: bool) -> CallToolResult {
    match redact {
        true => tracing::info!("{name}: denied ({})", d.reason.code()),
        false => tracing::info!("{name}: denied ({}): {}", d.reason.code(), d.message),
    }
    let refused = d.entry(name);
    let mut meta = json!({
        "toolcage/error": "denied",
        "toolcage/denial": d.reason.code(),
        "toolcage/enforcement": not_ran(format!(
            "nothing ran: the call was denied ({}) before anything started", d.reason.code()
        )),
        "toolcage/denials": [refused],
    });
    if let Some(wait) = d.retry_after {
        meta["toolcage/retryAfterSeconds"] = json!(wait.as_secs_f64().ceil());
    }
    error_result(format!("toolcage: {}", d.message), meta)
}

/// A call the server stopped before it ran: too many pending (refused
/// before anything was looked at), cancelled, or the server stopping.
fn not_run(name: &str, n: &NotRun) -> CallToolResult {
    let enforcement = not_ran("nothing ran: the call was stopped before it started".into());
    match n.kind {
        NotRunKind::Busy => {
            tracing::info!("{name}: refused: {}", n.text);
            error_result(
                format!("toolcage: {}", n.text),
                json!({"toolcage/error": "busy", "toolcage/enforcement": enforcement}),
            )
        }
        NotRunKind::Stopping => error_result(
            n.text.clone(),
            json!({"toolcage/error": "stopping", "toolcage/enforcement": enforcement}),
        ),
        NotRunKind::Cancelled | NotRunKind::Interrupted => {
            error_result(n.text.clone(), json!({"toolcage/enforcement": enforcement}))
        }
    }
}

/// The audit record could not be written: the result is withheld.
/// `refused`: the call was refused anyway (nothing ran); else it may have
/// run, and what the sandbox enforced is withheld with its result.
fn audit_failed(name: &str, e: &str, refused: bool) -> CallToolResult {
    tracing::error!("{name}: audit log: {e}");
    let enforcement = match refused {
        true => not_ran("nothing ran: the call was refused, and its record not written".into()),
        false => json!({
            "mode": "withheld",
            "note": "the result is withheld: its audit record could not be written (the call may have run)",
        }),
    };
    error_result(
        format!("toolcage: {name}: cannot write the audit log: {e}"),
        json!({"toolcage/error": "audit", "toolcage/enforcement": enforcement}),
    )
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
pub(crate) fn success(name: &str, r: &CallResult) -> CallToolResult {
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
    // An upstream tool's result passes as it came (content blocks,
    // structuredContent), with toolcage's _meta.
    if let Some(mut content) = r.content.clone() {
        content["isError"] = json!(r.is_error);
        content["_meta"] = meta.clone();
        if let Ok(result) = serde_json::from_value::<CallToolResult>(content) {
            return result;
        }
    }
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

/// A call that did not run: invalid arguments, unsupported, policy or
/// sandbox failure. `isError: true` with what to do about it.
fn refused(server: &McpServer, name: &str, e: &CallError) -> CallToolResult {
    let hint = match e {
        CallError::InvalidArguments { .. } => server
            .shared
            .host
            .tools()
            .iter()
            .find(|t| t.name == name)
            .map(|t| format!("Fix the arguments to match the input schema: {}", t.input_schema)),
        CallError::Policy(_) => Some(
            "The operator's policy could not be applied; run `toolcage check` and `toolcage policy NAME`."
                .to_string(),
        ),
        _ => None,
    };
    let kind = e.code();
    let mut text = format!("toolcage: {e}");
    if let Some(h) = hint {
        text.push('\n');
        text.push_str(&h);
    }
    match redacting(server) {
        true => tracing::info!("{name}: refused ({kind})"),
        false => tracing::info!("{name}: refused ({kind}): {e}"),
    }
    let why = match e {
        CallError::InvalidArguments { .. } => "the arguments do not match the tool's input schema",
        CallError::Policy(_) => "the tool's grant could not be resolved",
        CallError::Unsupported(_) => "toolcage cannot run this tool",
        CallError::Sandbox(_) => "the sandbox could not start the tool",
        _ => "the call failed before the tool started",
    };
    let meta = json!({
        "toolcage/error": kind,
        "toolcage/enforcement": not_ran(format!("nothing ran: {why}")),
    });
    error_result(text, meta)
}

fn error_result(text: String, meta: Value) -> CallToolResult {
    build(text, true, meta)
}
