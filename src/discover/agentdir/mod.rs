//! A3S AgentDir tools: `tools/<name>.md` with YAML front matter between
//! `---` lines (seed: a3s-agentdir-tools.md). `kind: script` (QuickJS) is
//! a tool, run by `call::script`; `kind: mcp` is an upstream server, run by
//! the gateway.
//!
//! Decisions where the seed is silent:
//! - Only `*.md` files directly in `tools/` are examined; a `.md` file
//!   without front matter (a README) is a Warning, not an Error, since
//!   `tools/` is a common directory name.
//! - The description is the `description` key, else the first paragraph of
//!   the body (lines joined by single spaces); neither is an Error.
//! - Limits: `timeoutMs` 1..=600000, `maxToolCalls` 1..=10000,
//!   `maxOutputBytes` 1..=64 MiB, integers; `timeoutMs` is also requested
//!   as the tool's timeout.
//! - `${VAR}` in `env` values and `url` is checked for syntax and kept as
//!   written; the gateway expands it when it starts the server, reading
//!   only what the operator allows (see `discover::upstream`). `$` not
//!   followed by `{` is literal.
//! - Script tools take `{"inputs": {...}}`; mcp tools an open object.
//! - Unknown keys are Warnings.
//!
//! Here: this file (a file's front matter to a tool or a server),
//! `kinds.rs` (the keys of each kind), `frontmatter.rs` (splitting and
//! bounding the YAML), `tooldir.rs` (whether `tools/` holds A3S tools,
//! which the default policy protects).

mod frontmatter;
mod kinds;
mod tooldir;

use super::fsread::{self, io_message};
use super::{
    Diagnostic, Found, SkippedUpstream, ToolKind, ToolSpec, Transport, UpstreamSpec,
    valid_tool_name,
};
use crate::policy::Requests;
use crate::spec::Format;
pub(crate) use frontmatter::split_front_matter;
use frontmatter::{MAX_FLOW_DEPTH, MAX_FRONT_MATTER, first_paragraph, flow_depth};
use kinds::{parse_mcp, parse_script};
use serde_yaml_ng::{Mapping, Value as Yaml};
use std::path::{Path, PathBuf};
use std::time::Duration;
pub(crate) use tooldir::a3s_tool_files;
pub use tooldir::holds_a3s_tools;

const READ_CAP: usize = 1024 * 1024;

/// What the front matter declares (validated without the file system).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Doc {
    pub name: String,
    pub description: String,
    pub kind: Kind,
    /// 1-based line of the opening `---`.
    pub line: usize,
    /// 1-based line of each key's first occurrence in the front matter
    /// (nested keys too), so a diagnostic can point at it.
    pub key_lines: Vec<(String, usize)>,
}

fn line_of(lines: &[(String, usize)], key: &str) -> Option<usize> {
    lines.iter().find(|(k, _)| k == key).map(|&(_, l)| l)
}

/// `key:` at the start of each YAML line (after indentation and `- `),
/// first occurrence only. A heuristic for diagnostics, not a parser.
pub(crate) fn scan_key_lines(yaml: &str, first_line: usize) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for (i, raw) in yaml.lines().enumerate() {
        let t = raw.trim_start();
        let t = t.strip_prefix("- ").unwrap_or(t);
        let Some(colon) = t.find(':') else { continue };
        if !t[colon + 1..].is_empty() && !t[colon + 1..].starts_with([' ', '\t']) {
            continue;
        }
        let key = t[..colon].trim().trim_matches(['"', '\'']);
        if key.is_empty() || key.starts_with('#') || key.contains(char::is_whitespace) {
            continue;
        }
        if line_of(&out, key).is_none() {
            out.push((key.to_owned(), first_line + i));
        }
    }
    out
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Kind {
    Script {
        /// As written, relative to the AgentDir root.
        path: String,
        allowed_tools: Vec<String>,
        timeout_ms: Option<u64>,
        max_tool_calls: Option<u64>,
        max_output_bytes: Option<u64>,
    },
    Mcp {
        transport: String,
        command: Option<String>,
        args: Vec<String>,
        url: Option<String>,
        /// Unexpanded values.
        env: Vec<(String, String)>,
    },
}

struct Cx<'a> {
    file: &'a Path,
    diags: Vec<Diagnostic>,
    bad: bool,
    key_lines: Vec<(String, usize)>,
}

impl Cx<'_> {
    fn err(&mut self, msg: impl Into<String>, fix: &str) {
        self.err_at("", msg, fix);
    }
    /// An error on the line where `key` is written (line 1 if it is not).
    fn err_at(&mut self, key: &str, msg: impl Into<String>, fix: &str) {
        let m = format!("{}; tool skipped", msg.into());
        let line = self.line(key);
        self.diags
            .push(Diagnostic::error(self.file, Some(line), m).fix(fix));
        self.bad = true;
    }
    fn line(&self, key: &str) -> usize {
        line_of(&self.key_lines, key).unwrap_or(1)
    }
    fn string(&mut self, m: &Mapping, key: &str) -> Option<String> {
        match m.get(key) {
            None | Some(Yaml::Null) => None,
            Some(Yaml::String(s)) => Some(s.clone()),
            Some(Yaml::Number(n)) => Some(n.to_string()),
            Some(Yaml::Bool(b)) => Some(b.to_string()),
            Some(_) => {
                self.err_at(
                    key,
                    format!("'{key}' must be a string"),
                    "write a plain string",
                );
                None
            }
        }
    }
    fn strings(&mut self, m: &Mapping, key: &str) -> Vec<String> {
        match m.get(key) {
            None | Some(Yaml::Null) => Vec::new(),
            Some(Yaml::Sequence(s)) => s
                .iter()
                .filter_map(|v| match v {
                    Yaml::String(s) => Some(s.clone()),
                    Yaml::Number(n) => Some(n.to_string()),
                    Yaml::Bool(b) => Some(b.to_string()),
                    _ => {
                        self.err_at(
                            key,
                            format!("'{key}' must be a list of strings"),
                            "write [a, b]",
                        );
                        None
                    }
                })
                .collect(),
            Some(_) => {
                self.err_at(
                    key,
                    format!("'{key}' must be a list of strings"),
                    "write [a, b]",
                );
                Vec::new()
            }
        }
    }
}

const COMMON_KEYS: [&str; 3] = ["kind", "name", "description"];
const SCRIPT_KEYS: [&str; 3] = ["path", "allowed_tools", "limits"];
const MCP_KEYS: [&str; 5] = ["transport", "command", "args", "url", "env"];

/// Parse and validate a tool `.md` file's text. `Ok(None)`: no front matter
/// (not a tool). Diagnostics (warnings) come back with the doc.
pub(crate) fn parse_md(text: &str, file: &Path) -> (Option<Doc>, Vec<Diagnostic>) {
    let (yaml, yaml_line, body) = match front_matter(text, file) {
        Ok(parts) => parts,
        Err(diag) => return (None, vec![diag]),
    };
    let mut cx = Cx {
        file,
        diags: Vec::new(),
        bad: false,
        key_lines: scan_key_lines(yaml, yaml_line),
    };
    let v: Yaml = match serde_yaml_ng::from_str(yaml) {
        Ok(v) => v,
        Err(e) => return (None, vec![yaml_error(&e, file, yaml_line)]),
    };
    let Yaml::Mapping(m) = v else {
        cx.err(
            "front matter must be a mapping of keys",
            "write `key: value` lines",
        );
        return (None, cx.diags);
    };
    let kind = cx.string(&m, "kind").unwrap_or_default();
    unknown_keys(&m, &kind, &mut cx);
    let name = doc_name(&m, &mut cx);
    let description = description(&m, body, &mut cx);
    let kind = match kind.as_str() {
        "script" => parse_script(&m, &mut cx),
        "mcp" => parse_mcp(&m, &mut cx),
        "" => {
            cx.err("missing 'kind'", "add `kind: script` or `kind: mcp`");
            None
        }
        other => {
            cx.err_at(
                "kind",
                format!("unknown kind '{other}'"),
                "use `kind: script` or `kind: mcp`",
            );
            None
        }
    };
    match kind {
        Some(kind) if !cx.bad => (
            Some(Doc {
                name,
                description,
                kind,
                line: 1,
                key_lines: cx.key_lines,
            }),
            cx.diags,
        ),
        _ => (None, cx.diags),
    }
}

/// The front matter (its text and first line) and the body, or the one
/// diagnostic that says why the file is not a tool.
fn front_matter<'t>(text: &'t str, file: &Path) -> Result<(&'t str, usize, &'t str), Diagnostic> {
    let (yaml, yaml_line, body) = match split_front_matter(text) {
        None => {
            return Err(
                Diagnostic::warning(file, Some(1), "no YAML front matter; not a tool")
                    .fix("start the file with a `---` line, `kind: ...` and `name: ...`"),
            );
        }
        Some(Err(e)) => {
            return Err(
                Diagnostic::error(file, Some(1), format!("{e}; tool skipped"))
                    .fix("close the front matter with `---`"),
            );
        }
        Some(Ok(parts)) => parts,
    };
    if yaml.len() > MAX_FRONT_MATTER || flow_depth(yaml) > MAX_FLOW_DEPTH {
        return Err(Diagnostic::error(
            file,
            Some(yaml_line),
            format!(
                "front matter larger than {} KiB or nested deeper than {MAX_FLOW_DEPTH} brackets; tool skipped",
                MAX_FRONT_MATTER / 1024
            ),
        )
        .fix("simplify the front matter"));
    }
    Ok((yaml, yaml_line, body))
}

fn yaml_error(e: &serde_yaml_ng::Error, file: &Path, yaml_line: usize) -> Diagnostic {
    let line = e
        .location()
        .map(|l| l.line() + yaml_line - 1)
        .unwrap_or(yaml_line);
    let msg = e.to_string().replace('\n', " ");
    Diagnostic::error(
        file,
        Some(line),
        format!("invalid YAML front matter: {msg}; tool skipped"),
    )
    .fix("fix the YAML")
}

/// Keys neither common nor of `kind` are warnings (all pass when the kind
/// is unknown: its own error says enough).
fn unknown_keys(m: &Mapping, kind: &str, cx: &mut Cx) {
    let allowed: &[&str] = match kind {
        "script" => &SCRIPT_KEYS,
        "mcp" => &MCP_KEYS,
        _ => &[],
    };
    for k in m.keys() {
        match k.as_str() {
            Some(k) if COMMON_KEYS.contains(&k) || allowed.contains(&k) || allowed.is_empty() => {}
            Some(k) => cx.diags.push(
                Diagnostic::warning(
                    cx.file,
                    Some(cx.line(k)),
                    format!("unknown key '{k}' ignored"),
                )
                .fix("remove it, or check its spelling"),
            ),
            None => cx.diags.push(
                Diagnostic::warning(cx.file, Some(1), "non-string key ignored").fix("remove it"),
            ),
        }
    }
}

fn doc_name(m: &Mapping, cx: &mut Cx) -> String {
    match cx.string(m, "name") {
        Some(n) if valid_tool_name(&n) && n.len() <= 64 => n,
        Some(n) => {
            cx.err_at(
                "name",
                format!("invalid name '{n}'"),
                "use letters, digits, '_' and '-', at most 64",
            );
            String::new()
        }
        None => {
            cx.err("missing 'name'", "add `name: my-tool`");
            String::new()
        }
    }
}

/// The `description` key, else the body's first paragraph.
fn description(m: &Mapping, body: &str, cx: &mut Cx) -> String {
    let description = cx
        .string(m, "description")
        .map(|d| d.trim().to_owned())
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| first_paragraph(body));
    if description.is_empty() {
        cx.err(
            "no description",
            "write a paragraph after the front matter, or a `description` key",
        );
    }
    description
}

/// File-system checks (script path) and env expansion; the tool.
fn to_spec(project: &Path, file: &Path, doc: Doc, diags: &mut Vec<Diagnostic>) -> Option<ToolSpec> {
    let mut requests = Requests::default();
    let mut needs_read = Vec::new();
    let (kind, input_schema) = match doc.kind {
        Kind::Script {
            path,
            allowed_tools,
            timeout_ms,
            max_tool_calls,
            max_output_bytes,
        } => {
            let joined = project.join(&path);
            let real = match std::fs::canonicalize(&joined) {
                Ok(r) => r,
                Err(e) => {
                    diags.push(
                        Diagnostic::error(
                            file,
                            Some(line_of(&doc.key_lines, "path").unwrap_or(doc.line)),
                            format!("script path '{path}': {}; tool skipped", io_message(&e)),
                        )
                        .fix("create the script or fix `path`"),
                    );
                    return None;
                }
            };
            let root = std::fs::canonicalize(project).unwrap_or_else(|_| project.to_path_buf());
            if !real.starts_with(&root) {
                diags.push(
                    Diagnostic::error(
                        file,
                        Some(line_of(&doc.key_lines, "path").unwrap_or(doc.line)),
                        format!("script path '{path}' resolves outside the AgentDir; tool skipped"),
                    )
                    .fix("keep scripts inside the project, without symlinks out"),
                );
                return None;
            }
            let timeout = timeout_ms.map(Duration::from_millis);
            requests.timeout = timeout;
            needs_read.push(real.clone());
            let schema = serde_json::json!({
                "type": "object",
                "properties": {"inputs": {"type": "object", "description": "Inputs passed to run(ctx, inputs)"}},
                "additionalProperties": false
            });
            (
                ToolKind::AgentdirScript {
                    path: real,
                    allowed_tools,
                    timeout,
                    max_tool_calls,
                    max_output_bytes,
                },
                schema,
            )
        }
        // An upstream server, not a tool: `to_upstream`.
        Kind::Mcp { .. } => return None,
    };
    Some(ToolSpec {
        name: doc.name,
        format: Format::Agentdir,
        source: file.to_path_buf(),
        line: Some(doc.line),
        description: doc.description,
        input_schema,
        requests,
        kind,
        needs_read,
    })
}

/// A `kind: mcp` file: its upstream server, with `${VAR}` in the command,
/// arguments, url and env kept as written once their syntax is checked
/// (the gateway expands them, reading only what `env_from_host` allows).
fn to_upstream(file: &Path, doc: Doc, diags: &mut Vec<Diagnostic>) -> Option<UpstreamSpec> {
    let Kind::Mcp {
        transport,
        command,
        args,
        url,
        env,
    } = doc.kind
    else {
        return None;
    };
    if super::upstream::impersonates_toolcage(&doc.name) {
        diags.push(
            Diagnostic::error(
                file,
                Some(line_of(&doc.key_lines, "name").unwrap_or(doc.line)),
                format!(
                    "server name '{}' is toolcage's own: its requests to the person would seem \
                     to come from toolcage; server skipped",
                    doc.name
                ),
            )
            .fix("rename the server (`name:`)"),
        );
        return None;
    }
    // `key` names the line; `label` the value (`env T`).
    let fail = |key: &str, label: &str, e: String, diags: &mut Vec<Diagnostic>| {
        diags.push(
            Diagnostic::error(
                file,
                Some(line_of(&doc.key_lines, key).unwrap_or(doc.line)),
                format!("{label}: {e}; server skipped"),
            )
            .fix("write ${NAME} or ${NAME:-default}"),
        );
    };
    let checked = |v: String| super::upstream::check_template(&v).map(|()| v);
    let mut kept = Vec::new();
    for (k, v) in env {
        match checked(v) {
            Ok(x) => kept.push((k, x)),
            Err(e) => {
                fail(&k, &format!("env {k}"), e, diags);
                return None;
            }
        }
    }
    let one = |key: &str, v: Option<String>, diags: &mut Vec<Diagnostic>| match v {
        None => Ok(None),
        Some(v) => checked(v).map(Some).map_err(|e| fail(key, key, e, diags)),
    };
    let mut requests = Requests::default();
    let transport = if transport == "http" {
        let url = one("url", url, diags).ok()?.unwrap_or_default();
        requests.network = Some(true);
        Transport::Http {
            url,
            headers: Vec::new(),
        }
    } else {
        let command = one("command", command, diags).ok()?.unwrap_or_default();
        let mut a = Vec::new();
        for x in args {
            a.push(one("args", Some(x), diags).ok()??);
        }
        Transport::Stdio {
            command,
            args: a,
            env: kept,
            cwd: None,
        }
    };
    Some(UpstreamSpec {
        name: doc.name,
        format: Format::Agentdir,
        source: file.to_path_buf(),
        line: Some(doc.line),
        transport,
        requests,
    })
}

/// A `kind: mcp` file [`to_upstream`] skipped (`why`), as `toolcage
/// upstreams` lists it.
fn skipped_upstream(file: &Path, doc: &Doc, why: &Diagnostic) -> SkippedUpstream {
    let (transport, runs) = match &doc.kind {
        Kind::Mcp {
            transport,
            command,
            args,
            url,
            ..
        } => {
            let runs = match transport.as_str() {
                "http" => url.clone().unwrap_or_default(),
                _ => command
                    .iter()
                    .chain(args)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(" "),
            };
            (transport.clone(), runs)
        }
        Kind::Script { .. } => Default::default(),
    };
    SkippedUpstream {
        name: doc.name.clone(),
        format: Format::Agentdir,
        source: file.to_path_buf(),
        line: Some(doc.line),
        state: "skipped",
        transport,
        runs,
        diagnostic: why.clone(),
    }
}

/// Where A3S AgentDir tools live (`<name>.md`), relative to the project.
pub(crate) const DIR: &str = "tools";

/// Scan `<project>/tools/*.md`.
pub(crate) fn scan(project: &Path) -> Found {
    let mut f = Found::default();
    let Some((dir, entries)) = super::tool_dir(project, DIR, &mut f) else {
        return f;
    };
    for e in entries {
        if !e.name.ends_with(".md") || e.name.starts_with('.') {
            continue;
        }
        let path: PathBuf = e.path.clone();
        if matches!(&e.meta, Ok(m) if m.is_dir()) {
            continue;
        }
        f.examined.push(path.clone());
        if fsread::refuse_outside(&path, &dir, "tools/", &mut f.diagnostics) {
            continue;
        }
        let text = match fsread::read_text(&path, READ_CAP) {
            Ok(t) => t,
            Err(d) => {
                f.diagnostics.push(d);
                continue;
            }
        };
        let (doc, mut diags) = parse_md(&text, &path);
        f.diagnostics.append(&mut diags);
        match doc {
            Some(doc) if matches!(doc.kind, Kind::Mcp { .. }) => {
                let before = f.diagnostics.len();
                match to_upstream(&path, doc.clone(), &mut f.diagnostics) {
                    Some(u) => f.upstreams.push(u),
                    // Skipped (an unset variable): `upstreams` lists it too.
                    None => f.skipped_upstreams.extend(
                        (f.diagnostics.get(before)).map(|d| skipped_upstream(&path, &doc, d)),
                    ),
                }
            }
            Some(doc) => f
                .tools
                .extend(to_spec(project, &path, doc, &mut f.diagnostics)),
            None => {}
        }
    }
    f
}
