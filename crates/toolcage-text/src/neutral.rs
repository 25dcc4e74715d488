//! Neutralising untrusted text before a person sees it on a terminal.
//!
//! Tool names, descriptions, arguments, file names, diagnostics and tool
//! output come from the project or from an MCP client. Printed raw, a control
//! character can move the cursor, erase a line, hide text or forge a line of
//! `toolcage audit`, and a bidirectional override can reorder what is shown.
//! Every human-readable surface passes such text through [`one_line`] or
//! [`multi_line`] first; JSON output needs nothing (serde escapes control
//! characters itself).
//!
//! Escaped: C0 controls, DEL, C1 controls and the bidirectional overrides
//! and isolates (U+202A–U+202E, U+2066–U+2069), each shown as `\u{..}`
//! (lower-case hex), e.g. ESC as `\u{1b}`.

/// True for a character that must never reach a terminal raw.
pub fn is_dangerous(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `s` with every dangerous character except those in `keep` shown as
/// `\u{..}`. Borrows nothing: always a new string.
pub fn escape_except(s: &str, keep: &[char]) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if is_dangerous(c) && !keep.contains(&c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// For a field shown on one line (a name, a path, a one-line summary):
/// newlines and tabs are escaped too.
pub fn one_line(s: &str) -> String {
    escape_except(s, &[])
}

/// For multi-line text (tool output, error messages): newlines and tabs
/// stay, everything else dangerous is escaped.
pub fn multi_line(s: &str) -> String {
    escape_except(s, &['\n', '\t'])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_bidi_are_escaped_and_plain_text_is_kept() {
        let forged = "\r\u{1b}[2K2026  deploy  approved\u{7f}\u{9b}\u{202e}\u{2066}x";
        let shown = one_line(forged);
        assert!(!shown.chars().any(is_dangerous), "{shown:?}");
        assert_eq!(
            shown,
            "\\u{d}\\u{1b}[2K2026  deploy  approved\\u{7f}\\u{9b}\\u{202e}\\u{2066}x"
        );
        assert_eq!(one_line("a\nb\tc"), "a\\u{a}b\\u{9}c");
        assert_eq!(multi_line("a\nb\tc\u{1b}"), "a\nb\tc\\u{1b}");
        // Control: ordinary text, including non-ASCII, passes unchanged.
        assert_eq!(one_line("déploy → ok ✓ 日本"), "déploy → ok ✓ 日本");
        // U+202F (narrow no-break space) is not a bidi control.
        assert_eq!(one_line("a\u{202f}b"), "a\u{202f}b");
    }
}
