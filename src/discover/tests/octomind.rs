//! Octomind `.agents/tools/<name>` (seed: octomind-local-tools.md).

use super::{Proj, assert_one_line_with_fix, names, rendered};
use crate::discover::ToolKind;
use crate::discover::octomind::{
    Header, HeaderParam, MAX_HEADER_LINES, normalize_type, parse_header, parse_header_bytes,
};
use crate::discover::{Diagnostic, Severity};
use serde_json::json;
use std::path::Path;

fn f() -> &'static Path {
    Path::new("t")
}

fn header(text: &str) -> Header {
    let (h, d) = parse_header(text, f());
    h.unwrap_or_else(|| panic!("no header: {d:?}"))
}

fn messages(text: &str) -> Vec<String> {
    parse_header(text, f())
        .1
        .iter()
        .map(Diagnostic::to_string)
        .collect()
}

fn param(name: &str, kind: &'static str, desc: &str, required: bool, line: usize) -> HeaderParam {
    HeaderParam {
        name: name.into(),
        kind,
        description: desc.into(),
        required,
        line,
    }
}

#[test]
fn seed_quickstart_header() {
    let h = header(
        "#!/usr/bin/env bash\n# @description Echo a message back, optionally uppercased.\n# @param *message string The text to echo\n# @param uppercase boolean Uppercase the output\nif true; then\n# @param late string not header\nfi\n",
    );
    assert_eq!(h.description, "Echo a message back, optionally uppercased.");
    assert_eq!(h.description_line, 2);
    assert_eq!(
        h.params,
        vec![
            param("message", "string", "The text to echo", true, 3),
            param("uppercase", "boolean", "Uppercase the output", false, 4),
        ]
    );
}

#[test]
fn all_three_comment_prefixes() {
    for p in ["#", "//", "--"] {
        let h = header(&format!(
            "#!/usr/bin/env x\n{p} @description D\n  {p}@param *n int N\n"
        ));
        assert_eq!(h.description, "D", "{p}");
        assert_eq!(h.params, vec![param("n", "integer", "N", true, 3)], "{p}");
    }
    // Other comment styles end the header.
    let (h, d) = parse_header("; @description D\n", f());
    assert!(h.is_none());
    assert_eq!(
        d[0].to_string(),
        "t: missing @description; tool skipped (fix: add a comment line `# @description What the tool does` before line 1, where the header ends)"
    );
}

#[test]
fn a_required_marker_after_the_name_is_an_error_with_the_fix() {
    let m = messages("#!/bin/sh\n# @description D\n# @param url* string The URL\n");
    assert!(
        m.iter().any(|d| d.contains("@param 'url*'")
            && d.contains("tool skipped")
            && d.contains("write `@param *url TYPE DESCRIPTION`")),
        "{m:?}"
    );
    // Control: the marker before the name is a required parameter.
    let m = messages("#!/bin/sh\n# @description D\n# @param *url string The URL\n");
    assert!(m.is_empty(), "{m:?}");
}

#[test]
fn shebang_only_skipped_on_line_one() {
    let h = header("#!/bin/sh\n# @description D\n");
    assert_eq!(h.description, "D");
    // No shebang: line 1 is a header line like any other.
    assert_eq!(header("# @description D\n").description_line, 1);
}

#[test]
fn header_stops_at_first_code_line_blank_lines_do_not_stop_it() {
    let h =
        header("#!/bin/sh\n\n# @description D\n\n# @param a string A\nx=1\n# @param b string B\n");
    assert_eq!(h.params.len(), 1);
    assert_eq!(h.params[0].name, "a");
    let m = messages("#!/bin/sh\necho hi\n# @description D\n");
    assert_eq!(m.len(), 1);
    assert!(
        m[0].contains("before line 2, where the header ends"),
        "{m:?}"
    );
}

#[test]
fn header_limit_is_80_lines_shebang_included() {
    let mut text = String::from("#!/bin/sh\n");
    for _ in 0..MAX_HEADER_LINES - 2 {
        text.push_str("#\n");
    }
    let at_80 = format!("{text}# @description D\n");
    assert_eq!(header(&at_80).description_line, 80);
    let at_81 = format!("{text}#\n# @description D\n");
    let (h, d) = parse_header(&at_81, f());
    assert!(h.is_none());
    assert_eq!(
        d[0].to_string(),
        "t: missing @description; tool skipped (fix: add a comment line `# @description What the tool does` near the top)"
    );
    // A @param on line 81 is not part of the header.
    let h = header(&format!("{text}# @description D\n# @param late string L\n"));
    assert!(h.params.is_empty());
}

#[test]
fn continuation_lines_append_to_the_previous_tag() {
    let h = header(
        "# @description Short summary. Continuation\n# lines without an @ tag append   to it.\n# @param *target string Path\n#   to operate on\n",
    );
    assert_eq!(
        h.description,
        "Short summary. Continuation lines without an @ tag append to it."
    );
    assert_eq!(h.params[0].description, "Path to operate on");
    // An empty comment line ends the continuation; the header goes on.
    let h = header("# @description D\n#\n# Usage: not part of it\n# @param a str A\n");
    assert_eq!(h.description, "D");
    assert_eq!(h.params.len(), 1);
    // Continuation of an unknown tag goes nowhere.
    let h = header("# @description D\n# @author me\n# more author\n");
    assert_eq!(h.description, "D");
    // An empty @description filled by continuation lines.
    assert_eq!(
        header("# @description\n# on the next line\n").description,
        "on the next line"
    );
}

#[test]
fn description_tag_required_desc_alias_and_case() {
    assert_eq!(header("# @desc Short\n").description, "Short");
    assert_eq!(header("# @Description Short\n").description, "Short");
    assert_eq!(
        messages("# @param a string A\n"),
        vec![
            "t: missing @description; tool skipped (fix: add a comment line `# @description What the tool does` near the top)"
        ]
    );
    assert_eq!(
        messages("# @description   \n"),
        vec![
            "t:1: @description is empty; tool skipped (fix: write what the tool does after @description)"
        ]
    );
    let (h, d) = parse_header("# @description A\n# @desc B\n", f());
    assert_eq!(h.unwrap().description, "A");
    assert_eq!(d[0].severity, Severity::Warning);
    assert_eq!(
        d[0].to_string(),
        "t:2: second @description ignored (fix: merge the descriptions into one tag)"
    );
}

#[test]
fn required_star_and_optional_default() {
    let h = header("# @description D\n# @param *req string R\n# @param opt string O\n");
    assert!(h.params[0].required);
    assert!(!h.params[1].required);
    let m = messages("# @description D\n# @param * string R\n");
    assert_eq!(
        m,
        vec![
            "t:2: @param without a name; tool skipped (fix: write `@param [*]NAME TYPE DESCRIPTION`)"
        ]
    );
    assert!(
        parse_header("# @description D\n# @param\n", f())
            .0
            .is_none()
    );
}

#[test]
fn type_aliases_normalized_unknown_types_fall_back_to_string() {
    for (t, want) in [
        ("string", "string"),
        ("str", "string"),
        ("number", "number"),
        ("integer", "integer"),
        ("int", "integer"),
        ("boolean", "boolean"),
        ("bool", "boolean"),
        ("array", "array"),
        ("list", "array"),
        ("object", "object"),
        ("obj", "object"),
        ("INT", "integer"),
    ] {
        assert_eq!(normalize_type(t), Some(want), "{t}");
    }
    assert_eq!(normalize_type("float"), None);
    let (h, d) = parse_header("# @description D\n# @param x float A number\n", f());
    let h = h.unwrap();
    assert_eq!(h.params[0].kind, "string");
    assert_eq!(h.params[0].description, "A number");
    assert_eq!(
        d[0].to_string(),
        "t:2: @param 'x': unknown type 'float', using string (fix: use string, number, integer, boolean, array or object)"
    );
    assert_eq!(d[0].severity, Severity::Warning);
    let (h, d) = parse_header("# @description D\n# @param x\n", f());
    assert_eq!(h.unwrap().params[0].kind, "string");
    assert!(d[0].message.contains("has no type; using string"));
}

#[test]
fn unknown_tags_ignored_without_diagnostics() {
    let (h, d) = parse_header("# @description D\n# @version 2\n# @returns text\n", f());
    assert_eq!(h.unwrap().description, "D");
    assert!(d.is_empty(), "{d:?}");
}

#[test]
fn duplicate_params_skip_the_tool_bad_env_names_warn() {
    let m = messages("# @description D\n# @param a string\n# @param *a int\n");
    assert_eq!(
        m,
        vec!["t:3: duplicate @param 'a'; tool skipped (fix: declare each parameter once)"]
    );
    let (h, d) = parse_header("# @description D\n# @param my-arg string A\n", f());
    assert_eq!(h.unwrap().params[0].name, "my-arg");
    assert_eq!(d[0].severity, Severity::Warning);
    assert!(d[0].message.contains("passed on stdin only"), "{:?}", d[0]);
}

#[test]
fn invalid_utf8_in_the_header_is_an_error_after_it_is_not() {
    let (h, d) = parse_header_bytes(b"# @description D\n# @param a str \xff\n", false, f());
    assert!(h.is_none());
    assert_eq!(
        d[0].to_string(),
        "t:2: header is not valid UTF-8; tool skipped (fix: save the script as UTF-8)"
    );
    let (h, d) = parse_header_bytes(b"# @description D\necho \xff\n", false, f());
    assert_eq!(h.unwrap().description, "D");
    assert!(d.is_empty());
    // Cut in the middle of a character by the read cap: fine.
    let (h, _) = parse_header_bytes(
        "# @description D\necho é".as_bytes()[..23].as_ref(),
        true,
        f(),
    );
    assert!(h.is_some());
    // A header still going at the cap.
    let (h, d) = parse_header_bytes(b"# @description D\n# @param a str", true, f());
    assert!(h.is_none());
    assert!(
        d[0].message
            .starts_with("header does not end within the first 64 KiB")
    );
}

#[test]
fn scan_loads_tools_and_explains_every_skipped_file() {
    let p = Proj::new();
    let ok = "#!/bin/sh\n# @description OK tool\n# @param *who string Who\n";
    p.exec(".agents/tools/good", ok);
    p.exec(".agents/tools/with_under-dash9", ok);
    p.write(".agents/tools/noexec", ok);
    p.exec(".agents/tools/mytool.sh", ok);
    p.exec(".agents/tools/.hidden", ok);
    p.exec(".agents/tools/bad name", ok);
    p.exec(".agents/tools/nodesc", "#!/bin/sh\necho\n");
    std::fs::create_dir_all(p.path(".agents/tools/subdir")).unwrap();
    std::os::unix::fs::symlink("nowhere", p.path(".agents/tools/dangling")).unwrap();
    let c = p.discover();
    assert_eq!(names(&c), vec!["good", "with_under-dash9"]);
    assert_eq!(
        rendered(&c, p.root()),
        vec![
            "warning .agents/tools/.hidden: hidden file ignored (fix: drop the leading '.' to make it a tool)",
            "error .agents/tools/bad name: file name must match [A-Za-z0-9_-]+; tool skipped (fix: rename the file using letters, digits, '_' and '-')",
            "error .agents/tools/dangling: cannot stat: file vanished or is a dangling symlink (fix: remove or repair the file)",
            "error .agents/tools/mytool.sh: file name has an extension; tool skipped (fix: drop the extension: rename to .agents/tools/mytool)",
            "error .agents/tools/nodesc: missing @description; tool skipped (fix: add a comment line `# @description What the tool does` before line 2, where the header ends)",
            "error .agents/tools/noexec: not executable; tool skipped (fix: chmod +x .agents/tools/noexec)",
        ]
    );
    assert_one_line_with_fix(&c);
    assert_eq!(c.examined.len(), 8);
    let t = c.get("good").unwrap();
    assert_eq!(t.line, Some(2));
    assert_eq!(t.source, p.path(".agents/tools/good"));
    assert_eq!(
        t.input_schema,
        json!({"type":"object","properties":{"who":{"type":"string","description":"Who"}},"required":["who"],"additionalProperties":false})
    );
    assert!(matches!(&t.kind, ToolKind::Octomind { program } if program == &t.source));
}

#[test]
fn fifo_and_unreadable_files_are_diagnostics_not_hangs() {
    let p = Proj::new();
    std::fs::create_dir_all(p.path(".agents/tools")).unwrap();
    nix::unistd::mkfifo(
        &p.path(".agents/tools/fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o755),
    )
    .unwrap();
    let c = p.discover();
    assert!(c.tools.is_empty());
    assert_eq!(
        rendered(&c, p.root()),
        vec![
            "error .agents/tools/fifo: not a regular file; tool skipped (fix: replace it with an executable script)"
        ]
    );
}

#[test]
fn malformed_tool_never_hides_the_others() {
    let p = Proj::new();
    p.exec(".agents/tools/a", "#!/bin/sh\n# @description A\n");
    p.exec(".agents/tools/b", b"\xff\xfe\x00garbage".as_slice());
    p.exec(
        ".agents/tools/c",
        "#!/bin/sh\n# @description C\n# @param x\n# @param x\n",
    );
    p.exec(".agents/tools/d", "#!/bin/sh\n# @description D\n");
    let c = p.discover();
    assert_eq!(names(&c), vec!["a", "d"]);
    let r = rendered(&c, p.root());
    assert_eq!(r.len(), 4, "{r:#?}"); // b: utf-8; c: no type twice, duplicate
    // Binary from line 1 on: no header at all.
    assert!(
        r[0].starts_with("error .agents/tools/b: missing @description"),
        "{r:?}"
    );
}
