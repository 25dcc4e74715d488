//! The keys the gate reads: `[approval] allow_yes`, `[limits] concurrent`,
//! `[global_rate_limit]`, `[audit]`; and the rule that a tool's own rate
//! limit only ever tightens.

use super::*;

fn rl(requests: u32, secs: u64) -> RateLimit {
    RateLimit {
        requests,
        window: Duration::from_secs(secs),
    }
}

fn asking(r: RateLimit) -> Requests {
    Requests {
        rate_limit: Some(r),
        ..Requests::default()
    }
}

#[test]
fn a_slower_average_with_a_bigger_burst_is_not_a_tightening() {
    let e = Env::new();
    let policy = Some("[rate_limit]\nrequests = 10\nwindow = \"1m\"\n");
    // 1000 per 2h has a lower average rate than 10 per 1m, but allows 1000
    // calls in one minute: refused, the policy's limit stays.
    let r = e.tool(policy, "t", &asking(rl(1000, 7200)));
    assert_eq!(r.grant.rate_limit, Some(rl(10, 60)));
    assert_eq!(outcome(&r, "rate_limit").decision, Decision::Refused);
    // 6 per 50s: also a lower average, but 12 calls in 50.1s.
    let r = e.tool(policy, "t", &asking(rl(6, 50)));
    assert_eq!(r.grant.rate_limit, Some(rl(10, 60)));
    // Fewer requests over a longer window: granted.
    let r = e.tool(policy, "t", &asking(rl(5, 120)));
    assert_eq!(r.grant.rate_limit, Some(rl(5, 120)));
    assert_eq!(outcome(&r, "rate_limit").decision, Decision::Granted);
}

#[test]
fn a_tool_cannot_waive_or_weaken_approval() {
    let e = Env::new();
    let waive = Requests {
        requires_approval: Some(false),
        ..Requests::default()
    };
    for mode in ["always", "once", "once-per-args"] {
        let text = format!("[approval]\nmode = \"{mode}\"\n");
        let r = e.tool(Some(&text), "t", &waive);
        assert_ne!(r.grant.approval, ApprovalMode::Never, "{mode}");
        assert_eq!(outcome(&r, "approval").decision, Decision::Refused);
    }
    let ask = Requests {
        requires_approval: Some(true),
        ..Requests::default()
    };
    // Even an explicit operator "never" becomes "always" when the tool asks.
    let r = e.tool(Some("[approval]\nmode = \"never\"\n"), "t", &ask);
    assert_eq!(r.grant.approval, ApprovalMode::Always);
    // A tool asking for approval never lowers once-per-args to once or never.
    let r = e.tool(Some("[approval]\nmode = \"once-per-args\"\n"), "t", &ask);
    assert_eq!(r.grant.approval, ApprovalMode::OncePerArgs);
}

#[test]
fn allow_yes_defaults_by_mode_and_can_be_set_per_tool() {
    let e = Env::new();
    let none = Requests::default();
    let g = |text: &str| e.tool(Some(text), "t", &none).grant;
    assert!(g("").allow_yes, "never: --yes has nothing to skip");
    assert!(g("[approval]\nmode = \"once\"\n").allow_yes);
    assert!(g("[approval]\nmode = \"once-per-args\"\n").allow_yes);
    assert!(!g("[approval]\nmode = \"always\"\n").allow_yes);
    assert!(g("[approval]\nmode = \"always\"\nallow_yes = true\n").allow_yes);
    let per_tool = "[approval]\nmode = \"once\"\n[tools.t.approval]\nallow_yes = false\n";
    assert!(!g(per_tool).allow_yes);
    assert!(e.tool(Some(per_tool), "other", &none).grant.allow_yes);
    // A tool asking for approval turns never into always: --yes then needs
    // the operator's explicit allow_yes.
    let ask = Requests {
        requires_approval: Some(true),
        ..Requests::default()
    };
    assert!(!e.tool(None, "t", &ask).grant.allow_yes);
    let r = e.tool(Some("[approval]\nallow_yes = true\n"), "t", &ask);
    assert!(r.grant.allow_yes);
    assert!(source_of(&r, "approval.allow_yes").starts_with("policy "));
}

#[test]
fn concurrent_cap_per_tool() {
    let e = Env::new();
    let none = Requests::default();
    let r = e.tool(None, "t", &none);
    assert_eq!(r.grant.concurrent, None);
    let text = "[limits]\nconcurrent = 4\n[tools.t.limits]\nconcurrent = 1\n";
    assert_eq!(e.tool(Some(text), "t", &none).grant.concurrent, Some(1));
    assert_eq!(e.tool(Some(text), "u", &none).grant.concurrent, Some(4));
    assert_eq!(
        e.err("[limits]\nconcurrent = 0\n"),
        "policy $T/p.toml:2: limits.concurrent: must be greater than zero (to forbid a tool, do not expose it)"
    );
}

#[test]
fn session_settings_global_rate_limit_and_audit() {
    let e = Env::new();
    let s = e.load(None, None).unwrap().session(&e.ctx).unwrap();
    assert_eq!(s, SessionPolicy::default());
    assert!(s.audit.fail_closed && !s.audit.redact && s.audit.path.is_none());
    let text = "[global_rate_limit]\nrequests = 100\n[audit]\npath = \"{home}/a.jsonl\"\nredact = true\nfail_closed = false\n";
    let s = e.load(None, Some(text)).unwrap().session(&e.ctx).unwrap();
    assert_eq!(s.global_rate_limit, Some(rl(100, 60)));
    assert_eq!(s.audit.path, Some(e.ctx.home.join("a.jsonl")));
    assert!(s.audit.redact && !s.audit.fail_closed);
    // Relative paths are relative to the project.
    let s = e
        .load(None, Some("[audit]\npath = \"log/a.jsonl\"\n"))
        .unwrap();
    let s = s.session(&e.ctx).unwrap();
    assert!(s.audit.path.unwrap().ends_with("project/log/a.jsonl"));
}

#[test]
fn session_settings_errors_and_top_level_only() {
    let e = Env::new();
    assert_eq!(
        e.err("[global_rate_limit]\nwindow = \"1m\"\n"),
        "policy $T/p.toml:2: global_rate_limit.window: a window without global_rate_limit.requests (add requests = N)"
    );
    assert_eq!(
        e.err("[global_rate_limit]\nrequests = 0\n"),
        "policy $T/p.toml:2: global_rate_limit.requests: must be a whole number from 1 to 4294967295"
    );
    assert!(
        e.err("[audit]\npath = \"{nope}/a\"\n")
            .starts_with("policy $T/p.toml:2: audit.path: ")
    );
    let e2 = e.err("[tools.t.audit]\nredact = true\n");
    assert!(e2.contains("unknown key 'audit'"), "{e2}");
    let e2 = e.err("[audit]\nredcat = true\n");
    assert!(e2.contains("unknown key 'redcat'"), "{e2}");
}

#[test]
fn manage_is_off_by_default_and_asks_by_default() {
    let e = Env::new();
    let s = e.load(None, None).unwrap().session(&e.ctx).unwrap();
    assert_eq!(
        s.manage,
        ManagePolicy {
            custom_script: false,
            tool_manage: false,
            approval: true
        }
    );
    let text = "[manage]\ncustom_script = true\napproval = false\n";
    let s = e.load(None, Some(text)).unwrap().session(&e.ctx).unwrap();
    assert!(s.manage.custom_script && !s.manage.tool_manage && !s.manage.approval);
    let e2 = e.err("[tools.t.manage]\ncustom_script = true\n");
    assert!(e2.contains("unknown key 'manage'"), "{e2}");
    let e2 = e.err("[manage]\napproval = \"yes\"\n");
    assert!(
        e2.starts_with("policy $T/p.toml:2: manage.approval: "),
        "{e2}"
    );
}

#[test]
fn store_is_read_from_a_policy_file_outside_the_project_and_checked() {
    let e = Env::new();
    // The policy file is outside the project ($T/p.toml): taken.
    let s = e
        .load(
            None,
            Some("[store]\nurl = \"redis://r:6379/0\"\npassword_env = \"PW\"\n"),
        )
        .unwrap()
        .store(&e.ctx)
        .unwrap()
        .unwrap();
    assert_eq!(s.url.as_deref(), Some("redis://r:6379/0"));
    assert_eq!(s.password_env.as_deref(), Some("PW"));
    // No [store]: none (the state directory).
    let none = e.load(None, Some("")).unwrap().store(&e.ctx).unwrap();
    assert_eq!(none, None);
    let err = |text: &str| {
        let stack = e.load(None, Some(text)).unwrap();
        stack.store(&e.ctx).unwrap_err().to_string()
    };
    let no_url = err("[store]\npassword_env = \"PW\"\n");
    assert!(
        no_url.contains("store.url: [store] without url"),
        "{no_url}"
    );
    let both = err("[store]\nurl = \"redis://r\"\npassword_env = \"A\"\npassword_file = \"/b\"\n");
    assert!(both.contains("not both"), "{both}");
    let relative = err("[store]\nurl = \"redis://r\"\npassword_file = \"pw\"\n");
    assert!(relative.contains("not an absolute path"), "{relative}");
    let unknown = e
        .load(None, Some("[store]\npassword = \"x\"\n"))
        .unwrap_err();
    assert!(unknown.to_string().contains("password"), "{unknown}");
    // The same file inside the project: refused.
    let inside = e.p("project/p.toml");
    std::fs::write(&inside, "[store]\nurl = \"redis://r:6379/0\"\n").unwrap();
    let sources = Sources {
        profile: None,
        policy_file: Some(inside),
    };
    let stack = load(&sources, &e.ctx).unwrap();
    let m = stack.store(&e.ctx).unwrap_err().to_string();
    assert!(m.contains("only a --policy file outside"), "{m}");
}
