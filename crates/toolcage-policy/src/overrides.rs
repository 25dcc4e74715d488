//! The CLI flags ([`Overrides`]): the last layer, applied after every file,
//! so a flag always wins over what the files say.

use super::entries::{Kind, resolve_path};
use super::error::PolicyError;
use super::file::NetMode;
use super::grant::{Enforcement, NamespaceFree};
use super::layer::{check_env_name, nonzero};
use super::origin::{Origin, Sourced};
use super::paths::{Vars, expand};
use super::presets::Preset;
use super::state::{State, val};
use std::path::{Path, PathBuf};
use toolcage_text::units::parse_duration;

/// What the CLI flags say. The last layer: these always win over files.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    /// `--allow-net`: network on.
    pub allow_net: bool,
    /// `--allow-domain HOST[:PORT]`: domains mode with these hosts allowed.
    pub allow_domain: Vec<String>,
    /// `--with PRESET`: toolchain presets (rust, node, python).
    pub with: Vec<String>,
    /// `--read PATH`: extra read roots (relative to the cwd; must exist).
    pub read: Vec<PathBuf>,
    /// `--write PATH`: extra write roots (relative to the cwd; must exist).
    pub write: Vec<PathBuf>,
    /// `--env NAME` passes NAME through (`PREFIX*` allowed); `--env NAME=VALUE` sets it.
    pub env: Vec<String>,
    /// `--timeout DUR`.
    pub timeout: Option<String>,
    /// `--allow-degraded`: enforcement = degraded.
    pub allow_degraded: bool,
}

impl State {
    /// Apply the CLI flags (paths relative to `cwd`).
    pub(crate) fn apply_cli(
        &mut self,
        cli: &Overrides,
        vars: &Vars,
        cwd: &Path,
        seq: usize,
    ) -> Result<(), PolicyError> {
        if cli.allow_net {
            self.mode = val(NetMode::On, &Origin::flag("--allow-net", seq));
        }
        self.apply_allow_domain(&cli.allow_domain, cli.allow_net, seq)?;
        for name in &cli.with {
            let o = Origin::flag("--with", seq);
            let v = Preset::parse(name).map_err(|m| o.error(m))?;
            self.with.push(Sourced { v, o });
        }
        self.flag_roots(cli, vars, cwd, seq)?;
        self.flag_env(&cli.env, seq)?;
        if let Some(t) = &cli.timeout {
            let o = Origin::flag("--timeout", seq);
            let d = parse_duration(t).map_err(|m| o.error(m))?;
            self.timeout = val(nonzero(d, &o, "")?, &o);
        }
        if cli.allow_degraded {
            self.allow_degraded(seq)?;
        }
        Ok(())
    }

    /// `--read` and `--write`: roots added to the files' (they must exist).
    fn flag_roots(
        &mut self,
        cli: &Overrides,
        vars: &Vars,
        cwd: &Path,
        seq: usize,
    ) -> Result<(), PolicyError> {
        for (list, flag) in [(&cli.read, "--read"), (&cli.write, "--write")] {
            let o = Origin::flag(flag, seq);
            let mut entries = Vec::new();
            for p in list {
                let raw = p
                    .to_str()
                    .ok_or_else(|| o.error(format!("{} is not UTF-8", p.display())))?;
                let p = expand(raw, vars, cwd).map_err(|m| o.error(m))?;
                resolve_path(
                    &p,
                    Kind::Root,
                    false,
                    &o,
                    flag,
                    vars.write_bases,
                    &mut entries,
                )?;
            }
            if flag == "--write" {
                self.write.extend(entries);
            } else {
                self.read.extend(entries);
            }
        }
        Ok(())
    }

    /// `--env NAME=VALUE` sets a variable, `--env NAME` passes it through.
    fn flag_env(&mut self, specs: &[String], seq: usize) -> Result<(), PolicyError> {
        for spec in specs {
            let o = Origin::flag("--env", seq);
            if let Some((name, value)) = spec.split_once('=') {
                check_env_name(name, false).map_err(|m| o.error(m))?;
                self.env_set.insert(
                    name.to_string(),
                    Sourced {
                        v: value.to_string(),
                        o,
                    },
                );
            } else {
                check_env_name(spec, true).map_err(|m| o.error(m))?;
                self.env_allow.push(Sourced { v: spec.clone(), o });
            }
        }
        Ok(())
    }

    /// `--allow-degraded`: never over a policy that asks for strict
    /// enforcement, which the flag would silently waive.
    fn allow_degraded(&mut self, seq: usize) -> Result<(), PolicyError> {
        if self.enforcement.v == Enforcement::Strict {
            return Err(Origin::flag("--allow-degraded", seq).error(format!(
                "{} asks for strict enforcement (refuse any degradation); \
                 --allow-degraded would silently waive it. Drop the flag, or use \
                 --profile default --allow-degraded to run degraded on purpose",
                self.enforcement.o.source
            )));
        }
        let o = Origin::flag("--allow-degraded", seq);
        self.namespace_free = val(NamespaceFree::Allow, &o);
        self.enforcement = val(Enforcement::Degraded, &o);
        Ok(())
    }
}
