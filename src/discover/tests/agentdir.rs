//! A3S AgentDir `tools/<name>.md` (seed: a3s-agentdir-tools.md).

use super::{Proj, assert_one_line_with_fix, names, rendered};
use crate::discover::agentdir::{Doc, Kind, parse_md, scan_key_lines, split_front_matter};
use crate::discover::upstream::expand_env;
use crate::discover::{Diagnostic, Severity, Transport};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

const SEED_MCP: &str = "---\nkind: mcp\nname: github\ntransport: stdio\ncommand: npx\nargs: [\"-y\", \"@modelcontextprotocol/server-github\"]\nenv:\n  GITHUB_TOKEN: \"${GITHUB_TOKEN}\"\n---\nGitHub issues and pull request tools.\n";

const SEED_SCRIPT: &str = "---\nkind: script\nname: search-auth\npath: scripts/search-auth.js\nallowed_tools: [grep, glob, read]\nlimits:\n  timeoutMs: 30000\n  maxToolCalls: 30\n  maxOutputBytes: 65536\n---\nFind authentication-related files and return an evidence list.\n";

fn parse(text: &str) -> (Option<Doc>, Vec<String>) {
    let (d, g) = parse_md(text, Path::new("t.md"));
    (d, g.iter().map(Diagnostic::to_string).collect())
}

fn one_error(text: &str) -> String {
    let (d, g) = parse(text);
    assert!(d.is_none(), "loaded: {g:?}");
    assert_eq!(g.len(), 1, "{g:?}");
    g[0].clone()
}

fn script(extra: &str) -> String {
    format!("---\nkind: script\nname: s\npath: s.js\n{extra}---\nDoes things.\n")
}

#[test]
fn seed_mcp_tool() {
    let (d, g) = parse(SEED_MCP);
    assert!(g.is_empty(), "{g:?}");
    let d = d.unwrap();
    assert_eq!(d.name, "github");
    assert_eq!(d.description, "GitHub issues and pull request tools.");
    assert_eq!(
        d.kind,
        Kind::Mcp {
            transport: "stdio".into(),
            command: Some("npx".into()),
            args: vec!["-y".into(), "@modelcontextprotocol/server-github".into()],
            url: None,
            env: vec![("GITHUB_TOKEN".into(), "${GITHUB_TOKEN}".into())],
        }
    );
}

#[test]
fn seed_script_tool() {
    let (d, g) = parse(SEED_SCRIPT);
    assert!(g.is_empty(), "{g:?}");
    assert_eq!(
        d.unwrap().kind,
        Kind::Script {
            path: "scripts/search-auth.js".into(),
            allowed_tools: vec!["grep".into(), "glob".into(), "read".into()],
            timeout_ms: Some(30000),
            max_tool_calls: Some(30),
            max_output_bytes: Some(65536),
        }
    );
}

#[test]
fn front_matter_splitting() {
    assert_eq!(split_front_matter("# README\n"), None);
    assert_eq!(
        split_front_matter("---\na: 1\n---\nbody"),
        Some(Ok(("a: 1\n", 2, "body")))
    );
    assert_eq!(
        split_front_matter("\u{feff}---\r\na: 1\r\n...\r\n"),
        Some(Ok(("a: 1\r\n", 2, "")))
    );
    assert!(matches!(split_front_matter("---\na: 1\n"), Some(Err(_))));
    let (d, g) = parse("# Just docs\n");
    assert!(d.is_none());
    assert_eq!(
        g,
        vec![
            "t.md:1: no YAML front matter; not a tool (fix: start the file with a `---` line, `kind: ...` and `name: ...`)"
        ]
    );
    assert_eq!(
        one_error("---\nkind: mcp\n"),
        "t.md:1: front matter is never closed by a `---` line; tool skipped (fix: close the front matter with `---`)"
    );
}

#[test]
fn load_time_errors_unknown_kind_and_bad_yaml() {
    assert_eq!(
        one_error("---\nkind: plugin\nname: x\n---\nD\n"),
        "t.md:2: unknown kind 'plugin'; tool skipped (fix: use `kind: script` or `kind: mcp`)"
    );
    assert!(one_error("---\nname: x\n---\nD\n").contains("missing 'kind'"));
    let m = one_error("---\nkind: mcp\nname: x: y\n---\nD\n");
    assert!(m.starts_with("t.md:3: invalid YAML front matter: "), "{m}");
    assert!(one_error("---\n- a\n---\nD\n").contains("front matter must be a mapping"));
}

#[test]
fn name_and_description_rules() {
    assert!(one_error(&script("").replace("name: s", "name: a.b")).contains("invalid name 'a.b'"));
    assert!(one_error(&script("").replace("name: s\n", "")).contains("missing 'name'"));
    let (d, _) = parse(&script("description: From the key\n"));
    assert_eq!(d.unwrap().description, "From the key");
    let (d, _) =
        parse("---\nkind: script\nname: s\npath: s.js\n---\n\nFirst para\ncontinues.\n\nSecond.\n");
    assert_eq!(d.unwrap().description, "First para continues.");
    assert!(one_error("---\nkind: script\nname: s\npath: s.js\n---\n").contains("no description"));
}

#[test]
fn illegal_limits_fail_at_load_time() {
    for (l, want) in [
        ("timeoutMs: 0", "illegal limit timeoutMs: 0"),
        ("timeoutMs: 600001", "illegal limit timeoutMs: 600001"),
        ("maxToolCalls: -1", "illegal limit maxToolCalls: -1"),
        ("maxToolCalls: 1.5", "illegal limit maxToolCalls: 1.5"),
        (
            "maxOutputBytes: lots",
            "illegal limit maxOutputBytes: not a number",
        ),
        (
            "maxOutputBytes: 67108865",
            "illegal limit maxOutputBytes: 67108865",
        ),
    ] {
        let m = one_error(&script(&format!("limits:\n  {l}\n")));
        assert!(m.contains(want), "{l}: {m}");
        assert!(m.contains("(fix: use an integer from 1 to "), "{m}");
    }
    assert!(one_error(&script("limits: 5\n")).contains("'limits' must be a mapping"));
    let (d, g) = parse(&script("limits:\n  memoryMb: 5\n"));
    assert!(d.is_some());
    assert_eq!(
        g,
        vec![
            "t.md:1: unknown limit 'memoryMb' ignored (fix: use timeoutMs, maxToolCalls or maxOutputBytes)"
        ]
    );
}

#[test]
fn escaping_paths_fail_at_load_time() {
    for p in ["/etc/passwd", "../x.js", "a/../../x.js"] {
        let m = one_error(&script("").replace("path: s.js", &format!("path: {p}")));
        assert!(m.contains(&format!("path '{p}'")), "{m}");
        assert!(
            m.contains("is absolute") || m.contains("escapes the AgentDir"),
            "{m}"
        );
    }
    assert!(
        parse(&script("").replace("path: s.js", "path: a/../b.js"))
            .0
            .is_some()
    );
    assert!(
        one_error(&script("").replace("path: s.js\n", "")).contains("script tool without 'path'")
    );
}

#[test]
fn mcp_transport_rules() {
    let mcp = |rest: &str| format!("---\nkind: mcp\nname: m\n{rest}---\nD\n");
    assert!(one_error(&mcp("")).contains("mcp tool without 'transport'"));
    assert!(one_error(&mcp("transport: stdio\n")).contains("stdio mcp tool without 'command'"));
    assert!(
        one_error(&mcp("transport: http\nurl: ws://x\n")).contains("needs an http(s):// 'url'")
    );
    assert!(one_error(&mcp("transport: sse\n")).contains("unknown transport 'sse'"));
    assert!(
        one_error(&mcp("transport: stdio\ncommand: x\nenv: [a]\n"))
            .contains("'env' must be a mapping")
    );
    assert!(
        one_error(&mcp("transport: stdio\ncommand: x\nenv:\n  1BAD: x\n")).contains("env entry")
    );
    let (d, g) = parse(&mcp("transport: http\nurl: https://x/mcp\npath: nope\n"));
    assert!(d.is_some());
    assert_eq!(
        g,
        vec!["t.md:6: unknown key 'path' ignored (fix: remove it, or check its spelling)"]
    );
}

#[test]
fn env_expansion_fails_on_unset() {
    let look = |n: &str| (n == "SET").then(|| "v".to_string());
    assert_eq!(expand_env("a${SET}b$c", look), Ok("avb$c".into()));
    assert_eq!(
        expand_env("${UNSET}", look),
        Err("environment variable UNSET is not set".into())
    );
    assert_eq!(expand_env("${SET", look), Err("unterminated ${".into()));
    assert!(
        expand_env("${1x}", look)
            .unwrap_err()
            .contains("invalid variable name")
    );
}

#[test]
fn scan_loads_both_kinds_and_reports_each_file() {
    let p = Proj::new();
    p.write(
        "scripts/search-auth.js",
        "async function run(ctx, inputs) {}\n",
    );
    p.write("tools/search-auth.md", SEED_SCRIPT);
    p.write(
        "tools/path-tool.md",
        "---\nkind: mcp\nname: path-tool\ntransport: stdio\ncommand: x\nenv:\n  P: \"${PATH}\"\n---\nUses PATH.\n",
    );
    p.write(
        "tools/secret.md",
        "---\nkind: mcp\nname: secret\ntransport: stdio\ncommand: x\nenv:\n  T: \"${TOOLCAGE_TEST_SURELY_UNSET\"\n---\nD\n",
    );
    p.write(
        "tools/missing.md",
        script("").replace("name: s", "name: missing"),
    );
    p.write("tools/README.md", "# Tools\n");
    p.write("tools/notes.txt", "ignored: not .md");
    std::os::unix::fs::symlink("/etc/hostname", p.path("out.js")).unwrap();
    p.write(
        "tools/link.md",
        script("")
            .replace("name: s", "name: link")
            .replace("s.js", "out.js"),
    );
    let c = p.discover();
    // kind: mcp is an upstream server, not a tool.
    assert_eq!(names(&c), vec!["search-auth"]);
    assert_eq!(
        c.upstreams
            .iter()
            .map(|u| u.name.as_str())
            .collect::<Vec<_>>(),
        vec!["path-tool"]
    );
    assert_eq!(
        rendered(&c, p.root()),
        vec![
            "warning tools/README.md:1: no YAML front matter; not a tool (fix: start the file with a `---` line, `kind: ...` and `name: ...`)",
            "error tools/link.md:4: script path 'out.js' resolves outside the AgentDir; tool skipped (fix: keep scripts inside the project, without symlinks out)",
            "error tools/missing.md:4: script path 's.js': file vanished or is a dangling symlink; tool skipped (fix: create the script or fix `path`)",
            "error tools/secret.md:7: env T: unterminated ${; server skipped (fix: write ${NAME} or ${NAME:-default})",
        ]
    );
    assert_one_line_with_fix(&c);
    let s = c.get("search-auth").unwrap();
    assert_eq!(s.requests.timeout, Some(Duration::from_millis(30000)));
    assert_eq!(
        s.input_schema["properties"]["inputs"]["type"],
        json!("object")
    );
    let m = &c.upstreams[0];
    // Env values are never serialized.
    let ser = serde_json::to_string(m).unwrap();
    assert!(ser.contains("<redacted>"), "{ser}");
    assert!(!ser.contains(&std::env::var("PATH").unwrap()), "{ser}");
    // Discovery reads no host variable: `${PATH}` stays as written (the
    // gateway expands it, if the operator's env_from_host allows it).
    assert!(matches!(&m.transport, Transport::Stdio { env, .. } if env[0].1 == "${PATH}"));
}

#[test]
fn duplicate_names_fail_at_load_time_and_the_first_wins() {
    let p = Proj::new();
    p.write("s.js", "");
    p.write("tools/a.md", script(""));
    p.write("tools/b.md", script(""));
    let c = p.discover();
    assert_eq!(names(&c), vec!["s"]);
    assert_eq!(c.get("s").unwrap().source, p.path("tools/a.md"));
    let dups: Vec<_> = c
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .map(|d| {
            d.to_string()
                .replace(&format!("{}/", p.root().display()), "")
        })
        .collect();
    assert_eq!(
        dups,
        vec![
            "tools/b.md:1: duplicate tool name 's' (first defined at tools/a.md:1); skipped (fix: rename one of the tools)"
        ]
    );
    assert_eq!(c.shadowed.len(), 1);
}

#[test]
fn key_lines_point_diagnostics_at_the_key() {
    let yaml = "kind: mcp\n# name: commented\nname: gh\nurl: https://x:1/mcp\nenv:\n  \"TOKEN\": \"${T}\"\nargs:\n  - name: inner\n";
    let got = scan_key_lines(yaml, 2);
    let at = |k: &str| got.iter().find(|(key, _)| key == k).map(|&(_, l)| l);
    assert_eq!(at("kind"), Some(2));
    assert_eq!(
        at("name"),
        Some(4),
        "comments are skipped, first occurrence wins"
    );
    assert_eq!(at("url"), Some(5));
    assert_eq!(at("https"), None, "a colon inside a value is not a key");
    assert_eq!(at("TOKEN"), Some(7), "nested and quoted keys");
    assert_eq!(at("args"), Some(8));
}

#[test]
fn expand_allowed_reads_only_the_variables_the_operator_allows() {
    use crate::discover::upstream::{Unexpanded, expand_allowed};
    let look = |n: &str| matches!(n, "SET" | "OTHER").then(|| "v".to_string());
    let allowed = vec!["SET".to_string(), "UNSET".to_string()];
    let mut read = Vec::new();
    let mut x = |s: &str| expand_allowed(s, &allowed, &look, &mut read);
    assert_eq!(x("a${SET}b"), Ok("avb".into()));
    // Not allowed: its default only, never the host's value; no default: an error.
    assert_eq!(x("${OTHER:-d}"), Ok("d".into()));
    assert_eq!(x("${OTHER}"), Err(Unexpanded::NotAllowed("OTHER".into())));
    assert_eq!(x("${UNSET}"), Err(Unexpanded::Unset("UNSET".into())));
    assert_eq!(x("${UNSET:-d}"), Ok("d".into()));
    assert_eq!(read, vec![("SET".to_string(), "v".to_string())]);
}
