//! Hints from a tool's output that are not a path or a system call: git's
//! missing identity, a package manager's download with the network off,
//! `localhost` in domain mode, a variable the command read and did not get.

use crate::denial::{Denial, DenialLog};
use toolcage_policy::{Grant, Network};

/// The target of git's missing identity: no path names it.
pub(crate) const GIT_IDENTITY: &str = "git's identity";

/// What git prints when it has no identity: the operator's own is in
/// `~/.gitconfig`, which the call does not see (its `HOME` is the private
/// tmp).
const GIT_NO_IDENTITY: [&str; 3] = [
    "Author identity unknown",
    "Committer identity unknown",
    "unable to auto-detect email address",
];

/// git's missing identity, as what the call could not read, with the two
/// ways to give it one.
pub(super) fn git_identity(line: &str) -> Option<Denial> {
    GIT_NO_IDENTITY
        .iter()
        .any(|m| line.contains(m))
        .then(|| {
            Denial {
        layer: "filesystem",
        op: "read",
        target: GIT_IDENTITY.into(),
        rule: None,
        reason: "git found no user.name and user.email: your ~/.gitconfig is not in the call \
                 (its HOME is the private tmp)"
            .into(),
        fix: Some(
            "--env GIT_AUTHOR_NAME=... --env GIT_AUTHOR_EMAIL=... --env GIT_COMMITTER_NAME=... \
             --env GIT_COMMITTER_EMAIL=..., or --read ~/.gitconfig \
             --env GIT_CONFIG_GLOBAL=$HOME/.gitconfig"
                .into(),
        ),
        count: 1,
        inferred: true,
    }
        })
}

/// What package managers print around a download they could not make:
/// the network refusal is then a dependency not fetched before the run.
const PACKAGE_MANAGERS: [&str; 9] = [
    "index.crates.io",
    "crates.io index",
    "failed to download",
    "registry.npmjs.org",
    "npm ERR!",
    "npm error",
    "pypi.org",
    "Could not find a version that satisfies",
    "proxy.golang.org",
];

/// With the network off, a package manager's failed download: fetch
/// outside first (the way a CI job is meant to run), or allow the registry.
pub(super) fn fetch_first(log: &mut DenialLog, text: &str) {
    if !PACKAGE_MANAGERS.iter().any(|m| text.contains(m)) {
        return;
    }
    for d in log.kept.iter_mut().filter(|d| d.target == "the network") {
        d.reason = "the network is off for this call, and a package manager tried to download \
                    a dependency"
            .into();
        d.fix = Some(
            "fetch dependencies before the run, outside toolcage (cargo fetch, npm ci, pip \
             download -d DIR), then build offline (cargo --offline, pip --no-index \
             --find-links DIR); or --allow-domain REGISTRY for the registry alone"
                .into(),
        );
    }
}

/// What a program prints when nothing listens where it connected.
const CONNECTION_REFUSED: [&str; 3] = [
    "Couldn't connect to server",
    "Connection refused",
    "ECONNREFUSED",
];

/// In domain mode, a connection to the call's own loopback that nothing
/// answered: `localhost` there is the call's network namespace, not the
/// host's, and `NO_PROXY` sends loopback names past the proxy.
pub(super) fn own_loopback(grant: &Grant, line: &str) -> Option<Denial> {
    if !matches!(grant.network, Network::Domains(_))
        || !CONNECTION_REFUSED.iter().any(|m| line.contains(m))
    {
        return None;
    }
    let at = ["localhost", "127.0.0.1", "[::1]", "::1"]
        .iter()
        .find_map(|h| line.find(h).map(|i| &line[i + h.len()..]))?;
    let port: String = at
        .trim_start_matches([':', ' '])
        .trim_start_matches("port ")
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    let port = if port.is_empty() {
        "PORT".to_string()
    } else {
        port
    };
    Some(Denial {
        layer: "network",
        op: "connect",
        target: format!("localhost:{port}"),
        rule: None,
        reason: "in domain mode localhost is the call's own loopback, where nothing of yours \
                 listens, and NO_PROXY sends it past toolcage's proxy"
            .into(),
        fix: Some(format!(
            "--allow-domain 127.0.0.1:{port} and send the request through the proxy (curl \
             --noproxy '', or NO_PROXY= no_proxy=), or --allow-net to share the host's network"
        )),
        count: 1,
        inferred: true,
    })
}

/// How programs say a variable they read is not set, and where its name
/// is: before the marker (shells), or after it up to the closing quote.
const UNSET_VARIABLE: [(&str, bool); 4] = [
    (": unbound variable", true),
    (": parameter not set", true),
    ("KeyError: '", false),
    ("environment variable `", false),
];

/// A variable the command read and did not get: set in the operator's
/// environment (toolcage's own), but not one the grant passes.
pub(super) fn dropped_variable(grant: &Grant, line: &str) -> Option<Denial> {
    let name = UNSET_VARIABLE.iter().find_map(|(marker, before)| {
        let at = line.find(marker)?;
        Some(match before {
            true => line[..at].rsplit([' ', ':']).next()?,
            false => line[at + marker.len()..].split(['\'', '`']).next()?,
        })
    })?;
    let valid = !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    if !valid || grant.passes(name) || grant.env_set.contains_key(name) {
        return None;
    }
    std::env::var_os(name)?;
    Some(Denial {
        layer: "environment",
        op: "read",
        target: format!("${name}"),
        rule: None,
        reason: "set in your environment, but the call's is cleared except what the policy \
                 passes"
            .into(),
        fix: Some(format!("--env {name}")),
        count: 1,
        inferred: true,
    })
}
