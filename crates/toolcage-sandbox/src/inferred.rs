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

use super::denial::{Denial, DenialLog};
use std::path::{Component, Path, PathBuf};
use toolcage_policy::{Grant, Network};

/// What the message says happened to the path.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Error {
    /// EACCES / EPERM: the access was refused.
    Refused,
    /// EROFS: a write on a read-only mount.
    ReadOnly,
    /// ENOENT: not there (outside a constructed root, nothing is).
    Missing,
}

const MARKERS: [(&str, Error); 6] = [
    ("Permission denied", Error::Refused),
    ("Operation not permitted", Error::Refused),
    ("Read-only file system", Error::ReadOnly),
    ("No such file or directory", Error::Missing),
    // dash's `> /x/y` when /x is not there.
    ("Directory nonexistent", Error::Missing),
    // A shell running a program that is not there.
    (": not found", Error::Missing),
];

/// Places every call has of its own: what they refuse is not the grant's.
const OWN: [&str; 4] = ["/tmp", "/proc", "/dev", "/sys"];

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

/// Operations the seccomp filter refuses in every call, whatever the
/// grant: the name a program prints for each (`unshare: unshare failed`,
/// `ptrace: Operation not permitted`, `mount: /mnt: permission denied`),
/// the system call, and what it would have done.
const REFUSED_SYSCALLS: [(&str, &str, &str); 9] = [
    ("unshare", "unshare", "new namespaces"),
    ("mount", "mount", "mounting a filesystem"),
    ("umount", "umount2", "unmounting a filesystem"),
    ("ptrace", "ptrace", "tracing another process"),
    ("chroot", "chroot", "changing the root directory"),
    ("io_uring", "io_uring_setup", "io_uring"),
    ("bpf", "bpf", "loading eBPF programs"),
    ("keyctl", "keyctl", "the kernel keyrings"),
    ("setns", "setns", "joining another namespace"),
];

/// What an EPERM (or ENOSYS, for io_uring) looks like in a message.
const SYSCALL_REFUSED: [&str; 3] = [
    "operation not permitted",
    "permission denied",
    "function not implemented",
];

/// The refused system call `line` reports, if it names one as the thing
/// that failed (`name:`, `name(`, `name failed`), not merely in a path.
fn refused_syscall(line: &str) -> Option<Denial> {
    let lower = line.to_ascii_lowercase();
    if !SYSCALL_REFUSED.iter().any(|m| lower.contains(m)) {
        return None;
    }
    let (name, syscall, what) = REFUSED_SYSCALLS
        .iter()
        .find(|(name, _, _)| names(&lower, name, &[":", "(", " failed"]))?;
    Some(Denial {
        layer: "seccomp",
        op: syscall,
        target: (*what).to_string(),
        rule: None,
        reason: format!("{name}: refused in every call by the sandbox's seccomp filter"),
        fix: None,
        count: 1,
        inferred: true,
    })
}

/// EPERM as a message spells it: what the seccomp filter returns.
const EPERM: &str = "operation not permitted";

/// Whether `name` appears in `lower` as the thing that failed: a word of its
/// own followed by one of `after`, not the end of a path or a longer name.
fn names(lower: &str, name: &str, after: &[&str]) -> bool {
    after.iter().any(|after| {
        lower.match_indices(&format!("{name}{after}")).any(|(i, _)| {
            i == 0 || !matches!(lower.as_bytes()[i - 1], b'/' | b'_' | b'-' | b'.' | b'a'..=b'z' | b'0'..=b'9')
        })
    })
}

/// The number right after `prefix` in `lower`, if `prefix` is there.
fn number_after(lower: &str, prefix: &str) -> Option<u64> {
    let rest = &lower[lower.find(prefix)? + prefix.len()..];
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    rest[..digits].parse().ok()
}

/// A refusal the seccomp filter adds namespace-free (see `seccomp.rs`:
/// another process named by pid; with the network off, `bind` and
/// `listen`), or in network mode "tcp" (`bind`, `listen`), or one it makes
/// in every mode that no message names by its system call (`TIOCSETD`),
/// when `line` reports it as the thing that
/// failed with EPERM. A process named by pid is refused even when it is
/// the call's own (the filter cannot tell its pids from the host's); pid 0
/// (the process itself: `prlimit CMD`, `taskset MASK CMD`) is not.
fn refused_by_pid_or_mode(grant: &Grant, namespace_free: bool, line: &str) -> Option<Denial> {
    let lower = line.to_ascii_lowercase();
    if !lower.contains(EPERM) {
        return None;
    }
    let pid_named = |n: Option<u64>| n.is_some_and(|n| n != 0);
    let (op, target, what): (&'static str, &str, &str) = if names(
        &lower,
        "set line discipline",
        &[":"],
    ) || names(
        &lower,
        "tiocsetd",
        &[":", ")", " failed"],
    ) {
        (
            "ioctl",
            "the terminal's line discipline (TIOCSETD)",
            "changing a terminal's line discipline (TIOCSETD) is refused in every call by the \
             sandbox's seccomp filter: the terminal would stay changed after the call",
        )
    } else if ((namespace_free && grant.network == Network::Off)
        || matches!(grant.network, Network::Tcp { .. }))
        && (names(&lower, "bind", &[":", "(", " failed", " eperm"])
            || names(&lower, "listen", &[":", "(", " failed", " eperm"]))
    {
        (
            if names(&lower, "bind", &[":", "(", " failed", " eperm"]) {
                "bind"
            } else {
                "listen"
            },
            "a listening socket",
            "the seccomp filter refuses bind and listen namespace-free with the network off, and \
             in network mode \"tcp\" without bind ports (with them, any bind but an IPv4 or \
             IPv6 address): without a network namespace of its own an abstract socket name \
             would be the host's",
        )
    } else if !namespace_free {
        return None;
    } else if names(&lower, "prlimit", &[":"])
        && lower.contains("failed to set the ")
        && lower.contains(" resource limit")
    {
        (
            "prlimit64",
            "another process's resource limits",
            "prlimit --pid: namespace-free, the seccomp filter refuses setting the limits of a \
             process named by pid (any pid, the call's own included: it cannot tell them from \
             the host's); a command run by prlimit itself (`prlimit --nofile=N CMD`) may lower \
             its own",
        )
    } else if names(&lower, "renice", &[":"])
        && (pid_named(number_after(&lower, "failed to set priority for "))
            || lower.contains("(user id)"))
    {
        (
            "setpriority",
            "another process's priority",
            "renice -p/-g/-u: namespace-free, the seccomp filter refuses changing the priority \
             of a process, group or user named by id (the call's own included: it cannot tell \
             them from the host's); `nice CMD` still lowers a command's own",
        )
    } else if names(&lower, "taskset", &[":"])
        && pid_named(number_after(&lower, "failed to set pid "))
    {
        (
            "sched_setaffinity",
            "another process's CPU affinity",
            "taskset -p: namespace-free, the seccomp filter refuses setting the CPU affinity of \
             a process named by pid (the call's own included: it cannot tell them from the \
             host's); `taskset MASK CMD` still sets a command's own",
        )
    } else if names(&lower, "ionice", &[":"]) && lower.contains("ioprio_set failed") {
        (
            "ioprio_set",
            "another process's I/O priority",
            "ionice -p/-u: namespace-free, the seccomp filter refuses setting the I/O priority \
             of a process named by pid or of a user (the call's own included: it cannot tell \
             them from the host's); `ionice -c CLASS CMD` still sets a command's own",
        )
    } else {
        return None;
    };
    Some(Denial {
        layer: "seccomp",
        op,
        target: target.to_string(),
        rule: None,
        reason: what.to_string(),
        fix: None,
        count: 1,
        inferred: true,
    })
}

/// The CPU time limit, when the call (`exit_signal`: how its program
/// ended) or a process it ran (a shell's "CPU time limit exceeded") hit it.
pub fn cpu_limit(grant: &Grant, exit_signal: Option<i32>, text: &str) -> Option<Denial> {
    let secs = grant.limits.cpu_seconds?;
    let hit = exit_signal == Some(libc::SIGXCPU) || text.contains("CPU time limit exceeded");
    hit.then(|| Denial {
        layer: "limits",
        op: "cpu",
        target: "CPU time".into(),
        rule: Some("limits.cpu".into()),
        reason: format!(
            "the CPU time limit of a process of the call ({}s) was reached",
            secs
        ),
        fix: Some(
            "raise [limits] cpu, or --timeout (a CPU limit set before the timeout follows it)"
                .into(),
        ),
        count: 1,
        inferred: exit_signal != Some(libc::SIGXCPU),
    })
}

/// Namespace-free there is no private tmpfs over `/tmp`: the call sees
/// the host's `/tmp`, readable by no rule and writable only when a write
/// root holds it (which would show it every file of the host's `/tmp`).
/// Programs that write `/tmp` by name, or through glibc's `tmpfile()`
/// (which ignores `TMPDIR`: it opens `/tmp` with `O_TMPFILE`, for which
/// Landlock wants read and write rights on all of `/tmp`), fail with EACCES.
/// Their refusal, when `text` shows one: a path in `/tmp` outside the
/// grant and the call's own tmp (`own`), or `tmpfile` named by the message.
pub fn host_tmp(grant: &Grant, own: Option<&Path>, text: &str) -> Option<Denial> {
    let tmp = Path::new("/tmp");
    if under(tmp, &grant.write).is_some() {
        return None;
    }
    let refused_in_tmp = |line: &str| {
        let refused = MARKERS
            .iter()
            .any(|(m, e)| *e != Error::Missing && line.contains(m));
        refused
            && (line.contains("tmpfile")
                || paths_in(line, tmp).iter().any(|p| {
                    p.starts_with(tmp)
                        && under(p, &grant.write).is_none()
                        && own.is_none_or(|o| !p.starts_with(o))
                }))
    };
    let count = text.lines().filter(|l| refused_in_tmp(l)).count();
    if count == 0 {
        return None;
    }
    let (reason, first_fix) = if grant.private_tmp {
        (
            "namespace-free, /tmp is the host's, not writable: the call's private tmp is \
             $TMPDIR, which tmpfile() and programs that write /tmp by name ignore",
            "use $TMPDIR where the program lets you",
        )
    } else {
        (
            "namespace-free, /tmp is the host's, not writable, and private_tmp = false \
             gives the call no TMPDIR",
            "[fs] private_tmp = true, for programs that honour TMPDIR",
        )
    };
    Some(Denial {
        layer: "filesystem",
        op: "create",
        target: "/tmp".into(),
        rule: None,
        reason: reason.into(),
        fix: Some(format!(
            "{first_fix}; or [fs] private_tmp = false and add_write = [\"/tmp\"], knowing the \
             call then reads and writes every file of the host's /tmp your user can (run \
             toolcage with TMPDIR outside /tmp: its runtime directory must not be in a write \
             root); or run where user namespaces work (`toolcage doctor` says why they do not)"
        )),
        count: u32::try_from(count).unwrap_or(u32::MAX),
        inferred: true,
    })
}

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
fn git_identity(line: &str) -> Option<Denial> {
    GIT_NO_IDENTITY
        .iter()
        .any(|m| line.contains(m))
        .then(|| {
            Denial {
        layer: "filesystem",
        op: "read",
        target: "git's identity".into(),
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
fn fetch_first(log: &mut DenialLog, text: &str) {
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
fn own_loopback(grant: &Grant, line: &str) -> Option<Denial> {
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
fn dropped_variable(grant: &Grant, line: &str) -> Option<Denial> {
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

/// Paths in a message: words that start with `/`, without the quotes,
/// brackets and punctuation messages put around them; and, taken from
/// `cwd`, a relative path where messages put one (quoted, or the part
/// before the error: `cat: ../x: Permission denied`, `sh: 1: cannot
/// create x: ...`). A path that opens the line is the program naming
/// itself (`/p/script: 3: cannot create /x: ...`), not what was refused.
fn paths_in(line: &str, cwd: &Path) -> Vec<PathBuf> {
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

fn under(p: &Path, roots: &[PathBuf]) -> Option<PathBuf> {
    roots.iter().find(|r| p.starts_with(r)).cloned()
}

/// Why the grant refuses `path` and what would grant it, for a refusal
/// the kernel reported exactly (a Landlock audit record, `landlock_log.rs`).
pub(crate) fn explain_path(grant: &Grant, path: &Path) -> Option<(String, Option<String>)> {
    if let Some(d) = classify(grant, path, Error::Refused) {
        return Some((d.reason, d.fix));
    }
    (under(path, &grant.read).is_none() && under(path, &grant.write).is_none()).then(|| {
        offer(
            grant,
            "outside every read root: not in the sandbox".to_string(),
            "--read",
            path,
        )
    })
}

/// The reason and the fix `FLAG path`, unless the fix would grant what a
/// call's text must never suggest (`toolcage_policy::never_offered`: `/`,
/// the operator's home, a secret, a write to a system directory): then
/// only the reason, which says why no fix is offered. An agent reads
/// these lines, and would relay the fix to the person as a request.
fn offer(grant: &Grant, reason: String, flag: &str, path: &Path) -> (String, Option<String>) {
    match toolcage_policy::never_offered(path, &grant.homes, flag == "--write") {
        Some(why) => (format!("{reason}; {why}: no fix is offered"), None),
        None => (reason, Some(format!("{flag} {}", path.display()))),
    }
}

/// [`classify`] the path, or where it leads on the host when it (or a
/// directory above it) is a symlink.
fn classify_resolved(grant: &Grant, path: &Path, error: Error) -> Option<Denial> {
    classify(grant, path, error).or_else(|| {
        let real = std::fs::canonicalize(path).ok().or_else(|| {
            let dir = std::fs::canonicalize(path.parent()?).ok()?;
            Some(dir.join(path.file_name()?))
        })?;
        (real != path)
            .then(|| classify(grant, &real, error))
            .flatten()
    })
}

fn classify(grant: &Grant, path: &Path, error: Error) -> Option<Denial> {
    if OWN.iter().any(|o| path.starts_with(o))
        && under(path, &grant.read).is_none()
        && under(path, &grant.write).is_none()
    {
        return None;
    }
    let denial = |op: &'static str, reason: String, fix: Option<String>| Denial {
        layer: "filesystem",
        op,
        target: path.display().to_string(),
        rule: None,
        reason,
        fix,
        count: 1,
        inferred: true,
    };
    // Missing on the host too: the secret or denied path is not hidden,
    // it is not there.
    let absent = error == Error::Missing && path.symlink_metadata().is_err();
    if let Some(what) = toolcage_policy::built_in_secret(path).filter(|_| !absent) {
        return Some(denial(
            "read",
            format!("a built-in secret ({what}): never granted"),
            None,
        ));
    }
    if let Some(what) = toolcage_policy::home_secret(path, &grant.homes).filter(|_| !absent) {
        return Some(denial(
            "read",
            format!("a secret in the operator's home ({what}): never granted by a flag"),
            None,
        ));
    }
    if let Some(d) = under(path, &grant.denied).filter(|_| !absent) {
        return Some(denial(
            "read",
            format!("denied by the policy ({})", d.display()),
            // The layer that denies it may be a preset or a pattern:
            // `policy` names it.
            Some(format!(
                "`toolcage policy` names the layer that denies {}; drop it there if calls may read it",
                d.display()
            )),
        ));
    }
    if error != Error::Missing
        && let Some(p) = under(path, &grant.protected)
    {
        return Some(denial(
            "write",
            format!("protected: read-only inside the project ({})", p.display()),
            Some(format!(
                "remove {} from [fs] protected, if tools may rewrite it",
                p.display()
            )),
        ));
    }
    if under(path, &grant.write).is_some() {
        return None; // writable: the refusal is the file's own
    }
    if under(path, &grant.read).is_some() {
        // Readable but not writable: a refused or read-only write.
        return (error != Error::Missing).then(|| {
            let dir = if path.is_dir() {
                path
            } else {
                path.parent().unwrap_or(path)
            };
            let (reason, fix) = offer(
                grant,
                "read-only: inside a read root, not a write root".into(),
                "--write",
                dir,
            );
            denial("write", reason, fix)
        });
    }
    // Outside every root: inside a constructed root it is not there at all,
    // so "missing" counts when the host has it, or has the directory it
    // would be made in.
    if path.symlink_metadata().is_err() {
        let dir = path.parent()?;
        let outside = under(dir, &grant.read).is_none() && under(dir, &grant.write).is_none();
        return (error == Error::Missing && outside && dir.is_dir()).then(|| {
            let (reason, fix) = offer(
                grant,
                format!(
                    "its directory {} is outside every root: not in the sandbox",
                    dir.display()
                ),
                "--write",
                dir,
            );
            denial("create", reason, fix)
        });
    }
    let (reason, fix) = offer(
        grant,
        "outside every read root: not in the sandbox".into(),
        "--read",
        path,
    );
    Some(denial("read", reason, fix))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant() -> Grant {
        let mut g = Grant::closed("/work/p".into());
        g.read = vec!["/usr".into(), "/etc".into()];
        g.write = vec!["/work/p".into()];
        g.protected = vec!["/work/p/.git".into()];
        g.denied = vec!["/etc/shadow".into(), "/etc/app".into()];
        g.homes = vec!["/root".into()];
        g
    }

    /// The fix was withheld, and the reason says so.
    fn withheld(d: &Denial) -> bool {
        d.fix.is_none() && d.reason.ends_with(": no fix is offered")
    }

    fn one(text: &str) -> Option<Denial> {
        let mut v = from_output(&grant(), false, Path::new("/work/p/sub"), text);
        assert!(v.len() <= 1, "{v:?}");
        v.pop()
    }

    #[test]
    fn each_message_shape_names_its_path_and_the_fix() {
        let d = one("cat: /etc/shadow: Permission denied").unwrap();
        assert_eq!((d.op, d.target.as_str()), ("read", "/etc/shadow"));
        assert!(
            d.reason.contains("built-in secret") && d.fix.is_none(),
            "{d:?}"
        );
        let d = one("cat: /etc/ssh/ssh_host_ed25519_key: Permission denied").unwrap();
        assert!(d.reason.contains("SSH host private keys"), "{d:?}");
        let d = one("cat: /etc/app/token: Permission denied").unwrap();
        assert!(
            d.fix
                .as_deref()
                .is_some_and(|f| f.contains("toolcage policy") && f.contains("/etc/app")),
            "{d:?}"
        );
        // A write to a system directory: refused, and no fix suggests it.
        let d = one("touch: cannot touch '/usr/x': Read-only file system").unwrap();
        assert!(
            withheld(&d) && d.reason.contains("a system directory"),
            "{d:?}"
        );
        let d =
            one("PermissionError: [Errno 13] Permission denied: '/work/p/.git/config'").unwrap();
        assert!(d.reason.starts_with("protected"), "{}", d.reason);
        let d = one("sh: 1: cannot create /etc/x.conf: Permission denied").unwrap();
        assert!(withheld(&d), "{d:?}");
        // A script naming itself first: only the refused path counts.
        let d = one("/work/p/.agents/tools/t: 3: cannot create /etc/x: Read-only file system");
        assert_eq!(d.unwrap().target, "/etc/x");
        // Outside every root and present on the host: the missing path is
        // the sandbox's doing.
        // The operator's home itself is never offered.
        let d = one("ls: cannot access '/root': No such file or directory").unwrap();
        assert!(withheld(&d) && d.reason.contains("home"), "{d:?}");
        assert!(
            d.inferred && d.line().ends_with(", inferred)"),
            "{}",
            d.line()
        );
        // Control: a directory outside the system trees gets its fix.
        let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut g = grant();
        g.read.push(crate_dir.to_path_buf());
        g.homes = vec![crate_dir.parent().unwrap().to_path_buf()];
        let text = format!(
            "touch: cannot touch '{}/x': Read-only file system",
            crate_dir.display()
        );
        let d = from_output(&g, false, Path::new("/work/p"), &text);
        assert_eq!(
            d[0].fix.as_deref(),
            Some(format!("--write {}", crate_dir.display()).as_str())
        );
    }

    #[test]
    fn a_home_secret_is_named_and_never_offered() {
        // Outside /tmp, which is the call's own.
        let home = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let h = home.path().canonicalize().unwrap();
        std::fs::create_dir_all(h.join(".ssh")).unwrap();
        std::fs::write(h.join(".ssh/id_rsa"), "k").unwrap();
        std::fs::write(h.join(".ssh/known_hosts"), "k").unwrap();
        let mut g = grant();
        g.homes = vec![h.clone()];
        let text = format!(
            "cat: {}/.ssh/id_rsa: No such file or directory",
            h.display()
        );
        let d = from_output(&g, false, Path::new("/work/p"), &text);
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(
            d[0].fix.is_none() && d[0].reason.contains("SSH private keys"),
            "{d:?}"
        );
        // Control: known_hosts is no secret; reading it is a fix like any.
        let text = format!(
            "cat: {}/.ssh/known_hosts: No such file or directory",
            h.display()
        );
        let d = from_output(&g, false, Path::new("/work/p"), &text);
        assert_eq!(
            d[0].fix.as_deref(),
            Some(format!("--read {}/.ssh/known_hosts", h.display()).as_str())
        );
    }

    #[test]
    fn the_host_tmp_namespace_free_is_named_with_the_fix() {
        let mut g = grant();
        g.private_tmp = true;
        let own = Path::new("/tmp/.toolcage-0/tmp-1-0");
        let d = host_tmp(&g, Some(own), "tmpfile: Permission denied\n").unwrap();
        assert_eq!((d.op, d.target.as_str()), ("create", "/tmp"));
        assert!(d.reason.contains("tmpfile()"), "{d:?}");
        assert!(
            d.fix
                .as_deref()
                .is_some_and(|f| f.contains("add_write = [\"/tmp\"]"))
        );
        let text = "mktemp: failed to create file via template '/tmp/x.XXXX': Permission denied\n\
                    sh: 1: cannot create /tmp/y: Permission denied\n";
        assert_eq!(host_tmp(&g, Some(own), text).unwrap().count, 2);
        // Not a refusal, the call's own tmp, a missing file: nothing.
        assert!(host_tmp(&g, Some(own), "tmpfile: made /tmp/z").is_none());
        let mine = format!("cat: {}/f: Permission denied", own.display());
        assert!(host_tmp(&g, Some(own), &mine).is_none());
        assert!(host_tmp(&g, Some(own), "cat: /tmp/gone: No such file or directory").is_none());
        // /tmp granted: the refusal is the file's own.
        g.write.push("/tmp".into());
        assert!(host_tmp(&g, None, "tmpfile: Permission denied").is_none());
    }

    #[test]
    fn relative_paths_are_taken_from_the_working_directory() {
        // cwd is /work/p/sub.
        let d = one("touch: cannot touch '../../../usr/x': Read-only file system").unwrap();
        assert!(d.target == "/usr/x" && withheld(&d), "{d:?}");
        let d = one("sh: 1: cannot create ../.git/config: Read-only file system").unwrap();
        assert_eq!(d.target, "/work/p/.git/config");
        assert!(d.reason.starts_with("protected"), "{d:?}");
        let d = one("cat: ../../../../etc/shadow: Permission denied").unwrap();
        assert!(d.reason.contains("built-in secret"), "{d:?}");
        // Control: the same relative file inside the write root is the
        // file's own business; a number or a phrase is no path.
        assert!(one("touch: cannot touch 'x.txt': Permission denied").is_none());
        assert!(one("sh: 1: cannot create x: Permission denied").is_none());
    }

    #[test]
    fn a_symlink_is_classified_where_it_leads_and_tmp_projects_count() {
        // The project is under /tmp (the call's private /tmp elsewhere).
        let project = tempfile::tempdir().unwrap();
        let p = project.path().canonicalize().unwrap();
        std::os::unix::fs::symlink("/etc/shadow", p.join("link")).unwrap();
        let mut g = grant();
        g.write = vec![p.clone()];
        g.protected = vec![p.join("tools.toml")];
        let d = from_output(&g, false, &p, "cat: link: Permission denied");
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].target, "/etc/shadow");
        let text = format!(
            "sh: 1: cannot create {}/tools.toml: Read-only file system",
            p.display()
        );
        let d = from_output(&g, false, &p, &text);
        assert!(
            d.len() == 1 && d[0].reason.starts_with("protected"),
            "{d:?}"
        );
        // Control: a plain file in the project is not explained.
        std::fs::write(p.join("plain"), "").unwrap();
        assert!(from_output(&g, false, &p, "cat: plain: Permission denied").is_empty());
    }

    #[test]
    fn creating_in_a_host_directory_outside_every_root_is_explained() {
        for line in [
            "touch: cannot touch '/root/tc-no-such': No such file or directory",
            "sh: 1: cannot create /var/tc-no-such: Directory nonexistent",
        ] {
            let d = one(line).unwrap_or_else(|| panic!("{line}"));
            assert_eq!(d.op, "create", "{d:?}");
            // /root is the operator's home, /var a system directory.
            assert!(withheld(&d), "{d:?}");
        }
        // Control: a host directory elsewhere gets its fix.
        let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        let line = format!(
            "touch: cannot touch '{}/tc-no-such': No such file or directory",
            crate_dir.display()
        );
        let mut g = grant();
        g.homes = vec![crate_dir.parent().unwrap().to_path_buf()];
        let d = from_output(&g, false, Path::new("/work/p"), &line);
        assert_eq!(
            d[0].fix.as_deref(),
            Some(format!("--write {}", crate_dir.display()).as_str())
        );
        // Control: a directory the host does not have either.
        assert!(one("touch: cannot touch '/tc-no-dir/x': No such file or directory").is_none());
    }

    #[test]
    fn what_the_grant_does_not_explain_is_left_out() {
        // Inside the write root: the file's own permissions.
        assert!(one("cat: /work/p/secret: Permission denied").is_none());
        // Missing on the host as well: really missing.
        assert!(one("cat: /no/such/tc-path: No such file or directory").is_none());
        assert!(one("cat: /etc/sudoers.d/tc-no-such: No such file or directory").is_none());
        assert!(one("cat: /etc/app/tc-no-such: No such file or directory").is_none());
        // Missing inside a read root: really missing.
        assert!(one("cat: /usr/tc-no-such: No such file or directory").is_none());
        // The call's own /tmp, and lines without an error.
        assert!(one("mkdir: cannot create directory '/tmp/x': Permission denied").is_none());
        assert!(one("reading /etc/passwd").is_none());
    }

    #[test]
    fn a_resolver_failure_in_tcp_mode_names_why() {
        let mut g = grant();
        g.network = Network::Tcp {
            connect: vec![443],
            bind: vec![],
        };
        let d = from_output(
            &g,
            false,
            Path::new("/work/p"),
            "curl: (6) Could not resolve host: x.test",
        );
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(d[0].reason.contains("TCP sockets only"), "{d:?}");
        // Control: network on, a resolver failure is the network's own.
        g.network = Network::On;
        assert!(
            from_output(
                &g,
                false,
                Path::new("/work/p"),
                "curl: (6) Could not resolve host: x.test"
            )
            .is_empty()
        );
    }

    #[test]
    fn no_network_messages_are_denials_only_with_the_network_off() {
        let text = "curl: (6) Could not resolve host: example.com";
        let d = one(text).unwrap();
        assert_eq!((d.layer, d.op), ("seccomp", "connect"));
        assert!(d.fix.unwrap().contains("--allow-net"));
        let mut on = grant();
        on.network = Network::On;
        assert!(
            from_output(&on, false, Path::new("/work/p"), text).is_empty(),
            "control: network on"
        );
    }

    #[test]
    fn a_refused_system_call_is_named_whatever_the_grant() {
        for (line, op) in [
            (
                "unshare: unshare failed: Operation not permitted",
                "unshare",
            ),
            ("ptrace: Operation not permitted.", "ptrace"),
            (
                "strace: ptrace(PTRACE_TRACEME, ...): Operation not permitted",
                "ptrace",
            ),
            ("mount: /mnt: permission denied.", "mount"),
            (
                "chroot: cannot change root directory to '/x': Operation not permitted",
                "chroot",
            ),
        ] {
            let d = one(line).unwrap_or_else(|| panic!("{line}"));
            assert_eq!((d.layer, d.op, d.inferred), ("seccomp", op, true), "{line}");
            assert!(d.fix.is_none(), "{d:?}");
        }
        // Controls: the name in a path, or no refusal, is no syscall denial.
        assert!(one("cat: /work/p/mount/x: Permission denied").is_none());
        assert!(one("unshare: unshare failed: Invalid argument").is_none());
        assert!(one("remount: done").is_none());
    }

    /// What `text` gives namespace-free (`nsfree`) under the test grant.
    fn in_mode(nsfree: bool, text: &str) -> Vec<Denial> {
        from_output(&grant(), nsfree, Path::new("/work/p"), text)
    }

    #[test]
    fn namespace_free_refusals_of_another_process_and_bind_are_named() {
        // The lines util-linux, Go, socat and ssh-agent print (checked
        // through the binary namespace-free for the first four).
        for (line, op) in [
            (
                "prlimit: failed to set the NOFILE resource limit: Operation not permitted",
                "prlimit64",
            ),
            (
                "renice: failed to set priority for 6053 (process ID): Operation not permitted",
                "setpriority",
            ),
            (
                "renice: failed to set priority for 1000 (user ID): Operation not permitted",
                "setpriority",
            ),
            (
                "taskset: failed to set pid 6053's affinity: Operation not permitted",
                "sched_setaffinity",
            ),
            (
                "ionice: ioprio_set failed: Operation not permitted",
                "ioprio_set",
            ),
            ("listen unix @squat: bind: operation not permitted", "bind"),
            (
                "2026/01/01 socat[12] E bind(5, {AF=1 \"\\0x\"}, 5): Operation not permitted",
                "bind",
            ),
            (
                "Error: listen EPERM: operation not permitted /w/s.sock",
                "listen",
            ),
        ] {
            let v = in_mode(true, line);
            assert_eq!(v.len(), 1, "{line}: {v:?}");
            let d = &v[0];
            assert_eq!((d.layer, d.op, d.inferred), ("seccomp", op, true), "{line}");
            assert!(d.fix.is_none(), "{d:?}");
            // Control: with namespaces none of these is the filter's (the
            // host's pids are not visible, bind is the call's own).
            assert!(in_mode(false, line).is_empty(), "namespaced: {line}");
        }
        // Controls: the same programs on the tool's own process (pid 0),
        // reading rather than setting, another error, or a path that
        // merely holds the name.
        for line in [
            "taskset: failed to set pid 0's affinity: Invalid argument",
            "taskset: failed to set pid 0's affinity: Operation not permitted",
            "renice: failed to set priority for 0 (process ID): Operation not permitted",
            "renice: failed to set priority for 6053 (process ID): Permission denied",
            "prlimit: failed to get the NOFILE resource limit: Operation not permitted",
            "ionice: ioprio_get failed: Operation not permitted",
            "taskset: failed to set pid 6053's affinity: Invalid argument",
            "pid 6053's current affinity mask: 3",
        ] {
            assert!(in_mode(true, line).is_empty(), "control: {line}");
        }
        // bind and listen are refused only with the network off, or in
        // tcp mode (in both modes there: it has no namespace of its own).
        let mut on = grant();
        on.network = Network::On;
        let line = "listen unix @squat: bind: operation not permitted";
        assert!(from_output(&on, true, Path::new("/work/p"), line).is_empty());
        on.network = Network::Tcp {
            connect: vec![443],
            bind: vec![],
        };
        assert_eq!(from_output(&on, false, Path::new("/work/p"), line).len(), 1);
        // A bind refused by the filesystem (EACCES) is not the filter's.
        assert!(in_mode(true, "ssh-agent: bind: Permission denied").is_empty());
    }

    #[test]
    fn a_refused_line_discipline_is_named_in_both_modes() {
        for nsfree in [false, true] {
            let v = in_mode(
                nsfree,
                "ldattach: can't set line discipline: Operation not permitted",
            );
            assert_eq!(v.len(), 1, "{v:?}");
            assert_eq!((v[0].layer, v[0].op), ("seccomp", "ioctl"));
            assert!(v[0].target.contains("TIOCSETD"), "{v:?}");
        }
        // Controls: reading it, or a tty that is not a serial line.
        assert!(
            in_mode(
                false,
                "ldattach: can't get line discipline: Operation not permitted"
            )
            .is_empty()
        );
        assert!(in_mode(false, "ldattach: /dev/null is not a serial line").is_empty());
    }

    #[test]
    fn repeats_are_counted_and_paths_normalised() {
        let v = from_output(
            &grant(),
            false,
            Path::new("/work/p"),
            "cat: /etc/../etc/shadow: Permission denied\ncat: /etc/shadow: Permission denied\n",
        );
        assert_eq!(v.len(), 1);
        assert_eq!((v[0].target.as_str(), v[0].count), ("/etc/shadow", 2));
    }

    #[test]
    fn git_without_an_identity_names_both_ways_to_give_it_one() {
        let d = one("Author identity unknown").unwrap();
        assert_eq!(d.target, "git's identity");
        let fix = d.fix.unwrap();
        assert!(fix.contains("--env GIT_AUTHOR_NAME=") && fix.contains("--read ~/.gitconfig"));
        // Control: git's other failures are not an identity.
        assert!(
            one("fatal: not a git repository (or any of the parent directories): .git").is_none()
        );
    }

    #[test]
    fn a_package_managers_download_is_told_to_fetch_first() {
        let text = "    Updating crates.io index\nwarning: spurious network error: Could not resolve host: index.crates.io";
        let d = one(text).unwrap();
        assert!(
            d.fix
                .unwrap()
                .starts_with("fetch dependencies before the run")
        );
        // Control: another program's refusal keeps the flag.
        let d = one("curl: (6) Could not resolve host: example.com").unwrap();
        assert!(d.fix.unwrap().starts_with("--allow-net"));
    }

    #[test]
    fn localhost_is_the_calls_own_in_domain_mode_only() {
        let line = "curl: (7) Failed to connect to localhost port 8099 after 0 ms: Couldn't connect to server";
        let mut g = grant();
        g.network = Network::Domains(toolcage_policy::DomainPolicy::default());
        let d = from_output(&g, false, Path::new("/work/p"), line);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].target, "localhost:8099");
        assert!(
            d[0].fix
                .as_deref()
                .unwrap()
                .starts_with("--allow-domain 127.0.0.1:8099")
        );
        let node = "Error: connect ECONNREFUSED 127.0.0.1:3000";
        let d = from_output(&g, false, Path::new("/work/p"), node);
        assert_eq!(d[0].target, "localhost:3000", "{d:?}");
        // Control: with the host's network, localhost is the host's.
        g.network = Network::On;
        assert!(from_output(&g, false, Path::new("/work/p"), line).is_empty());
    }

    #[test]
    fn a_variable_the_command_did_not_get_is_named_with_its_flag() {
        // HOME is set for the test process; the grant passes nothing.
        let d = one("bash: HOME: unbound variable").unwrap();
        assert_eq!(
            (d.target.as_str(), d.fix.as_deref()),
            ("$HOME", Some("--env HOME"))
        );
        let d = one("KeyError: 'HOME'").unwrap();
        assert_eq!(d.target, "$HOME");
        // Controls: a variable unset here too was not dropped; one the
        // grant passes was not either.
        assert!(one("sh: 1: TOOLCAGE_NEVER_SET_ANYWHERE: parameter not set").is_none());
        let mut g = grant();
        g.env_allow = vec!["HO*".into()];
        assert!(
            from_output(
                &g,
                false,
                Path::new("/work/p"),
                "bash: HOME: unbound variable"
            )
            .is_empty()
        );
    }
}
