//! The paths a message names, absolute or taken from the call's working
//! directory.

use super::markers::MARKERS;
use std::path::{Component, Path, PathBuf};

/// Paths in a message: words that start with `/`, without the quotes,
/// brackets and punctuation messages put around them; and, taken from
/// `cwd`, a relative path where messages put one (quoted, or the part
/// before the error: `cat: ../x: Permission denied`, `sh: 1: cannot
/// create x: ...`). A path that opens the line is the program naming
/// itself (`/p/script: 3: cannot create /x: ...`), not what was refused.
pub(super) fn paths_in(line: &str, cwd: &Path) -> Vec<PathBuf> {
    let line = match line.split_once(": ") {
        Some((first, rest)) if first.starts_with('/') && !first.contains(' ') => rest,
        _ => line,
    };
    let mut paths: Vec<PathBuf> = line
        .split(|c: char| c.is_whitespace() || c == '`')
        .map(|w| {
            w.trim_start_matches(|c: char| "'\"‘“([{<".contains(c))
                .trim_end_matches(|c: char| "'\"’”)]}>,;:.".contains(c))
        })
        .filter(|w| w.starts_with('/') && w.len() > 1)
        .map(normal)
        .collect();
    paths.extend(
        relative_paths(line)
            .into_iter()
            .map(|r| normal(&cwd.join(r).to_string_lossy())),
    );
    paths
}

/// The relative paths a message names: quoted words, and the part right
/// before the error (the first part is the program's name).
fn relative_paths(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for (open, close) in [('\'', '\''), ('"', '"'), ('‘', '’'), ('“', '”')] {
        let mut rest = line;
        while let Some((_, after)) = rest.split_once(open) {
            let Some((word, tail)) = after.split_once(close) else {
                break;
            };
            out.push(word);
            rest = tail;
        }
    }
    let parts: Vec<&str> = line.split(": ").collect();
    for (i, part) in parts.iter().enumerate().skip(1) {
        if parts
            .get(i + 1)
            .is_some_and(|next| MARKERS.iter().any(|(m, _)| next.starts_with(m)))
        {
            let word = [
                "cannot create ",
                "can't create ",
                "cannot open ",
                "can't open ",
            ]
            .iter()
            .find_map(|verb| part.strip_prefix(verb))
            .unwrap_or(part);
            out.push(word);
        }
    }
    out.retain(|w| {
        !w.is_empty()
            && !w.starts_with('/')
            && !w.contains(char::is_whitespace)
            && !w.bytes().all(|b| b.is_ascii_digit())
    });
    out
}

/// `p` without `.` and `..` (lexically: the host's symlinks are not the
/// call's).
fn normal(p: &str) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in Path::new(p).components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out
}
