//! One call, end to end: the one pipeline every surface uses
//! (ARCHITECTURE.md, "The call pipeline", draws it):
//!
//! ```text
//! look up → validate → resolve grant     Toolbox::prepare (Engine)
//!   → gate: approval, rate limits,       gate::admit → an Admission
//!     concurrency cap                    (denied: recorded, refused)
//!   → the surface's turn                 Surface::turn (MCP run slots)
//!   → the `started` record               Admission::start
//!   → encode → run → format              Toolbox::execute → the tool kind's ToolRunner
//!   → the final record                   Admission::complete (a dropped
//!                                        admission records itself as abandoned)
//! ```
//!
//! [`pipeline::Pipeline::call`] is that sequence, written once. The CLI and
//! the MCP server are [`pipeline::Surface`]s: they parse, print, and carry
//! cancellation, progress and the approval channel they offer.
//!
//! - [`engine`]: a project's policy layers and tools ([`Engine`]).
//! - [`runner`]: one [`runner::ToolRunner`] per tool kind.
//! - [`definition`]: what a tool is, to an agent ([`Definition`]) and to a
//!   person approving it (the digest an approval is bound to).
//! - [`validate`], [`encode`], [`params_file`], [`result`],
//!   [`annotations`]: the steps' pieces.

pub(crate) mod annotations;
pub(crate) mod definition;
pub(crate) mod encode;
pub(crate) mod engine;
pub(crate) mod params_file;
pub(crate) mod pipeline;
pub(crate) mod result;
pub(crate) mod runner;
pub mod script;
pub(crate) mod toolbox;
pub(crate) mod validate;

pub use crate::gate::PreparedCall;
pub use definition::Definition;
pub use engine::Engine;
pub use pipeline::{NotRun, NotRunKind, Pipeline, Surface};
pub use toolbox::Toolbox;

use crate::gate::{DenyReason, GateDenial};
use crate::policy::PolicyError;
use crate::sandbox::{Outcome, SandboxError};
use serde::Serialize;

/// What the agent sees: the text (stdout, then `[stderr]` and stderr), and
/// whether it is an error (non-zero exit, signal, timeout).
#[derive(Debug, Clone, Serialize)]
pub struct CallResult {
    pub text: String,
    pub is_error: bool,
    pub outcome: Outcome,
    /// An upstream MCP tool's own result (`content`, `structuredContent`),
    /// passed on as it came (text capped like a tool's stdout); `None` for
    /// every other kind, whose result is `text`.
    pub content: Option<serde_json::Value>,
    /// For an upstream tool's result: each kind of content it held (text,
    /// image, audio, resource, resource_link, structuredContent, ...) with
    /// its blocks and the bytes kept and left out, for the audit record.
    #[serde(skip)]
    pub content_kinds: Option<serde_json::Value>,
}

/// A call that did not run, or could not.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("unknown tool '{name}'{}", why_unknown(.known, .not_loaded.as_deref()))]
    UnknownTool {
        name: String,
        known: Vec<String>,
        /// Why a file that would define it was skipped (or the tool is
        /// disabled), as `check` says it.
        not_loaded: Option<String>,
    },
    /// A tool discovered earlier whose file is gone: an unknown tool now
    /// (its kind is [`CallErrorKind::UnknownTool`]), saying so.
    #[error(
        "tool '{name}' was removed: {} no longer exists (the tools are those found when they were last discovered)",
        .path.display()
    )]
    Removed {
        name: String,
        path: std::path::PathBuf,
    },
    #[error("invalid arguments for {tool}: {message}")]
    InvalidArguments { tool: String, message: String },
    /// The gate refused it: approval, a rate limit, the concurrency cap, or
    /// a gate that cannot work safely.
    #[error("{}", .0.message)]
    Denied(GateDenial),
    /// Its surface stopped it before it ran (too many pending, cancelled,
    /// stopping, a signal).
    #[error("{}", .0.text)]
    NotRun(NotRun),
    #[error("{0}")]
    Unsupported(String),
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// The audit record could not be written and `[audit] fail_closed`
    /// says the call fails: `refused` is why it did not run anyway, if so.
    #[error("{}", audit_failure(.error, .refused.as_deref()))]
    Audit {
        error: String,
        refused: Option<Box<CallError>>,
    },
    /// toolcage itself failed around the run (a cancel token, a worker).
    #[error("{0}")]
    Internal(String),
}

impl CallError {
    /// No tool `name` in `catalog`: with why it was not loaded, when a
    /// skipped file or a disabled entry says so.
    pub fn unknown_tool(catalog: &crate::discover::Catalog, name: &str) -> CallError {
        CallError::UnknownTool {
            name: name.to_string(),
            known: catalog.tools.iter().map(|t| t.name.clone()).collect(),
            not_loaded: catalog
                .why_not_loaded(name)
                .map(|d| d.to_string())
                .or_else(|| upstream_offers_none(catalog, name)),
        }
    }
}

/// `server__tool` of a declared upstream server that offers no such tool
/// now: say where to look.
fn upstream_offers_none(catalog: &crate::discover::Catalog, name: &str) -> Option<String> {
    let server = catalog.upstreams.iter().find(|s| {
        name.strip_prefix(&s.name)
            .is_some_and(|t| t.starts_with("__"))
    })?;
    Some(format!(
        "upstream server '{}' offers no tool of that name now (held back, disabled, or the \
         server does not run: `toolcage upstreams` says which)",
        server.name
    ))
}

fn why_unknown(known: &[String], not_loaded: Option<&str>) -> String {
    if let Some(why) = not_loaded {
        return format!(": not loaded: {why} (run `toolcage check` for every file)");
    }
    if known.is_empty() {
        " (no tools discovered; run `toolcage check`)".into()
    } else {
        format!(" (known: {})", known.join(", "))
    }
}

fn audit_failure(error: &str, refused: Option<&CallError>) -> String {
    match refused {
        Some(r) => format!("{r}; {error}"),
        None => error.to_string(),
    }
}

/// What kind of failure a [`CallError`] is: the surfaces decide what each
/// means to them (the CLI's exit status, an MCP error or `isError` result).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallErrorKind {
    UnknownTool,
    InvalidArguments,
    /// Why the gate refused it.
    Denied(DenyReason),
    NotRun,
    Unsupported,
    Policy,
    /// The sandbox: not found, cannot execute, or its own setup.
    Sandbox(crate::sandbox::SandboxErrorKind),
    Audit,
    Internal,
}

impl CallError {
    pub fn kind(&self) -> CallErrorKind {
        match self {
            CallError::UnknownTool { .. } | CallError::Removed { .. } => CallErrorKind::UnknownTool,
            CallError::InvalidArguments { .. } => CallErrorKind::InvalidArguments,
            CallError::Denied(d) => CallErrorKind::Denied(d.reason),
            CallError::NotRun(_) => CallErrorKind::NotRun,
            CallError::Unsupported(_) => CallErrorKind::Unsupported,
            CallError::Policy(_) => CallErrorKind::Policy,
            CallError::Sandbox(e) => CallErrorKind::Sandbox(e.kind()),
            CallError::Audit { .. } => CallErrorKind::Audit,
            CallError::Internal(_) => CallErrorKind::Internal,
        }
    }

    /// The machine code in the audit record of a call refused before the
    /// gate, and in an MCP result's `_meta["toolcage/error"]`.
    pub fn code(&self) -> &'static str {
        match self.kind() {
            CallErrorKind::UnknownTool => "unknown_tool",
            CallErrorKind::InvalidArguments => "invalid_arguments",
            // Stopped by the surface: recorded as the gate's own refusals were.
            CallErrorKind::Denied(_) | CallErrorKind::NotRun => "denied",
            CallErrorKind::Unsupported => "unsupported",
            CallErrorKind::Policy => "policy",
            CallErrorKind::Sandbox(_) => "sandbox",
            CallErrorKind::Audit => "audit",
            CallErrorKind::Internal => "internal",
        }
    }
}
