//! clawd `.clawd/tools/<id>/tool.json` (seed: clawd-custom-tools.md).

use super::{Proj, assert_one_line_with_fix, names, rendered};
use crate::discover::clawd::{
    ToolJson, detect_interpreter, key_line, parse_tool_json, valid_clawd_name,
};
use crate::discover::{Severity, ToolKind};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

/// Pretty-printed with sorted keys, so lines are predictable.
fn parse(v: Value) -> (Option<ToolJson>, Vec<String>) {
    let text = serde_json::to_string_pretty(&v).unwrap();
    let (t, d) = parse_tool_json(text.as_bytes(), Path::new("tool.json"));
    (t, d.iter().map(|d| d.to_string()).collect())
}

fn base() -> Value {
    json!({"name": "check-deps", "description": "Check deps", "entrypoint": "check.sh"})
}

fn with(k: &str, v: Value) -> Value {
    let mut b = base();
    b[k] = v;
    b
}

fn error_of(v: Value) -> String {
    let (t, d) = parse(v);
    assert!(t.is_none(), "loaded: {d:?}");
    assert_eq!(d.len(), 1, "{d:?}");
    d[0].clone()
}

#[test]
fn seed_quick_start_tool_json() {
    let (t, d) = parse(json!({
      "name": "check-deps",
      "description": "Check for outdated npm dependencies",
      "parameters": {"path": {"type": "string", "description": "Path to package.json"}},
      "required": ["path"],
      "entrypoint": "check.sh",
      "interpreter": "bash",
      "timeout": 30
    }));
    assert!(d.is_empty(), "{d:?}");
    let t = t.unwrap();
    assert_eq!(t.interpreter.as_deref(), Some("bash"));
    assert_eq!(t.timeout, Duration::from_secs(30));
    assert_eq!(t.params.len(), 1);
    assert!(t.params[0].required);
}

#[test]
fn defaults_parameters_required_timeout() {
    let t = parse(base()).0.unwrap();
    assert!(t.params.is_empty());
    assert_eq!(t.timeout, Duration::from_secs(30));
    assert_eq!(t.interpreter.as_deref(), Some("bash"));
}

#[test]
fn name_rules_lowercase_alnum_dash_underscore_max_64() {
    assert!(valid_clawd_name("a-b_c9"));
    assert!(valid_clawd_name(&"a".repeat(64)));
    for bad in ["", "Upper", "a.b", "a b", "a/b", "é"] {
        assert!(!valid_clawd_name(bad), "{bad}");
    }
    assert!(!valid_clawd_name(&"a".repeat(65)));
    assert_eq!(
        error_of(with("name", json!("Check"))),
        "tool.json:4: invalid \"name\" 'Check'; tool skipped (fix: use lowercase letters, digits, '-' and '_', at most 64 characters)"
    );
    let mut v = base();
    v.as_object_mut().unwrap().remove("name");
    assert!(error_of(v).contains("missing \"name\" (string); tool skipped"));
}

#[test]
fn description_and_entrypoint_required() {
    for v in [json!(""), json!("  "), json!(3)] {
        assert!(error_of(with("description", v)).contains("missing \"description\""));
    }
    let mut v = base();
    v.as_object_mut().unwrap().remove("entrypoint");
    assert!(error_of(v).contains("missing \"entrypoint\" (string)"));
}

#[test]
fn entrypoint_has_no_path_separators() {
    for e in ["../x.sh", "sub/x.sh", "/bin/sh", "a\\b", "", ".", ".."] {
        let m = error_of(with("entrypoint", json!(e)));
        assert!(
            m.contains("must be a file name in the tool directory; tool skipped"),
            "{e}: {m}"
        );
    }
}

#[test]
fn interpreter_explicit_or_auto_detected_by_extension() {
    for i in ["bash", "sh", "python3", "python", "bun", "node"] {
        let t = parse(with("interpreter", json!(i))).0.unwrap();
        assert_eq!(t.interpreter.as_deref(), Some(i));
    }
    assert!(error_of(with("interpreter", json!("perl"))).contains("unsupported \"interpreter\""));
    for (e, want) in [
        ("a.sh", Some("bash")),
        ("a.py", Some("python3")),
        ("a.ts", Some("bun")),
        ("a.js", Some("bun")),
        ("a.rb", None),
        ("run", None),
    ] {
        assert_eq!(detect_interpreter(e), want, "{e}");
        let t = parse(with("entrypoint", json!(e))).0.unwrap();
        assert_eq!(t.interpreter.as_deref(), want, "{e}");
    }
}

#[test]
fn timeout_bounds_1_to_300() {
    for ok in [1.0, 30.0, 300.0, 2.5] {
        let t = parse(with("timeout", json!(ok))).0.unwrap();
        assert_eq!(t.timeout, Duration::from_secs_f64(ok));
    }
    for bad in [json!(0), json!(0.5), json!(301), json!(-1), json!("30")] {
        let m = error_of(with("timeout", bad.clone()));
        assert!(m.contains("out of range; tool skipped"), "{bad}: {m}");
        assert!(m.ends_with("(fix: use a number of seconds from 1 to 300)"));
    }
}

#[test]
fn parameter_types_and_required_names() {
    let (t, d) = parse(with(
        "parameters",
        json!({
            "q": {"type": "string", "enum": ["json", "text"]},
            "n": {"type": "number"}, "i": {"type": "integer"},
            "b": {"type": "boolean"}, "a": {"type": "array"}, "o": {"type": "object"},
            "untyped": {"description": "no type"}
        }),
    ));
    let t = t.unwrap();
    assert_eq!(t.params.len(), 7);
    assert_eq!(
        d,
        vec![
            "tool.json:28: parameter 'untyped' has no \"type\"; using string (fix: add \"type\": \"string\" (or the right type))"
        ]
    );
    let q = t.params.iter().find(|p| p.name == "q").unwrap();
    assert_eq!(q.extra["enum"], json!(["json", "text"]));
    assert!(
        error_of(with("parameters", json!({"x": {"type": "date"}})))
            .contains("unsupported type 'date'")
    );
    assert!(
        error_of(with("parameters", json!({"x": "string"})))
            .contains("parameter 'x' must be an object")
    );
    assert!(
        error_of(with("parameters", json!({"x": {"enum": []}})))
            .contains("\"enum\" must be a non-empty array")
    );
    assert!(error_of(with("parameters", json!([]))).contains("\"parameters\" must be an object"));
    assert!(
        error_of(with("required", json!(["nope"])))
            .contains("\"required\" names 'nope', which is not in \"parameters\"")
    );
    assert!(error_of(with("required", json!("x"))).contains("must be an array of strings"));
}

#[test]
fn malformed_json_and_unknown_keys() {
    let (t, d) = parse_tool_json(b"{\n  \"name\": \"x\",\n  oops\n}", Path::new("tool.json"));
    assert!(t.is_none());
    assert_eq!(d[0].line, Some(3));
    assert!(
        d[0].message.starts_with("malformed JSON at 3:"),
        "{:?}",
        d[0]
    );
    let (_, d) = parse_tool_json(b"[1]", Path::new("tool.json"));
    assert!(d[0].message.contains("must be a JSON object"));
    let (t, d) = parse(with("version", json!(2)));
    assert!(t.is_some());
    assert_eq!(
        d,
        vec!["tool.json:5: unknown key 'version' ignored (fix: remove it, or check its spelling)"]
    );
}

#[test]
fn key_line_finds_keys_not_values() {
    let text = "{\n \"x\": \"name\",\n \"name\" : 1}";
    assert_eq!(key_line(text, "name"), Some(3));
    assert_eq!(key_line(text, "nope"), None);
}

#[test]
fn scan_exposes_ct_id_and_checks_the_entrypoint() {
    let p = Proj::new();
    let tj = |name: &str, entry: &str, extra: &str| {
        format!(r#"{{"name": "{name}", "description": "D", "entrypoint": "{entry}"{extra}}}"#)
    };
    p.write(".clawd/tools/greet/tool.json", tj("greet", "greet.sh", ""));
    p.write(".clawd/tools/greet/greet.sh", "echo hi\n");
    p.write(".clawd/tools/raw/tool.json", tj("raw", "run", ""));
    p.exec(".clawd/tools/raw/run", "#!/bin/sh\n");
    p.write(".clawd/tools/noexec/tool.json", tj("noexec", "run", ""));
    p.write(".clawd/tools/noexec/run", "#!/bin/sh\n");
    p.write(
        ".clawd/tools/missing/tool.json",
        tj("missing", "gone.py", ""),
    );
    p.write(".clawd/tools/empty/readme", "x");
    p.write(".clawd/tools/renamed/tool.json", tj("other", "r.sh", ""));
    p.write(".clawd/tools/renamed/r.sh", "");
    p.write(".clawd/tools/escape/tool.json", tj("escape", "x.sh", ""));
    std::os::unix::fs::symlink("/bin/sh", p.path(".clawd/tools/escape/x.sh")).unwrap();
    p.write(".clawd/tools/stray.json", "{}");
    p.write(".clawd/tools/.hidden/tool.json", "garbage");
    let c = p.discover();
    let escape = format!(
        "error .clawd/tools/escape/x.sh: symlink to /bin/sh leads outside .clawd/tools/escape (to {}); not read, tool skipped (fix: put the file itself inside .clawd/tools/escape instead of a link to it, or remove the link)",
        std::fs::canonicalize("/bin/sh").unwrap().display()
    );
    assert_eq!(names(&c), vec!["ct_greet", "ct_raw", "ct_renamed"]);
    assert_eq!(
        rendered(&c, p.root()),
        vec![
            "error .clawd/tools/empty/tool.json: no tool.json in the tool directory (or it vanished); tool skipped (fix: add .clawd/tools/empty/tool.json, or remove the directory)",
            escape.as_str(),
            "error .clawd/tools/missing/tool.json: entrypoint 'gone.py': file vanished or is a dangling symlink; tool skipped (fix: create .clawd/tools/missing/gone.py)",
            "error .clawd/tools/noexec/tool.json: no interpreter for 'run' and it is not executable; tool skipped (fix: set \"interpreter\" or chmod +x .clawd/tools/noexec/run)",
            "warning .clawd/tools/renamed/tool.json: \"name\" 'other' differs from the directory; exposed as ct_renamed (fix: make \"name\" and the directory name the same)",
            "warning .clawd/tools/stray.json: not a tool directory; ignored (fix: put each tool in its own directory: .clawd/tools/<id>/tool.json)",
        ]
    );
    assert_one_line_with_fix(&c);
    let g = c.get("ct_greet").unwrap();
    assert_eq!(g.source, p.path(".clawd/tools/greet/tool.json"));
    assert_eq!(g.requests.timeout, Some(Duration::from_secs(30)));
    assert_eq!(g.needs_read, vec![p.path(".clawd/tools/greet")]);
    match &g.kind {
        ToolKind::Clawd {
            interpreter,
            entrypoint,
        } => {
            assert_eq!(interpreter.as_deref(), Some("bash"));
            assert_eq!(entrypoint, &p.path(".clawd/tools/greet/greet.sh"));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        &c.get("ct_raw").unwrap().kind,
        ToolKind::Clawd {
            interpreter: None,
            ..
        }
    ));
}

#[test]
fn bad_tool_json_never_hides_the_others() {
    let p = Proj::new();
    p.write(
        ".clawd/tools/a/tool.json",
        r#"{"name":"a","description":"A","entrypoint":"a.sh"}"#,
    );
    p.write(".clawd/tools/a/a.sh", "");
    p.write(".clawd/tools/b/tool.json", "{\"name\": \"b\", \"descr");
    p.write(".clawd/tools/c/tool.json", b"\xff\xfe".as_slice());
    p.write(
        ".clawd/tools/d/tool.json",
        r#"{"name":"d","description":"D","entrypoint":"d.sh","timeout":9999}"#,
    );
    let c = p.discover();
    assert_eq!(names(&c), vec!["ct_a"]);
    let errs: Vec<_> = c
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .map(|d| d.file.strip_prefix(p.root()).unwrap().display().to_string())
        .collect();
    assert_eq!(
        errs,
        vec![
            ".clawd/tools/b/tool.json",
            ".clawd/tools/c/tool.json",
            ".clawd/tools/d/tool.json"
        ]
    );
    assert_one_line_with_fix(&c);
}

#[test]
fn parameters_written_as_a_json_schema_are_read_with_a_warning() {
    let (t, d) = parse(with(
        "parameters",
        json!({"type": "object",
               "properties": {"who": {"type": "string"}, "n": {"type": "integer"}},
               "required": ["who"]}),
    ));
    let t = t.expect("loaded");
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(d[0].contains("written as a JSON Schema"), "{}", d[0]);
    assert!(d[0].contains("fix:"), "{}", d[0]);
    let mut got: Vec<_> = t
        .params
        .iter()
        .map(|p| (p.name.as_str(), p.required))
        .collect();
    got.sort();
    assert_eq!(got, [("n", false), ("who", true)]);

    // A top-level "required" still counts, and must name a property.
    let mut v = with(
        "parameters",
        json!({"type": "object", "properties": {"a": {"type": "string"}}}),
    );
    v["required"] = json!(["a"]);
    assert!(parse(v.clone()).0.unwrap().params[0].required);
    v["required"] = json!(["b"]);
    assert!(parse(v).0.is_none());

    // A parameter that happens to be called "type" is not mistaken for a schema.
    let (t, d) = parse(with("parameters", json!({"type": {"type": "string"}})));
    assert!(d.is_empty(), "{d:?}");
    assert_eq!(t.unwrap().params[0].name, "type");
}

#[test]
fn a_reference_outside_the_schema_skips_the_tool_naming_the_line() {
    // Pretty-printed with sorted keys: "parameters" at line 5, the $ref at 7.
    let e = error_of(with(
        "parameters",
        json!({"u": {"$ref": "http://127.0.0.1:9/x.json"}}),
    ));
    assert_eq!(
        e,
        "tool.json:7: tool 'ct_check-deps': its input schema has \"$ref\": \
         \"http://127.0.0.1:9/x.json\", which is not local to the schema (toolcage never \
         fetches schemas or reads files for them); tool skipped (fix: inline the definition \
         under definitions/$defs and use a local #/ reference)"
    );
    for bad in [
        json!({"type": "object", "properties": {"u": {"$ref": "file:///etc/passwd"}}}),
        json!({"type": "object", "properties": {}, "definitions": {"a": {"$ref": "a.json"}}}),
        json!({"type": "object", "properties": {}, "$schema": "https://e.x/meta"}),
        json!({"u": {"type": "array", "items": {"$ref": "https://e.x/i.json"}}}),
        // Parameters named like data keywords.
        json!({"default": {"$ref": "http://e.x/d.json"}}),
        json!({"type": "object", "properties": {"enum": {"$ref": "http://e.x/e.json"}}}),
    ] {
        let e = error_of(with("parameters", bad.clone()));
        assert!(e.contains("not local to the schema"), "{bad}: {e}");
    }
}

#[test]
fn local_references_and_their_definitions_are_kept() {
    let (t, d) = parse(with(
        "parameters",
        json!({"type": "object",
               "properties": {"color": {"$ref": "#/definitions/color"}},
               "required": ["color"],
               "definitions": {"color": {"type": "string", "enum": ["red", "green"]}}}),
    ));
    let t = t.expect("loaded");
    // Only the "written as a JSON Schema" warning; no "no type" warning for
    // a parameter that is a reference.
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(t.params[0].kind, "");
    assert!(t.params[0].required);
    assert_eq!(
        t.defs["definitions"]["color"]["enum"],
        json!(["red", "green"])
    );
}
