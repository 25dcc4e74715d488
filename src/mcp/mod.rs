//! The MCP server surface (docs/mcp.md#the-server): tools over stdio and
//! Streamable HTTP, hot reload, cancellation, progress and logging.
//!
//! Layout:
//! - [`host`]: the [`ToolHost`] trait the server is written against, and its
//!   implementation over [`crate::call::Engine`] (with hot-reload snapshots).
//! - [`server`]: the rmcp `ServerHandler` (initialize, tools/list with
//!   pagination, logging/setLevel, the peer registry for list_changed).
//! - [`call`]: one `tools/call`: the server as a surface of the call
//!   pipeline ([`crate::call::pipeline`]): cancellation, progress, run
//!   slots, and the result as MCP shows it.
//! - [`queue`]: pending-call caps and fair (round-robin) run slots.
//! - [`elicitation`]: approval asked of the person behind the client.
//! - [`stdio`], [`http`]: the two transports; [`auth`]: who may use HTTP;
//!   [`connections`]: the HTTP connection limit.
//! - [`reload`]: watch the tool dirs, debounce, rediscover, notify.
//! - [`metrics`]: the counters `--metrics` serves, in Prometheus text.
//! - [`manage`]: `custom_script` and `tool_manage`, when `[manage]` enables them.

pub(crate) mod answer;
pub mod auth;
pub(crate) mod call;
pub(crate) mod connections;
pub(crate) mod elicitation;
pub(crate) mod handler;
pub(crate) mod host;
pub mod http;
pub(crate) mod manage;
pub(crate) mod metrics;
pub(crate) mod queue;
pub mod reload;
pub(crate) mod resources;
pub(crate) mod server;
pub mod stdio;

pub use host::{EngineHost, ToolHost};
pub use server::McpServer;

/// Limits and knobs shared by both transports.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Calls running at the same time, across all clients; more wait.
    pub max_concurrent: usize,
    /// Largest accepted JSON-RPC message (a stdio line, an HTTP body).
    pub max_message_bytes: usize,
    /// Tools per `tools/list` page.
    pub page_size: usize,
    /// Interval between progress notifications while a call runs.
    pub progress_interval: std::time::Duration,
    /// Quiet period after the last file change before rediscovery.
    pub reload_debounce: std::time::Duration,
    /// How long an approval request (elicitation) waits for the person;
    /// no answer is a refusal.
    pub approval_timeout: std::time::Duration,
    /// HTTP sessions open at once; a new one beyond this gets 503 until a
    /// client ends its session (DELETE) or one idles out.
    pub max_sessions: usize,
    /// Calls pending (waiting for approval or a run slot, or running) in one
    /// session; beyond it a `tools/call` is refused at once (`isError`).
    pub max_pending_per_session: usize,
    /// Calls pending across all sessions; beyond it the same refusal.
    pub max_pending: usize,
    /// HTTP connections open at once; beyond it a new one takes the place of
    /// the oldest that never sent an admitted request, or waits.
    pub max_connections: usize,
    /// How long an HTTP client has to send a request's headers (also how long
    /// an idle keep-alive connection stays open).
    pub header_timeout: std::time::Duration,
    /// Hot reload is on (the tool dirs are watched); off with `--no-watch`.
    pub watch: bool,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            max_concurrent: 8,
            max_message_bytes: 4 * 1024 * 1024,
            page_size: 100,
            progress_interval: std::time::Duration::from_secs(1),
            reload_debounce: std::time::Duration::from_millis(200),
            approval_timeout: std::time::Duration::from_secs(120),
            max_sessions: 256,
            max_pending_per_session: 32,
            max_pending: 256,
            max_connections: 512,
            header_timeout: std::time::Duration::from_secs(10),
            watch: true,
        }
    }
}
