//! Names against patterns: a `*` in the last component of a protected or
//! denied path, of a built-in secret, or of a home secret's `keep` list.
//! The bottom of the path rules: it imports nothing of the crate.

/// Whether a guard as written ends in a wildcard component. The decision is
/// made on the text before variables are expanded, so a `*` in the project
/// or home path is never taken for a wildcard.
pub(crate) fn wildcard(raw: &str) -> Result<bool, String> {
    let trimmed = raw.trim_end_matches('/');
    let (dir, last) = trimmed.rsplit_once('/').unwrap_or(("", trimmed));
    if dir.contains('*') {
        return Err(format!(
            "\"{raw}\": a * wildcard may only appear in the last path component \
             (list each directory instead)"
        ));
    }
    Ok(last.contains('*'))
}

/// Whether `name` matches `pattern`, where `*` matches any run of bytes
/// (including none, and including a leading dot) and every other byte
/// matches itself.
pub(crate) fn matches(pattern: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0, 0);
    // The position after the last `*` seen, and where its run currently ends.
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            p += 1;
            star = Some((p, n));
        } else if p < pattern.len() && pattern[p] == name[n] {
            p += 1;
            n += 1;
        } else if let Some((sp, sn)) = star {
            // Let the last `*` swallow one more byte and retry.
            p = sp;
            n = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&b| b == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn star_matches_any_run_of_bytes() {
        let m = |p: &str, n: &str| matches(p.as_bytes(), n.as_bytes());
        assert!(m("ssh_host_*_key", "ssh_host_ed25519_key"));
        assert!(m("ssh_host_*_key", "ssh_host__key"));
        assert!(!m("ssh_host_*_key", "ssh_host_rsa_key.pub"));
        assert!(!m("ssh_host_*_key", "ssh_host_rsa_kez"));
        assert!(m("*", ".hidden"));
        assert!(m("*.pem", "a.b.pem"));
        assert!(m("a*b*c", "aXbYbZc"));
        assert!(!m("a*b*c", "aXbYbZ"));
        assert!(m("**", ""));
        assert!(m("literal", "literal"));
        assert!(!m("literal", "literally"));
    }

    #[test]
    fn only_the_last_component_may_be_a_wildcard() {
        assert_eq!(wildcard("/etc/ssh/ssh_host_*_key"), Ok(true));
        assert_eq!(wildcard("{project}/*.pem/"), Ok(true));
        assert_eq!(wildcard("{project}/.git"), Ok(false));
        assert!(
            wildcard("/home/*/.ssh")
                .unwrap_err()
                .contains("only appear in the last path component")
        );
    }
}
