//! The command-line surface (docs/cli.md). Each subcommand lives in
//! its own module; this file only declares the arguments and dispatches.

use clap::{Args, Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;

#[macro_use]
pub(crate) mod out;
mod audit;
mod call;
mod check;
mod docs;
mod doctor;
mod exec;
mod explain;
mod hints;
mod list;
mod options;
mod parse;
mod policy;
mod schema;
mod serve;
pub(crate) mod signals;
pub mod status;
mod stderr;
mod terminal;
mod toolnotes;
mod upstreams;

pub(crate) use options::GlobalOptions;
use options::{Given, Level};
pub(crate) use out::print_json;
pub(crate) use stderr::{notice, quiet, say};

const ABOUT: &str = "Discover agent tools and run every call in a kernel-enforced sandbox";
const EXEC_ABOUT: &str = "Run any command under the sandbox.";

#[derive(Debug, Parser)]
#[command(name = "toolcage", version, about = ABOUT)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) options: GlobalOptions,

    #[command(subcommand)]
    pub(crate) command: CliCommand,
}

/// The project (`-C`, else found up from the current directory) and, when
/// it was found above the current directory, that directory: `exec` runs
/// its command there, as it was typed.
fn project_and_here(explicit: Option<&Path>) -> (PathBuf, Option<PathBuf>) {
    if let Some(p) = explicit {
        return (p.to_path_buf(), None);
    }
    let Ok(here) = std::env::current_dir() else {
        return (PathBuf::from("."), None);
    };
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let root = crate::discover::project_root(&here, home.as_deref());
    let below = (root != here).then_some(here);
    (root, below)
}

/// Refuse a project that is `/`, the operator's home or what holds it:
/// every call may write its project, so that would hand calls the
/// operator's keys and shell start-up files (as root, `/etc`). Home may be
/// the project only when the operator's own `--policy` file, outside it,
/// says `allow_home_project = true`. The fix the message names is to `cd`
/// into a project or to pass `-C`; the key is the operator's to find in
/// the documentation, not a line an agent relays.
fn home_project(project: &Path, explicit: bool, policy: &PolicyArgs) -> Result<(), String> {
    use crate::policy::Context;
    // The common case costs no context: the project is no home.
    let Ok(cwd) = std::env::current_dir() else {
        // The command reports an unusable project itself.
        return Ok(());
    };
    if crate::policy::project_refusal_at(&cwd.join(project)).is_none() {
        return Ok(());
    }
    let Ok(ctx) = Context::detect(project, crate::discover::agentdir::holds_a3s_tools) else {
        return Ok(());
    };
    let Some(what) = ctx.project_refusal() else {
        return Ok(());
    };
    // Only an operator's file can allow it, and never `/`: without one,
    // or for `/`, say the refusal (not whatever else loading the profile
    // makes of such a project, such as `/bin` being a link in a write root).
    let root = std::fs::canonicalize(cwd.join(project)).is_ok_and(|p| p.parent().is_none());
    if policy.policy.is_some() && !root {
        let stack = crate::policy::load(&exec::sources(policy), &ctx).map_err(|e| e.to_string())?;
        if stack.allows_home_project(&ctx).map_err(|e| e.to_string())? {
            return Ok(());
        }
    }
    let why = "every call may read and write all of its project (your keys, your shell's \
               start-up files)";
    Err(if explicit {
        format!(
            "-C {}: the project cannot be {what}: {why}; pass -C with a project directory",
            project.display()
        )
    } else {
        format!(
            "no project here: the project would be {what}, and {why}; cd into a project \
             directory, or pass -C DIR"
        )
    })
}

/// What every tool command needs from the shared options.
#[derive(Debug, Clone)]
pub(crate) struct Global {
    pub(crate) project: PathBuf,
    pub(crate) tools_toml: Option<PathBuf>,
    /// `--store`: where rate limits and pins are shared (`None`: files).
    pub(crate) store: Option<crate::gate::store::StoreSpec>,
}

impl Global {
    /// Discovery options; a relative `--tools-toml` is taken from the cwd.
    pub(crate) fn options(&self) -> crate::discover::Options {
        let tools_toml = self.tools_toml.as_ref().map(|p| {
            std::env::current_dir()
                .map(|cwd| cwd.join(p))
                .unwrap_or_else(|_| p.clone())
        });
        crate::discover::Options { tools_toml }
    }

    /// Load the policy layers and discover the tools. A `--tools-toml` that
    /// is missing or not a readable file is an error (exit 125), as a bad
    /// `--policy` file is: the user named it.
    pub(crate) fn engine(
        &self,
        policy: &PolicyArgs,
    ) -> Result<crate::call::Engine, crate::policy::PolicyError> {
        if let Some(file) = &self.options().tools_toml
            && let Err(e) = crate::discover::opencrabs::usable_extra(file)
        {
            return Err(crate::policy::PolicyError::Input(format!(
                "--tools-toml {}: {e} (fix: give the path of an OpenCrabs tools.toml, or leave \
                 --tools-toml out)",
                file.display()
            )));
        }
        let engine = crate::call::Engine::load(
            &self.project,
            &exec::sources(policy),
            policy.overrides(),
            self.options(),
        )?;
        self.with_store(engine)
    }

    /// `engine` with the operator's store (`--store`, else the `[store]`
    /// of their `--policy` file) in place of the state directory's files.
    fn with_store(
        &self,
        mut engine: crate::call::Engine,
    ) -> Result<crate::call::Engine, crate::policy::PolicyError> {
        use crate::gate::store::{PasswordFrom, StoreSpec};
        let spec = match &self.store {
            Some(s) => Some(s.clone()),
            None => engine.stack.store(&engine.ctx)?.map(|s| StoreSpec {
                url: s.url.unwrap_or_default(),
                password: match (s.password_file, s.password_env) {
                    (Some(f), _) => Some(PasswordFrom::File(f.into())),
                    (None, Some(n)) => Some(PasswordFrom::Env(n)),
                    (None, None) => None,
                },
                prefix: s.prefix,
                prefix_from: "[store] prefix",
            }),
        };
        if let Some(spec) = spec {
            let store = spec
                .open(&engine.project_root())
                .map_err(crate::policy::PolicyError::Input)?;
            engine.store = std::sync::Arc::new(store);
        }
        Ok(engine)
    }

    /// Load the policy layers only (no discovery).
    pub(crate) fn engine_without_tools(
        &self,
        policy: &PolicyArgs,
    ) -> Result<crate::call::Engine, crate::policy::PolicyError> {
        let engine = crate::call::Engine::with_catalog(
            &self.project,
            &exec::sources(policy),
            policy.overrides(),
            self.options(),
            crate::discover::Catalog::default(),
        )?;
        self.with_store(engine)
    }
}

/// `path` relative to `root` when it lies beneath it, else as is.
pub(crate) fn relative(root: &std::path::Path, path: &std::path::Path) -> String {
    path.strip_prefix(root)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| path.display().to_string())
}

/// Where the policy comes from, shared by every command that runs or shows a grant.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct PolicyArgs {
    /// A shipped profile: default, untrusted, ci, network.
    #[arg(long, value_name = "NAME", value_parser = docs::ProfileName)]
    pub(crate) profile: Option<String>,
    /// A policy file (TOML), layered over the profile (later wins).
    #[arg(long, value_name = "FILE")]
    pub(crate) policy: Option<PathBuf>,
    /// A toolchain in your home to use inside the sandbox: its dirs readable, its variables set. Repeatable.
    #[arg(long = "with", value_name = "PRESET", value_parser = crate::policy::presets::NAMES.to_vec())]
    pub(crate) with: Vec<String>,
    /// Allow network access.
    #[arg(long)]
    pub(crate) allow_net: bool,
    /// Allow HOST (optionally only on PORT) by name: domains mode, through
    /// toolcage's proxy. Repeatable; patterns as in [network] allow.
    #[arg(long = "allow-domain", value_name = "HOST[:PORT]")]
    pub(crate) allow_domain: Vec<String>,
    /// Grant read (and execute) access beneath PATH. Repeatable.
    #[arg(long = "read", value_name = "PATH")]
    pub(crate) read: Vec<PathBuf>,
    /// Grant write access beneath PATH. Repeatable.
    #[arg(long = "write", value_name = "PATH")]
    pub(crate) write: Vec<PathBuf>,
    /// Pass the environment variable NAME through (or NAME=VALUE to set it). Repeatable.
    #[arg(long = "env", value_name = "NAME")]
    pub(crate) env: Vec<String>,
    /// Kill the command after DUR (e.g. 30s, 500ms, 5m).
    #[arg(long, value_name = "DUR")]
    pub(crate) timeout: Option<String>,
    /// Run even if the kernel cannot enforce Landlock (reported as degraded).
    #[arg(long)]
    pub(crate) allow_degraded: bool,
}

impl PolicyArgs {
    /// The command line's layer of the policy: the same for every command
    /// that resolves a grant, so `policy` previews what `exec` and `call`
    /// with the same flags get.
    pub(crate) fn overrides(&self) -> crate::policy::Overrides {
        crate::policy::Overrides {
            allow_net: self.allow_net,
            allow_domain: self.allow_domain.clone(),
            with: self.with.clone(),
            read: self.read.clone(),
            write: self.write.clone(),
            env: self.env.clone(),
            timeout: self.timeout.clone(),
            allow_degraded: self.allow_degraded,
        }
    }
}

/// A toolcage subcommand, as parsed (not `sandbox::Command`, what a call
/// runs).
#[derive(Debug, Subcommand)]
pub(crate) enum CliCommand {
    #[command(about = EXEC_ABOUT)]
    Exec(exec::ExecArgs),
    /// Serve the project's tools over MCP (stdio, or Streamable HTTP with --http).
    Serve(serve::ServeArgs),
    /// Every tool discovered: name, format, source file, description.
    List(list::ListArgs),
    /// MCP tool definitions (name, description, inputSchema, annotations) as JSON.
    Schema(schema::SchemaArgs),
    /// Every tool file examined: loaded or skipped (with the fix); collisions; policy conflicts.
    Check(check::CheckArgs),
    /// Validate and run one tool; print its result as an agent would see it.
    Call(call::CallArgs),
    /// The resolved grant for a tool (or the defaults), with where each setting came from.
    Policy(policy::PolicyCmdArgs),
    /// The audit log: one line per call (allowed or denied); --json for the records.
    Audit(audit::AuditArgs),
    /// What this machine and user can enforce, and the mode each shipped profile runs in.
    Doctor(doctor::DoctorArgs),
    /// Upstream MCP servers (.mcp.json, A3S kind: mcp): state, tools, pins; `approve NAME` after a change.
    Upstreams(upstreams::UpstreamsArgs),
    /// A shell completion script on stdout (bash, zsh, fish, elvish, powershell).
    Completions(docs::CompletionsArgs),
    /// The man page (roff) on stdout: `toolcage man > toolcage.1`; `man exec` for toolcage-exec(1).
    Man(docs::ManArgs),
}

impl CliCommand {
    /// Which of the shared options the command reads.
    fn level(&self) -> Level {
        match self {
            CliCommand::Exec(_) => Level::Project,
            CliCommand::Audit(_) | CliCommand::Doctor(_) => Level::Log,
            CliCommand::Check(_) | CliCommand::Policy(_) => Level::Discover,
            CliCommand::Serve(_)
            | CliCommand::List(_)
            | CliCommand::Schema(_)
            | CliCommand::Call(_)
            | CliCommand::Upstreams(_) => Level::Store,
            CliCommand::Completions(_) | CliCommand::Man(_) => Level::Nothing,
        }
    }

    /// The shared options typed after the command's name.
    fn given(&self) -> Given {
        match self {
            CliCommand::Exec(a) => Given::from(&a.opts),
            CliCommand::Audit(a) => Given::from(&a.opts),
            CliCommand::Doctor(a) => Given::from(&a.opts),
            CliCommand::Check(a) => Given::from(&a.opts),
            CliCommand::Policy(a) => Given::from(&a.opts),
            CliCommand::Serve(a) => Given::from(&a.opts),
            CliCommand::List(a) => Given::from(&a.opts),
            CliCommand::Schema(a) => Given::from(&a.opts),
            CliCommand::Call(a) => Given::from(&a.opts),
            CliCommand::Upstreams(a) => a.given(),
            CliCommand::Completions(_) | CliCommand::Man(_) => Given::default(),
        }
    }

    /// The policy options of a command that discovers tools or runs
    /// anything: it needs a project. `audit` (a read of the log),
    /// `doctor`, `completions` and `man` work anywhere.
    fn policy_args(&self) -> Option<&PolicyArgs> {
        match self {
            CliCommand::Exec(a) => Some(&a.policy),
            CliCommand::Serve(a) => Some(&a.policy),
            CliCommand::List(a) => Some(&a.policy),
            CliCommand::Schema(a) => Some(&a.policy),
            CliCommand::Check(a) => Some(&a.policy),
            CliCommand::Call(a) => Some(&a.policy),
            CliCommand::Policy(a) => Some(&a.policy),
            CliCommand::Upstreams(a) => Some(&a.policy),
            CliCommand::Audit(_)
            | CliCommand::Doctor(_)
            | CliCommand::Completions(_)
            | CliCommand::Man(_) => None,
        }
    }
}

/// Parse the command line and run the subcommand; returns the process exit status.
pub fn main() -> ExitCode {
    // The script runner is a child of toolcage, never typed by a person:
    // not a clap subcommand, so not in --help.
    let mut raw = std::env::args_os();
    if raw.nth(1).as_deref() == Some(crate::call::script::child::SUBCOMMAND.as_ref()) {
        let rest: Vec<String> = raw.map(|a| a.to_string_lossy().into_owned()).collect();
        return crate::call::script::child::main(&rest);
    }
    let cli = match parse::parse_from(std::env::args_os().collect()) {
        Ok(cli) => cli,
        Err(e) => {
            let usage_status = usage_error_status(&e);
            let _ = e.print();
            let args: Vec<String> = std::env::args().skip(1).collect();
            // Not parsed, but asked for: a tip is not an error.
            let quiet = args
                .iter()
                .take_while(|a| *a != "--")
                .any(|a| a == "-q" || a == "--quiet");
            if let Some(tip) = parse::exec_without_separator(&e, args).filter(|_| !quiet) {
                eprintln!("{tip}");
            }
            return ExitCode::from(usage_status);
        }
    };
    let given = cli.command.given().over(Given::from(&cli.options));
    // exec's path (policy, sandbox) logs nothing: it reports on stderr
    // itself. Setting up the subscriber would cost ~40 us of every exec.
    stderr::QUIET.store(given.quiet, Ordering::Relaxed);
    if !matches!(cli.command, CliCommand::Exec(_)) {
        let level = match (&given.log, given.quiet) {
            (Some(level), _) => level.as_str(),
            (None, true) => "error",
            (None, false) => "warn",
        };
        stderr::init_logging(level);
    }
    let (project, here) = project_and_here(given.project.as_deref());
    if let Some(policy) = cli.command.policy_args()
        && let Err(e) = home_project(&project, given.project.is_some(), policy)
    {
        say(&e);
        return ExitCode::from(out::status(status::INTERNAL));
    }
    let global = Global {
        project: project.clone(),
        tools_toml: given.tools_toml.clone(),
        store: given.store(),
    };
    let code = match &cli.command {
        CliCommand::Exec(args) => exec::run(&project, here.as_deref(), args),
        CliCommand::Serve(args) => serve::run(&global, args),
        CliCommand::List(args) => list::run(&global, args),
        CliCommand::Schema(args) => schema::run(&global, args),
        CliCommand::Check(args) => check::run(&global, args),
        CliCommand::Call(args) => call::run(&global, args),
        CliCommand::Policy(args) => policy::run(&global, args),
        CliCommand::Audit(args) => audit::run(&global, args),
        CliCommand::Doctor(args) => doctor::run(&global, args),
        CliCommand::Upstreams(args) => upstreams::run(&global, args),
        CliCommand::Completions(args) => docs::completions(args),
        CliCommand::Man(args) => docs::man(args),
    };
    ExitCode::from(out::status(code))
}

/// `--help` and `--version` succeed; a usage error is toolcage's own
/// failure before anything ran (125) on every command: one status, and
/// one `exec` can use (its other statuses belong to the command).
fn usage_error_status(e: &clap::Error) -> u8 {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        return status::OK;
    }
    status::INTERNAL
}
