//! Resolution tests: precedence, variables, per-tool sections, requests,
//! errors with their file:line messages, shipped profiles, properties.

use super::*;
use crate::spec::Requests;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A temporary project, home and tmp, plus a place for policy files.
struct Env {
    _dir: tempfile::TempDir,
    root: PathBuf,
    ctx: Context,
}

impl Env {
    fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        for d in [
            "project/src",
            "project/.git",
            "home/.ssh",
            "tmp",
            "cwd/rel",
            "tooldir",
        ] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        let ctx = Context {
            project: root.join("project"),
            home: root.join("home"),
            tmp: root.join("tmp"),
            cwd: root.join("cwd"),
        };
        Env {
            _dir: dir,
            root,
            ctx,
        }
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// Write a policy file and return its path.
    fn file(&self, text: &str) -> PathBuf {
        let path = self.root.join("p.toml");
        std::fs::write(&path, text).unwrap();
        path
    }

    fn load(&self, profile: Option<&str>, text: Option<&str>) -> Result<PolicyStack, PolicyError> {
        let sources = Sources {
            profile: profile.map(str::to_string),
            policy_file: text.map(|t| self.file(t)),
        };
        load(&sources, &self.ctx)
    }

    fn resolve(
        &self,
        profile: Option<&str>,
        text: Option<&str>,
        cli: &Overrides,
    ) -> Result<Resolved, PolicyError> {
        self.load(profile, text)?.resolve(&self.ctx, cli, None)
    }

    fn tool(&self, text: Option<&str>, name: &str, req: &Requests) -> Resolved {
        let tool = ToolInput {
            name,
            requests: req,
            extra_read: Vec::new(),
        };
        self.load(None, text)
            .unwrap()
            .resolve(&self.ctx, &Overrides::default(), Some(&tool))
            .unwrap()
    }

    /// The error message of loading a policy file, with the file path shortened.
    fn err(&self, text: &str) -> String {
        let e = self
            .resolve(None, Some(text), &Overrides::default())
            .unwrap_err()
            .to_string();
        e.replace(&self.root.display().to_string(), "$T")
    }

    fn cli_err(&self, cli: &Overrides) -> String {
        let e = self.resolve(None, None, cli).unwrap_err().to_string();
        e.replace(&self.root.display().to_string(), "$T")
    }
}

fn source_of<'a>(r: &'a Resolved, key: &str) -> &'a str {
    &r.provenance.iter().find(|p| p.key == key).unwrap().source
}

fn outcome<'a>(r: &'a Resolved, key: &str) -> &'a RequestOutcome {
    r.requested.iter().find(|q| q.key == key).unwrap()
}

#[test]
fn default_profile_matches_the_design() {
    let e = Env::new();
    let r = e.resolve(None, None, &Overrides::default()).unwrap();
    let g = &r.grant;
    assert_eq!(g.project, e.p("project"));
    assert!(g.write.contains(&e.p("project")));
    assert!(g.write.contains(&PathBuf::from("/dev/null")));
    assert!(g.read.contains(&std::fs::canonicalize("/usr").unwrap()));
    assert!(
        g.read.iter().all(|p| p.exists()),
        "missing system dirs are skipped"
    );
    assert!(!g.read.contains(&PathBuf::from("/proc")));
    assert!(g.protected.contains(&e.p("project/.git")));
    assert!(
        g.protected.contains(&e.p("project/.agents")),
        "missing protected paths are kept"
    );
    assert!(g.denied.is_empty());
    assert!(
        !g.read
            .iter()
            .chain(&g.write)
            .any(|p| p.starts_with(e.p("home")))
    );
    assert_eq!(g.network, Network::Off);
    assert_eq!(g.env_allow, ["PATH", "LANG", "LC_*", "TERM"]);
    assert_eq!(g.timeout, Duration::from_secs(30));
    assert_eq!(g.kill_grace, Duration::from_millis(500));
    assert_eq!(g.limits.address_space, Some(8 << 30));
    assert_eq!(g.limits.cpu_seconds, Some(300));
    assert_eq!(g.output, OutputCaps::default());
    assert_eq!(g.enforcement, Enforcement::Standard);
    assert_eq!(g.approval, ApprovalMode::Never);
    assert_eq!(g.rate_limit, None);
    assert!(g.private_tmp);
    assert!(!g.is_read_only());
    assert_eq!(source_of(&r, "network"), "profile default");
}

#[test]
fn shipped_profiles_parse_and_resolve() {
    let e = Env::new();
    for name in profile_names() {
        let r = e.resolve(Some(name), None, &Overrides::default()).unwrap();
        assert!(!render_text(&r).is_empty());
        serde_json::to_string(&r).unwrap();
    }
    let untrusted = e
        .resolve(Some("untrusted"), None, &Overrides::default())
        .unwrap()
        .grant;
    assert_eq!(untrusted.write, [PathBuf::from("/dev/null")]);
    assert!(untrusted.read.contains(&e.p("project")));
    assert!(untrusted.is_read_only() && untrusted.private_tmp);
    assert_eq!(untrusted.network, Network::Off);
    let ci = e.resolve(Some("ci"), None, &Overrides::default()).unwrap();
    assert_eq!(ci.grant.enforcement, Enforcement::Strict);
    assert_eq!(source_of(&ci, "enforcement"), "profile ci");
    assert_eq!(source_of(&ci, "timeout"), "profile default");
    let net = e
        .resolve(Some("network"), None, &Overrides::default())
        .unwrap();
    assert_eq!(net.grant.network, Network::On);
}

#[test]
fn unknown_profile_lists_the_valid_ones() {
    let e = Env::new();
    let err = e.load(Some("paranoid"), None).unwrap_err().to_string();
    assert_eq!(
        err,
        "unknown profile 'paranoid' (valid profiles: default, untrusted, ci, network)"
    );
}

#[test]
fn each_layer_wins_over_the_previous() {
    let e = Env::new();
    // profile over default
    let r = e
        .resolve(Some("network"), None, &Overrides::default())
        .unwrap();
    assert_eq!(source_of(&r, "network"), "profile network");
    // file over profile
    let file = "[network]\nmode = \"off\"\n[limits]\ntimeout = \"10s\"\n[sandbox]\nenforcement = \"standard\"\n";
    let r = e
        .resolve(Some("network"), Some(file), &Overrides::default())
        .unwrap();
    assert_eq!(r.grant.network, Network::Off);
    assert_eq!(r.grant.timeout, Duration::from_secs(10));
    assert!(source_of(&r, "network").starts_with("policy "));
    let r = e
        .resolve(Some("ci"), Some(file), &Overrides::default())
        .unwrap();
    assert_eq!(r.grant.enforcement, Enforcement::Standard);
    // CLI over file
    let cli = Overrides {
        allow_net: true,
        timeout: Some("2m".into()),
        allow_degraded: true,
        ..Overrides::default()
    };
    let r = e.resolve(Some("ci"), Some(file), &cli).unwrap();
    assert_eq!(r.grant.network, Network::On);
    assert_eq!(r.grant.timeout, Duration::from_secs(120));
    assert_eq!(r.grant.enforcement, Enforcement::Degraded);
    assert_eq!(source_of(&r, "network"), "--allow-net");
    assert_eq!(source_of(&r, "timeout"), "--timeout");
    assert_eq!(source_of(&r, "enforcement"), "--allow-degraded");
}

#[test]
fn replace_and_append_lists() {
    let e = Env::new();
    let r = e
        .resolve(None, Some("[fs]\nwrite = [\"src\"]\nadd_write = [\"/dev/null\"]\n[env]\nadd_allow = [\"HOME\"]\nset = { A = \"1\" }\n"), &Overrides::default())
        .unwrap();
    assert_eq!(
        r.grant.write,
        [e.p("project/src"), PathBuf::from("/dev/null")]
    );
    assert_eq!(r.grant.env_allow, ["PATH", "LANG", "LC_*", "TERM", "HOME"]);
    let cli = Overrides {
        env: vec!["A=2".into(), "MY_*".into(), "PATH".into()],
        ..Overrides::default()
    };
    let r = e
        .resolve(
            None,
            Some("[env]\nallow = [\"PATH\"]\nset = { A = \"1\", B = \"x\" }\n"),
            &cli,
        )
        .unwrap();
    assert_eq!(r.grant.env_allow, ["PATH", "MY_*"], "deduplicated");
    assert_eq!(r.grant.env_set["A"], "2", "the CLI value wins");
    assert_eq!(r.grant.env_set["B"], "x");
}

#[test]
fn path_variables_and_relative_paths() {
    let e = Env::new();
    let text = "[fs]\nadd_read = [\"{home}/.ssh\", \"{tmp}\", \"src/../src\"]\nadd_denied = [\"{home}/.ssh/id_rsa\"]\n";
    let r = e.resolve(None, Some(text), &Overrides::default()).unwrap();
    let g = &r.grant;
    assert!(g.read.contains(&e.p("home/.ssh")));
    assert!(g.read.contains(&e.p("tmp")));
    assert!(g.read.contains(&e.p("project/src")));
    assert_eq!(g.denied, [e.p("home/.ssh/id_rsa")]);
    // CLI paths are relative to the cwd.
    let cli = Overrides {
        read: vec!["rel".into()],
        write: vec![e.p("tooldir")],
        ..Overrides::default()
    };
    let r = e.resolve(None, None, &cli).unwrap();
    assert!(r.grant.read.contains(&e.p("cwd/rel")));
    assert!(r.grant.write.contains(&e.p("tooldir")));
    assert!(
        r.provenance
            .iter()
            .any(|p| p.key == "read" && p.source == "--read")
    );
}

#[test]
fn roots_are_canonical_and_deduplicated() {
    let e = Env::new();
    std::os::unix::fs::symlink(e.p("project/src"), e.p("link")).unwrap();
    let text = format!(
        "[fs]\nadd_read = [\"{}\", \"src\", \"./src\"]\n",
        e.p("link").display()
    );
    let r = e.resolve(None, Some(&text), &Overrides::default()).unwrap();
    assert_eq!(
        r.grant
            .read
            .iter()
            .filter(|p| **p == e.p("project/src"))
            .count(),
        1
    );
    assert!(!r.grant.read.contains(&e.p("link")));
}

#[test]
fn a_symlinked_protected_path_is_kept_under_both_names() {
    let e = Env::new();
    std::os::unix::fs::symlink(e.p("tooldir"), e.p("project/tools")).unwrap();
    let r = e.resolve(None, None, &Overrides::default()).unwrap();
    assert!(r.grant.protected.contains(&e.p("project/tools")));
    assert!(r.grant.protected.contains(&e.p("tooldir")));
}

#[test]
fn per_tool_sections() {
    let e = Env::new();
    let text = "[limits]\ntimeout = \"10s\"\n[tools.slow.limits]\ntimeout = \"5m\"\n[tools.slow.network]\nmode = \"tcp\"\nconnect = [443]\n";
    let none = Requests::default();
    let slow = e.tool(Some(text), "slow", &none);
    assert_eq!(slow.grant.timeout, Duration::from_secs(300));
    assert_eq!(
        slow.grant.network,
        Network::Tcp {
            connect: vec![443],
            bind: vec![]
        }
    );
    assert!(source_of(&slow, "timeout").ends_with("[tools.slow]"));
    let other = e.tool(Some(text), "other", &none);
    assert_eq!(other.grant.timeout, Duration::from_secs(10));
    assert_eq!(other.grant.network, Network::Off);
    // CLI flags beat per-tool sections.
    let stack = e.load(None, Some(text)).unwrap();
    assert_eq!(stack.tool_sections(), ["slow"]);
    let cli = Overrides {
        timeout: Some("1s".into()),
        ..Overrides::default()
    };
    let tool = ToolInput {
        name: "slow",
        requests: &none,
        extra_read: vec![e.p("tooldir")],
    };
    let r = stack.resolve(&e.ctx, &cli, Some(&tool)).unwrap();
    assert_eq!(r.grant.timeout, Duration::from_secs(1));
    assert!(r.grant.read.contains(&e.p("tooldir")));
    let tool = ToolInput {
        extra_read: vec![e.p("gone")],
        ..tool
    };
    let err = stack
        .resolve(&e.ctx, &cli, Some(&tool))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("tool slow (its source directory): ") && err.contains("does not exist"),
        "{err}"
    );
}

#[test]
fn errors_in_tool_sections_surface_at_load() {
    let e = Env::new();
    let err = e.err("[tools.x.limits]\n\ntimeout = 0\n");
    assert_eq!(
        err,
        "policy $T/p.toml:3: tools.x.limits.timeout: must be greater than zero"
    );
}

#[test]
fn network_requests() {
    let e = Env::new();
    let ask = Requests {
        network: Some(true),
        ..Requests::default()
    };
    let r = e.tool(None, "t", &ask);
    assert_eq!(r.grant.network, Network::Off);
    assert_eq!(outcome(&r, "network").decision, Decision::Refused);
    assert!(
        outcome(&r, "network")
            .reason
            .contains("requests.network = false (profile default)")
    );
    let r = e.tool(Some("[requests]\nnetwork = true\n"), "t", &ask);
    assert_eq!(r.grant.network, Network::On);
    assert_eq!(outcome(&r, "network").decision, Decision::Granted);
    assert!(source_of(&r, "network").starts_with("tool t requested it"));
    let r = e.tool(Some("[network]\nmode = \"on\"\n"), "t", &ask);
    assert_eq!(outcome(&r, "network").decision, Decision::Unchanged);
    // Asking for less is always granted, but a CLI flag wins.
    let no = Requests {
        network: Some(false),
        ..Requests::default()
    };
    let r = e.tool(Some("[network]\nmode = \"on\"\n"), "t", &no);
    assert_eq!(r.grant.network, Network::Off);
    let cli = Overrides {
        allow_net: true,
        ..Overrides::default()
    };
    let tool = ToolInput {
        name: "t",
        requests: &no,
        extra_read: vec![],
    };
    let r = e
        .load(None, None)
        .unwrap()
        .resolve(&e.ctx, &cli, Some(&tool))
        .unwrap();
    assert_eq!(r.grant.network, Network::On);
    assert_eq!(outcome(&r, "network").decision, Decision::Overridden);
}

#[test]
fn timeout_requests_are_clamped() {
    let e = Env::new();
    let ask = |secs| Requests {
        timeout: Some(Duration::from_secs(secs)),
        ..Requests::default()
    };
    let r = e.tool(None, "t", &ask(120));
    assert_eq!(r.grant.timeout, Duration::from_secs(120));
    assert_eq!(outcome(&r, "timeout").decision, Decision::Granted);
    let r = e.tool(None, "t", &ask(10));
    assert_eq!(r.grant.timeout, Duration::from_secs(10));
    let r = e.tool(None, "t", &ask(3600));
    assert_eq!(r.grant.timeout, Duration::from_secs(300));
    let o = outcome(&r, "timeout");
    assert_eq!(
        (o.decision, o.requested.as_str(), o.granted.as_str()),
        (Decision::Clamped, "1h", "5m")
    );
    assert!(
        o.reason
            .contains("requests.max_timeout = 5m (profile default)")
    );
    assert!(source_of(&r, "timeout").contains("clamped"));
    assert!(
        render_text(&r).contains("requested 1h, granted 5m  (clamped: above requests.max_timeout")
    );
    // An operator timeout above max_timeout is never reduced by a request.
    let r = e.tool(Some("[limits]\ntimeout = \"10m\"\n"), "t", &ask(3600));
    assert_eq!(r.grant.timeout, Duration::from_secs(600));
}

#[test]
fn approval_and_rate_limit_only_tighten() {
    let e = Env::new();
    let req = Requests {
        requires_approval: Some(true),
        rate_limit: Some(RateLimit {
            requests: 2,
            window: Duration::from_secs(60),
        }),
        ..Requests::default()
    };
    let r = e.tool(Some("[rate_limit]\nrequests = 10\n"), "t", &req);
    assert_eq!(r.grant.approval, ApprovalMode::Always);
    assert_eq!(r.grant.rate_limit.unwrap().requests, 2);
    assert_eq!(outcome(&r, "rate_limit").decision, Decision::Granted);
    let lax = Requests {
        requires_approval: Some(false),
        rate_limit: Some(RateLimit {
            requests: 100,
            window: Duration::from_secs(1),
        }),
        ..Requests::default()
    };
    let text = "[approval]\nmode = \"once\"\n[rate_limit]\nrequests = 10\nwindow = \"1m\"\n";
    let r = e.tool(Some(text), "t", &lax);
    assert_eq!(r.grant.approval, ApprovalMode::Once);
    assert_eq!(outcome(&r, "approval").decision, Decision::Refused);
    assert_eq!(
        r.grant.rate_limit,
        Some(RateLimit {
            requests: 10,
            window: Duration::from_secs(60)
        })
    );
    assert_eq!(outcome(&r, "rate_limit").decision, Decision::Unchanged);
    // With no policy rate limit, the tool's own applies.
    let r = e.tool(None, "t", &lax);
    assert_eq!(r.grant.rate_limit, lax.rate_limit);
}

#[test]
fn file_errors_name_file_line_and_key() {
    let e = Env::new();
    let cases = [
        (
            "[limits]\ntimeout = \"3x\"\n",
            "policy $T/p.toml:2: limits.timeout: invalid duration \"3x\" (use e.g. \"30s\", \"500ms\", \"5m\")",
        ),
        (
            "\n\n[netwrk]\n",
            "policy $T/p.toml:3: unknown key 'netwrk' (expected one of fs, network, env, limits, sandbox, requests, approval, rate_limit, tools)",
        ),
        (
            "[fs]\nadd_read = [\n  \"src\",\n  \"nope\",\n]\n",
            "policy $T/p.toml:4: fs.add_read: $T/project/nope does not exist (create it or remove it from fs.add_read)",
        ),
        (
            "[fs]\nadd_denied = [\"src\"]\nadd_write = [\"src\"]\n",
            "policy $T/p.toml:3: fs.add_write: $T/project/src is also denied ($T/project/src, policy $T/p.toml); remove one of them",
        ),
        (
            "[fs]\nadd_denied = [\"{project}\"]\n",
            "policy $T/p.toml:2: fs.add_denied: $T/project is also a write root ($T/project, profile default); remove one of them",
        ),
        (
            "[fs]\nadd_write = [\".git\"]\n",
            "policy $T/p.toml:2: fs.add_write: $T/project/.git is also protected ($T/project/.git, profile default); remove one of them",
        ),
        (
            "[network]\nmode = \"off\"\nconnect = [443]\n",
            "policy $T/p.toml:3: network.connect: ports only apply with network.mode = \"tcp\" (this file sets mode = \"off\")",
        ),
        (
            "[network]\nbind = [8080]\n",
            "policy $T/p.toml:2: network.bind: ports only apply with network.mode = \"tcp\", but the mode is \"off\" (profile default); set mode = \"tcp\" or remove the ports",
        ),
        (
            "[network]\nmode = \"tcp\"\nconnect = [443,\n 70000]\n",
            "policy $T/p.toml:4: network.connect: invalid port 70000 (use 1-65535)",
        ),
        (
            "[network]\nmode = \"tcp\"\nconnect = [0]\n",
            "policy $T/p.toml:3: network.connect: invalid port 0 (use 1-65535)",
        ),
        (
            "[limits]\ntimeout = \"0s\"\n",
            "policy $T/p.toml:2: limits.timeout: must be greater than zero",
        ),
        (
            "[limits]\nstdout = 0\n",
            "policy $T/p.toml:2: limits.stdout: must be greater than zero (an output cap of zero hides all output)",
        ),
        (
            "[limits]\nprocesses = 0\n",
            "policy $T/p.toml:2: limits.processes: must be greater than zero (or \"unlimited\" to keep the inherited limit)",
        ),
        (
            "[env]\nallow = [\"PATH\", \"BAD NAME\"]\n",
            "policy $T/p.toml:2: env.allow: invalid variable name \"BAD NAME\" (use NAME or PREFIX*)",
        ),
        (
            "[env.set]\n\"1X\" = \"v\"\n",
            "policy $T/p.toml:2: env.set.1X: invalid variable name \"1X\" (use letters, digits and _)",
        ),
        (
            "[rate_limit]\nwindow = \"1m\"\n",
            "policy $T/p.toml:2: rate_limit.window: a window without rate_limit.requests (add requests = N)",
        ),
        (
            "[rate_limit]\nrequests = 0\n",
            "policy $T/p.toml:2: rate_limit.requests: must be greater than zero (to forbid a tool, do not expose it)",
        ),
        (
            "[fs]\nread = [\"{projct}/x\"]\n",
            "policy $T/p.toml:2: fs.read: \"{projct}/x\": unknown variable {projct} (use {project}, {home} or {tmp})",
        ),
        (
            "[sandbox]\nenforcement = \"lax\"\n",
            "policy $T/p.toml:2: sandbox.enforcement: invalid value \"lax\" (expected one of standard, strict, degraded)",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(e.err(text), want, "for {text:?}");
    }
}

#[test]
fn contradiction_is_reported_at_the_later_layer() {
    let e = Env::new();
    // Denied first (file), write later (CLI): the CLI flag is named.
    let cli = Overrides {
        write: vec![e.p("home/.ssh")],
        ..Overrides::default()
    };
    let err = e
        .resolve(None, Some("[fs]\nadd_denied = [\"{home}\"]\n"), &cli)
        .unwrap_err()
        .to_string()
        .replace(&e.root.display().to_string(), "$T");
    assert_eq!(
        err,
        "--write: $T/home/.ssh is inside denied ($T/home, policy $T/p.toml); remove one of them"
    );
    // Ports set before a later layer turns the mode off are dropped.
    let r = e.resolve(
        None,
        Some("[network]\nmode = \"tcp\"\nconnect = [443]\n"),
        &Overrides {
            allow_net: true,
            ..Overrides::default()
        },
    );
    assert_eq!(r.unwrap().grant.network, Network::On);
}

#[test]
fn cli_errors_name_the_flag() {
    let e = Env::new();
    let o = |f: fn(&mut Overrides)| {
        let mut o = Overrides::default();
        f(&mut o);
        o
    };
    assert_eq!(
        e.cli_err(&o(|o| o.read = vec!["missing".into()])),
        "--read: $T/cwd/missing does not exist (create it or remove it from --read)"
    );
    assert_eq!(
        e.cli_err(&o(|o| o.timeout = Some("soon".into()))),
        "--timeout: invalid duration \"soon\" (use e.g. \"30s\", \"500ms\", \"5m\")"
    );
    assert_eq!(
        e.cli_err(&o(|o| o.timeout = Some("0".into()))),
        "--timeout: must be greater than zero"
    );
    assert_eq!(
        e.cli_err(&o(|o| o.env = vec!["A B".into()])),
        "--env: invalid variable name \"A B\" (use NAME or PREFIX*)"
    );
    assert_eq!(
        e.cli_err(&o(|o| o.env = vec!["=x".into()])),
        "--env: invalid variable name \"\" (use letters, digits and _)"
    );
}

#[test]
fn unreadable_policy_file() {
    let e = Env::new();
    let sources = Sources {
        profile: None,
        policy_file: Some("nope.toml".into()),
    };
    let err = load(&sources, &e.ctx)
        .unwrap_err()
        .to_string()
        .replace(&e.root.display().to_string(), "$T");
    assert!(
        err.starts_with("policy $T/cwd/nope.toml: cannot read: "),
        "{err}"
    );
}

#[test]
fn render_shows_every_setting_with_its_source() {
    let e = Env::new();
    let r = e.resolve(Some("ci"), None, &Overrides::default()).unwrap();
    let text = render_text(&r);
    assert!(text.starts_with("policy defaults (no tool)\n"));
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("network "))
        .unwrap();
    assert!(
        line.contains(" off ") && line.ends_with("(profile default)"),
        "{line}"
    );
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("enforcement "))
        .unwrap();
    assert!(
        line.contains("strict") && line.ends_with("(profile ci)"),
        "{line}"
    );
    assert!(text.lines().all(|l| !l.is_empty()));
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["grant"]["network"]["mode"], "off");
    assert_eq!(json["provenance"][0]["key"], "project");
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn overrides() -> impl Strategy<Value = Overrides> {
        let path = prop_oneof![
            Just("rel".to_string()),
            Just("/usr".to_string()),
            "[a-z{}/.~]{0,12}"
        ];
        (
            any::<bool>(),
            proptest::collection::vec(path.clone(), 0..3),
            proptest::collection::vec(path, 0..3),
            proptest::collection::vec("[A-Za-z_=*0-9 ]{0,8}", 0..3),
            proptest::option::of(prop_oneof!["[0-9]{1,4}(ms|s|m|h)?", ".{0,6}"]),
            any::<bool>(),
        )
            .prop_map(
                |(allow_net, read, write, env, timeout, allow_degraded)| Overrides {
                    allow_net,
                    read: read.into_iter().map(PathBuf::from).collect(),
                    write: write.into_iter().map(PathBuf::from).collect(),
                    env,
                    timeout,
                    allow_degraded,
                },
            )
    }

    fn requests() -> impl Strategy<Value = Requests> {
        (
            proptest::option::of(any::<bool>()),
            proptest::option::of(0u64..100_000),
            proptest::option::of(any::<bool>()),
            proptest::option::of((0u32..50, 0u64..600)),
        )
            .prop_map(|(network, timeout, requires_approval, rl)| Requests {
                network,
                timeout: timeout.map(Duration::from_secs),
                requires_approval,
                rate_limit: rl.map(|(requests, w)| RateLimit {
                    requests,
                    window: Duration::from_secs(w),
                }),
            })
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
                let _ = render_text(&r);
                if cli.allow_net {
                    prop_assert_eq!(&r.grant.network, &Network::On);
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
}

#[test]
fn policy_paths_are_relative_to_the_project_not_the_cwd() {
    let e = Env::new();
    let r = e
        .resolve(
            None,
            Some("[fs]\nadd_read = [\"src\"]\n"),
            &Overrides::default(),
        )
        .unwrap();
    assert!(r.grant.read.contains(&e.p("project/src")));
    assert!(!Path::new(&e.p("cwd/src")).exists());
}
