//! Property tests: resolution never panics, CLI flags always win.

use super::*;
use proptest::prelude::*;
use toolcage_text::units::parse_duration;

fn overrides() -> impl Strategy<Value = Overrides> {
    let path = prop_oneof![
        Just("rel".to_string()),
        Just("/usr".to_string()),
        "[a-z{}/.~]{0,12}"
    ];
    (
        any::<bool>(),
        proptest::collection::vec(prop_oneof![Just("a.test".to_string()), ".{0,8}"], 0..2),
        proptest::collection::vec(path.clone(), 0..3),
        proptest::collection::vec(path, 0..3),
        proptest::collection::vec("[A-Za-z_=*0-9 ]{0,8}", 0..3),
        proptest::option::of(prop_oneof!["[0-9]{1,4}(ms|s|m|h)?", ".{0,6}"]),
        any::<bool>(),
        proptest::collection::vec(prop_oneof!["rust", "node", "python", "[a-z]{0,5}"], 0..3),
    )
        .prop_map(
            |(allow_net, allow_domain, read, write, env, timeout, allow_degraded, with)| {
                Overrides {
                    allow_net,
                    allow_domain,
                    with,
                    read: read.into_iter().map(PathBuf::from).collect(),
                    write: write.into_iter().map(PathBuf::from).collect(),
                    env,
                    timeout,
                    allow_degraded,
                }
            },
        )
}

fn requests() -> impl Strategy<Value = Requests> {
    (
        proptest::option::of(any::<bool>()),
        proptest::option::of(0u64..100_000),
        proptest::option::of(any::<bool>()),
        proptest::option::of((0u32..50, 0u64..600)),
        proptest::option::of(proptest::collection::vec(
            prop_oneof![
                Just("a.test".to_string()),
                Just("*.x.test:443".to_string()),
                Just("1.2.3.4".to_string()),
                ".{0,8}"
            ],
            0..3,
        )),
    )
        .prop_map(
            |(network, timeout, requires_approval, rl, domains)| Requests {
                network,
                timeout: timeout.map(Duration::from_secs),
                requires_approval,
                approval_default: None,
                rate_limit: rl.map(|(requests, w)| RateLimit {
                    requests,
                    window: Duration::from_secs(w),
                }),
                domains,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn resolution_never_panics_and_cli_flags_win(
        cli in overrides(),
        req in requests(),
        profile in proptest::sample::select(profile_names()),
    ) {
        let e = Env::new();
        let stack = e.load(Some(profile), Some("[network]\nmode = \"off\"\n[limits]\ntimeout = \"1m\"\n[requests]\nnetwork = true\n")).unwrap();
        let tool = ToolInput { name: "t", requests: &req, extra_read: vec![] };
        for t in [None, Some(&tool)] {
            let Ok(r) = stack.resolve(&e.ctx, &cli, t) else { continue };
            let _ = render_text(&r, &[]);
            if cli.allow_net {
                prop_assert_eq!(&r.grant.network, &Network::On);
            }
            if !cli.allow_domain.is_empty() {
                let Network::Domains(d) = &r.grant.network else {
                    return Err(TestCaseError::fail("--allow-domain without domains mode"));
                };
                for h in &cli.allow_domain {
                    let rule = HostRule::parse(h).unwrap();
                    prop_assert!(d.allow.contains(&rule), "{} not allowed", h);
                }
            }
            if let Some(d) = &cli.timeout {
                prop_assert_eq!(Ok(r.grant.timeout), parse_duration(d));
            }
            if cli.allow_degraded {
                prop_assert_eq!(r.grant.enforcement, Enforcement::Degraded);
            }
            // Requests never widen beyond the operator's bounds.
            prop_assert!(r.grant.timeout <= Duration::from_secs(300) || cli.timeout.is_some());
            if t.is_some() && req.requires_approval == Some(true) {
                prop_assert_ne!(r.grant.approval, ApprovalMode::Never);
            }
            // Every CLI root is covered by a root of the grant.
            for (flags, roots) in [(&cli.read, &r.grant.read), (&cli.write, &r.grant.write)] {
                for f in flags {
                    // (Paths with variables are expanded by the resolver, not here.)
                    let Ok(c) = std::fs::canonicalize(e.ctx.cwd.join(f)) else { continue };
                    prop_assert!(roots.iter().any(|root| c.starts_with(root)), "{} not granted", c.display());
                }
            }
            for p in r.grant.read.iter().chain(&r.grant.write) {
                prop_assert!(p.is_absolute() && p.exists());
            }
        }
    }

    #[test]
    fn arbitrary_policy_text_never_panics(text in "(\\[[a-z_.]{1,12}\\]\n|[a-z_]{1,10} = (\"[^\"\n]{0,10}\"|[0-9]{1,6}|\\[\\]|true)\n){0,6}") {
        let e = Env::new();
        let _ = e.resolve(None, Some(&text), &Overrides::default());
    }
}

proptest! {
    /// The byte-wise dedup of normal paths keeps what the component-wise one
    /// keeps, in the same order.
    #[test]
    fn dedup_matches_components(paths in prop_oneof![
        proptest::collection::vec("(/[ab.]{0,2}){0,3}/?", 0..12),
        proptest::collection::vec("/|(/[ab]{1,2}){1,3}", 0..12),
    ]) {
        use crate::origin::{Origin, Sourced};
        use crate::state::dedup;
        let entries = |ps: &[String]| -> Vec<Sourced<PathBuf>> {
            ps.iter()
                .map(|p| Sourced { v: PathBuf::from(p), o: Origin::input("t".into(), 0) })
                .collect()
        };
        let mut fast = entries(&paths);
        dedup(&mut fast);
        let mut slow = entries(&paths);
        let mut seen = std::collections::BTreeSet::new();
        slow.retain(|e| seen.insert(e.v.clone()));
        let all: Vec<PathBuf> = slow.iter().map(|e| e.v.clone()).collect();
        slow.retain(|e| !all.iter().any(|a| *a != e.v && e.v.starts_with(a)));
        let got: Vec<&PathBuf> = fast.iter().map(|e| &e.v).collect();
        let want: Vec<&PathBuf> = slow.iter().map(|e| &e.v).collect();
        prop_assert_eq!(got, want);
    }
}
