//! OpenCrabs dynamic tools: `[[tools]]` in `tools.toml` at the project
//! root and in `--tools-toml FILE` (seed: opencrabs-dynamic-tools.md).
//!
//! A TOML syntax error is one Error with its line and loses only the
//! `[[tools]]` entry it is in (docs/formats.md#opencrabs: a parse error
//! loses nothing else); a bad `[[tools]]` entry loses only that tool (the diagnostic names
//! `tools[N].key`, N from 0, and the line of its `[[tools]]` header).
//!
//! Decisions where the seed is silent:
//! - `requires_approval` defaults to `true`, as in OpenCrabs itself
//!   (`#[serde(default = "default_true")]` on `DynamicToolDef`): a tool
//!   without the key asks for approval, which the operator's policy can only
//!   make stricter (see `gate::approval`). `requires_approval = false` is a
//!   request that never waives an operator's mode.
//! - `enabled = false` tools are validated, not listed, and noted with a
//!   Warning "disabled".
//! - `timeout_secs`: an integer 1..=3600 → `requests.timeout`.
//! - http tools require `method` (GET, POST, PUT, PATCH, DELETE, HEAD,
//!   OPTIONS) and an `http(s)://` `url` whose host part is fixed (no
//!   `{{param}}`, no user information), and request network access to
//!   that host only (`requests.domains`); header names are fixed tokens.
//! - param `type` defaults to `string`; `default` may be a TOML string (as
//!   in the seed: `"50"`, `"null"`) converted by the type, or a native TOML
//!   value of the right type.
//! - `{{param}}` must name a declared param; in a shell `command` it must
//!   not sit inside shell quotes (see [`template`]).
//! - Unknown keys are Warnings.
//!
//! Here: this file (`[[tools]]` entries), `params.rs` (`[[tools.params]]`,
//! defaults, coercions), `template.rs` and `shellctx.rs` (the `{{param}}`
//! engine, and the shell context each placeholder sits in), `http.rs` (an
//! http tool's fixed host and header names).

pub(crate) mod http;
mod params;
pub(crate) mod shellctx;
pub(crate) mod template;

use super::fsread::{self, io_message};
use super::schema::{self, Param};
use super::{CrabParam, Diagnostic, Found, ToolKind, ToolSpec, valid_tool_name};
use crate::policy::RateLimit;
use crate::policy::Requests;
use crate::spec::Format;
use crate::text::line_at;
use params::parse_params;
#[cfg(test)]
pub(crate) use params::{convert_default, parse_coerce};
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::{Table, Value as Toml};

const READ_CAP: usize = 4 * 1024 * 1024;
const TOOL_KEYS: [&str; 12] = [
    "name",
    "description",
    "executor",
    "enabled",
    "requires_approval",
    "timeout_secs",
    "command",
    "method",
    "url",
    "headers",
    "params",
    "rate_limit",
];
const METHODS: [&str; 7] = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"];

/// Parse one tools.toml's text into tools (with `source` = `file`) and
/// diagnostics. Disabled tools are not returned. A TOML syntax error loses
/// only the `[[tools]]` entry it is in: the file is parsed again entry by
/// entry, and the entries that parse on their own are kept.
pub(crate) fn parse_tools_toml(text: &str, file: &Path) -> (Vec<ToolSpec>, Vec<Diagnostic>) {
    match toml::from_str::<Table>(text) {
        Ok(table) => parse_table(&table, text, file, 0),
        Err(e) => entry_by_entry(text, file, &e),
    }
}

/// The 1-based lines of the `[[tools]]` headers.
fn tool_headers(text: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| {
            let t = l.trim_start();
            t.starts_with("[[") && t[2..].trim_start().starts_with("tools") && {
                let r = t[2..].trim_start()[5..].trim_start();
                r.starts_with("]]")
            }
        })
        .map(|(i, _)| i + 1)
        .collect()
}

fn syntax_error(text: &str, file: &Path, e: &toml::de::Error, lost: &str) -> Diagnostic {
    let line = e.span().map(|s| line_at(text, s.start));
    let msg = e.message().replace('\n', " ");
    Diagnostic::error(file, line, format!("TOML syntax error: {msg}; {lost}"))
        .fix("fix the TOML syntax")
}

/// After a syntax error: each `[[tools]]` entry (and what comes before the
/// first) parsed on its own, at its own lines (the lines before it blank).
fn entry_by_entry(
    text: &str,
    file: &Path,
    whole: &toml::de::Error,
) -> (Vec<ToolSpec>, Vec<Diagnostic>) {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut starts = tool_headers(text);
    if starts.first().is_some_and(|&f| f > 1) {
        starts.insert(0, 1);
    }
    if starts.len() < 2 {
        let lost = "no tools loaded from this file";
        return (Vec::new(), vec![syntax_error(text, file, whole, lost)]);
    }
    let (mut tools, mut diags) = (Vec::new(), Vec::new());
    let mut n = 0;
    for (i, &start) in starts.iter().enumerate() {
        let end = starts.get(i + 1).map_or(lines.len(), |e| e - 1);
        let mut part = "\n".repeat(start - 1);
        part.extend(lines[start - 1..end].iter().copied());
        let is_entry = tool_headers(&part).len() == 1;
        match toml::from_str::<Table>(&part) {
            Ok(table) => {
                let (t, d) = parse_table(&table, &part, file, n);
                tools.extend(t);
                diags.extend(d);
            }
            Err(e) => {
                let lost = match is_entry {
                    true => format!(
                        "the [[tools]] entry at line {start} is skipped; the file's other entries are loaded"
                    ),
                    false => "the file's [[tools]] entries are loaded without it".to_string(),
                };
                diags.push(syntax_error(&part, file, &e, &lost));
            }
        }
        n += usize::from(is_entry);
    }
    (tools, diags)
}

/// The tools of a parsed file (or of one entry of it, the `n`th).
fn parse_table(
    table: &Table,
    text: &str,
    file: &Path,
    first: usize,
) -> (Vec<ToolSpec>, Vec<Diagnostic>) {
    let mut diags = Vec::new();
    for k in table.keys() {
        if k != "tools" {
            diags.push(
                Diagnostic::warning(file, None, format!("unknown top-level key '{k}' ignored"))
                    .fix("remove it; tools are declared with [[tools]]"),
            );
        }
    }
    let items = match table.get("tools") {
        None => return (Vec::new(), diags),
        Some(Toml::Array(a)) => a,
        Some(_) => {
            diags.push(
                Diagnostic::error(file, None, "'tools' must be an array of tables")
                    .fix("declare tools with [[tools]]"),
            );
            return (Vec::new(), diags);
        }
    };
    // The Nth `[[tools]]` header is the Nth array element (inline arrays
    // have no header and get no line).
    let headers = tool_headers(text);
    let mut tools = Vec::new();
    for (n, item) in items.iter().enumerate() {
        let line = if headers.len() == items.len() {
            headers.get(n).copied()
        } else {
            None
        };
        let mut cx = Cx {
            file,
            line,
            n: first + n,
            name: String::new(),
            diags: &mut diags,
            bad: false,
        };
        if let Some(spec) = parse_tool(item, &mut cx) {
            tools.push(spec);
        }
    }
    (tools, diags)
}

/// Per-tool diagnostic context.
struct Cx<'a> {
    file: &'a Path,
    line: Option<usize>,
    n: usize,
    name: String,
    diags: &'a mut Vec<Diagnostic>,
    bad: bool,
}

impl Cx<'_> {
    fn at(&self, key: &str) -> String {
        if self.name.is_empty() {
            format!("tools[{}].{key}", self.n)
        } else {
            format!("tools[{}] ('{}').{key}", self.n, self.name)
        }
    }
    fn err(&mut self, key: &str, msg: impl std::fmt::Display, fix: &str) {
        let m = format!("{}: {msg}; tool skipped", self.at(key));
        self.diags
            .push(Diagnostic::error(self.file, self.line, m).fix(fix));
        self.bad = true;
    }
    fn warn(&mut self, key: &str, msg: impl std::fmt::Display) {
        let m = format!("{}: {msg}", self.at(key));
        self.diags
            .push(Diagnostic::warning(self.file, self.line, m).fix("remove it"));
    }
    fn string(&mut self, t: &Table, key: &str, required: bool) -> Option<String> {
        match t.get(key) {
            Some(Toml::String(s)) => Some(s.clone()),
            Some(v) => {
                self.err(
                    key,
                    format!("must be a string, got {}", v.type_str()),
                    "quote the value",
                );
                None
            }
            None if required => {
                self.err(key, "missing", &format!("add `{key} = \"...\"`"));
                None
            }
            None => None,
        }
    }
    fn boolean(&mut self, t: &Table, key: &str) -> Option<bool> {
        match t.get(key) {
            Some(Toml::Boolean(b)) => Some(*b),
            Some(v) => {
                self.err(
                    key,
                    format!("must be true or false, got {}", v.type_str()),
                    "write true or false",
                );
                None
            }
            None => None,
        }
    }
}

fn parse_tool(item: &Toml, cx: &mut Cx) -> Option<ToolSpec> {
    let Some(t) = item.as_table() else {
        cx.err("", "must be a table", "declare tools with [[tools]]");
        return None;
    };
    let name = tool_name(t, cx);
    let description = cx.string(t, "description", true).unwrap_or_default();
    if description.trim().is_empty() && t.contains_key("description") {
        cx.err("description", "is empty", "describe what the tool does");
    }
    let executor = cx.string(t, "executor", true).unwrap_or_default();
    let enabled = cx.boolean(t, "enabled").unwrap_or(true);
    let mut requests = tool_requests(t, cx);
    let params = parse_params(t.get("params"), cx);
    let declared: Vec<&str> = params.iter().map(|(p, _)| p.name.as_str()).collect();
    let crab: Vec<CrabParam> = params.iter().map(|(_, c)| c.clone()).collect();
    let kind = match executor.as_str() {
        "shell" => shell_tool(t, &declared, crab, cx),
        "http" => http_tool(t, &declared, crab, &mut requests, cx),
        "" => return None, // already reported (missing or not a string)
        other => {
            cx.err(
                "executor",
                format!("unknown executor '{other}'"),
                "use \"shell\" or \"http\"",
            );
            return None;
        }
    };
    if cx.bad {
        return None;
    }
    if !enabled {
        cx.diags.push(
            Diagnostic::warning(
                cx.file,
                cx.line,
                format!("tool '{name}' is disabled; not listed"),
            )
            .fix("set `enabled = true` to list it"),
        );
        return None;
    }
    let schema_params: Vec<Param> = params.into_iter().map(|(p, _)| p).collect();
    Some(ToolSpec {
        name,
        format: Format::Opencrabs,
        source: cx.file.to_path_buf(),
        line: cx.line,
        description: description.trim().to_owned(),
        input_schema: schema::object_schema(&schema_params),
        requests,
        kind,
        needs_read: Vec::new(),
    })
}

/// `name`, which later diagnostics quote, then the unknown keys.
fn tool_name(t: &Table, cx: &mut Cx) -> String {
    let name = cx.string(t, "name", true).unwrap_or_default();
    if !(name.is_empty() || valid_tool_name(&name) && name.len() <= 64) {
        cx.err(
            "name",
            format!("'{name}' must match [A-Za-z0-9_-]{{1,64}}"),
            "rename the tool",
        );
    }
    cx.name = name.clone();
    for k in t.keys() {
        if !TOOL_KEYS.contains(&k.as_str()) {
            cx.warn(k, "unknown key ignored");
        }
    }
    name
}

/// What the tool asks of the policy whatever its executor: approval, its
/// timeout, its rate limit.
fn tool_requests(t: &Table, cx: &mut Cx) -> Requests {
    let approval_key = cx.boolean(t, "requires_approval");
    let requires_approval = Some(approval_key.unwrap_or(true));
    // Unset: OpenCrabs' own default, true. Say so wherever approval shows.
    let approval_default = approval_key.is_none().then(|| {
        format!(
            "requires_approval defaults to true in OpenCrabs; set requires_approval = false in {} to run it without asking",
            cx.file
                .file_name()
                .map_or("tools.toml".into(), |n| n.to_string_lossy())
        )
    });
    let timeout = match t.get("timeout_secs") {
        None => None,
        Some(Toml::Integer(s)) if (1..=3600).contains(s) => {
            u64::try_from(*s).ok().map(Duration::from_secs)
        }
        Some(v) => {
            cx.err(
                "timeout_secs",
                format!("{v} out of range"),
                "use an integer number of seconds from 1 to 3600",
            );
            None
        }
    };
    let rate_limit = t.get("rate_limit").and_then(|r| parse_rate(r, cx));
    Requests {
        timeout,
        requires_approval,
        approval_default,
        rate_limit,
        ..Requests::default()
    }
}

fn shell_tool(t: &Table, declared: &[&str], params: Vec<CrabParam>, cx: &mut Cx) -> ToolKind {
    let command = cx.string(t, "command", true).unwrap_or_default();
    if let Err(e) = shellctx::check_shell(&command, declared) {
        cx.err("command", e, "declare the param, or fix the template");
    }
    for k in ["method", "url", "headers"] {
        if t.contains_key(k) {
            cx.warn(k, "ignored by the shell executor");
        }
    }
    ToolKind::OpencrabsShell { command, params }
}

/// An http tool: its method, its url (whose fixed host it asks to reach),
/// its headers.
fn http_tool(
    t: &Table,
    declared: &[&str],
    params: Vec<CrabParam>,
    requests: &mut Requests,
    cx: &mut Cx,
) -> ToolKind {
    let method = cx
        .string(t, "method", true)
        .unwrap_or_default()
        .to_ascii_uppercase();
    if !method.is_empty() && !METHODS.contains(&method.as_str()) {
        cx.err(
            "method",
            format!("unsupported method '{method}'"),
            "use GET, POST, PUT, PATCH, DELETE, HEAD or OPTIONS",
        );
    }
    let url = http_url(t, declared, requests, cx);
    let headers = http_headers(t, declared, cx);
    if t.contains_key("command") {
        cx.warn("command", "ignored by the http executor");
    }
    requests.network = Some(true);
    ToolKind::OpencrabsHttp {
        method,
        url,
        headers,
        params,
    }
}

fn http_url(t: &Table, declared: &[&str], requests: &mut Requests, cx: &mut Cx) -> String {
    let url = cx.string(t, "url", true).unwrap_or_default();
    if !(url.is_empty() || url.starts_with("http://") || url.starts_with("https://")) {
        cx.err(
            "url",
            "must start with http:// or https://",
            "write the full URL",
        );
    }
    if let Err(e) = template::check_declared(&url, declared) {
        cx.err("url", e, "declare the param, or fix the template");
    }
    if url.starts_with("http://") || url.starts_with("https://") {
        // The fixed host is what the tool asks to reach; the policy
        // decides whether it gets it.
        match http::host_pattern(&url) {
            Ok(host) => requests.domains = Some(vec![host]),
            Err(e) => cx.err("url", e, "write a fixed host in the url"),
        }
    }
    url
}

/// `[tools.headers]`: fixed names, values that may hold `{{param}}`.
fn http_headers(t: &Table, declared: &[&str], cx: &mut Cx) -> Vec<(String, String)> {
    let mut headers = Vec::new();
    let h = match t.get("headers") {
        None => return headers,
        Some(Toml::Table(h)) => h,
        Some(_) => {
            cx.err("headers", "must be a table", "use [tools.headers]");
            return headers;
        }
    };
    for (k, v) in h {
        let key = format!("headers.{k}");
        if !http::valid_header_name(k) {
            cx.err(
                &key,
                "not a header name (letters, digits and -, no {{param}})",
                "write a fixed header name; parameters go in the value",
            );
        }
        let Some(v) = v.as_str() else {
            cx.err(&key, "must be a string", "quote the value");
            continue;
        };
        if let Err(e) = template::check_declared(v, declared) {
            cx.err(&key, e, "declare the param, or fix the template");
        }
        headers.push((k.clone(), v.to_owned()));
    }
    headers
}

fn parse_rate(r: &Toml, cx: &mut Cx) -> Option<RateLimit> {
    let Some(r) = r.as_table() else {
        cx.err("rate_limit", "must be a table", "use [tools.rate_limit]");
        return None;
    };
    for k in r.keys() {
        if k != "requests" && k != "window" {
            cx.warn(&format!("rate_limit.{k}"), "unknown key ignored");
        }
    }
    let requests = match r.get("requests") {
        Some(Toml::String(s)) => s.trim().parse::<u32>().ok(),
        Some(Toml::Integer(i)) => u32::try_from(*i).ok(),
        _ => None,
    }
    .filter(|n| *n > 0);
    let window = match r.get("window") {
        Some(Toml::String(s)) => crate::text::parse_duration(s).ok(),
        Some(Toml::Integer(i)) => u64::try_from(*i).ok().map(Duration::from_secs),
        _ => None,
    }
    .filter(|d| !d.is_zero());
    match (requests, window) {
        (Some(requests), Some(window)) => Some(RateLimit { requests, window }),
        (None, _) => {
            cx.err(
                "rate_limit.requests",
                "missing or not a positive integer",
                "e.g. requests = \"10\"",
            );
            None
        }
        (_, None) => {
            cx.err(
                "rate_limit.window",
                "missing or not a positive duration",
                "e.g. window = \"1m\", \"30s\", \"1h\"",
            );
            None
        }
    }
}

fn scan_file(path: &Path, required: bool, f: &mut Found) {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => return,
        _ => {}
    }
    f.examined.push(path.to_path_buf());
    let text = match fsread::read_text(path, READ_CAP) {
        Ok(t) => t,
        Err(d) => {
            f.diagnostics.push(d);
            return;
        }
    };
    let (mut tools, mut diags) = parse_tools_toml(&text, path);
    f.tools.append(&mut tools);
    f.diagnostics.append(&mut diags);
}

/// Whether `path`, given as `--tools-toml`, is a file that can be read:
/// the commands that discover tools refuse to start without it (`check`
/// reports it), rather than quietly leave its tools out.
pub(crate) fn usable_extra(path: &Path) -> Result<(), String> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => "no such file (or a dangling symlink)".to_string(),
        _ => io_message(&e),
    })?;
    if meta.is_dir() {
        return Err("is a directory, not a file".into());
    }
    std::fs::File::open(path)
        .map(drop)
        .map_err(|e| format!("cannot read it: {}", io_message(&e)))
}

/// The project's OpenCrabs file, relative to the project.
pub(crate) const FILE: &str = "tools.toml";

/// Scan `<project>/tools.toml` and the `--tools-toml` file.
pub(crate) fn scan(project: &Path, extra: Option<&Path>) -> Found {
    let mut f = Found::default();
    let own = project.join(FILE);
    // The project's own tools.toml must be the project's: a link to any
    // other file would be read (and quoted in errors) with our rights.
    // `--tools-toml` is the operator's choice and may be anywhere.
    if fsread::refuse_outside(&own, project, "the project", &mut f.diagnostics) {
        f.examined.push(own.clone());
    } else {
        scan_file(&own, false, &mut f);
    }
    if let Some(extra) = extra {
        let extra: PathBuf = std::path::absolute(extra).unwrap_or_else(|_| extra.to_path_buf());
        let same = match (std::fs::canonicalize(&extra), std::fs::canonicalize(&own)) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        };
        if !same {
            if let Err(e) = usable_extra(&extra) {
                f.examined.push(extra.clone());
                f.diagnostics.push(
                    Diagnostic::error(&extra, None, format!("--tools-toml: {e}"))
                        .fix("pass an existing tools.toml"),
                );
            } else {
                scan_file(&extra, true, &mut f);
            }
        }
    }
    f
}
