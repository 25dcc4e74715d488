//! Upstream servers' prompts: text fed to the model, so each definition
//! (name, description, arguments) is pinned like a tool's, in its own
//! document (`prompt-pins`, [`super::pins::Pins::prompts_in`]). A prompt
//! seen for the first time is pinned and offered as `server__name`; one
//! whose definition changed is held (not listed, `prompts/get` refused)
//! until the operator approves it (`toolcage upstreams show` / `approve`,
//! which list held prompts beside held tools).

use super::Gateway;
use super::pins::{Checked, PinState};
use rmcp::model::Tool;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// How long one `prompts/list` or `prompts/get` may take.
const TIMEOUT: Duration = Duration::from_secs(30);
/// Pages of one listing, at most (an endless `nextCursor`).
const MAX_PAGES: usize = 100;

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

/// Why a `prompts/get` is refused, for the client.
pub(crate) enum GetError {
    /// No such prompt, or its arguments are wrong (-32602).
    Invalid(String),
    /// Held until the operator approves its definition.
    Held(String),
    /// The server failed.
    Failed(String),
}

impl Gateway {
    /// Every server's prompts checked against their pins; the routes are
    /// replaced. The prompts offered (held ones are not), with the server
    /// in their names.
    pub(crate) async fn list_prompts(self: &Arc<Self>) -> Vec<Value> {
        let mut routes: BTreeMap<String, Route> = BTreeMap::new();
        for s in &self.servers {
            let server = s.spec.name.clone();
            let Ok(i) = self.instance(&server).await else {
                continue;
            };
            if !i.has_prompts() {
                continue;
            }
            let defs = list(i.peer()).await;
            let tools: Vec<Tool> = defs.iter().filter_map(as_tool).collect();
            let checked = match self.prompt_pins.check(&server, &tools, &BTreeSet::new()) {
                Ok(c) => c,
                Err(why) => {
                    tracing::warn!("upstream {server}: prompts not offered: {why}");
                    continue;
                }
            };
            for (t, Checked { name, state }) in tools.iter().zip(checked) {
                let Some(def) = defs.iter().find(|d| d["name"] == t.name.as_ref()) else {
                    continue;
                };
                let held = match state {
                    PinState::Changed { pinned, now } => Some((pinned, now)),
                    _ => None,
                };
                // `prefix = false`: its own name; a name another server's
                // prompt has is not offered (the first keeps it).
                let name = match self.prefixes(&server) {
                    true => name,
                    false => t.name.to_string(),
                };
                if let Some(other) = routes.get(&name) {
                    tracing::warn!(
                        "upstream {server}: prompt '{}' is not offered: its name '{name}' is \
                         also prompt '{}' of upstream server '{}'",
                        t.name,
                        other.prompt,
                        other.server
                    );
                    continue;
                }
                routes.insert(
                    name,
                    Route {
                        server: server.clone(),
                        prompt: t.name.to_string(),
                        definition: def.clone(),
                        held,
                    },
                );
            }
        }
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

    /// `prompts/get` of the prompt the client knows as `name`, its
    /// arguments checked against the pinned definition first.
    pub(crate) async fn get_prompt(
        self: &Arc<Self>,
        name: &str,
        args: Option<Map<String, Value>>,
    ) -> Result<Value, GetError> {
        // Routed from a fresh check: a definition changed since the last
        // listing is held now, not served from an old route.
        self.list_prompts().await;
        let route = self
            .prompt_routes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
            .ok_or_else(|| {
                GetError::Invalid(format!(
                    "no prompt '{name}' (prompts/list shows the prompts offered)"
                ))
            })?;
        if let Some((pinned, now)) = &route.held {
            return Err(GetError::Held(format!(
                "{name}: the definition of prompt '{}' of upstream server '{}' changed since it \
                 was approved (pinned sha256 {}, now {}); it is held back until the operator \
                 reviews it (`toolcage upstreams show {}`) and approves it",
                route.prompt,
                route.server,
                &pinned[..12.min(pinned.len())],
                &now[..12.min(now.len())],
                route.server,
            )));
        }
        let args = args.unwrap_or_default();
        check_arguments(name, &route.definition, &args).map_err(GetError::Invalid)?;
        let instance = self
            .instance(&route.server)
            .await
            .map_err(GetError::Failed)?;
        let params = serde_json::from_value(json!({"name": route.prompt, "arguments": args}))
            .map_err(|e| GetError::Invalid(e.to_string()))?;
        let cap = self
            .server(&route.server)
            .and_then(|s| s.grant.as_ref().ok())
            .map_or(0, |g| g.grant.output.stdout);
        match tokio::time::timeout(TIMEOUT, instance.peer().get_prompt(params)).await {
            Ok(Ok(r)) => Ok(bounded(serde_json::to_value(r).unwrap_or_default(), cap)),
            Ok(Err(e)) => Err(GetError::Failed(format!(
                "upstream server '{}': {e}",
                route.server
            ))),
            Err(_) => Err(GetError::Failed(format!(
                "upstream server '{}': prompts/get timed out",
                route.server
            ))),
        }
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
fn bounded(mut result: Value, cap: usize) -> Value {
    let Some(messages) = result.get_mut("messages").and_then(Value::as_array_mut) else {
        return result;
    };
    let blocks: Vec<Value> = messages
        .iter_mut()
        .map(|m| m.get_mut("content").map(Value::take).unwrap_or(Value::Null))
        .collect();
    let mut as_result = json!({"content": blocks});
    super::toolbox::bound(&mut as_result, cap);
    if let Value::Array(blocks) = as_result["content"].take() {
        for (m, b) in messages.iter_mut().zip(blocks) {
            m["content"] = b;
        }
    }
    result
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

/// `prompts/list`, page by page within [`MAX_PAGES`].
async fn list(peer: &rmcp::Peer<rmcp::RoleClient>) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let params = cursor
            .as_ref()
            .and_then(|c| serde_json::from_value(json!({"cursor": c})).ok());
        let page = match tokio::time::timeout(TIMEOUT, peer.list_prompts(params)).await {
            Ok(Ok(p)) => serde_json::to_value(p).unwrap_or_default(),
            Ok(Err(e)) => {
                tracing::warn!("upstream prompts/list: {e}");
                break;
            }
            Err(_) => {
                tracing::warn!("upstream prompts/list timed out");
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
