//! The call engine end to end with hand-built tool specs (no discovery):
//! per-format encoding, validation, result formatting, exit kinds, and the
//! sandbox around each call.

use crate::common;

use common::Project;
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use toolcage::call::{CallError, Engine};
use toolcage::discover::{Catalog, Coerce, CrabParam, Options, ToolKind, ToolSpec};
use toolcage::policy::Requests;
use toolcage::policy::{Overrides, Sources};
use toolcage::spec::Format;

fn spec(name: &str, format: Format, source: &Path, schema: Value, runner: ToolKind) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        format,
        source: source.to_path_buf(),
        line: Some(1),
        description: format!("{name} test tool"),
        input_schema: schema,
        requests: Requests::default(),
        kind: runner,
        needs_read: vec![source.parent().unwrap().to_path_buf()],
    }
}

fn octomind(p: &Project, name: &str, body: &str, schema: Value) -> ToolSpec {
    let path = p.write(&format!(".agents/tools/{name}"), body);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    spec(
        name,
        Format::Octomind,
        &path,
        schema,
        ToolKind::Octomind {
            program: path.clone(),
        },
    )
}

fn crab_param(name: &str, kind: &str) -> CrabParam {
    CrabParam {
        name: name.into(),
        kind: kind.into(),
        required: false,
        default: None,
        coerce_empty_to: Coerce::Keep,
        coerce_null_to: Coerce::Keep,
    }
}

fn crab(p: &Project, name: &str, command: &str, params: Vec<CrabParam>) -> ToolSpec {
    let path = p.write("tools.toml", "# written by the test; not parsed\n");
    let props: serde_json::Map<String, Value> = params
        .iter()
        .map(|q| (q.name.clone(), json!({"type": q.kind})))
        .collect();
    let required: Vec<&str> = params
        .iter()
        .filter(|q| q.required)
        .map(|q| q.name.as_str())
        .collect();
    spec(
        name,
        Format::Opencrabs,
        &path,
        json!({"type": "object", "properties": props, "required": required}),
        ToolKind::OpencrabsShell {
            command: command.into(),
            params,
        },
    )
}

fn engine_with(
    p: &Project,
    policy: Option<&str>,
    overrides: Overrides,
    tools: Vec<ToolSpec>,
) -> Engine {
    let sources = Sources {
        profile: None,
        policy_file: policy.map(|text| p.write("policy.toml", text)),
    };
    Engine::with_catalog(
        &p.dir,
        &sources,
        overrides,
        Options::default(),
        Catalog {
            tools,
            ..Default::default()
        },
    )
    .unwrap()
}

fn engine(p: &Project, tools: Vec<ToolSpec>) -> Engine {
    engine_with(p, None, Overrides::default(), tools)
}

fn invalid(e: CallError) -> String {
    match e {
        CallError::InvalidArguments { message, .. } => message,
        other => panic!("expected invalid arguments, got {other:?}"),
    }
}

const ENV_DUMP: &str =
    "#!/bin/sh\nenv | grep '^OCTOMIND_' | sort\necho \"cwd=$(pwd)\"\necho \"stdin=$(cat)\"\n";

#[test]
fn octomind_env_encodes_each_json_type() {
    let p = Project::new("call-octo-env");
    let t = octomind(&p, "dump", ENV_DUMP, json!({"type": "object"}));
    let e = engine(&p, vec![t]);
    let args = json!({
        "s": "two words $(touch pwned)", "n": 3, "f": 1.5, "b": true,
        "a": [1, "x"], "o": {"k": "v"}, "nul": null, "bad-name": "stdin only"
    });
    let r = e.call("dump", args.clone(), None).unwrap();
    assert!(!r.is_error, "{}", r.text);
    let lines: Vec<&str> = r.text.lines().collect();
    for want in [
        "OCTOMIND_PARAM_S=two words $(touch pwned)",
        "OCTOMIND_PARAM_N=3",
        "OCTOMIND_PARAM_F=1.5",
        "OCTOMIND_PARAM_B=true",
        "OCTOMIND_PARAM_A=[1,\"x\"]",
        "OCTOMIND_PARAM_O={\"k\":\"v\"}",
        "OCTOMIND_TOOL_NAME=dump",
    ] {
        assert!(lines.contains(&want), "missing {want}: {}", r.text);
    }
    let root = p.dir.display().to_string();
    assert!(
        lines.contains(&format!("OCTOMIND_WORKDIR={root}").as_str()),
        "{}",
        r.text
    );
    assert!(
        lines.contains(&format!("cwd={root}").as_str()),
        "{}",
        r.text
    );
    assert!(!r.text.contains("OCTOMIND_PARAM_NUL"), "{}", r.text);
    assert!(!r.text.contains("BAD"), "{}", r.text);
    let stdin = lines.iter().find_map(|l| l.strip_prefix("stdin=")).unwrap();
    assert_eq!(serde_json::from_str::<Value>(stdin).unwrap(), args);
    assert!(!p.path("pwned").exists());
}

#[test]
fn clawd_gets_json_on_stdin_through_its_interpreter() {
    let p = Project::new("call-clawd");
    let path = p.write(".clawd/tools/echo/run.sh", "echo \"got $(cat)\"\n");
    let t = spec(
        "ct_echo",
        Format::Clawd,
        &path,
        json!({"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}),
        ToolKind::Clawd {
            interpreter: Some("sh".into()),
            entrypoint: path.clone(),
        },
    );
    let e = engine(&p, vec![t]);
    let r = e.call("ct_echo", json!({"x": "hi"}), None).unwrap();
    assert_eq!(r.text, "got {\"x\":\"hi\"}\n");
    assert!(!r.is_error);
    let msg = invalid(e.call("ct_echo", json!({}), None).unwrap_err());
    assert!(msg.contains("missing required parameter 'x'"), "{msg}");
}

#[test]
fn opencrabs_template_values_cannot_inject() {
    let p = Project::new("call-crab-inject");
    let t = crab(
        &p,
        "say",
        "printf '%s\\n' {{msg}}{{#extra}} {{extra}}{{/extra}}",
        vec![crab_param("msg", "string"), crab_param("extra", "string")],
    );
    let e = engine(&p, vec![t]);
    for attack in [
        "$(touch pwned)",
        "`touch pwned`",
        "'; touch pwned; echo '",
        "\"; touch pwned; echo \"",
        "a\ntouch pwned",
        "x; touch pwned",
        "$(touch pwned)'\\''",
        "|| touch pwned &",
    ] {
        let r = e.call("say", json!({"msg": attack}), None).unwrap();
        assert!(!r.is_error, "{attack}: {}", r.text);
        assert_eq!(r.text, format!("{attack}\n"), "{attack}");
        assert!(!p.path("pwned").exists(), "{attack}");
    }
    let r = e
        .call("say", json!({"msg": "a", "extra": "$(touch pwned)"}), None)
        .unwrap();
    assert_eq!(r.text, "a\n$(touch pwned)\n");
    assert!(!p.path("pwned").exists());
    // The section is dropped for an empty value.
    let r = e
        .call("say", json!({"msg": "a", "extra": ""}), None)
        .unwrap();
    assert_eq!(r.text, "a\n");
}

#[test]
fn opencrabs_params_file_is_private_during_the_call_and_gone_after() {
    let p = Project::new("call-crab-file");
    let t = crab(
        &p,
        "pf",
        "echo \"$OPENCRABS_PARAMS\"; stat -c %a \"$OPENCRABS_PARAMS\"; cat \"$OPENCRABS_PARAMS\"",
        vec![crab_param("q", "string")],
    );
    let e = engine(&p, vec![t]);
    let r = e.call("pf", json!({"q": "v"}), None).unwrap();
    assert!(!r.is_error, "{}", r.text);
    let lines: Vec<&str> = r.text.lines().collect();
    assert_eq!(lines[1], "600", "{}", r.text);
    assert_eq!(lines[2], "{\"q\":\"v\"}");
    let path = PathBuf::from(lines[0]);
    assert!(path.is_absolute());
    assert!(!path.exists(), "{} still exists", path.display());
    // Removed on a failed run too.
    let t = crab(&p, "pf2", "echo \"$OPENCRABS_PARAMS\"; exit 4", vec![]);
    let e = engine(&p, vec![t]);
    let r = e.call("pf2", json!({}), None).unwrap();
    assert!(r.is_error);
    let path = PathBuf::from(r.text.lines().nth(1).unwrap());
    assert!(!path.exists());
}

#[test]
fn opencrabs_defaults_and_coercions() {
    let p = Project::new("call-crab-coerce");
    let mut limit = crab_param("limit", "integer");
    limit.default = Some(json!(50));
    let mut q = crab_param("q", "string");
    q.coerce_empty_to = Coerce::Omit;
    let mut r = crab_param("r", "string");
    r.coerce_empty_to = Coerce::Null;
    let mut must = crab_param("must", "string");
    must.coerce_empty_to = Coerce::Error;
    must.coerce_null_to = Coerce::Error;
    let t = crab(
        &p,
        "co",
        "cat \"$OPENCRABS_PARAMS\"",
        vec![limit, q, r, must],
    );
    let e = engine(&p, vec![t]);
    let out = e
        .call("co", json!({"q": "", "r": "", "must": "x"}), None)
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&out.text).unwrap(),
        json!({"limit": 50, "r": null, "must": "x"})
    );
    let msg = invalid(e.prepare("co", json!({"must": ""})).unwrap_err());
    assert!(msg.contains("'must'") && msg.contains("empty"), "{msg}");
    let msg = invalid(e.prepare("co", json!({"must": null})).unwrap_err());
    assert!(msg.contains("'must'") && msg.contains("null"), "{msg}");
}

#[test]
fn validation_names_the_parameter_and_what_was_expected() {
    let p = Project::new("call-validate");
    let schema = json!({
        "type": "object",
        "properties": {"count": {"type": "integer"}, "name": {"type": "string"},
                       "mode": {"type": "string", "enum": ["a", "b"]}},
        "required": ["name"],
        "additionalProperties": false
    });
    let t = octomind(&p, "v", "#!/bin/sh\necho ok\n", schema);
    let e = engine(&p, vec![t]);
    let msg = invalid(e.prepare("v", json!({"count": "x"})).unwrap_err());
    assert!(
        msg.contains("missing required parameter 'name' (string)"),
        "{msg}"
    );
    assert!(
        msg.contains("parameter 'count'") && msg.contains("integer"),
        "{msg}"
    );
    assert!(!msg.contains('\n'), "{msg}");
    let msg = invalid(
        e.prepare("v", json!({"name": "n", "mode": "c"}))
            .unwrap_err(),
    );
    assert!(msg.contains("parameter 'mode'"), "{msg}");
    let msg = invalid(e.prepare("v", json!({"name": "n", "nope": 1})).unwrap_err());
    assert!(
        msg.contains("unknown parameter 'nope'") && msg.contains("count"),
        "{msg}"
    );
    let msg = invalid(e.prepare("v", json!([1])).unwrap_err());
    assert!(msg.contains("must be a JSON object"), "{msg}");
    // null means no arguments.
    let msg = invalid(e.prepare("v", Value::Null).unwrap_err());
    assert!(msg.contains("'name'"), "{msg}");
    assert!(e.prepare("v", json!({"name": "n"})).is_ok());
    match e.prepare("nope", json!({})).unwrap_err() {
        CallError::UnknownTool { name, known, .. } => {
            assert_eq!(name, "nope");
            assert_eq!(known, vec!["v".to_string()]);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_http_tool_without_network_is_refused_and_a_script_is_prepared() {
    let p = Project::new("call-unsupported");
    let src = p.write("tools.toml", "");
    let http = spec(
        "h",
        Format::Opencrabs,
        &src,
        json!({"type": "object"}),
        ToolKind::OpencrabsHttp {
            method: "GET".into(),
            url: "https://example.com".into(),
            headers: vec![],
            params: vec![],
        },
    );
    let md = p.write("tools/s.md", "");
    let script = spec(
        "s",
        Format::Agentdir,
        &md,
        json!({"type": "object"}),
        ToolKind::AgentdirScript {
            path: md.clone(),
            allowed_tools: vec![],
            timeout: None,
            max_tool_calls: None,
            max_output_bytes: None,
        },
    );
    let e = engine(&p, vec![http, script]);
    // An http tool runs in toolcage itself; with no network it is denied
    // before anything is sent.
    let call = e.prepare("h", json!({})).unwrap();
    match e.execute(&call, None).unwrap_err() {
        CallError::Denied(d) => assert!(
            d.message.contains("its grant has no network"),
            "{}",
            d.message
        ),
        other => panic!("{other:?}"),
    }
    // A script tool is no longer refused: it runs in the script runner
    // (tests/cli/script.rs runs it).
    let call = e.prepare("s", json!({})).unwrap();
    assert!(call.runs.starts_with("script "), "{}", call.runs);
}

#[test]
fn failures_are_results_that_say_how_they_failed() {
    let p = Project::new("call-failures");
    let tools = vec![
        octomind(
            &p,
            "three",
            "#!/bin/sh\necho partial\necho oops >&2\nexit 3\n",
            json!({"type": "object"}),
        ),
        octomind(
            &p,
            "killed",
            "#!/bin/sh\nkill -9 $$\n",
            json!({"type": "object"}),
        ),
        octomind(
            &p,
            "slow",
            "#!/bin/sh\nsleep 10\n",
            json!({"type": "object"}),
        ),
        octomind(
            &p,
            "flood",
            "#!/bin/sh\nhead -c 5000 /dev/zero | tr '\\0' a\n",
            json!({"type": "object"}),
        ),
    ];
    let e = engine_with(
        &p,
        Some("[limits]\ntimeout = \"300ms\"\nstdout = \"1KiB\"\n"),
        Overrides::default(),
        tools,
    );
    let r = e.call("three", json!({}), None).unwrap();
    assert!(r.is_error);
    assert_eq!(
        r.text,
        "tool exited with status 3\npartial\n[stderr]\noops\n"
    );
    let r = e.call("killed", json!({}), None).unwrap();
    assert!(r.is_error);
    assert!(r.text.starts_with("killed by signal 9"), "{}", r.text);
    let r = e.call("slow", json!({}), None).unwrap();
    assert!(r.is_error);
    assert!(r.text.starts_with("timed out after 300ms"), "{}", r.text);
    assert_eq!(r.outcome.exit, toolcage::sandbox::Exit::Timeout);
    let r = e.call("flood", json!({}), None).unwrap();
    assert!(!r.is_error);
    assert!(
        r.text.ends_with("[OUTPUT TRUNCATED: 3976 bytes omitted]\n"),
        "{}",
        &r.text[1000..]
    );
}

#[test]
fn a_tool_cannot_rewrite_its_own_file() {
    let p = Project::new("call-protected");
    let body = "#!/bin/sh\n{ echo hacked >> \"$0\"; } 2>/dev/null && echo WROTE || echo REFUSED\n";
    let t = octomind(&p, "selfmod", body, json!({"type": "object"}));
    let path = t.source.clone();
    let e = engine(&p, vec![t]);
    let r = e.call("selfmod", json!({}), None).unwrap();
    assert_eq!(r.text.trim(), "REFUSED");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), body);
    // Control: the same tool may write elsewhere in the project.
    let t = octomind(
        &p,
        "writer",
        "#!/bin/sh\necho x > out.txt && echo WROTE\n",
        json!({"type": "object"}),
    );
    let e = engine(&p, vec![t]);
    assert_eq!(
        e.call("writer", json!({}), None).unwrap().text.trim(),
        "WROTE"
    );
    assert!(p.path("out.txt").exists());
}

#[test]
fn no_network_unless_granted() {
    let p = Project::new("call-net");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let body = format!(
        "#!/usr/bin/python3\nimport socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2); print('CONNECTED')\nexcept OSError as e:\n    print('DENIED')\n"
    );
    let t = octomind(&p, "net", &body, json!({"type": "object"}));
    let e = engine(&p, vec![t.clone()]);
    assert_eq!(
        e.call("net", json!({}), None).unwrap().text.trim(),
        "DENIED"
    );
    // A tool's own request is not a grant.
    let mut asks = t.clone();
    asks.requests.network = Some(true);
    let e = engine(&p, vec![asks.clone()]);
    assert_eq!(
        e.call("net", json!({}), None).unwrap().text.trim(),
        "DENIED"
    );
    // Control: the operator grants it.
    let e = engine_with(
        &p,
        None,
        Overrides {
            allow_net: true,
            ..Default::default()
        },
        vec![t],
    );
    assert_eq!(
        e.call("net", json!({}), None).unwrap().text.trim(),
        "CONNECTED"
    );
    let e = engine_with(
        &p,
        Some("[requests]\nnetwork = true\n"),
        Overrides::default(),
        vec![asks],
    );
    assert_eq!(
        e.call("net", json!({}), None).unwrap().text.trim(),
        "CONNECTED"
    );
}
