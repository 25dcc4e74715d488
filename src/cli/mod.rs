//! The command-line surface (docs/cli.md). Each subcommand lives in
//! its own module; this file only declares the arguments and dispatches.

use clap::{Args, Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

#[macro_use]
pub mod out;
mod audit;
mod call;
mod check;
mod docs;
mod doctor;
mod exec;
mod explain;
mod hints;
mod list;
mod policy;
mod schema;
mod serve;
pub mod signals;
pub mod status;
mod terminal;
mod toolnotes;
mod upstreams;

const ABOUT: &str = "Discover agent tools and run every call in a kernel-enforced sandbox";
const EXEC_ABOUT: &str = "Run any command under the sandbox.";

#[derive(Debug, Parser)]
#[command(name = "toolcage", version, about = ABOUT)]
pub struct Cli {
    #[command(flatten)]
    pub options: GlobalOptions,

    #[command(subcommand)]
    pub command: Command,
}

/// The options every subcommand takes.
#[derive(Debug, Args)]
pub struct GlobalOptions {
    /// The project whose tools are discovered; the working directory of every call
    /// [default: the nearest directory up from here holding a tool directory or a .git,
    /// as git and cargo find their roots; else the current directory]
    #[arg(short = 'C', long = "project", global = true, value_name = "PROJECT")]
    pub project: Option<PathBuf>,

    /// Log verbosity for toolcage's own diagnostics on stderr (error, warn, info, debug, trace)
    /// [default: warn; error with --quiet]
    #[arg(long, global = true)]
    pub log: Option<String>,

    /// Print none of toolcage's own warnings, notes, hints and tips on stderr
    /// (errors, the tool's output and approval prompts still show).
    #[arg(short = 'q', long, global = true)]
    pub quiet: bool,

    /// An OpenCrabs tools.toml outside the project, discovered with the project's tools.
    #[arg(long = "tools-toml", global = true, value_name = "FILE")]
    pub tools_toml: Option<PathBuf>,

    /// Keep rate limits and upstream pins in Redis, shared by every replica
    /// (redis://HOST:PORT[/DB] or rediss://...; no password in the URL)
    /// [default: files in the project's state directory]
    #[arg(long = "store", global = true, value_name = "URL")]
    pub store: Option<String>,

    /// A file holding the store's password (first line)
    #[arg(
        long = "store-password-file",
        global = true,
        value_name = "PATH",
        requires = "store",
        conflicts_with = "store_password_env"
    )]
    pub store_password_file: Option<PathBuf>,

    /// An environment variable holding the store's password
    #[arg(
        long = "store-password-env",
        global = true,
        value_name = "NAME",
        requires = "store"
    )]
    pub store_password_env: Option<String>,
}

impl GlobalOptions {
    /// `--store` and where its password comes from.
    pub fn store(&self) -> Option<crate::gate::store::StoreSpec> {
        use crate::gate::store::{PasswordFrom, StoreSpec};
        let url = self.store.clone()?;
        let password = match (&self.store_password_file, &self.store_password_env) {
            (Some(p), _) => Some(PasswordFrom::File(p.clone())),
            (None, Some(n)) => Some(PasswordFrom::Env(n.clone())),
            (None, None) => None,
        };
        Some(StoreSpec { url, password })
    }
}

/// [`Cli`] with `exec` alone: clap builds every subcommand's arguments
/// before it parses, ~0.15 ms of each `toolcage exec`. The help, the
/// errors and the result are those of [`Cli`] (a test compares them).
#[derive(Debug, Parser)]
#[command(name = "toolcage", version, about = ABOUT)]
struct ExecCli {
    #[command(flatten)]
    options: GlobalOptions,

    #[command(subcommand)]
    command: ExecOnly,
}

#[derive(Debug, Subcommand)]
enum ExecOnly {
    #[command(about = EXEC_ABOUT)]
    Exec(exec::ExecArgs),
}

/// Whether `args` (the program name first) are global options with their
/// values and then `exec`: anything else (`--help`, a flag clap might read
/// as a value) goes to [`Cli`] itself.
fn exec_first(args: &[std::ffi::OsString]) -> bool {
    let mut words = args.iter().skip(1).map(|a| a.to_str());
    while let Some(Some(w)) = words.next() {
        match w {
            "exec" => return true,
            "-q" | "--quiet" => {}
            "-C" | "--project" | "--log" | "--tools-toml" => match words.next() {
                Some(Some(v)) if !v.starts_with('-') => {}
                _ => return false,
            },
            _ if ["--project=", "--log=", "--tools-toml="]
                .iter()
                .any(|p| w.starts_with(p)) => {}
            _ if w.starts_with("-C") && w.len() > 2 && !w.starts_with("-C-") => {}
            _ => return false,
        }
    }
    false
}

/// Parse `args` (the program name first) as [`Cli`] does.
fn parse_from(args: Vec<std::ffi::OsString>) -> Result<Cli, clap::Error> {
    if exec_first(&args) {
        let ExecCli {
            options,
            command: ExecOnly::Exec(args),
        } = ExecCli::try_parse_from(args)?;
        return Ok(Cli {
            options,
            command: Command::Exec(args),
        });
    }
    Cli::try_parse_from(args)
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

/// What every tool command needs from the global options.
#[derive(Debug, Clone)]
pub struct Global {
    pub project: PathBuf,
    pub tools_toml: Option<PathBuf>,
    /// `--store`: where rate limits and pins are shared (`None`: files).
    pub store: Option<crate::gate::store::StoreSpec>,
}

impl Global {
    /// Discovery options; a relative `--tools-toml` is taken from the cwd.
    pub fn options(&self) -> crate::discover::Options {
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
    pub fn engine(
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
            }),
        };
        if let Some(spec) = spec {
            let store = spec.open().map_err(crate::policy::PolicyError::Input)?;
            engine.store = std::sync::Arc::new(store);
        }
        Ok(engine)
    }

    /// Load the policy layers only (no discovery).
    pub fn engine_without_tools(
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

/// Print `toolcage: <message>` on stderr, neutralised ([`crate::text`]):
/// errors quote tool names, arguments and paths from the project or client.
pub fn say(message: &dyn std::fmt::Display) {
    eprintln!(
        "toolcage: {}",
        crate::text::multi_line(&message.to_string())
    );
}

/// `value` as pretty JSON on stdout. `Some(INTERNAL)`, said on stderr,
/// when it cannot be encoded.
pub fn print_json(value: &impl serde::Serialize) -> Option<u8> {
    match serde_json::to_string_pretty(value) {
        Ok(s) => {
            outln!("{s}");
            None
        }
        Err(e) => {
            say(&e);
            Some(status::INTERNAL)
        }
    }
}

static QUIET: AtomicBool = AtomicBool::new(false);

/// `--quiet`: toolcage's own warnings, notes, hints and tips stay unsaid.
pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// [`say`] a warning, note, hint or tip: nothing under `--quiet`.
pub fn notice(message: &dyn std::fmt::Display) {
    if !quiet() {
        say(message);
    }
}

/// `path` relative to `root` when it lies beneath it, else as is.
pub fn relative(root: &std::path::Path, path: &std::path::Path) -> String {
    path.strip_prefix(root)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| path.display().to_string())
}

/// Where the policy comes from, shared by every command that runs or shows a grant.
#[derive(Debug, Clone, Default, Args)]
pub struct PolicyArgs {
    /// A shipped profile: default, untrusted, ci, network.
    #[arg(long, value_name = "NAME", value_parser = docs::ProfileName)]
    pub profile: Option<String>,
    /// A policy file (TOML), layered over the profile (later wins).
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// A toolchain in your home to use inside the sandbox: its dirs readable, its variables set. Repeatable.
    #[arg(long = "with", value_name = "PRESET", value_parser = crate::policy::presets::NAMES.to_vec())]
    pub with: Vec<String>,
    /// Allow network access.
    #[arg(long)]
    pub allow_net: bool,
    /// Allow HOST (optionally only on PORT) by name: domains mode, through
    /// toolcage's proxy. Repeatable; patterns as in [network] allow.
    #[arg(long = "allow-domain", value_name = "HOST[:PORT]")]
    pub allow_domain: Vec<String>,
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
    /// Run even if the kernel cannot enforce Landlock (reported as degraded).
    #[arg(long)]
    pub allow_degraded: bool,
}

impl PolicyArgs {
    /// The command line's layer of the policy: the same for every command
    /// that resolves a grant, so `policy` previews what `exec` and `call`
    /// with the same flags get.
    pub fn overrides(&self) -> crate::policy::Overrides {
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

#[derive(Debug, Subcommand)]
pub enum Command {
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

impl Command {
    /// The policy options of a command that discovers tools or runs
    /// anything: it needs a project. `audit` (a read of the log),
    /// `doctor`, `completions` and `man` work anywhere.
    fn policy_args(&self) -> Option<&PolicyArgs> {
        match self {
            Command::Exec(a) => Some(&a.policy),
            Command::Serve(a) => Some(&a.policy),
            Command::List(a) => Some(&a.policy),
            Command::Schema(a) => Some(&a.policy),
            Command::Check(a) => Some(&a.policy),
            Command::Call(a) => Some(&a.policy),
            Command::Policy(a) => Some(&a.policy),
            Command::Upstreams(a) => Some(&a.policy),
            Command::Audit(_) | Command::Doctor(_) | Command::Completions(_) | Command::Man(_) => {
                None
            }
        }
    }
}

/// Parse the command line and run the subcommand; returns the process exit status.
pub fn main() -> ExitCode {
    // The script runner is a child of toolcage, never typed by a person:
    // not a clap subcommand, so not in --help.
    let mut raw = std::env::args_os();
    if raw.nth(1).as_deref() == Some(crate::call::script::runner::SUBCOMMAND.as_ref()) {
        let rest: Vec<String> = raw.map(|a| a.to_string_lossy().into_owned()).collect();
        return crate::call::script::runner::main(&rest);
    }
    let cli = match parse_from(std::env::args_os().collect()) {
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
            if let Some(tip) = exec_without_separator(&e, args).filter(|_| !quiet) {
                eprintln!("{tip}");
            }
            return ExitCode::from(usage_status);
        }
    };
    // exec's path (policy, sandbox) logs nothing: it reports on stderr
    // itself. Setting up the subscriber would cost ~40 us of every exec.
    QUIET.store(cli.options.quiet, Ordering::Relaxed);
    if !matches!(cli.command, Command::Exec(_)) {
        let level = match (&cli.options.log, cli.options.quiet) {
            (Some(level), _) => level.as_str(),
            (None, true) => "error",
            (None, false) => "warn",
        };
        init_logging(level);
    }
    let (project, here) = project_and_here(cli.options.project.as_deref());
    if let Some(policy) = cli.command.policy_args()
        && let Err(e) = home_project(&project, cli.options.project.is_some(), policy)
    {
        say(&e);
        return ExitCode::from(out::status(status::INTERNAL));
    }
    let global = Global {
        project: project.clone(),
        tools_toml: cli.options.tools_toml.clone(),
        store: cli.options.store(),
    };
    let code = match &cli.command {
        Command::Exec(args) => exec::run(&project, here.as_deref(), args),
        Command::Serve(args) => serve::run(&global, args),
        Command::List(args) => list::run(&global, args),
        Command::Schema(args) => schema::run(&global, args),
        Command::Check(args) => check::run(&global, args),
        Command::Call(args) => call::run(&global, args),
        Command::Policy(args) => policy::run(&global, args),
        Command::Audit(args) => audit::run(&global, args),
        Command::Doctor(args) => doctor::run(&global, args),
        Command::Upstreams(args) => upstreams::run(&global, args),
        Command::Completions(args) => docs::completions(args),
        Command::Man(args) => docs::man(args),
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

/// The first word that is neither a global option nor its value.
/// `toolcage exec true`: clap sees `true` as an unexpected argument. The
/// command goes after `--`; say so, with the line to type.
fn exec_without_separator(e: &clap::Error, args: Vec<String>) -> Option<String> {
    use clap::error::ErrorKind;
    let is_exec = subcommand_name(args.iter().cloned()).as_deref() == Some("exec");
    if !is_exec
        || args.iter().any(|a| a == "--")
        || !matches!(
            e.kind(),
            ErrorKind::UnknownArgument | ErrorKind::MissingRequiredArgument
        )
    {
        return None;
    }
    let at = args.iter().position(|a| a == "exec")?;
    // The first word after exec's own options is where the command starts.
    let mut rest = args[at + 1..].iter().peekable();
    let mut options = Vec::new();
    while let Some(a) = rest.next_if(|a| a.starts_with('-')) {
        options.push(a.clone());
        let takes_value = !matches!(
            a.as_str(),
            "--allow-net" | "--allow-degraded" | "--json" | "--explain" | "--quiet" | "-q"
        ) && !a.contains('=');
        if takes_value && let Some(v) = rest.next() {
            options.push(v.clone());
        }
    }
    let command: Vec<&String> = rest.collect();
    if command.is_empty() {
        return None;
    }
    let mut line = vec!["toolcage".to_string()];
    line.extend(args[..=at].iter().cloned());
    line.extend(options);
    line.push("--".into());
    line.extend(command.into_iter().cloned());
    let line: Vec<String> = line.iter().map(|a| shell_word(a)).collect();
    Some(format!(
        "tip: the command goes after `--`: {}",
        crate::text::one_line(&line.join(" "))
    ))
}

/// `a` as a shell would need it typed: bare when plain, else single-quoted.
fn shell_word(a: &str) -> String {
    let plain = !a.is_empty()
        && a.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_./:=@%+-,".contains(&b));
    if plain {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', "'\\''"))
    }
}

fn subcommand_name(mut args: impl Iterator<Item = String>) -> Option<String> {
    while let Some(a) = args.next() {
        match a.as_str() {
            "-C"
            | "--project"
            | "--log"
            | "--tools-toml"
            | "--store"
            | "--store-password-file"
            | "--store-password-env" => {
                args.next();
            }
            _ if a.starts_with('-') => {}
            _ => return Some(a),
        }
    }
    None
}

fn init_logging(level: &str) {
    // rmcp's own lines (a worker that quit, a response error) repeat what
    // toolcage reports itself: shown from `--log debug` on.
    let directives = match level {
        "debug" | "trace" => level.to_string(),
        _ => format!("{level},rmcp=off"),
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("TOOLCAGE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(directives));
    // Log lines quote tool names, file names and diagnostics from clients
    // and projects: each line is neutralised (no colours of our own, so no
    // escape sequence is ours to keep).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| NeutralStderr)
        .with_ansi(false)
        .with_target(false)
        .try_init();
}

/// stderr for log lines: each write is one formatted event; its text is
/// shown through [`crate::text::one_line`] (a `\r` or `\n` inside a
/// message cannot start a forged line) and its final newline kept.
struct NeutralStderr;

impl std::io::Write for NeutralStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let (body, end) = match text.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (text.as_ref(), ""),
        };
        let line = format!("{}{end}", crate::text::one_line(body));
        std::io::stderr().lock().write_all(line.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().lock().flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn exec_parses_as_the_whole_cli_does() {
        let cases: &[&[&str]] = &[
            &["exec", "--", "true"],
            &["exec", "--", "sh", "-c", "echo hi"],
            &[
                "-C",
                "/tmp",
                "exec",
                "--allow-net",
                "--read",
                "/x",
                "--",
                "ls",
            ],
            &[
                "--project=/p",
                "--log=debug",
                "exec",
                "--env",
                "A=b",
                "--",
                "x",
            ],
            &["-C/p", "--tools-toml", "t.toml", "exec", "--", "x"],
            &["-q", "exec", "--", "x"],
            &["--quiet", "-C", "/p", "exec", "-q", "--", "x"],
            &["-q", "exec", "true"],
            &[
                "exec",
                "--profile",
                "ci",
                "--with",
                "rust",
                "--",
                "cargo",
                "build",
            ],
            &["exec", "--timeout", "5s", "--json", "--explain", "--", "x"],
            &["exec", "--help"],
            &["exec", "-h"],
            &["exec", "--version"],
            &["exec"],
            &["exec", "true"],
            &["exec", "--polcy", "x", "--", "true"],
            &["exec", "--allow-net", "--allow-net", "--", "x"],
            &["exec", "--", "-C", "exec"],
            &["-C", "exec", "exec", "--", "x"],
            &["-C", "-h", "exec", "--", "x"],
            &["--help", "exec"],
            &["-h", "exec"],
            &["--version", "exec"],
            &["-V"],
            &["--log", "exec"],
            &["exec", "-C", "/q", "--", "x"],
            &["list"],
            &["exe", "--", "x"],
            &[],
        ];
        for case in cases {
            let mut args: Vec<std::ffi::OsString> = vec!["toolcage".into()];
            args.extend(case.iter().map(|a| a.into()));
            let fast = parse_from(args.clone());
            let whole = Cli::try_parse_from(args);
            match (fast, whole) {
                (Ok(a), Ok(b)) => assert_eq!(format!("{a:?}"), format!("{b:?}"), "{case:?}"),
                (Err(a), Err(b)) => {
                    assert_eq!(a.kind(), b.kind(), "{case:?}");
                    assert_eq!(a.render().to_string(), b.render().to_string(), "{case:?}");
                }
                (a, b) => panic!("{case:?}: {a:?} vs {b:?}"),
            }
        }
    }
}
