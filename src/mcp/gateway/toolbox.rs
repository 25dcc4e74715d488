//! A session's tools as the call pipeline sees them: the local tools
//! (the shared host) and the session's upstream tools. An upstream call is
//! prepared like any other (its arguments validated against the server's
//! schema, the server's grant, a definition digest that approvals bind to)
//! and so passes the same gate and leaves the same audit record; it runs
//! as a `tools/call` on the session's instance of its server.

use super::Gateway;
use super::instance::CallFailure;
use crate::call::runner::runner_for;
use crate::call::{CallError, CallResult, PreparedCall, Toolbox, definition, validate};
use crate::discover::{Runner, ToolSpec};
use crate::gate::{Denial, DenyReason};
use crate::policy::Grant;
use crate::sandbox::output::truncation_marker;
use crate::sandbox::{CancelToken, Captured, Exit, Outcome};
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct SessionTools {
    pub local: Arc<dyn Toolbox>,
    pub gateway: Arc<Gateway>,
    pub runtime: tokio::runtime::Handle,
}

impl Toolbox for SessionTools {
    fn prepare(&self, name: &str, args: Value) -> Result<PreparedCall, CallError> {
        let exposed = self.gateway.exposed();
        if self.local.spec(name).is_none()
            && let Some(why) = exposed.unusable_for(name, &self.gateway.servers)
        {
            // The pins cannot be trusted: nothing of an upstream runs (125).
            return Err(CallError::Denied(Denial::new(
                DenyReason::Unavailable,
                format!("{name}: {why}"),
            )));
        }
        if let Some(held) = exposed.held_as(name) {
            // Denied, not broken: the operator's pin refuses it (exit 3).
            return Err(CallError::Denied(Denial::new(
                DenyReason::Held,
                format!(
                    "{name}: the definition of tool '{}' of upstream server '{}' changed since it \
                     was approved (pinned sha256 {}, now {}); it is held back until the operator \
                     reviews it (`toolcage upstreams show {}`) and approves it",
                    held.tool,
                    held.server,
                    &held.pinned[..12.min(held.pinned.len())],
                    &held.now[..12.min(held.now.len())],
                    held.name
                ),
            )));
        }
        let Some(offered) = exposed.get(name) else {
            return self.local.prepare(name, args);
        };
        let server = self.gateway.server(&offered.server).ok_or_else(|| {
            CallError::Internal(format!("no upstream server '{}'", offered.server))
        })?;
        let resolved = self.gateway.tool_grant(server, name).map_err(|e| {
            CallError::Unsupported(format!("upstream server '{}': {e}", offered.server))
        })?;
        let args = validate::arguments(&offered.spec, args).map_err(|message| {
            CallError::InvalidArguments {
                tool: name.to_string(),
                message,
            }
        })?;
        Ok(PreparedCall {
            definition_sha256: definition::digest(&offered.spec, &resolved.grant),
            runs: runner_for(&offered.spec).runs(),
            tool: offered.spec.clone(),
            args,
            resolved,
            callers: Vec::new(),
        })
    }

    fn execute(
        &self,
        call: &PreparedCall,
        cancel: Option<&CancelToken>,
    ) -> Result<CallResult, CallError> {
        let Runner::Upstream { server, tool, .. } = &call.tool.runner else {
            return self.local.execute(call, cancel);
        };
        let gw = self.gateway.clone();
        self.runtime
            .block_on(gw.call(server, tool, &call.args, &call.resolved.grant, cancel))
    }

    fn spec(&self, name: &str) -> Option<ToolSpec> {
        match self.gateway.exposed().get(name) {
            Some(o) => Some(o.spec.clone()),
            None => self.local.spec(name),
        }
    }
}

impl Gateway {
    /// Call `tool` of `server` on this session's instance (started if
    /// needed). A failure of the server is a result with `isError`.
    pub async fn call(
        self: &Arc<Self>,
        server: &str,
        tool: &str,
        args: &Map<String, Value>,
        grant: &Grant,
        cancel: Option<&CancelToken>,
    ) -> Result<CallResult, CallError> {
        let start = Instant::now();
        let instance = match self.instance(server).await {
            Ok(i) => i,
            Err(why) => {
                return Ok(failed(
                    format!("toolcage: {why}"),
                    Exit::Code(1),
                    start,
                    None,
                ));
            }
        };
        let enforcement = Some(instance.enforcement.clone());
        let sink = self.progress_sink(cancel);
        let r = instance
            .call(tool, args.clone(), grant.timeout, cancel, sink)
            .await;
        let r = match r {
            Ok(r) => r,
            Err(CallFailure::Gone(why)) => {
                self.mark_gone(server, &why).await;
                let text = format!(
                    "toolcage: upstream server '{server}' stopped during the call, which was not \
                     sent again: {why}"
                );
                return Ok(failed(text, Exit::Code(1), start, enforcement));
            }
            Err(CallFailure::Timeout(t)) => {
                let text = format!(
                    "toolcage: {server}: tool '{tool}' timed out after {} (the policy's timeout; \
                     raise it in [upstreams.{server}.limits]); the request was cancelled",
                    crate::policy::format_duration(t)
                );
                return Ok(failed(text, Exit::Timeout, start, enforcement));
            }
            Err(CallFailure::Cancelled) => {
                return Ok(failed(
                    "cancelled".into(),
                    Exit::Cancelled,
                    start,
                    enforcement,
                ));
            }
            Err(CallFailure::Error(e)) => {
                let text =
                    format!("toolcage: upstream server '{server}' answered with an error: {e}");
                return Ok(failed(text, Exit::Code(1), start, enforcement));
            }
        };
        let is_error = r.is_error.unwrap_or(false);
        let mut content = serde_json::to_value(&r).unwrap_or_else(|_| json!({}));
        let (mut text, omitted) = cap_text(&mut content, grant.output.stdout as u64);
        // The text form (the CLI's) ends its last line; content stays exact.
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        let mut result = failed(text, Exit::Code(i32::from(is_error)), start, enforcement);
        result.is_error = is_error;
        result.outcome.stdout.bytes_omitted = omitted;
        if let Some(o) = content.as_object_mut() {
            o.remove("isError");
            o.remove("_meta");
        }
        result.content = Some(content);
        Ok(result)
    }
}

/// Cap the text blocks of an upstream result at `cap` bytes in all (a
/// marker says how much was cut); the text of all of them, as capped.
fn cap_text(result: &mut Value, cap: u64) -> (String, u64) {
    let mut left = usize::try_from(cap).unwrap_or(usize::MAX);
    let mut omitted = 0u64;
    let mut all = String::new();
    let blocks = result.get_mut("content").and_then(Value::as_array_mut);
    for block in blocks.into_iter().flatten() {
        let Some(text) = block.get_mut("text") else {
            continue;
        };
        let Some(s) = text.as_str() else { continue };
        let mut s = s.to_string();
        if s.len() > left {
            let mut cut = left;
            while !s.is_char_boundary(cut) {
                cut -= 1;
            }
            let dropped = (s.len() - cut) as u64;
            omitted += dropped;
            s.truncate(cut);
            s.push('\n');
            s.push_str(&truncation_marker(dropped));
            left = 0;
        } else {
            left -= s.len();
        }
        if !all.is_empty() {
            all.push('\n');
        }
        all.push_str(&s);
        *text = Value::String(s);
    }
    (all, omitted)
}

fn failed(
    text: String,
    exit: Exit,
    start: Instant,
    enforcement: Option<crate::sandbox::EnforcementReport>,
) -> CallResult {
    let captured = |t: &str| Captured {
        text: t.to_string(),
        bytes_kept: t.len() as u64,
        bytes_omitted: 0,
    };
    CallResult {
        is_error: !exit.success(),
        outcome: Outcome {
            exit,
            stdout: captured(&text),
            stderr: captured(""),
            duration: start.elapsed().max(Duration::from_nanos(1)),
            enforcement: enforcement.unwrap_or_else(crate::sandbox::EnforcementReport::in_process),
            created_protected: Vec::new(),
            quarantined: Vec::new(),
            restored: Vec::new(),
            unrestorable: Vec::new(),
            denials: Vec::new(),
        },
        text,
        content: None,
    }
}
