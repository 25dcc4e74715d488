//! Refusals the seccomp filter makes, and the CPU time limit, as a tool's
//! messages report them.

use crate::denial::Denial;
use toolcage_policy::{Grant, Network};

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
pub(super) fn refused_syscall(line: &str) -> Option<Denial> {
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
pub(super) fn refused_by_pid_or_mode(
    grant: &Grant,
    namespace_free: bool,
    line: &str,
) -> Option<Denial> {
    let lower = line.to_ascii_lowercase();
    if !lower.contains(EPERM) {
        return None;
    }
    let (op, target, what) = line_discipline(&lower)
        .or_else(|| listening(grant, namespace_free, &lower))
        .or_else(|| namespace_free.then(|| another_process(&lower)).flatten())?;
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

/// A refusal found in a message: the system call, what it would have
/// changed, and why it is refused.
type Found = (&'static str, &'static str, &'static str);

/// `TIOCSETD`, refused in every mode, which no message names by its
/// system call.
fn line_discipline(lower: &str) -> Option<Found> {
    let named = names(lower, "set line discipline", &[":"])
        || names(lower, "tiocsetd", &[":", ")", " failed"]);
    named.then_some((
        "ioctl",
        "the terminal's line discipline (TIOCSETD)",
        "changing a terminal's line discipline (TIOCSETD) is refused in every call by the \
             sandbox's seccomp filter: the terminal would stay changed after the call",
    ))
}

/// `bind` or `listen`, refused namespace-free with the network off and in
/// network mode "tcp".
fn listening(grant: &Grant, namespace_free: bool, lower: &str) -> Option<Found> {
    let refused = (namespace_free && grant.network == Network::Off)
        || matches!(grant.network, Network::Tcp { .. });
    let bind = names(lower, "bind", &[":", "(", " failed", " eperm"]);
    let listen = names(lower, "listen", &[":", "(", " failed", " eperm"]);
    (refused && (bind || listen)).then_some((
        if bind { "bind" } else { "listen" },
        "a listening socket",
        "the seccomp filter refuses bind and listen namespace-free with the network off, and \
             in network mode \"tcp\" without bind ports (with them, any bind but an IPv4 or \
             IPv6 address): without a network namespace of its own an abstract socket name \
             would be the host's",
    ))
}

/// Namespace-free: another process named by pid (`prlimit --pid`,
/// `renice -p`, `taskset -p`, `ionice -p`).
fn another_process(lower: &str) -> Option<Found> {
    let pid_named = |n: Option<u64>| n.is_some_and(|n| n != 0);
    if names(lower, "prlimit", &[":"])
        && lower.contains("failed to set the ")
        && lower.contains(" resource limit")
    {
        Some((
            "prlimit64",
            "another process's resource limits",
            "prlimit --pid: namespace-free, the seccomp filter refuses setting the limits of a \
             process named by pid (any pid, the call's own included: it cannot tell them from \
             the host's); a command run by prlimit itself (`prlimit --nofile=N CMD`) may lower \
             its own",
        ))
    } else if names(lower, "renice", &[":"])
        && (pid_named(number_after(lower, "failed to set priority for "))
            || lower.contains("(user id)"))
    {
        Some((
            "setpriority",
            "another process's priority",
            "renice -p/-g/-u: namespace-free, the seccomp filter refuses changing the priority \
             of a process, group or user named by id (the call's own included: it cannot tell \
             them from the host's); `nice CMD` still lowers a command's own",
        ))
    } else if names(lower, "taskset", &[":"])
        && pid_named(number_after(lower, "failed to set pid "))
    {
        Some((
            "sched_setaffinity",
            "another process's CPU affinity",
            "taskset -p: namespace-free, the seccomp filter refuses setting the CPU affinity of \
             a process named by pid (the call's own included: it cannot tell them from the \
             host's); `taskset MASK CMD` still sets a command's own",
        ))
    } else if names(lower, "ionice", &[":"]) && lower.contains("ioprio_set failed") {
        Some((
            "ioprio_set",
            "another process's I/O priority",
            "ionice -p/-u: namespace-free, the seccomp filter refuses setting the I/O priority \
             of a process named by pid or of a user (the call's own included: it cannot tell \
             them from the host's); `ionice -c CLASS CMD` still sets a command's own",
        ))
    } else {
        None
    }
}

/// The CPU time limit, when the call (`exit_signal`: how its program
/// ended) or a process it ran (a shell's "CPU time limit exceeded") hit it.
pub fn cpu_limit(grant: &Grant, exit_signal: Option<i32>, text: &str) -> Option<Denial> {
    let secs = grant.limits.cpu_seconds?;
    let hit = exit_signal == Some(nix::sys::signal::Signal::SIGXCPU as i32)
        || text.contains("CPU time limit exceeded");
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
        inferred: exit_signal != Some(nix::sys::signal::Signal::SIGXCPU as i32),
    })
}
