//! clawd's `custom_script`: modes list, add, edit, delete, view, execute
//! over `.clawd/tools/<id>/` (seed: clawd-custom-tools.md).
//!
//! A tool's id is its directory and its `name`; `add` writes `tool.json`
//! and the script (mode 0755) at once, validated by discovery's own
//! `tool.json` parser first. `execute` is a call of `ct_<id>` through the
//! ordinary call pipeline (grant, approval, rate limits, audit).

use super::read::{self, Got};
use super::write::{Op, diff};
use super::{Change, Plan, refuse, rel, render};
use crate::discover::Severity;
use crate::discover::clawd::{DIR, parse_tool_json, valid_clawd_name};
use serde_json::{Map, Value, json};
use std::path::Path;

pub(crate) const NAME: &str = "custom_script";
/// Scripts are shown up to this many bytes by `view`.
const VIEW_CAP: usize = 64 * 1024;
/// Metadata keys `add` and `edit` take from the arguments.
const META: [&str; 5] = [
    "description",
    "parameters",
    "required",
    "interpreter",
    "timeout",
];

pub(crate) fn definition() -> crate::call::Definition {
    crate::call::Definition {
        name: NAME.into(),
        description: "Manage this project's custom tools (.clawd/tools/<tool_id>/: tool.json + \
            script; exposed as ct_<tool_id>). Modes: list (show all custom tools in the project), \
            add (create a new tool: tool.json + script), edit (update an existing tool's metadata \
            or script), delete (remove a tool and its directory), view (display tool metadata and \
            source code), execute (run a tool directly). Changes are validated first and may need \
            a person's approval."
            .into(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "mode": {"type": "string", "enum": ["list", "add", "edit", "delete", "view", "execute"]},
                "tool_id": {"type": "string", "description": "lowercase letters, digits, '-' and '_', at most 64"},
                "description": {"type": "string", "description": "what the tool does (add, edit)"},
                "parameters": {"type": "object", "description": "parameter name -> {type, description, enum} (add, edit)"},
                "required": {"type": "array", "items": {"type": "string"}},
                "entrypoint": {"type": "string", "description": "script file name, no path separators (add, edit)"},
                "interpreter": {"type": "string", "enum": ["bash", "sh", "python3", "python", "bun", "node"]},
                "timeout": {"type": "number", "minimum": 1, "maximum": 300},
                "script": {"type": "string", "description": "the script's source (add; edit replaces it)"},
                "args": {"type": "object", "description": "the tool's arguments (execute)"}
            },
            "required": ["mode"]
        }),
        annotations: json!({"destructiveHint": true, "openWorldHint": false}),
    }
}

pub(crate) fn plan(project: &Path, args: &Value) -> Plan {
    let mode = args.get("mode").and_then(Value::as_str).unwrap_or("");
    if mode == "list" {
        return list(project);
    }
    if !["add", "edit", "delete", "view", "execute"].contains(&mode) {
        return refuse(format!(
            "{NAME}: unknown mode {mode:?} (fix: use list, add, edit, delete, view or execute)"
        ));
    }
    let id = match args.get("tool_id").and_then(Value::as_str) {
        Some(id) if valid_clawd_name(id) => id,
        Some(id) => {
            return refuse(format!(
                "{NAME}: invalid tool_id {id:?} (fix: lowercase letters, digits, '-' and '_', at most 64 characters)"
            ));
        }
        None => return refuse(format!("{NAME}: {mode} needs \"tool_id\" (a string)")),
    };
    let dir = project.join(DIR).join(id);
    let exists = dir.symlink_metadata().is_ok();
    match (mode, exists) {
        ("add", true) => refuse(format!(
            "{NAME}: tool '{id}' already exists (fix: use mode edit, or another tool_id)"
        )),
        ("add", false) => add(project, id, args),
        (_, false) => refuse(format!(
            "{NAME}: no custom tool '{id}' in {DIR} (fix: mode list shows the tools)"
        )),
        ("view", true) => view(project, id),
        ("edit", true) => edit(project, id, args),
        ("delete", true) => delete(project, id),
        _ => Plan::Run {
            name: format!("ct_{id}"),
            args: args.get("args").cloned().unwrap_or_else(|| json!({})),
        },
    }
}

fn list(project: &Path) -> Plan {
    let root = project.join(DIR);
    // A directory, not a link to one (discovery does not follow it either).
    let mut ids: Vec<String> = std::fs::read_dir(&root)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    if ids.is_empty() {
        return Plan::answer(format!("No custom tools in this project ({DIR} is empty)."));
    }
    let mut out = format!("{} custom tool(s) in {DIR}:\n", ids.len());
    for id in ids {
        let file = root.join(&id).join("tool.json");
        let bytes = match read::file(project, &file) {
            Got::Bytes(b) => b,
            Got::Missing => Vec::new(),
            Got::Refused(why) => {
                out.push_str(&format!("- ct_{id}: not loaded: tool.json: {why}\n"));
                continue;
            }
        };
        let (def, diags) = parse_tool_json(&bytes, &file);
        match def {
            Some(d) => out.push_str(&format!(
                "- ct_{id}: {} (entrypoint {})\n",
                d.description, d.entrypoint
            )),
            None => {
                let why = diags
                    .iter()
                    .find(|d| d.severity == Severity::Error)
                    .map(|d| d.message.clone())
                    .unwrap_or_else(|| "no tool.json".into());
                out.push_str(&format!("- ct_{id}: not loaded: {why}\n"));
            }
        }
    }
    Plan::answer(out)
}

fn read_capped(project: &Path, path: &Path) -> String {
    match read::file(project, path) {
        Got::Bytes(b) if b.len() > VIEW_CAP => format!(
            "{}\n… [{} more bytes not shown]",
            String::from_utf8_lossy(&b[..VIEW_CAP]),
            b.len() - VIEW_CAP
        ),
        Got::Bytes(b) => String::from_utf8_lossy(&b).into_owned(),
        Got::Missing => "(no such file)".into(),
        Got::Refused(why) => format!("({why})"),
    }
}

fn view(project: &Path, id: &str) -> Plan {
    let dir = project.join(DIR).join(id);
    let file = dir.join("tool.json");
    let meta = read_capped(project, &file);
    let mut out = format!("== {} ==\n{meta}\n", rel(project, &file));
    let entry = serde_json::from_str::<Value>(&meta).ok().and_then(|v| {
        v.get("entrypoint")
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    if let Some(e) = entry.filter(|e| !e.contains('/') && !e.is_empty()) {
        out.push_str(&format!(
            "== {} ==\n{}\n",
            rel(project, &dir.join(&e)),
            read_capped(project, &dir.join(&e))
        ));
    }
    Plan::answer(out)
}

/// The new `tool.json` text, refused with check's diagnostics when
/// discovery would skip it.
fn validated(project: &Path, file: &Path, obj: Map<String, Value>) -> Result<String, String> {
    let mut text = serde_json::to_string_pretty(&Value::Object(obj)).unwrap_or_default();
    text.push('\n');
    let (def, diags) = parse_tool_json(text.as_bytes(), file);
    if def.is_none() || diags.iter().any(|d| d.severity == Severity::Error) {
        return Err(format!(
            "{NAME}: not written: the tool would not load:\n{}",
            render(project, &diags)
        ));
    }
    Ok(text)
}

fn add(project: &Path, id: &str, args: &Value) -> Plan {
    let Some(script) = args.get("script").and_then(Value::as_str) else {
        return refuse(format!(
            "{NAME}: add needs \"script\" (the script's source)"
        ));
    };
    let mut obj = Map::new();
    obj.insert("name".into(), json!(id));
    for k in ["description", "parameters", "required", "entrypoint"] {
        if let Some(v) = args.get(k) {
            obj.insert(k.into(), v.clone());
        }
    }
    for k in ["interpreter", "timeout"] {
        if let Some(v) = args.get(k) {
            obj.insert(k.into(), v.clone());
        }
    }
    let dir = project.join(DIR).join(id);
    let file = dir.join("tool.json");
    let text = match validated(project, &file, obj) {
        Ok(t) => t,
        Err(t) => return refuse(t),
    };
    let entry = args.get("entrypoint").and_then(Value::as_str).unwrap_or("");
    if entry == "tool.json" {
        return refuse(format!(
            "{NAME}: the entrypoint cannot be tool.json (fix: name the script, e.g. run.sh)"
        ));
    }
    let d = diff(&rel(project, &file), None, Some(&text))
        + &diff(&rel(project, &dir.join(entry)), None, Some(script));
    Plan::Change(Change {
        tool: NAME,
        action: "add".into(),
        target: format!("ct_{id}"),
        format: "clawd",
        source: file,
        ops: vec![Op::NewDir {
            dir,
            files: vec![
                ("tool.json".into(), text, 0o644),
                (entry.into(), script.into(), 0o755),
            ],
        }],
        diff: d,
        runs: Some(script.into()),
    })
}

fn edit(project: &Path, id: &str, args: &Value) -> Plan {
    let dir = project.join(DIR).join(id);
    let file = dir.join("tool.json");
    let old = match read::text(project, &file) {
        Ok(t) => t.unwrap_or_default(),
        Err(why) => return refuse(format!("{NAME}: {why}")),
    };
    let Ok(Value::Object(mut obj)) = serde_json::from_str::<Value>(&old) else {
        return refuse(format!(
            "{NAME}: {} is not a JSON object, so it cannot be edited (fix: mode delete, then add)",
            rel(project, &file)
        ));
    };
    let old_entry = obj
        .get("entrypoint")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    for k in META.iter().chain(&["entrypoint"]) {
        if let Some(v) = args.get(*k) {
            obj.insert((*k).into(), v.clone());
        }
    }
    let script = args.get("script").and_then(Value::as_str);
    let text = match validated(project, &file, obj.clone()) {
        Ok(t) => t,
        Err(t) => return refuse(t),
    };
    let entry = obj
        .get("entrypoint")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if entry == "tool.json" {
        return refuse(format!("{NAME}: the entrypoint cannot be tool.json"));
    }
    let old_path = dir.join(&old_entry);
    let new_path = dir.join(&entry);
    let old_script = match read::text(project, &old_path) {
        Ok(t) => t,
        Err(why) => return refuse(format!("{NAME}: {why}")),
    };
    // A renamed entrypoint without a new script keeps the old source.
    let new_script = match (script, &old_script) {
        (Some(s), _) => Some(s.to_string()),
        (None, Some(s)) if entry != old_entry => Some(s.clone()),
        _ => None,
    };
    let mut ops = Vec::new();
    let mut d = String::new();
    if let Some(s) = &new_script {
        let before = if entry == old_entry {
            old_script.as_deref()
        } else {
            None
        };
        d += &diff(&rel(project, &new_path), before, Some(s));
        ops.push(Op::Write {
            path: new_path.clone(),
            text: s.clone(),
            mode: 0o755,
        });
    }
    if text != old {
        d += &diff(&rel(project, &file), Some(&old), Some(&text));
        ops.push(Op::Write {
            path: file.clone(),
            text,
            mode: 0o644,
        });
    }
    if entry != old_entry && !old_entry.is_empty() && old_path.is_file() {
        d += &diff(&rel(project, &old_path), old_script.as_deref(), None);
        ops.push(Op::Remove(old_path));
    }
    if d.is_empty() {
        return refuse(format!(
            "{NAME}: edit changes nothing (fix: give a new description, parameters, required, \
             entrypoint, interpreter, timeout or script)"
        ));
    }
    Plan::Change(Change {
        tool: NAME,
        action: "edit".into(),
        target: format!("ct_{id}"),
        format: "clawd",
        source: file,
        ops,
        diff: d,
        runs: new_script,
    })
}

fn delete(project: &Path, id: &str) -> Plan {
    let dir = project.join(DIR).join(id);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    let mut d = String::new();
    for f in &files {
        match read::file(project, f) {
            Got::Bytes(b) => match String::from_utf8(b) {
                Ok(t) => d += &diff(&rel(project, f), Some(&t), None),
                Err(_) => d += &format!("--- a/{}\n+++ /dev/null\n(binary)\n", rel(project, f)),
            },
            Got::Missing => {}
            // A link or a special file goes with the directory, unread.
            Got::Refused(why) => {
                d += &format!("--- a/{}\n+++ /dev/null\n({why})\n", rel(project, f));
            }
        }
    }
    if d.is_empty() {
        d = format!("removed directory {}\n", rel(project, &dir));
    }
    Plan::Change(Change {
        tool: NAME,
        action: "delete".into(),
        target: format!("ct_{id}"),
        format: "clawd",
        source: dir.join("tool.json"),
        ops: vec![Op::RemoveDir(dir)],
        diff: d,
        runs: None,
    })
}
