//! TEMPORARY STUB (branch `callcli` only): the real module is written in
//! branch `discover` and replaces this file at merge. It exists so that the
//! OpenCrabs encoder in `call` compiles and can be tested meanwhile.
//!
//! `{{name}}` becomes the parameter's value, shell-quoted; `{{#name}}…{{/name}}`
//! is kept only when the parameter is present, non-null and non-empty.

use serde_json::{Map, Value};

/// Why a template cannot be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TemplateError(pub String);

/// Render `template` with shell-quoted values from `args`.
pub fn render(template: &str, args: &Map<String, Value>) -> Result<String, TemplateError> {
    render_inner(template, args)
}

fn present(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
        Some(_) => true,
    }
}

fn text(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// Single-quote `s` for `sh`: nothing inside single quotes is special.
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

fn render_inner(template: &str, args: &Map<String, Value>) -> Result<String, TemplateError> {
    let mut out = String::new();
    let mut rest = template;
    // Open sections: (name, kept?)
    let mut sections: Vec<(String, bool)> = Vec::new();
    while let Some(start) = rest.find("{{") {
        let keep = sections.iter().all(|(_, k)| *k);
        if keep {
            out.push_str(&rest[..start]);
        }
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .ok_or_else(|| TemplateError(format!("unclosed '{{{{' in template: {template}")))?;
        let tag = after[..end].trim();
        rest = &after[end + 2..];
        if let Some(name) = tag.strip_prefix('#') {
            let name = name.trim().to_string();
            let kept = present(args.get(&name));
            sections.push((name, kept));
        } else if let Some(name) = tag.strip_prefix('/') {
            match sections.pop() {
                Some((open, _)) if open == name.trim() => {}
                _ => {
                    return Err(TemplateError(format!(
                        "'{{{{/{}}}}}' does not close an open section",
                        name.trim()
                    )));
                }
            }
        } else if keep {
            out.push_str(&shell_quote(&text(args.get(tag))));
        }
    }
    if let Some((name, _)) = sections.pop() {
        return Err(TemplateError(format!(
            "section '{{{{#{name}}}}}' is never closed"
        )));
    }
    if sections.iter().all(|(_, k)| *k) {
        out.push_str(rest);
    }
    Ok(out)
}
