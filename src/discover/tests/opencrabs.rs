//! OpenCrabs `tools.toml` (seed: opencrabs-dynamic-tools.md).

use super::{Proj, assert_one_line_with_fix, names, rendered};
use crate::discover::opencrabs::{convert_default, parse_coerce, parse_tools_toml};
use crate::discover::{Coerce, CrabParam, Diagnostic, Options, Severity, ToolKind, ToolSpec};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

fn parse(text: &str) -> (Vec<ToolSpec>, Vec<String>) {
    let (t, d) = parse_tools_toml(text, Path::new("tools.toml"));
    (t, d.iter().map(Diagnostic::to_string).collect())
}

fn crab_params(t: &ToolSpec) -> &[CrabParam] {
    match &t.kind {
        ToolKind::OpencrabsShell { params, .. } | ToolKind::OpencrabsHttp { params, .. } => params,
        other => panic!("{other:?}"),
    }
}

const SEED_SHELL: &str = r#"
[[tools]]
name = "send_notification"
description = "Send a notification via the notification service"
executor = "shell"
enabled = true
requires_approval = true
timeout_secs = 30
command = "/usr/local/bin/notify-send --params-file \"$OPENCRABS_PARAMS\""

[[tools.params]]
name = "channel"
type = "string"
description = "Notification channel: email, slack, or push"
required = true

[[tools.params]]
name = "priority"
type = "string"
description = "Priority level: low, normal, high"
required = false
default = "normal"

[tools.rate_limit]
requests = "10"
window = "1m"

[[tools]]
name = "check_api_health"
description = "Check if the production API is responding"
executor = "http"
enabled = true
method = "GET"
url = "https://api.example.com/health"

[[tools.params]]
name = "api_key"
type = "string"

[tools.headers]
Authorization = "Bearer {{api_key}}"
"#;

#[test]
fn seed_shell_and_http_tools() {
    let (tools, d) = parse(SEED_SHELL);
    assert!(d.is_empty(), "{d:?}");
    let s = &tools[0];
    assert_eq!(s.name, "send_notification");
    assert_eq!(s.line, Some(2));
    assert_eq!(s.requests.requires_approval, Some(true));
    assert_eq!(s.requests.timeout, Some(Duration::from_secs(30)));
    assert_eq!(s.requests.network, None);
    let rl = s.requests.rate_limit.unwrap();
    assert_eq!((rl.requests, rl.window), (10, Duration::from_secs(60)));
    assert_eq!(
        s.input_schema,
        json!({"type":"object","properties":{
            "channel":{"type":"string","description":"Notification channel: email, slack, or push"},
            "priority":{"type":"string","description":"Priority level: low, normal, high","default":"normal"}},
          "required":["channel"],"additionalProperties":false})
    );
    let h = &tools[1];
    assert_eq!(h.line, Some(28));
    assert_eq!(h.requests.network, Some(true));
    assert_eq!(
        h.requests.domains,
        Some(vec!["api.example.com:443".to_string()]),
        "an http tool asks for its url's host only"
    );
    match &h.kind {
        ToolKind::OpencrabsHttp {
            method,
            url,
            headers,
            ..
        } => {
            assert_eq!(method, "GET");
            assert_eq!(url, "https://api.example.com/health");
            assert_eq!(
                headers,
                &vec![("Authorization".into(), "Bearer {{api_key}}".into())]
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn http_tools_have_a_fixed_host_and_fixed_header_names() {
    let tool = |url: &str, header: &str| {
        format!(
            "[[tools]]\nname = \"h\"\ndescription = \"d\"\nexecutor = \"http\"\nmethod = \"GET\"\nurl = \"{url}\"\n[[tools.params]]\nname = \"p\"\n[tools.headers]\n\"{header}\" = \"{{{{p}}}}\"\n"
        )
    };
    let (t, d) = parse(&tool("http://api.test:8080/x/{{p}}", "X-Key"));
    assert!(d.is_empty(), "{d:?}");
    assert_eq!(
        t[0].requests.domains,
        Some(vec!["api.test:8080".to_string()])
    );
    for (url, header, want) in [
        (
            "https://{{p}}.example.com/",
            "X-Key",
            "url: a {{param}} in the url's host",
        ),
        (
            "https://user@api.test/",
            "X-Key",
            "url: user information in the url",
        ),
        (
            "https://api.test/",
            "X-{{p}}",
            "headers.X-{{p}}: not a header name",
        ),
        (
            "https://api.test/",
            "Bad Header",
            "headers.Bad Header: not a header name",
        ),
    ] {
        let (t, d) = parse(&tool(url, header));
        assert!(t.is_empty(), "{url} {header}");
        assert!(d.iter().any(|m| m.contains(want)), "{want}: {d:?}");
    }
}

#[test]
fn syntax_error_is_one_error_with_its_line_and_loses_only_that_file() {
    let (t, d) = parse("[[tools]]\nname = \"a\"\ndescription = \n");
    assert!(t.is_empty());
    assert_eq!(d.len(), 1);
    assert!(
        d[0].starts_with("tools.toml:3: TOML syntax error: "),
        "{d:?}"
    );
    assert!(d[0].ends_with("; no tools loaded from this file (fix: fix the TOML syntax)"));
    assert!(!d[0].contains('\n'));
}

#[test]
fn a_syntax_error_loses_only_its_own_entry() {
    let text = format!(
        "# tools\n{}\n[[tools]]\nname = \"b\ndescription = \"unterminated\"\n\n{}",
        tool("").replace("\"t\"", "\"a\""),
        tool("[tools.rate_limit]\nrequests = 2\nwindow = \"1m\"\n").replace("\"t\"", "\"c\"")
    );
    let (t, d) = parse(&text);
    let names: Vec<&str> = t.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["a", "c"], "{d:?}");
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(
        d[0].starts_with("tools.toml:9: TOML syntax error: ")
            && d[0].contains("the [[tools]] entry at line 8 is skipped"),
        "{d:?}"
    );
    // The entry after the broken one keeps its place and its subtable.
    assert!(t[1].requests.rate_limit.is_some(), "{:?}", t[1].requests);
    // A bad key in a later entry is named by its index in the file.
    let text = format!(
        "{}\n[[tools]]\nname = \"b\n{}",
        tool(""),
        tool("bogus = 1\n")
    );
    let (_, d) = parse(&text);
    assert!(
        d.iter().any(|m| m.contains("tools[2] ('t').bogus")),
        "{d:?}"
    );
}

fn tool(extra: &str) -> String {
    format!(
        "[[tools]]\nname = \"t\"\ndescription = \"D\"\nexecutor = \"shell\"\ncommand = \"true\"\n{extra}"
    )
}

fn one_error(text: &str) -> String {
    let (t, d) = parse(text);
    assert!(t.is_empty(), "loaded: {d:?}");
    let errs: Vec<&String> = d.iter().filter(|m| m.contains("tool skipped")).collect();
    assert_eq!(errs.len(), 1, "{d:?}");
    errs[0].clone()
}

#[test]
fn enabled_flag_and_disabled_tools() {
    let (t, d) = parse(&tool("enabled = false\n"));
    assert!(t.is_empty());
    assert_eq!(
        d,
        vec![
            "tools.toml:1: tool 't' is disabled; not listed (fix: set `enabled = true` to list it)"
        ]
    );
    assert_eq!(parse(&tool("enabled = true\n")).0.len(), 1);
    assert_eq!(parse(&tool("")).0.len(), 1);
    assert!(
        one_error(&tool("enabled = \"yes\"\n"))
            .contains("tools[0] ('t').enabled: must be true or false, got string")
    );
    // A disabled tool is still validated.
    assert!(one_error(&tool("enabled = false\ntimeout_secs = 0\n")).contains("timeout_secs"));
}

#[test]
fn timeout_secs_bounds() {
    let (t, _) = parse(&tool("timeout_secs = 3600\n"));
    assert_eq!(t[0].requests.timeout, Some(Duration::from_secs(3600)));
    for bad in ["0", "3601", "-5", "\"30\"", "1.5"] {
        let m = one_error(&tool(&format!("timeout_secs = {bad}\n")));
        assert!(m.contains("timeout_secs: "), "{bad}: {m}");
        assert!(
            m.ends_with("(fix: use an integer number of seconds from 1 to 3600)"),
            "{m}"
        );
    }
}

#[test]
fn name_description_executor_rules() {
    let m = one_error(
        "[[tools]]\nname = \"a.b\"\ndescription = \"D\"\nexecutor = \"shell\"\ncommand = \"x\"\n",
    );
    assert_eq!(
        m,
        "tools.toml:1: tools[0].name: 'a.b' must match [A-Za-z0-9_-]{1,64}; tool skipped (fix: rename the tool)"
    );
    let long = "n".repeat(65);
    assert!(one_error(&format!("[[tools]]\nname = \"{long}\"\ndescription = \"D\"\nexecutor = \"shell\"\ncommand = \"x\"\n")).contains("must match"));
    assert!(
        one_error("[[tools]]\ndescription = \"D\"\nexecutor = \"shell\"\ncommand = \"x\"\n")
            .contains("tools[0].name: missing")
    );
    assert!(
        one_error(
            "[[tools]]\nname = \"t\"\ndescription = \" \"\nexecutor = \"shell\"\ncommand = \"x\"\n"
        )
        .contains("description: is empty")
    );
    assert!(
        one_error("[[tools]]\nname = \"t\"\ndescription = \"D\"\nexecutor = \"python\"\n")
            .contains("unknown executor 'python'")
    );
    assert!(
        one_error("[[tools]]\nname = \"t\"\ndescription = \"D\"\nexecutor = \"shell\"\n")
            .contains("command: missing")
    );
    let http = "[[tools]]\nname = \"h\"\ndescription = \"D\"\nexecutor = \"http\"\n";
    assert!(
        one_error(&format!("{http}method = \"FETCH\"\nurl = \"https://x\"\n"))
            .contains("unsupported method 'FETCH'")
    );
    assert!(
        one_error(&format!("{http}method = \"GET\"\nurl = \"ftp://x\"\n"))
            .contains("must start with http:// or https://")
    );
    assert!(one_error(&format!("{http}url = \"https://x\"\n")).contains("method: missing"));
    assert!(
        one_error(&format!(
            "{http}method = \"get\"\nurl = \"https://x/{{{{q}}}}\"\n"
        ))
        .contains("undeclared param 'q'")
    );
}

#[test]
fn unknown_keys_are_warnings() {
    let (t, d) = parse(&format!(
        "{}\nicon = \"x\"\n[[tools.params]]\nname = \"p\"\nfoo = 1\n",
        tool("")
    ));
    assert_eq!(t.len(), 1);
    assert_eq!(
        d,
        vec![
            "tools.toml:1: tools[0] ('t').icon: unknown key ignored (fix: remove it)",
            "tools.toml:1: tools[0] ('t').params[0].foo: unknown key ignored (fix: remove it)",
        ]
    );
    let (_, d) = parse("version = 1\n");
    assert_eq!(
        d,
        vec![
            "tools.toml: unknown top-level key 'version' ignored (fix: remove it; tools are declared with [[tools]])"
        ]
    );
}

#[test]
fn params_types_defaults_and_coercions() {
    let text = format!(
        "{}{}",
        tool(""),
        r#"
[[tools.params]]
name = "limit"
type = "integer"
default = "50"
[[tools.params]]
name = "query"
required = false
default = "null"
coerce_empty_to = "null"
coerce_null_to = "omit"
[[tools.params]]
name = "source"
type = "string"
default = ""
coerce_empty_to = "error"
"#
    );
    let (t, d) = parse(&text);
    assert!(d.is_empty(), "{d:?}");
    let ps = crab_params(&t[0]);
    assert_eq!(ps[0].default, Some(json!(50)));
    assert_eq!(ps[1].kind, "string");
    assert_eq!(ps[1].default, Some(Value::Null));
    assert_eq!(
        (ps[1].coerce_empty_to, ps[1].coerce_null_to),
        (Coerce::Null, Coerce::Omit)
    );
    assert_eq!(ps[2].coerce_empty_to, Coerce::Error);
    assert_eq!(ps[2].coerce_null_to, Coerce::Keep);
    // The coercions at call time: `call::validate` tests them.
    for (s, c) in [
        ("keep", Coerce::Keep),
        ("omit", Coerce::Omit),
        ("null", Coerce::Null),
        ("error", Coerce::Error),
    ] {
        assert_eq!(parse_coerce(s), Some(c));
    }
    assert_eq!(parse_coerce("drop"), None);
    assert!(
        one_error(&format!(
            "{}[[tools.params]]\nname = \"q\"\ncoerce_null_to = \"drop\"\n",
            tool("")
        ))
        .contains("must be \"keep\", \"omit\", \"null\" or \"error\"")
    );
}

#[test]
fn default_conversion_by_type() {
    let s = |x: &str| toml::Value::String(x.into());
    assert_eq!(convert_default("integer", &s("50")), Ok(json!(50)));
    assert_eq!(convert_default("number", &s("1.5")), Ok(json!(1.5)));
    assert_eq!(convert_default("boolean", &s("true")), Ok(json!(true)));
    assert_eq!(convert_default("array", &s("[1]")), Ok(json!([1])));
    assert_eq!(convert_default("object", &s("{}")), Ok(json!({})));
    assert_eq!(convert_default("integer", &s("null")), Ok(Value::Null));
    assert_eq!(
        convert_default("integer", &toml::Value::Integer(7)),
        Ok(json!(7))
    );
    assert_eq!(
        convert_default("integer", &s("x")),
        Err("\"x\" is not a valid integer".into())
    );
    assert!(convert_default("boolean", &toml::Value::Integer(1)).is_err());
    assert!(convert_default("array", &s("{}")).is_err());
}

#[test]
fn param_errors_lose_only_their_tool() {
    for (p, want) in [
        ("name = \"1x\"", "params[0].name: \"1x\" must match"),
        ("type = \"date\"\nname = \"x\"", "unsupported type \"date\""),
        (
            "name = \"x\"\nrequired = \"yes\"",
            "required: must be true or false",
        ),
        (
            "name = \"x\"\ntype = \"integer\"\ndefault = \"many\"",
            "\"many\" is not a valid integer",
        ),
        ("description = \"no name\"", "params[0].name: missing"),
    ] {
        let text = format!(
            "{}[[tools.params]]\n{p}\n{}",
            tool(""),
            tool("").replace("\"t\"", "\"u\"")
        );
        let (t, d) = parse(&text);
        assert_eq!(t.len(), 1, "{p}: {d:?}");
        assert_eq!(t[0].name, "u");
        assert!(d.iter().any(|m| m.contains(want)), "{p}: {d:?}");
    }
    let dup = format!(
        "{}[[tools.params]]\nname = \"x\"\n[[tools.params]]\nname = \"x\"\n",
        tool("")
    );
    assert!(one_error(&dup).contains("duplicate param 'x'"));
}

#[test]
fn rate_limit_forms() {
    let ok = |r: &str| {
        parse(&tool(&format!("[tools.rate_limit]\n{r}\n"))).0[0]
            .requests
            .rate_limit
            .unwrap()
    };
    assert_eq!(
        ok("requests = 5\nwindow = 30").window,
        Duration::from_secs(30)
    );
    assert_eq!(ok("requests = \"2\"\nwindow = \"1h\"").requests, 2);
    assert!(
        one_error(&tool(
            "[tools.rate_limit]\nrequests = \"0\"\nwindow = \"1m\"\n"
        ))
        .contains("rate_limit.requests: missing or not a positive integer")
    );
    assert!(
        one_error(&tool(
            "[tools.rate_limit]\nrequests = 1\nwindow = \"soon\"\n"
        ))
        .contains("rate_limit.window: missing or not a positive duration")
    );
}

#[test]
fn shell_templates_checked_at_load_time() {
    let bad = tool("").replace("command = \"true\"", "command = \"echo `echo {{x}}`\"");
    let m = one_error(&format!("{bad}[[tools.params]]\nname = \"x\"\n"));
    assert!(m.contains("inside backticks"), "{m}");
    let m = one_error(&tool("").replace("command = \"true\"", "command = \"echo {{y}}\""));
    assert!(m.contains("undeclared param 'y'"), "{m}");
    let m = one_error(&tool("").replace("command = \"true\"", "command = \"echo {{#y}}\""));
    assert!(m.contains("never closed"), "{m}");
}

#[test]
fn scan_project_file_and_tools_toml_option() {
    let p = Proj::new();
    p.write("tools.toml", tool(""));
    p.write("elsewhere/extra.toml", tool("").replace("\"t\"", "\"x\""));
    let c = p.discover();
    assert_eq!(names(&c), vec!["t"]);
    let c = p.discover_with(&Options {
        tools_toml: Some(p.path("elsewhere/extra.toml")),
    });
    assert_eq!(names(&c), vec!["t", "x"]);
    // The same file twice is read once.
    let c = p.discover_with(&Options {
        tools_toml: Some(p.path("tools.toml")),
    });
    assert_eq!(names(&c), vec!["t"]);
    assert!(c.diagnostics.is_empty());
    let c = p.discover_with(&Options {
        tools_toml: Some(p.path("missing.toml")),
    });
    assert_eq!(
        rendered(&c, p.root()),
        vec![
            "error missing.toml: --tools-toml: no such file (or a dangling symlink) (fix: pass an existing tools.toml)"
        ]
    );
    assert_one_line_with_fix(&c);
    let c = p.discover_with(&Options {
        tools_toml: Some(p.path("elsewhere")),
    });
    assert_eq!(
        rendered(&c, p.root()),
        vec![
            "error elsewhere: --tools-toml: is a directory, not a file (fix: pass an existing tools.toml)"
        ]
    );
}

#[test]
fn bad_tools_toml_never_hides_other_formats() {
    let p = Proj::new();
    p.write("tools.toml", b"[[tools]\n\xff".as_slice());
    p.exec(".agents/tools/ok", "#!/bin/sh\n# @description OK\n");
    let c = p.discover();
    assert_eq!(names(&c), vec!["ok"]);
    assert_eq!(
        rendered(&c, p.root()),
        vec!["error tools.toml:2: not valid UTF-8 (fix: save the file as UTF-8)"]
    );
    p.write("tools.toml", "[[tools]\n");
    let c = p.discover();
    assert_eq!(names(&c), vec!["ok"]);
    assert_eq!(c.diagnostics[0].severity, Severity::Error);
    assert_eq!(c.diagnostics[0].line, Some(1));
}
