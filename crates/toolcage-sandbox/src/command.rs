//! What to run: the [`Command`] a caller hands to [`crate::run`].

use crate::report::EnforcementReport;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

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
    /// is not written. The caller keeps them open until [`run`](crate::run) returns.
    pub stdio_fds: Option<[std::os::fd::RawFd; 3]>,
    /// Sent the enforcement report once the program has started (a
    /// long-lived service reports what confines it while it runs).
    pub report_to: Option<std::sync::mpsc::SyncSender<EnforcementReport>>,
    /// The working directory: a directory inside the grant's project
    /// (`toolcage exec` run from a subdirectory); `None` is the project.
    /// A relative program path is taken from it.
    pub cwd: Option<PathBuf>,
}
