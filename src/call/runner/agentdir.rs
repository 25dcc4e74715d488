//! A3S AgentDir `kind: script` (a QuickJS program) runs in a sandboxed
//! child ([`crate::call::script`]). Upstream MCP tools (`.mcp.json`, A3S
//! `kind: mcp`) run through the gateway, not here.

use super::{Run, ToolRunner};
use crate::call::toolbox::Toolbox;
use crate::call::{CallError, CallResult, script};
use crate::discover::ToolSpec;
use crate::policy::Grant;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

pub(crate) struct JsScript<'a> {
    pub(crate) tool: &'a ToolSpec,
    pub(crate) path: &'a Path,
}

impl ToolRunner for JsScript<'_> {
    fn runs(&self) -> String {
        format!("script {}", self.path.display())
    }

    fn files(&self) -> Vec<PathBuf> {
        super::distinct(&[&self.tool.source, self.path])
    }

    /// Without an engine: the script runs, its `ctx.tool` calls fail.
    fn execute(
        &self,
        _: &str,
        args: &Map<String, Value>,
        grant: &Grant,
        run: Run<'_>,
    ) -> Result<CallResult, CallError> {
        script::execute(self.tool, args, grant, run, None)
    }

    fn execute_in(
        &self,
        _: &str,
        args: &Map<String, Value>,
        grant: &Grant,
        run: Run<'_>,
        toolbox: &dyn Toolbox,
    ) -> Result<CallResult, CallError> {
        script::execute(self.tool, args, grant, run, Some(toolbox))
    }
}

/// A tool of an upstream MCP server. The gateway runs its calls (it holds
/// the server's running instance); through a plain engine it is refused.
pub(crate) struct Upstream<'a> {
    pub(crate) tool: &'a ToolSpec,
    pub(crate) server: &'a str,
    pub(crate) runs: &'a str,
}

impl Upstream<'_> {
    fn refused(&self) -> String {
        format!(
            "{} is a tool of the upstream MCP server '{}': only the gateway (toolcage serve, call, list) can run it",
            self.tool.name, self.server
        )
    }
}

impl ToolRunner for Upstream<'_> {
    fn refusal(&self) -> Option<String> {
        Some(self.refused())
    }

    fn runs(&self) -> String {
        format!("mcp server {} ({})", self.server, self.runs)
    }

    fn files(&self) -> Vec<PathBuf> {
        vec![self.tool.source.clone()]
    }

    /// Refused: [`ToolRunner::refusal`] stops the call before it gets
    /// here; this answers a caller that did not ask.
    fn execute(
        &self,
        _: &str,
        _: &Map<String, Value>,
        _: &Grant,
        _: Run<'_>,
    ) -> Result<CallResult, CallError> {
        Err(CallError::Unsupported(self.refused()))
    }
}
