//! The child's environment: cleared, then the grant's allowlist, the grant's
//! explicit values, the call's own variables, and the private `/tmp` as
//! `TMPDIR` (and `HOME`, unless the policy passes or sets one).

use crate::policy::{Grant, Network};
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
    if matches!(grant.network, Network::Domains(_)) {
        env.extend(proxy_env());
    }
    env
}

/// Domain mode: every client that honours proxy variables goes through the
/// call's proxy (an HTTP proxy for ALL_PROXY too: a SOCKS URL there breaks
/// clients without SOCKS support, such as httpx). NO_PROXY names only the
/// call's own loopback, never a host service. They win over the policy's
/// and the call's values: nothing else is reachable anyway.
pub fn proxy_env() -> Vec<(String, String)> {
    let url = format!("http://127.0.0.1:{}", super::proxy::PROXY_PORT);
    let mut out: Vec<(String, String)> = [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "NPM_CONFIG_PROXY",
        "NPM_CONFIG_HTTPS_PROXY",
        "YARN_HTTP_PROXY",
        "YARN_HTTPS_PROXY",
    ]
    .iter()
    .map(|k| (k.to_string(), url.clone()))
    .collect();
    for k in ["NO_PROXY", "no_proxy"] {
        out.push((k.into(), "localhost,127.0.0.1,::1".into()));
    }
    // Node's built-in fetch ignores the variables without it.
    out.push(("NODE_USE_ENV_PROXY".into(), "1".into()));
    out
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
    fn domain_mode_sets_the_proxy_variables_over_the_policys() {
        let mut g = Grant::closed("/p".into());
        g.network = Network::Domains(Default::default());
        g.env_set
            .insert("HTTPS_PROXY".into(), "http://elsewhere:1".into());
        let env = build_env(&g, vec![], &BTreeMap::new());
        assert_eq!(env["HTTPS_PROXY"], "http://127.0.0.1:3128");
        assert_eq!(env["all_proxy"], "http://127.0.0.1:3128");
        assert_eq!(env["NO_PROXY"], "localhost,127.0.0.1,::1");
        assert_eq!(env["NODE_USE_ENV_PROXY"], "1");
        let off = build_env(&Grant::closed("/p".into()), vec![], &BTreeMap::new());
        assert!(!off.contains_key("HTTP_PROXY"));
    }

    #[test]
    fn path_has_a_default() {
        let g = Grant::closed("/p".into());
        let env = build_env(&g, vec![], &BTreeMap::new());
        assert_eq!(env["PATH"], DEFAULT_PATH);
    }
}
