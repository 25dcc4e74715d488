//! The child's environment: cleared, then the grant's allowlist, the grant's
//! explicit values, the call's own variables, and the private `/tmp` as
//! `TMPDIR` and `HOME` unless the policy set or passed one by name (the
//! policy checked that the call can use it). `PATH` keeps only the
//! directories the grant can read.

use std::collections::BTreeMap;
/// The call's private tmpfs inside its constructed root.
pub(crate) use toolcage_policy::PRIVATE_TMP;
use toolcage_policy::{Grant, Network, TMP_VARS, is_explicit, search_path};

/// Build the environment from `host` (toolcage's own environment).
#[cfg(test)]
pub(crate) fn build_env(
    grant: &Grant,
    host: impl IntoIterator<Item = (String, String)>,
    call_env: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    build_env_with(grant, host, call_env, None)
}

/// A grant's `PATH` as filtered ahead, with the `PATH` it was filtered
/// from: a sandbox prepared ahead carries it (`spawn/ready.rs`), so that
/// its call, when its `PATH` is the same, does not look at every entry's
/// directory again (~60 `statx` for a typical operator's `PATH`). It is
/// filtered when the sandbox's root is built, so it shows what that root
/// shows.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct SearchPath {
    from: String,
    filtered: String,
}

impl SearchPath {
    /// `PATH` as a call with no variables of its own would get it now.
    pub(crate) fn ahead(grant: &Grant) -> SearchPath {
        let env = unfiltered(grant, std::env::vars(), &BTreeMap::new());
        let from = path_of(&env).to_string();
        SearchPath {
            filtered: search_path::filter(grant, &from),
            from,
        }
    }
}

/// [`build_env`], with the `PATH` filtered ahead used when the call's
/// `PATH` is the one it was filtered from.
pub(crate) fn build_env_with(
    grant: &Grant,
    host: impl IntoIterator<Item = (String, String)>,
    call_env: &BTreeMap<String, String>,
    known: Option<&SearchPath>,
) -> BTreeMap<String, String> {
    let mut env = unfiltered(grant, host, call_env);
    let path = match known {
        Some(k) if k.from == path_of(&env) => k.filtered.clone(),
        _ => search_path::filter(grant, path_of(&env)),
    };
    env.insert("PATH".into(), path);
    if grant.private_tmp {
        // Tools that write to ~/.cache and friends write into the private tmp.
        for &key in TMP_VARS.iter().chain(&["HOME"]) {
            if !(is_explicit(grant, key) && env.contains_key(key)) {
                env.insert(key.into(), PRIVATE_TMP.into());
            }
        }
    }
    if matches!(grant.network, Network::Domains(_)) {
        env.extend(proxy_env());
    }
    env
}

/// The grant's allowlist of `host`, its explicit values, the call's own.
fn unfiltered(
    grant: &Grant,
    host: impl IntoIterator<Item = (String, String)>,
    call_env: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> =
        host.into_iter().filter(|(k, _)| grant.passes(k)).collect();
    env.extend(grant.env_set.iter().map(|(k, v)| (k.clone(), v.clone())));
    env.extend(call_env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}

fn path_of(env: &BTreeMap<String, String>) -> &str {
    env.get("PATH")
        .map_or(search_path::DEFAULT_PATH, String::as_str)
}

/// Domain mode: every client that honours proxy variables goes through the
/// call's proxy (an HTTP proxy for ALL_PROXY too: a SOCKS URL there breaks
/// clients without SOCKS support, such as httpx). NO_PROXY names only the
/// call's own loopback, never a host service. They win over the policy's
/// and the call's values: nothing else is reachable anyway.
pub(crate) fn proxy_env() -> Vec<(String, String)> {
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
        g.read = vec!["/usr".into(), "/bin".into()];
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
    fn path_has_a_default_of_what_the_grant_can_read() {
        let mut g = Grant::closed("/p".into());
        g.read.push("/usr".into());
        let env = build_env(&g, vec![], &BTreeMap::new());
        assert!(
            env["PATH"].split(':').any(|d| d == "/usr/bin"),
            "{}",
            env["PATH"]
        );
        assert!(!env["PATH"].contains("/nonexistent"));
    }

    #[test]
    fn path_keeps_only_what_the_grant_can_read() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        let (granted, home) = (root.join("granted"), root.join("home/.pyenv/shims"));
        std::fs::create_dir_all(&granted).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let mut g = Grant::closed(root.clone());
        g.read.push(granted.clone());
        g.env_allow.push("PATH".into());
        let path = format!("{}:{}", home.display(), granted.display());
        let env = build_env(&g, vec![("PATH".into(), path)], &BTreeMap::new());
        assert_eq!(env["PATH"], granted.display().to_string());
    }

    #[test]
    fn explicit_tmpdir_and_home_win_over_the_private_tmp() {
        let mut g = Grant::closed("/p".into());
        g.env_allow = vec!["HOME".into(), "TMP*".into()];
        g.env_set.insert("TMPDIR".into(), "/p/build-tmp".into());
        let host = vec![
            ("HOME".to_string(), "/home/u".to_string()),
            ("TMP".to_string(), "/host-tmp".to_string()),
        ];
        let env = build_env(&g, host.clone(), &BTreeMap::new());
        assert_eq!(env["TMPDIR"], "/p/build-tmp", "set explicitly");
        assert_eq!(env["HOME"], "/home/u", "passed through by name");
        assert_eq!(
            env["TMP"], "/tmp",
            "a pattern is not a request for the value"
        );
        assert_eq!(env["TEMP"], "/tmp");
        // Control: without them, the private tmp.
        let env = build_env(&Grant::closed("/p".into()), host, &BTreeMap::new());
        assert_eq!(
            (env["TMPDIR"].as_str(), env["HOME"].as_str()),
            ("/tmp", "/tmp")
        );
    }

    #[test]
    fn a_path_filtered_ahead_is_used_only_for_the_path_it_came_from() {
        let mut g = Grant::closed("/p".into());
        g.read.push("/usr".into());
        let own = BTreeMap::from([("PATH".to_string(), "/usr/bin:/nonexistent-dir".to_string())]);
        let now = build_env(&g, vec![], &own)["PATH"].clone();
        assert_eq!(now, "/usr/bin", "filtered: the missing directory dropped");
        // A stand-in result, so that the test sees which one was used.
        let ahead = SearchPath {
            from: "/usr/bin:/nonexistent-dir".into(),
            filtered: "/filtered-ahead".into(),
        };
        let env = build_env_with(&g, vec![], &own, Some(&ahead));
        assert_eq!(env["PATH"], "/filtered-ahead");
        // Filtered from another PATH: this one is filtered now.
        let other = SearchPath {
            from: "/bin".into(),
            ..ahead
        };
        let env = build_env_with(&g, vec![], &own, Some(&other));
        assert_eq!(env["PATH"], now);
    }
}
