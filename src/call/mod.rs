//! One call, end to end (DESIGN.md section 2):
//! validate → gate (approval, rate limit: the surfaces do this between
//! [`Engine::prepare`] and [`Engine::run`]) → encode args → run → format.
//!
//! Per-format argument encoding and result formatting live in submodules.

use crate::discover::{Catalog, Options, ToolSpec};
use crate::policy::{Context, Overrides, PolicyError, PolicyStack, Resolved, Sources};
use crate::sandbox::{CancelToken, Outcome, SandboxError};
use serde::Serialize;
use std::path::Path;

/// Everything needed to serve calls for one project: its policy layers and
/// its discovered tools. `Send + Sync`; the MCP server shares one.
#[derive(Debug, Clone)]
pub struct Engine {
    pub ctx: Context,
    pub stack: PolicyStack,
    pub overrides: Overrides,
    pub options: Options,
    pub catalog: Catalog,
}

/// A validated call with its resolved grant, ready for the gate and the run.
#[derive(Debug, Clone)]
pub struct PreparedCall {
    pub tool: ToolSpec,
    /// The arguments after validation (defaults and coercions applied).
    pub args: serde_json::Map<String, serde_json::Value>,
    pub resolved: Resolved,
}

/// What the agent sees: the text (stdout, then `[stderr]` and stderr), and
/// whether it is an error (non-zero exit, signal, timeout).
#[derive(Debug, Clone, Serialize)]
pub struct CallResult {
    pub text: String,
    pub is_error: bool,
    pub outcome: Outcome,
}

/// A call that did not run, or could not.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("unknown tool '{name}'{}", did_you_mean(.known))]
    UnknownTool { name: String, known: Vec<String> },
    #[error("invalid arguments for {tool}: {message}")]
    InvalidArguments { tool: String, message: String },
    #[error("{0}")]
    Denied(String),
    #[error("{0}")]
    Unsupported(String),
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
}

fn did_you_mean(known: &[String]) -> String {
    if known.is_empty() {
        " (no tools discovered; run `toolcage check`)".into()
    } else {
        format!(" (known: {})", known.join(", "))
    }
}

impl CallError {
    /// The `toolcage call` exit status (DESIGN.md section 1).
    pub fn exit_status(&self) -> u8 {
        use crate::cli::status;
        match self {
            CallError::UnknownTool { .. } | CallError::InvalidArguments { .. } => status::INVALID,
            CallError::Denied(_) => status::DENIED,
            CallError::Unsupported(_) | CallError::Policy(_) | CallError::Sandbox(_) => {
                status::INTERNAL
            }
        }
    }
}

impl Engine {
    /// Load the policy layers and discover the project's tools.
    pub fn load(
        _project: &Path,
        _sources: &Sources,
        _overrides: Overrides,
        _options: Options,
    ) -> Result<Engine, PolicyError> {
        unimplemented!("issue 3")
    }

    /// Discover again (hot reload); the policy layers stay.
    pub fn rediscover(&mut self) {
        unimplemented!("issue 3")
    }

    /// The grant for `tool` (its requests bounded by the operator's policy).
    pub fn resolve(&self, _tool: &ToolSpec) -> Result<Resolved, PolicyError> {
        unimplemented!("issue 3")
    }

    /// Look up and validate; resolve the grant. Nothing runs.
    pub fn prepare(
        &self,
        _name: &str,
        _args: serde_json::Value,
    ) -> Result<PreparedCall, CallError> {
        unimplemented!("issue 3")
    }

    /// Encode the arguments, run under the grant, format the result.
    /// Blocking; cancel kills the call's process tree.
    pub fn run(
        &self,
        _call: &PreparedCall,
        _cancel: Option<&CancelToken>,
    ) -> Result<CallResult, CallError> {
        unimplemented!("issue 3")
    }
}
