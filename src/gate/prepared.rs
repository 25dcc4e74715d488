//! The call the gate decides about.

use crate::discover::ToolSpec;
use crate::policy::Resolved;
use serde_json::{Map, Value};

/// A validated call with its resolved grant: what the gate decides about,
/// what the person approving it is shown, and what its audit records
/// describe. The call pipeline builds it (look up → validate → resolve).
#[derive(Debug, Clone)]
pub struct PreparedCall {
    pub tool: ToolSpec,
    /// The arguments after validation (defaults and coercions applied).
    pub args: Map<String, Value>,
    pub resolved: Resolved,
    /// The digest of the tool's definition as prepared: what an approval of
    /// this call is bound to.
    pub definition_sha256: String,
    /// What will run, as the person approving the call is shown: the
    /// script, `<interpreter> <entrypoint>`, `sh -c '<template>'`.
    pub runs: String,
    /// The scripts whose `ctx.tool` made this call, outermost first; empty
    /// for a call from a client. The pipeline sets it from its surface: it
    /// is how deep scripts nest, carried by the call whatever thread runs it.
    pub callers: Vec<String>,
}
