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
use crate::discover::{ToolKind, ToolSpec};
use crate::gate::{DenyReason, GateDenial};
use crate::policy::Grant;
use crate::sandbox::output::truncation_marker;
use crate::sandbox::{CancelToken, Captured, Exit, Outcome};
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The name a read of `server`'s resource has in the pipeline, the gate
/// and the audit log: `SERVER/resources/read` (a flat tool name never
/// holds `/`; `resources.rs` reads it).
pub(crate) const READ: &str = "/resources/read";

/// The name a `prompts/get` of `server` has in the pipeline, the gate and
/// the audit log (a flat tool name never holds `/`).
pub(crate) const GET: &str = "/prompts/get";

pub(crate) struct SessionTools {
    pub(crate) local: Arc<dyn Toolbox>,
    pub(crate) gateway: Arc<Gateway>,
    pub(crate) runtime: tokio::runtime::Handle,
}

impl Toolbox for SessionTools {
    fn prepare(&self, name: &str, args: Value) -> Result<PreparedCall, CallError> {
        if let Some(read) = self.gateway.prepare_read(name, args.clone()) {
            return read;
        }
        if let Some(get) = self.gateway.prepare_prompt(name, args.clone()) {
            return get;
        }
        let exposed = self.gateway.exposed();
        if self.local.spec(name).is_none()
            && let Some(why) = exposed.unusable_for(name, &self.gateway.servers)
        {
            // The pins cannot be trusted: nothing of an upstream runs (125).
            return Err(CallError::Denied(GateDenial::new(
                DenyReason::Unavailable,
                format!("{name}: {why}"),
            )));
        }
        if let Some(held) = exposed.held_as(name) {
            // Denied, not broken: the operator's pin refuses it (exit 3).
            return Err(CallError::Denied(GateDenial::new(
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
        let ToolKind::Upstream { server, tool, .. } = &call.tool.kind else {
            return self.local.execute(call, cancel);
        };
        let gw = self.gateway.clone();
        // A resource read ([`READ`]; no tool's name holds '/').
        if call.tool.name.ends_with(READ) && tool == "resources/read" {
            let uri = call
                .args
                .get("uri")
                .and_then(Value::as_str)
                .unwrap_or_default();
            return self
                .runtime
                .block_on(gw.read(server, uri, &call.resolved.grant));
        }
        // A prompt's get ([`GET`]).
        if call.tool.name.ends_with(GET) && tool == "prompts/get" {
            return self
                .runtime
                .block_on(gw.get_prompt(server, &call.args, &call.resolved.grant));
        }
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
    pub(crate) async fn call(
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
                return Ok(not_reached(&why, start));
            }
        };
        let enforcement = Some(instance.enforcement.clone());
        let sink = self.progress_sink(cancel);
        let elicits = instance.elicits.begin();
        let r = instance
            .call(tool, args.clone(), grant.timeout, cancel, sink)
            .await;
        let declined = elicits.finish();
        let mut result = self
            .result_of(server, tool, r, grant, start, enforcement)
            .await;
        if let Ok(res) = &mut result {
            res.outcome
                .denials
                .extend(declined_elicitations(server, declined));
        }
        result
    }

    /// The call's answer, or its failure, as the pipeline's result.
    async fn result_of(
        &self,
        server: &str,
        tool: &str,
        r: Result<rmcp::model::CallToolResult, CallFailure>,
        grant: &Grant,
        start: Instant,
        enforcement: Option<crate::sandbox::EnforcementReport>,
    ) -> Result<CallResult, CallError> {
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
        drop(r);
        if let Some(o) = content.as_object_mut() {
            o.remove("isError");
            o.remove("_meta");
        }
        let b = bound(&mut content, grant.output.stdout);
        let mut text = b.text;
        // The text form (the CLI's) ends its last line; content stays exact.
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        let mut result = failed(text, Exit::Code(i32::from(is_error)), start, enforcement);
        result.is_error = is_error;
        result.outcome.stdout.bytes_kept = b.kept;
        result.outcome.stdout.bytes_omitted = b.omitted;
        result.content = Some(content);
        result.content_kinds = Some(b.kinds);
        Ok(result)
    }
}

/// The elicitation requests declined during a call, for its audit record.
fn declined_elicitations(server: &str, reasons: Vec<String>) -> Vec<crate::sandbox::Denial> {
    let mut out: Vec<crate::sandbox::Denial> = Vec::new();
    for reason in reasons {
        let why = format!("elicitation request declined: {reason}");
        match out.iter_mut().find(|d| d.reason == why) {
            Some(d) => d.count += 1,
            None => out.push(crate::sandbox::Denial {
                layer: "elicitation",
                op: "elicit",
                target: server.to_string(),
                rule: None,
                reason: why,
                fix: None,
                count: 1,
                inferred: false,
            }),
        }
    }
    out
}

/// What [`bound`] left of an upstream result.
pub(super) struct Bounded {
    /// The text of its text blocks (and of toolcage's notes), as capped.
    pub(super) text: String,
    /// Bytes of content passed on (text, base64 data, resource text or
    /// blob, other blocks and `structuredContent` as JSON).
    pub(super) kept: u64,
    /// Bytes cut or left out.
    pub(super) omitted: u64,
    /// Each kind of content: its blocks, bytes kept and left out.
    pub(super) kinds: Value,
}

/// Bound every kind of content of an upstream result to `cap` bytes in
/// all, in order: text (and an embedded resource's text) is cut with the
/// truncation marker; what cannot be cut and stay valid (image and audio
/// data, a resource's blob, a resource link or an unknown block,
/// `structuredContent`) is passed whole or replaced by a note saying what
/// was left out. `_meta` keys in toolcage's namespace (`toolcage/...`)
/// are removed from every block: only toolcage speaks for toolcage.
pub(super) fn bound(result: &mut Value, cap: usize) -> Bounded {
    let mut b = Budget {
        left: cap,
        cap,
        kept: 0,
        omitted: 0,
        kinds: Map::new(),
    };
    let mut all = String::new();
    let mut blocks: Vec<Value> = match result.get_mut("content").map(Value::take) {
        Some(Value::Array(a)) => a,
        _ => Vec::new(),
    };
    for block in &mut blocks {
        strip_our_meta(block);
        if let Some(r) = block.get_mut("resource") {
            strip_our_meta(r);
        }
        escape_imitations(block);
        let kind = block
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_string();
        let before = (b.kept, b.omitted);
        *block = b.block(std::mem::take(block));
        b.count(&kind, before);
        let text = block.get("text").and_then(Value::as_str).or_else(|| {
            block
                .get("resource")
                .and_then(|r| r.get("text"))
                .and_then(Value::as_str)
        });
        if let Some(t) = text {
            if !all.is_empty() {
                all.push('\n');
            }
            all.push_str(t);
        }
    }
    if let Some(o) = result.as_object_mut()
        && let Some(structured) = o.remove("structuredContent")
    {
        let n = json_len(&structured);
        let before = (b.kept, b.omitted);
        let note = (!b.take(n)).then(|| b.note("structuredContent", n));
        b.count("structuredContent", before);
        match note {
            None => {
                o.insert("structuredContent".into(), structured);
            }
            Some(note) => {
                if !all.is_empty() {
                    all.push('\n');
                }
                all.push_str(&note);
                blocks.push(json!({"type": "text", "text": note}));
            }
        }
    }
    result["content"] = Value::Array(blocks);
    Bounded {
        text: all,
        kept: b.kept,
        omitted: b.omitted,
        kinds: Value::Object(b.kinds),
    }
}

struct Budget {
    left: usize,
    cap: usize,
    kept: u64,
    omitted: u64,
    kinds: Map<String, Value>,
}

impl Budget {
    /// One block of `kind` was bounded: what it added to kept and omitted
    /// since `before` is its share.
    fn count(&mut self, kind: &str, before: (u64, u64)) {
        let (kept, omitted) = (self.kept - before.0, self.omitted - before.1);
        let entry = self
            .kinds
            .entry(kind.to_string())
            .or_insert_with(|| json!({"blocks": 0, "kept": 0, "omitted": 0}));
        for (key, add) in [("blocks", 1), ("kept", kept), ("omitted", omitted)] {
            let n = entry[key].as_u64().unwrap_or(0).saturating_add(add);
            entry[key] = json!(n);
        }
    }

    /// Take `n` bytes if they fit in what is left.
    fn take(&mut self, n: usize) -> bool {
        if n > self.left {
            return false;
        }
        self.left -= n;
        self.kept += n as u64;
        true
    }

    /// Left out whole: what the agent reads instead.
    fn note(&mut self, what: &str, n: usize) -> String {
        self.omitted += n as u64;
        format!(
            "[toolcage: {what} of {} left out: over the {} output cap (raise it with \
             [upstreams.SERVER.limits] stdout)]",
            crate::text::units::format_size(n as u64),
            crate::text::units::format_size(self.cap as u64),
        )
    }

    /// `s` cut to what is left, with the truncation marker.
    fn cut(&mut self, s: &str) -> String {
        if self.take(s.len()) {
            return s.to_string();
        }
        let mut at = self.left;
        while !s.is_char_boundary(at) {
            at -= 1;
        }
        let dropped = (s.len() - at) as u64;
        self.kept += at as u64;
        self.omitted += dropped;
        self.left = 0;
        format!("{}\n{}", &s[..at], truncation_marker(dropped))
    }

    fn block(&mut self, mut block: Value) -> Value {
        let kind = block
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_string();
        match kind.as_str() {
            "text" => {
                if let Some(t) = block.get("text").and_then(Value::as_str) {
                    block["text"] = Value::String(self.cut(t));
                }
                block
            }
            "image" | "audio" => {
                let n = block
                    .get("data")
                    .and_then(Value::as_str)
                    .map_or(0, str::len);
                match self.take(n) {
                    true => block,
                    false => self.replaced(&format!("{kind} data"), n),
                }
            }
            "resource" => {
                let resource = block.get("resource");
                if let Some(t) = resource.and_then(|r| r.get("text")).and_then(Value::as_str) {
                    block["resource"]["text"] = Value::String(self.cut(t));
                    return block;
                }
                let n = resource
                    .and_then(|r| r.get("blob"))
                    .and_then(Value::as_str)
                    .map_or(0, str::len);
                match self.take(n) {
                    true => block,
                    false => self.replaced("resource blob", n),
                }
            }
            // A resource link, or a kind toolcage does not know: as JSON.
            _ => {
                let n = json_len(&block);
                match self.take(n) {
                    true => block,
                    false => self.replaced(&format!("a {kind} block"), n),
                }
            }
        }
    }

    fn replaced(&mut self, what: &str, n: usize) -> Value {
        json!({"type": "text", "text": self.note(what, n)})
    }
}

/// Remove `toolcage/...` keys from `v`'s `_meta`.
fn strip_our_meta(v: &mut Value) {
    if let Some(meta) = v.get_mut("_meta").and_then(Value::as_object_mut) {
        meta.retain(|k, _| !k.starts_with("toolcage/"));
    }
}

/// A text block's lines that imitate toolcage's own (`[toolcage: ...`)
/// get a `\` before them, as a local tool's output does
/// ([`crate::call::result::shown`]): only toolcage speaks for toolcage.
fn escape_imitations(block: &mut Value) {
    if block.get("type").and_then(Value::as_str) != Some("text") {
        return;
    }
    if let Some(Value::String(t)) = block.get_mut("text")
        && let std::borrow::Cow::Owned(escaped) = crate::call::result::shown(t)
    {
        *t = escaped;
    }
}

fn json_len(v: &Value) -> usize {
    serde_json::to_vec(v).map_or(0, |b| b.len())
}

/// A call that did not reach its server: toolcage says why (exit 1).
pub(super) fn not_reached(why: &dyn std::fmt::Display, start: Instant) -> CallResult {
    failed(format!("toolcage: {why}"), Exit::Code(1), start, None)
}

pub(super) fn failed(
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
            removed: Vec::new(),
            unrestorable: Vec::new(),
            unchecked: Vec::new(),
            denials: Vec::new(),
        },
        text,
        content: None,
        content_kinds: None,
    }
}
