//! The MCP client toolcage is to an upstream server: what it declares
//! (elicitation only when the downstream client declared it; never
//! sampling; roots = the project), and what it does with the server's
//! requests and notifications.
//!
//! An upstream's elicitation reaches the person only while a call of that
//! server is in flight, at most [`ELICIT_PER_CALL`] times per call and
//! [`ELICIT_PER_SESSION`] times per client session, labelled with the
//! server's name and with control characters shown escaped (a server
//! cannot be named `toolcage`: discovery refuses it). Any other request is
//! declined; a decline during a call is recorded in that call's audit
//! record (its `denials`).
// Roots and logging are deprecated by SEP-2577 in rmcp (for protocol
// 2026-07-28); upstreams speak 2025-11-25, where they are current.
#![allow(deprecated)]

use rmcp::model::{
    ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction, ListRootsResult,
    LoggingMessageNotificationParam, ProgressNotificationParam,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, ErrorData as McpError, Peer, RoleClient, RoleServer};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Elicitation requests forwarded per call of a server, at most.
pub(crate) const ELICIT_PER_CALL: usize = 10;
/// Elicitation requests forwarded per client session (all its servers).
pub(crate) const ELICIT_PER_SESSION: usize = 50;

/// The calls of one server in flight, and what each has elicited.
#[derive(Debug, Default)]
pub(crate) struct Elicits {
    calls: Mutex<Vec<InFlight>>,
    next: AtomicU64,
}

#[derive(Debug)]
struct InFlight {
    id: u64,
    asked: usize,
    declined: Vec<String>,
}

impl Elicits {
    /// A call of the server starts: elicitation may reach the person until
    /// [`CallElicits::finish`] (or its drop).
    pub(crate) fn begin(self: &Arc<Self>) -> CallElicits {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().push(InFlight {
            id,
            asked: 0,
            declined: Vec::new(),
        });
        CallElicits {
            elicits: self.clone(),
            id,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<InFlight>> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a request may be forwarded now: charged to the oldest call
    /// in flight (stdio does not say which call a request belongs to).
    /// `Err`: why it is declined.
    fn admit(&self, session: &AtomicUsize) -> Result<(), String> {
        let mut calls = self.lock();
        let Some(call) = calls.first_mut() else {
            return Err("no call of this server is in flight".into());
        };
        let why = if call.asked >= ELICIT_PER_CALL {
            Some(format!(
                "more than {ELICIT_PER_CALL} elicitation requests in one call"
            ))
        } else if session.fetch_add(1, Ordering::SeqCst) >= ELICIT_PER_SESSION {
            Some(format!(
                "more than {ELICIT_PER_SESSION} elicitation requests in this session"
            ))
        } else {
            None
        };
        match why {
            None => {
                call.asked += 1;
                Ok(())
            }
            Some(why) => {
                call.declined.push(why.clone());
                Err(why)
            }
        }
    }

    /// A decline for another reason, recorded on the oldest call in flight.
    fn declined(&self, why: &str) {
        if let Some(call) = self.lock().first_mut() {
            call.declined.push(why.to_string());
        }
    }
}

/// One call's hold on its server's elicitation.
pub(crate) struct CallElicits {
    elicits: Arc<Elicits>,
    id: u64,
}

impl CallElicits {
    /// The call ended: the reasons of the requests declined during it.
    pub(crate) fn finish(self) -> Vec<String> {
        let mut calls = self.elicits.lock();
        match calls.iter().position(|c| c.id == self.id) {
            Some(i) => calls.remove(i).declined,
            None => Vec::new(),
        }
    }
}

impl Drop for CallElicits {
    fn drop(&mut self) {
        self.elicits.lock().retain(|c| c.id != self.id);
    }
}

/// Told when a server's tool list changed (the gateway re-lists it).
pub(crate) type OnListChanged = Arc<dyn Fn(String) + Send + Sync>;

/// Told of a server's `notifications/resources/updated` (`Some(uri)`) or
/// `resources/list_changed` (`None`): the gateway decides what reaches
/// the client.
pub(crate) type OnResource = Arc<dyn Fn(String, Option<String>) + Send + Sync>;

/// Where a server's progress notifications for one request go.
pub(crate) type ProgressSink = tokio::sync::mpsc::UnboundedSender<ProgressNotificationParam>;

/// The requests in flight whose progress is wanted, by progress token.
pub(crate) type ProgressRoutes =
    Arc<std::sync::Mutex<std::collections::HashMap<rmcp::model::ProgressToken, ProgressSink>>>;

#[derive(Clone)]
pub(crate) struct UpstreamClient {
    pub(crate) server: String,
    /// The downstream client, when it declared elicitation: the upstream's
    /// elicitation requests go to it, prefixed with the server's name.
    pub(crate) downstream: Option<Peer<RoleServer>>,
    pub(crate) on_list_changed: Option<OnListChanged>,
    pub(crate) on_resource: Option<OnResource>,
    /// `file://` URIs of the server's read roots.
    pub(crate) roots: Vec<String>,
    /// How long a person has to answer a forwarded elicitation.
    pub(crate) elicitation_timeout: std::time::Duration,
    pub(crate) progress: ProgressRoutes,
    /// This server's calls in flight (elicitation is forwarded only then).
    pub(crate) elicits: Arc<Elicits>,
    /// Elicitation requests forwarded in this client session.
    pub(crate) session_elicits: Arc<AtomicUsize>,
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
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        let decline = ElicitResult::new(ElicitationAction::Decline);
        let Some(peer) = self.downstream.as_ref().filter(|_| self.elicits()) else {
            return Ok(decline);
        };
        let declined = |why: &str| {
            tracing::warn!(
                server = %self.server,
                "upstream elicitation declined: {why}"
            );
            Ok(ElicitResult::new(ElicitationAction::Decline))
        };
        // Only form requests pass: a URL request is a phishing vector.
        let mut v = serde_json::to_value(&request).unwrap_or_default();
        if v.get("mode").and_then(|m| m.as_str()) == Some("url") {
            self.elicits
                .declined("a URL elicitation request (never forwarded)");
            return declined("a URL elicitation request (never forwarded)");
        }
        if let Err(why) = self.elicits.admit(&self.session_elicits) {
            return declined(&why);
        }
        label(&mut v, &self.server);
        let Ok(request) = serde_json::from_value::<ElicitRequestParams>(v) else {
            self.elicits.declined("a malformed elicitation request");
            return declined("a malformed elicitation request");
        };
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

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if let Some(f) = &self.on_resource {
            f(self.server.clone(), Some(params.uri));
        }
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(f) = &self.on_resource {
            f(self.server.clone(), None);
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

/// An upstream's elicitation request as the person sees it: its message
/// prefixed with the server's name, every string of it and of its schema
/// with control characters and bidi overrides shown escaped (a newline
/// cannot push the label out of sight or start a line that seems to be
/// toolcage's), and toolcage's `_meta` keys removed.
fn label(v: &mut serde_json::Value, server: &str) {
    neutralise(v);
    if let Some(m) = v.get_mut("message")
        && let Some(s) = m.as_str()
    {
        let server = crate::text::one_line(server);
        *m = serde_json::Value::String(format!("[upstream server '{server}'] {s}"));
    }
    if let Some(meta) = v.get_mut("_meta").and_then(|m| m.as_object_mut()) {
        meta.retain(|k, _| !k.starts_with("toolcage/"));
    }
}

fn neutralise(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::String(s) => *s = crate::text::one_line(s),
        serde_json::Value::Array(a) => a.iter_mut().for_each(neutralise),
        serde_json::Value::Object(o) => o.values_mut().for_each(neutralise),
        _ => {}
    }
}
