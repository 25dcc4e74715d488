//! Parsing policy files, and turning positions in them into line numbers
//! and dotted key paths for one-line error messages.

use super::error::PolicyError;
use super::file::{PolicyFile, SECTIONS};
use std::sync::Arc;
use toolcage_text::line_at;

/// The text of a policy file, kept to turn key paths into line numbers.
#[derive(Debug)]
pub(crate) struct FileText {
    /// How the file is named in messages: its path, or `<shipped>/NAME.toml`.
    pub label: String,
    pub text: String,
}

impl FileText {
    /// The 1-based line of `key` (with an optional array index), or of the
    /// closest enclosing key that exists.
    pub(crate) fn line_of(&self, key: &[String], index: Option<usize>) -> usize {
        let Ok(root) = toml::de::DeTable::parse(&self.text) else {
            return 1;
        };
        let mut offset = root.span().start;
        let mut table = Some(root.get_ref());
        let mut value: Option<&toml::Spanned<toml::de::DeValue>> = None;
        for k in key {
            let Some(t) = table else { break };
            let Some((kk, v)) = t.iter().find(|(kk, _)| kk.get_ref().as_ref() == k.as_str()) else {
                break;
            };
            offset = kk.span().start;
            value = Some(v);
            table = match v.get_ref() {
                toml::de::DeValue::Table(t) => Some(t),
                _ => None,
            };
        }
        if let (Some(i), Some(v)) = (index, value)
            && let toml::de::DeValue::Array(a) = v.get_ref()
            && let Some(e) = a.get(i)
        {
            offset = e.span().start;
        }
        line_at(&self.text, offset)
    }

    /// The dotted key path of the innermost key whose key or value covers `pos`.
    fn key_at(&self, pos: usize) -> Vec<String> {
        let Ok(root) = toml::de::DeTable::parse(&self.text) else {
            return Vec::new();
        };
        let mut path = Vec::new();
        find_key(root.get_ref(), pos, &mut path);
        path
    }
}

/// Depth-first search for the key covering `pos`. Tables declared with a
/// `[header]` have spans that do not cover their contents, so every table is
/// searched.
fn find_key(table: &toml::de::DeTable, pos: usize, path: &mut Vec<String>) -> bool {
    let covers = |r: std::ops::Range<usize>| r.start <= pos && pos < r.end.max(r.start + 1);
    for (k, v) in table.iter() {
        path.push(k.get_ref().to_string());
        if let toml::de::DeValue::Table(inner) = v.get_ref()
            && find_key(inner, pos, path)
        {
            return true;
        }
        if covers(k.span()) || covers(v.span()) {
            return true;
        }
        path.pop();
    }
    false
}

/// Parse a policy file, turning any error into a one-line message.
pub(crate) fn parse(file: &Arc<FileText>) -> Result<PolicyFile, PolicyError> {
    toml::from_str::<PolicyFile>(&file.text).map_err(|e| convert_error(file, &e))
}

fn convert_error(file: &FileText, e: &toml::de::Error) -> PolicyError {
    let span = e.span().unwrap_or(0..0);
    let line = line_at(&file.text, span.start);
    let raw = e.message().trim().replace('\n', " ");
    let mut key = file.key_at(span.start);
    let message = if let Some(rest) = raw.strip_prefix("unknown field `") {
        let name = rest.split('`').next().unwrap_or_default().to_string();
        // The key itself is the unknown one: name its parent.
        if key.last() == Some(&name) {
            key.pop();
        }
        let expected = expected_list(&raw);
        format!("unknown key '{name}' (expected one of {expected})")
    } else if let Some(rest) = raw.strip_prefix("unknown variant `") {
        let name = rest.split('`').next().unwrap_or_default();
        format!(
            "invalid value \"{name}\" (expected one of {})",
            expected_list(&raw)
        )
    } else if raw.starts_with("duplicate key") {
        // The line holds `name = ...` (or `[table]` for a table given twice).
        let text = file
            .text
            .lines()
            .nth(line.saturating_sub(1))
            .unwrap_or_default();
        let name = text.split('=').next().unwrap_or_default().trim();
        format!(
            "duplicate key '{name}': each key may be set once in its table (fix: keep one of them)"
        )
    } else {
        raw
    };
    PolicyError::File {
        file: file.label.clone(),
        line,
        key: key.join("."),
        message,
    }
}

/// "... expected one of `a`, `b`" or "expected `a` or `b`" -> "a, b".
fn expected_list(raw: &str) -> String {
    let tail = raw.split("expected").nth(1).unwrap_or_default();
    let names: Vec<&str> = tail
        .split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, s)| s)
        .collect();
    if names.is_empty() {
        SECTIONS.join(", ")
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::{Bytes, Count, Dur, Limit, NetMode};
    use std::time::Duration;

    fn text(s: &str) -> Arc<FileText> {
        Arc::new(FileText {
            label: "/x/p.toml".into(),
            text: s.into(),
        })
    }

    fn err(s: &str) -> String {
        parse(&text(s)).unwrap_err().to_string()
    }

    #[test]
    fn a_duplicate_key_is_named_with_the_fix() {
        let e = err("[limits]\ntimeout = \"1s\"\ntimeout = \"2s\"\n");
        assert!(
            e.contains(":3:") && e.contains("duplicate key 'timeout'") && e.contains("fix:"),
            "{e}"
        );
    }

    #[test]
    fn parses_every_section() {
        let f = parse(&text(
            r#"
[fs]
read = ["/usr"]
add_write = ["out"]
private_tmp = false
[network]
mode = "tcp"
connect = [443]
[env]
allow = ["PATH", "LC_*"]
set = { A = "1" }
[limits]
timeout = "2m"
cpu = "unlimited"
processes = 64
stdout = 1024
[sandbox]
enforcement = "strict"
[requests]
network = true
max_timeout = 600
[approval]
mode = "once-per-args"
[rate_limit]
requests = 5
window = "10s"
[tools.grep.limits]
timeout = "5s"
"#,
        ))
        .unwrap();
        let (body, tools, _) = f.into_parts();
        assert_eq!(body.fs.read, Some(vec!["/usr".to_string()]));
        assert_eq!(body.network.mode, Some(NetMode::Tcp));
        assert_eq!(body.limits.timeout, Some(Dur(Duration::from_secs(120))));
        assert_eq!(body.limits.cpu, Some(Limit::Unlimited));
        assert_eq!(body.limits.processes, Some(Limit::Set(Count(64))));
        assert_eq!(body.limits.stdout, Some(Bytes(1024)));
        assert_eq!(
            body.requests.max_timeout,
            Some(Dur(Duration::from_secs(600)))
        );
        assert_eq!(
            body.approval.mode,
            Some(super::super::ApprovalMode::OncePerArgs)
        );
        assert_eq!(
            tools["grep"].limits.timeout,
            Some(Dur(Duration::from_secs(5)))
        );
    }

    #[test]
    fn bad_duration_names_file_line_and_key() {
        let e = err("[fs]\nread = []\n\n[limits]\ntimeout = \"3x\"\n");
        assert_eq!(
            e,
            "policy /x/p.toml:5: limits.timeout: invalid duration \"3x\" (use e.g. \"30s\", \"500ms\", \"5m\")"
        );
    }

    #[test]
    fn unknown_top_level_key() {
        let e = err("[fs]\nread = []\n[netwrk]\nmode = \"on\"\n");
        assert!(
            e.starts_with(
                "policy /x/p.toml:3: unknown key 'netwrk' (expected one of with, fs, network, env"
            ),
            "{e}"
        );
    }

    #[test]
    fn unknown_nested_key() {
        let e = err("[limits]\ntimeout = \"1s\"\ntimeot = \"2s\"\n");
        assert!(
            e.starts_with(
                "policy /x/p.toml:3: limits: unknown key 'timeot' (expected one of timeout,"
            ),
            "{e}"
        );
    }

    #[test]
    fn unknown_key_in_tool_section() {
        let e = err("[tools.grep]\ntools = {}\n");
        assert!(
            e.starts_with("policy /x/p.toml:2: tools.grep: unknown key 'tools'"),
            "{e}"
        );
    }

    #[test]
    fn bad_enum_value() {
        let e = err("[network]\nmode = \"sometimes\"\n");
        assert_eq!(
            e,
            "policy /x/p.toml:2: network.mode: invalid value \"sometimes\" (expected one of off, on, tcp, domains)"
        );
    }

    #[test]
    fn syntax_error_has_a_line() {
        let e = err("[fs]\nread = [\"/usr\"\n\n");
        assert!(e.starts_with("policy /x/p.toml:"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn wrong_type_and_negative() {
        let e = err("[limits]\nprocesses = -3\n");
        assert_eq!(
            e,
            "policy /x/p.toml:2: limits.processes: a count must not be negative, got -3"
        );
        let e = err("[fs]\nprivate_tmp = \"yes\"\n");
        assert!(e.starts_with("policy /x/p.toml:2: fs.private_tmp: "), "{e}");
    }

    #[test]
    fn line_of_finds_array_elements() {
        let f = text("[fs]\nread = [\n  \"/a\",\n  \"/b\",\n]\n[tools.x.fs]\nwrite = [\"w\"]\n");
        assert_eq!(f.line_of(&["fs".into(), "read".into()], Some(1)), 4);
        assert_eq!(
            f.line_of(
                &["tools".into(), "x".into(), "fs".into(), "write".into()],
                Some(0)
            ),
            7
        );
        assert_eq!(f.line_of(&["nope".into()], None), 1);
    }
}
