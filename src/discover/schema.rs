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
//! - References stay inside the document: every `$ref` (and `$dynamicRef`,
//!   `$recursiveRef`) must be a `#` fragment and a `$schema` must name a
//!   draft the validator knows. Anything else would make the unsandboxed
//!   toolcage process fetch a URL or read a file on a tool's behalf, so
//!   [`remote_reference`] finds it and discovery skips the tool. `$id` is
//!   left alone: it names a document, it fetches nothing.

use super::Diagnostic;
use serde_json::{Map, Value, json};
use std::path::Path;

/// The JSON Schema type names toolcage accepts.
pub(crate) const TYPES: [&str; 6] = ["string", "number", "integer", "boolean", "array", "object"];

/// One parameter, format-neutral.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Param {
    pub name: String,
    /// One of [`TYPES`], or empty for a definition that is only a `$ref`
    /// (no `"type"` is written then).
    pub kind: String,
    pub description: String,
    pub required: bool,
    /// Further schema keywords (`enum`, `default`, `items`, ...), copied
    /// into the property as they are.
    pub extra: Map<String, Value>,
}

impl Param {
    pub(crate) fn new(name: &str, kind: &str, description: &str, required: bool) -> Param {
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
pub(crate) fn object_schema(params: &[Param]) -> Value {
    let mut props = Map::new();
    let mut required = Vec::new();
    for p in params {
        let mut prop = Map::new();
        if !p.kind.is_empty() {
            prop.insert("type".into(), Value::String(p.kind.clone()));
        }
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

/// The meta-schemas the validator has built in (with and without the
/// trailing `#`): naming one fetches nothing.
const KNOWN_META_SCHEMAS: [&str; 5] = [
    "http://json-schema.org/draft-04/schema",
    "http://json-schema.org/draft-06/schema",
    "http://json-schema.org/draft-07/schema",
    "https://json-schema.org/draft/2019-09/schema",
    "https://json-schema.org/draft/2020-12/schema",
];

/// Keywords whose values are data, not subschemas: a `{"$ref": ...}` inside
/// them is an example value, not a reference.
const DATA_KEYWORDS: [&str; 4] = ["enum", "const", "default", "examples"];

/// Keywords whose values map names to subschemas: their keys are names (a
/// property may be called `default` or `$ref`), not keywords.
const NAME_MAPS: [&str; 6] = [
    "properties",
    "patternProperties",
    "definitions",
    "$defs",
    "dependentSchemas",
    "dependencies",
];

/// The first reference in `schema` that points outside the document: a
/// `$ref` / `$dynamicRef` / `$recursiveRef` that is not a `#` fragment
/// (`http:`, `https:`, `file:`, a relative file name, ...), or a `$schema`
/// that is not a built-in draft. Returns `(keyword, value)`.
pub(crate) fn remote_reference(schema: &Value) -> Option<(&'static str, String)> {
    walk(schema, false)
}

/// [`remote_reference`] for a map of names to schemas (the value of
/// `properties`, or clawd's `parameters`).
pub(crate) fn remote_reference_in_properties(map: &Value) -> Option<(&'static str, String)> {
    walk(map, true)
}

fn walk(v: &Value, names: bool) -> Option<(&'static str, String)> {
    match v {
        Value::Object(map) if names => map.values().find_map(|s| walk(s, false)),
        Value::Object(map) => {
            for kw in ["$ref", "$dynamicRef", "$recursiveRef"] {
                // "" is the document itself.
                if let Some(Value::String(r)) = map.get(kw)
                    && !r.is_empty()
                    && !r.starts_with('#')
                {
                    return Some((kw, r.clone()));
                }
            }
            if let Some(Value::String(m)) = map.get("$schema") {
                let bare = m.strip_suffix('#').unwrap_or(m);
                if !KNOWN_META_SCHEMAS.contains(&bare) {
                    return Some(("$schema", m.clone()));
                }
            }
            map.iter()
                .filter(|(k, _)| !DATA_KEYWORDS.contains(&k.as_str()))
                .find_map(|(k, v)| walk(v, NAME_MAPS.contains(&k.as_str())))
        }
        Value::Array(items) => items.iter().find_map(|s| walk(s, false)),
        _ => None,
    }
}

/// The error for a tool skipped over [`remote_reference`]: names the
/// reference, and its line when `text` (the tool file) holds it verbatim.
pub(crate) fn remote_reference_error(
    file: &Path,
    text: Option<&str>,
    fallback_line: Option<usize>,
    tool: &str,
    (keyword, target): (&str, String),
) -> Diagnostic {
    let line = text
        .and_then(|t| Some(crate::text::line_at(t, t.find(&target)?)))
        .or(fallback_line);
    // Quoted as JSON (one line, escapes visible) and kept short.
    let mut shown = Value::String(target).to_string();
    if shown.chars().count() > 200 {
        shown = shown.chars().take(200).collect::<String>() + "…";
    }
    Diagnostic::error(
        file,
        line,
        format!(
            "tool '{tool}': its input schema has \"{keyword}\": {shown}, which is not local to \
             the schema (toolcage never fetches schemas or reads files for them); tool skipped"
        ),
    )
    .fix(if keyword == "$schema" {
        "drop \"$schema\" or name a standard draft (e.g. http://json-schema.org/draft-07/schema#)"
    } else {
        "inline the definition under definitions/$defs and use a local #/ reference"
    })
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

    #[test]
    fn remote_references_are_found_local_ones_are_not() {
        for (schema, kw) in [
            (json!({"$ref": "http://127.0.0.1:1/x.json"}), "$ref"),
            (
                json!({"properties": {"a": {"$ref": "https://e.x/s#/a"}}}),
                "$ref",
            ),
            (json!({"items": [{"$ref": "file:///etc/passwd"}]}), "$ref"),
            (
                json!({"definitions": {"a": {"$ref": "other.json#/b"}}}),
                "$ref",
            ),
            (
                json!({"$defs": {"a": {"$dynamicRef": "http://e.x/a"}}}),
                "$dynamicRef",
            ),
            (
                json!({"$schema": "http://127.0.0.1:1/meta.json"}),
                "$schema",
            ),
            (
                json!({"properties": {"a": {"$schema": "file:///m.json"}}}),
                "$schema",
            ),
        ] {
            assert_eq!(
                remote_reference(&schema).map(|(k, _)| k),
                Some(kw),
                "{schema}"
            );
        }
        // Controls: fragments, built-in drafts, `$id`, and data that only
        // looks like a reference.
        for schema in [
            json!({"properties": {"a": {"$ref": "#/definitions/a"}}, "definitions": {"a": {"type": "string"}}}),
            json!({"$ref": "#"}),
            json!({"$ref": ""}),
            json!({"$schema": "http://json-schema.org/draft-07/schema#"}),
            json!({"$schema": "https://json-schema.org/draft/2020-12/schema"}),
            json!({"$id": "https://example.com/tool.json", "type": "object"}),
            json!({"properties": {"a": {"enum": [{"$ref": "http://e.x"}], "default": {"$ref": "http://e.x"}}}}),
            json!({"properties": {"$ref": {"type": "string"}}}),
        ] {
            assert_eq!(remote_reference(&schema), None, "{schema}");
        }
    }
}
