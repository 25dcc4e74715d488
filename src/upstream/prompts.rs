//! Upstream servers' prompts: text fed to the model, so each definition
//! (name, description, arguments) is pinned like a tool's, in its own
//! document (`prompt-pins`, [`super::pins::Pins::prompts_in`]). A prompt
//! seen for the first time is pinned and offered as `server__name`; one
//! whose definition changed is held (not listed, `prompts/get` refused)
//! until the operator approves it (`toolcage upstreams show` / `approve`,
//! which list held prompts beside held tools). A `prompts/get` runs
//! through the call pipeline as `SERVER/prompts/get` (a name no tool can
//! have): its prepare refuses a held prompt or wrong arguments, and the
//! gate limits and records it like a resource read. The messages a get
//! with no arguments returns are pinned too ([`super::prompt_messages`]).
//! With `prefix = false`, a name two prompts claim is offered to neither.

use super::Gateway;
use super::pins::{Checked, PinState};
use super::prompt_messages;
use super::toolbox::{Bounded, bound, failed, not_reached};
use crate::call::{CallError, CallResult, PreparedCall};
use crate::gate::{DenyReason, GateDenial};
use crate::policy::Grant;
use crate::sandbox::Exit;
use rmcp::model::Tool;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Pages of one listing, at most (an endless `nextCursor`).
const MAX_PAGES: usize = 100;

/// The suffix of a prompt get's name in the pipeline (defined with the
/// toolbox, which routes it).
pub(crate) use super::toolbox::GET;

pub(crate) fn get_name(server: &str) -> String {
    format!("{server}{GET}")
}

/// A prompt of a server, by the name the client sees.
#[derive(Debug, Clone)]
pub(crate) struct Route {
    pub(crate) server: String,
    /// Its name on the server.
    pub(crate) prompt: String,
    /// Its definition as the server reports it now.
    pub(crate) definition: Value,
    /// `Some((pinned, now))`: changed since pinned, held.
    pub(crate) held: Option<(String, String)>,
}

/// A prompt not offered because another prompt has the name the client
/// would see (`prefix = false`): an error of the operator's configuration.
#[derive(Debug, Clone)]
pub(crate) struct Collision {
    pub(crate) server: String,
    pub(crate) prompt: String,
    /// The name both claim.
    pub(crate) name: String,
    /// One line naming both, and the fix.
    pub(crate) why: String,
}

/// A prompt as the pins see it: a tool whose input schema holds its
/// arguments (the pins hash name, description and schema).
pub(crate) fn as_tool(prompt: &Value) -> Option<Tool> {
    serde_json::from_value(json!({
        "name": prompt.get("name")?,
        "description": prompt.get("description"),
        "inputSchema": {"arguments": prompt.get("arguments").cloned().unwrap_or(json!([]))},
    }))
    .ok()
}

/// The refusal of a get of the prompt the client knows as `name`, held:
/// `what` changed since it was approved (a phrase: "the definition of
/// prompt 'p' of upstream server 's' changed since it was approved").
fn held(name: &str, route: &Route, what: &str, pinned: &str, now: &str) -> CallError {
    CallError::Denied(GateDenial::new(
        DenyReason::Held,
        format!(
            "{name}: {what} (pinned sha256 {}, now {}); it is held back until the operator \
             reviews it (`toolcage upstreams show {}`) and approves it",
            &pinned[..12.min(pinned.len())],
            &now[..12.min(now.len())],
            route.server,
        ),
    ))
}

impl Gateway {
    /// Every server's prompts checked against their pins; the routes are
    /// replaced. The prompts offered (held ones are not, nor those whose
    /// name another prompt has: an error, logged once), with the server in
    /// their names.
    pub(crate) async fn list_prompts(self: &Arc<Self>) -> Vec<Value> {
        let (routes, collisions) = self.prompts_now().await;
        let mut logged = self
            .prompt_collisions_logged
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        for c in collisions {
            // The operator's configuration is wrong: an error, said once.
            if logged.insert(c.why.clone()) {
                tracing::error!("upstream {}: {}", c.server, c.why);
            }
        }
        drop(logged);
        let offered = routes
            .iter()
            .filter(|(_, r)| r.held.is_none())
            .map(|(name, r)| {
                let mut d = r.definition.clone();
                d["name"] = json!(name);
                d
            })
            .collect();
        *self.prompt_routes.lock().unwrap_or_else(|p| p.into_inner()) = routes;
        offered
    }

    /// The prompts not offered because another prompt has their name
    /// (`prefix = false`), for `check` and `upstreams`.
    pub(crate) async fn prompt_collisions(self: &Arc<Self>) -> Vec<Collision> {
        self.prompts_now().await.1
    }

    /// Every server's prompts by the name the client sees, checked against
    /// their pins; and those two or more prompts claim the name of (none
    /// of which is routed: fail closed, never "the first one wins").
    async fn prompts_now(self: &Arc<Self>) -> (BTreeMap<String, Route>, Vec<Collision>) {
        let mut claims: BTreeMap<String, Vec<Route>> = BTreeMap::new();
        for s in &self.servers {
            let server = s.spec.name.clone();
            for (name, route) in self.prompts_of(&server).await {
                claims.entry(name).or_default().push(route);
            }
        }
        let mut routes = BTreeMap::new();
        let mut collisions = Vec::new();
        for (name, mut claimed) in claims {
            if claimed.len() == 1 {
                routes.insert(name, claimed.remove(0));
                continue;
            }
            let mut sections: Vec<String> = (claimed.iter())
                .filter(|r| !self.prefixes(&r.server))
                .map(|r| format!("[upstreams.{}]", r.server))
                .collect();
            sections.dedup();
            let fix = format!(
                "rename one, or set prefix = true in {}",
                sections.join(" or ")
            );
            for (i, r) in claimed.iter().enumerate() {
                let others: Vec<String> = (claimed.iter().enumerate())
                    .filter(|(j, _)| *j != i)
                    .map(|(_, o)| {
                        format!("prompt '{}' of upstream server '{}'", o.prompt, o.server)
                    })
                    .collect();
                collisions.push(Collision {
                    server: r.server.clone(),
                    prompt: r.prompt.clone(),
                    why: format!(
                        "prompt '{}' of upstream server '{}': its name '{name}' is also the name \
                         of {}; neither is offered ({fix})",
                        r.prompt,
                        r.server,
                        others.join(" and ")
                    ),
                    name: name.clone(),
                });
            }
        }
        (routes, collisions)
    }

    /// `server`'s prompts (none if it is not running or declares none),
    /// checked against their pins, by the name the client sees: `server__name`
    /// as pinned, or its own with `prefix = false`.
    async fn prompts_of(self: &Arc<Self>, server: &str) -> Vec<(String, Route)> {
        let Ok(i) = self.instance(server).await else {
            return Vec::new();
        };
        if !i.has_prompts() {
            return Vec::new();
        }
        let defs = list(i.peer(), server, self.request_timeout(server)).await;
        let tools: Vec<Tool> = defs.iter().filter_map(as_tool).collect();
        let checked = match self.prompt_pins.check(server, &tools, &BTreeSet::new()) {
            Ok(c) => c,
            Err(why) => {
                tracing::warn!("upstream {server}: prompts not offered: {why}");
                return Vec::new();
            }
        };
        let mut out = Vec::new();
        for (t, Checked { name, state }) in tools.iter().zip(checked) {
            let Some(def) = defs.iter().find(|d| d["name"] == t.name.as_ref()) else {
                continue;
            };
            let held = match state {
                PinState::Changed { pinned, now } => Some((pinned, now)),
                _ => None,
            };
            let name = match self.prefixes(server) {
                true => name,
                false => t.name.to_string(),
            };
            let route = Route {
                server: server.to_string(),
                prompt: t.name.to_string(),
                definition: def.clone(),
                held,
            };
            out.push((name, route));
        }
        out
    }

    /// The server of the prompt the client knows as `name`, routed from a
    /// fresh listing (a definition changed since the last one is held now,
    /// not served from an old route); `None`: no such prompt. Nothing is
    /// checked or asked of the server here: the pipeline's prepare does
    /// ([`Self::prepare_prompt`]), so a refusal is recorded.
    pub(crate) async fn prompt_server(self: &Arc<Self>, name: &str) -> Option<String> {
        self.list_prompts().await;
        self.route_of(name).map(|r| r.server)
    }

    /// The route of the prompt a get of `server` names (`args`: the `name`
    /// the client knows and its `arguments`), when it is that server's, is
    /// not held and its arguments are the ones it declares; else the
    /// refusal (`pipeline_name`: the get's name in the pipeline).
    fn checked_get(
        &self,
        pipeline_name: &str,
        server: &str,
        args: &Value,
    ) -> Result<Route, CallError> {
        let name = args.get("name").and_then(Value::as_str).unwrap_or_default();
        let invalid = |message: String| CallError::InvalidArguments {
            tool: pipeline_name.to_string(),
            message,
        };
        let route = match self.route_of(name) {
            Some(r) if r.server == server => r,
            _ => {
                return Err(invalid(format!(
                    "no prompt '{name}' of upstream server '{server}' (prompts/list shows the \
                     prompts offered)"
                )));
            }
        };
        if let Some((pinned, now)) = &route.held {
            let what = format!(
                "the definition of prompt '{}' of upstream server '{server}' changed since it \
                 was approved",
                route.prompt
            );
            return Err(held(name, &route, &what, pinned, now));
        }
        match args.get("arguments").unwrap_or(&json!({})) {
            Value::Object(a) => check_arguments(name, &route.definition, a),
            _ => Err(format!("prompt '{name}': arguments must be an object")),
        }
        .map_err(invalid)?;
        Ok(route)
    }

    fn route_of(&self, name: &str) -> Option<Route> {
        self.prompt_routes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
    }

    /// `prompts/get` on `server` as the pipeline runs it (`args`: the
    /// `name` the client knows and its `arguments`, checked by
    /// [`Self::checked_get`], again here); the messages bounded by the stdout cap, the
    /// record given their kinds, bytes and digest.
    pub(crate) async fn get_prompt(
        self: &Arc<Self>,
        server: &str,
        args: &Map<String, Value>,
        grant: &Grant,
    ) -> Result<CallResult, CallError> {
        let start = Instant::now();
        // Checked again here, whatever surface prepared it.
        let route = self.checked_get(&get_name(server), server, &Value::Object(args.clone()))?;
        let arguments = args.get("arguments").cloned().unwrap_or(json!({}));
        let instance = match self.instance(server).await {
            Ok(i) => i,
            Err(why) => {
                return Ok(not_reached(&why, start));
            }
        };
        let enforcement = Some(instance.enforcement.clone());
        let params = serde_json::from_value(json!({"name": route.prompt, "arguments": arguments}))
            .map_err(|e| CallError::Internal(e.to_string()))?;
        let answer = tokio::time::timeout(grant.timeout, instance.peer().get_prompt(params)).await;
        let r = match answer {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                let text = format!("upstream server '{server}': {e}");
                return Ok(failed(text, Exit::Code(1), start, enforcement));
            }
            Err(_) => {
                let text = format!(
                    "toolcage: {server}: prompts/get of prompt '{}' timed out after {} (the \
                     policy's timeout; raise it in [upstreams.{server}.limits])",
                    route.prompt,
                    crate::policy::format_duration(grant.timeout)
                );
                return Ok(failed(text, Exit::Timeout, start, enforcement));
            }
        };
        let answer = serde_json::to_value(r).unwrap_or_default();
        if prompt_messages::none(&arguments) {
            self.messages_as_pinned(server, &route, args, &answer)?;
        }
        let (content, b) = bounded(answer, grant.output.stdout);
        let mut kinds = b.kinds;
        kinds["sha256"] = json!(super::resources::sha256_hex(
            &serde_json::to_vec(&content["messages"]).unwrap_or_default()
        ));
        let mut result = failed(b.text, Exit::Code(0), start, enforcement);
        result.outcome.stdout.bytes_kept = b.kept;
        result.outcome.stdout.bytes_omitted = b.omitted;
        result.content = Some(content);
        result.content_kinds = Some(kinds);
        Ok(result)
    }

    /// The messages of `answer` (to a get with no arguments, `args`) as
    /// pinned, or pinned now the first time; else the get is refused as
    /// held (the pins unreadable: refused as well).
    fn messages_as_pinned(
        &self,
        server: &str,
        route: &Route,
        args: &Map<String, Value>,
        answer: &Value,
    ) -> Result<(), CallError> {
        let name = args.get("name").and_then(Value::as_str).unwrap_or_default();
        let messages = answer.get("messages").cloned().unwrap_or(json!([]));
        match self.check_messages(server, &route.prompt, &messages) {
            Ok(None) => Ok(()),
            Ok(Some((pinned, now))) => {
                let what = format!(
                    "the messages prompt '{}' of upstream server '{server}' returns for no \
                     arguments changed since they were approved",
                    route.prompt
                );
                Err(held(name, route, &what, &pinned, &now))
            }
            Err(why) => Err(CallError::Denied(GateDenial::new(
                DenyReason::Unavailable,
                format!("{name}: {why}"),
            ))),
        }
    }

    /// A `prompts/get` of `server` prepared for the pipeline; `None` when
    /// `name` is not one ([`GET`]).
    pub(crate) fn prepare_prompt(
        &self,
        name: &str,
        args: Value,
    ) -> Option<Result<PreparedCall, CallError>> {
        let server = self.server(name.strip_suffix(GET)?)?;
        let schema = json!({
            "type": "object",
            "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}},
            "required": ["name"],
        });
        let prepared = server
            .grant
            .clone()
            .map_err(|e| {
                CallError::Unsupported(format!("upstream server '{}': {e}", server.spec.name))
            })
            .and_then(|resolved| {
                let what = format!("Get a prompt of upstream server '{}'", server.spec.name);
                self.prepared_request(server, name, "prompts/get", what, schema, resolved, args)
            })
            .and_then(|prepared| {
                let args = Value::Object(prepared.args.clone());
                self.checked_get(name, &server.spec.name, &args)?;
                Ok(prepared)
            });
        Some(prepared)
    }

    /// The held prompts of `server` as their server reports them now:
    /// (the name the client sees, the prompt as the pins see it).
    pub(crate) async fn held_prompts(self: &Arc<Self>, server: &str) -> Vec<(String, Tool)> {
        self.list_prompts().await;
        let routes = self
            .prompt_routes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        routes
            .into_iter()
            .filter(|(_, r)| r.server == server && r.held.is_some())
            .filter_map(|(n, r)| as_tool(&r.definition).map(|t| (n, t)))
            .collect()
    }
}

/// The messages' content within the server's stdout cap, as a tool
/// result's is (text cut with the marker, what cannot be cut left out
/// with a note).
fn bounded(mut result: Value, cap: usize) -> (Value, Bounded) {
    if result.get("messages").and_then(Value::as_array).is_none() {
        result["messages"] = json!([]);
    }
    let Some(messages) = result.get_mut("messages").and_then(Value::as_array_mut) else {
        return (result, bound(&mut json!({}), cap));
    };
    let blocks: Vec<Value> = messages
        .iter_mut()
        .map(|m| m.get_mut("content").map(Value::take).unwrap_or(Value::Null))
        .collect();
    let mut as_result = json!({"content": blocks});
    let b = bound(&mut as_result, cap);
    if let Value::Array(blocks) = as_result["content"].take() {
        for (m, blk) in messages.iter_mut().zip(blocks) {
            m["content"] = blk;
        }
    }
    (result, b)
}

/// Every required argument present, none the prompt does not declare,
/// each a string (MCP prompt arguments are strings).
fn check_arguments(name: &str, def: &Value, args: &Map<String, Value>) -> Result<(), String> {
    let declared: Vec<&Value> = def
        .get("arguments")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    for a in &declared {
        let Some(n) = a.get("name").and_then(Value::as_str) else {
            continue;
        };
        if a.get("required") == Some(&json!(true)) && !args.contains_key(n) {
            return Err(format!("prompt '{name}' needs the argument '{n}'"));
        }
    }
    for (k, v) in args {
        if !declared.iter().any(|a| a["name"] == k.as_str()) {
            return Err(format!("prompt '{name}' has no argument '{k}'"));
        }
        if !v.is_string() {
            return Err(format!("prompt '{name}': argument '{k}' must be a string"));
        }
    }
    Ok(())
}

/// `prompts/list`, page by page within [`MAX_PAGES`], each page within
/// `timeout` (the server's).
async fn list(peer: &rmcp::Peer<rmcp::RoleClient>, server: &str, timeout: Duration) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let params = cursor
            .as_ref()
            .and_then(|c| serde_json::from_value(json!({"cursor": c})).ok());
        let page = match tokio::time::timeout(timeout, peer.list_prompts(params)).await {
            Ok(Ok(p)) => serde_json::to_value(p).unwrap_or_default(),
            Ok(Err(e)) => {
                tracing::warn!("upstream {server}: prompts/list: {e}");
                break;
            }
            Err(_) => {
                tracing::warn!(
                    "upstream {server}: prompts/list timed out after {} (the policy's timeout; \
                     raise it in [upstreams.{server}.limits])",
                    crate::policy::format_duration(timeout)
                );
                break;
            }
        };
        if let Some(items) = page.get("prompts").and_then(Value::as_array) {
            out.extend(items.iter().cloned());
        }
        cursor = page
            .get("nextCursor")
            .and_then(Value::as_str)
            .map(str::to_string);
        if cursor.is_none() {
            break;
        }
    }
    out
}
