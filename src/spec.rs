//! The file format a tool was discovered from: the one format-neutral
//! name every layer above discovery shares. What a tool asks of the
//! policy is [`crate::policy::Requests`].

use serde::Serialize;

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
