//! JSON Schemas for tool arguments, the same shape for every format:
//!
//! ```json
//! {"type": "object",
//!  "properties": {"name": {"type": "string", "description": "...", "enum": [...], "default": ...}},
//!  "required": ["name"],
//!  "additionalProperties": false}
//! ```
//!
//! Choices where the seeds are silent:
//! - `"required"` is omitted when no parameter is required (an empty array
//!   is invalid in draft-04 validators some clients still use).
//! - `"additionalProperties": false` for every format with a declared
//!   parameter list: an agent that misspells a parameter gets an
//!   "additional property" validation error naming it, instead of the tool
//!   silently running without the value. Formats without declared
//!   parameters (A3S mcp) use an open object schema.
//! - `"description"` is omitted when empty; `"default"` carries the
//!   OpenCrabs default (already converted to JSON).

use serde_json::{Map, Value, json};

/// The JSON Schema type names toolcage accepts.
pub const TYPES: [&str; 6] = ["string", "number", "integer", "boolean", "array", "object"];

/// One parameter, format-neutral.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub name: String,
    /// One of [`TYPES`].
    pub kind: String,
    pub description: String,
    pub required: bool,
    /// Further schema keywords (`enum`, `default`, `items`, ...), copied
    /// into the property as they are.
    pub extra: Map<String, Value>,
}

impl Param {
    pub fn new(name: &str, kind: &str, description: &str, required: bool) -> Param {
        Param {
            name: name.to_owned(),
            kind: kind.to_owned(),
            description: description.to_owned(),
            required,
            extra: Map::new(),
        }
    }
}

/// The object schema for `params` (see the module doc).
pub fn object_schema(params: &[Param]) -> Value {
    let mut props = Map::new();
    let mut required = Vec::new();
    for p in params {
        let mut prop = Map::new();
        prop.insert("type".into(), Value::String(p.kind.clone()));
        if !p.description.is_empty() {
            prop.insert("description".into(), Value::String(p.description.clone()));
        }
        for (k, v) in &p.extra {
            if k != "type" && k != "description" {
                prop.insert(k.clone(), v.clone());
            }
        }
        props.insert(p.name.clone(), Value::Object(prop));
        if p.required {
            required.push(Value::String(p.name.clone()));
        }
    }
    let mut schema = Map::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), Value::Object(props));
    if !required.is_empty() {
        schema.insert("required".into(), Value::Array(required));
    }
    schema.insert("additionalProperties".into(), Value::Bool(false));
    Value::Object(schema)
}

/// An object schema accepting anything (tools without declared params).
pub fn open_object() -> Value {
    json!({"type": "object", "properties": {}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn required_omitted_when_empty_and_extras_kept() {
        let mut p = Param::new("fmt", "string", "Output format", false);
        p.extra.insert("enum".into(), json!(["a", "b"]));
        let s = object_schema(&[p]);
        assert_eq!(
            s,
            json!({"type":"object","properties":{"fmt":{"type":"string","description":"Output format","enum":["a","b"]}},"additionalProperties":false})
        );
        let s = object_schema(&[Param::new("x", "integer", "", true)]);
        assert_eq!(s["required"], json!(["x"]));
        assert_eq!(s["properties"]["x"], json!({"type":"integer"}));
    }
}
