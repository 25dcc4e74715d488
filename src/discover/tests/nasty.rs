//! Every parser against a corpus of nasty inputs: truncated files at every
//! byte, invalid UTF-8, NULs, huge lines, deep nesting. None may panic (a
//! panic fails the test; a stack overflow aborts it). The same entry points
//! back the cargo-fuzz targets in `fuzz/`.

use super::Proj;
use crate::discover::fuzz;

type Target = fn(&[u8]);

const TARGETS: [(&str, Target); 5] = [
    ("octomind_header", fuzz::octomind_header),
    ("clawd_tool_json", fuzz::clawd_tool_json),
    ("opencrabs_tools_toml", fuzz::opencrabs_tools_toml),
    ("agentdir_front_matter", fuzz::agentdir_front_matter),
    ("template", fuzz::template),
];

const SEEDS: [&str; 5] = [
    "#!/usr/bin/env bash\n# @description Echo a message back,\n# continued.\n// @param *message string The text\n-- @param n int N\necho\n",
    r#"{"name": "check-deps", "description": "Check", "parameters": {"path": {"type": "string", "enum": ["a"]}}, "required": ["path"], "entrypoint": "check.sh", "interpreter": "bash", "timeout": 30}"#,
    "[[tools]]\nname = \"s\"\ndescription = \"d\"\nexecutor = \"shell\"\ncommand = \"curl {{#q}}-G \\\"q={{q}}\\\"{{/q}} {{u}}\"\n[[tools.params]]\nname = \"q\"\ndefault = \"null\"\ncoerce_empty_to = \"omit\"\n[[tools.params]]\nname = \"u\"\n[tools.rate_limit]\nrequests = \"10\"\nwindow = \"1m\"\n",
    "---\nkind: script\nname: s\npath: scripts/s.js\nallowed_tools: [grep]\nlimits:\n  timeoutMs: 30000\n---\nFind things.\n",
    "printf '%s' {{x}} \"{{#y}}$(echo \"{{y}}\"){{/y}}\" 'a{{x}}' # {{z}}\n$(touch pwned)`id`'\"\\",
];

fn corpus() -> Vec<Vec<u8>> {
    let mut c: Vec<Vec<u8>> = Vec::new();
    for s in SEEDS {
        let b = s.as_bytes();
        // Every truncation: a half-written file.
        for i in 0..=b.len() {
            c.push(b[..i].to_vec());
        }
        // Invalid UTF-8, NULs and CRs spliced in at a few places.
        for pos in [0, 1, b.len() / 3, b.len() / 2, b.len()] {
            for junk in [&b"\xff\xfe"[..], b"\0", b"\r", b"\xe2\x82", b"\n\n---\n"] {
                let mut v = b.to_vec();
                v.splice(pos..pos, junk.iter().copied());
                c.push(v);
            }
        }
    }
    let huge = "x".repeat(1 << 20);
    c.push(format!("# @description {huge}\n").into_bytes());
    c.push(format!("{{\"name\": \"{huge}\"}}").into_bytes());
    c.push(format!("[[tools]]\nname = \"{huge}\"\n").into_bytes());
    c.push(format!("---\nname: {huge}\n---\n").into_bytes());
    c.push(format!("{{{{{huge}}}}}").into_bytes());
    c.push("\n".repeat(100_000).into_bytes());
    c.push("#\n".repeat(100_000).into_bytes());
    c.push(vec![0; 4096]);
    c.push((0..=255u8).collect());
    let deep = 100_000;
    c.push(format!("{}{}", "[".repeat(deep), "]".repeat(deep)).into_bytes());
    c.push(
        format!(
            "{{\"parameters\": {}1{}}}",
            "{\"a\":".repeat(deep),
            "}".repeat(deep)
        )
        .into_bytes(),
    );
    c.push(format!("a = {}{}", "[".repeat(deep), "]".repeat(deep)).into_bytes());
    c.push(format!("a = {}1{}", "{b = ".repeat(deep), "}".repeat(deep)).into_bytes());
    c.push(format!("{}x = 1\n", "[a]\n".repeat(1000)).into_bytes());
    c.push(format!("---\na: {}{}\n---\n", "[".repeat(deep), "]".repeat(deep)).into_bytes());
    c.push(
        format!(
            "---\na: {}1{}\n---\n",
            "{b: ".repeat(deep),
            "}".repeat(deep)
        )
        .into_bytes(),
    );
    c.push(format!("---\n{}x\n---\n", "- ".repeat(deep)).into_bytes());
    c.push("---\na: &a [*a]\n---\n".into());
    c.push(
        format!(
            "---\n{}\n---\n",
            (0..30)
                .map(|i| format!(
                    "a{}: &a{} [{}]",
                    i + 1,
                    i + 1,
                    if i == 0 {
                        "x".to_string()
                    } else {
                        format!("*a{i}, *a{i}, *a{i}, *a{i}, *a{i}, *a{i}, *a{i}, *a{i}, *a{i}")
                    }
                ))
                .collect::<Vec<_>>()
                .join("\n")
        )
        .into_bytes(),
    );
    c.push("{{#a}}".repeat(deep).into_bytes());
    c.push(format!("{}{}", "{{#a}}".repeat(deep), "{{/a}}".repeat(deep)).into_bytes());
    c.push(format!("{}x", "$(".repeat(deep)).into_bytes());
    c.push(format!("{}{{{{x}}}}", "\"$(".repeat(deep)).into_bytes());
    c
}

#[test]
fn no_parser_panics_on_nasty_input() {
    let corpus = corpus();
    assert!(corpus.len() > 500);
    for (name, target) in TARGETS {
        for input in &corpus {
            let r = std::panic::catch_unwind(|| target(input));
            assert!(
                r.is_ok(),
                "{name} panicked on {:?}",
                String::from_utf8_lossy(&input[..input.len().min(200)])
            );
        }
    }
}

#[test]
fn deep_yaml_is_refused_before_the_slow_parser() {
    let deep = format!(
        "---\nkind: mcp\nname: x\na: {}1{}\n---\nD\n",
        "[".repeat(65),
        "]".repeat(65)
    );
    let (doc, d) = crate::discover::agentdir::parse_md(&deep, std::path::Path::new("t.md"));
    assert!(doc.is_none());
    assert_eq!(
        d[0].to_string(),
        "t.md:2: front matter larger than 64 KiB or nested deeper than 64 brackets; tool skipped (fix: simplify the front matter)"
    );
    // Brackets in quoted strings and comments do not count.
    let ok = format!(
        "---\nkind: script\nname: x\npath: \"{b}\"\ndescription: '{b}' # {b}\n---\n",
        b = "[".repeat(100)
    );
    let (doc, d) = crate::discover::agentdir::parse_md(&ok, std::path::Path::new("t.md"));
    assert!(doc.is_some(), "{d:?}");
}

#[test]
fn deep_section_nesting_is_an_error_not_a_stack_overflow() {
    let t = "{{#a}}".repeat(33) + &"{{/a}}".repeat(33);
    let e = crate::discover::opencrabs::template::parse(&t).unwrap_err();
    assert_eq!(e.message, "sections nested deeper than 32");
    let t = "{{#a}}".repeat(32) + &"{{/a}}".repeat(32);
    assert!(crate::discover::opencrabs::template::parse(&t).is_ok());
}

#[test]
fn half_written_files_on_disk_are_diagnostics() {
    let p = Proj::new();
    let seeds = [
        (".agents/tools/half", SEEDS[0]),
        (".clawd/tools/half/tool.json", SEEDS[1]),
        ("tools.toml", SEEDS[2]),
        ("tools/half.md", SEEDS[3]),
    ];
    for (rel, text) in seeds {
        for cut in [0, 1, text.len() / 2, text.len() - 1] {
            p.exec(rel, &text.as_bytes()[..cut]);
            let c = p.discover();
            assert!(
                !c.diagnostics.is_empty() || !c.tools.is_empty(),
                "{rel} cut at {cut}: nothing loaded and nothing said"
            );
            for d in &c.diagnostics {
                assert!(!d.to_string().contains('\n'), "{d}");
            }
        }
        std::fs::remove_file(p.path(rel)).unwrap();
    }
}
