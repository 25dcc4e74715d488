//! Host patterns and the decision: unit tests, then properties.

use super::*;
use proptest::prelude::*;

fn rule(s: &str) -> HostRule {
    HostRule::parse(s).unwrap()
}

fn host(s: &str) -> Host {
    Host::parse(s).unwrap()
}

fn policy(allow: &[&str], deny: &[&str], hosts: &[(&str, &str)]) -> DomainPolicy {
    DomainPolicy::new(allow, deny, hosts).unwrap()
}

#[test]
fn patterns_parse_and_print() {
    for (input, shown) in [
        ("api.github.com", "api.github.com"),
        ("API.GitHub.COM.", "api.github.com"),
        ("*.pypi.org", "*.pypi.org"),
        ("registry.npmjs.org:443", "registry.npmjs.org:443"),
        ("*", "*"),
        ("*:443", "*:443"),
        ("127.0.0.1", "127.0.0.1"),
        ("127.0.0.1:8080", "127.0.0.1:8080"),
        ("::1", "::1"),
        ("[::1]:8080", "[::1]:8080"),
        ("10.0.0.0/8", "10.0.0.0/8"),
        ("fd00::/8", "fd00::/8"),
        ("xn--bcher-kva.example", "xn--bcher-kva.example"),
    ] {
        assert_eq!(rule(input).to_string(), shown, "{input}");
    }
}

#[test]
fn bad_patterns_have_one_line_errors() {
    for bad in [
        "",
        "a*.b.com",
        "*a.b.com",
        "a.*.com",
        "*.*.com",
        "**",
        "api.github.com:0",
        "api.github.com:99999",
        "a b",
        "evil\0.allowed.test",
        "bücher.de",
        "http://x.com",
        "x.com/path",
        "10.0.0.0/33",
        "x.com/8",
        "user@x.com",
        "[::1",
        "a..b",
        "*.",
        "127.1",
    ] {
        let e = HostRule::parse(bad).expect_err(bad);
        assert!(!e.contains('\n') && !e.contains('\0'), "{bad:?}: {e}");
    }
}

#[test]
fn wildcard_matches_subdomains_only() {
    let r = rule("*.pypi.org");
    assert!(r.matches(&host("files.pypi.org"), Some(443)));
    assert!(r.matches(&host("a.b.pypi.org"), Some(443)));
    assert!(!r.matches(&host("pypi.org"), Some(443)));
    assert!(!r.matches(&host("evilpypi.org"), Some(443)));
    assert!(!r.matches(&host("pypi.org.evil.com"), Some(443)));
    assert!(
        !rule("*").matches(&host("127.0.0.1"), Some(80)),
        "* matches names only"
    );
}

#[test]
fn ports_and_case() {
    let r = rule("registry.npmjs.org:443");
    assert!(r.matches(&host("REGISTRY.npmjs.org."), Some(443)));
    assert!(!r.matches(&host("registry.npmjs.org"), Some(80)));
    assert!(
        r.matches(&host("registry.npmjs.org"), None),
        "DNS: some port is allowed"
    );
}

#[test]
fn deny_wins_and_empty_allow_blocks_everything() {
    let p = policy(&["*.example.com"], &["evil.example.com"], &[]);
    assert!(p.decide(&host("api.example.com"), Some(443)).is_ok());
    let r = p.decide(&host("evil.example.com"), Some(443)).unwrap_err();
    assert_eq!(r.kind, RefusalKind::Denylist);
    assert_eq!(r.rule.as_deref(), Some("evil.example.com"));
    let r = policy(&[], &[], &[])
        .decide(&host("example.com"), Some(443))
        .unwrap_err();
    assert_eq!(r.kind, RefusalKind::NotAllowed);
}

#[test]
fn a_port_deny_does_not_hide_the_name_from_dns() {
    let p = policy(&["x.test"], &["x.test:25"], &[]);
    assert!(p.decide(&host("x.test"), None).is_ok());
    assert!(p.decide(&host("x.test"), Some(25)).is_err());
    assert!(p.decide(&host("x.test"), Some(443)).is_ok());
    let p = policy(&["x.test"], &["x.test"], &[]);
    assert!(p.decide(&host("x.test"), None).is_err());
}

#[test]
fn ip_literals_match_only_ip_rules() {
    let p = policy(&["*", "allowed.test"], &[], &[]);
    for ip in ["127.0.0.1", "::1", "1.1.1.1"] {
        assert_eq!(
            p.decide(&host(ip), Some(80)).unwrap_err().kind,
            RefusalKind::NotAllowed
        );
    }
    let p = policy(&["127.0.0.1:8080", "10.0.0.0/8"], &[], &[]);
    assert!(p.decide(&host("127.0.0.1"), Some(8080)).is_ok());
    assert!(
        p.decide(&host("[::ffff:127.0.0.1]"), Some(8080)).is_ok(),
        "mapped = IPv4"
    );
    assert!(p.decide(&host("127.0.0.1"), Some(8081)).is_err());
    assert!(p.decide(&host("10.9.8.7"), Some(1)).is_ok());
}

#[test]
fn private_addresses_need_a_pin_or_an_ip_rule() {
    let p = policy(
        &["allowed.test", "rebind.test", "127.0.0.2"],
        &["192.0.2.0/24"],
        &[("allowed.test", "127.0.0.1")],
    );
    let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
    assert!(
        p.check_address(&host("allowed.test"), ip("127.0.0.1"), 80)
            .is_ok(),
        "pinned"
    );
    let r = p
        .check_address(&host("allowed.test"), ip("10.0.0.1"), 80)
        .unwrap_err();
    assert_eq!(r.kind, RefusalKind::PrivateAddress, "pinned elsewhere");
    let r = p
        .check_address(&host("rebind.test"), ip("127.0.0.1"), 80)
        .unwrap_err();
    assert_eq!(r.kind, RefusalKind::PrivateAddress);
    assert!(r.reason.contains("loopback"), "{}", r.reason);
    assert!(
        p.check_address(&host("rebind.test"), ip("::ffff:127.0.0.1"), 80)
            .is_err()
    );
    assert!(
        p.check_address(&host("rebind.test"), ip("127.0.0.2"), 80)
            .is_ok(),
        "ip rule"
    );
    assert!(
        p.check_address(&host("rebind.test"), ip("93.184.216.34"), 80)
            .is_ok()
    );
    let r = p
        .check_address(&host("rebind.test"), ip("192.0.2.7"), 80)
        .unwrap_err();
    assert_eq!(
        r.kind,
        RefusalKind::Denylist,
        "deny ranges apply to resolved addresses"
    );
}

#[test]
fn pins_do_not_allow_by_themselves() {
    let p = policy(
        &["allowed.test"],
        &[],
        &[("allowed.test", "127.0.0.1"), ("denied.test", "127.0.0.1")],
    );
    assert_eq!(
        p.decide(&host("denied.test"), Some(80)).unwrap_err().kind,
        RefusalKind::NotAllowed
    );
    assert_eq!(
        p.pinned(&host("DENIED.test.")),
        Some("127.0.0.1".parse().unwrap())
    );
}

#[test]
fn capture_ports() {
    assert_eq!(
        policy(&["a.test:8080"], &[], &[]).capture_ports(),
        vec![8080]
    );
    assert_eq!(
        policy(&["a.test", "b.test:22", "10.0.0.1:5"], &[], &[]).capture_ports(),
        vec![22, 80, 443]
    );
}

#[test]
fn narrowing_keeps_only_the_overlap() {
    let mut p = policy(&["*.example.com", "other.test:443"], &[], &[]);
    let kept = p.narrow(&[
        rule("api.example.com:443"),
        rule("evil.test"),
        rule("other.test"),
    ]);
    let shown: Vec<String> = kept.iter().map(|r| r.to_string()).collect();
    assert_eq!(shown, ["api.example.com:443", "other.test:443"]);
    assert!(p.decide(&host("www.example.com"), Some(443)).is_err());
}

fn label() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_-]{1,12}".prop_filter("not numeric", |l| {
        let hex = l.to_ascii_lowercase();
        let numeric = l.chars().all(|c| c.is_ascii_digit())
            || (hex.starts_with("0x") && hex[2..].chars().all(|c| c.is_ascii_hexdigit()));
        !numeric
    })
}

fn name() -> impl Strategy<Value = String> {
    proptest::collection::vec(label(), 1..4).prop_map(|ls| ls.join("."))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Case and one trailing dot never change what a name is.
    #[test]
    fn names_are_case_insensitive_with_an_optional_dot(n in name(), dot in any::<bool>()) {
        let lower = n.to_ascii_lowercase();
        let variant = if dot { format!("{}.", n.to_ascii_uppercase()) } else { n.clone() };
        let r = rule(&lower);
        prop_assert!(r.matches(&host(&variant), Some(443)));
        prop_assert_eq!(host(&variant), Host::Name(lower));
    }

    /// `*.d` matches only names that end in `.d` on a label boundary.
    #[test]
    fn wildcards_match_on_label_boundaries(d in name(), h in name()) {
        let r = rule(&format!("*.{d}"));
        let (d, h) = (d.to_ascii_lowercase(), h.to_ascii_lowercase());
        let hit = r.matches(&host(&h), Some(1));
        prop_assert_eq!(hit, h.ends_with(&format!(".{d}")));
        prop_assert!(!r.matches(&host(&d), Some(1)));
    }

    /// A `*` anywhere but alone or as the whole first label is refused.
    #[test]
    fn no_star_mid_label(n in name(), at in 0usize..40) {
        let at = at.min(n.len());
        let s = format!("{}*{}", &n[..at], &n[at..]);
        let ok = s == "*" || (s.starts_with("*.") && !s[1..].contains('*'));
        prop_assert_eq!(HostRule::parse(&s).is_ok(), ok, "{}", s);
    }

    /// NUL, whitespace and control characters are refused anywhere, in
    /// patterns and in requested hosts alike.
    #[test]
    fn nul_whitespace_and_controls_are_refused(n in name(), at in 0usize..40, c in prop_oneof![Just('\0'), Just(' '), Just('\t'), Just('\n'), Just('\r'), Just('\u{7f}'), Just('\u{85}'), Just('\u{a0}')]) {
        let at = at.min(n.len());
        let s = format!("{}{c}{}", &n[..at], &n[at..]);
        prop_assert!(HostRule::parse(&s).is_err());
        prop_assert!(Host::parse(&s).is_err());
        let authority = format!("{s}:443");
        prop_assert!(crate::hostname::parse_authority(&authority).is_err());
    }

    /// Punycode labels are plain ASCII: kept as written (lowercased).
    #[test]
    fn punycode_is_left_alone(n in "[a-z0-9]{1,10}", tld in "[a-z]{2,5}") {
        let s = format!("xn--{n}.{tld}");
        prop_assert_eq!(rule(&s).to_string(), s);
    }

    /// Printing a rule and parsing it again gives the same rule.
    #[test]
    fn display_round_trips(n in name(), star in any::<bool>(), port in proptest::option::of(1u16..)) {
        let mut s = if star { format!("*.{n}") } else { n };
        if let Some(p) = port { s = format!("{s}:{p}"); }
        let r = rule(&s);
        prop_assert_eq!(rule(&r.to_string()), r);
    }

    /// Narrowing never allows what the operator's list did not.
    #[test]
    fn narrowing_never_widens(
        allow in proptest::collection::vec((name(), any::<bool>(), proptest::option::of(1u16..4)), 0..4),
        req in proptest::collection::vec((name(), any::<bool>(), proptest::option::of(1u16..4)), 0..4),
        probe in name(), port in 1u16..4,
    ) {
        let mk = |(n, star, p): &(String, bool, Option<u16>)| {
            let base = if *star { format!("*.{n}") } else { n.clone() };
            rule(&match p { Some(p) => format!("{base}:{p}"), None => base })
        };
        let original = DomainPolicy { allow: allow.iter().map(mk).collect(), ..Default::default() };
        let mut narrowed = original.clone();
        narrowed.narrow(&req.iter().map(mk).collect::<Vec<_>>());
        let h = host(&probe);
        if narrowed.decide(&h, Some(port)).is_ok() {
            prop_assert!(original.decide(&h, Some(port)).is_ok());
        }
    }
}
