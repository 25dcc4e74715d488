//! Flat names for upstream tools: `server__tool`, within what every MCP
//! client accepts (`^[A-Za-z0-9_-]{1,64}$`). Characters outside the set
//! become `_`; a name over 64 characters, or one that collides with a name
//! already taken, is cut and given a hash of `server/tool` so it stays
//! stable across restarts.

use sha2::{Digest, Sha256};
use std::collections::BTreeSet;

pub const MAX_NAME: usize = 64;

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            'A'..='Z' | 'a'..='z' | '0'..='9' | '_' | '-' => c,
            _ => '_',
        })
        .collect()
}

fn suffix(server: &str, tool: &str) -> String {
    let d = Sha256::digest(format!("{server}/{tool}").as_bytes());
    d.iter().take(3).map(|b| format!("{b:02x}")).collect()
}

/// The flat name of `tool` of `server`, unique against `taken`.
/// The second value says why it is not plain `server__tool`, if it is not.
pub fn flat(server: &str, tool: &str, taken: &BTreeSet<String>) -> (String, Option<String>) {
    let plain = format!("{}__{}", sanitize(server), sanitize(tool));
    let exact = plain == format!("{server}__{tool}");
    if plain.len() <= MAX_NAME && !taken.contains(&plain) {
        let why = (!exact).then(|| "characters outside [A-Za-z0-9_-] replaced by '_'".to_string());
        return (plain, why);
    }
    let tag = suffix(server, tool);
    let keep = MAX_NAME - tag.len() - 1;
    let cut: String = plain.chars().take(keep).collect();
    let name = format!("{cut}_{tag}");
    let why = if taken.contains(&plain) {
        format!("'{plain}' is taken by another tool")
    } else {
        format!("'{plain}' is longer than {MAX_NAME} characters")
    };
    (name, Some(why))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_stay() {
        let (n, why) = flat("time", "get_current_time", &BTreeSet::new());
        assert_eq!(n, "time__get_current_time");
        assert!(why.is_none());
    }

    #[test]
    fn odd_characters_are_replaced() {
        let (n, why) = flat("my.server", "read file", &BTreeSet::new());
        assert_eq!(n, "my_server__read_file");
        assert!(why.is_some());
    }

    #[test]
    fn long_and_taken_names_get_a_stable_hash() {
        let long = "x".repeat(80);
        let (a, _) = flat("s", &long, &BTreeSet::new());
        let (b, _) = flat("s", &long, &BTreeSet::new());
        assert_eq!(a, b);
        assert_eq!(a.len(), MAX_NAME);
        let taken: BTreeSet<String> = ["a__b".to_string()].into();
        let (c, why) = flat("a", "b", &taken);
        assert_ne!(c, "a__b");
        assert!(c.starts_with("a__b_"), "{c}");
        assert!(why.unwrap().contains("taken"));
    }
}
