//! clawd custom tools: `.clawd/tools/<id>/tool.json` plus a script,
//! exposed as `ct_<id>` (seed: clawd-custom-tools.md).
//!
//! Decisions where the seed is silent:
//! - `integer` is accepted as a parameter type besides the documented five;
//!   a parameter without `type` is a string (with a warning); other schema
//!   keywords in a parameter (`default`, `items`, `minimum`, ...) pass
//!   through into the input schema.
//! - `name` must differ from the directory only in nothing: when it does,
//!   a warning says the tool is still exposed as `ct_<id>`.
//! - `timeout` may be fractional; when absent the documented default 30 s
//!   is requested (`requests.timeout`), since that is clawd's contract.
//! - Unknown top-level keys are warnings.
//! - `parameters` written as a JSON Schema keeps its `definitions` / `$defs`,
//!   so local `#/definitions/...` references work; a parameter that is only
//!   a `$ref` gets no `"type"` of its own. A reference outside the document
//!   (`http:`, `file:`, another file) skips the tool (see
//!   [`schema::remote_reference`]).

mod params;

use super::fsread::{self, io_message};
use super::schema::{self, Param};
use super::{Diagnostic, Found, ToolKind, ToolSpec, valid_tool_name};
use crate::policy::Requests;
use crate::spec::Format;
use params::{parse_param, unwrap_json_schema};
use serde_json::{Map, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

const READ_CAP: usize = 1024 * 1024;
/// The interpreters clawd knows.
pub(crate) const INTERPRETERS: [&str; 6] = ["bash", "sh", "python3", "python", "bun", "node"];
const KNOWN_KEYS: [&str; 7] = [
    "name",
    "description",
    "parameters",
    "required",
    "entrypoint",
    "interpreter",
    "timeout",
];

/// A validated `tool.json` (everything that needs no file system).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolJson {
    pub name: String,
    pub description: String,
    pub params: Vec<Param>,
    pub entrypoint: String,
    /// Explicit or auto-detected; `None` = run the entrypoint directly.
    pub interpreter: Option<String>,
    pub timeout: Duration,
    /// `definitions` / `$defs` of a `parameters` written as a JSON Schema,
    /// copied to the top of the input schema.
    pub defs: Map<String, Value>,
}

/// The interpreter for an entrypoint without an explicit one.
pub(crate) fn detect_interpreter(entrypoint: &str) -> Option<&'static str> {
    let ext = entrypoint.rsplit_once('.').map(|(_, e)| e)?;
    match ext {
        "sh" => Some("bash"),
        "py" => Some("python3"),
        "ts" | "js" => Some("bun"),
        _ => None,
    }
}

/// `name`: lowercase alphanumeric, hyphens, underscores, at most 64.
pub(crate) fn valid_clawd_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

/// The 1-based line of the first `"key":` in a JSON text (a good guess at
/// where a key is defined; nested keys of the same name may come first).
pub(crate) fn key_line(text: &str, key: &str) -> Option<usize> {
    let needle = format!("\"{key}\"");
    let mut from = 0;
    while let Some(p) = text[from..].find(&needle) {
        let at = from + p;
        let after = text[at + needle.len()..].trim_start();
        if after.starts_with(':') {
            return Some(crate::text::line_at(text, at));
        }
        from = at + needle.len();
    }
    None
}

/// Validate a `tool.json`'s bytes. Returns the definition when usable, and
/// every diagnostic (labelled with `file`).
pub(crate) fn parse_tool_json(bytes: &[u8], file: &Path) -> (Option<ToolJson>, Vec<Diagnostic>) {
    let obj = match parse_object(bytes, file) {
        Ok(obj) => obj,
        Err(diag) => return (None, vec![diag]),
    };
    let text = String::from_utf8_lossy(bytes);
    if let Some(diag) = remote_reference(&obj, file, &text) {
        return (None, vec![diag]);
    }
    let mut c = Check {
        file,
        text: &text,
        d: Vec::new(),
        bad: false,
    };
    c.unknown_keys(&obj);
    let name = c.name(&obj);
    let description = c.description(&obj);
    let (mut params, schema_required, defs) = c.parameters(&obj);
    c.required(&obj, schema_required, &mut params);
    let entrypoint = c.entrypoint(&obj);
    let interpreter = c.interpreter(&obj, &entrypoint);
    let timeout = c.timeout(&obj);
    if c.bad {
        return (None, c.d);
    }
    let def = ToolJson {
        name,
        description,
        params,
        entrypoint,
        interpreter,
        timeout,
        defs,
    };
    (Some(def), c.d)
}

/// The bytes as a JSON object, or the one error that skips the tool.
fn parse_object(bytes: &[u8], file: &Path) -> Result<Map<String, Value>, Diagnostic> {
    match serde_json::from_slice(bytes) {
        Ok(Value::Object(obj)) => Ok(obj),
        Ok(_) => Err(Diagnostic::error(
            file,
            Some(1),
            "tool.json must be a JSON object; tool skipped",
        )
        .fix("write {\"name\": ..., \"description\": ..., \"entrypoint\": ...}")),
        Err(e) => {
            let msg = format!(
                "malformed JSON at {}:{}: {e}; tool skipped",
                e.line(),
                e.column()
            );
            Err(Diagnostic::error(file, Some(e.line().max(1)), msg).fix("fix the JSON syntax"))
        }
    }
}

/// A `$ref` in `parameters` that leaves the document skips the tool.
fn remote_reference(obj: &Map<String, Value>, file: &Path, text: &str) -> Option<Diagnostic> {
    let raw = obj.get("parameters");
    let found = match (raw, unwrap_json_schema(raw).1) {
        (Some(p), Some(_)) => schema::remote_reference(p),
        (Some(p), None) => schema::remote_reference_in_properties(p),
        (None, _) => None,
    }?;
    let tool = obj.get("name").and_then(Value::as_str).unwrap_or("?");
    let tool = format!("ct_{tool}");
    Some(schema::remote_reference_error(
        file,
        Some(text),
        key_line(text, "parameters"),
        &tool,
        found,
    ))
}

/// A `tool.json` object being checked key by key: the diagnostics so far,
/// and whether an error skips the tool.
struct Check<'a> {
    file: &'a Path,
    text: &'a str,
    d: Vec<Diagnostic>,
    bad: bool,
}

impl Check<'_> {
    fn line(&self, key: &str) -> Option<usize> {
        key_line(self.text, key)
    }

    /// An error at `key`'s line: the tool is skipped.
    fn err(&mut self, key: &str, msg: String, fix: &str) {
        let line = self.line(key);
        self.d
            .push(Diagnostic::error(self.file, line, format!("{msg}; tool skipped")).fix(fix));
        self.bad = true;
    }

    fn warn(&mut self, key: &str, msg: impl Into<String>, fix: &str) {
        let line = self.line(key);
        self.d
            .push(Diagnostic::warning(self.file, line, msg).fix(fix));
    }

    fn unknown_keys(&mut self, obj: &Map<String, Value>) {
        for k in obj.keys() {
            if !KNOWN_KEYS.contains(&k.as_str()) {
                self.warn(
                    k,
                    format!("unknown key '{k}' ignored"),
                    "remove it, or check its spelling",
                );
            }
        }
    }

    fn name(&mut self, obj: &Map<String, Value>) -> String {
        match obj.get("name").and_then(Value::as_str) {
            Some(n) if valid_clawd_name(n) => return n.to_owned(),
            Some(n) => self.err(
                "name",
                format!("invalid \"name\" '{n}'"),
                "use lowercase letters, digits, '-' and '_', at most 64 characters",
            ),
            None => self.err(
                "name",
                "missing \"name\" (string)".into(),
                "add \"name\": \"<lowercase-id>\"",
            ),
        }
        String::new()
    }

    fn description(&mut self, obj: &Map<String, Value>) -> String {
        match obj.get("description").and_then(Value::as_str) {
            Some(s) if !s.trim().is_empty() => s.trim().to_owned(),
            _ => {
                self.err(
                    "description",
                    "missing \"description\" (non-empty string)".into(),
                    "add \"description\": what the tool does",
                );
                String::new()
            }
        }
    }

    /// `parameters`, either clawd's map or a JSON Schema: the parameters,
    /// the schema's own `required`, and its `definitions` / `$defs`.
    fn parameters<'o>(
        &mut self,
        obj: &'o Map<String, Value>,
    ) -> (Vec<Param>, Option<&'o [Value]>, Map<String, Value>) {
        let (parameters, schema_required) = unwrap_json_schema(obj.get("parameters"));
        let defs: Map<String, Value> = match (&schema_required, obj.get("parameters")) {
            (Some(_), Some(Value::Object(s))) => s
                .iter()
                .filter(|(k, _)| *k == "definitions" || *k == "$defs")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            _ => Map::new(),
        };
        if schema_required.is_some() || parameters != obj.get("parameters") {
            self.warn(
                "parameters",
                "\"parameters\" is written as a JSON Schema ({\"type\": \"object\", \"properties\": ...}); read as such",
                "clawd documents \"parameters\" as the map of name -> definition, with \"required\" at the top level",
            );
        }
        let mut params = Vec::new();
        match parameters {
            None | Some(Value::Null) => {}
            Some(Value::Object(ps)) => {
                for (pname, pdef) in ps {
                    self.param(pname, pdef, &mut params);
                }
            }
            Some(_) => self.err(
                "parameters",
                "\"parameters\" must be an object".into(),
                "map each parameter name to {\"type\": ..., \"description\": ...}",
            ),
        }
        (params, schema_required, defs)
    }

    fn param(&mut self, pname: &str, pdef: &Value, params: &mut Vec<Param>) {
        match parse_param(pname, pdef) {
            Ok((p, warn)) => {
                if let Some(w) = warn {
                    self.warn(pname, w, "add \"type\": \"string\" (or the right type)");
                }
                params.push(p);
            }
            Err(msg) => self.err(
                pname,
                msg,
                "write {\"type\": \"string\", \"description\": \"...\"}",
            ),
        }
    }

    /// The top-level `required` and a JSON Schema's own, marked on `params`.
    fn required(
        &mut self,
        obj: &Map<String, Value>,
        schema_required: Option<&[Value]>,
        params: &mut [Param],
    ) {
        let top_required = match obj.get("required") {
            Some(Value::Array(rs)) => Some(rs.as_slice()),
            _ => None,
        };
        let required = match (top_required, schema_required) {
            (Some(a), Some(b)) => Some(Value::Array(a.iter().chain(b).cloned().collect())),
            (None, Some(b)) => Some(Value::Array(b.to_vec())),
            _ => obj.get("required").cloned(),
        };
        let names = match required {
            None | Some(Value::Null) => return,
            Some(Value::Array(rs)) => rs,
            Some(_) => return self.not_names(),
        };
        for r in &names {
            let Some(r) = r.as_str() else {
                self.not_names();
                continue;
            };
            match params.iter_mut().find(|p| p.name == r) {
                Some(p) => p.required = true,
                None => self.err(
                    "required",
                    format!("\"required\" names '{r}', which is not in \"parameters\""),
                    "define the parameter or drop it from \"required\"",
                ),
            }
        }
    }

    fn not_names(&mut self) {
        self.err(
            "required",
            "\"required\" must be an array of strings".into(),
            "list parameter names",
        );
    }

    fn entrypoint(&mut self, obj: &Map<String, Value>) -> String {
        match obj.get("entrypoint").and_then(Value::as_str) {
            Some(e) if e.is_empty() || e == "." || e == ".." || e.contains(['/', '\\', '\0']) => {
                self.err(
                    "entrypoint",
                    format!(
                        "invalid \"entrypoint\" '{e}': must be a file name in the tool directory"
                    ),
                    "put the script next to tool.json and name only the file",
                );
                String::new()
            }
            Some(e) => e.to_owned(),
            None => {
                self.err(
                    "entrypoint",
                    "missing \"entrypoint\" (string)".into(),
                    "add \"entrypoint\": \"run.sh\"",
                );
                String::new()
            }
        }
    }

    /// Explicit, or detected from the entrypoint's extension.
    fn interpreter(&mut self, obj: &Map<String, Value>, entrypoint: &str) -> Option<String> {
        match obj.get("interpreter") {
            None | Some(Value::Null) => detect_interpreter(entrypoint).map(str::to_owned),
            Some(Value::String(i)) if INTERPRETERS.contains(&i.as_str()) => Some(i.clone()),
            Some(other) => {
                self.err(
                    "interpreter",
                    format!("unsupported \"interpreter\" {other}"),
                    "use bash, sh, python3, python, bun or node, or omit it",
                );
                None
            }
        }
    }

    /// Seconds from 1 to 300; clawd's default 30 when absent.
    fn timeout(&mut self, obj: &Map<String, Value>) -> Duration {
        let default = Duration::from_secs(30);
        let t = match obj.get("timeout") {
            None | Some(Value::Null) => return default,
            Some(t) => t,
        };
        match t.as_f64() {
            Some(s) if (1.0..=300.0).contains(&s) => Duration::from_secs_f64(s),
            _ => {
                self.err(
                    "timeout",
                    format!("\"timeout\" {t} out of range"),
                    "use a number of seconds from 1 to 300",
                );
                default
            }
        }
    }
}

/// Where clawd tools live (`<id>/tool.json`), relative to the project.
pub(crate) const DIR: &str = ".clawd/tools";

/// Scan `<project>/.clawd/tools/*/tool.json`.
pub(crate) fn scan(project: &Path) -> Found {
    let mut f = Found::default();
    let Some((dir, entries)) = super::tool_dir(project, DIR, &mut f) else {
        return f;
    };
    for e in entries {
        match &e.meta {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                if !e.name.starts_with('.') {
                    f.examined.push(e.path.clone());
                    f.diagnostics.push(
                        Diagnostic::warning(&e.path, None, "not a tool directory; ignored")
                            .fix("put each tool in its own directory: .clawd/tools/<id>/tool.json"),
                    );
                }
                continue;
            }
            Err(err) => {
                f.examined.push(e.path.clone());
                f.diagnostics.push(
                    Diagnostic::error(&e.path, None, format!("cannot stat: {}", io_message(err)))
                        .fix("remove or repair it"),
                );
                continue;
            }
        }
        if e.name.starts_with('.') {
            continue;
        }
        let file = e.path.join("tool.json");
        f.examined.push(file.clone());
        if fsread::refuse_outside(&e.path, &dir, ".clawd/tools", &mut f.diagnostics)
            || fsread::refuse_outside(
                &file,
                &e.path,
                &format!(".clawd/tools/{}", e.name),
                &mut f.diagnostics,
            )
        {
            continue;
        }
        if !valid_tool_name(&e.name) {
            f.diagnostics.push(
                Diagnostic::error(
                    &file,
                    None,
                    "tool directory name must match [A-Za-z0-9_-]+; tool skipped",
                )
                .fix("rename the directory"),
            );
            continue;
        }
        let bytes = match fsread::read_capped(&file, READ_CAP) {
            Ok(b) if b.truncated => {
                f.diagnostics.push(
                    Diagnostic::error(&file, None, "tool.json larger than 1 MiB; tool skipped")
                        .fix("shrink tool.json"),
                );
                continue;
            }
            Ok(b) => b.data,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                f.diagnostics.push(
                    Diagnostic::error(
                        &file,
                        None,
                        "no tool.json in the tool directory (or it vanished); tool skipped",
                    )
                    .fix(format!(
                        "add .clawd/tools/{}/tool.json, or remove the directory",
                        e.name
                    )),
                );
                continue;
            }
            Err(err) => {
                f.diagnostics.push(
                    Diagnostic::error(
                        &file,
                        None,
                        format!("cannot read tool.json: {}", io_message(&err)),
                    )
                    .fix("add a tool.json next to the script"),
                );
                continue;
            }
        };
        let (def, mut diags) = parse_tool_json(&bytes, &file);
        f.diagnostics.append(&mut diags);
        let Some(def) = def else { continue };
        if let Some(spec) = to_spec(&e.name, &e.path, &file, def, &mut f.diagnostics) {
            f.tools.push(spec);
        }
    }
    f
}

/// File-system checks on the entrypoint, then the tool.
fn to_spec(
    id: &str,
    dir: &Path,
    file: &Path,
    def: ToolJson,
    diags: &mut Vec<Diagnostic>,
) -> Option<ToolSpec> {
    let entry = dir.join(&def.entrypoint);
    let meta = match std::fs::metadata(&entry) {
        Ok(m) if m.is_file() => m,
        Ok(_) => {
            diags.push(
                Diagnostic::error(
                    file,
                    None,
                    format!(
                        "entrypoint '{}' is not a regular file; tool skipped",
                        def.entrypoint
                    ),
                )
                .fix("point \"entrypoint\" at the script file"),
            );
            return None;
        }
        Err(err) => {
            diags.push(
                Diagnostic::error(
                    file,
                    None,
                    format!(
                        "entrypoint '{}': {}; tool skipped",
                        def.entrypoint,
                        io_message(&err)
                    ),
                )
                .fix(format!("create .clawd/tools/{id}/{}", def.entrypoint)),
            );
            return None;
        }
    };
    // The entrypoint must stay inside the tool dir even through a symlink.
    if fsread::refuse_outside(&entry, dir, &format!(".clawd/tools/{id}"), diags) {
        return None;
    }
    if def.interpreter.is_none() && meta.permissions().mode() & 0o111 == 0 {
        diags.push(
            Diagnostic::error(
                file,
                None,
                format!(
                    "no interpreter for '{}' and it is not executable; tool skipped",
                    def.entrypoint
                ),
            )
            .fix(format!(
                "set \"interpreter\" or chmod +x .clawd/tools/{id}/{}",
                def.entrypoint
            )),
        );
        return None;
    }
    if def.name != id {
        diags.push(
            Diagnostic::warning(
                file,
                None,
                format!(
                    "\"name\" '{}' differs from the directory; exposed as ct_{id}",
                    def.name
                ),
            )
            .fix("make \"name\" and the directory name the same"),
        );
    }
    Some(ToolSpec {
        name: format!("ct_{id}"),
        format: Format::Clawd,
        source: file.to_path_buf(),
        line: Some(1),
        description: def.description,
        input_schema: {
            let mut s = schema::object_schema(&def.params);
            if let Some(obj) = s.as_object_mut() {
                obj.extend(def.defs);
            }
            s
        },
        requests: Requests {
            timeout: Some(def.timeout),
            ..Requests::default()
        },
        kind: ToolKind::Clawd {
            interpreter: def.interpreter,
            entrypoint: entry,
        },
        needs_read: vec![dir.to_path_buf()],
    })
}
