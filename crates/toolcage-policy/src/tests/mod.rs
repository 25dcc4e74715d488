//! Resolution tests: precedence, variables, per-tool sections, requests,
//! errors with their file:line messages, shipped profiles, properties.

use super::*;

mod domains;
mod errors;
mod floor;
mod gate_keys;
mod network;
mod presets;
mod props;
mod upstreams;
mod with;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A temporary project, home and tmp, plus a place for policy files.
pub(super) struct Env {
    _dir: tempfile::TempDir,
    pub(super) root: PathBuf,
    pub(super) ctx: Context,
}

impl Env {
    pub(super) fn new() -> Env {
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
            login_home: None,
            tmp: root.join("tmp"),
            cwd: root.join("cwd"),
            xdg_state_home: None,
            env: Default::default(),
            holds_a3s_tools: holds_a3s_tools_for_tests,
        };
        Env {
            _dir: dir,
            root,
            ctx,
        }
    }

    pub(super) fn p(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// Write a policy file and return its path.
    pub(super) fn file(&self, text: &str) -> PathBuf {
        let path = self.root.join("p.toml");
        std::fs::write(&path, text).unwrap();
        path
    }

    pub(super) fn load(
        &self,
        profile: Option<&str>,
        text: Option<&str>,
    ) -> Result<PolicyStack, PolicyError> {
        let sources = Sources {
            profile: profile.map(str::to_string),
            policy_file: text.map(|t| self.file(t)),
        };
        load(&sources, &self.ctx)
    }

    pub(super) fn resolve(
        &self,
        profile: Option<&str>,
        text: Option<&str>,
        cli: &Overrides,
    ) -> Result<Resolved, PolicyError> {
        self.load(profile, text)?.resolve(&self.ctx, cli, None)
    }

    pub(super) fn tool(&self, text: Option<&str>, name: &str, req: &Requests) -> Resolved {
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
    pub(super) fn err(&self, text: &str) -> String {
        let e = self
            .resolve(None, Some(text), &Overrides::default())
            .unwrap_err()
            .to_string();
        e.replace(&self.root.display().to_string(), "$T")
    }

    pub(super) fn cli_err(&self, cli: &Overrides) -> String {
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
    // The safety floor (tests/floor.rs): secrets and toolcage's own state.
    assert!(g.denied.contains(&PathBuf::from("/etc/shadow")));
    assert!(g.denied.contains(&e.p("home/.local/state/toolcage")));
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
    assert_eq!(g.limits.address_space, Some(16 << 30));
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
        assert!(!render_text(&r, &[]).is_empty());
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
    assert_eq!(source_of(&ci, "timeout"), "profile ci");
    assert_eq!(ci.grant.timeout, std::time::Duration::from_secs(30 * 60));
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
fn a_later_timeout_raises_the_cpu_limit_an_explicit_one_stays() {
    let e = Env::new();
    let cli = |t: &str| Overrides {
        timeout: Some(t.into()),
        ..Overrides::default()
    };
    // Under ci (30 min of CPU), --timeout 2h raises it; the source says why.
    let r = e.resolve(Some("ci"), None, &cli("2h")).unwrap();
    assert_eq!(r.grant.limits.cpu_seconds, Some(7200));
    assert!(
        source_of(&r, "cpu").starts_with("raised to the timeout"),
        "{}",
        source_of(&r, "cpu")
    );
    // A file's timeout over the profile's CPU limit: the same.
    let r = e
        .resolve(
            None,
            Some("[limits]\ntimeout = \"20m\"\n"),
            &Overrides::default(),
        )
        .unwrap();
    assert_eq!(r.grant.limits.cpu_seconds, Some(1200));
    // Controls: a CPU limit the file sets with its timeout is kept, and a
    // shorter timeout never lowers it.
    let r = e
        .resolve(
            None,
            Some("[limits]\ntimeout = \"20m\"\ncpu = \"2m\"\n"),
            &Overrides::default(),
        )
        .unwrap();
    assert_eq!(r.grant.limits.cpu_seconds, Some(120));
    let r = e.resolve(Some("ci"), None, &cli("10s")).unwrap();
    assert_eq!(r.grant.limits.cpu_seconds, Some(1800));
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
    assert!(g.denied.contains(&e.p("home/.ssh/id_rsa")));
    assert!(
        !g.denied
            .iter()
            .any(|p| p.starts_with(e.p("home/.ssh")) && *p != e.p("home/.ssh/id_rsa"))
    );
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
    std::os::unix::fs::symlink(e.p("tooldir"), e.p("project/.tools")).unwrap();
    let r = e.resolve(None, None, &Overrides::default()).unwrap();
    assert!(r.grant.protected.contains(&e.p("project/.tools")));
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
        render_text(&r, &[])
            .contains("requested 1h, granted 5m  (clamped: above requests.max_timeout")
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
fn render_shows_every_setting_with_its_source() {
    let e = Env::new();
    let r = e.resolve(Some("ci"), None, &Overrides::default()).unwrap();
    let text = render_text(&r, &[]);
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

/// Stand-in for discover's rule (policy may not depend on discover): a
/// `tools/*.md` whose first line opens a front matter.
fn holds_a3s_tools_for_tests(project: &Path) -> bool {
    std::fs::read_dir(project.join("tools")).is_ok_and(|rd| {
        rd.flatten().any(|e| {
            e.file_name().to_string_lossy().ends_with(".md")
                && std::fs::read_to_string(e.path()).is_ok_and(|t| t.starts_with("---"))
        })
    })
}
