//! The child's environment: cleared, then the grant's allowlist, the grant's
//! explicit values, the call's own variables, and the private `/tmp` as
//! `TMPDIR` (and `HOME`, unless the policy passes or sets one).

use crate::policy::Grant;
use std::collections::BTreeMap;

const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// The call's private tmpfs, inside its constructed root.
pub const PRIVATE_TMP: &str = "/tmp";

fn allowed(name: &str, patterns: &[String]) -> bool {
    patterns.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == p,
    })
}

/// Build the environment from `host` (toolcage's own environment).
pub fn build_env(
    grant: &Grant,
    host: impl IntoIterator<Item = (String, String)>,
    call_env: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = host
        .into_iter()
        .filter(|(k, _)| allowed(k, &grant.env_allow))
        .collect();
    env.extend(grant.env_set.iter().map(|(k, v)| (k.clone(), v.clone())));
    env.extend(call_env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env.entry("PATH".into())
        .or_insert_with(|| DEFAULT_PATH.into());
    if grant.private_tmp {
        let tmp = PRIVATE_TMP.to_string();
        for key in ["TMPDIR", "TMP", "TEMP"] {
            env.insert(key.into(), tmp.clone());
        }
        // Tools that write to ~/.cache and friends write into the private tmp.
        env.entry("HOME".into()).or_insert(tmp);
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_allowlisted_variables_pass() {
        let mut g = Grant::closed("/p".into());
        g.env_allow = vec!["PATH".into(), "LC_*".into()];
        g.env_set.insert("FOO".into(), "bar".into());
        let host = vec![
            ("PATH".to_string(), "/bin".to_string()),
            ("LC_ALL".to_string(), "C".to_string()),
            ("AWS_SECRET".to_string(), "x".to_string()),
            ("HOME".to_string(), "/root".to_string()),
        ];
        let env = build_env(&g, host, &BTreeMap::new());
        assert_eq!(env["PATH"], "/bin");
        assert_eq!(env["LC_ALL"], "C");
        assert_eq!(env["FOO"], "bar");
        assert_eq!(env["TMPDIR"], "/tmp");
        assert_eq!(env["HOME"], "/tmp");
        assert!(!env.contains_key("AWS_SECRET"));
    }

    #[test]
    fn path_has_a_default() {
        let g = Grant::closed("/p".into());
        let env = build_env(&g, vec![], &BTreeMap::new());
        assert_eq!(env["PATH"], DEFAULT_PATH);
    }
}
