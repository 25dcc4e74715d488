//! Line numbers in parsed text, for `file:line` in diagnostics.

/// 1-based line number of byte `offset` in `text` (clamped to the text);
/// shared by the policy and tool-file parsers.
pub fn line_at(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

#[cfg(test)]
mod tests {
    use super::line_at;

    #[test]
    fn lines_count_from_one_and_clamp() {
        assert_eq!(line_at("a\nb\nc", 0), 1);
        assert_eq!(line_at("a\nb\nc", 2), 2);
        assert_eq!(line_at("a\nb\nc", 4), 3);
        assert_eq!(line_at("a\n", 99), 2);
    }
}
