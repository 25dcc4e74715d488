//! Argument checks before a call runs: the arguments must be a JSON object;
//! OpenCrabs defaults and `coerce_empty_to` / `coerce_null_to` apply; then
//! the tool's JSON Schema decides.

use crate::discover::{Coerce, CrabParam, ToolKind, ToolSpec};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// The validated arguments, or a one-line reason naming the parameter.
pub(crate) fn arguments(tool: &ToolSpec, args: Value) -> Result<Map<String, Value>, String> {
    let mut map = match args {
        Value::Null => Map::new(),
        Value::Object(m) => m,
        other => {
            return Err(format!(
                "arguments must be a JSON object of parameters, got {}",
                json_kind(&other)
            ));
        }
    };
    let crab_params = match &tool.kind {
        ToolKind::OpencrabsShell { params, .. } | ToolKind::OpencrabsHttp { params, .. } => {
            Some(params.as_slice())
        }
        _ => None,
    };
    if let Some(params) = crab_params {
        apply_crab(params, &mut map)?;
    }
    check_schema(&tool.input_schema, &map, crab_params)?;
    Ok(map)
}

/// OpenCrabs: defaults for missing parameters, then the coercions.
pub(crate) fn apply_crab(params: &[CrabParam], map: &mut Map<String, Value>) -> Result<(), String> {
    for p in params {
        if !map.contains_key(&p.name)
            && let Some(d) = &p.default
        {
            map.insert(p.name.clone(), d.clone());
        }
        let (rule, key, what) = match map.get(&p.name) {
            Some(Value::Null) => (p.coerce_null_to, "coerce_null_to", "null"),
            Some(Value::String(s)) if s.is_empty() => {
                (p.coerce_empty_to, "coerce_empty_to", "empty")
            }
            _ => continue,
        };
        match rule {
            Coerce::Keep => {}
            Coerce::Omit => {
                map.remove(&p.name);
            }
            Coerce::Null => {
                map.insert(p.name.clone(), Value::Null);
            }
            Coerce::Error => {
                return Err(format!(
                    "parameter '{}' must not be {what} (the tool sets {key} = \"error\"; pass a value)",
                    p.name
                ));
            }
        }
    }
    Ok(())
}

/// Validate `map` against `schema`; every error on one line.
///
/// For OpenCrabs tools a `null` that survived the coercions is intentional
/// (`keep` / `null`), so optional parameters holding null are not type-checked.
fn check_schema(
    schema: &Value,
    map: &Map<String, Value>,
    crab: Option<&[CrabParam]>,
) -> Result<(), String> {
    // Draft 7 covers every keyword the formats produce, and its meta-schema
    // (checked once per process while compiling) is a third of the cost of
    // 2020-12's: this is most of `toolcage call`'s own CPU time.
    let validator = validator(schema)?;
    let mut instance = map.clone();
    if let Some(params) = crab {
        for p in params.iter().filter(|p| !p.required) {
            if instance.get(&p.name) == Some(&Value::Null) {
                instance.remove(&p.name);
            }
        }
    }
    let instance = Value::Object(instance);
    let errors: Vec<String> = validator
        .iter_errors(&instance)
        .map(|e| describe(&e, schema))
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// The retriever for references outside the schema: refuses every one.
/// Discovery already skips tools with such references; this is the second
/// layer, so no schema can make toolcage fetch a URL or read a file (and the
/// `jsonschema` crate is built without its HTTP and file resolvers too).
struct NoFetch;

/// Schemas compiled, by their text: a server calls the same tools again
/// and again, and compiling is most of the check's cost. Bounded: past
/// [`COMPILED_MAX`] schemas (definitions changing under hot reload) it
/// starts over.
static COMPILED: OnceLock<Mutex<HashMap<String, Arc<jsonschema::Validator>>>> = OnceLock::new();
const COMPILED_MAX: usize = 1024;

/// The compiled `schema` (Draft 7, no fetching), or why it is invalid.
fn validator(schema: &Value) -> Result<Arc<jsonschema::Validator>, String> {
    let key = schema.to_string();
    let compiled = COMPILED.get_or_init(Mutex::default);
    let lock = || compiled.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(v) = lock().get(&key) {
        return Ok(v.clone());
    }
    let v = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft7)
        .with_retriever(NoFetch)
        .build(schema)
        .map(Arc::new)
        .map_err(|e| format!("the tool's input schema is invalid: {e} (fix the tool definition; `toolcage check` shows it)"))?;
    let mut map = lock();
    if map.len() >= COMPILED_MAX {
        map.clear();
    }
    map.insert(key, v.clone());
    Ok(v)
}

impl jsonschema::Retrieve for NoFetch {
    fn retrieve(
        &self,
        uri: &jsonschema::Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        Err(format!(
            "{uri} is outside the schema and toolcage never fetches schemas; inline the \
             definition under definitions/$defs and use a local #/ reference"
        )
        .into())
    }
}

fn describe(e: &jsonschema::ValidationError, schema: &Value) -> String {
    use jsonschema::error::ValidationErrorKind as K;
    let path = e.instance_path().as_str();
    let param = path
        .strip_prefix('/')
        .unwrap_or(path)
        .replace('/', ".")
        .replace("~1", "/")
        .replace("~0", "~");
    match e.kind() {
        K::Required { property } => {
            let name = property
                .as_str()
                .map_or_else(|| property.to_string(), str::to_string);
            let ty = schema
                .pointer(&format!(
                    "/properties/{}/type",
                    name.replace('~', "~0").replace('/', "~1")
                ))
                .map(|t| format!(" ({})", type_text(t)))
                .unwrap_or_default();
            if param.is_empty() {
                format!("missing required parameter '{name}'{ty}")
            } else {
                format!("parameter '{param}': missing required property '{name}'{ty}")
            }
        }
        K::AdditionalProperties { unexpected } if param.is_empty() => {
            let known: Vec<&str> = schema
                .get("properties")
                .and_then(Value::as_object)
                .map(|m| m.keys().map(String::as_str).collect())
                .unwrap_or_default();
            let list = if known.is_empty() {
                "it takes no parameters".to_string()
            } else {
                format!("known: {}", known.join(", "))
            };
            format!(
                "unknown parameter{} {} ({list})",
                if unexpected.len() == 1 { "" } else { "s" },
                unexpected
                    .iter()
                    .map(|u| format!("'{u}'"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
        _ if param.is_empty() => one_line(&e.to_string()),
        _ => format!("parameter '{param}': {}", one_line(&e.to_string())),
    }
}

fn type_text(t: &Value) -> String {
    match t {
        Value::String(s) => s.clone(),
        Value::Array(a) => a
            .iter()
            .map(|v| v.as_str().unwrap_or("?").to_string())
            .collect::<Vec<_>>()
            .join(" or "),
        other => other.to_string(),
    }
}

/// Keep a message on one line and of reasonable length (values can be big).
fn one_line(s: &str) -> String {
    let flat: String = s
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    if flat.chars().count() > 300 {
        let cut: String = flat.chars().take(300).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

pub(crate) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    /// The params of `discover::tests::opencrabs::params_types_defaults_and_coercions`.
    fn seed_params() -> Vec<CrabParam> {
        let p = |name: &str, kind: &str, default: Value, empty, null| CrabParam {
            name: name.into(),
            kind: kind.into(),
            required: false,
            default: Some(default),
            coerce_empty_to: empty,
            coerce_null_to: null,
        };
        vec![
            p("limit", "integer", json!(50), Coerce::Keep, Coerce::Keep),
            p("query", "string", Value::Null, Coerce::Null, Coerce::Omit),
            p("source", "string", json!(""), Coerce::Error, Coerce::Keep),
        ]
    }

    #[test]
    fn coercions_at_call_time_follow_the_seed_table() {
        let ps = &seed_params();
        let mut m: Map<String, Value> = json!({"query": ""}).as_object().unwrap().clone();
        m.insert("source".into(), json!("x"));
        apply_crab(ps, &mut m).unwrap();
        assert_eq!(
            Value::Object(m),
            json!({"limit": 50, "query": null, "source": "x"})
        );
        let mut m = json!({"query": null, "source": "x"})
            .as_object()
            .unwrap()
            .clone();
        apply_crab(ps, &mut m).unwrap();
        assert_eq!(Value::Object(m), json!({"limit": 50, "source": "x"}));
        let mut m = Map::new();
        let e = apply_crab(ps, &mut m).unwrap_err();
        assert!(e.contains("parameter 'source' must not be empty"), "{e}");
    }

    #[test]
    fn references_outside_the_schema_are_refused_not_fetched() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let file =
            std::env::temp_dir().join(format!("tc-validate-ref-{}.json", std::process::id()));
        std::fs::write(&file, r#"{"type": "integer"}"#).unwrap();
        for target in [
            format!("http://127.0.0.1:{port}/x.json"),
            format!("file://{}", file.display()),
        ] {
            let schema = json!({"type": "object", "properties": {"a": {"$ref": target}}});
            let e = check_schema(&schema, &args(json!({"a": "x"})), None).unwrap_err();
            assert!(e.contains("never fetches schemas"), "{e}");
        }
        let _ = std::fs::remove_file(&file);
        assert!(
            listener.accept().is_err(),
            "validation connected to the reference's address"
        );
        // Control: a local reference resolves and decides.
        let schema = json!({"type": "object",
            "properties": {"a": {"$ref": "#/definitions/n"}},
            "definitions": {"n": {"type": "integer"}}});
        check_schema(&schema, &args(json!({"a": 3})), None).unwrap();
        let e = check_schema(&schema, &args(json!({"a": "x"})), None).unwrap_err();
        assert!(e.contains("parameter 'a'"), "{e}");
    }

    #[test]
    fn a_compiled_schema_is_used_only_for_that_schema() {
        let strict = json!({"type": "object", "properties": {"n": {"type": "integer"}},
                            "required": ["n"]});
        let loose = json!({"type": "object", "properties": {"n": {"type": "string"}}});
        for _ in 0..2 {
            // The second time from the compiled ones: the same answers.
            let e = check_schema(&strict, &args(json!({"n": "x"})), None).unwrap_err();
            assert!(e.contains("n"), "{e}");
            assert!(check_schema(&strict, &args(json!({})), None).is_err());
            check_schema(&strict, &args(json!({"n": 3})), None).unwrap();
            // A changed definition (hot reload) is its own schema.
            check_schema(&loose, &args(json!({"n": "x"})), None).unwrap();
            assert!(check_schema(&loose, &args(json!({"n": 3})), None).is_err());
        }
    }
}
