//! The MCP client toolcage is to an upstream server: what it declares
//! (elicitation only when the downstream client declared it; never
//! sampling; roots = the project), and what it does with the server's
//! requests and notifications.
// Roots and logging are deprecated by SEP-2577 in rmcp (for protocol
// 2026-07-28); upstreams speak 2025-11-25, where they are current.
#![allow(deprecated)]

use rmcp::model::{
    ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction, ListRootsResult,
    LoggingMessageNotificationParam, ProgressNotificationParam,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, ErrorData as McpError, Peer, RoleClient, RoleServer};
use std::sync::Arc;

/// Told when a server's tool list changed (the gateway re-lists it).
pub type OnListChanged = Arc<dyn Fn(String) + Send + Sync>;

/// Where a server's progress notifications for one request go.
pub type ProgressSink = tokio::sync::mpsc::UnboundedSender<ProgressNotificationParam>;

/// The requests in flight whose progress is wanted, by progress token.
pub type ProgressRoutes =
    Arc<std::sync::Mutex<std::collections::HashMap<rmcp::model::ProgressToken, ProgressSink>>>;

#[derive(Clone)]
pub struct UpstreamClient {
    pub server: String,
    /// The downstream client, when it declared elicitation: the upstream's
    /// elicitation requests go to it, prefixed with the server's name.
    pub downstream: Option<Peer<RoleServer>>,
    pub on_list_changed: Option<OnListChanged>,
    /// `file://` URIs of the server's read roots.
    pub roots: Vec<String>,
    /// How long a person has to answer a forwarded elicitation.
    pub elicitation_timeout: std::time::Duration,
    pub progress: ProgressRoutes,
}

impl UpstreamClient {
    fn elicits(&self) -> bool {
        self.downstream
            .as_ref()
            .is_some_and(|p| !p.supported_elicitation_modes().is_empty())
    }
}

impl ClientHandler for UpstreamClient {
    fn get_info(&self) -> ClientConfig {
        let mut caps = serde_json::json!({"roots": {"listChanged": false}});
        if self.elicits() {
            caps["elicitation"] = serde_json::json!({"form": {}});
        }
        let v = serde_json::json!({
            "protocolVersion": "2025-11-25",
            "capabilities": caps,
            "clientInfo": {"name": "toolcage-gateway", "version": env!("CARGO_PKG_VERSION")},
        });
        serde_json::from_value(v).unwrap_or_default()
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, McpError> {
        let roots: Vec<serde_json::Value> = self
            .roots
            .iter()
            .map(|uri| serde_json::json!({"uri": uri}))
            .collect();
        serde_json::from_value(serde_json::json!({"roots": roots}))
            .map_err(|e| McpError::internal_error(e.to_string(), None))
    }

    async fn create_elicitation(
        &self,
        mut request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        let decline = ElicitResult::new(ElicitationAction::Decline);
        let Some(peer) = self.downstream.as_ref().filter(|_| self.elicits()) else {
            return Ok(decline);
        };
        // Only form requests pass: a URL request is a phishing vector.
        let mut v = serde_json::to_value(&request).unwrap_or_default();
        if v.get("mode").and_then(|m| m.as_str()) == Some("url") {
            return Ok(decline);
        }
        if let Some(m) = v.get_mut("message")
            && let Some(s) = m.as_str()
        {
            *m = serde_json::Value::String(format!("[{}] {s}", self.server));
            if let Ok(r) = serde_json::from_value(v) {
                request = r;
            }
        }
        match tokio::time::timeout(self.elicitation_timeout, peer.create_elicitation(request)).await
        {
            Ok(Ok(r)) => Ok(r),
            _ => Ok(decline),
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(f) = &self.on_list_changed {
            f(self.server.clone());
        }
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let routes = self.progress.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(sink) = routes.get(&params.progress_token) {
            let _ = sink.send(params);
        }
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        tracing::debug!(server = %self.server, "upstream log: {}", params.data);
    }
}
