//! Discovery: turn a project's tool directories into [`ToolSpec`]s, and
//! explain every file examined with a [`Diagnostic`] (DESIGN.md sections 2
//! and 5). One module per format. No policy decisions and no I/O beyond
//! reading the tool dirs.
//!
//! Where each format lives, relative to the project:
//! - Octomind: `.agents/tools/<name>` (executable, header comments)
//! - clawd: `.clawd/tools/<id>/tool.json`, exposed as `ct_<id>`
//! - OpenCrabs: `tools.toml` (and `--tools-toml FILE`)
//! - A3S AgentDir: `tools/<name>.md` (YAML front matter)

// TEMPORARY in branch `callcli`: a stub replaced by branch `discover` at merge.
pub mod template;

use crate::spec::{Format, Requests};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One discovered tool, format-neutral.
#[derive(Debug, Clone, Serialize)]
pub struct ToolSpec {
    /// The name the agent sees (`ct_<id>` for clawd).
    pub name: String,
    pub format: Format,
    /// The file that defines the tool (absolute).
    pub source: PathBuf,
    /// 1-based line in `source` where the definition starts, where known.
    pub line: Option<usize>,
    pub description: String,
    /// JSON Schema (`type: object`) for the arguments.
    pub input_schema: serde_json::Value,
    /// What the tool's own files ask for (network, timeout, approval, rate).
    pub requests: Requests,
    /// How to run it.
    pub runner: Runner,
    /// Paths the call must be able to read and execute (the script, its
    /// directory) even if the policy's roots don't cover them.
    pub needs_read: Vec<PathBuf>,
}

/// How a tool runs; the per-format encoding lives in `call`.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Runner {
    /// Octomind: exec the script; params on stdin (JSON) and as
    /// `OCTOMIND_PARAM_<UPPER>`.
    Octomind { program: PathBuf },
    /// clawd: `<interpreter> <entrypoint>` (or the entrypoint itself when no
    /// interpreter), JSON on stdin, cwd = project.
    Clawd {
        interpreter: Option<String>,
        entrypoint: PathBuf,
    },
    /// OpenCrabs shell executor: `sh -c <command>` after template expansion
    /// with shell-quoted values; `$OPENCRABS_PARAMS` names a 0600 JSON file.
    OpencrabsShell {
        command: String,
        params: Vec<CrabParam>,
    },
    /// OpenCrabs http executor: parsed and listed; refused at call time
    /// until the network gateway exists.
    OpencrabsHttp {
        method: String,
        url: String,
        headers: Vec<(String, String)>,
        params: Vec<CrabParam>,
    },
    /// A3S `kind: script` (QuickJS): parsed and validated; not runnable yet.
    AgentdirScript {
        path: PathBuf,
        allowed_tools: Vec<String>,
        timeout: Option<Duration>,
        max_tool_calls: Option<u64>,
        max_output_bytes: Option<u64>,
    },
    /// A3S `kind: mcp`: an upstream MCP server; not runnable yet.
    AgentdirMcp {
        transport: String,
        command: Option<String>,
        args: Vec<String>,
        url: Option<String>,
        env: Vec<(String, String)>,
    },
}

/// An OpenCrabs `[[tools.params]]` entry, as needed at call time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CrabParam {
    pub name: String,
    /// JSON Schema type name.
    pub kind: String,
    pub required: bool,
    /// The default, already converted to JSON.
    pub default: Option<serde_json::Value>,
    pub coerce_empty_to: Coerce,
    pub coerce_null_to: Coerce,
}

/// `coerce_empty_to` / `coerce_null_to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Coerce {
    #[default]
    Keep,
    Omit,
    Null,
    Error,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// A tool was skipped or a file could not be used; `check` exits 1.
    Error,
    /// Loaded, but something is off (e.g. a param name that is not a valid
    /// env name, a shadowed tool).
    Warning,
}

/// Why a file was skipped, or what is wrong with a loaded tool. Rendered as
/// `file:line: message (fix: ...)`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diagnostic {
    pub file: PathBuf,
    pub line: Option<usize>,
    pub severity: Severity,
    pub message: String,
    /// What to do about it.
    pub fix: Option<String>,
}

impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        write!(f, ": {}", self.message)?;
        if let Some(fix) = &self.fix {
            write!(f, " (fix: {fix})")?;
        }
        Ok(())
    }
}

/// A tool hidden by another of the same name (DESIGN.md section 5:
/// config-defined over dynamic over local).
#[derive(Debug, Clone, Serialize)]
pub struct Shadowed {
    pub name: String,
    pub winner_format: Format,
    pub winner_source: PathBuf,
    pub loser_format: Format,
    pub loser_source: PathBuf,
}

/// The result of discovering one project.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Catalog {
    /// The tools that won, sorted by name.
    pub tools: Vec<ToolSpec>,
    /// Every skipped file and every warning, sorted by file then line.
    pub diagnostics: Vec<Diagnostic>,
    pub shadowed: Vec<Shadowed>,
    /// Every file examined (loaded or not), for `check`.
    pub examined: Vec<PathBuf>,
}

impl Catalog {
    pub fn get(&self, name: &str) -> Option<&ToolSpec> {
        self.tools
            .binary_search_by(|t| t.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.tools[i])
    }

    pub fn has_errors(&self) -> bool {
        self.diagnostics
            .iter()
            .any(|d| d.severity == Severity::Error)
    }
}

/// Where to look besides the project's own files.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `--tools-toml FILE`: an OpenCrabs tools.toml outside the project.
    pub tools_toml: Option<PathBuf>,
}

/// Discover every tool of `project` (an absolute, existing directory).
pub fn discover(_project: &Path, _options: &Options) -> Catalog {
    unimplemented!("discovery: issue 3")
}
