//! The messages a prompt's `prompts/get` returns for no arguments: what
//! the model reads, pinned like the prompt's definition. They are pinned
//! lazily, the first time a client gets the prompt with no arguments (a
//! prompt with a required argument never is), in a document of their own
//! (`prompt-message-pins`, [`super::pins::Pins::prompt_messages_in`]) so
//! the tool and prompt digests stay as they were. A later get with no
//! arguments whose messages differ is refused as held (and recorded);
//! `toolcage upstreams show` gets each such prompt again to list what
//! changed, and `approve` pins exactly that.

use super::Gateway;
use super::pins::PinState;
use rmcp::model::Tool;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;

/// What the pins see of a prompt's messages: a "tool" named as the prompt
/// whose input schema holds them (the pins hash name, description and
/// schema), described as what it is for `upstreams show`.
pub(crate) fn as_tool(prompt: &str, messages: &Value) -> Option<Tool> {
    serde_json::from_value(json!({
        "name": prompt,
        "description": "the messages prompts/get returns for no arguments",
        "inputSchema": {"messages": messages},
    }))
    .ok()
}

/// Whether `arguments` (a get's) are none at all.
pub(crate) fn none(arguments: &Value) -> bool {
    match arguments {
        Value::Null => true,
        Value::Object(a) => a.is_empty(),
        _ => false,
    }
}

impl Gateway {
    /// `messages`, the answer of `server` to a get of `prompt` with no
    /// arguments, against their pin (pinned now the first time). `Ok(None)`:
    /// as pinned; `Ok(Some((pinned, now)))`: changed, held; `Err`: the
    /// pins cannot be read (refuse, with this).
    pub(crate) fn check_messages(
        &self,
        server: &str,
        prompt: &str,
        messages: &Value,
    ) -> Result<Option<(String, String)>, String> {
        let tool = as_tool(prompt, messages)
            .ok_or_else(|| format!("prompt '{prompt}': its messages cannot be pinned"))?;
        let checked = self
            .prompt_message_pins
            .check(server, &[tool], &BTreeSet::new())?;
        Ok(match checked.into_iter().next().map(|c| c.state) {
            Some(PinState::Changed { pinned, now }) => Some((pinned, now)),
            _ => None,
        })
    }

    /// The prompts of `server` whose messages (for no arguments) are
    /// pinned and differ now: each got again, as the server answers now
    /// (the name the client sees, the messages as the pins see them). A
    /// prompt whose definition is held is listed as that, not here.
    pub(crate) async fn held_prompt_messages(
        self: &Arc<Self>,
        server: &str,
    ) -> Vec<(String, Tool)> {
        self.list_prompts().await;
        let routes: Vec<(String, String)> = self
            .prompt_routes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|(_, r)| r.server == server && r.held.is_none())
            .map(|(n, r)| (n.clone(), r.prompt.clone()))
            .collect();
        let mut out = Vec::new();
        for (name, prompt) in routes {
            if !matches!(self.prompt_message_pins.pin(server, &prompt), Ok(Some(_))) {
                continue;
            }
            let messages = match self.messages_now(server, &prompt).await {
                Ok(m) => m,
                Err(why) => {
                    tracing::warn!("upstream {server}: prompt '{prompt}': {why}");
                    continue;
                }
            };
            if let Ok(Some(_)) = self.check_messages(server, &prompt, &messages)
                && let Some(tool) = as_tool(&prompt, &messages)
            {
                out.push((name, tool));
            }
        }
        out
    }

    /// What `server` answers now to a get of `prompt` with no arguments:
    /// its messages, within the server's timeout.
    async fn messages_now(self: &Arc<Self>, server: &str, prompt: &str) -> Result<Value, String> {
        let instance = self.instance(server).await?;
        let params = serde_json::from_value(json!({"name": prompt, "arguments": {}}))
            .map_err(|e| e.to_string())?;
        let timeout = self.request_timeout(server);
        match tokio::time::timeout(timeout, instance.peer().get_prompt(params)).await {
            Ok(Ok(r)) => Ok(serde_json::to_value(r)
                .ok()
                .and_then(|v| v.get("messages").cloned())
                .unwrap_or(json!([]))),
            Ok(Err(e)) => Err(format!("prompts/get: {e}")),
            Err(_) => Err(format!(
                "prompts/get timed out after {}",
                crate::policy::format_duration(timeout)
            )),
        }
    }
}
