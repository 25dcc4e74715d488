//! Host names and addresses for domain mode: one strict grammar shared by
//! policy patterns, proxy requests, DNS questions and the http executor, so
//! every entry path sees the same host (research B.1: `evil\0.allowed.com`
//! passed an `endsWith` check while getaddrinfo stopped at the NUL).
//!
//! A name is ASCII letters, digits, `-` and `_` in dot-separated labels of
//! 1 to 63 characters, at most 253 in all; it is lowercased and one
//! trailing dot is dropped. Internationalised names are taken in their
//! ASCII (punycode, `xn--`) form only: nothing is converted. IP literals
//! are dotted-quad IPv4 or IPv6 (in brackets where a port may follow);
//! the other forms `inet_aton` accepts (`127.1`, `0x7f.1`, `2130706433`)
//! are refused rather than guessed at.

use serde::Serialize;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A host as a request names it: a normalised DNS name or an IP address.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(untagged)]
pub enum Host {
    Name(String),
    Ip(IpAddr),
}

impl Host {
    /// Parse a bare host: a name or an IP literal (IPv6 with or without
    /// brackets). The message says what is wrong, for one-line errors.
    pub fn parse(s: &str) -> Result<Host, String> {
        if let Some(inner) = s.strip_prefix('[') {
            let inner = inner
                .strip_suffix(']')
                .ok_or_else(|| format!("{}: unclosed '['", shown(s)))?;
            return inner
                .parse::<Ipv6Addr>()
                .map(|ip| Host::Ip(canonical(IpAddr::V6(ip))))
                .map_err(|_| format!("{}: not an IPv6 address", shown(s)));
        }
        if let Ok(ip) = s.parse::<IpAddr>() {
            return Ok(Host::Ip(canonical(ip)));
        }
        normalize_name(s).map(Host::Name)
    }

    pub fn name(&self) -> Option<&str> {
        match self {
            Host::Name(n) => Some(n),
            Host::Ip(_) => None,
        }
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(n) => f.write_str(n),
            Host::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
            Host::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// `host:port` as people write it (`[::1]:443` for IPv6).
pub fn target(host: &Host, port: Option<u16>) -> String {
    match port {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    }
}

/// An IPv4-mapped IPv6 address is its IPv4 address: a rule for
/// `127.0.0.1` also covers `::ffff:127.0.0.1`.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => ip,
        },
        v4 => v4,
    }
}

/// A string quoted for a message: control characters, NUL and non-ASCII
/// escaped, so a hostile name cannot forge output.
pub fn shown(s: &str) -> String {
    format!("\"{}\"", s.escape_debug())
}

/// Normalise a DNS name (see the module comment). Not an IP literal.
pub(crate) fn normalize_name(s: &str) -> Result<String, String> {
    if s.is_empty() {
        return Err("empty host name".into());
    }
    if let Some(c) = s.chars().find(|c| c.is_control() || c.is_whitespace()) {
        let what = match c {
            '\0' => "a NUL byte".to_string(),
            c if c.is_whitespace() => "whitespace".to_string(),
            c => format!("the control character {}", c.escape_unicode()),
        };
        return Err(format!("{}: host names cannot contain {what}", shown(s)));
    }
    if !s.is_ascii() {
        return Err(format!(
            "{}: not ASCII; write an internationalised name in its punycode form (xn--...)",
            shown(s)
        ));
    }
    let name = s.strip_suffix('.').unwrap_or(s).to_ascii_lowercase();
    if name.len() > 253 {
        return Err(format!(
            "{}: longer than 253 characters",
            shown(&s[..40.min(s.len())])
        ));
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Err(format!("{}: empty label (two dots in a row?)", shown(s)));
        }
        if label.len() > 63 {
            return Err(format!(
                "{}: a label is longer than 63 characters",
                shown(s)
            ));
        }
        if let Some(c) = label
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
        {
            return Err(format!(
                "{}: '{}' is not allowed in a host name (letters, digits, '-', '_' and dots)",
                shown(s),
                c.escape_debug()
            ));
        }
    }
    let last = name.rsplit('.').next().unwrap_or_default();
    let numeric = last.chars().all(|c| c.is_ascii_digit())
        || (last.starts_with("0x") && last[2..].chars().all(|c| c.is_ascii_hexdigit()));
    if numeric {
        return Err(format!(
            "{}: looks like an IPv4 address but is not a dotted quad (write a.b.c.d)",
            shown(s)
        ));
    }
    Ok(name)
}

/// Parse `host`, `host:port` or `[v6]:port` (the authority of a URL or of
/// a CONNECT request). `default_port` applies when none is written.
pub fn parse_authority(s: &str) -> Result<(Host, Option<u16>), String> {
    if s.contains('@') {
        return Err(format!("{}: user information is not allowed", shown(s)));
    }
    let (host, port) = if s.starts_with('[') {
        match s.find(']') {
            Some(end) => {
                let rest = &s[end + 1..];
                let port = match rest {
                    "" => None,
                    r => Some(
                        r.strip_prefix(':')
                            .ok_or_else(|| format!("{}: expected ':' after ']'", shown(s)))?,
                    ),
                };
                (&s[..=end], port)
            }
            None => return Err(format!("{}: unclosed '['", shown(s))),
        }
    } else if s.matches(':').count() > 1 {
        return Err(format!(
            "{}: write an IPv6 address in brackets ([::1]:443)",
            shown(s)
        ));
    } else {
        match s.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        }
    };
    let port = match port {
        None => None,
        Some(p) => Some(parse_port(p).map_err(|m| format!("{}: {m}", shown(s)))?),
    };
    Ok((Host::parse(host)?, port))
}

/// A port, 1-65535, in decimal digits only (no sign, no spaces).
pub(crate) fn parse_port(p: &str) -> Result<u16, String> {
    if p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("invalid port {} (use 1-65535)", shown(p)));
    }
    match p.parse::<u16>() {
        Ok(n) if n != 0 => Ok(n),
        _ => Err(format!("invalid port {} (use 1-65535)", shown(p))),
    }
}

/// Why an address is not on the public internet; `None` for a global
/// address. Loopback, private, link-local, CGNAT, ULA, multicast,
/// documentation and reserved ranges all count, and so does an IPv6
/// address that embeds one of them (mapped, NAT64, 6to4).
pub(crate) fn non_public(ip: IpAddr) -> Option<&'static str> {
    match canonical(ip) {
        IpAddr::V4(v4) => non_public_v4(v4),
        IpAddr::V6(v6) => non_public_v6(v6),
    }
}

fn non_public_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        (127, ..) => "a loopback address",
        (10, ..) | (192, 168, _) => "a private address",
        (172, b, _) if (16..32).contains(&b) => "a private address",
        (169, 254, _) => "a link-local address",
        (100, b, _) if (64..128).contains(&b) => "a carrier-grade NAT address",
        (0, ..) => "an unspecified address",
        (192, 0, 0) | (198, 18..=19, _) => "a reserved address",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "a documentation address",
        (224..=239, ..) => "a multicast address",
        (240..=255, ..) => "a reserved address",
        _ => return None,
    })
}

fn non_public_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    if ip.is_loopback() {
        return Some("a loopback address");
    }
    if ip.is_unspecified() {
        return Some("an unspecified address");
    }
    let embedded = |hi: u16, lo: u16| Ipv4Addr::from(((hi as u32) << 16) | lo as u32);
    // NAT64 (64:ff9b::/96) and IPv4-compatible (::/96) carry an IPv4 address
    // in the low 32 bits, 6to4 (2002::/16) in bits 16-48.
    if (s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0; 4]) || s[0..6] == [0; 6] {
        return non_public_v4(embedded(s[6], s[7])).or(Some("a reserved address"));
    }
    if s[0] == 0x2002 {
        return non_public_v4(embedded(s[1], s[2]));
    }
    Some(match s[0] {
        x if x & 0xfe00 == 0xfc00 => "a unique local address",
        x if x & 0xffc0 == 0xfe80 => "a link-local address",
        x if x & 0xffc0 == 0xfec0 => "a site-local address",
        x if x & 0xff00 == 0xff00 => "a multicast address",
        0x2001 if s[1] == 0x0db8 => "a documentation address",
        0x0100 if s[1..4] == [0; 3] => "a discard address",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_normalised() {
        assert_eq!(normalize_name("API.GitHub.com.").unwrap(), "api.github.com");
        assert_eq!(
            normalize_name("xn--bcher-kva.example").unwrap(),
            "xn--bcher-kva.example"
        );
        assert_eq!(normalize_name("_srv.example").unwrap(), "_srv.example");
    }

    #[test]
    fn bad_names_are_refused() {
        for bad in [
            "",
            ".",
            "a..b",
            "a.com..",
            "evil\0.allowed.test",
            "a b",
            "a\tb",
            "a\nb",
            "bücher.de",
            "a/b",
            "a@b",
            "a%2eb",
            "a\\b",
            "a:b",
            "1.2.3",
            "127.1",
            "0x7f.1",
            "2130706433",
            "a.123",
        ] {
            assert!(normalize_name(bad).is_err(), "{bad:?} accepted");
        }
        assert!(normalize_name(&"a".repeat(64)).is_err());
        assert!(normalize_name(&format!("{}.com", "a.".repeat(130))).is_err());
        let e = normalize_name("evil\0.allowed.test").unwrap_err();
        assert!(e.contains("NUL") && !e.contains('\0'), "{e}");
    }

    #[test]
    fn authorities() {
        let (h, p) = parse_authority("Allowed.Test:8080").unwrap();
        assert_eq!((h, p), (Host::Name("allowed.test".into()), Some(8080)));
        let (h, p) = parse_authority("[::1]:443").unwrap();
        assert_eq!((h, p), (Host::Ip("::1".parse().unwrap()), Some(443)));
        let (h, _) = parse_authority("[::ffff:127.0.0.1]:1").unwrap();
        assert_eq!(h, Host::Ip("127.0.0.1".parse().unwrap()));
        for bad in [
            "::1:443", "[::1", "[::1]x", "a:0", "a:65536", "a:+1", "a: 1", "u@a:1", "a:", "[a.b]:1",
        ] {
            assert!(parse_authority(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn address_classes() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "::ffff:10.0.0.1",
            "64:ff9b::7f00:1",
            "2002:7f00:1::",
            "::7f00:1",
            "ff02::1",
        ] {
            assert!(non_public(ip.parse().unwrap()).is_some(), "{ip} public?");
        }
        for ip in [
            "1.1.1.1",
            "93.184.216.34",
            "2606:4700::1111",
            "2002:0101:0101::",
        ] {
            assert!(
                non_public(ip.parse().unwrap()).is_none(),
                "{ip} not public?"
            );
        }
    }
}
