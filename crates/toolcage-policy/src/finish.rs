//! The last step of resolution: contradiction checks, the [`Grant`], and
//! the provenance lines.

use super::error::PolicyError;
use super::file::NetMode;
use super::floor::HOME_SECRET_SOURCE;
use super::grant::{
    ApprovalMode, Grant, Limits, NamespaceFreePolicy, Network, OutputCaps, RateLimit,
};
use super::origin::{At, Origin, Sourced};
use super::paths::within;
use super::state::{State, dedup, dedup_by, enum_name, mode_name};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toolcage_text::units::{format_duration, format_size};

/// One setting of the grant, as shown by `toolcage policy`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Provenance {
    /// `read`, `network`, `limits`-style names: `timeout`, `env.allow`, ...
    pub key: String,
    pub value: String,
    /// Where it came from: `profile ci`, `policy /x/p.toml`, `--read`, ...
    pub source: String,
    /// A read or write root as written, when `value` (what it resolved
    /// to, and what the grant holds) differs: a symlink on the way.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub written: Option<String>,
}

impl State {
    /// A timeout set after the CPU limit (a later layer, a flag, the tool's
    /// request) raises the CPU limit to at least the timeout: a CPU limit
    /// nobody set for this call must not end it before the timeout that was
    /// (`--timeout 2h` under `ci`, whose CPU limit is 30 min). A CPU limit
    /// set in the same layer as the timeout, or after it, is kept.
    fn cpu_follows_a_later_timeout(&mut self) {
        let Some(cpu) = self.cpu.v else { return };
        let timeout = self.timeout.v.as_millis().div_ceil(1000) as u64;
        if self.cpu.o.seq < self.timeout.o.seq && cpu < timeout {
            let why = format!("raised to the timeout, set by {}", self.timeout.o.source);
            self.cpu = Sourced {
                v: Some(timeout),
                o: Origin::input(why, self.timeout.o.seq),
            };
        }
    }

    /// Check for contradictions and build the grant with its provenance.
    pub(crate) fn finish(
        mut self,
        project: PathBuf,
    ) -> Result<(Grant, Vec<Provenance>), PolicyError> {
        // Contradictions are checked on every entry, before nested roots are
        // folded into their parents.
        self.check_contradictions()?;
        for list in [
            &mut self.read,
            &mut self.write,
            &mut self.protected,
            &mut self.denied,
        ] {
            dedup(list);
        }
        dedup_by(&mut self.env_allow, |e| e.v.clone());
        self.cpu_follows_a_later_timeout();
        let grant = self.grant(project)?;
        let prov = self.provenance(&grant);
        Ok((grant, prov))
    }

    /// The grant: each value without its origin.
    fn grant(&self, project: PathBuf) -> Result<Grant, PolicyError> {
        let paths = |l: &[Sourced<PathBuf>]| l.iter().map(|e| e.v.clone()).collect::<Vec<_>>();
        Ok(Grant {
            project,
            read: paths(&self.read),
            write: paths(&self.write),
            protected: paths(&self.protected),
            denied: paths(&self.denied),
            network: self.network(),
            env_allow: self.env_allow.iter().map(|e| e.v.clone()).collect(),
            env_set: self
                .env_set
                .iter()
                .map(|(k, e)| (k.clone(), e.v.clone()))
                .collect(),
            private_tmp: self.private_tmp.v,
            timeout: self.timeout.v,
            kill_grace: self.kill_grace.v,
            limits: Limits {
                address_space: self.address_space.v,
                cpu_seconds: self.cpu.v,
                processes: self.processes.v,
                file_size: self.file_size.v,
                open_files: self.open_files.v,
                tmp: self.tmp.v,
            },
            output: OutputCaps {
                stdout: usize::try_from(self.stdout.v).unwrap_or(usize::MAX),
                stderr: usize::try_from(self.stderr.v).unwrap_or(usize::MAX),
            },
            enforcement: self.enforcement.v,
            namespace_free: NamespaceFreePolicy {
                mode: self.namespace_free.v,
                accepts: self.namespace_free_accepts.v.clone(),
            },
            approval: self.approval.v,
            allow_yes: self
                .allow_yes
                .as_ref()
                .map_or(self.approval.v != ApprovalMode::Always, |v| v.v),
            rate_limit: self.rate_limit()?,
            concurrent: self.concurrent.as_ref().map(|c| c.v),
            homes: self.homes.clone(),
            session_writes: Vec::new(),
        })
    }

    fn network(&self) -> Network {
        match self.mode.v {
            NetMode::Off => Network::Off,
            NetMode::On => Network::On,
            NetMode::Tcp => Network::Tcp {
                connect: self.connect.v.clone(),
                bind: self.bind.v.clone(),
            },
            NetMode::Domains => Network::Domains(self.domains.policy()),
        }
    }

    fn rate_limit(&self) -> Result<Option<RateLimit>, PolicyError> {
        match (&self.rl_requests, &self.rl_window) {
            (Some(r), w) => Ok(Some(RateLimit {
                requests: r.v,
                window: w.as_ref().map_or(Duration::from_secs(60), |w| w.v),
            })),
            (None, Some(w)) => Err(w
                .o
                .error("a window without rate_limit.requests (add requests = N)")),
            (None, None) => Ok(None),
        }
    }

    fn check_contradictions(&self) -> Result<(), PolicyError> {
        self.check_roots_against_guards()?;
        // The call's private /tmp is mounted over /tmp: a root that is /tmp
        // itself would be hidden by it (and a project beneath it with it).
        if self.private_tmp.v {
            for (roots, name) in [(&self.write, "write root"), (&self.read, "read root")] {
                if let Some(r) = roots.iter().find(|r| r.v == Path::new("/tmp")) {
                    return Err(r.o.error(format!(
                        "/tmp as a {name} would be hidden by the call's private /tmp \
                         (private_tmp = true, {}); grant a directory beneath /tmp instead, \
                         or set [fs] private_tmp = false to share the host's /tmp",
                        self.private_tmp.o.source
                    )));
                }
            }
        }
        for ports in [&self.connect, &self.bind] {
            if self.mode.v != NetMode::Tcp && !ports.v.is_empty() && ports.o.seq >= self.mode.o.seq
            {
                return Err(ports.o.error(format!(
                    "ports only apply with network.mode = \"tcp\", but the mode is \"{}\" ({}); set mode = \"tcp\" or remove the ports",
                    mode_name(self.mode.v),
                    self.mode.o.source
                )));
            }
        }
        self.check_domains()
    }

    /// No root is, or lies inside, a denied path, nor a write root a
    /// protected one.
    fn check_roots_against_guards(&self) -> Result<(), PolicyError> {
        let pairs = [
            (&self.write, "write root", &self.denied, "denied"),
            (&self.read, "read root", &self.denied, "denied"),
            (&self.write, "write root", &self.protected, "protected"),
        ];
        for (roots, root_name, guards, guard_name) in pairs {
            for r in roots {
                if let Some(g) = guards.iter().find(|g| within(&r.v, &g.v)) {
                    let msg = contradiction(r, root_name, g, guard_name);
                    // Report at whichever was written last: that is the edit to undo.
                    let o = if r.o.seq >= g.o.seq { &r.o } else { &g.o };
                    return Err(o.error(msg));
                }
            }
        }
        Ok(())
    }

    fn provenance(&self, g: &Grant) -> Vec<Provenance> {
        let mut out = Lines(Vec::new());
        for w in self.presets_named() {
            out.push("with", w.v.name().to_string(), &w.o);
        }
        self.paths_provenance(&mut out);
        out.push(
            "private_tmp",
            g.private_tmp.to_string(),
            &self.private_tmp.o,
        );
        self.network_provenance(g, &mut out);
        for e in &self.env_allow {
            out.push("env.allow", e.v.clone(), &e.o);
        }
        for (k, e) in &self.env_set {
            out.push("env.set", format!("{k}={}", e.v), &e.o);
        }
        self.limits_provenance(g, &mut out);
        self.sandbox_provenance(g, &mut out);
        self.approval_provenance(g, &mut out);
        out.push(
            "requests.network",
            self.req_network.v.to_string(),
            &self.req_network.o,
        );
        out.push(
            "requests.max_timeout",
            format_duration(self.max_timeout.v),
            &self.max_timeout.o,
        );
        out.0
    }

    /// The path lists, the lifted home secrets and the `{a3s_tools}`
    /// guards that named nothing.
    fn paths_provenance(&self, out: &mut Lines) {
        for (key, list) in [
            ("read", &self.read),
            ("write", &self.write),
            ("protected", &self.protected),
            ("denied", &self.denied),
        ] {
            for e in list {
                out.push(key, e.v.display().to_string(), &e.o);
            }
        }
        for e in &self.allow_secrets {
            out.push("allow_secrets", e.v.clone(), &e.o);
        }
        for (key, e) in &self.not_guarded {
            out.push(&format!("not_{key}"), e.v.display().to_string(), &e.o);
        }
    }

    fn network_provenance(&self, g: &Grant, out: &mut Lines) {
        let net = match &g.network {
            Network::Off => "off".to_string(),
            Network::On => "on".to_string(),
            Network::Tcp { connect, bind } => format!("tcp connect {connect:?} bind {bind:?}"),
            Network::Domains(_) => "domains".to_string(),
        };
        out.push("network", net, &self.mode.o);
        if matches!(g.network, Network::Domains(_)) {
            for e in &self.domains.allow {
                out.push("network.allow", e.v.to_string(), &e.o);
            }
            for e in &self.domains.deny {
                out.push("network.deny", e.v.to_string(), &e.o);
            }
            for (name, e) in &self.domains.hosts {
                out.push("network.hosts", format!("{name} = {}", e.v), &e.o);
            }
        }
    }

    /// `[limits]`: the timeouts, the rlimits, tmp and the output caps.
    fn limits_provenance(&self, g: &Grant, out: &mut Lines) {
        out.push("timeout", format_duration(g.timeout), &self.timeout.o);
        out.push(
            "kill_grace",
            format_duration(g.kill_grace),
            &self.kill_grace.o,
        );
        let lim = |v: Option<u64>, f: fn(u64) -> String| v.map_or("unlimited".to_string(), f);
        let secs = |s| format_duration(Duration::from_secs(s));
        let count = |n: u64| n.to_string();
        let l = &g.limits;
        out.push(
            "address_space",
            lim(l.address_space, format_size),
            &self.address_space.o,
        );
        out.push("cpu", lim(l.cpu_seconds, secs), &self.cpu.o);
        out.push("processes", lim(l.processes, count), &self.processes.o);
        out.push(
            "file_size",
            lim(l.file_size, format_size),
            &self.file_size.o,
        );
        out.push("open_files", lim(l.open_files, count), &self.open_files.o);
        out.push("tmp", format_size(l.tmp), &self.tmp.o);
        out.push(
            "stdout",
            format_size(g.output.stdout as u64),
            &self.stdout.o,
        );
        out.push(
            "stderr",
            format_size(g.output.stderr as u64),
            &self.stderr.o,
        );
    }

    fn sandbox_provenance(&self, g: &Grant, out: &mut Lines) {
        out.push(
            "enforcement",
            enum_name(&g.enforcement),
            &self.enforcement.o,
        );
        out.push(
            "namespace_free",
            enum_name(&g.namespace_free.mode),
            &self.namespace_free.o,
        );
        out.push(
            "namespace_free_accepts",
            format!("[{}]", g.namespace_free.accepts.join(", ")),
            &self.namespace_free_accepts.o,
        );
    }

    /// Approval, `--yes`, the rate limit and the concurrency bound.
    fn approval_provenance(&self, g: &Grant, out: &mut Lines) {
        out.push("approval", enum_name(&g.approval), &self.approval.o);
        let default = Origin::input(
            "built-in (false for approval mode always, true otherwise)".into(),
            0,
        );
        out.push(
            "approval.allow_yes",
            g.allow_yes.to_string(),
            self.allow_yes.as_ref().map_or(&default, |v| &v.o),
        );
        let built_in = Origin::input("built-in".into(), 0);
        match (&g.rate_limit, &self.rl_requests) {
            (Some(r), Some(v)) => out.push(
                "rate_limit",
                format!("{} per {}", r.requests, format_duration(r.window)),
                &v.o,
            ),
            _ => out.push("rate_limit", "none".into(), &built_in),
        }
        out.push(
            "concurrent",
            g.concurrent.map_or("unlimited".into(), |n| n.to_string()),
            self.concurrent.as_ref().map_or(&built_in, |v| &v.o),
        );
    }
}

/// The provenance lines, in display order.
struct Lines(Vec<Provenance>);

impl Lines {
    fn push(&mut self, key: &str, value: String, o: &Origin) {
        self.0.push(Provenance {
            key: key.to_string(),
            value,
            source: o.source.clone(),
            written: o.written.as_ref().map(|w| w.display().to_string()),
        })
    }
}

/// The message for root `r` that is, or lies inside, guard `g`, said at
/// whichever of them was written last (that is the edit to undo).
fn contradiction(
    r: &Sourced<PathBuf>,
    root_name: &str,
    g: &Sourced<PathBuf>,
    guard_name: &str,
) -> String {
    let how = if r.v == g.v { "is also" } else { "is inside" };
    if matches!(g.o.at, At::Floor) {
        // A home secret: the operator's file may lift it, but this line
        // may be an agent's to read.
        let lifts = if g.o.source == HOME_SECRET_SOURCE {
            "no flag"
        } else {
            "no policy"
        };
        format!(
            "{} {how} {guard_name} ({}, {}), which {lifts} can lift; remove the {root_name}",
            r.v.display(),
            g.v.display(),
            g.o.source
        )
    } else if r.o.seq >= g.o.seq {
        format!(
            "{} {how} {guard_name} ({}, {}); remove one of them",
            r.v.display(),
            g.v.display(),
            g.o.source
        )
    } else {
        format!(
            "{} {} a {root_name} ({}, {}); remove one of them",
            g.v.display(),
            if r.v == g.v { "is also" } else { "contains" },
            r.v.display(),
            r.o.source
        )
    }
}
