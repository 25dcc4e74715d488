//! A3S AgentDir: `kind: script` (a QuickJS program) and `kind: mcp` (an
//! upstream MCP server) are listed and validated; calls are refused until
//! they are supported.

use super::ToolRunner;
use crate::call::encode::{EncodeError, Encoded};
use crate::discover::ToolSpec;
use crate::policy::Grant;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

fn unsupported(tool: &ToolSpec, kind: &str) -> String {
    format!(
        "{kind} tools are not supported yet: tool {} ({}) is listed and validated, but calls are refused",
        tool.name,
        tool.source.display()
    )
}

pub struct JsScript<'a> {
    pub tool: &'a ToolSpec,
    pub path: &'a Path,
}

impl ToolRunner for JsScript<'_> {
    fn refusal(&self) -> Option<String> {
        Some(unsupported(self.tool, "kind: script (a QuickJS program)"))
    }

    fn runs(&self) -> String {
        format!("script {}", self.path.display())
    }

    fn files(&self) -> Vec<PathBuf> {
        super::distinct(&[&self.tool.source, self.path])
    }

    fn encode(&self, _: &Map<String, Value>, _: &Grant) -> Result<Encoded, EncodeError> {
        Err(EncodeError::Unsupported(unsupported(
            self.tool,
            "kind: script (a QuickJS program)",
        )))
    }
}

pub struct Upstream<'a> {
    pub tool: &'a ToolSpec,
    pub command: Option<&'a str>,
    pub url: Option<&'a str>,
}

impl ToolRunner for Upstream<'_> {
    fn refusal(&self) -> Option<String> {
        Some(unsupported(self.tool, "kind: mcp (an upstream MCP server)"))
    }

    fn runs(&self) -> String {
        match (self.command, self.url) {
            (Some(c), _) => format!("mcp server {c}"),
            (None, Some(u)) => format!("mcp server {u}"),
            (None, None) => "mcp server".into(),
        }
    }

    fn files(&self) -> Vec<PathBuf> {
        vec![self.tool.source.clone()]
    }

    fn encode(&self, _: &Map<String, Value>, _: &Grant) -> Result<Encoded, EncodeError> {
        Err(EncodeError::Unsupported(unsupported(
            self.tool,
            "kind: mcp (an upstream MCP server)",
        )))
    }
}
