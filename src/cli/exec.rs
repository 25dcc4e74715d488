//! `toolcage exec`: run any command under the sandbox.

use super::{Cli, PolicyArgs};
use clap::Args;
use std::ffi::OsString;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ExecArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Allow network access.
    #[arg(long)]
    pub allow_net: bool,
    /// Grant read (and execute) access beneath PATH. Repeatable.
    #[arg(long = "read", value_name = "PATH")]
    pub read: Vec<PathBuf>,
    /// Grant write access beneath PATH. Repeatable.
    #[arg(long = "write", value_name = "PATH")]
    pub write: Vec<PathBuf>,
    /// Pass the environment variable NAME through (or NAME=VALUE to set it). Repeatable.
    #[arg(long = "env", value_name = "NAME")]
    pub env: Vec<String>,
    /// Kill the command after DUR (e.g. 30s, 500ms, 5m).
    #[arg(long, value_name = "DUR")]
    pub timeout: Option<String>,
    /// Print the outcome and enforcement report as JSON on stderr after the command ends.
    #[arg(long)]
    pub json: bool,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

pub fn run(_cli: &Cli, _args: &ExecArgs) -> u8 {
    super::status::INTERNAL
}
