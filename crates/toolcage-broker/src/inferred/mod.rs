//! Filesystem and system-call denials inferred from a tool's own error
//! messages (a system call the seccomp filter refuses in every call is
//! named with no fix: nothing grants it). For files: the kernel
//! tells the tool (EACCES, EPERM, EROFS, ENOENT), not toolcage. A path in
//! such a message is classified against the grant; only what the grant
//! explains becomes a denial, marked `inferred`, with the flag or policy
//! key that would change it. A path inside a write root, a file missing on
//! the host too, or the call's own private places say nothing about the
//! sandbox and are left out. A relative path is taken from the call's
//! working directory, and a path that is a symlink on the host is
//! classified where it leads too (inside a granted root, the call sees the
//! host's symlinks).

mod files;
mod hints;
mod markers;
mod paths;
mod syscalls;
#[cfg(test)]
mod tests;

pub(crate) use files::explain_path;
pub use files::host_tmp;
pub(crate) use hints::GIT_IDENTITY;
pub use syscalls::cpu_limit;

use crate::denial::{Denial, DenialLog};
use files::classify_resolved;
use hints::{dropped_variable, fetch_first, git_identity, own_loopback};
use markers::MARKERS;
use paths::paths_in;
use std::path::Path;
use syscalls::{refused_by_pid_or_mode, refused_syscall};
use toolcage_policy::{Grant, Network};

/// What programs print when a name does not resolve (curl, glibc, Node).
const RESOLVER_FAILED: [&str; 4] = [
    "Could not resolve host",
    "Temporary failure in name resolution",
    "Name or service not known",
    "getaddrinfo EAI_AGAIN",
];

/// What programs print when they cannot reach the network besides a name
/// that does not resolve (curl, Python): with the network off, that is the
/// sandbox's doing.
const NO_NETWORK: [&str; 3] = [
    "Network is unreachable",
    "Couldn't connect to server",
    "[Errno 1] Operation not permitted",
];

/// The denials `text` (a tool's stderr, then stdout) suggests under
/// `grant`, for a call that ran in `cwd`, namespace-free or not.
pub fn from_output(grant: &Grant, namespace_free: bool, cwd: &Path, text: &str) -> Vec<Denial> {
    let mut log = DenialLog::default();
    for line in text.lines() {
        if let Some(d) = refused_syscall(line)
            .or_else(|| refused_by_pid_or_mode(grant, namespace_free, line))
            .or_else(|| git_identity(line))
            .or_else(|| own_loopback(grant, line))
            .or_else(|| dropped_variable(grant, line))
        {
            log.record(d);
            continue;
        }
        let resolver_failed = RESOLVER_FAILED.iter().any(|m| line.contains(m));
        if matches!(grant.network, Network::Tcp { .. }) && resolver_failed {
            log.record(Denial {
                layer: "seccomp",
                op: "resolve",
                target: "DNS".into(),
                rule: None,
                reason: "network mode \"tcp\" allows TCP sockets only, so the resolver's UDP \
                         queries are refused and names do not resolve"
                    .into(),
                fix: Some(
                    "network mode \"domains\" (names resolve there, --allow-domain HOST), or \
                     connect to addresses"
                        .into(),
                ),
                count: 1,
                inferred: true,
            });
            continue;
        }
        if grant.network == Network::Off
            && (resolver_failed || NO_NETWORK.iter().any(|m| line.contains(m)))
        {
            log.record(Denial {
                layer: "seccomp",
                op: "connect",
                target: "the network".into(),
                rule: None,
                reason: "the network is off for this call (no sockets but local ones)".into(),
                fix: Some("--allow-net, or --allow-domain HOST for one host".into()),
                count: 1,
                inferred: true,
            });
            continue;
        }
        let Some(error) = MARKERS
            .iter()
            .find(|(m, _)| line.contains(m))
            .map(|(_, e)| *e)
        else {
            continue;
        };
        for path in paths_in(line, cwd) {
            if let Some(d) = classify_resolved(grant, &path, error) {
                log.record(d);
            }
        }
    }
    fetch_first(&mut log, text);
    log.kept
}
