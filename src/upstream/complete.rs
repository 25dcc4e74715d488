//! `completion/complete` for upstream prompts and resource templates:
//! routed to the server whose prompt (by the name the client sees, not
//! held) or whose `uriTemplate` (as that server listed it) the reference
//! names, with the prompt's name rewritten to the server's own. Anything
//! else is an error, never a guess.

use super::Gateway;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// How long one completion may take.
const TIMEOUT: Duration = Duration::from_secs(30);

impl Gateway {
    /// Forward `request` (a `completion/complete`'s params, as JSON) to
    /// the server its `ref` names. `Err`: why it was not (for the client).
    pub(crate) async fn complete(self: &Arc<Self>, mut request: Value) -> Result<Value, String> {
        let kind = request["ref"]["type"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let server = match kind.as_str() {
            "ref/prompt" => {
                let name = request["ref"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                self.list_prompts().await;
                let route = self
                    .prompt_routes
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(&name)
                    .cloned()
                    .ok_or_else(|| format!("no prompt '{name}' (prompts/list shows them)"))?;
                if route.held.is_some() {
                    return Err(format!(
                        "prompt '{name}' is held: its definition changed since it was approved \
                         (`toolcage upstreams show {}`)",
                        route.server
                    ));
                }
                request["ref"]["name"] = json!(route.prompt);
                route.server
            }
            "ref/resource" => {
                let uri = request["ref"]["uri"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                self.list_resource_templates().await;
                self.template_server(&uri).ok_or_else(|| {
                    format!(
                        "no upstream server listed the resource template '{uri}' \
                         (resources/templates/list shows them)"
                    )
                })?
            }
            other => return Err(format!("cannot complete a reference of type '{other}'")),
        };
        let instance = self.instance(&server).await?;
        let params = serde_json::from_value(request).map_err(|e| e.to_string())?;
        match tokio::time::timeout(TIMEOUT, instance.peer().complete(params)).await {
            Ok(Ok(r)) => serde_json::to_value(r).map_err(|e| e.to_string()),
            Ok(Err(e)) => Err(format!("upstream server '{server}': {e}")),
            Err(_) => Err(format!("upstream server '{server}': completion timed out")),
        }
    }
}
