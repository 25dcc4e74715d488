//! `toolcage exec`: run any command under the sandbox.

use super::signals::{self, Interrupts};
use super::{PolicyArgs, status};
use crate::policy::{self, Context, Sources};
use crate::sandbox::{self, Exit};
use clap::Args;
use std::ffi::OsString;
use std::path::Path;

#[derive(Debug, Args)]
pub(crate) struct ExecArgs {
    #[command(flatten)]
    pub(crate) policy: PolicyArgs,
    /// Print the outcome and enforcement report as JSON on stderr after the command ends.
    #[arg(long)]
    pub(crate) json: bool,
    /// After the command, print what the sandbox refused and what would grant it.
    #[arg(long)]
    pub(crate) explain: bool,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub(crate) command: Vec<OsString>,
    #[command(flatten)]
    pub(crate) opts: super::options::ProjectOpts,
}

/// Run `args` with `project`'s policy; `here` is the directory the command
/// runs in when it lies below the project (found up from it).
pub(crate) fn run(project: &Path, here: Option<&Path>, args: &ExecArgs) -> u8 {
    match try_run(project, here, args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("toolcage: {e}");
            if args.json {
                // As a run's outcome (on stderr: stdout is the command's):
                // nothing ran, and why.
                let v = serde_json::json!({
                    "error": e.message,
                    "exit_status": e.status,
                    "enforcement": crate::audit::record::not_ran(format!("nothing ran: {}", e.message)),
                    "denials": [],
                });
                eprintln!("{v}");
            }
            e.status
        }
    }
}

/// A failure of toolcage itself, with the exit status it maps to.
#[derive(Debug)]
struct ExecError {
    message: String,
    status: u8,
}

impl std::fmt::Display for ExecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

fn internal(message: impl ToString) -> ExecError {
    ExecError {
        message: message.to_string(),
        status: status::INTERNAL,
    }
}

fn try_run(project: &Path, here: Option<&Path>, args: &ExecArgs) -> Result<u8, ExecError> {
    // Made on another CPU while the policy is resolved (sandbox/netns.rs).
    sandbox::network_namespace_ahead();
    let ctx = Context::detect(project, crate::discover::agentdir::holds_a3s_tools)
        .map_err(|e| internal(format!("cannot resolve the project: {e}")))?;
    if !ctx.project.is_dir() {
        return Err(internal(format!(
            "project {} is not a directory (check -C/--project)",
            ctx.project.display()
        )));
    }
    let overrides = args.policy.overrides();
    let (_, resolved) =
        policy::load_and_resolve(&sources(&args.policy), &ctx, &overrides).map_err(internal)?;
    let cmd = sandbox::Command {
        argv: args.command.clone(),
        inherit_stdio: true,
        // --explain reads the command's stderr on its way to the terminal,
        // to infer what was refused (it is then a pipe, not the terminal).
        tee_stderr: args.explain,
        explain: args.explain,
        cwd: here.map(Path::to_path_buf),
        ..Default::default()
    };
    let program = args.command[0].to_string_lossy();
    if let Some(note) = super::hints::shadowed(&program, &resolved, &ctx) {
        super::notice(&note);
    }
    let interrupts = watch_interrupts();
    let terminal = super::terminal::Saved::take();
    let ran = sandbox::run(
        &resolved.grant,
        &cmd,
        interrupts.as_ref().map(Interrupts::token),
    );
    drop(terminal);
    let outcome = ran.map_err(|e| ExecError {
        message: super::hints::explain(&e, &resolved, &ctx),
        status: super::status::of_sandbox(e.kind()),
    })?;
    if let (Exit::Cancelled, Some(sig)) = (
        outcome.exit,
        interrupts.as_ref().and_then(Interrupts::received),
    ) {
        eprintln!(
            "toolcage: the command was killed with its process tree: toolcage got {}",
            signals::name(sig)
        );
        return Ok(signals::exit_status(sig));
    }
    report(args, &outcome, &resolved, &ctx)?;
    // A change to a protected path toolcage could not undo fails the
    // command, whatever its own status (never exit 0 with a warning).
    if let Some(reason) = outcome.not_undone() {
        super::say(&reason);
        return Ok(status::INTERNAL);
    }
    Ok(match outcome.exit {
        Exit::Timeout => {
            eprintln!(
                "toolcage: timed out after {} (raise it with --timeout)",
                policy::format_duration(resolved.grant.timeout)
            );
            status::TIMEOUT
        }
        exit => u8::try_from(exit.shell_status()).unwrap_or(status::INTERNAL),
    })
}

/// SIGTERM, SIGINT and SIGHUP kill the command's tree and return here,
/// so the terminal is put back on that way out too (SIGKILL cannot be).
fn watch_interrupts() -> Option<Interrupts> {
    match Interrupts::watch() {
        Ok(i) => Some(i),
        Err(e) => {
            super::notice(&format!(
                "warning: cannot catch SIGTERM/SIGINT/SIGHUP ({e}); a signal now leaves the terminal as the command left it"
            ));
            None
        }
    }
}

/// What the run tells the operator on stderr: degraded enforcement,
/// protected paths, refusals, and with `--json` the outcome.
fn report(
    args: &ExecArgs,
    outcome: &sandbox::Outcome,
    resolved: &policy::Resolved,
    ctx: &Context,
) -> Result<(), ExecError> {
    if !outcome.enforcement.degraded.is_empty() {
        super::notice(&format!(
            "warning: ran degraded: {}",
            outcome.enforcement.degraded.join("; ")
        ));
    }
    for note in outcome.protected_notes("command") {
        super::notice(&format!("warning: {note}"));
    }
    // Network refusals are exact and few: shown (domain mode) unless
    // --quiet.
    if !args.explain && !super::quiet() {
        for l in super::explain::lines(&outcome.denials) {
            eprintln!("{l}");
        }
    }
    super::explain::report(&outcome.denials, args.explain, false, args.explain);
    if args.json {
        // The outcome, and the PATH directories the call did not get.
        let mut json = serde_json::to_value(outcome).map_err(internal)?;
        let dropped = resolved.path_dropped(ctx);
        json["path_dropped"] = serde_json::to_value(dropped).map_err(internal)?;
        eprintln!("{json}");
    }
    Ok(())
}

/// The policy layers named on the command line.
pub(crate) fn sources(args: &PolicyArgs) -> Sources {
    Sources {
        profile: args.profile.clone(),
        policy_file: args.policy.clone(),
    }
}
