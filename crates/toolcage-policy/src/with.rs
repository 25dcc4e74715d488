//! Applying toolchain presets (`--with`, `with = [...]`) to the merged
//! layers. Presets add up across layers and apply after all of them, so a
//! later layer that replaces the read roots (`untrusted`) keeps them: a
//! preset composes with any profile.

use super::canon;
use super::entries::{Kind, planted_link, resolve_path};
use super::error::PolicyError;
use super::origin::{Origin, Sourced};
use super::presets::{self, Operator, Preset};
use super::state::State;
use std::path::PathBuf;

impl State {
    /// Add what each preset named in any layer adds, once per preset (the
    /// first layer that names it is its origin). Variables a layer set
    /// explicitly keep their values.
    pub(crate) fn apply_presets(
        &mut self,
        op: &Operator,
        write_bases: &[PathBuf],
    ) -> Result<(), PolicyError> {
        let mut done: Vec<Preset> = Vec::new();
        for w in self.with.clone() {
            if done.contains(&w.v) {
                continue;
            }
            done.push(w.v);
            let o = Origin {
                source: format!("preset {} ({})", w.v.name(), w.o.source),
                ..w.o
            };
            let add = presets::additions(w.v, op);
            let what = format!("preset {}", w.v.name());
            // The preset followed the operator's links itself: none may
            // lie where a call could have planted it.
            for p in &add.via {
                let real = canon::lenient(p);
                if let Some(m) = planted_link(p, &real, write_bases, &what) {
                    return Err(o.error(m));
                }
            }
            for p in &add.read {
                resolve_path(p, Kind::Root, true, &o, &what, write_bases, &mut self.read)?;
            }
            for p in &add.denied {
                resolve_path(p, Kind::Guard, true, &o, &what, &[], &mut self.denied)?;
            }
            for (name, value) in add.env {
                self.env_set.entry(name).or_insert(Sourced {
                    v: value,
                    o: o.clone(),
                });
            }
        }
        Ok(())
    }

    /// The presets in effect, in order, with where each was named first.
    pub(crate) fn presets_named(&self) -> Vec<Sourced<Preset>> {
        let mut out: Vec<Sourced<Preset>> = Vec::new();
        for w in &self.with {
            if !out.iter().any(|v| v.v == w.v) {
                out.push(Sourced {
                    v: w.v,
                    o: w.o.clone(),
                });
            }
        }
        out
    }
}
