//! Domain mode through the layers: files, per-tool sections, the CLI,
//! a tool's own request, errors and `toolcage policy`'s lines.

use super::*;

const DOMAINS: &str = r#"
[network]
mode = "domains"
allow = ["api.github.com", "*.pypi.org", "registry.npmjs.org:443"]
deny = ["evil.pypi.org"]
hosts = { "allowed.test" = "127.0.0.1" }
"#;

fn domains(r: &Resolved) -> &DomainPolicy {
    match &r.grant.network {
        Network::Domains(d) => d,
        other => panic!("expected domains, got {other:?}"),
    }
}

fn shown(rules: &[HostRule]) -> Vec<String> {
    rules.iter().map(|r| r.to_string()).collect()
}

#[test]
fn a_file_sets_domains_mode() {
    let e = Env::new();
    let r = e
        .resolve(None, Some(DOMAINS), &Overrides::default())
        .unwrap();
    let d = domains(&r);
    assert_eq!(
        shown(&d.allow),
        ["api.github.com", "*.pypi.org", "registry.npmjs.org:443"]
    );
    assert_eq!(shown(&d.deny), ["evil.pypi.org"]);
    assert_eq!(d.hosts["allowed.test"].to_string(), "127.0.0.1");
    let text = render_text(&r, &[]);
    for line in [
        "network.allow",
        "*.pypi.org",
        "network.deny",
        "network.hosts",
        "allowed.test = 127.0.0.1",
    ] {
        assert!(text.contains(line), "{line} missing:\n{text}");
    }
    assert!(source_of(&r, "network.allow").starts_with("policy "));
}

#[test]
fn tool_sections_replace_or_add() {
    let e = Env::new();
    let text = format!(
        "{DOMAINS}\n[tools.t.network]\nallow = [\"only.test\"]\n[tools.u.network]\nadd_deny = [\"api.github.com\"]\n"
    );
    let t = e.tool(Some(&text), "t", &Requests::default());
    assert_eq!(shown(&domains(&t).allow), ["only.test"]);
    assert!(source_of(&t, "network.allow").contains("[tools.t]"));
    let u = e.tool(Some(&text), "u", &Requests::default());
    assert_eq!(
        shown(&domains(&u).deny),
        ["evil.pypi.org", "api.github.com"]
    );
}

#[test]
fn allow_domain_flag_implies_domains_mode() {
    let e = Env::new();
    let cli = Overrides {
        allow_domain: vec!["example.com:443".into(), "*.test".into()],
        ..Default::default()
    };
    let r = e.resolve(Some("network"), None, &cli).unwrap();
    assert_eq!(shown(&domains(&r).allow), ["example.com:443", "*.test"]);
    assert_eq!(source_of(&r, "network"), "--allow-domain");
    // Added to a file's own list.
    let r = e.resolve(None, Some(DOMAINS), &cli).unwrap();
    assert_eq!(domains(&r).allow.len(), 5);
    let both = Overrides {
        allow_net: true,
        ..cli.clone()
    };
    assert!(
        e.cli_err(&both)
            .starts_with("--allow-domain: --allow-net gives all network")
    );
    let bad = Overrides {
        allow_domain: vec!["a*.test".into()],
        ..Default::default()
    };
    let err = e.cli_err(&bad);
    assert!(
        err.starts_with("--allow-domain: \"a*.test\": '*' only"),
        "{err}"
    );
}

#[test]
fn errors_name_file_line_and_key() {
    let e = Env::new();
    let err = e.err(
        "[network]\nmode = \"domains\"\nallow = [\n  \"ok.test\",\n  \"evil\\u0000.ok.test\",\n]\n",
    );
    assert!(
        err.starts_with("policy $T/p.toml:5: network.allow: \"evil\\0.ok.test\": a host pattern cannot contain a NUL byte"),
        "{err}"
    );
    let err = e.err("[network]\nmode = \"on\"\nallow = [\"x.test\"]\n");
    assert_eq!(
        err,
        "policy $T/p.toml:3: network.allow: host patterns only apply with network.mode = \"domains\" (this file sets mode = \"on\")"
    );
    let err = e.err("[network]\nallow = [\"x.test\"]\n");
    assert!(
        err.contains(
            "only apply with network.mode = \"domains\", but the mode is \"off\" (profile default)"
        ),
        "{err}"
    );
    let err = e.err("[network]\nmode = \"domains\"\n[network.hosts]\n\"x.test\" = \"localhost\"\n");
    assert!(
        err.starts_with(
            "policy $T/p.toml:4: network.hosts.x.test: \"localhost\": not an IP address"
        ),
        "{err}"
    );
    let err = e.err("[network]\nmode = \"domains\"\nhosts = { \"a b\" = \"1.2.3.4\" }\n");
    assert!(
        err.contains("host names cannot contain whitespace"),
        "{err}"
    );
    let err = e.err("[network]\nmode = \"sometimes\"\n");
    assert!(
        err.ends_with("(expected one of off, on, tcp, domains)"),
        "{err}"
    );
}

#[test]
fn a_tools_hosts_only_narrow() {
    let e = Env::new();
    let want = |hosts: &[&str]| Requests {
        domains: Some(hosts.iter().map(|h| h.to_string()).collect()),
        ..Requests::default()
    };
    // Within the list: granted, and nothing else stays.
    let r = e.tool(Some(DOMAINS), "t", &want(&["files.pypi.org:443"]));
    assert_eq!(shown(&domains(&r).allow), ["files.pypi.org:443"]);
    assert_eq!(outcome(&r, "network.allow").decision, Decision::Granted);
    // Partly outside: clamped to the overlap.
    let r = e.tool(
        Some(DOMAINS),
        "t",
        &want(&["registry.npmjs.org", "evil.test"]),
    );
    assert_eq!(shown(&domains(&r).allow), ["registry.npmjs.org:443"]);
    assert_eq!(outcome(&r, "network.allow").decision, Decision::Clamped);
    // Wholly outside: no host at all, never the tool's.
    let r = e.tool(Some(DOMAINS), "t", &want(&["evil.test"]));
    assert!(domains(&r).allow.is_empty());
    assert_eq!(outcome(&r, "network.allow").decision, Decision::Refused);
    // Network on: narrowed to domains mode with the tool's hosts.
    let on = "[network]\nmode = \"on\"\n";
    let r = e.tool(Some(on), "t", &want(&["api.example.com:443"]));
    assert_eq!(shown(&domains(&r).allow), ["api.example.com:443"]);
    // Network off: stays off.
    let r = e.tool(None, "t", &want(&["api.example.com"]));
    assert_eq!(r.grant.network, Network::Off);
    assert_eq!(outcome(&r, "network.allow").decision, Decision::Refused);
}

#[test]
fn the_summary_names_every_list() {
    let e = Env::new();
    let r = e
        .resolve(None, Some(DOMAINS), &Overrides::default())
        .unwrap();
    assert_eq!(
        r.grant.network.summary(),
        "domains allow [api.github.com, *.pypi.org, registry.npmjs.org:443] deny [evil.pypi.org] hosts [allowed.test = 127.0.0.1]"
    );
    let json = serde_json::to_value(&r.grant.network).unwrap();
    assert_eq!(json["mode"], "domains");
    assert_eq!(json["allow"][1], "*.pypi.org");
    assert_eq!(json["hosts"]["allowed.test"], "127.0.0.1");
}
