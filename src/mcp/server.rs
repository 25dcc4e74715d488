//! One MCP server's state: what every client shares ([`Shared`]), each
//! client's session, and the registry of connected clients that hot reload
//! notifies. The requests are answered in `handler.rs`.
// Logging is deprecated by SEP-2577 in rmcp (for protocol 2026-07-28); we
// target 2025-11-25, where it is current.
#![allow(deprecated)]

use super::queue::{CallQueue, QueueLimits, SessionKey};
use super::{ServeConfig, ToolHost};
use crate::call::Pipeline;
use crate::gate::Gatekeeper;
use crate::upstream::{self, Gateway};
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam, ProtocolVersion, ServerConfig};
use rmcp::{Peer, RoleServer};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// State shared by every client of one server.
pub(crate) struct Shared {
    pub(crate) host: Arc<dyn ToolHost>,
    pub(crate) config: ServeConfig,
    /// Pending-call caps and the `--max-concurrent` run slots, handed out
    /// round robin across sessions.
    pub(crate) queue: Arc<CallQueue>,
    clients: Mutex<Vec<Client>>,
    pub(super) info: ServerConfig,
    /// Approval, rate limits and the audit log of every call.
    pub(crate) gate: Option<Arc<dyn Gatekeeper>>,
    /// Cancelled when the server stops ([`McpServer::stop_calls`]): calls
    /// in flight are cancelled and new ones refused.
    pub(crate) stopping: CancellationToken,
    /// Why the server stops (`SIGTERM to toolcage serve`), for the records
    /// of the calls it cancels.
    pub(crate) stop_reason: OnceLock<String>,
    /// The signal that stops the server, if one does: a call it cancels is
    /// recorded with exit status 128 + its number, as the server exits.
    pub(crate) stop_signal: OnceLock<i32>,
    /// Every `tools/call` in flight, until its audit record is written.
    pub(crate) calls: TaskTracker,
    /// The management tools (`[manage]`), set once before serving.
    pub(crate) manage: OnceLock<Arc<super::manage::Manager>>,
    /// Cancelled when a drain begins (`serve --drain`, on a signal): new
    /// sessions and calls are refused while running calls finish.
    pub(crate) draining: CancellationToken,
    /// Counters for `--metrics`.
    pub(crate) metrics: Arc<super::metrics::Metrics>,
}

struct Client {
    peer: Peer<RoleServer>,
    /// Weak: a session that ended is dropped with its handler, and its
    /// upstream servers with it.
    session: std::sync::Weak<Session>,
}

/// Per-client state (one per stdio connection or HTTP session).
#[derive(Debug)]
pub(crate) struct Session {
    /// Approvals for `once` / `once-per-args` are remembered per session,
    /// and the audit log names it.
    pub(crate) id: crate::gate::SessionId,
    /// This session's place in the [`CallQueue`].
    pub(crate) key: SessionKey,
    /// Minimum level of `notifications/message` this client wants
    /// ([`level_rank`]); `warning` until it sends `logging/setLevel`.
    pub(super) log_level: AtomicU8,
    /// This session's upstream servers, made on its first request.
    gateway: OnceLock<Option<Arc<Gateway>>>,
}

static NEXT_SESSION_KEY: AtomicU64 = AtomicU64::new(1);

impl Default for Session {
    fn default() -> Self {
        Session {
            id: crate::gate::SessionId::fresh("mcp"),
            key: NEXT_SESSION_KEY.fetch_add(1, Ordering::Relaxed),
            log_level: AtomicU8::new(level_rank(LoggingLevel::Warning)),
            gateway: OnceLock::new(),
        }
    }
}

/// The handler rmcp drives. Cheap to clone; [`McpServer::session`] makes
/// the handler for a new HTTP session (same tools, own log level).
#[derive(Clone)]
pub struct McpServer {
    pub(crate) shared: Arc<Shared>,
    pub(crate) session: Arc<Session>,
}

impl McpServer {
    pub fn new(host: Arc<dyn ToolHost>, config: ServeConfig) -> McpServer {
        let queue = CallQueue::new(QueueLimits {
            max_concurrent: config.max_concurrent,
            max_pending: config.max_pending,
            max_pending_per_session: config.max_pending_per_session,
        });
        let info = server_info(
            host.engine()
                .is_some_and(|e| !e.catalog.upstreams.is_empty()),
        );
        McpServer {
            shared: Arc::new(Shared {
                host,
                config,
                queue,
                clients: Mutex::new(Vec::new()),
                info,
                gate: None,
                stopping: CancellationToken::new(),
                stop_reason: OnceLock::new(),
                stop_signal: OnceLock::new(),
                calls: TaskTracker::new(),
                manage: OnceLock::new(),
                draining: CancellationToken::new(),
                metrics: Arc::default(),
            }),
            session: Arc::new(Session::default()),
        }
    }

    /// Install the gate every call passes between prepare and run. Call it
    /// before serving (it replaces the shared state).
    pub fn with_gate(self, gate: Arc<dyn Gatekeeper>) -> McpServer {
        let shared = Shared {
            host: self.shared.host.clone(),
            config: self.shared.config.clone(),
            queue: self.shared.queue.clone(),
            clients: Mutex::new(Vec::new()),
            info: self.shared.info.clone(),
            gate: Some(gate),
            stopping: CancellationToken::new(),
            stop_reason: OnceLock::new(),
            stop_signal: OnceLock::new(),
            calls: TaskTracker::new(),
            manage: OnceLock::new(),
            draining: CancellationToken::new(),
            metrics: self.shared.metrics.clone(),
        };
        McpServer {
            shared: Arc::new(shared),
            session: self.session,
        }
    }

    /// The call pipeline through this session's tools (the server's, and
    /// its upstream servers') and the server's gate.
    pub(crate) fn pipeline(&self) -> Pipeline {
        let upstream = upstream::Session::on_server(self.session_gateway());
        Pipeline {
            tools: upstream.toolbox(self.shared.host.clone()),
            gate: self.shared.gate.clone(),
        }
    }

    /// This session's gateway, if it has made one.
    pub(crate) fn session_gateway(&self) -> Option<Arc<Gateway>> {
        self.session.gateway.get().cloned().flatten()
    }

    /// This session's gateway (made on first use, with `peer` as the
    /// client elicitation is forwarded to and list_changed is sent to),
    /// its servers started; `None` when the project declares none.
    pub(crate) async fn gateway(&self, peer: &Peer<RoleServer>) -> Option<Arc<Gateway>> {
        let gw = self
            .session
            .gateway
            .get_or_init(|| {
                let engine = self.shared.host.engine()?;
                upstream::Session::gateway_for_client(
                    &engine,
                    peer,
                    self.shared.config.approval_timeout,
                )
            })
            .clone()?;
        gw.ensure_started().await;
        Some(gw)
    }

    /// A handler for a new client: shares tools and limits, owns its session.
    pub(crate) fn session(&self) -> McpServer {
        McpServer {
            shared: self.shared.clone(),
            session: Arc::new(Session::default()),
        }
    }

    /// Stop: cancel every call in flight (a running one has its process
    /// tree killed) and refuse new ones; wait up to `grace` until each has
    /// written its audit record (`stopped_by` = `reason`). True when all
    /// did in time.
    pub(crate) async fn stop_calls(&self, reason: &str, grace: std::time::Duration) -> bool {
        self.begin_stop(reason);
        let n = self.shared.calls.len();
        if n > 0 {
            tracing::info!("{reason}: cancelling {n} call(s) in flight");
        }
        tokio::time::timeout(grace, self.shared.calls.wait())
            .await
            .is_ok()
    }

    /// [`McpServer::begin_stop`] because the server got signal `sig`.
    pub(crate) fn begin_stop_on_signal(&self, sig: i32, reason: &str) {
        let _ = self.shared.stop_signal.set(sig);
        self.begin_stop(reason);
    }

    /// The first half of [`McpServer::stop_calls`], without waiting: call it
    /// before a transport is torn down, so calls cancelled by the teardown
    /// are recorded with `reason` too. Only the first reason is kept.
    pub(crate) fn begin_stop(&self, reason: &str) {
        let _ = self.shared.stop_reason.set(reason.to_string());
        self.shared.stopping.cancel();
        self.shared.calls.close();
    }

    /// Begin a drain: new sessions and calls are refused (readyz says
    /// 503) while the calls in flight go on. Returns at once.
    pub(crate) fn begin_drain(&self) {
        self.shared.draining.cancel();
        self.shared.calls.close();
    }

    /// Wait until every call in flight has written its record, up to
    /// `limit`. True when they all did.
    pub(crate) async fn calls_finished(&self, limit: std::time::Duration) -> bool {
        self.shared.calls.close();
        tokio::time::timeout(limit, self.shared.calls.wait())
            .await
            .is_ok()
    }

    /// The upstream server instances of the open sessions, by state.
    pub(crate) async fn upstream_states(&self) -> std::collections::BTreeMap<String, u64> {
        let gateways: Vec<Arc<Gateway>> = {
            let mut clients = lock(&self.shared.clients);
            clients.retain(|c| !c.peer.is_transport_closed());
            clients
                .iter()
                .filter_map(|c| c.session.upgrade())
                .filter_map(|s| s.gateway.get().cloned().flatten())
                .collect()
        };
        let mut out = std::collections::BTreeMap::new();
        for gw in gateways {
            for s in gw.status().await {
                *out.entry(s.state).or_default() += 1;
            }
        }
        out
    }

    /// Connected, initialized clients (closed ones are pruned).
    pub fn client_count(&self) -> usize {
        let mut clients = lock(&self.shared.clients);
        clients.retain(|c| !c.peer.is_transport_closed());
        clients.len()
    }

    /// Send `notifications/tools/list_changed` to every connected client.
    pub(crate) async fn notify_tools_changed(&self) {
        let peers: Vec<Peer<RoleServer>> = {
            let mut clients = lock(&self.shared.clients);
            clients.retain(|c| !c.peer.is_transport_closed());
            clients.iter().map(|c| c.peer.clone()).collect()
        };
        tracing::info!("tool list changed; notifying {} client(s)", peers.len());
        for peer in peers {
            if let Err(e) = peer.notify_tool_list_changed().await {
                tracing::debug!("cannot notify a client of list_changed: {e}");
            }
        }
    }

    /// Send a `notifications/message` to this client if it asked for `level`.
    pub(crate) async fn log(&self, peer: &Peer<RoleServer>, level: LoggingLevel, data: Value) {
        if level_rank(level) < self.session.log_level.load(Ordering::Relaxed) {
            return;
        }
        let mut param = LoggingMessageNotificationParam::new(level, data);
        param.logger = Some("toolcage".into());
        if let Err(e) = peer.notify_logging_message(param).await {
            tracing::debug!("cannot send a log notification: {e}");
        }
    }

    pub(super) fn register(&self, peer: Peer<RoleServer>) {
        let mut clients = lock(&self.shared.clients);
        clients.retain(|c| !c.peer.is_transport_closed());
        if !clients
            .iter()
            .any(|c| std::ptr::eq(c.session.as_ptr(), Arc::as_ptr(&self.session)))
        {
            clients.push(Client {
                peer,
                session: Arc::downgrade(&self.session),
            });
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// RFC 5424 order, as MCP uses it.
pub(crate) fn level_rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// What the server declares; `resources` when the project has upstream
/// servers (theirs are forwarded).
fn server_info(upstreams: bool) -> ServerConfig {
    let mut v = json!({
        "protocolVersion": ProtocolVersion::V_2025_11_25.as_str(),
        "capabilities": {"tools": {"listChanged": true}, "logging": {}},
        "serverInfo": {"name": "toolcage", "version": env!("CARGO_PKG_VERSION")},
        "instructions": "Every tool runs in a kernel-enforced sandbox (toolcage). \
            A failed run is a result with isError: true and says what to change; \
            _meta[\"toolcage/enforcement\"] reports what the kernel enforced.",
    });
    if upstreams {
        v["capabilities"]["resources"] = json!({"subscribe": true, "listChanged": true});
        v["capabilities"]["prompts"] = json!({});
        v["capabilities"]["completions"] = json!({});
    }
    serde_json::from_value(v).unwrap_or_else(|e| {
        tracing::error!("building the server info: {e}");
        ServerConfig::default()
    })
}
