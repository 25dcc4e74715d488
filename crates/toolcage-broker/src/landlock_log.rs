//! Exact Landlock denials from the kernel's audit log, where it can be
//! read: toolcage subscribes to the audit subsystem's read-only multicast
//! group (`AUDIT_NLGRP_READLOG`, which needs CAP_AUDIT_READ: root) before
//! the call, and with `--explain` the call's Landlock domain logs what it
//! refuses after exec (`LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON`). Records
//! arrive only while audit is enabled; toolcage never enables it (nothing
//! arrives, and the denials are inferred instead).
//!
//! A denial record (type 1423) names its domain; the domain's record
//! (1424, `status=allocated`) names the process that made it. Only domains
//! made by the call's own processes count.

use crate::denial::{Denial, DenialLog};
use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use toolcage_policy::Grant;

const AUDIT_LANDLOCK_ACCESS: u16 = 1423;
const AUDIT_LANDLOCK_DOMAIN: u16 = 1424;
/// `AUDIT_NLGRP_READLOG`, as a group mask.
const READLOG_GROUP: u32 = 1;

/// A subscription to the audit log, read on a thread until [`Tap::finish`].
pub struct Tap {
    stop: Arc<AtomicBool>,
    reader: std::thread::JoinHandle<Vec<(u16, String)>>,
}

/// Subscribe; `None` when this process may not read the audit log.
pub fn open() -> Option<Tap> {
    use nix::sys::socket::{
        AddressFamily, NetlinkAddr, SockFlag, SockProtocol, SockType, bind, socket,
    };
    let fd = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        SockProtocol::NetlinkAudit,
    )
    .ok()?;
    bind(fd.as_raw_fd(), &NetlinkAddr::new(0, READLOG_GROUP)).ok()?;
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let reader = std::thread::Builder::new()
        .name("audit-tap".into())
        .spawn(move || read_until(fd, &flag))
        .ok()?;
    Some(Tap { stop, reader })
}

fn read_until(fd: OwnedFd, stop: &AtomicBool) -> Vec<(u16, String)> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut records = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    // After the call, records still in flight are drained until none has
    // come for QUIET (kauditd delivers late on a busy machine), at most 1 s.
    const QUIET: Duration = Duration::from_millis(150);
    let mut stopped: Option<Instant> = None;
    let mut last = Instant::now();
    loop {
        if stopped.is_none() && stop.load(Ordering::Relaxed) {
            stopped = Some(Instant::now());
        }
        let drained = stopped.is_some_and(|s| {
            let now = Instant::now();
            now > s + Duration::from_secs(1) || (now > s + QUIET && now > last + QUIET)
        });
        if drained || records.len() > 10_000 {
            return records;
        }
        let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
        if !matches!(poll(&mut fds, PollTimeout::from(25u8)), Ok(n) if n > 0) {
            continue;
        }
        let Ok(n) = nix::sys::socket::recv(
            fd.as_raw_fd(),
            &mut buf,
            nix::sys::socket::MsgFlags::empty(),
        ) else {
            continue;
        };
        records.extend(parse_messages(&buf[..n]));
        last = Instant::now();
    }
}

/// The (type, text) of each netlink message in `buf`.
pub(crate) fn parse_messages(mut buf: &[u8]) -> Vec<(u16, String)> {
    let mut out = Vec::new();
    while buf.len() >= 16 {
        let len = u32::from_ne_bytes(buf[0..4].try_into().unwrap_or_default()) as usize;
        let kind = u16::from_ne_bytes(buf[4..6].try_into().unwrap_or_default());
        if len < 16 || len > buf.len() {
            break;
        }
        let text = String::from_utf8_lossy(&buf[16..len]);
        out.push((kind, text.trim_end_matches('\0').trim().to_string()));
        buf = &buf[len.next_multiple_of(4).min(buf.len())..];
    }
    out
}

/// `key=value` from an audit record: quoted, or hex-encoded (audit's form
/// for a value with spaces or odd bytes), or bare.
fn field(text: &str, key: &str) -> Option<String> {
    let at = text
        .match_indices(&format!("{key}="))
        .find(|(i, _)| *i == 0 || text.as_bytes()[i - 1] == b' ')?
        .0;
    let rest = &text[at + key.len() + 1..];
    if let Some(q) = rest.strip_prefix('"') {
        return q.split('"').next().map(str::to_string);
    }
    let raw = rest.split(' ').next().unwrap_or_default();
    let hex =
        raw.len().is_multiple_of(2) && raw.len() >= 2 && raw.bytes().all(|b| b.is_ascii_hexdigit());
    if hex && key == "path" {
        let bytes: Option<Vec<u8>> = (0..raw.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&raw[i..i + 2], 16).ok())
            .collect();
        if let Some(b) = bytes {
            return Some(String::from_utf8_lossy(&b).into_owned());
        }
    }
    Some(raw.to_string())
}

/// What a Landlock blocker refused, in a denial's words.
fn op_of(blocker: &str) -> &'static str {
    match blocker {
        "fs.read_file" | "fs.read_dir" => "read",
        "fs.write_file" | "fs.truncate" => "write",
        "fs.execute" => "execute",
        "fs.remove_file" | "fs.remove_dir" => "remove",
        "fs.refer" => "rename",
        "fs.ioctl_dev" => "ioctl",
        "net.bind_tcp" => "bind",
        "net.connect_tcp" => "connect",
        b if b.starts_with("fs.make_") => "create",
        b if b.starts_with("scope.") => "scope",
        _ => "access",
    }
}

/// The call's processes as the audit log names them: its init and the
/// init's child, the tool, which makes the Landlock domain. The tool waits
/// before exec until `gate` closes, so it is alive (and listed) when read;
/// the wait ends early if setup failed (the report pipe has something).
pub fn name_the_tool(init: i32, report: &impl AsFd, gate: OwnedFd) -> BTreeSet<i32> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut pids = BTreeSet::from([init]);
    let children = format!("/proc/{init}/task/{init}/children");
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(text) = std::fs::read_to_string(&children) {
            let before = pids.len();
            pids.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            );
            if pids.len() > before {
                break;
            }
        }
        let mut fds = [PollFd::new(report.as_fd(), PollFlags::POLLIN)];
        if matches!(poll(&mut fds, PollTimeout::from(1u8)), Ok(n) if n > 0) {
            break;
        }
    }
    drop(gate);
    pids
}

impl Tap {
    /// Stop reading; the Landlock denials of the domains made by `pids`.
    pub fn finish(self, grant: &Grant, pids: &BTreeSet<i32>) -> Vec<Denial> {
        self.stop.store(true, Ordering::Relaxed);
        let records = self.reader.join().unwrap_or_default();
        denials(grant, &records, pids)
    }
}

pub(crate) fn denials(
    grant: &Grant,
    records: &[(u16, String)],
    pids: &BTreeSet<i32>,
) -> Vec<Denial> {
    let ours: BTreeMap<String, ()> = records
        .iter()
        .filter(|(k, t)| *k == AUDIT_LANDLOCK_DOMAIN && t.contains("status=allocated"))
        .filter(|(_, t)| {
            field(t, "pid")
                .and_then(|p| p.parse::<i32>().ok())
                .is_some_and(|p| pids.contains(&p))
        })
        .filter_map(|(_, t)| field(t, "domain").map(|d| (d, ())))
        .collect();
    let mut log = DenialLog::default();
    for (_, t) in records.iter().filter(|(k, _)| *k == AUDIT_LANDLOCK_ACCESS) {
        let Some(domain) = field(t, "domain") else {
            continue;
        };
        if !ours.contains_key(&domain) {
            continue;
        }
        let blockers = field(t, "blockers").unwrap_or_default();
        let first = blockers.split(',').next().unwrap_or_default();
        let target = field(t, "path")
            .or_else(|| field(t, "dport").map(|p| format!("port {p}")))
            .unwrap_or_else(|| blockers.clone());
        let (reason, fix) =
            match crate::inferred::explain_path(grant, std::path::Path::new(&target)) {
                Some((reason, fix)) => (reason, fix),
                None => ("not in the grant".to_string(), None),
            };
        log.record(Denial {
            layer: "landlock",
            op: op_of(first),
            target,
            rule: Some(blockers),
            reason,
            fix,
            count: 1,
            inferred: false,
        });
    }
    log.kept
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(kind: u16, text: &str) -> Vec<u8> {
        let len = 16 + text.len();
        let mut v = Vec::new();
        v.extend((len as u32).to_ne_bytes());
        v.extend(kind.to_ne_bytes());
        v.extend([0u8; 10]);
        v.extend(text.as_bytes());
        while v.len() % 4 != 0 {
            v.push(0);
        }
        v
    }

    #[test]
    fn records_of_the_calls_own_domain_become_exact_denials() {
        // As this kernel wrote them (research D.2).
        let mut buf = msg(
            1424,
            "domain=1a2b status=allocated mode=enforcing pid=4242 uid=0 exe=\"/usr/bin/cat\"",
        );
        buf.extend(msg(
            1423,
            "domain=1a2b blockers=fs.read_file path=\"/var/tmp/x/data\" dev=\"vda\" ino=12",
        ));
        buf.extend(msg(
            1424,
            "domain=ffff status=allocated mode=enforcing pid=7 uid=0",
        ));
        buf.extend(msg(
            1423,
            "domain=ffff blockers=fs.read_file path=\"/etc/other\"",
        ));
        buf.extend(msg(
            1423,
            "domain=1a2b blockers=fs.write_file path=2F7573722F6120622F63",
        ));
        let records = parse_messages(&buf);
        assert_eq!(records.len(), 5);
        let mut g = Grant::closed("/p".into());
        g.read = vec!["/usr".into()];
        let d = denials(&g, &records, &BTreeSet::from([4242]));
        assert_eq!(d.len(), 2, "{d:?}");
        assert_eq!(
            (d[0].layer, d[0].op, d[0].target.as_str()),
            ("landlock", "read", "/var/tmp/x/data")
        );
        assert!(!d[0].inferred);
        assert_eq!(d[0].fix.as_deref(), Some("--read /var/tmp/x/data"));
        // A hex-encoded path (it has spaces).
        assert_eq!((d[1].op, d[1].target.as_str()), ("write", "/usr/a b/c"));
        // Control: another process's domain is not ours.
        assert!(denials(&g, &records, &BTreeSet::from([1])).is_empty());
    }
}
