//! clawd's `parameters`: each definition checked and turned into a schema
//! parameter.

use crate::discover::schema::Param;
use serde_json::{Map, Value};

/// clawd's `parameters` is a map of name -> definition, but authors used
/// to JSON Schema write `{"type": "object", "properties": {...},
/// "required": [...]}` there. That shape is unambiguous (a parameter
/// definition is an object, never the string "object"), so it is read as
/// the properties and their required list.
pub(super) fn unwrap_json_schema(parameters: Option<&Value>) -> (Option<&Value>, Option<&[Value]>) {
    let Some(Value::Object(map)) = parameters else {
        return (parameters, None);
    };
    match (map.get("type"), map.get("properties")) {
        (Some(Value::String(t)), Some(props @ Value::Object(_))) if t == "object" => {
            let required = map
                .get("required")
                .and_then(Value::as_array)
                .map(Vec::as_slice);
            (Some(props), Some(required.unwrap_or(&[])))
        }
        _ => (parameters, None),
    }
}

/// One parameter definition; an optional warning on success.
pub(super) fn parse_param(name: &str, def: &Value) -> Result<(Param, Option<String>), String> {
    let Some(def) = def.as_object() else {
        return Err(format!("parameter '{name}' must be an object"));
    };
    if name.is_empty() {
        return Err("empty parameter name".into());
    }
    let mut warn = None;
    let kind = match def.get("type") {
        // Only a reference: its target says the type.
        None if def.contains_key("$ref") => "",
        None => {
            warn = Some(format!("parameter '{name}' has no \"type\"; using string"));
            "string"
        }
        Some(Value::String(t)) => match t.as_str() {
            "string" | "number" | "integer" | "boolean" | "array" | "object" => t.as_str(),
            _ => return Err(format!("parameter '{name}': unsupported type '{t}'")),
        },
        Some(t) => {
            return Err(format!(
                "parameter '{name}': \"type\" must be a string, got {t}"
            ));
        }
    };
    let description = match def.get("description") {
        None | Some(Value::Null) => "",
        Some(Value::String(s)) => s.as_str(),
        Some(_) => {
            return Err(format!(
                "parameter '{name}': \"description\" must be a string"
            ));
        }
    };
    if let Some(e) = def.get("enum")
        && !matches!(e, Value::Array(a) if !a.is_empty())
    {
        return Err(format!(
            "parameter '{name}': \"enum\" must be a non-empty array"
        ));
    }
    let mut p = Param::new(name, kind, description, false);
    p.extra = def
        .iter()
        .filter(|(k, _)| *k != "type" && *k != "description" && *k != "required")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect::<Map<_, _>>();
    Ok((p, warn))
}
