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
use super::{Diagnostic, Found, Runner, ToolSpec, valid_tool_name};
use crate::policy::Requests;
use crate::spec::Format;
use params::{parse_param, unwrap_json_schema};
use serde_json::{Map, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

const READ_CAP: usize = 1024 * 1024;
/// The interpreters clawd knows.
pub const INTERPRETERS: [&str; 6] = ["bash", "sh", "python3", "python", "bun", "node"];
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
pub struct ToolJson {
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
pub fn detect_interpreter(entrypoint: &str) -> Option<&'static str> {
    let ext = entrypoint.rsplit_once('.').map(|(_, e)| e)?;
    match ext {
        "sh" => Some("bash"),
        "py" => Some("python3"),
        "ts" | "js" => Some("bun"),
        _ => None,
    }
}

/// `name`: lowercase alphanumeric, hyphens, underscores, at most 64.
pub fn valid_clawd_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

/// The 1-based line of the first `"key":` in a JSON text (a good guess at
/// where a key is defined; nested keys of the same name may come first).
pub fn key_line(text: &str, key: &str) -> Option<usize> {
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
pub fn parse_tool_json(bytes: &[u8], file: &Path) -> (Option<ToolJson>, Vec<Diagnostic>) {
    let mut d = Vec::new();
    let v: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => {
            let msg = format!(
                "malformed JSON at {}:{}: {e}; tool skipped",
                e.line(),
                e.column()
            );
            d.push(Diagnostic::error(file, Some(e.line().max(1)), msg).fix("fix the JSON syntax"));
            return (None, d);
        }
    };
    let Some(obj) = v.as_object() else {
        d.push(
            Diagnostic::error(
                file,
                Some(1),
                "tool.json must be a JSON object; tool skipped",
            )
            .fix("write {\"name\": ..., \"description\": ..., \"entrypoint\": ...}"),
        );
        return (None, d);
    };
    let text = String::from_utf8_lossy(bytes);
    let raw = obj.get("parameters");
    let found = match (raw, unwrap_json_schema(raw).1) {
        (Some(p), Some(_)) => schema::remote_reference(p),
        (Some(p), None) => schema::remote_reference_in_properties(p),
        (None, _) => None,
    };
    if let Some(found) = found {
        let tool = obj.get("name").and_then(Value::as_str).unwrap_or("?");
        let tool = format!("ct_{tool}");
        d.push(schema::remote_reference_error(
            file,
            Some(&text),
            key_line(&text, "parameters"),
            &tool,
            found,
        ));
        return (None, d);
    }
    let line = |key: &str| key_line(&text, key);
    let mut bad = false;
    let mut err = |d: &mut Vec<Diagnostic>, key: &str, msg: String, fix: &str| {
        d.push(Diagnostic::error(file, line(key), format!("{msg}; tool skipped")).fix(fix));
        bad = true;
    };
    for k in obj.keys() {
        if !KNOWN_KEYS.contains(&k.as_str()) {
            d.push(
                Diagnostic::warning(file, line(k), format!("unknown key '{k}' ignored"))
                    .fix("remove it, or check its spelling"),
            );
        }
    }
    let name = match obj.get("name").and_then(Value::as_str) {
        Some(n) if valid_clawd_name(n) => n.to_owned(),
        Some(n) => {
            err(
                &mut d,
                "name",
                format!("invalid \"name\" '{n}'"),
                "use lowercase letters, digits, '-' and '_', at most 64 characters",
            );
            String::new()
        }
        None => {
            err(
                &mut d,
                "name",
                "missing \"name\" (string)".into(),
                "add \"name\": \"<lowercase-id>\"",
            );
            String::new()
        }
    };
    let description = match obj.get("description").and_then(Value::as_str) {
        Some(s) if !s.trim().is_empty() => s.trim().to_owned(),
        _ => {
            err(
                &mut d,
                "description",
                "missing \"description\" (non-empty string)".into(),
                "add \"description\": what the tool does",
            );
            String::new()
        }
    };
    let mut params = Vec::new();
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
        d.push(
            Diagnostic::warning(
                file,
                line("parameters"),
                "\"parameters\" is written as a JSON Schema ({\"type\": \"object\", \"properties\": ...}); read as such",
            )
            .fix("clawd documents \"parameters\" as the map of name -> definition, with \"required\" at the top level"),
        );
    }
    match parameters {
        None | Some(Value::Null) => {}
        Some(Value::Object(ps)) => {
            for (pname, pdef) in ps {
                match parse_param(pname, pdef) {
                    Ok((p, warn)) => {
                        if let Some(w) = warn {
                            d.push(
                                Diagnostic::warning(file, line(pname), w)
                                    .fix("add \"type\": \"string\" (or the right type)"),
                            );
                        }
                        params.push(p);
                    }
                    Err(msg) => err(
                        &mut d,
                        pname,
                        msg,
                        "write {\"type\": \"string\", \"description\": \"...\"}",
                    ),
                }
            }
        }
        Some(_) => err(
            &mut d,
            "parameters",
            "\"parameters\" must be an object".into(),
            "map each parameter name to {\"type\": ..., \"description\": ...}",
        ),
    }
    let top_required = match obj.get("required") {
        Some(Value::Array(rs)) => Some(rs.as_slice()),
        _ => None,
    };
    let required = match (top_required, schema_required) {
        (Some(a), Some(b)) => Some(Value::Array(a.iter().chain(b).cloned().collect())),
        (None, Some(b)) => Some(Value::Array(b.to_vec())),
        _ => obj.get("required").cloned(),
    };
    match required {
        None | Some(Value::Null) => {}
        Some(Value::Array(rs)) => {
            for r in &rs {
                match r.as_str() {
                    Some(r) => match params.iter_mut().find(|p| p.name == r) {
                        Some(p) => p.required = true,
                        None => err(
                            &mut d,
                            "required",
                            format!("\"required\" names '{r}', which is not in \"parameters\""),
                            "define the parameter or drop it from \"required\"",
                        ),
                    },
                    None => err(
                        &mut d,
                        "required",
                        "\"required\" must be an array of strings".into(),
                        "list parameter names",
                    ),
                }
            }
        }
        Some(_) => err(
            &mut d,
            "required",
            "\"required\" must be an array of strings".into(),
            "list parameter names",
        ),
    }
    let entrypoint = match obj.get("entrypoint").and_then(Value::as_str) {
        Some(e) if e.is_empty() || e == "." || e == ".." || e.contains(['/', '\\', '\0']) => {
            err(
                &mut d,
                "entrypoint",
                format!("invalid \"entrypoint\" '{e}': must be a file name in the tool directory"),
                "put the script next to tool.json and name only the file",
            );
            String::new()
        }
        Some(e) => e.to_owned(),
        None => {
            err(
                &mut d,
                "entrypoint",
                "missing \"entrypoint\" (string)".into(),
                "add \"entrypoint\": \"run.sh\"",
            );
            String::new()
        }
    };
    let interpreter = match obj.get("interpreter") {
        None | Some(Value::Null) => detect_interpreter(&entrypoint).map(str::to_owned),
        Some(Value::String(i)) if INTERPRETERS.contains(&i.as_str()) => Some(i.clone()),
        Some(other) => {
            err(
                &mut d,
                "interpreter",
                format!("unsupported \"interpreter\" {other}"),
                "use bash, sh, python3, python, bun or node, or omit it",
            );
            None
        }
    };
    let timeout = match obj.get("timeout") {
        None | Some(Value::Null) => Duration::from_secs(30),
        Some(t) => match t.as_f64() {
            Some(s) if (1.0..=300.0).contains(&s) => Duration::from_secs_f64(s),
            _ => {
                err(
                    &mut d,
                    "timeout",
                    format!("\"timeout\" {t} out of range"),
                    "use a number of seconds from 1 to 300",
                );
                Duration::from_secs(30)
            }
        },
    };
    if bad {
        return (None, d);
    }
    (
        Some(ToolJson {
            name,
            description,
            params,
            entrypoint,
            interpreter,
            timeout,
            defs,
        }),
        d,
    )
}

/// Where clawd tools live (`<id>/tool.json`), relative to the project.
pub const DIR: &str = ".clawd/tools";

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
        runner: Runner::Clawd {
            interpreter: def.interpreter,
            entrypoint: entry,
        },
        needs_read: vec![dir.to_path_buf()],
    })
}
