//! `[[tools.params]]`: each parameter checked, as a schema parameter and
//! as what the call needs of it: its default converted to JSON, its
//! `coerce_*` rules.

use super::Cx;
use super::template;
use crate::discover::schema::{self, Param};
use crate::discover::{Coerce, CrabParam};
use serde_json::Value;
use toml::{Table, Value as Toml};

const PARAM_KEYS: [&str; 7] = [
    "name",
    "type",
    "description",
    "required",
    "default",
    "coerce_empty_to",
    "coerce_null_to",
];

pub(super) fn parse_params(v: Option<&Toml>, cx: &mut Cx) -> Vec<(Param, CrabParam)> {
    let items = match v {
        None => return Vec::new(),
        Some(Toml::Array(a)) => a,
        Some(_) => {
            cx.err(
                "params",
                "must be an array of tables",
                "use [[tools.params]]",
            );
            return Vec::new();
        }
    };
    let mut out: Vec<(Param, CrabParam)> = Vec::new();
    for (m, item) in items.iter().enumerate() {
        let Some(t) = item.as_table() else {
            cx.err(&key(m, ""), "must be a table", "use [[tools.params]]");
            continue;
        };
        if let Some(param) = parse_param(m, t, &out, cx) {
            out.push(param);
        }
    }
    out
}

/// `params[m].k`, how a diagnostic names a param's key.
fn key(m: usize, k: &str) -> String {
    format!("params[{m}].{k}")
}

/// The `m`th `[[tools.params]]` table; `None` once an error is reported.
fn parse_param(
    m: usize,
    t: &Table,
    earlier: &[(Param, CrabParam)],
    cx: &mut Cx,
) -> Option<(Param, CrabParam)> {
    for k in t.keys() {
        if !PARAM_KEYS.contains(&k.as_str()) {
            cx.warn(&key(m, k), "unknown key ignored");
        }
    }
    let name = param_name(m, t, earlier, cx)?;
    let kind = param_type(m, t, cx)?;
    let description = match t.get("description") {
        None => String::new(),
        Some(Toml::String(s)) => s.clone(),
        Some(_) => {
            cx.err(
                &key(m, "description"),
                "must be a string",
                "quote the value",
            );
            return None;
        }
    };
    let required = match t.get("required") {
        None => false,
        Some(Toml::Boolean(b)) => *b,
        Some(_) => {
            cx.err(
                &key(m, "required"),
                "must be true or false",
                "write true or false",
            );
            return None;
        }
    };
    let default = param_default(m, t, &kind, cx)?;
    let [coerce_empty_to, coerce_null_to] = coercions(m, t, cx)?;
    let mut p = Param::new(&name, &kind, &description, required);
    if let Some(d) = &default {
        p.extra.insert("default".into(), d.clone());
    }
    let c = CrabParam {
        name,
        kind,
        required,
        default,
        coerce_empty_to,
        coerce_null_to,
    };
    Some((p, c))
}

/// `type`, `string` when absent.
fn param_type(m: usize, t: &Table, cx: &mut Cx) -> Option<String> {
    match t.get("type") {
        None => Some("string".to_owned()),
        Some(Toml::String(s)) if schema::TYPES.contains(&s.as_str()) => Some(s.clone()),
        Some(v) => {
            cx.err(
                &key(m, "type"),
                format!("unsupported type {v}"),
                "use string, number, integer, boolean, array or object",
            );
            None
        }
    }
}

/// `default`, converted to JSON by the param's type: `Some(None)` when
/// absent, `None` once an error is reported.
fn param_default(m: usize, t: &Table, kind: &str, cx: &mut Cx) -> Option<Option<Value>> {
    match t.get("default").map(|d| convert_default(kind, d)) {
        None => Some(None),
        Some(Ok(v)) => Some(Some(v)),
        Some(Err(e)) => {
            cx.err(
                &key(m, "default"),
                e,
                "write a default matching the param's type",
            );
            None
        }
    }
}

/// A valid name no earlier param has.
fn param_name(m: usize, t: &Table, earlier: &[(Param, CrabParam)], cx: &mut Cx) -> Option<String> {
    let name = match t.get("name") {
        Some(Toml::String(s)) if template::valid_param_name(s) => s.clone(),
        Some(v) => {
            cx.err(
                &key(m, "name"),
                format!("{v} must match [A-Za-z_][A-Za-z0-9_-]*"),
                "rename the param",
            );
            return None;
        }
        None => {
            cx.err(&key(m, "name"), "missing", "add `name = \"...\"`");
            return None;
        }
    };
    if earlier.iter().any(|(p, _)| p.name == name) {
        cx.err(
            &key(m, "name"),
            format!("duplicate param '{name}'"),
            "declare each param once",
        );
        return None;
    }
    Some(name)
}

/// `coerce_empty_to` and `coerce_null_to`; both are checked before giving up.
fn coercions(m: usize, t: &Table, cx: &mut Cx) -> Option<[Coerce; 2]> {
    let mut coerce = [Coerce::Keep; 2];
    let mut ok = true;
    for (i, k) in ["coerce_empty_to", "coerce_null_to"].iter().enumerate() {
        match t.get(*k).map(|v| v.as_str().and_then(parse_coerce)) {
            None => {}
            Some(Some(c)) => coerce[i] = c,
            Some(None) => {
                cx.err(
                    &key(m, k),
                    "must be \"keep\", \"omit\", \"null\" or \"error\"",
                    "pick one of the four",
                );
                ok = false;
            }
        }
    }
    ok.then_some(coerce)
}

/// `keep` / `omit` / `null` / `error`.
pub(crate) fn parse_coerce(s: &str) -> Option<Coerce> {
    Some(match s {
        "keep" => Coerce::Keep,
        "omit" => Coerce::Omit,
        "null" => Coerce::Null,
        "error" => Coerce::Error,
        _ => return None,
    })
}

/// A param default as JSON. TOML strings are converted by `kind`
/// (`"50"` → 50 for integer, `"true"` → true for boolean, JSON text for
/// array/object); `"null"` is JSON null for any type. Native TOML values
/// must already have the right type.
pub(crate) fn convert_default(kind: &str, v: &Toml) -> Result<Value, String> {
    if let Toml::String(s) = v {
        if s == "null" {
            return Ok(Value::Null);
        }
        let bad = || format!("\"{s}\" is not a valid {kind}");
        return match kind {
            "string" => Ok(Value::String(s.clone())),
            "integer" => s.trim().parse::<i64>().map(Value::from).map_err(|_| bad()),
            "number" => s
                .trim()
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number)
                .ok_or_else(bad),
            "boolean" => match s.trim() {
                "true" => Ok(Value::Bool(true)),
                "false" => Ok(Value::Bool(false)),
                _ => Err(bad()),
            },
            _ => match serde_json::from_str::<Value>(s) {
                Ok(j @ Value::Array(_)) if kind == "array" => Ok(j),
                Ok(j @ Value::Object(_)) if kind == "object" => Ok(j),
                _ => Err(bad()),
            },
        };
    }
    let j = match v {
        Toml::Datetime(_) => return Err("a datetime is not a valid default".into()),
        other => serde_json::to_value(other).map_err(|e| e.to_string())?,
    };
    let fits = match kind {
        "integer" => j.is_i64() || j.is_u64(),
        "number" => j.is_number(),
        "boolean" => j.is_boolean(),
        "array" => j.is_array(),
        "object" => j.is_object(),
        _ => false,
    };
    if fits {
        Ok(j)
    } else {
        Err(format!("{j} is not a valid {kind}"))
    }
}
