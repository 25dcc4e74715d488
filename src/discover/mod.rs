//! Discovery: turn a project's tool directories into [`ToolSpec`]s, and
//! explain every file examined with a [`Diagnostic`] (docs/formats.md;
//! ARCHITECTURE.md). One folder per format, holding everything that
//! format needs; the files beside them are shared by several formats. No
//! policy decisions and no I/O beyond reading the tool dirs.
//!
//! Where each format lives, relative to the project, and its folder here:
//! - Octomind: `.agents/tools/<name>` (executable, header comments): [`octomind`]
//! - clawd: `.clawd/tools/<id>/tool.json`, exposed as `ct_<id>`: [`clawd`]
//! - OpenCrabs: `tools.toml` (and `--tools-toml FILE`): [`opencrabs`]
//! - A3S AgentDir: `tools/<name>.md` (YAML front matter): [`agentdir`]
//! - Octo `.mcp.json` ([`mcp_json`]) and A3S `kind: mcp`: upstream MCP
//!   servers ([`UpstreamSpec`], [`upstream`]), whose tools the gateway
//!   lists once they run
//!
//! [`discover`] never panics: unreadable, vanished, half-written, non-UTF-8
//! files and symlink loops become [`Diagnostic`]s. Results are sorted, so
//! two runs over the same tree give the same [`Catalog`]. Name collisions
//! are resolved in [`collide`].

use crate::policy::Requests;
use crate::spec::Format;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

// The formats: one folder each, holding everything that format needs.
pub mod agentdir;
pub(crate) mod clawd;
pub(crate) mod mcp_json;
pub(crate) mod octomind;
pub(crate) mod opencrabs;

// Shared by several formats (or by discovery as a whole).
pub(crate) mod collide;
mod fsread;
#[doc(hidden)]
pub mod fuzz;
pub(crate) mod schema;
#[cfg(test)]
mod tests;
pub(crate) mod upstream;

pub(crate) use upstream::{SkippedUpstream, Transport, UpstreamSpec};

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
    /// Its kind and what a call of it needs. Serialized as `runner`, the
    /// name the definition digests were computed with.
    #[serde(rename = "runner")]
    pub kind: ToolKind,
    /// Paths the call must be able to read and execute (the script, its
    /// directory) even if the policy's roots don't cover them.
    pub needs_read: Vec<PathBuf>,
}

/// A tool's kind, with what a call of it needs; how each kind runs is
/// its `call::runner::ToolRunner`.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ToolKind {
    /// Octomind: exec the script; params on stdin (JSON) and as
    /// `OCTOMIND_PARAM_<UPPER>`.
    Octomind { program: PathBuf },
    /// clawd: `<interpreter> <entrypoint>` (or the entrypoint itself when no
    /// interpreter), JSON on stdin, cwd = project.
    Clawd {
        interpreter: Option<String>,
        entrypoint: PathBuf,
    },
    /// OpenCrabs shell executor: `sh -c <command> sh <values...>`, each
    /// `{{param}}` rendered as a positional parameter reference (see
    /// [`opencrabs::template`]); `$OPENCRABS_PARAMS` names a 0600 JSON file.
    OpencrabsShell {
        command: String,
        params: Vec<CrabParam>,
    },
    /// OpenCrabs http executor: toolcage makes the request itself, under
    /// the grant's network policy (`call::http`).
    OpencrabsHttp {
        method: String,
        url: String,
        headers: Vec<(String, String)>,
        params: Vec<CrabParam>,
    },
    /// A3S `kind: script` (QuickJS), run by `call::script` in a sandboxed child.
    AgentdirScript {
        path: PathBuf,
        allowed_tools: Vec<String>,
        timeout: Option<Duration>,
        max_tool_calls: Option<u64>,
        max_output_bytes: Option<u64>,
    },
    /// A tool of an upstream MCP server, as the gateway exposes it
    /// (`crate::upstream`): calls go to the server's running instance.
    Upstream {
        server: String,
        /// The tool's name on the server.
        tool: String,
        /// How the server is started (for the person approving a call).
        runs: String,
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
    /// Left out on purpose, nothing to fix in the file's own terms (an
    /// `.mcp.json` entry that runs toolcage itself); `check` still exits 0.
    Note,
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

/// A tool hidden by another of the same name (docs/formats.md#name-collisions:
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
    /// Upstream MCP servers (`.mcp.json`, A3S `kind: mcp`), sorted by name.
    pub upstreams: Vec<UpstreamSpec>,
    /// Declared upstream servers skipped at load, sorted by name (each
    /// also has its diagnostic).
    pub skipped_upstreams: Vec<SkippedUpstream>,
}

impl Catalog {
    pub fn get(&self, name: &str) -> Option<&ToolSpec> {
        self.tools
            .binary_search_by(|t| t.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.tools[i])
    }

    /// Why no tool `name` was loaded, when `check` says: an error in a
    /// file whose name is the tool's (the script, the A3S file, the clawd
    /// directory), a message about that tool, a disabled entry, or an
    /// error in a file whose text defines that name (`name = "x"`,
    /// `"name": "x"`, `name: x`) and could not be used.
    pub(crate) fn why_not_loaded(&self, name: &str) -> Option<&Diagnostic> {
        let quoted = format!("'{name}'");
        let about_it = |d: &Diagnostic| {
            d.message.starts_with(&format!("tool {quoted}"))
                || d.message.contains(&format!("\"name\" {quoted}"))
        };
        let is_error = |d: &&Diagnostic| d.severity == Severity::Error;
        let named_file = |d: &&Diagnostic| {
            let stem = d.file.file_stem().and_then(|s| s.to_str());
            let dir = d.file.parent().and_then(|p| p.file_name());
            stem == Some(name)
                || (stem == Some("tool") && dir.and_then(|s| s.to_str()) == Some(name))
        };
        self.diagnostics
            .iter()
            .filter(is_error)
            .find(named_file)
            .or_else(|| self.diagnostics.iter().find(|d| about_it(d)))
            .or_else(|| {
                self.diagnostics
                    .iter()
                    .filter(is_error)
                    .find(|d| fsread::defines_name(&d.file, name))
            })
    }
}

/// Where to look besides the project's own files.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `--tools-toml FILE`: an OpenCrabs tools.toml outside the project.
    pub tools_toml: Option<PathBuf>,
}

impl Diagnostic {
    /// An Error-severity diagnostic (the file or tool was skipped).
    pub(crate) fn error(
        file: &Path,
        line: Option<usize>,
        message: impl Into<String>,
    ) -> Diagnostic {
        Diagnostic {
            file: file.to_path_buf(),
            line,
            severity: Severity::Error,
            message: message.into(),
            fix: None,
        }
    }

    /// A Warning-severity diagnostic (loaded, but something is off).
    pub(crate) fn warning(
        file: &Path,
        line: Option<usize>,
        message: impl Into<String>,
    ) -> Diagnostic {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(file, line, message)
        }
    }

    /// A Note-severity diagnostic (left out on purpose; not a problem).
    pub fn note(file: &Path, line: Option<usize>, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Note,
            ..Diagnostic::error(file, line, message)
        }
    }

    /// Attach the fix.
    pub(crate) fn fix(mut self, fix: impl Into<String>) -> Diagnostic {
        self.fix = Some(fix.into());
        self
    }

    /// The line `toolcage check` prints for it, its file shown as `file`.
    pub(crate) fn check_line(&self, file: &str) -> String {
        check_line(
            self.severity,
            file,
            self.line,
            &self.message,
            self.fix.as_deref(),
        )
    }
}

/// What one format's scan produced, before collisions are resolved.
#[derive(Debug, Default)]
pub(crate) struct Found {
    pub tools: Vec<ToolSpec>,
    pub diagnostics: Vec<Diagnostic>,
    pub examined: Vec<PathBuf>,
    pub upstreams: Vec<UpstreamSpec>,
    pub skipped_upstreams: Vec<SkippedUpstream>,
}

impl Found {
    fn extend(&mut self, other: Found) {
        self.tools.extend(other.tools);
        self.upstreams.extend(other.upstreams);
        self.skipped_upstreams.extend(other.skipped_upstreams);
        self.diagnostics.extend(other.diagnostics);
        self.examined.extend(other.examined);
    }
}

/// The entries of a format's tool directory `<project>/<rel>`, or `None`
/// (and in `f` why, where it is more than a missing directory) when it
/// leads out of the project or cannot be listed.
fn tool_dir(project: &Path, rel: &str, f: &mut Found) -> Option<(PathBuf, Vec<fsread::Entry>)> {
    let dir = project.join(rel);
    if fsread::refuse_outside(&dir, project, "the project", &mut f.diagnostics) {
        f.examined.push(dir);
        return None;
    }
    let entries = fsread::list_dir(&dir, &mut f.diagnostics)?;
    Some((dir, entries))
}

/// A diagnostic as `toolcage check` prints it (and the management tools
/// quote it): `error    file:line: message (fix: ...)`.
pub(crate) fn check_line(
    severity: Severity,
    file: &str,
    line: Option<usize>,
    message: &str,
    fix: Option<&str>,
) -> String {
    let sev = match severity {
        Severity::Error => "error  ",
        Severity::Warning => "warning",
        Severity::Note => "note   ",
    };
    let line = line.map(|l| format!(":{l}")).unwrap_or_default();
    let fix = fix.map(|f| format!(" (fix: {f})")).unwrap_or_default();
    format!("{sev}  {file}{line}: {message}{fix}")
}

/// `[A-Za-z0-9_-]+`: the names every format accepts for a tool.
pub(crate) fn valid_tool_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `[A-Za-z_][A-Za-z0-9_]*`: usable as (part of) an environment variable.
pub(crate) fn valid_env_name(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// Every file and directory discovery reads for `project`: what a reloader
/// watches (a change there may change the catalog).
pub(crate) fn watch_paths(project: &Path, options: &Options) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = [
        octomind::DIR,
        clawd::DIR,
        opencrabs::FILE,
        agentdir::DIR,
        mcp_json::FILE,
    ]
    .iter()
    .map(|p| project.join(p))
    .collect();
    if let Some(t) = &options.tools_toml {
        paths.push(t.clone());
    }
    paths
}

/// The project `start` lies in, found as git and cargo find their roots:
/// the nearest of `start` and its ancestors that holds a tool directory
/// (`.agents/tools`, `.clawd/tools`, `tools.toml`, `.mcp.json`, an A3S
/// `tools/`) or a `.git`; `start` itself when none does. The search stops
/// below `stop` (the user's home) and `/`: a dotfiles repository in home
/// must not make all of home the project, and so a write root.
pub(crate) fn project_root(start: &Path, stop: Option<&Path>) -> PathBuf {
    let marks = |dir: &Path| {
        [
            octomind::DIR,
            clawd::DIR,
            opencrabs::FILE,
            mcp_json::FILE,
            ".git",
        ]
        .iter()
        .any(|m| dir.join(m).symlink_metadata().is_ok())
            || agentdir::holds_a3s_tools(dir)
    };
    start
        .ancestors()
        .take_while(|dir| Some(*dir) != stop && dir.parent().is_some())
        .find(|dir| marks(dir))
        .unwrap_or(start)
        .to_path_buf()
}

/// Discover every tool of `project` (an absolute, existing directory).
pub fn discover(project: &Path, options: &Options) -> Catalog {
    let run = std::panic::AssertUnwindSafe(|| discover_inner(project, options));
    match std::panic::catch_unwind(run) {
        Ok(c) => c,
        // Belt and braces: the scanners do not panic on any input, but a
        // bug must not take the MCP server down with it.
        Err(_) => Catalog {
            diagnostics: vec![
                Diagnostic::error(project, None, "internal error during discovery")
                    .fix("report this as a toolcage bug"),
            ],
            ..Catalog::default()
        },
    }
}

/// Skip every tool whose input schema refers outside itself (see
/// [`schema::remote_reference`]): validating its arguments would make
/// toolcage fetch a URL or read a file on the tool's behalf.
fn skip_remote_references(found: &mut Found) {
    let mut kept = Vec::with_capacity(found.tools.len());
    for tool in std::mem::take(&mut found.tools) {
        let Some((keyword, target)) = schema::remote_reference(&tool.input_schema) else {
            kept.push(tool);
            continue;
        };
        let text = fsread::read_capped(&tool.source, 1024 * 1024)
            .ok()
            .map(|b| String::from_utf8_lossy(&b.data).into_owned());
        found.diagnostics.push(schema::remote_reference_error(
            &tool.source,
            text.as_deref(),
            tool.line,
            &tool.name,
            (keyword, target),
        ));
    }
    found.tools = kept;
}

fn discover_inner(project: &Path, options: &Options) -> Catalog {
    let mut found = Found::default();
    found.extend(octomind::scan(project));
    found.extend(clawd::scan(project));
    found.extend(opencrabs::scan(project, options.tools_toml.as_deref()));
    found.extend(agentdir::scan(project));
    found.extend(mcp_json::scan(project));
    skip_remote_references(&mut found);
    let upstreams =
        collide::upstreams(std::mem::take(&mut found.upstreams), &mut found.diagnostics);

    let (tools, shadowed, mut diags) = collide::resolve(found.tools);
    let mut diagnostics = found.diagnostics;
    diagnostics.append(&mut diags);
    diagnostics.sort_by(|a, b| {
        (&a.file, a.line, a.severity, &a.message).cmp(&(&b.file, b.line, b.severity, &b.message))
    });
    diagnostics.dedup();
    let mut examined = found.examined;
    examined.sort();
    examined.dedup();
    let mut skipped_upstreams = found.skipped_upstreams;
    skipped_upstreams
        .sort_by(|a, b| (&a.name, &a.source, a.line).cmp(&(&b.name, &b.source, b.line)));
    Catalog {
        tools,
        diagnostics,
        shadowed,
        examined,
        upstreams,
        skipped_upstreams,
    }
}
