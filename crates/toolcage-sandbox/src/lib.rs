//! The sandbox: the only module with `unsafe` and raw syscalls.
//!
//! [`run`] takes a [`Grant`] and a [`Command`] and returns an [`Outcome`]:
//! exit status, capped stdout/stderr with truncation counts, duration and
//! the enforcement report. See docs/sandbox.md for the mechanics.
//!
//! The public face, all the top crate, its tests and benches use:
//! [`run`] with [`Command`], [`Outcome`] and what it holds ([`Exit`],
//! [`Captured`], [`EnforcementReport`], [`Denial`], ...), [`SandboxError`]
//! and [`CancelToken`]; the host probe and the mode decision for `toolcage
//! doctor` ([`probe`], [`mode`], [`kernel_abi`]); capped output
//! ([`output`]); the script runner's bytecode load and its own filter
//! ([`script`]); a terminal's exclusive flag ([`tty`]); the network
//! namespace made ahead ([`network_namespace_ahead`],
//! [`keep_network_namespace_ready`]) and the private files directory
//! ([`private_files_dir`]). Everything else is `pub(crate)`. What runs in
//! toolcage's process for the call and reads its bytes (the domain proxy,
//! the denial inference, the audit reader) is the broker crate's.
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(unsafe_op_in_unsafe_fn)]

mod bpf;
mod child;
mod env;
mod init_guard;
mod isolation;
mod landlock;
mod landlock_abi;
mod limits;
pub mod mode;
mod namespace_free;
mod netns;
pub mod output;
pub mod pool;
pub mod probe;
mod program;
mod proxy;
mod quarantine;
mod report;
mod restore;
mod root_open;
mod rootfs;
mod runtime_dir;
pub mod script;
mod seccomp;
mod spawn;
mod steps;
mod supervise;
pub mod tty;

pub(crate) use env::build_env;
pub use landlock_abi::kernel_abi;
pub use netns::ahead as network_namespace_ahead;
pub use netns::keep_ready as keep_network_namespace_ready;
pub use output::Captured;
pub use report::{Degradation, EnforcementReport, LandlockReport, LandlockStatus};
pub use runtime_dir::private_files_dir;
pub use spawn::run;
pub use supervise::CancelToken;
pub use toolcage_broker::Denial;

use serde::Serialize;
// What the broker does for a call, under the names the call's path uses.
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toolcage_broker::{inferred, landlock_log};

/// What to run, and where: in `cwd`, a directory inside the grant's
/// project, or the project itself.
#[derive(Debug, Clone, Default)]
pub struct Command {
    /// Program and arguments; a program without `/` is looked up in the
    /// sandbox's `PATH`, a relative path is taken from the project.
    pub argv: Vec<OsString>,
    /// Variables set for this call on top of the grant's environment.
    pub env: BTreeMap<String, String>,
    /// Written to the child's stdin, then closed.
    pub stdin: Vec<u8>,
    /// Extra paths readable for this call only (e.g. a parameters file).
    pub extra_read: Vec<PathBuf>,
    /// Give the child toolcage's own stdin/stdout/stderr instead of pipes
    /// (`toolcage exec`): output streams live and is not captured or capped.
    pub inherit_stdio: bool,
    /// With `inherit_stdio`: the child's stderr goes through a pipe that
    /// toolcage copies to its own stderr as it comes, keeping the last
    /// 64 KiB to infer denials from (`toolcage exec --explain`).
    pub tee_stderr: bool,
    /// `--explain`: the call's Landlock domain logs what it refuses, and
    /// where the audit log can be read (root, audit enabled) those records
    /// become exact denials (`landlock_log.rs`).
    pub explain: bool,
    /// Give the child these descriptors as its stdin, stdout and stderr (a
    /// long-lived service such as an upstream MCP server, whose caller
    /// speaks to it over them): nothing is captured or capped, and `stdin`
    /// is not written. The caller keeps them open until [`run`] returns.
    pub stdio_fds: Option<[std::os::fd::RawFd; 3]>,
    /// Sent the enforcement report once the program has started (a
    /// long-lived service reports what confines it while it runs).
    pub report_to: Option<std::sync::mpsc::SyncSender<EnforcementReport>>,
    /// The working directory: a directory inside the grant's project
    /// (`toolcage exec` run from a subdirectory); `None` is the project.
    /// A relative program path is taken from it.
    pub cwd: Option<PathBuf>,
}

/// How the child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Exit {
    Code(i32),
    Signal(i32),
    /// Killed because the grant's timeout expired.
    Timeout,
    /// Killed because the caller cancelled the call.
    Cancelled,
}

impl Exit {
    /// The shell convention: the code, 128+N for signal N, 124 on timeout.
    pub fn shell_status(self) -> i32 {
        match self {
            Exit::Code(c) => c,
            Exit::Signal(s) => 128 + s,
            Exit::Timeout => 124,
            Exit::Cancelled => 130,
        }
    }

    pub fn success(self) -> bool {
        self == Exit::Code(0)
    }
}

/// The result of one sandboxed run.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub exit: Exit,
    pub stdout: Captured,
    pub stderr: Captured,
    #[serde(serialize_with = "ser_secs")]
    pub duration: Duration,
    pub enforcement: EnforcementReport,
    /// Protected paths the call created, protected symlinks it replaced or
    /// removed, and protected or denied paths inside its write roots whose
    /// identity changed (a path the call cannot reach is not its doing and
    /// is not listed).
    pub created_protected: Vec<PathBuf>,
    /// What toolcage undid after the call: a protected path that did not
    /// exist stays absent (what the call created there is moved into a
    /// fresh directory beside it), and a replaced protected symlink is put
    /// back.
    pub quarantined: Vec<Quarantined>,
    /// Namespace-free mode: protected paths the call changed or removed,
    /// restored from the copy taken before the call.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub restored: Vec<PathBuf>,
    /// What the call left inside a protected directory (namespace-free
    /// mode), or created at a protected path that could not be moved
    /// aside: removed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<PathBuf>,
    /// What toolcage could not undo: the call's result is an error
    /// (`toolcage exec` and `call` exit 125), each with the reason.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unrestorable: Vec<Unrestorable>,
    /// Namespace-free mode: protected trees with more entries than toolcage
    /// walks; the parts that decide what runs later (a `.git`'s config,
    /// hooks and info) were checked whole, the rest only up to the limit.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unchecked: Vec<PathBuf>,
    /// What the call was refused (domain mode: every host its proxy or DNS
    /// stub turned away).
    pub denials: Vec<Denial>,
}

/// A path the call created where a protected path was absent, moved aside.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Quarantined {
    pub path: PathBuf,
    pub moved_to: PathBuf,
}

/// A protected path the call changed that toolcage could not put back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unrestorable {
    pub path: PathBuf,
    /// Why, in a few words (`no copy: over 4 MiB`, an errno).
    pub reason: String,
}

impl Outcome {
    /// One line per protected path the call (`who`: "call", "command")
    /// created or replaced, saying what toolcage undid.
    pub fn protected_notes(&self, who: &str) -> Vec<String> {
        let restored = self.restored.iter().map(|p| {
            format!(
                "the {who} changed protected path {}; restored it",
                p.display()
            )
        });
        let removed = self
            .removed
            .iter()
            .filter(|p| !self.created_protected.contains(p))
            .map(|p| {
                format!(
                    "the {who} left {} inside a protected directory; removed it",
                    p.display()
                )
            });
        let unrestorable = self.unrestorable.iter().map(|u| {
            format!(
                "the {who} changed protected path {}, which toolcage could not undo ({}): check it",
                u.path.display(),
                u.reason
            )
        });
        let unchecked = self.unchecked.iter().map(|p| {
            format!(
                "protected tree {} is too large to check whole: its hooks and config were \
                 guarded, the rest only in part",
                p.display()
            )
        });
        self.created_protected
            .iter()
            .map(|p| match self.quarantined.iter().find(|q| &q.path == p) {
                Some(q) => format!(
                    "the {who} created protected path {}; moved it aside to {}",
                    p.display(),
                    q.moved_to.display()
                ),
                None if self.removed.contains(p) => {
                    format!(
                        "the {who} created protected path {}; removed it",
                        p.display()
                    )
                }
                None => format!(
                    "the {who} created or replaced protected path {}",
                    p.display()
                ),
            })
            .chain(restored)
            .chain(removed)
            .chain(unrestorable)
            .chain(unchecked)
            .collect()
    }

    /// Why the call's result is an error although the command ran: a change
    /// to a protected path that toolcage could not undo. `None` when every
    /// change was undone.
    pub fn not_undone(&self) -> Option<String> {
        let first = self.unrestorable.first()?;
        let more = match self.unrestorable.len() {
            1 => String::new(),
            n => format!(" and {} more", n - 1),
        };
        Some(format!(
            "the call changed protected path {}{more} and toolcage could not undo it ({}): \
             review it before running git, the agent or the editor there",
            first.path.display(),
            first.reason
        ))
    }
}

fn ser_secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

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
