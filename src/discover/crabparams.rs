//! OpenCrabs param values: `coerce_*` rules and defaults converted to JSON.

use super::Coerce;
use serde_json::Value;
use toml::Value as Toml;

/// `keep` / `omit` / `null` / `error`.
pub fn parse_coerce(s: &str) -> Option<Coerce> {
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
pub fn convert_default(kind: &str, v: &Toml) -> Result<Value, String> {
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
