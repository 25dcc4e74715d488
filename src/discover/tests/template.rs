//! OpenCrabs templates: `{{param}}`, `{{#param}}…{{/param}}`, and values
//! passed to `sh -c` as positional parameters whatever the quote context.

use crate::discover::opencrabs::shellctx::{Ctx, check_shell, contexts, render};
use crate::discover::opencrabs::template::{
    ShellCommand, check, check_declared, parse, shell_quote, valid_param_name,
};
use serde_json::{Map, Value, json};

fn args(v: Value) -> Map<String, Value> {
    v.as_object().expect("object").clone()
}

/// Run a rendered command the way the call engine does; stdout.
pub(super) fn run_sh(sh: &str, c: &ShellCommand) -> String {
    let out = std::process::Command::new(sh)
        .arg("-c")
        .arg(&c.script)
        .arg("sh")
        .args(&c.args)
        .output()
        .expect("run sh");
    assert!(
        out.status.success(),
        "{sh} failed on {c:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

fn err(t: &str) -> String {
    let params: Vec<String> = parse(t)
        .map(|p| p.params().into_iter().map(|(n, _)| n).collect())
        .unwrap_or_default();
    let declared: Vec<&str> = params.iter().map(String::as_str).collect();
    check_shell(t, &declared).expect_err(t).message.clone()
}

#[test]
fn vars_become_positional_references_in_order_of_first_use() {
    let c = render("echo {{b}} {{a}} {{b}}", &args(json!({"a": "x", "b": "y"}))).unwrap();
    assert_eq!(c.script, r#"echo "${1}" "${2}" "${1}""#);
    assert_eq!(c.args, vec!["y", "x"]);
}

#[test]
fn reference_suits_the_quote_context() {
    let t = parse(r#"a {{x}} "b {{x}}" 'c {{x}}' $(d {{x}} "e {{x}}")"#).unwrap();
    assert_eq!(
        contexts(&t).unwrap(),
        vec![
            Ctx::Unquoted,
            Ctx::Double,
            Ctx::Single,
            Ctx::Unquoted,
            Ctx::Double
        ]
    );
    let c = t.render_shell(&args(json!({"x": "v w"}))).unwrap();
    assert_eq!(
        c.script,
        r#"a "${1}" "b ${1}" 'c '"${1}"'' $(d "${1}" "e ${1}")"#
    );
    assert_eq!(
        run_sh(
            "/bin/sh",
            &parse_render(
                r#"printf '[%s]' {{x}} "b {{x}}" 'c {{x}}' "$(printf %s "{{x}}")""#,
                json!({"x": "v  w"})
            )
        ),
        "[v  w][b v  w][c v  w][v  w]"
    );
}

fn parse_render(t: &str, v: Value) -> ShellCommand {
    render(t, &args(v)).unwrap()
}

#[test]
fn seed_examples_load_and_render() {
    // Both examples from opencrabs-dynamic-tools.md put a param in "…".
    let t = r#"curl -s {{#query}}-G --data-urlencode "q={{query}}"{{/query}} {{url}}"#;
    check_shell(t, &["query", "url"]).unwrap();
    let c = parse_render(t, json!({"query": "a b", "url": "https://x"}));
    assert_eq!(c.script, r#"curl -s -G --data-urlencode "q=${1}" "${2}""#);
    assert_eq!(c.args, vec!["a b", "https://x"]);
    let c = parse_render(t, json!({"url": "https://x"}));
    assert_eq!(c.script, r#"curl -s  "${2}""#);
    let t = r#"curl -s -H "Authorization: Bearer {{api_key}}" {{endpoint}}"#;
    check_shell(t, &["api_key", "endpoint"]).unwrap();
}

#[test]
fn attacks_print_as_text_in_every_context() {
    let attacks = [
        "$(touch /nonexistent/pwned)",
        "`id`",
        "'; echo pwned; '",
        "\"; echo pwned; \"",
        "a\necho pwned",
        "x; echo pwned",
        "\\",
        "\\'\\\"",
        "${PATH}",
        "$'\\x27'",
        "*",
        "-n",
    ];
    let t = r#"printf '%s|' {{x}} "{{x}}" 'q{{x}}q' "$(printf %s {{x}})""#;
    for sh in ["/bin/sh", "/bin/bash"] {
        if !std::path::Path::new(sh).exists() {
            continue;
        }
        for a in attacks {
            let out = run_sh(sh, &parse_render(t, json!({ "x": a })));
            assert_eq!(out, format!("{a}|{a}|q{a}q|{a}|"), "{sh}: {a:?}");
        }
    }
}

#[test]
fn sections_render_when_present_non_null_non_empty_non_false() {
    let t = "a{{#p}} -p {{p}}{{/p}} b";
    let script = |v: Value| parse_render(t, v).script;
    assert_eq!(script(json!({"p": "x"})), r#"a -p "${1}" b"#);
    assert_eq!(script(json!({"p": 0})), r#"a -p "${1}" b"#);
    assert_eq!(script(json!({"p": true})), r#"a -p "${1}" b"#);
    for absent in [
        json!({}),
        json!({"p": null}),
        json!({"p": ""}),
        json!({"p": false}),
        json!({"p": []}),
        json!({"p": {}}),
    ] {
        assert_eq!(script(absent.clone()), "a b", "{absent}");
    }
    // Nested sections.
    let t = "{{#a}}A{{#b}}B{{/b}}{{/a}}";
    assert_eq!(parse_render(t, json!({"a": 1, "b": 1})).script, "AB");
    assert_eq!(parse_render(t, json!({"b": 1})).script, "");
}

#[test]
fn values_text_forms_and_missing_values() {
    let c = parse_render(
        "{{s}} {{n}} {{b}} {{a}} {{o}} {{missing}} {{nul}}",
        json!({"s": "x", "n": 1.5, "b": true, "a": [1, "2"], "o": {"k": null}, "nul": null}),
    );
    assert_eq!(
        c.args,
        vec!["x", "1.5", "true", "[1,\"2\"]", "{\"k\":null}", "", ""]
    );
    let e = render("echo {{x}}", &args(json!({"x": "a\0b"}))).unwrap_err();
    assert_eq!(e.message, "the value of 'x' contains a NUL byte");
}

#[test]
fn syntax_errors_name_the_offset() {
    let e = check("a {{#p}} b").unwrap_err();
    assert_eq!(
        (e.offset, e.message.as_str()),
        (2, "section {{#p}} is never closed")
    );
    let e = check("a {{/p}}").unwrap_err();
    assert_eq!(e.message, "{{/p}} without a matching {{#p}}");
    let e = check("{{#p}}{{#q}}{{/p}}{{/q}}").unwrap_err();
    assert_eq!(
        (e.offset, e.message.as_str()),
        (12, "{{/p}} closes section 'q'")
    );
    assert_eq!(
        e.to_string(),
        "template error at byte 12: {{/p}} closes section 'q'"
    );
}

#[test]
fn non_tags_are_literal_text() {
    let t = "docker ps --format '{{.Names}}' {{ x }} {{9}} {{}} {{x";
    let c = parse_render(t, json!({"x": "v"}));
    assert_eq!(
        c.script,
        r#"docker ps --format '{{.Names}}' "${1}" {{9}} {{}} {{x"#
    );
    assert!(valid_param_name("_a-1"));
    for bad in ["", "1a", "-a", "a.b", "a b", "é"] {
        assert!(!valid_param_name(bad), "{bad}");
    }
}

#[test]
fn undeclared_params_are_errors() {
    let e = check_declared("echo {{x}} {{#y}}{{/y}}", &["x"]).unwrap_err();
    assert_eq!(e.message, "'{{y}}' refers to an undeclared param 'y'");
    assert_eq!(e.offset, 11);
}

#[test]
fn unsafe_contexts_are_refused_at_load_time() {
    let cases = [
        ("echo `echo {{x}}`", "inside backticks; use $(…) instead"),
        (
            "echo \"`echo {{x}}`\"",
            "inside backticks; use $(…) instead",
        ),
        ("echo $(( {{x}} + 1 ))", "inside arithmetic $((…))"),
        ("echo ${HOME:-{{x}}}", "inside ${…}"),
        ("echo \"${HOME:-{{x}}}\"", "inside ${…}"),
        ("echo $'{{x}}'", "inside $'…'"),
        ("echo hi # {{x}}", "inside a shell comment"),
        ("echo hi\n#{{x}}\necho", "inside a shell comment"),
        ("cat <<EOF\n{{x}}\nEOF", "after a here-document `<<`"),
        ("cat <<'EOF'\n{{x}}\nEOF", "after a here-document `<<`"),
        ("echo ${{x}}", "right after `$`"),
        ("echo \"${{x}}\"", "right after `$`"),
        ("echo \\{{x}}", "right after a backslash"),
        (
            "echo $(case a in a) echo \"{{x}}\";; esac)",
            "after `case` inside `$(…)`",
        ),
    ];
    for (t, want) in cases {
        let m = err(t);
        assert!(m.starts_with("'{{x}}' cannot be used "), "{t}: {m}");
        assert!(m.contains(want), "{t}: {m}");
    }
}

#[test]
fn look_alikes_of_unsafe_contexts_are_fine() {
    for t in [
        "echo a#{{x}}",             // `#` inside a word is not a comment
        "echo $# {{x}}",            // `$#` is a parameter
        "echo '`' {{x}}",           // a quoted backtick
        "echo \"#\" {{x}}",         // a quoted hash
        "echo $(echo a) {{x}}",     // after a closed substitution
        "echo $((1+2)) {{x}}",      // after closed arithmetic
        "echo ${HOME} {{x}}",       // after a closed expansion
        "echo \\$ {{x}}",           // an escaped dollar
        "echo a < /dev/null {{x}}", // a single `<`
        "echo hi # c\necho {{x}}",  // a comment ends at the newline
        "case {{x}} in a) echo;; esac",
    ] {
        let declared = ["x"];
        check_shell(t, &declared).unwrap_or_else(|e| panic!("{t}: {e}"));
    }
}

#[test]
fn sections_must_not_change_the_context_around_them() {
    for (t, want) in [
        ("a {{#p}}\"{{/p}} {{x}}", "opens or closes a quote"),
        ("a {{#p}}$({{/p}} {{x}}", "opens or closes a quote"),
        ("a {{#p}}#{{/p}}\n{{x}}", "opens or closes a quote"),
        ("a ${{#p}}x{{/p}}", "starts right after `$` or `\\`"),
        ("a {{#p}}x\\{{/p}}y", "ends with `$` or `\\`"),
    ] {
        let e = check_shell(t, &["p", "x"]).expect_err(t);
        assert!(e.message.starts_with("section 'p' "), "{t}: {}", e.message);
        assert!(e.message.contains(want), "{t}: {}", e.message);
    }
    // Text after a section is judged as if the section were absent too:
    // without the section, `#` starts a comment.
    let e = check_shell("x {{#p}}y{{/p}}# {{x}}", &["p", "x"]).unwrap_err();
    assert!(
        e.message.contains("inside a shell comment"),
        "{}",
        e.message
    );
    let e = check_shell("cat <{{#p}}y{{/p}}<EOF\n{{x}}", &["p", "x"]).unwrap_err();
    assert!(e.message.contains("here-document"), "{}", e.message);
}

#[test]
fn plain_rendering_for_http_substitutes_text() {
    let t = parse("https://h/{{a}}?{{#q}}q={{q}}{{/q}}").unwrap();
    assert_eq!(
        t.render_plain(&args(json!({"a": "x y", "q": "z"}))),
        "https://h/x y?q=z"
    );
    assert_eq!(t.render_plain(&args(json!({"a": 1}))), "https://h/1?");
}

#[test]
fn shell_quote_for_display() {
    assert_eq!(shell_quote("a'b"), r"'a'\''b'");
    assert_eq!(shell_quote(""), "''");
}
