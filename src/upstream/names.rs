//! Flat names for upstream tools: `server__tool`, within what every MCP
//! client accepts (`^[A-Za-z0-9_-]{1,64}$`). Characters outside the set
//! become `_`; a name over 64 characters, or one that collides with a name
//! already taken, is cut and given a hash of the tool's own `server/tool`,
//! never of its place in a list.
//!
//! A name is given once: the pins ([`super::pins`]) keep it with the
//! tool's definition, so a server that reorders its list, or adds a tool
//! whose name collides, cannot move a name (and the operator's
//! `[tools."name"]` section) onto another tool.

use sha2::{Digest, Sha256};
use std::collections::BTreeSet;

pub(crate) const MAX_NAME: usize = 64;

pub(crate) fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            'A'..='Z' | 'a'..='z' | '0'..='9' | '_' | '-' => c,
            _ => '_',
        })
        .collect()
}

/// Whether `name` is a flat name any client accepts.
pub(crate) fn valid(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_NAME && sanitize(name) == name
}

fn suffix(key: &str) -> String {
    let d = Sha256::digest(key.as_bytes());
    d.iter().take(3).map(|b| format!("{b:02x}")).collect()
}

/// `server__tool` with the characters outside the set replaced.
pub(crate) fn plain(server: &str, tool: &str) -> String {
    format!("{}__{}", sanitize(server), sanitize(tool))
}

/// The name `tool` of `server` gets the first time it is seen, unique
/// against `taken`: `server__tool` when it is free and short enough, else
/// the name cut with a suffix hashed from `server/tool` (and a counter
/// only if that too is taken).
pub(crate) fn fresh(server: &str, tool: &str, taken: &BTreeSet<String>) -> String {
    let plain = plain(server, tool);
    if plain.len() <= MAX_NAME && !taken.contains(&plain) {
        return plain;
    }
    let base = format!("{server}/{tool}");
    (0u32..)
        .map(|n| {
            let tag = match n {
                0 => suffix(&base),
                n => suffix(&format!("{base}#{n}")),
            };
            let cut: String = plain.chars().take(MAX_NAME - tag.len() - 1).collect();
            format!("{cut}_{tag}")
        })
        .find(|name| !taken.contains(name))
        .unwrap_or(plain)
}

/// Why `name`, the flat name of `tool` of `server`, is not plain
/// `server__tool`, if it is not.
pub(crate) fn why(server: &str, tool: &str, name: &str) -> Option<String> {
    let plain = plain(server, tool);
    if name == format!("{server}__{tool}") {
        return None;
    }
    if name == plain {
        return Some("characters outside [A-Za-z0-9_-] replaced by '_'".into());
    }
    if plain.len() > MAX_NAME {
        return Some(format!("'{plain}' is longer than {MAX_NAME} characters"));
    }
    Some(format!(
        "'{plain}' is taken by another tool, or was when this one was first pinned"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_stay() {
        let n = fresh("time", "get_current_time", &BTreeSet::new());
        assert_eq!(n, "time__get_current_time");
        assert!(why("time", "get_current_time", &n).is_none());
    }

    #[test]
    fn odd_characters_are_replaced() {
        let n = fresh("my.server", "read file", &BTreeSet::new());
        assert_eq!(n, "my_server__read_file");
        assert!(why("my.server", "read file", &n).is_some());
        assert!(valid(&n) && !valid("a b") && !valid(""));
    }

    #[test]
    fn long_and_taken_names_get_a_stable_hash_of_their_own_name() {
        let long = "x".repeat(80);
        let a = fresh("s", &long, &BTreeSet::new());
        assert_eq!(a, fresh("s", &long, &BTreeSet::new()));
        assert_eq!(a.len(), MAX_NAME);
        assert!(valid(&a));
        let taken: BTreeSet<String> = ["a__b".to_string()].into();
        let c = fresh("a", "b", &taken);
        assert_ne!(c, "a__b");
        assert!(c.starts_with("a__b_"), "{c}");
        assert!(why("a", "b", &c).unwrap().contains("taken"));
        // Its suffix too taken: another, still from its own name.
        let mut both = taken.clone();
        both.insert(c.clone());
        let d = fresh("a", "b", &both);
        assert!(d.starts_with("a__b_") && d != c, "{d}");
    }
}
