//! What discovery produces: a tool, in a format-neutral shape, plus the
//! diagnostics explaining every file that was examined.

use serde::Serialize;
use std::time::Duration;

/// The file format a tool was discovered from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// Octomind `.agents/tools/<name>` header scripts.
    Octomind,
    /// clawd `.clawd/tools/<id>/tool.json`.
    Clawd,
    /// OpenCrabs `tools.toml`.
    Opencrabs,
    /// A3S AgentDir `tools/<name>.md`.
    Agentdir,
    /// Octo `.mcp.json` upstream servers.
    McpJson,
}

/// What a tool's own files ask for. The operator's policy decides what is
/// granted (DESIGN.md section 3): a request never widens a grant by itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Requests {
    /// The tool asks for network access.
    pub network: Option<bool>,
    /// The tool asks for a different timeout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
    /// The tool asks to be approved by a person before each run.
    pub requires_approval: Option<bool>,
    /// `requests` per `window`, from the tool's own definition.
    pub rate_limit: Option<crate::policy::RateLimit>,
    /// The only hosts the tool needs (`host[:port]` patterns, e.g. an
    /// OpenCrabs http tool's url): narrows a domain grant, never widens one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domains: Option<Vec<String>>,
}
