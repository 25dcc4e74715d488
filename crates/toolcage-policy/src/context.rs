//! The places a policy's variables and relative paths refer to
//! ([`Context`]): the project, the operator's homes, tmp, the working
//! directory and the operator's variables.

use super::canon;
use super::home::{homes_of, login_home, project_refusal};
use super::paths::{normalize, state_base};
use super::presets::{HostEnv, Operator};
use std::path::{Path, PathBuf};

/// The places path variables and relative paths refer to.
#[derive(Debug, Clone)]
pub struct Context {
    /// The project root (absolute). `{project}`; base of relative policy paths.
    pub project: PathBuf,
    /// `{home}`: `$HOME`.
    pub home: PathBuf,
    /// The home of the real user's passwd entry (`/root` as root): with
    /// `home`, where the home secrets are denied and what may not be the
    /// project (`Context::homes`).
    pub login_home: Option<PathBuf>,
    /// `{tmp}`: the system temp directory (not the per-call private one).
    pub tmp: PathBuf,
    /// Base of relative CLI paths (`--read`, `--write`, `--policy`).
    pub cwd: PathBuf,
    /// `$XDG_STATE_HOME` as found (`None` when unset): with `home`, where
    /// toolcage keeps its own state ([`Context::state_base`]).
    pub xdg_state_home: Option<PathBuf>,
    /// The operator's variables that presets, the call's PATH and explicit
    /// `TMPDIR`/`HOME` values are resolved from.
    pub env: HostEnv,
    /// Whether the project's `tools/` holds A3S tool files (`{a3s_tools}`):
    /// discover's rule, given by the caller so that policy does not depend
    /// on it.
    pub holds_a3s_tools: fn(&Path) -> bool,
}

impl Context {
    /// The context of this process: `project` relative to the current
    /// directory, `$HOME`, `$XDG_STATE_HOME` and the system temp directory.
    pub fn detect(project: &Path, holds_a3s_tools: fn(&Path) -> bool) -> std::io::Result<Context> {
        let cwd = std::env::current_dir()?;
        let home =
            std::env::var_os("HOME").map_or_else(|| PathBuf::from("/nonexistent"), PathBuf::from);
        Ok(Context {
            project: normalize(&cwd.join(project)),
            home,
            login_home: login_home(),
            tmp: std::env::temp_dir(),
            cwd,
            xdg_state_home: std::env::var_os("XDG_STATE_HOME").map(PathBuf::from),
            env: HostEnv::capture(),
            holds_a3s_tools,
        })
    }

    /// The base of toolcage's own state (audit logs, rate limits, slots):
    /// denied in every grant, and where the gate keeps each project's state.
    pub fn state_base(&self) -> PathBuf {
        state_base(self.xdg_state_home.as_deref(), &self.home)
    }

    /// The operator's homes: `$HOME` and the passwd entry's, symlinks
    /// resolved, once each.
    pub(crate) fn homes(&self) -> Vec<PathBuf> {
        let mut c: Vec<&Path> = vec![&self.home];
        c.extend(self.login_home.as_deref());
        homes_of(&c)
    }

    /// Why the project may not be the project (the root directory, a
    /// home or what holds one), unless `allow_home_project` says so.
    pub fn project_refusal(&self) -> Option<String> {
        project_refusal(&canon::lenient(&self.project), &self.homes())
    }

    /// The operator as toolchain presets see them.
    pub fn operator(&self) -> Operator<'_> {
        Operator {
            home: &self.home,
            env: &self.env,
        }
    }
}
