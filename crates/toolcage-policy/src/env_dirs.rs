//! Explicit `TMPDIR`, `TMP`, `TEMP` and `HOME` values (`--env NAME=VALUE`,
//! `--env NAME` passing the operator's value, `[env] set` or an `allow`
//! entry naming the variable): the sandbox uses them instead of the call's
//! private tmp, so they must name a place the call can use. A temp dir
//! must be writable, a home readable; otherwise resolution fails here with
//! the reason and the fix, instead of the call failing later.

use super::error::PolicyError;
use super::grant::Grant;
use super::home::never_offered;
use super::origin::Origin;
use super::paths::{canonical_lenient, normalize};
use super::presets::HostEnv;
use super::state::State;
use std::path::Path;

/// The call's private tmpfs inside its constructed root (`TMPDIR`, `HOME`).
pub const PRIVATE_TMP: &str = "/tmp";
/// The variables that name the temp directory.
pub const TMP_VARS: &[&str] = &["TMPDIR", "TMP", "TEMP"];

impl State {
    /// Refuse an explicit temp dir the grant cannot write, or an explicit
    /// home it cannot read. Call after every layer, preset and the floor.
    pub(crate) fn check_env_dirs(&self, host: &HostEnv) -> Result<(), PolicyError> {
        for &name in TMP_VARS.iter().chain(&["HOME"]) {
            let Some((value, passed, o)) = self.explicit(name, host) else {
                continue;
            };
            let shown = if passed {
                format!("{name} (passed through: {value})")
            } else {
                format!("{name}={value}")
            };
            let path = normalize(Path::new(&value));
            if self.private_tmp.v && path == Path::new(PRIVATE_TMP) {
                continue; // the call's own tmp
            }
            if !path.is_absolute() {
                return Err(o.error(format!(
                    "{shown}: not an absolute path (fix: give an absolute path, or leave \
                     {name} unset: the call then gets its private tmp)"
                )));
            }
            let real = canonical_lenient(&path);
            let tmp = name != "HOME";
            let problem = if tmp {
                self.cannot_write(&real)
            } else {
                self.cannot_read(&real)
            };
            if let Some(why) = problem {
                let (flag, role) = if tmp {
                    ("--write", "the call's temp directory")
                } else {
                    ("--read", "the call's home")
                };
                // A denied or protected path cannot be granted by a flag:
                // offering one would send the user round in a loop.
                // Nor one that grants the operator's home, a secret or a
                // system directory: an agent may read this line.
                let offered = never_offered(&real, &self.homes, tmp).is_none();
                let first = match (why.starts_with("no "), offered) {
                    (true, true) => format!("{flag} {}", path.display()),
                    (true, false) => format!("give {name} a directory a root of the grant holds"),
                    (false, _) => {
                        format!("give {name} a directory that is not denied or protected")
                    }
                };
                return Err(o.error(format!(
                    "{shown}: {why}, so it cannot be {role} (fix: {first}, or leave {name} \
                     unset: the call then gets its private tmp)"
                )));
            }
        }
        Ok(())
    }

    /// The explicit value of `name`, whether it is the operator's passed
    /// through, and where it was asked for.
    fn explicit(&self, name: &str, host: &HostEnv) -> Option<(String, bool, Origin)> {
        if let Some(e) = self.env_set.get(name) {
            return Some((e.v.clone(), false, e.o.clone()));
        }
        let e = self.env_allow.iter().rev().find(|e| e.v == name)?;
        Some((host.get(name)?.to_string(), true, e.o.clone()))
    }

    fn cannot_write(&self, p: &Path) -> Option<String> {
        let writable = self
            .write
            .iter()
            .any(|r| r.v.as_os_str() != "/dev/null" && p.starts_with(&r.v));
        if !writable {
            return Some("no write root of the grant holds it".into());
        }
        self.guarded(p).or_else(|| {
            self.protected
                .iter()
                .find(|g| p.starts_with(&g.v))
                .map(|g| format!("it is protected ({}, {})", g.v.display(), g.o.source))
        })
    }

    fn cannot_read(&self, p: &Path) -> Option<String> {
        let readable = self
            .read
            .iter()
            .chain(&self.write)
            .any(|r| p.starts_with(&r.v));
        if !readable {
            return Some("no read or write root of the grant holds it".into());
        }
        self.guarded(p)
    }

    fn guarded(&self, p: &Path) -> Option<String> {
        self.denied
            .iter()
            .find(|g| p.starts_with(&g.v))
            .map(|g| format!("it is denied ({}, {})", g.v.display(), g.o.source))
    }
}

/// Whether the sandbox keeps the value of `name` instead of the private
/// tmp: it was set or passed through by name (checked by
/// `State::check_env_dirs`).
pub fn is_explicit(grant: &Grant, name: &str) -> bool {
    grant.env_set.contains_key(name) || grant.env_allow.iter().any(|a| a == name)
}
