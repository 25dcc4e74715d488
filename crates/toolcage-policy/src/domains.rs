//! Domain mode's policy: host patterns, the pin table, and the one
//! decision every network path of a call goes through (HTTP proxy,
//! CONNECT, DNS stub, transparent capture, http executor).
//!
//! Order, for every request: [`DomainPolicy::decide`] on the name (deny
//! wins, then the allow list), and only when allowed: resolve (a pin, or
//! the system resolver), [`DomainPolicy::check_address`] on each address
//! (private, loopback and link-local refused unless pinned or allowed as
//! an IP rule), then connect to the address that passed. A denied name is
//! never resolved.

use super::hostname::{Host, canonical, non_public, normalize_name, parse_port, shown};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

/// One host pattern of `[network] allow` / `deny`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct HostRule {
    pattern: Pattern,
    /// `None`: every port.
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Pattern {
    /// `api.github.com`: that name only.
    Exact(String),
    /// `*.pypi.org`: names beneath it, not the name itself.
    Below(String),
    /// `*`: every name (never an IP literal).
    AnyName,
    /// `10.0.0.0/8`, `127.0.0.1` (a /32), `[::1]`: addresses.
    Net(IpAddr, u8),
}

const HELP: &str = "use host, *.domain, host:port, an IP address or a CIDR range";

impl HostRule {
    /// Parse a pattern; the message is one line naming what is wrong.
    pub fn parse(s: &str) -> Result<HostRule, String> {
        if s.is_empty() {
            return Err(format!("empty host pattern ({HELP})"));
        }
        if let Some(c) = s.chars().find(|c| c.is_control() || c.is_whitespace()) {
            let what = if c == '\0' {
                "a NUL byte"
            } else {
                "whitespace or a control character"
            };
            return Err(format!(
                "{}: a host pattern cannot contain {what}",
                shown(s)
            ));
        }
        if let Some((net, len)) = s.split_once('/') {
            return parse_net(s, net, len);
        }
        let (host, port) = split_port(s)?;
        let pattern = if host == "*" {
            Pattern::AnyName
        } else if let Some(rest) = host.strip_prefix("*.") {
            if rest.contains('*') {
                return Err(format!(
                    "{}: '*' only as the whole first label ({HELP})",
                    shown(s)
                ));
            }
            Pattern::Below(normalize_name(rest)?)
        } else if host.contains('*') {
            return Err(format!(
                "{}: '*' only as the whole first label (*.example.com) or alone",
                shown(s)
            ));
        } else {
            match Host::parse(host)? {
                Host::Name(n) => Pattern::Exact(n),
                Host::Ip(ip) => Pattern::Net(ip, full_len(ip)),
            }
        };
        Ok(HostRule { pattern, port })
    }

    /// True for an address or range rule (`127.0.0.1`, `10.0.0.0/8`).
    pub(crate) fn is_ip(&self) -> bool {
        matches!(self.pattern, Pattern::Net(..))
    }

    fn host_matches(&self, host: &Host) -> bool {
        match (&self.pattern, host) {
            (Pattern::Exact(n), Host::Name(h)) => n == h,
            (Pattern::Below(n), Host::Name(h)) => {
                h.len() > n.len() + 1
                    && h.ends_with(n.as_str())
                    && h[..h.len() - n.len()].ends_with('.')
            }
            (Pattern::AnyName, Host::Name(_)) => true,
            (Pattern::Net(net, len), Host::Ip(ip)) => in_net(*ip, *net, *len),
            _ => false,
        }
    }

    /// Matches `host` on `port` (`None`: some port, for DNS).
    pub fn matches(&self, host: &Host, port: Option<u16>) -> bool {
        self.host_matches(host) && (self.port.is_none() || port.is_none() || self.port == port)
    }

    /// The part of `self` that `other` also allows (both as allow rules).
    fn intersect(&self, other: &HostRule) -> Option<HostRule> {
        let port = match (self.port, other.port) {
            (None, p) | (p, None) => p,
            (Some(a), Some(b)) if a == b => Some(a),
            _ => return None,
        };
        let pattern = if covers(&self.pattern, &other.pattern) {
            other.pattern.clone()
        } else if covers(&other.pattern, &self.pattern) {
            self.pattern.clone()
        } else {
            return None;
        };
        Some(HostRule { pattern, port })
    }
}

/// `a` allows every host `b` allows.
fn covers(a: &Pattern, b: &Pattern) -> bool {
    let below = |n: &str, m: &str| {
        m.len() > n.len() + 1 && m.ends_with(n) && m[..m.len() - n.len()].ends_with('.')
    };
    match (a, b) {
        (Pattern::AnyName, Pattern::Exact(_) | Pattern::Below(_) | Pattern::AnyName) => true,
        (Pattern::Exact(n), Pattern::Exact(m)) => n == m,
        (Pattern::Below(n), Pattern::Exact(m)) => below(n, m),
        (Pattern::Below(n), Pattern::Below(m)) => n == m || below(n, m),
        (Pattern::Net(n, l), Pattern::Net(m, k)) => k >= l && in_net(*m, *n, *l),
        _ => false,
    }
}

fn full_len(ip: IpAddr) -> u8 {
    if ip.is_ipv4() { 32 } else { 128 }
}

fn in_net(ip: IpAddr, net: IpAddr, len: u8) -> bool {
    match (canonical(ip), net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = u32::MAX.checked_shl(32 - len as u32).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = u128::MAX.checked_shl(128 - len as u32).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

fn parse_net(s: &str, net: &str, len: &str) -> Result<HostRule, String> {
    let ip = match Host::parse(net) {
        Ok(Host::Ip(ip)) => ip,
        _ => {
            return Err(format!(
                "{}: a CIDR range needs an IP address before '/' ({HELP})",
                shown(s)
            ));
        }
    };
    let max = full_len(ip);
    let len = match len.parse::<u8>() {
        Ok(l) if l <= max && len.bytes().all(|b| b.is_ascii_digit()) => l,
        _ => return Err(format!("{}: prefix length must be 0-{max}", shown(s))),
    };
    Ok(HostRule {
        pattern: Pattern::Net(ip, len),
        port: None,
    })
}

/// `host` or `host:port`; IPv6 with a port in brackets.
fn split_port(s: &str) -> Result<(&str, Option<u16>), String> {
    let port = |p: &str| {
        parse_port(p)
            .map(Some)
            .map_err(|m| format!("{}: {m}", shown(s)))
    };
    if s.starts_with('[') {
        let end = s
            .find(']')
            .ok_or_else(|| format!("{}: unclosed '['", shown(s)))?;
        return match &s[end + 1..] {
            "" => Ok((&s[..=end], None)),
            r => match r.strip_prefix(':') {
                Some(p) => Ok((&s[..=end], port(p)?)),
                None => Err(format!("{}: expected ':' after ']'", shown(s))),
            },
        };
    }
    if s.matches(':').count() > 1 {
        return Ok((s, None)); // a bare IPv6 address, no port
    }
    match s.split_once(':') {
        Some((h, p)) => Ok((h, port(p)?)),
        None => Ok((s, None)),
    }
}

impl fmt::Display for HostRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.pattern {
            Pattern::Exact(n) => f.write_str(n)?,
            Pattern::Below(n) => write!(f, "*.{n}")?,
            Pattern::AnyName => f.write_str("*")?,
            Pattern::Net(ip, len) if *len == full_len(*ip) => match ip {
                IpAddr::V6(v6) if self.port.is_some() => write!(f, "[{v6}]")?,
                ip => write!(f, "{ip}")?,
            },
            Pattern::Net(ip, len) => write!(f, "{ip}/{len}")?,
        }
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
        }
        Ok(())
    }
}

impl Serialize for HostRule {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// `[network] mode = "domains"`: what a call may reach by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DomainPolicy {
    pub allow: Vec<HostRule>,
    /// Checked first: a match refuses whatever the allow list says.
    pub deny: Vec<HostRule>,
    /// `[network.hosts]`: names resolved to these addresses, never by DNS;
    /// a pinned name that is allowed may reach its address even when private.
    pub hosts: BTreeMap<String, IpAddr>,
}

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RefusalKind {
    /// A `deny` pattern matched.
    Denylist,
    /// No `allow` pattern matched.
    NotAllowed,
    /// The name resolved only to private, loopback or link-local addresses.
    PrivateAddress,
    /// The host is not a valid name or address.
    BadHost,
    /// The name does not resolve.
    Unresolvable,
}

impl RefusalKind {
    /// The `X-Proxy-Error` value.
    pub fn header(self) -> &'static str {
        match self {
            RefusalKind::Denylist => "blocked-by-denylist",
            RefusalKind::NotAllowed => "blocked-by-allowlist",
            RefusalKind::PrivateAddress => "blocked-private-address",
            RefusalKind::BadHost => "bad-host",
            RefusalKind::Unresolvable => "unresolvable",
        }
    }
}

/// A host the domain rules refuse: the rule that decided it (`kind`,
/// `rule`) and a one-line reason. (Not the gate's approval refusal.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DomainRefusal {
    pub kind: RefusalKind,
    /// The matching deny pattern, for `Denylist`.
    pub rule: Option<String>,
    /// For people: `not in the allow list (add it to [network] allow)`.
    pub reason: String,
}

impl DomainPolicy {
    /// Build from pattern strings (for tests and embedders); the error names
    /// the first bad entry.
    pub fn new(allow: &[&str], deny: &[&str], hosts: &[(&str, &str)]) -> Result<Self, String> {
        let rules = |l: &[&str]| {
            l.iter()
                .map(|s| HostRule::parse(s))
                .collect::<Result<Vec<_>, _>>()
        };
        let mut pins = BTreeMap::new();
        for (name, addr) in hosts {
            pins.insert(normalize_name(name)?, parse_pin(addr)?);
        }
        Ok(DomainPolicy {
            allow: rules(allow)?,
            deny: rules(deny)?,
            hosts: pins,
        })
    }

    /// The one decision on a name or IP literal, before any resolution.
    /// `port: None` asks whether the name is allowed on some port (DNS).
    /// `Ok` carries the allow pattern that matched.
    pub fn decide(&self, host: &Host, port: Option<u16>) -> Result<String, DomainRefusal> {
        // For DNS only a deny pattern without a port hides the name.
        let deny_hit = self.deny.iter().find(|r| {
            r.host_matches(host) && (r.port.is_none() || (port.is_some() && r.port == port))
        });
        if let Some(r) = deny_hit {
            return Err(DomainRefusal {
                kind: RefusalKind::Denylist,
                rule: Some(r.to_string()),
                reason: format!("denied by network.deny \"{r}\""),
            });
        }
        match self.allow.iter().find(|r| r.matches(host, port)) {
            Some(r) => Ok(r.to_string()),
            None => Err(DomainRefusal {
                kind: RefusalKind::NotAllowed,
                rule: None,
                reason: match host {
                    Host::Ip(_) => "not in the allow list (an IP address is allowed only by an \
                                    address or CIDR pattern)"
                        .into(),
                    Host::Name(_) => "not in the allow list".into(),
                },
            }),
        }
    }

    /// The pinned address of `host`, if `[network.hosts]` names it.
    pub fn pinned(&self, host: &Host) -> Option<IpAddr> {
        self.hosts.get(host.name()?).copied()
    }

    /// After resolution: may an allowed `host` be reached at `addr`?
    /// Deny address patterns apply to resolved addresses too; a private
    /// address only when `host` is pinned to it or an allow address pattern
    /// covers it.
    pub fn check_address(&self, host: &Host, addr: IpAddr, port: u16) -> Result<(), DomainRefusal> {
        let addr = canonical(addr);
        let as_host = Host::Ip(addr);
        if let Some(r) = self
            .deny
            .iter()
            .find(|r| r.is_ip() && r.matches(&as_host, Some(port)))
        {
            return Err(DomainRefusal {
                kind: RefusalKind::Denylist,
                rule: Some(r.to_string()),
                reason: format!("resolves to {addr}, denied by network.deny \"{r}\""),
            });
        }
        let Some(class) = non_public(addr) else {
            return Ok(());
        };
        let pinned = self.pinned(host) == Some(addr);
        let explicit = self
            .allow
            .iter()
            .any(|r| r.is_ip() && r.matches(&as_host, Some(port)));
        if pinned || explicit {
            return Ok(());
        }
        Err(DomainRefusal {
            kind: RefusalKind::PrivateAddress,
            rule: None,
            reason: format!(
                "resolves to {addr}, {class} (allow the address in [network] allow, or pin the \
                 name in [network.hosts])"
            ),
        })
    }

    /// The ports a program that ignores the proxy variables may connect to
    /// by name (transparent capture): the ports the allow patterns name,
    /// and 80 and 443 for patterns that name none.
    pub fn capture_ports(&self) -> Vec<u16> {
        let mut ports: Vec<u16> = self
            .allow
            .iter()
            .filter(|r| !r.is_ip())
            .map(|r| r.port.unwrap_or(0))
            .collect();
        if ports.contains(&0) {
            ports.extend([80, 443]);
        }
        ports.retain(|p| *p != 0);
        ports.sort_unstable();
        ports.dedup();
        ports
    }

    /// Narrow the allow list to what `requested` also allows: a tool's own
    /// request can only take away. Returns the patterns kept.
    pub(crate) fn narrow(&mut self, requested: &[HostRule]) -> Vec<HostRule> {
        let mut out: Vec<HostRule> = Vec::new();
        for r in requested {
            for a in &self.allow {
                if let Some(i) = a.intersect(r)
                    && !out.contains(&i)
                {
                    out.push(i);
                }
            }
        }
        self.allow = out.clone();
        out
    }
}

/// A `[network.hosts]` address: a plain IP address, no port.
pub(crate) fn parse_pin(s: &str) -> Result<IpAddr, String> {
    match Host::parse(s) {
        Ok(Host::Ip(ip)) => Ok(ip),
        _ => Err(format!(
            "{}: not an IP address (write e.g. \"127.0.0.1\" or \"::1\")",
            shown(s)
        )),
    }
}
