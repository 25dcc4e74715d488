//! Domain mode's settings in a layer: `[network] allow`, `deny`,
//! `add_allow`, `add_deny`, `[network.hosts]`, and `--allow-domain`.
//! Lists replace (or, `add_*`, append to) what earlier layers set; pins
//! merge key by key. Each entry remembers its origin for `toolcage policy`.

use super::domains::{DomainPolicy, HostRule, parse_pin};
use super::error::PolicyError;
use super::file::{NetMode, NetworkSection};
use super::hostname::normalize_name;
use super::state::{At, Layer, Origin, Sourced, State, mode_name};
use std::net::IpAddr;

/// The domain-mode part of [`State`].
#[derive(Debug, Clone, Default)]
pub struct DomainState {
    pub allow: Vec<Sourced<HostRule>>,
    pub deny: Vec<Sourced<HostRule>>,
    pub hosts: std::collections::BTreeMap<String, Sourced<IpAddr>>,
}

impl DomainState {
    /// Anything set, and the latest layer that set it.
    pub fn latest(&self) -> Option<&Origin> {
        self.allow
            .iter()
            .chain(&self.deny)
            .map(|e| &e.o)
            .chain(self.hosts.values().map(|e| &e.o))
            .max_by_key(|o| o.seq)
    }

    pub fn policy(&self) -> DomainPolicy {
        DomainPolicy {
            allow: self.allow.iter().map(|e| e.v.clone()).collect(),
            deny: self.deny.iter().map(|e| e.v.clone()).collect(),
            hosts: self.hosts.iter().map(|(k, e)| (k.clone(), e.v)).collect(),
        }
    }
}

fn only_in_domains_mode(
    set_mode: Option<NetMode>,
    o: &Origin,
    what: &str,
) -> Result<(), PolicyError> {
    match set_mode {
        Some(m) if m != NetMode::Domains => Err(o.error(format!(
            "{what} only apply with network.mode = \"domains\" (this file sets mode = \"{}\")",
            mode_name(m)
        ))),
        _ => Ok(()),
    }
}

impl State {
    /// Apply one file layer's domain settings.
    pub fn apply_domains(&mut self, l: &Layer, net: &NetworkSection) -> Result<(), PolicyError> {
        let lists = [
            (&net.allow, "allow", true, true),
            (&net.add_allow, "add_allow", true, false),
            (&net.deny, "deny", false, true),
            (&net.add_deny, "add_deny", false, false),
        ];
        for (list, key, is_allow, replace) in lists {
            let Some(list) = list else { continue };
            let mut entries = Vec::new();
            for (i, s) in list.iter().enumerate() {
                let o = l.origin("network", key, Some(i));
                let v = HostRule::parse(s).map_err(|m| o.error(m))?;
                entries.push(Sourced { v, o });
            }
            if !entries.is_empty() {
                only_in_domains_mode(net.mode, &l.origin("network", key, None), "host patterns")?;
            }
            let target = if is_allow {
                &mut self.domains.allow
            } else {
                &mut self.domains.deny
            };
            if replace {
                *target = entries;
            } else {
                target.extend(entries);
            }
        }
        if let Some(hosts) = &net.hosts {
            for (name, addr) in hosts {
                let mut o = l.origin("network", "hosts", None);
                if let At::File { key, .. } = &mut o.at {
                    key.push(name.clone());
                }
                only_in_domains_mode(net.mode, &o, "[network.hosts] pins")?;
                let n = normalize_name(name).map_err(|m| o.error(m))?;
                let v = parse_pin(addr).map_err(|m| o.error(m))?;
                self.domains.hosts.insert(n, Sourced { v, o });
            }
        }
        Ok(())
    }

    /// `--allow-domain HOST[:PORT]` (repeatable): domains mode, these
    /// hosts added to the allow list.
    pub fn apply_allow_domain(
        &mut self,
        hosts: &[String],
        allow_net: bool,
        seq: usize,
    ) -> Result<(), PolicyError> {
        if hosts.is_empty() {
            return Ok(());
        }
        let o = Origin::flag("--allow-domain", seq);
        if allow_net {
            return Err(o.error(
                "--allow-net gives all network and --allow-domain only the named hosts; pass one of them",
            ));
        }
        for h in hosts {
            let v = HostRule::parse(h).map_err(|m| o.error(m))?;
            self.domains.allow.push(Sourced { v, o: o.clone() });
        }
        // Patterns a file set for another mode do not carry over.
        if self.mode.v != NetMode::Domains {
            self.domains.allow.retain(|e| e.o.seq == seq);
        }
        self.mode = Sourced {
            v: NetMode::Domains,
            o,
        };
        Ok(())
    }

    /// Patterns or pins set for a mode that is not "domains" by a layer at
    /// least as late as the one that chose the mode.
    pub fn check_domains(&self) -> Result<(), PolicyError> {
        if self.mode.v == NetMode::Domains {
            return Ok(());
        }
        match self.domains.latest() {
            Some(o) if o.seq >= self.mode.o.seq => Err(o.error(format!(
                "host patterns and pins only apply with network.mode = \"domains\", but the mode \
                 is \"{}\" ({}); set mode = \"domains\" or remove them",
                mode_name(self.mode.v),
                self.mode.o.source
            ))),
            _ => Ok(()),
        }
    }
}

/// What became of a tool's own `domains` request: (granted, decision, reason).
pub struct DomainsOutcome {
    pub granted: String,
    pub decision: super::requests::Decision,
    pub reason: String,
}

impl State {
    /// A tool asks for `want` hosts only: a domain grant is narrowed to them
    /// (never widened); network "on" becomes domains mode with just them.
    pub fn request_domains(&mut self, tool: &str, want: &[String], seq: usize) -> DomainsOutcome {
        use super::requests::Decision;
        let out = |granted: String, decision, reason: String| DomainsOutcome {
            granted,
            decision,
            reason,
        };
        let shown = |l: &[Sourced<HostRule>]| {
            let v: Vec<String> = l.iter().map(|e| e.v.to_string()).collect();
            format!("[{}]", v.join(", "))
        };
        let mut rules = Vec::new();
        for w in want {
            match HostRule::parse(w) {
                Ok(r) => rules.push(r),
                Err(m) => {
                    return out(
                        shown(&self.domains.allow),
                        Decision::Refused,
                        format!("not a host pattern: {m}"),
                    );
                }
            }
        }
        let src = self.mode.o.source.clone();
        if self.mode.o.is_cli() && matches!(self.mode.v, NetMode::On | NetMode::Domains) {
            let granted = match self.mode.v {
                NetMode::On => "on".to_string(),
                _ => shown(&self.domains.allow),
            };
            return out(granted, Decision::Overridden, format!("{src} wins"));
        }
        let origin = |why: &str| Origin::input(format!("tool {tool} requested it; {why}"), seq);
        match self.mode.v {
            NetMode::On => {
                let o = origin("a tool may always ask for less than network on");
                self.domains.allow = rules
                    .into_iter()
                    .map(|v| Sourced { v, o: o.clone() })
                    .collect();
                self.mode = Sourced {
                    v: NetMode::Domains,
                    o: o.clone(),
                };
                out(
                    shown(&self.domains.allow),
                    Decision::Granted,
                    format!("the policy allows all network ({src}); narrowed to these hosts"),
                )
            }
            NetMode::Domains => {
                let mut policy = self.domains.policy();
                let kept = policy.narrow(&rules);
                let o = origin(&format!("narrowed within the allow list ({src})"));
                self.domains.allow = kept
                    .iter()
                    .map(|v| Sourced {
                        v: v.clone(),
                        o: o.clone(),
                    })
                    .collect();
                let granted = shown(&self.domains.allow);
                let (decision, reason) = if kept.is_empty() {
                    (
                        Decision::Refused,
                        "none of them is in the allow list; the call gets no host at all".into(),
                    )
                } else if kept.len() == rules.len() && kept.iter().all(|k| rules.contains(k)) {
                    (Decision::Granted, "within the allow list".into())
                } else {
                    (
                        Decision::Clamped,
                        "only what the allow list also allows".into(),
                    )
                };
                out(granted, decision, reason)
            }
            NetMode::Off | NetMode::Tcp => out(
                mode_name(self.mode.v).into(),
                Decision::Refused,
                format!(
                    "network is \"{}\" ({src}); a tool's hosts only narrow a grant of network \
                     \"on\" or \"domains\"",
                    mode_name(self.mode.v)
                ),
            ),
        }
    }
}
