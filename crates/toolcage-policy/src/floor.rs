//! The safety floor: entries every grant holds whatever the layers say.
//!
//! - Well-known secrets in `/etc` are denied. `/etc` is a read root of every
//!   shipped profile, and toolcage often runs as root, for whom these files
//!   are readable. They are a separate always-on list rather than entries of
//!   `[fs] denied` in `policies/default.toml`, because a policy that
//!   replaces that list (`denied = [...]`) means "my denied paths instead of
//!   yours", never "let tools read `/etc/shadow`". A root inside one of them
//!   (`--read /etc/ssl/private`) is an error: copy what a tool needs
//!   elsewhere instead.
//! - Credential stores in the operator's homes (`secrets.rs`: `~/.ssh` keys,
//!   `~/.aws`, browser profiles, ...) are denied under every root. The
//!   operator's own `--policy` file lifts one by name (`[fs]
//!   allow_secrets`); no flag does, so no agent can ask for one.
//! - toolcage's own state (every project's audit log, rate limits and
//!   slots) is denied, so no call can read or forge it.
//! - The operator's `--policy FILE`, when it lies inside a write root of
//!   the grant, is protected: a call must not rewrite the policy that the
//!   next call runs under.

use super::canon;
use super::entries::{Kind, expand_glob, resolve_path};
use super::error::PolicyError;
use super::origin::{Origin, Sourced};
use super::paths::within;
use super::secrets::{HOME_SECRETS, SECRETS};
use super::state::State;
use std::path::{Path, PathBuf};

/// The origin label of the secrets.
pub(crate) const SECRET_SOURCE: &str = "built-in secret (always denied)";
/// The origin label of a credential store in the operator's home.
pub(crate) const HOME_SECRET_SOURCE: &str = "home secret (always denied)";
/// The origin label of toolcage's state directory.
pub(crate) const STATE_SOURCE: &str = "toolcage state (audit log, rate limits)";
/// The origin label of an audit log moved by `[audit] path`.
pub(crate) const AUDIT_SOURCE: &str = "toolcage's audit log ([audit] path)";
/// The origin label of a protected `--policy FILE`.
pub(crate) const POLICY_FILE_SOURCE: &str = "--policy file inside a write root";

impl State {
    /// Add the floor. Call after every layer (so the write roots are
    /// final) and before [`State::finish`], which checks that no root lies
    /// inside a denied or protected path.
    pub(crate) fn add_floor(
        &mut self,
        state_base: &Path,
        policy_file: Option<&Path>,
    ) -> Result<(), PolicyError> {
        let secret = Origin::floor(SECRET_SOURCE);
        for (raw, _) in SECRETS {
            let p = Path::new(raw);
            let mut found = Vec::new();
            if raw.contains('*') {
                expand_glob(p, &secret, &mut found);
            } else if canon::exists_nofollow(p) {
                // Only what exists: the grant is resolved again for every
                // call, and `toolcage policy` stays readable.
                resolve_path(p, Kind::Guard, true, &secret, "", &[], &mut found)?;
            }
            self.denied.extend(found);
        }
        self.deny_home_secrets()?;
        let state = Origin::floor(STATE_SOURCE);
        resolve_path(
            state_base,
            Kind::Guard,
            true,
            &state,
            "",
            &[],
            &mut self.denied,
        )?;
        if let Some(file) = policy_file {
            let o = Origin::floor(POLICY_FILE_SOURCE);
            for p in policy_file_names(file) {
                if self.inside_write_root(&p) && !self.protected.iter().any(|e| e.v == p) {
                    self.protected.push(Sourced { v: p, o: o.clone() });
                }
            }
        }
        Ok(())
    }

    /// An audit log moved by `[audit] path` out of the state directory:
    /// denied like the state itself, so no call reads another call's
    /// records (inside a write root the log is refused elsewhere). Only
    /// once it exists: the grant is resolved again for every call.
    pub(crate) fn deny_audit_log(&mut self, path: &Path) -> Result<(), PolicyError> {
        if !canon::exists_nofollow(path) {
            return Ok(());
        }
        let o = Origin::floor(AUDIT_SOURCE);
        let mut found = Vec::new();
        resolve_path(path, Kind::Guard, true, &o, "", &[], &mut found)?;
        for f in found {
            if !self.denied.iter().any(|d| d.v == f.v) {
                self.denied.push(f);
            }
        }
        Ok(())
    }

    /// The credential stores of each home ([`HOME_SECRETS`]) that exist,
    /// but those `[fs] allow_secrets` lifts. Only for a home that a root
    /// reaches into (or holds): elsewhere the call cannot see them, and
    /// the common grant pays no lookups.
    fn deny_home_secrets(&mut self) -> Result<(), PolicyError> {
        let o = Origin::floor(HOME_SECRET_SOURCE);
        let homes = self.homes.clone();
        for home in &homes {
            let reached = self
                .read
                .iter()
                .chain(&self.write)
                .any(|r| within(&r.v, home) || within(home, &r.v));
            if !reached {
                continue;
            }
            for secret in HOME_SECRETS {
                let name = secret.name();
                if self.allow_secrets.iter().any(|a| a.v == name) {
                    continue;
                }
                let mut found = Vec::new();
                for p in secret.existing(home) {
                    resolve_path(&p, Kind::Guard, true, &o, "", &[], &mut found)?;
                }
                for f in found {
                    if !self.denied.iter().any(|d| d.v == f.v) {
                        self.denied.push(f);
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether `p` lies inside a write root (`/dev/null` contains nothing).
    fn inside_write_root(&self, p: &Path) -> bool {
        self.write
            .iter()
            .any(|r| r.v.as_os_str() != "/dev/null" && within(p, &r.v))
    }
}

/// The names under which a policy file can be changed: its canonical path
/// and, when it is a symlink, the link itself (replacing the link changes
/// the policy too).
fn policy_file_names(file: &Path) -> Vec<PathBuf> {
    let canonical = canon::lenient(file);
    let mut names = vec![canonical.clone()];
    if canon::is_symlink(file) {
        let link = canon::lenient(file.parent().unwrap_or(file))
            .join(file.file_name().unwrap_or_default());
        if link != canonical {
            names.push(link);
        }
    }
    names
}
