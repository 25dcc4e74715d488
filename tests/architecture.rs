//! The module map of ARCHITECTURE.md, checked: arrows point down. Each
//! top-level module of `src/`, and each library crate under `crates/`
//! (`toolcage-text` is the module `text`, `toolcage-policy` is `policy`,
//! `toolcage-broker` is `broker`, `toolcage-sandbox` is `sandbox`), may use
//! only the modules below it (the table), and only the sandbox crate may
//! hold `unsafe` (every other crate root forbids it). An upward import
//! (a surface's helper used by the gate, a policy helper reaching into the
//! sandbox) fails here with the file, the line and the rule. Between the
//! crates the compiler enforces it too: a crate's manifest names only the
//! crates below it, which is checked here as well.
//!
//! Reads the source text: `crate::...` and `toolcage_<crate>::...` paths
//! (in `use` trees too) and `super::` paths that climb out of a module,
//! outside comments.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Module → what it may use: a module, or `module::Item` for one item.
/// Mirrors the table in ARCHITECTURE.md.
const ALLOWED: &[(&str, &[&str])] = &[
    ("text", &[]),
    ("spec", &[]),
    ("policy", &["text"]),
    ("broker", &["policy", "text"]),
    ("sandbox", &["broker", "policy", "text"]),
    (
        "discover",
        &[
            "spec",
            "text",
            "policy::Requests",
            "policy::RateLimit",
            "policy::hostname",
        ],
    ),
    ("audit", &["policy", "spec", "text"]),
    (
        "gate",
        &[
            "audit", "discover", "policy", "broker", "sandbox", "spec", "text",
        ],
    ),
    (
        "call",
        &[
            "gate", "audit", "discover", "policy", "broker", "sandbox", "spec", "text",
        ],
    ),
    (
        "upstream",
        &[
            "call", "gate", "audit", "discover", "policy", "broker", "sandbox", "spec", "text",
        ],
    ),
    (
        "mcp",
        &[
            "upstream", "call", "gate", "audit", "discover", "policy", "broker", "sandbox", "spec",
            "text",
        ],
    ),
    (
        "cli",
        &[
            "mcp", "upstream", "call", "gate", "audit", "discover", "policy", "broker", "sandbox",
            "spec", "text",
        ],
    ),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `src/gate/approval/tests.rs` → `["gate", "approval", "tests"]`.
fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    if let Some(last) = parts.pop() {
        let stem = last.trim_end_matches(".rs");
        if stem != "mod" {
            parts.push(stem.to_string());
        }
    }
    parts
}

/// The text with `//` comments blanked (line numbers kept). Strings are
/// left alone, so a `//` inside one hides the rest of its line: harmless
/// for imports.
fn strip_comments(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn ident_at(s: &[u8], mut i: usize) -> (String, usize) {
    let start = i;
    while i < s.len() && (s[i].is_ascii_alphanumeric() || s[i] == b'_') {
        i += 1;
    }
    (String::from_utf8_lossy(&s[start..i]).into_owned(), i)
}

fn skip_ws(s: &[u8], mut i: usize) -> usize {
    while i < s.len() && s[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// Parse a use tree at `i` (after `crate::`): every path as its first two
/// segments. Returns the end.
fn use_tree(s: &[u8], i: usize, prefix: &[String], out: &mut Vec<Vec<String>>) -> usize {
    let mut i = skip_ws(s, i);
    if i < s.len() && s[i] == b'{' {
        i += 1;
        loop {
            i = skip_ws(s, i);
            if i >= s.len() {
                return i;
            }
            if s[i] == b'}' {
                return i + 1;
            }
            if s[i] == b',' {
                i += 1;
                continue;
            }
            let next = use_tree(s, i, prefix, out);
            if next == i {
                return i + 1;
            }
            i = next;
        }
    }
    let (name, mut j) = ident_at(s, i);
    if name.is_empty() {
        return i;
    }
    let mut path = prefix.to_vec();
    path.push(name);
    if s[j..].starts_with(b"::") && path.len() < 2 {
        j = use_tree(s, j + 2, &path, out);
        return j;
    }
    out.push(path);
    j
}

/// Every `(line, [module, item?])` this file reaches outside its module.
fn references(text: &str, depth: usize) -> Vec<(usize, Vec<String>)> {
    let code = strip_comments(text);
    let s = code.as_bytes();
    let mut out = Vec::new();
    let line_of = |at: usize| s[..at].iter().filter(|&&b| b == b'\n').count() + 1;
    let mut i = 0;
    while i < s.len() {
        let word_start = i == 0 || !(s[i - 1].is_ascii_alphanumeric() || s[i - 1] == b'_');
        if word_start && s[i..].starts_with(b"crate::") {
            let mut paths = Vec::new();
            let end = use_tree(s, i + 7, &[], &mut paths);
            out.extend(paths.into_iter().map(|p| (line_of(i), p)));
            i = end.max(i + 7);
            continue;
        }
        if word_start && s[i..].starts_with(b"super::") {
            let mut j = i;
            let mut ups = 0;
            while s[j..].starts_with(b"super::") {
                ups += 1;
                j += 7;
            }
            // A file at depth d climbs to the crate root with d supers
            // (an inline `mod` adds one; its climbs are harmless here).
            if ups >= depth {
                let mut paths = Vec::new();
                let end = use_tree(s, j, &[], &mut paths);
                out.extend(paths.into_iter().map(|p| (line_of(i), p)));
                i = end.max(j);
                continue;
            }
            i = j;
            continue;
        }
        i += 1;
    }
    out
}

fn allowed(from: &str, path: &[String], table: &BTreeMap<&str, &[&str]>) -> bool {
    let Some(target) = path.first() else {
        return true;
    };
    if target == from || !table.contains_key(target.as_str()) {
        return true;
    }
    let item = path.get(1).map(|i| format!("{target}::{i}"));
    table[from]
        .iter()
        .any(|a| *a == target.as_str() || Some(a.to_string()) == item)
}

/// The library crates split out of `src/`, as the modules they were.
const CRATES: &[(&str, &str)] = &[
    ("toolcage-text", "text"),
    ("toolcage-policy", "policy"),
    ("toolcage-broker", "broker"),
    ("toolcage-sandbox", "sandbox"),
];

fn top() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `toolcage_policy::x` → `crate::policy::x`, and so on for each crate.
fn crate_paths_as_modules(text: &str) -> String {
    let mut text = text.to_string();
    for (krate, module) in CRATES {
        let from = format!("{}::", krate.replace('-', "_"));
        text = text.replace(&from, &format!("crate::{module}::"));
    }
    text
}

/// Every Rust file of the workspace with its module path: `src/gate/x.rs`
/// → `[gate, x]`, `crates/toolcage-policy/src/grant.rs` → `[policy,
/// grant]`, and the text as the checker reads it (a crate's
/// `toolcage_policy::` is `crate::policy::`; its own `crate::` stays and
/// names items of its own module).
fn sources() -> Vec<(String, Vec<String>, String)> {
    let mut out = Vec::new();
    let mut files = Vec::new();
    rust_files(&top().join("src"), &mut files);
    for file in files {
        let rel = file.strip_prefix(top().join("src")).unwrap().to_path_buf();
        let module = module_path(&rel);
        let text = std::fs::read_to_string(&file).unwrap();
        out.push((format!("src/{}", rel.display()), module, text));
    }
    for (krate, module_name) in CRATES {
        let root = top().join("crates").join(krate).join("src");
        let mut files = Vec::new();
        rust_files(&root, &mut files);
        for file in files {
            let rel = file.strip_prefix(&root).unwrap().to_path_buf();
            let mut module = vec![module_name.to_string()];
            if rel != Path::new("lib.rs") {
                module.extend(module_path(&rel));
            }
            let mut text = std::fs::read_to_string(&file).unwrap();
            for (other, name) in CRATES {
                text = text.replace(
                    &format!("{}::", other.replace('-', "_")),
                    &format!("crate::{name}::"),
                );
            }
            let shown = format!("crates/{krate}/src/{}", rel.display());
            out.push((shown, module, text));
        }
    }
    out
}

#[test]
fn arrows_point_down() {
    let table: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    let mut wrong = Vec::new();
    let mut seen = 0;
    for (shown, module, text) in sources() {
        let Some(top) = module.first() else { continue };
        if top == "lib" || top == "main" {
            continue;
        }
        assert!(
            table.contains_key(top.as_str()),
            "{shown}: module '{top}' is not in the table of tests/architecture.rs and ARCHITECTURE.md: add it"
        );
        // A crate's own modules sit one level higher than they did in src/.
        let depth = if shown.starts_with("crates/") {
            module.len() - 1
        } else {
            module.len()
        };
        for (line, path) in references(&text, depth) {
            seen += 1;
            if !allowed(top, &path, &table) {
                wrong.push(format!(
                    "{shown}:{line}: {top} uses {} (allowed: {})",
                    path.join("::"),
                    table[top.as_str()].join(", ")
                ));
            }
        }
    }
    assert!(
        seen > 100,
        "the scan found only {seen} references: is it broken?"
    );
    assert!(
        wrong.is_empty(),
        "imports against the arrows (see ARCHITECTURE.md, 'Dependencies'):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn crate_manifests_name_only_the_crates_below() {
    let table: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    for (krate, module) in CRATES {
        let manifest = top().join("crates").join(krate).join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest)
            .unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
        let value: toml::Table = toml::from_str(&text).unwrap();
        let deps = value.get("dependencies").and_then(|d| d.as_table());
        for name in deps.into_iter().flat_map(|d| d.keys()) {
            let Some((_, below)) = CRATES.iter().find(|(c, _)| c == name) else {
                assert!(
                    !name.starts_with("toolcage"),
                    "crates/{krate}: depends on {name}, which is above it"
                );
                continue;
            };
            assert!(
                table[module].contains(below),
                "crates/{krate}/Cargo.toml: depends on {name}, but {module} may use only {:?}",
                table[module]
            );
        }
    }
}

#[test]
fn unsafe_lives_in_the_sandbox_only() {
    let mut found = Vec::new();
    for (shown, module, text) in sources() {
        if module.first().is_some_and(|m| m == "sandbox") {
            continue;
        }
        let code = strip_comments(&text);
        for (n, line) in code.lines().enumerate() {
            let words = line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
            if words.into_iter().any(|w| w == "unsafe") && !line.contains('"') {
                found.push(format!("{shown}:{}", n + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "unsafe outside the sandbox crate: {found:?}"
    );
}

/// Whether a crate root's text forbids `unsafe` (outside comments).
fn forbids_unsafe(lib: &str) -> bool {
    strip_comments(lib)
        .lines()
        .any(|l| l.trim() == "#![forbid(unsafe_code)]")
}

/// Every crate but the sandbox says so at its root, so the compiler holds
/// the line too (the broker reads the confined tool's bytes).
#[test]
fn every_other_crate_forbids_unsafe() {
    let mut roots = vec![("src/lib.rs".to_string(), top().join("src/lib.rs"))];
    for (krate, module) in CRATES.iter().filter(|(_, m)| *m != "sandbox") {
        let lib = top().join("crates").join(krate).join("src/lib.rs");
        roots.push((format!("{module}: crates/{krate}/src/lib.rs"), lib));
    }
    let lax: Vec<String> = roots
        .into_iter()
        .filter(|(_, lib)| !forbids_unsafe(&std::fs::read_to_string(lib).unwrap()))
        .map(|(shown, _)| shown)
        .collect();
    assert!(lax.is_empty(), "no #![forbid(unsafe_code)] at: {lax:?}");
    // The checker itself: a comment does not count, the attribute does.
    assert!(!forbids_unsafe("// #![forbid(unsafe_code)]\n"));
    assert!(forbids_unsafe("//! doc\n#![forbid(unsafe_code)]\n"));
}

/// The checker itself: an upward import is caught, in every spelling.
#[test]
fn the_checker_sees_upward_imports() {
    let table: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    let text = "use crate::cli::status;\nuse crate::{text::one_line, call::Engine};\n\
                fn f() { crate::policy::line_at(\"\", 0); }\n// crate::mcp::x in a comment\n";
    let refs = references(text, 2);
    let bad: Vec<String> = refs
        .iter()
        .filter(|(_, p)| !allowed("discover", p, &table))
        .map(|(l, p)| format!("{l}:{}", p.join("::")))
        .collect();
    assert_eq!(
        bad,
        ["1:cli::status", "2:call::Engine", "3:policy::line_at"]
    );
    // Control: the same file's allowed uses pass.
    assert!(allowed(
        "discover",
        &["text".into(), "one_line".into()],
        &table
    ));
    assert!(allowed(
        "discover",
        &["policy".into(), "Requests".into()],
        &table
    ));
    // A library crate that names a crate above it, by its crate name.
    let from_policy =
        crate_paths_as_modules("use toolcage_sandbox::run;\nuse toolcage_text::one_line;\n");
    let bad: Vec<String> = references(&from_policy, 1)
        .iter()
        .filter(|(_, p)| !allowed("policy", p, &table))
        .map(|(l, p)| format!("{l}:{}", p.join("::")))
        .collect();
    assert_eq!(bad, ["1:sandbox::run"]);
    // The broker sits below the sandbox: naming it is upward; the sandbox
    // naming the broker is not.
    let from_broker = crate_paths_as_modules(
        "use toolcage_sandbox::Command;\nuse toolcage_policy::DomainPolicy;\n",
    );
    let bad: Vec<String> = references(&from_broker, 1)
        .iter()
        .filter(|(_, p)| !allowed("broker", p, &table))
        .map(|(l, p)| format!("{l}:{}", p.join("::")))
        .collect();
    assert_eq!(bad, ["1:sandbox::Command"]);
    let from_sandbox = crate_paths_as_modules("use toolcage_broker::proxy::Proxy;\n");
    assert!(
        references(&from_sandbox, 1)
            .iter()
            .all(|(_, p)| allowed("sandbox", p, &table))
    );
    let climbs = references("use super::super::cli::x;\nuse super::y;\n", 2);
    assert_eq!(climbs, [(1, vec!["cli".to_string(), "x".to_string()])]);
}

// The file-level import graph: no file imports one that imports it back,
// through any number of files (ARCHITECTURE.md, "Dependencies").

/// `text` with comments, string and character literals blanked to spaces
/// (newlines kept), so a brace or a path inside one is not code.
fn blank_literals(text: &str) -> String {
    let s: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < s.len() {
        let at = |j: usize| s.get(j).copied();
        if s[i] == '/' && at(i + 1) == Some('/') {
            while i < s.len() && s[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if s[i] == '/' && at(i + 1) == Some('*') {
            let mut depth = 0;
            while i < s.len() {
                if s[i] == '/' && at(i + 1) == Some('*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if s[i] == '*' && at(i + 1) == Some('/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(s[i]));
                    i += 1;
                }
            }
        } else if s[i] == 'r'
            && matches!(at(i + 1), Some('"' | '#'))
            && (i == 0 || !(s[i - 1].is_alphanumeric() || s[i - 1] == '_'))
        {
            // A raw string r"..." or r#"..."#.
            let mut hashes = 0;
            let mut j = i + 1;
            while s.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if s.get(j) != Some(&'"') {
                out.push(s[i]);
                i += 1;
                continue;
            }
            j += 1;
            let closes = |j: usize| {
                s.get(j) == Some(&'"') && (1..=hashes).all(|h| s.get(j + h) == Some(&'#'))
            };
            while j < s.len() && !closes(j) {
                j += 1;
            }
            let end = (j + 1 + hashes).min(s.len());
            out.extend(s[i..end].iter().map(|&c| blank(c)));
            i = end;
        } else if s[i] == '"' {
            let mut j = i + 1;
            while j < s.len() && s[j] != '"' {
                j += if s[j] == '\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(s.len());
            out.extend(s[i..end].iter().map(|&c| blank(c)));
            i = end;
        } else if s[i] == '\'' {
            // 'x' or '\n' is a character; 'a without a closing quote is a
            // lifetime.
            let end = match (at(i + 1), at(i + 2)) {
                (Some('\\'), _) => (i + 2..s.len()).find(|&j| s[j] == '\'').map(|j| j + 1),
                (Some(_), Some('\'')) => Some(i + 3),
                _ => None,
            };
            match end {
                Some(end) => {
                    out.extend(s[i..end].iter().map(|&c| blank(c)));
                    i = end;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    out
}

/// The tokens of blanked code: identifiers (and numbers), `::`, and single
/// punctuation characters.
fn tokens(code: &str) -> Vec<String> {
    let s: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < s.len() && (s[i].is_alphanumeric() || s[i] == '_') {
                i += 1;
            }
            out.push(s[start..i].iter().collect());
        } else if c == ':' && s.get(i + 1) == Some(&':') {
            out.push("::".to_string());
            i += 2;
        } else {
            out.push(c.to_string());
            i += 1;
        }
    }
    out
}

/// The index just past the group that opens at `t[i]` (`{`, `(`, `[`).
fn past_group(t: &[String], i: usize) -> usize {
    let mut depth = 0usize;
    let mut j = i;
    while j < t.len() {
        match t[j].as_str() {
            "{" | "(" | "[" => depth += 1,
            "}" | ")" | "]" => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return j + 1;
                }
            }
            _ => {}
        }
        j += 1;
    }
    j
}

/// Tokens without test-only items: what follows `#[cfg(test)]` (a `mod`
/// with its body, a `use`, a `fn` or `impl` with its body). Also returns
/// the modules declared test-only (`#[cfg(test)] mod x;`).
fn without_test_items(t: &[String]) -> (Vec<String>, Vec<String>) {
    let cfg_test = ["#", "[", "cfg", "(", "test", ")", "]"];
    let mut out = Vec::new();
    let mut test_mods = Vec::new();
    let mut i = 0;
    while i < t.len() {
        if !t[i..].iter().take(7).eq(cfg_test.iter()) {
            out.push(t[i].clone());
            i += 1;
            continue;
        }
        let mut j = i + 7;
        // Further attributes, then the item.
        while t.get(j).is_some_and(|x| x == "#") {
            j = past_group(t, j + 1);
        }
        let item_start = j;
        while j < t.len() && t[j] != ";" && t[j] != "{" {
            if t[j] == "(" || t[j] == "[" {
                j = past_group(t, j);
            } else {
                j += 1;
            }
        }
        let head = &t[item_start..j.min(t.len())];
        if let Some(at) = head.iter().position(|x| x == "mod")
            && let Some(name) = head.get(at + 1)
            && t.get(j).is_some_and(|x| x == ";")
        {
            test_mods.push(name.clone());
        }
        i = if t.get(j).is_some_and(|x| x == "{") && !head.iter().any(|x| x == "use") {
            past_group(t, j)
        } else {
            // A `use` with a braced tree, or an item ending in `;`.
            (j..t.len())
                .find(|&k| t[k] == ";")
                .map_or(t.len(), |k| k + 1)
        };
    }
    (out, test_mods)
}

/// One path a file names: as written (`super::x::Y`), and the name a
/// `use` binds with it.
#[derive(Debug)]
struct Named {
    path: Vec<String>,
    binds: Option<String>,
}

/// Parse a use tree at `t[i]` under `prefix`; returns the end.
fn use_paths(t: &[String], mut i: usize, prefix: &[String], out: &mut Vec<Named>) -> usize {
    let mut path = prefix.to_vec();
    loop {
        match t.get(i).map(String::as_str) {
            Some("{") => {
                i += 1;
                while i < t.len() && t[i] != "}" {
                    if t[i] == "," {
                        i += 1;
                        continue;
                    }
                    let next = use_paths(t, i, &path, out);
                    i = if next == i { i + 1 } else { next };
                }
                return i + 1;
            }
            Some("*") => {
                path.push("*".into());
                out.push(Named { path, binds: None });
                return i + 1;
            }
            Some("self") if !path.is_empty() && t.get(i + 1).is_none_or(|x| x != "::") => {
                // `a::{self, b}`: `a` itself.
                let binds = path.last().cloned();
                let (binds, end) = alias(t, i + 1, binds);
                out.push(Named { path, binds });
                return end;
            }
            Some(x) if x.chars().all(|c| c.is_alphanumeric() || c == '_') => {
                path.push(x.to_string());
                if t.get(i + 1).is_some_and(|x| x == "::") {
                    i += 2;
                    continue;
                }
                let (binds, end) = alias(t, i + 1, path.last().cloned());
                out.push(Named { path, binds });
                return end;
            }
            Some("::") => i += 1, // `use ::std::...`
            _ => return i,
        }
    }
}

/// `as NAME` at `t[i]`, if there: the name bound, and the end.
fn alias(t: &[String], i: usize, binds: Option<String>) -> (Option<String>, usize) {
    if t.get(i).is_some_and(|x| x == "as") {
        let name = t.get(i + 1).filter(|x| *x != "_").cloned();
        (name, i + 2)
    } else {
        (binds, i)
    }
}

/// Every path a file's tokens name that may lead to a file of its crate:
/// each path of each `use` tree, and each path in the code that starts
/// with `crate::`, `super::`, `self::` or the name of one of `children`
/// (the file's child modules).
fn named_paths(t: &[String], children: &[String]) -> Vec<Named> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < t.len() {
        let word = t[i].as_str();
        if word == "pub" && t.get(i + 1).is_some_and(|x| x == "(") {
            // `pub(crate)`, `pub(in crate::x)`: a visibility, not a path.
            i = past_group(t, i + 1);
            continue;
        }
        if word == "use" {
            i = use_paths(t, i + 1, &[], &mut out);
            continue;
        }
        let after_path = i > 0 && (t[i - 1] == "::" || t[i - 1] == ".");
        let starts =
            matches!(word, "crate" | "super" | "self") || children.iter().any(|c| c == word);
        if starts && !after_path && t.get(i + 1).is_some_and(|x| x == "::") {
            let mut path = vec![word.to_string()];
            let mut j = i + 1;
            while t.get(j).is_some_and(|x| x == "::")
                && t.get(j + 1)
                    .is_some_and(|x| x.chars().all(|c| c.is_alphanumeric() || c == '_'))
            {
                path.push(t[j + 1].clone());
                j += 2;
            }
            out.push(Named { path, binds: None });
            i = j;
            continue;
        }
        i += 1;
    }
    out
}

/// A file as the graph reads it: `(shown, module path in its crate, text)`.
type Source = (String, Vec<String>, String);

/// Module path → (the file as shown, the module paths it imports).
type Graph = BTreeMap<Vec<String>, (String, Vec<Vec<String>>)>;

/// One file of a crate, read for the import graph.
struct GraphFile {
    shown: String,
    named: Vec<Named>,
}

/// The module path `named` leads to from module `here`, or `None` when it
/// leaves the crate (`std::...`, another crate).
fn absolute(
    here: &[String],
    path: &[String],
    files: &BTreeMap<Vec<String>, GraphFile>,
) -> Option<Vec<String>> {
    let first = path.first()?;
    let mut abs = match first.as_str() {
        "crate" => Vec::new(),
        "self" => here.to_vec(),
        "super" => {
            let ups = path.iter().take_while(|p| *p == "super").count();
            let mut base = here.to_vec();
            base.truncate(here.len().saturating_sub(ups));
            base.extend(path[ups..].iter().cloned());
            return Some(base);
        }
        _ => {
            let mut child = here.to_vec();
            child.push(first.clone());
            if !files.contains_key(&child) {
                return None;
            }
            here.to_vec()
        }
    };
    let skip = usize::from(matches!(first.as_str(), "crate" | "self"));
    abs.extend(path[skip..].iter().cloned());
    Some(abs)
}

/// The file that defines what `abs` names: the deepest file module on
/// the way, and if that file only imports the item, the file it imports
/// it from (a re-export is followed to where the item is defined).
fn defining_file(
    abs: &[String],
    files: &BTreeMap<Vec<String>, GraphFile>,
    hops: usize,
) -> Vec<String> {
    let k = (0..=abs.len())
        .rev()
        .find(|&k| files.contains_key(&abs[..k]))
        .unwrap_or(0);
    let file = abs[..k].to_vec();
    let Some(item) = abs.get(k) else { return file };
    if hops > 8 {
        return file;
    }
    let bound = files
        .get(&file)
        .and_then(|f| f.named.iter().find(|n| n.binds.as_ref() == Some(item)));
    match bound.and_then(|n| absolute(&file, &n.path, files)) {
        Some(mut target) => {
            target.extend(abs[k + 1..].iter().cloned());
            defining_file(&target, files, hops + 1)
        }
        None => file,
    }
}

/// `(shown, module path in its crate, text)` for each file of one crate →
/// file → the files it imports. A `mod x;` declaration is no import, nor
/// is a `pub use` of the file's own descendants (a parent declaring and
/// re-exporting its children does not depend on them); `use super::Y`
/// with `Y` defined in the parent is an import of the parent. Test-only
/// files (`tests.rs`, `#[cfg(test)] mod x;`) and items are left out.
fn import_graph(sources: &[(String, Vec<String>, String)]) -> Graph {
    let mut tokenized = BTreeMap::new();
    let mut test_only = Vec::new();
    for (shown, module, text) in sources {
        if module.iter().any(|m| m == "tests") {
            continue;
        }
        let (t, test_mods) = without_test_items(&tokens(&blank_literals(text)));
        for m in test_mods {
            let mut child = module.clone();
            child.push(m);
            test_only.push(child);
        }
        tokenized.insert(module.clone(), (shown.clone(), t));
    }
    for m in &test_only {
        tokenized.retain(|k, _| !k.starts_with(m));
    }
    let modules: Vec<Vec<String>> = tokenized.keys().cloned().collect();
    let files: BTreeMap<Vec<String>, GraphFile> = tokenized
        .into_iter()
        .map(|(module, (shown, t))| {
            let children: Vec<String> = modules
                .iter()
                .filter(|m| m.len() == module.len() + 1 && m.starts_with(&module))
                .map(|m| m[module.len()].clone())
                .collect();
            let named = named_paths(&t, &children);
            (module, GraphFile { shown, named })
        })
        .collect();
    let mut graph = BTreeMap::new();
    for (module, file) in &files {
        let mut to: Vec<Vec<String>> = Vec::new();
        for n in &file.named {
            let Some(abs) = absolute(module, &n.path, &files) else {
                continue;
            };
            let target = defining_file(&abs, &files, 0);
            let own_child = target.len() > module.len() && target.starts_with(module);
            if target == *module || own_child || to.contains(&target) {
                continue;
            }
            to.push(target);
        }
        graph.insert(module.clone(), (file.shown.clone(), to));
    }
    graph
}

/// Every cycle of the graph a depth-first walk meets, as the files in
/// order, the first repeated at the end.
fn import_cycles(graph: &Graph) -> Vec<Vec<String>> {
    fn walk(
        at: &Vec<String>,
        graph: &Graph,
        stack: &mut Vec<Vec<String>>,
        done: &mut std::collections::BTreeSet<Vec<String>>,
        cycles: &mut Vec<Vec<String>>,
    ) {
        stack.push(at.clone());
        for next in &graph[at].1 {
            if let Some(from) = stack.iter().position(|m| m == next) {
                let mut cycle: Vec<String> =
                    stack[from..].iter().map(|m| graph[m].0.clone()).collect();
                cycle.push(graph[next].0.clone());
                cycles.push(cycle);
            } else if graph.contains_key(next) && !done.contains(next) {
                walk(next, graph, stack, done, cycles);
            }
        }
        stack.pop();
        done.insert(at.clone());
    }
    let mut done = std::collections::BTreeSet::new();
    let mut cycles = Vec::new();
    for start in graph.keys() {
        if !done.contains(start) {
            walk(start, graph, &mut Vec::new(), &mut done, &mut cycles);
        }
    }
    cycles
}

/// Each crate's files as `(shown, module path in the crate, text)`: the
/// top crate's library (`src/`, without the binary's `main.rs`) and each
/// crate under `crates/`.
fn crates_for_graph() -> Vec<(String, Vec<Source>)> {
    let mut roots = vec![("toolcage".to_string(), "src".to_string())];
    for (krate, _) in CRATES {
        roots.push((krate.to_string(), format!("crates/{krate}/src")));
    }
    roots
        .into_iter()
        .map(|(name, dir)| {
            let root = top().join(&dir);
            let mut files = Vec::new();
            rust_files(&root, &mut files);
            let sources = files
                .into_iter()
                .filter(|f| f != &root.join("main.rs"))
                .map(|f| {
                    let rel = f.strip_prefix(&root).unwrap().to_path_buf();
                    let module = if rel == Path::new("lib.rs") {
                        Vec::new()
                    } else {
                        module_path(&rel)
                    };
                    let text = std::fs::read_to_string(&f).unwrap();
                    (format!("{dir}/{}", rel.display()), module, text)
                })
                .collect();
            (name, sources)
        })
        .collect()
}

/// No import cycles between the files of any crate: a file never imports
/// one that (through others) imports it back. Arrows from a file to its
/// own descendants (a parent declaring, re-exporting or using its
/// children) are how a module is built and are left out; a child
/// importing its ancestor is an import of an ancestor (see
/// ARCHITECTURE.md), not a cycle by itself.
#[test]
fn no_import_cycles_between_files() {
    let mut found = Vec::new();
    let mut edges = 0;
    for (krate, sources) in crates_for_graph() {
        let graph = import_graph(&sources);
        edges += graph.values().map(|(_, to)| to.len()).sum::<usize>();
        for cycle in import_cycles(&graph) {
            found.push(format!("{krate}: {}", cycle.join(" -> ")));
        }
    }
    assert!(
        edges > 300,
        "the scan found only {edges} imports: is it broken?"
    );
    assert!(
        found.is_empty(),
        "import cycles between files (move what both sides need into a file of its own):\n{}",
        found.join("\n")
    );
}

/// The cycle checker itself: two files importing each other (here
/// through `super::` and the crate root's re-export) are a cycle; a
/// parent declaring, re-exporting and using its children while they
/// import it is not (that is an import of an ancestor), nor is what
/// comments, strings and test-only code name.
#[test]
fn the_checker_sees_import_cycles() {
    let files = |b: &str| {
        [
            ("lib.rs", "mod a;\nmod b;\nmod c;\npub use a::Y;\n"),
            (
                "a.rs",
                "use super::b::helper;\npub struct Y;\nfn f() { helper() }\n",
            ),
            ("b.rs", b),
            (
                "c/mod.rs",
                "mod d;\nmod e;\npub use d::Z;\npub struct W;\nfn g() { e::h() }\n",
            ),
            ("c/d.rs", "use super::W;\npub struct Z;\n"),
            ("c/e.rs", "use super::Z;\npub fn h(_: Z) {}\n"),
        ]
        .into_iter()
        .map(|(rel, text)| {
            let module = if rel == "lib.rs" {
                Vec::new()
            } else {
                module_path(Path::new(rel))
            };
            (rel.to_string(), module, text.to_string())
        })
        .collect::<Vec<_>>()
    };
    let cycle = files("use super::Y;\npub fn helper() {}\n");
    assert_eq!(
        import_cycles(&import_graph(&cycle)),
        [["a.rs", "b.rs", "a.rs"]]
    );
    // `c/e.rs` names `Z` through its parent's re-export: an import of
    // `c/d.rs`, where `Z` is defined; `c/d.rs` imports its parent.
    let graph = import_graph(&cycle);
    let at = |m: &[&str]| {
        graph[&m.iter().map(|s| s.to_string()).collect::<Vec<_>>()]
            .1
            .clone()
    };
    assert_eq!(at(&["c", "e"]), [vec!["c".to_string(), "d".to_string()]]);
    assert_eq!(at(&["c", "d"]), [vec!["c".to_string()]]);
    assert!(at(&["c"]).is_empty());
    // Control: the same files, `b.rs` naming `Y` only in a comment, a
    // string and its tests.
    let acyclic = files(
        "// use super::Y;\npub fn helper() -> &'static str { let _ = '{'; \"super::Y\" }\n\
         #[cfg(test)]\nmod tests {\n    use super::super::Y;\n}\n",
    );
    assert!(import_cycles(&import_graph(&acyclic)).is_empty());
    assert_eq!(
        import_graph(&acyclic)[&vec!["a".to_string()]].1,
        [vec!["b".to_string()]]
    );
}

/// The design file that once lived outside the repository: nothing may
/// cite it (spelled in two pieces so this file does not).
const OUT_OF_TREE_DESIGN: &str = concat!("DESIGN", ".md");

/// Every text file of the repository, with its path from the top:
/// sources, tests, manifests, documents, policies, CI scripts. Build
/// output and git's own files are left out.
fn repository_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().unwrap_or_default().to_string_lossy();
        if p.is_dir() {
            if !matches!(name.as_ref(), "target" | ".git" | "node_modules") {
                repository_files(&p, out);
            }
        } else if p.is_file() {
            out.push(p);
        }
    }
}

/// GitHub's anchors of a Markdown text's headings: lower case, letters,
/// digits, `-` and `_` kept, spaces made `-`, the rest dropped; a repeated
/// one gets `-1`, `-2`, ... Lines inside code fences are not headings.
fn anchors(markdown: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut fenced = false;
    for line in markdown.lines() {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        if fenced || !t.starts_with('#') {
            continue;
        }
        let text = t.trim_start_matches('#');
        if !(text.is_empty() || text.starts_with(' ')) {
            continue;
        }
        let slug: String = text
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let seen = out
            .iter()
            .filter(|a| {
                *a == &slug
                    || a.strip_prefix(&format!("{slug}-"))
                        .is_some_and(|n| n.parse::<u32>().is_ok())
            })
            .count();
        out.push(match seen {
            0 => slug,
            n => format!("{slug}-{n}"),
        });
    }
    out
}

/// The documents named in `text`, each with its line: `docs/<page>.md`
/// and `docs/<page>.md#anchor` anywhere (a comment, a test, a document),
/// and in a Markdown file (`markdown`) every relative link `](PATH)`,
/// `](PATH#anchor)` or `](#anchor)`. Paths are as written.
fn cited_documents(text: &str, markdown: bool) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let name_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | '#');
    for (i, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("docs/") {
            let before = rest[..at].chars().next_back();
            let after = &rest[at..];
            rest = &rest[at + "docs/".len()..];
            if before
                .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
            {
                continue; // part of another path or a URL
            }
            let cited: String = after.chars().take_while(|&c| name_char(c)).collect();
            let cited = cited.trim_end_matches(['.', '/']);
            if cited.split('#').next().is_some_and(|p| p.ends_with(".md")) {
                out.push((i + 1, cited.to_string()));
            }
        }
        if markdown {
            for link in line.split("](").skip(1) {
                let Some(end) = link.find(')') else { continue };
                let target = &link[..end];
                if target.contains("://") || target.starts_with("mailto:") || target.contains(' ') {
                    continue;
                }
                out.push((i + 1, format!("./{target}")));
            }
        }
    }
    out
}

/// What is wrong with one citation made in file `from`: the file it
/// names does not exist, or the heading its anchor names does not.
fn broken_citation(from: &Path, cited: &str) -> Option<String> {
    let (path, anchor) = match cited.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (cited, None),
    };
    let target = match path.strip_prefix("./") {
        Some("") => from.to_path_buf(),
        Some(relative) => from.parent().unwrap_or(Path::new("")).join(relative),
        None => top().join(path),
    };
    if !target.exists() {
        return Some(format!("{cited}: no file {}", target.display()));
    }
    let anchor = anchor?;
    if target.extension().is_none_or(|x| x != "md") {
        return None;
    }
    let text = std::fs::read_to_string(&target).unwrap_or_default();
    if anchors(&text).iter().any(|a| a == anchor) {
        return None;
    }
    Some(format!(
        "{cited}: no heading #{anchor} in {}",
        target.display()
    ))
}

/// The repository is self-contained: no file cites the design file that
/// is not in it, and every document cited (`docs/<page>.md#anchor` in a
/// comment, a test or a document; a relative link in a Markdown file)
/// exists with the heading named.
#[test]
fn cited_documents_exist() {
    let mut files = Vec::new();
    repository_files(&top(), &mut files);
    let mut bad = Vec::new();
    for file in &files {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue; // not text
        };
        let rel = file
            .strip_prefix(top())
            .unwrap_or(file)
            .display()
            .to_string();
        for (i, line) in text.lines().enumerate() {
            if line.contains(OUT_OF_TREE_DESIGN) {
                bad.push(format!(
                    "{rel}:{}: cites {OUT_OF_TREE_DESIGN}, which is not in the repository \
                     (cite the docs/ page and section instead)",
                    i + 1
                ));
            }
        }
        let markdown = file.extension().is_some_and(|x| x == "md");
        for (line, cited) in cited_documents(&text, markdown) {
            if let Some(why) = broken_citation(file, &cited) {
                bad.push(format!("{rel}:{line}: {why}"));
            }
        }
    }
    assert!(bad.is_empty(), "broken citations:\n{}", bad.join("\n"));
    // The design pages exist.
    for page in ["cli", "policy", "sandbox", "results", "formats", "mcp"] {
        assert!(
            top().join(format!("docs/{page}.md")).is_file(),
            "docs/{page}.md"
        );
    }
}

/// The citation checker itself: a missing page, a missing heading and
/// the out-of-tree design file are caught; the same citations of what
/// exists pass.
#[test]
fn the_citation_checker_sees_broken_citations() {
    let here = top().join("ARCHITECTURE.md");
    // `DOCS/` in the source, so the test above does not read these.
    let text = "// see DOCS/cli.md#exit-statuses and DOCS/nothing.md\n\
                // DOCS/cli.md#no-such-heading, src/cli/docs.rs, https://example.org/DOCS/x.md\n\
                [a](DOCS/policy.md#the-trust-rule) [b](#the-call-pipeline) [c](#nowhere)\n"
        .replace("DOCS/", "docs/");
    let cited = cited_documents(&text, true);
    // Compared as `DOCS/` for the same reason.
    let found: Vec<String> = cited
        .iter()
        .map(|(l, c)| format!("{l}:{c}").replace("docs/", "DOCS/"))
        .collect();
    assert_eq!(
        found,
        [
            "1:DOCS/cli.md#exit-statuses",
            "1:DOCS/nothing.md",
            "2:DOCS/cli.md#no-such-heading",
            "3:DOCS/policy.md#the-trust-rule",
            "3:./DOCS/policy.md#the-trust-rule",
            "3:./#the-call-pipeline",
            "3:./#nowhere",
        ]
    );
    let broken: Vec<String> = cited
        .iter()
        .filter(|(_, c)| broken_citation(&here, c).is_some())
        .map(|(_, c)| c.replace("docs/", "DOCS/"))
        .collect();
    assert_eq!(
        broken,
        [
            "DOCS/nothing.md",
            "DOCS/cli.md#no-such-heading",
            "./#nowhere"
        ]
    );
    let a = anchors("# A b\n```\n# not a heading\n```\n## A b\n### `x --y` (z)\n#tag\n");
    assert_eq!(a, ["a-b", "a-b-1", "x---y-z"]);
    assert!(format!("see {OUT_OF_TREE_DESIGN}").contains(OUT_OF_TREE_DESIGN));
}

/// The identifiers of `text` outside comments and string literals.
fn code_words(text: &str) -> std::collections::BTreeSet<String> {
    let mut words = std::collections::BTreeSet::new();
    for line in strip_comments(text).lines() {
        // Drop "..." spans: a message that mentions a format is not a use.
        let code: String = line.split('"').step_by(2).collect::<Vec<_>>().join(" ");
        words.extend(
            code.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|w| !w.is_empty())
                .map(str::to_string),
        );
    }
    words
}

/// The formats of `src/discover/` (its folders but `tests`) and its
/// shared files (`*.rs` but `mod.rs`, and `fuzz.rs`: the fuzz targets'
/// entry points, one per format's parser).
fn discover_layout() -> (Vec<String>, Vec<String>) {
    let dir = top().join("src/discover");
    let mut formats = Vec::new();
    let mut shared = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if e.path().is_dir() && name != "tests" {
            formats.push(name);
        } else if let Some(stem) = name.strip_suffix(".rs")
            && !["mod", "fuzz"].contains(&stem)
        {
            shared.push(stem.to_string());
        }
    }
    formats.sort();
    shared.sort();
    (formats, shared)
}

/// `(owner, identifier)` for every identifier in the code of `files`
/// (paths relative to `src/discover/`): the owner is the format whose
/// folder holds the file, `mod` for `mod.rs`, or the shared file's stem.
fn users_in_discover(files: &[(String, String)], formats: &[String]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (rel, text) in files {
        let owner = match rel.split_once('/') {
            Some((f, _)) if formats.iter().any(|x| x == f) => f.to_string(),
            Some(_) => continue, // tests/
            None if rel == "mod.rs" => "mod".to_string(),
            None => rel.trim_end_matches(".rs").to_string(),
        };
        for w in code_words(text) {
            out.push((owner.clone(), w));
        }
    }
    out.sort();
    out.dedup();
    out
}

/// One folder per format under `src/discover/` (ARCHITECTURE.md, "Where
/// each format lives"): a format's folder names no other format, and a
/// file at `discover/` level is shared (discovery itself or at least two
/// formats use it), so a helper of one format lives in its folder.
#[test]
fn each_format_lives_in_its_own_folder() {
    let (formats, shared) = discover_layout();
    assert!(
        formats.len() >= 5 && shared.contains(&"fsread".to_string()),
        "the layout scan is broken: {formats:?} {shared:?}"
    );
    let root = top().join("src/discover");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let files: Vec<(String, String)> = files
        .iter()
        .map(|f| {
            let rel = f
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (rel, std::fs::read_to_string(f).unwrap())
        })
        .collect();
    let wrong = layout_faults(&users_in_discover(&files, &formats), &formats, &shared);
    assert!(
        wrong.is_empty(),
        "src/discover/ is one folder per format (see ARCHITECTURE.md):\n{}",
        wrong.join("\n")
    );
}

fn layout_faults(uses: &[(String, String)], formats: &[String], shared: &[String]) -> Vec<String> {
    let mut wrong = Vec::new();
    for (owner, word) in uses {
        if formats.contains(owner) && formats.contains(word) && owner != word {
            wrong.push(format!("src/discover/{owner}/ uses the format {word}"));
        }
    }
    for s in shared {
        let by: Vec<&str> = uses
            .iter()
            .filter(|(o, w)| w == s && o != s)
            .map(|(o, _)| o.as_str())
            .collect();
        if !by.contains(&"mod")
            && by
                .iter()
                .filter(|o| formats.iter().any(|f| f == *o))
                .count()
                < 2
        {
            wrong.push(format!(
                "src/discover/{s}.rs is at discover/ level but only {by:?} use it: move it into that format's folder"
            ));
        }
    }
    wrong
}

/// The layout checker itself: a format naming another, and a helper of
/// one format left at `discover/` level, are caught; comments and
/// messages are not uses.
#[test]
fn the_layout_checker_sees_a_scattered_format() {
    let formats = ["agentdir".to_string(), "opencrabs".to_string()];
    let shared = ["crabparams".to_string(), "fsread".to_string()];
    let files = [
        (
            "agentdir/mod.rs".to_string(),
            "use super::super::opencrabs::template;\nuse super::fsread;\n".to_string(),
        ),
        (
            "opencrabs/mod.rs".to_string(),
            "use super::{crabparams, fsread};\n// like agentdir\nfn f() { m(\"agentdir\") }\n"
                .to_string(),
        ),
    ];
    let uses = users_in_discover(&files, &formats);
    assert_eq!(
        layout_faults(&uses, &formats, &shared),
        [
            "src/discover/agentdir/ uses the format opencrabs",
            "src/discover/crabparams.rs is at discover/ level but only [\"opencrabs\"] use it: move it into that format's folder",
        ]
    );
    // Control: the same files without the cross use, with the helper
    // used by both formats, pass.
    let files = [
        (
            files[0].0.clone(),
            "use super::{crabparams, fsread};\n".to_string(),
        ),
        files[1].clone(),
    ];
    let uses = users_in_discover(&files, &formats);
    assert!(layout_faults(&uses, &formats, &shared).is_empty());
}
