//! The options a command reads besides its own: the project, how much
//! toolcage says, the extra tools.toml and the store. Each command takes
//! exactly those it uses (its `--help` lists no other), after its name or
//! before it (`toolcage -C DIR list`); given to a command that does not
//! use it, an option is a usage error.
//!
//! They nest: a command that reads the store also discovers tools, one
//! that discovers tools also logs, and every command with a project takes
//! `-C` and `-q`. [`Level`] is that order.

use clap::Args;
use std::path::PathBuf;

/// How far down the chain of shared options a command reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Level {
    /// `completions`, `man`: none.
    Nothing,
    /// `exec`: `-C`, `-q` (it sets up no log and reads no tools).
    Project,
    /// `audit`, `doctor`: also `--log`.
    Log,
    /// `check`, `policy`: also `--tools-toml`.
    Discover,
    /// `serve`, `list`, `schema`, `call`, `upstreams`: also the store.
    Store,
}

/// `-C` and `-q`: every command that works on a project.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct ProjectOpts {
    /// The project whose tools are discovered; the working directory of every call
    /// [default: the nearest directory up from here holding a tool directory or a .git,
    /// as git and cargo find their roots; else the current directory]
    #[arg(short = 'C', long = "project", value_name = "PROJECT")]
    pub(crate) project: Option<PathBuf>,

    /// Print none of toolcage's own warnings, notes, hints and tips on stderr
    /// (errors, the tool's output and approval prompts still show).
    #[arg(short = 'q', long)]
    pub(crate) quiet: bool,
}

/// `--log`: every command that sets up toolcage's own log.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct LogOpt {
    /// Log verbosity for toolcage's own diagnostics on stderr (error, warn, info, debug, trace)
    /// [default: warn; error with --quiet]
    #[arg(long)]
    pub(crate) log: Option<String>,
}

/// `--tools-toml`: every command that discovers tools.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct ToolsTomlOpt {
    /// An OpenCrabs tools.toml outside the project, discovered with the project's tools.
    #[arg(long = "tools-toml", value_name = "FILE")]
    pub(crate) tools_toml: Option<PathBuf>,
}

/// `--store` and its password: every command that keeps or reads rate
/// limits or upstream pins.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct StoreOpts {
    /// Keep rate limits and upstream pins in Redis, shared by every replica
    /// (redis://HOST:PORT[/DB] or rediss://...; no password in the URL)
    /// [default: files in the project's state directory]
    #[arg(long = "store", value_name = "URL")]
    pub(crate) store: Option<String>,

    /// A file holding the store's password (first line)
    #[arg(
        long = "store-password-file",
        value_name = "PATH",
        requires = "store",
        conflicts_with = "store_password_env"
    )]
    pub(crate) store_password_file: Option<PathBuf>,

    /// An environment variable holding the store's password
    #[arg(long = "store-password-env", value_name = "NAME", requires = "store")]
    pub(crate) store_password_env: Option<String>,

    /// The namespace of every key in the store (toolcage:NAME:...), so
    /// several projects or deployments can share one Redis
    /// [default: a digest of the canonical project path]
    #[arg(long = "store-prefix", value_name = "NAME", requires = "store")]
    pub(crate) store_prefix: Option<String>,
}

/// `audit`, `doctor`: the project, `-q`, `--log`.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct LogOpts {
    #[command(flatten)]
    pub(crate) project: ProjectOpts,
    #[command(flatten)]
    pub(crate) log: LogOpt,
}

/// `check`, `policy`: and `--tools-toml`.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct DiscoverOpts {
    #[command(flatten)]
    pub(crate) log: LogOpts,
    #[command(flatten)]
    pub(crate) tools_toml: ToolsTomlOpt,
}

/// `serve`, `list`, `schema`, `call`, `upstreams`: and the store.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct StoreCmdOpts {
    #[command(flatten)]
    pub(crate) discover: DiscoverOpts,
    #[command(flatten)]
    pub(crate) store: StoreOpts,
}

/// All of them, before the command's name: accepted there for the
/// commands that use them (`toolcage -C DIR list`, as git's `-C`).
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct GlobalOptions {
    #[command(flatten)]
    pub(crate) all: StoreCmdOpts,
}

/// The shared options as given, wherever they were typed.
#[derive(Debug, Clone, Default)]
pub(crate) struct Given {
    pub(crate) project: Option<PathBuf>,
    pub(crate) quiet: bool,
    pub(crate) log: Option<String>,
    pub(crate) tools_toml: Option<PathBuf>,
    pub(crate) store: StoreOpts,
}

impl Given {
    /// `self` (typed after the command's name) where given, else `before`.
    pub(crate) fn over(self, before: Given) -> Given {
        Given {
            project: self.project.or(before.project),
            quiet: self.quiet || before.quiet,
            log: self.log.or(before.log),
            tools_toml: self.tools_toml.or(before.tools_toml),
            store: if self.store.store.is_some() {
                self.store
            } else {
                before.store
            },
        }
    }

    /// The first option given that a command at `level` does not use,
    /// as typed (`--store`), with the level it needs.
    pub(crate) fn beyond(&self, level: Level) -> Option<&'static str> {
        let s = &self.store;
        [
            (self.project.is_some(), "--project", Level::Project),
            (self.quiet, "--quiet", Level::Project),
            (self.log.is_some(), "--log", Level::Log),
            (self.tools_toml.is_some(), "--tools-toml", Level::Discover),
            (s.store.is_some(), "--store", Level::Store),
            (
                s.store_password_file.is_some(),
                "--store-password-file",
                Level::Store,
            ),
            (
                s.store_password_env.is_some(),
                "--store-password-env",
                Level::Store,
            ),
            (s.store_prefix.is_some(), "--store-prefix", Level::Store),
        ]
        .into_iter()
        .find(|(given, _, needs)| *given && *needs > level)
        .map(|(_, flag, _)| flag)
    }

    /// `--store` and where its password comes from.
    pub(crate) fn store(&self) -> Option<crate::gate::store::StoreSpec> {
        use crate::gate::store::{PasswordFrom, StoreSpec};
        let s = &self.store;
        let url = s.store.clone()?;
        let password = match (&s.store_password_file, &s.store_password_env) {
            (Some(p), _) => Some(PasswordFrom::File(p.clone())),
            (None, Some(n)) => Some(PasswordFrom::Env(n.clone())),
            (None, None) => None,
        };
        Some(StoreSpec {
            url,
            password,
            prefix: s.store_prefix.clone(),
            prefix_from: "--store-prefix",
        })
    }
}

impl From<&ProjectOpts> for Given {
    fn from(o: &ProjectOpts) -> Given {
        Given {
            project: o.project.clone(),
            quiet: o.quiet,
            ..Given::default()
        }
    }
}

impl From<&LogOpts> for Given {
    fn from(o: &LogOpts) -> Given {
        Given {
            log: o.log.log.clone(),
            ..Given::from(&o.project)
        }
    }
}

impl From<&DiscoverOpts> for Given {
    fn from(o: &DiscoverOpts) -> Given {
        Given {
            tools_toml: o.tools_toml.tools_toml.clone(),
            ..Given::from(&o.log)
        }
    }
}

impl From<&StoreCmdOpts> for Given {
    fn from(o: &StoreCmdOpts) -> Given {
        Given {
            store: o.store.clone(),
            ..Given::from(&o.discover)
        }
    }
}

impl From<&GlobalOptions> for Given {
    fn from(o: &GlobalOptions) -> Given {
        Given::from(&o.all)
    }
}
