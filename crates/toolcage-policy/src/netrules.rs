//! Domain mode's settings in a layer: `[network] allow`, `deny`,
//! `add_allow`, `add_deny`, `[network.hosts]`, and `--allow-domain`.
//! Lists replace (or, `add_*`, append to) what earlier layers set; pins
//! merge key by key. Each entry remembers its origin for `toolcage policy`.

use super::domains::{HostRule, parse_pin};
use super::error::PolicyError;
use super::file::{NetMode, NetworkSection};
use super::hostname::normalize_name;
use super::origin::{At, Layer, Origin, Sourced};
use super::state::{State, mode_name};

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
    pub(crate) fn apply_domains(
        &mut self,
        l: &Layer,
        net: &NetworkSection,
    ) -> Result<(), PolicyError> {
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
    pub(crate) fn apply_allow_domain(
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
    pub(crate) fn check_domains(&self) -> Result<(), PolicyError> {
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
