//! OpenCrabs' `tool_manage`: actions list, add, remove, enable, disable,
//! reload over the project's `tools.toml` (seed: opencrabs-dynamic-tools.md).
//!
//! The file is edited in place with `toml_edit`: comments, order and
//! formatting outside the changed `[[tools]]` entry stay byte for byte. A
//! file that does not parse is never written (OpenCrabs loses its tools
//! there); its syntax error is the answer. An added or enabled tool must
//! load, with no Error that the file did not have before.

use super::write::{Op, diff};
use super::{Change, Plan, refuse, rel, render};
use crate::discover::Severity;
use crate::discover::opencrabs::{FILE, parse_tools_toml};
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use toml_edit::{ArrayOfTables, DocumentMut, Item, Table};

pub(crate) const NAME: &str = "tool_manage";

pub(crate) fn definition() -> crate::call::Definition {
    crate::call::Definition {
        name: NAME.into(),
        description: "Runtime tool management over this project's tools.toml. Actions: list \
            (show all dynamic tools with enabled/disabled status), add (create a new tool: name, \
            description, executor, and command for shell or method and url for http), remove \
            (delete a tool), enable / disable (toggle without removing), reload (hot-reload from \
            tools.toml). Changes are validated first and may need a person's approval."
            .into(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["list", "add", "remove", "enable", "disable", "reload"]},
                "name": {"type": "string"},
                "description": {"type": "string"},
                "executor": {"type": "string", "enum": ["shell", "http"]},
                "command": {"type": "string", "description": "shell: the command ({{param}} templates)"},
                "method": {"type": "string", "description": "http: GET, POST, ..."},
                "url": {"type": "string", "description": "http: the endpoint"},
                "headers": {"type": "object", "additionalProperties": {"type": "string"}},
                "enabled": {"type": "boolean"},
                "requires_approval": {"type": "boolean"},
                "timeout_secs": {"type": "integer", "minimum": 1, "maximum": 3600},
                "params": {"type": "array", "items": {"type": "object", "properties": {
                    "name": {"type": "string"}, "type": {"type": "string"},
                    "description": {"type": "string"}, "required": {"type": "boolean"},
                    "default": {}
                }, "required": ["name"]}}
            },
            "required": ["action"]
        }),
        annotations: json!({"destructiveHint": true, "openWorldHint": false}),
    }
}

pub(crate) fn plan(project: &Path, args: &Value) -> Plan {
    let action = args.get("action").and_then(Value::as_str).unwrap_or("");
    let file = project.join(FILE);
    let old = match super::read::text(project, &file) {
        Ok(t) => t,
        Err(why) => return refuse(format!("{NAME}: {why}")),
    };
    let text = old.clone().unwrap_or_default();
    let doc = match text.parse::<DocumentMut>() {
        Ok(d) => d,
        Err(_) if action == "reload" => return Plan::Reload,
        Err(_) => {
            let (_, diags) = parse_tools_toml(&text, &file);
            return refuse(format!(
                "{NAME}: {} does not parse; toolcage never overwrites it (fix it by hand, then \
                 action reload):\n{}",
                rel(project, &file),
                render(project, &diags)
            ));
        }
    };
    let name = args.get("name").and_then(Value::as_str);
    match (action, name) {
        ("list", _) => list(project, &text, &doc),
        ("reload", _) => Plan::Reload,
        ("add" | "remove" | "enable" | "disable", None) => {
            refuse(format!("{NAME}: {action} needs \"name\" (a string)"))
        }
        ("add" | "remove" | "enable" | "disable", Some(name)) => {
            change(project, action, name, args, old.as_deref(), doc)
        }
        _ => refuse(format!(
            "{NAME}: unknown action {action:?} (fix: use list, add, remove, enable, disable or reload)"
        )),
    }
}

fn entries(doc: &DocumentMut) -> Vec<&Table> {
    match doc.get("tools").and_then(Item::as_array_of_tables) {
        Some(a) => a.iter().collect(),
        None => Vec::new(),
    }
}

fn name_of(t: &Table) -> &str {
    t.get("name").and_then(Item::as_str).unwrap_or("")
}

fn list(project: &Path, text: &str, doc: &DocumentMut) -> Plan {
    let file = project.join(FILE);
    let (loaded, diags) = parse_tools_toml(text, &file);
    let tools = entries(doc);
    if tools.is_empty() {
        return Plan::answer(format!("No dynamic tools in {FILE}."));
    }
    let mut out = format!("{} dynamic tool(s) in {FILE}:\n", tools.len());
    for t in tools {
        let name = name_of(t);
        let enabled = t.get("enabled").and_then(Item::as_bool).unwrap_or(true);
        let executor = t.get("executor").and_then(Item::as_str).unwrap_or("?");
        let desc = t.get("description").and_then(Item::as_str).unwrap_or("");
        let state = match (enabled, loaded.iter().any(|s| s.name == name)) {
            (false, _) => "disabled",
            (true, true) => "enabled",
            (true, false) => "enabled, not loaded (see toolcage check)",
        };
        out.push_str(&format!("- {name} ({executor}, {state}): {desc}\n"));
    }
    if diags.iter().any(|d| d.severity == Severity::Error) {
        out.push_str(&render(project, &diags));
    }
    Plan::answer(out)
}

/// `[[tools]]` entry for `add`, from the arguments, keys in the seed's order.
fn new_entry(name: &str, args: &Value) -> Result<Table, String> {
    let mut t = Table::new();
    t["name"] = toml_edit::value(name);
    for k in ["description", "executor"] {
        if let Some(s) = args.get(k).and_then(Value::as_str) {
            t[k] = toml_edit::value(s);
        }
    }
    t["enabled"] = toml_edit::value(args.get("enabled").and_then(Value::as_bool).unwrap_or(true));
    if let Some(b) = args.get("requires_approval").and_then(Value::as_bool) {
        t["requires_approval"] = toml_edit::value(b);
    }
    if let Some(n) = args.get("timeout_secs").and_then(Value::as_i64) {
        t["timeout_secs"] = toml_edit::value(n);
    }
    for k in ["command", "method", "url"] {
        if let Some(s) = args.get(k).and_then(Value::as_str) {
            t[k] = toml_edit::value(s);
        }
    }
    if let Some(h) = args.get("headers").and_then(Value::as_object) {
        let mut headers = Table::new();
        for (k, v) in h {
            let v = v.as_str().ok_or(format!("headers.{k} must be a string"))?;
            headers[k.as_str()] = toml_edit::value(v);
        }
        t["headers"] = Item::Table(headers);
    }
    if let Some(ps) = args.get("params").and_then(Value::as_array) {
        let mut aot = ArrayOfTables::new();
        for p in ps {
            let obj = p.as_object().ok_or("each of params must be an object")?;
            let mut pt = Table::new();
            // The seed's order first, then anything else.
            let order = ["name", "type", "description", "required", "default"];
            let mut keys: Vec<&String> = obj.keys().collect();
            keys.sort_by_key(|k| order.iter().position(|o| o == k).unwrap_or(order.len()));
            for (k, v) in keys.into_iter().map(|k| (k, &obj[k])) {
                let value = match v {
                    Value::String(s) => toml_edit::value(s.as_str()),
                    Value::Bool(b) => toml_edit::value(*b),
                    Value::Number(n) if n.is_i64() => toml_edit::value(n.as_i64().unwrap_or(0)),
                    Value::Number(n) => toml_edit::value(n.as_f64().unwrap_or(0.0)),
                    // The seed writes defaults as strings ("null", "50").
                    other => toml_edit::value(other.to_string()),
                };
                pt[k.as_str()] = value;
            }
            aot.push(pt);
        }
        t["params"] = Item::ArrayOfTables(aot);
    }
    Ok(t)
}

/// `action` on the entry `name` of `doc` (the file's text `old`): the
/// change to write, or why not.
fn change(
    project: &Path,
    action: &str,
    name: &str,
    args: &Value,
    old: Option<&str>,
    mut doc: DocumentMut,
) -> Plan {
    let file = project.join(FILE);
    if let Err(why) = edit(&mut doc, action, name, args) {
        return refuse(why);
    }
    let new = doc.to_string();
    if Some(new.as_str()) == old {
        return refuse(format!(
            "{NAME}: '{name}' is already {action}d; nothing to change"
        ));
    }
    if (action == "add" || action == "enable")
        && let Some(why) = would_not_load(project, &file, name, args, old, &new)
    {
        return refuse(why);
    }
    let mode = std::fs::metadata(&file)
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or(0o644);
    // What becomes runnable: the entry's command line as a person is shown it.
    let runs = match action {
        "add" | "enable" => parse_tools_toml(&new, &file)
            .0
            .iter()
            .find(|t| t.name == name)
            .map(crate::call::definition::runs),
        _ => None,
    };
    Plan::Change(Change {
        tool: NAME,
        action: action.into(),
        target: name.into(),
        format: "opencrabs",
        source: file.clone(),
        diff: diff(&rel(project, &file), old, Some(&new)),
        ops: vec![Op::Write {
            path: file,
            text: new,
            mode,
        }],
        runs,
    })
}

/// Apply `action` to `doc`: add the entry, remove it, enable or disable it.
fn edit(doc: &mut DocumentMut, action: &str, name: &str, args: &Value) -> Result<(), String> {
    let index = entries(doc).iter().position(|t| name_of(t) == name);
    match (action, index) {
        ("add", Some(_)) => Err(format!(
            "{NAME}: a tool named '{name}' is already in {FILE} (fix: remove it first, or \
             choose another name)"
        )),
        ("add", None) => {
            let entry = new_entry(name, args).map_err(|e| format!("{NAME}: {e}"))?;
            if doc.get("tools").is_none() {
                doc["tools"] = Item::ArrayOfTables(ArrayOfTables::new());
            }
            let Some(aot) = doc.get_mut("tools").and_then(Item::as_array_of_tables_mut) else {
                return Err(format!(
                    "{NAME}: {FILE} declares 'tools' other than as [[tools]] tables; toolcage \
                     edits only those (fix: rewrite it with [[tools]])"
                ));
            };
            aot.push(entry);
            Ok(())
        }
        (_, None) => Err(format!(
            "{NAME}: no tool named '{name}' in {FILE} (fix: action list shows them)"
        )),
        (_, Some(i)) => {
            let Some(aot) = doc.get_mut("tools").and_then(Item::as_array_of_tables_mut) else {
                return Err(format!("{NAME}: no [[tools]] in {FILE}"));
            };
            if action == "remove" {
                remove_entry(doc, i);
            } else if let Some(t) = aot.get_mut(i) {
                set_enabled(t, action == "enable");
            }
            Ok(())
        }
    }
}

/// Remove entry `i`. Comments directly above the entry go with it; what a
/// blank line separates from it (a file header) stays.
fn remove_entry(doc: &mut DocumentMut, i: usize) {
    let Some(aot) = doc.get_mut("tools").and_then(Item::as_array_of_tables_mut) else {
        return;
    };
    let detached = aot
        .get(i)
        .and_then(|t| t.decor().prefix())
        .and_then(|p| p.as_str())
        .and_then(|p| p.rfind("\n\n").map(|at| p[..at + 2].to_string()));
    aot.remove(i);
    let Some(keep) = detached else {
        return;
    };
    match aot.get_mut(i) {
        Some(next) => {
            let old = next.decor().prefix().and_then(|p| p.as_str());
            let old = old.unwrap_or_default().to_string();
            let old = old.strip_prefix('\n').unwrap_or(&old);
            next.decor_mut().set_prefix(format!("{keep}{old}"));
        }
        None => {
            let trailing = doc.trailing().as_str().unwrap_or_default();
            let trailing = format!("{keep}{trailing}");
            doc.set_trailing(trailing);
        }
    }
}

/// Why the file `new` would not load `name` (errors `old` did not have,
/// or the entry missing though it should be enabled), if so.
fn would_not_load(
    project: &Path,
    file: &Path,
    name: &str,
    args: &Value,
    old: Option<&str>,
    new: &str,
) -> Option<String> {
    let (_, before) = parse_tools_toml(old.unwrap_or(""), file);
    let (tools, after) = parse_tools_toml(new, file);
    let fresh: Vec<_> = after
        .iter()
        .filter(|d| d.severity == Severity::Error && !before.contains(d))
        .cloned()
        .collect();
    let wanted = args.get("enabled").and_then(Value::as_bool).unwrap_or(true);
    let missing = wanted && !tools.iter().any(|t| t.name == name);
    if fresh.is_empty() && !missing {
        return None;
    }
    let shown: Vec<_> = if fresh.is_empty() {
        let tag = format!("('{name}')");
        after
            .into_iter()
            .filter(|d| d.message.contains(&tag))
            .collect()
    } else {
        fresh
    };
    Some(format!(
        "{NAME}: not written: '{name}' would not load:\n{}",
        render(project, &shown)
    ))
}

/// Set `enabled`, keeping the comment after an existing value.
fn set_enabled(t: &mut Table, on: bool) {
    if let Some(v) = t.get_mut("enabled").and_then(Item::as_value_mut) {
        let decor = v.decor().clone();
        *v = toml_edit::Value::from(on);
        *v.decor_mut() = decor;
    } else {
        t["enabled"] = toml_edit::value(on);
    }
}
