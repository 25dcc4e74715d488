//! Why a command could not be run at all ([`SandboxError`]).

use std::path::{Path, PathBuf};

/// Why a command could not be run at all.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("{0}: command not found")]
    NotFound(String),
    #[error("{program}: cannot execute: {reason}")]
    CannotExecute { program: String, reason: String },
    /// The program (found on PATH or named by path) resolves, through its
    /// symlinks, to a file the grant does not let the call read.
    #[error("{}", outside_message(.program, .found, .resolved, None))]
    OutsideGrant {
        program: String,
        /// The path the program was found at.
        found: PathBuf,
        /// Where its symlinks lead.
        resolved: PathBuf,
    },
    #[error("the kernel cannot enforce this policy: {0} (pass --allow-degraded to run anyway)")]
    NotEnforceable(String),
    #[error("sandbox setup failed at {stage}: {source}")]
    Setup {
        stage: &'static str,
        source: std::io::Error,
    },
    #[error("{0}")]
    Prepare(String),
    /// The grant's policy refuses the only mode this host offers.
    #[error("{0}")]
    Refused(String),
}

/// What kind of failure a [`SandboxError`] is (the CLI maps kinds to exit
/// statuses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxErrorKind {
    /// The program does not exist.
    NotFound,
    /// The program exists but cannot be executed.
    CannotExecute,
    /// toolcage's own failure: the policy cannot be enforced, setup failed.
    Setup,
}

impl SandboxError {
    pub fn kind(&self) -> SandboxErrorKind {
        match self {
            SandboxError::NotFound(_) => SandboxErrorKind::NotFound,
            SandboxError::CannotExecute { .. } | SandboxError::OutsideGrant { .. } => {
                SandboxErrorKind::CannotExecute
            }
            _ => SandboxErrorKind::Setup,
        }
    }
}

/// `prog: cannot execute: FOUND resolves to RESOLVED, outside ... (fix: FIX)`;
/// the fix defaults to reading the resolved file's directory.
pub fn outside_message(program: &str, found: &Path, resolved: &Path, fix: Option<&str>) -> String {
    let fix = fix.map_or_else(
        || {
            let dir = resolved.parent().unwrap_or(resolved);
            // Never `--read /` or of a secret, in text an agent reads.
            match toolcage_policy::never_offered(dir, &[], false) {
                Some(why) => format!("none offered: {why}"),
                None => format!("--read {}", dir.display()),
            }
        },
        str::to_string,
    );
    let what = if found == resolved {
        format!("{} is", found.display())
    } else {
        format!(
            "{} resolves to {}, which is",
            found.display(),
            resolved.display()
        )
    };
    format!("{program}: cannot execute: {what} outside the policy's read roots (fix: {fix})")
}
