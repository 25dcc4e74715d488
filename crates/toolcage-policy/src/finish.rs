//! The last step of resolution: contradiction checks, the [`Grant`], and
//! the provenance lines.

use super::error::PolicyError;
use super::file::NetMode;
use super::grant::{ApprovalMode, Grant, Limits, Network, OutputCaps, RateLimit};
use super::paths::within;
use super::resolve::Provenance;
use super::state::{At, Origin, Sourced, State, dedup, dedup_by, enum_name, mode_name};
use super::units::{format_duration, format_size};
use std::path::PathBuf;
use std::time::Duration;

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
    pub fn finish(mut self, project: PathBuf) -> Result<(Grant, Vec<Provenance>), PolicyError> {
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

        let network = match self.mode.v {
            NetMode::Off => Network::Off,
            NetMode::On => Network::On,
            NetMode::Tcp => Network::Tcp {
                connect: self.connect.v.clone(),
                bind: self.bind.v.clone(),
            },
            NetMode::Domains => Network::Domains(self.domains.policy()),
        };
        let rate_limit = match (&self.rl_requests, &self.rl_window) {
            (Some(r), w) => Some(RateLimit {
                requests: r.v,
                window: w.as_ref().map_or(Duration::from_secs(60), |w| w.v),
            }),
            (None, Some(w)) => {
                return Err(w
                    .o
                    .error("a window without rate_limit.requests (add requests = N)"));
            }
            (None, None) => None,
        };
        let paths = |l: &[Sourced<PathBuf>]| l.iter().map(|e| e.v.clone()).collect::<Vec<_>>();
        let grant = Grant {
            project,
            read: paths(&self.read),
            write: paths(&self.write),
            protected: paths(&self.protected),
            denied: paths(&self.denied),
            network,
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
            namespace_free: crate::NamespaceFreePolicy {
                mode: self.namespace_free.v,
                accepts: self.namespace_free_accepts.v.clone(),
            },
            approval: self.approval.v,
            allow_yes: self
                .allow_yes
                .as_ref()
                .map_or(self.approval.v != ApprovalMode::Always, |v| v.v),
            rate_limit,
            concurrent: self.concurrent.as_ref().map(|c| c.v),
            homes: self.homes.clone(),
            session_writes: Vec::new(),
        };
        let prov = self.provenance(&grant);
        Ok((grant, prov))
    }

    fn check_contradictions(&self) -> Result<(), PolicyError> {
        let pairs = [
            (&self.write, "write root", &self.denied, "denied"),
            (&self.read, "read root", &self.denied, "denied"),
            (&self.write, "write root", &self.protected, "protected"),
        ];
        for (roots, root_name, guards, guard_name) in pairs {
            for r in roots {
                for g in guards {
                    if !within(&r.v, &g.v) {
                        continue;
                    }
                    let how = if r.v == g.v { "is also" } else { "is inside" };
                    // Report at whichever was written last: that is the edit to undo.
                    let msg = if matches!(g.o.at, At::Floor) {
                        // A home secret: the operator's file may lift it,
                        // but this line may be an agent's to read.
                        let lifts = if g.o.source == super::floor::HOME_SECRET_SOURCE {
                            "no flag"
                        } else {
                            "no policy"
                        };
                        format!(
                            "{} {how} {guard_name} ({}, {}), which {lifts} can lift; \
                             remove the {root_name}",
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
                    };
                    let o = if r.o.seq >= g.o.seq { &r.o } else { &g.o };
                    return Err(o.error(msg));
                }
            }
        }
        // The call's private /tmp is mounted over /tmp: a root that is /tmp
        // itself would be hidden by it (and a project beneath it with it).
        if self.private_tmp.v {
            for (roots, name) in [(&self.write, "write root"), (&self.read, "read root")] {
                if let Some(r) = roots.iter().find(|r| r.v == std::path::Path::new("/tmp")) {
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

    fn provenance(&self, g: &Grant) -> Vec<Provenance> {
        let mut out = Vec::new();
        let mut push = |key: &str, value: String, o: &Origin| {
            out.push(Provenance {
                key: key.to_string(),
                value,
                source: o.source.clone(),
                written: o.written.as_ref().map(|w| w.display().to_string()),
            })
        };
        for w in self.presets_named() {
            push("with", w.v.name().to_string(), &w.o);
        }
        for (key, list) in [
            ("read", &self.read),
            ("write", &self.write),
            ("protected", &self.protected),
            ("denied", &self.denied),
        ] {
            for e in list {
                push(key, e.v.display().to_string(), &e.o);
            }
        }
        for e in &self.allow_secrets {
            push("allow_secrets", e.v.clone(), &e.o);
        }
        for (key, e) in &self.not_guarded {
            push(&format!("not_{key}"), e.v.display().to_string(), &e.o);
        }
        push(
            "private_tmp",
            g.private_tmp.to_string(),
            &self.private_tmp.o,
        );
        let net = match &g.network {
            Network::Off => "off".to_string(),
            Network::On => "on".to_string(),
            Network::Tcp { connect, bind } => format!("tcp connect {connect:?} bind {bind:?}"),
            Network::Domains(_) => "domains".to_string(),
        };
        push("network", net, &self.mode.o);
        if matches!(g.network, Network::Domains(_)) {
            for e in &self.domains.allow {
                push("network.allow", e.v.to_string(), &e.o);
            }
            for e in &self.domains.deny {
                push("network.deny", e.v.to_string(), &e.o);
            }
            for (name, e) in &self.domains.hosts {
                push("network.hosts", format!("{name} = {}", e.v), &e.o);
            }
        }
        for e in &self.env_allow {
            push("env.allow", e.v.clone(), &e.o);
        }
        for (k, e) in &self.env_set {
            push("env.set", format!("{k}={}", e.v), &e.o);
        }
        push("timeout", format_duration(g.timeout), &self.timeout.o);
        push(
            "kill_grace",
            format_duration(g.kill_grace),
            &self.kill_grace.o,
        );
        let lim = |v: Option<u64>, f: fn(u64) -> String| v.map_or("unlimited".to_string(), f);
        push(
            "address_space",
            lim(g.limits.address_space, format_size),
            &self.address_space.o,
        );
        push(
            "cpu",
            lim(g.limits.cpu_seconds, |s| {
                format_duration(Duration::from_secs(s))
            }),
            &self.cpu.o,
        );
        push(
            "processes",
            lim(g.limits.processes, |n| n.to_string()),
            &self.processes.o,
        );
        push(
            "file_size",
            lim(g.limits.file_size, format_size),
            &self.file_size.o,
        );
        push(
            "open_files",
            lim(g.limits.open_files, |n| n.to_string()),
            &self.open_files.o,
        );
        push("tmp", format_size(g.limits.tmp), &self.tmp.o);
        push(
            "stdout",
            format_size(g.output.stdout as u64),
            &self.stdout.o,
        );
        push(
            "stderr",
            format_size(g.output.stderr as u64),
            &self.stderr.o,
        );
        push(
            "enforcement",
            enum_name(&g.enforcement),
            &self.enforcement.o,
        );
        push(
            "namespace_free",
            enum_name(&g.namespace_free.mode),
            &self.namespace_free.o,
        );
        push(
            "namespace_free_accepts",
            format!("[{}]", g.namespace_free.accepts.join(", ")),
            &self.namespace_free_accepts.o,
        );
        push("approval", enum_name(&g.approval), &self.approval.o);
        let default = Origin::input(
            "built-in (false for approval mode always, true otherwise)".into(),
            0,
        );
        push(
            "approval.allow_yes",
            g.allow_yes.to_string(),
            self.allow_yes.as_ref().map_or(&default, |v| &v.o),
        );
        match (&g.rate_limit, &self.rl_requests) {
            (Some(r), Some(v)) => push(
                "rate_limit",
                format!("{} per {}", r.requests, format_duration(r.window)),
                &v.o,
            ),
            _ => push(
                "rate_limit",
                "none".into(),
                &Origin::input("built-in".into(), 0),
            ),
        }
        let none = Origin::input("built-in".into(), 0);
        push(
            "concurrent",
            g.concurrent.map_or("unlimited".into(), |n| n.to_string()),
            self.concurrent.as_ref().map_or(&none, |v| &v.o),
        );
        push(
            "requests.network",
            self.req_network.v.to_string(),
            &self.req_network.o,
        );
        push(
            "requests.max_timeout",
            format_duration(self.max_timeout.v),
            &self.max_timeout.o,
        );
        out
    }
}
