//! A3S front matter helpers: splitting `---` blocks and bounding the YAML
//! before the parser sees it.

/// Split `---\n<yaml>\n---\n<body>`: (yaml, line of the yaml's first line,
/// body). `None` when the text does not start with front matter.
pub(crate) fn split_front_matter(text: &str) -> Option<Result<(&str, usize, &str), String>> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let first = text.lines().next()?;
    if first.trim_end() != "---" {
        return None;
    }
    let start = text.find('\n').map(|p| p + 1).unwrap_or(text.len());
    let mut off = start;
    for line in text[start..].split_inclusive('\n') {
        let t = line.trim_end();
        if t == "---" || t == "..." {
            return Some(Ok((&text[start..off], 2, &text[off + line.len()..])));
        }
        off += line.len();
    }
    Some(Err("front matter is never closed by a `---` line".into()))
}

/// Front matter is a handful of keys; more is refused before parsing.
pub(crate) const MAX_FRONT_MATTER: usize = 64 * 1024;
/// The YAML parser takes minutes on flow collections nested 100,000 deep
/// (found by the nasty-input test), so nesting is bounded first.
pub(crate) const MAX_FLOW_DEPTH: usize = 64;

/// The deepest nesting of `[`/`{` in YAML text, outside quoted scalars and
/// comments (an over-estimate is fine: it only refuses odd files).
pub(crate) fn flow_depth(yaml: &str) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    let mut chars = yaml.chars().peekable();
    let mut prev = '\n';
    while let Some(c) = chars.next() {
        match c {
            '[' | '{' => {
                depth += 1;
                max = max.max(depth);
            }
            ']' | '}' => depth = depth.saturating_sub(1),
            '"' => {
                while let Some(d) = chars.next() {
                    match d {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            '\'' if !prev.is_alphanumeric() => {
                for d in chars.by_ref() {
                    if d == '\'' {
                        break;
                    }
                }
            }
            '#' if prev.is_whitespace() => {
                for d in chars.by_ref() {
                    if d == '\n' {
                        break;
                    }
                }
            }
            _ => {}
        }
        prev = c;
    }
    max
}

pub(crate) fn first_paragraph(body: &str) -> String {
    body.trim()
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ")
}
