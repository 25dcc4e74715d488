//! One [`ToolRunner`] per kind of tool: how a call of that kind is described
//! to the person approving it, which files its definition digest covers,
//! and how it runs. A new kind (an http tool, an upstream MCP server, a
//! script engine) is a new implementation here plus the discover module of
//! its format; the pipeline, the CLI and the MCP server do not change.
//!
//! Every kind implements [`ToolRunner`]; the kinds whose call is one
//! command in the sandbox also implement [`Encode`] (the command they
//! build), and their `execute` is `run_command`.
//!
//! - [`octomind`]: the script, arguments on stdin and as environment.
//! - [`clawd`]: `<interpreter> <entrypoint>`, arguments on stdin.
//! - [`opencrabs`]: `sh -c` with positional parameters; the http executor
//!   runs no process: toolcage makes the request ([`http`]).
//! - [`agentdir`]: `kind: script`, run by a sandboxed QuickJS child
//!   ([`super::script`]); `kind: mcp` tools run through the gateway.

pub(crate) mod agentdir;
pub(crate) mod clawd;
pub(crate) mod http;
pub(crate) mod octomind;
pub(crate) mod opencrabs;

use super::encode::{EncodeError, Encoded};
use super::toolbox::Toolbox;
use super::{CallError, CallResult, result};
use crate::discover::{ToolKind, ToolSpec};
use crate::policy::Grant;
use crate::sandbox::{CancelToken, SandboxError};
use serde_json::{Map, Value};
use std::path::PathBuf;

/// How one call runs, besides its grant: `cancel` kills its process tree;
/// `explain` asks the sandbox for exact denial records where it can
/// (`--explain`: the Landlock domain logs its refusals to the audit log);
/// `callers` are the scripts whose `ctx.tool` made the call, outermost
/// first (a script's own calls are made one level deeper).
#[derive(Clone, Copy, Default)]
pub(crate) struct Run<'a> {
    pub(crate) cancel: Option<&'a CancelToken>,
    pub(crate) explain: bool,
    pub(crate) callers: &'a [String],
}

/// How calls of one kind of tool run. Object-safe: [`runner_for`] hands
/// out `Box<dyn ToolRunner>` borrowing the tool's spec. Every kind answers
/// every method (a default is the right answer for the kinds that keep it).
pub(crate) trait ToolRunner {
    /// Why no call of this tool can run here (an upstream server's tool
    /// outside the gateway): checked before the arguments, refused with
    /// this text.
    fn refusal(&self) -> Option<String> {
        None
    }

    /// The command line a person approving a call is shown: the script,
    /// `<interpreter> <entrypoint>`, `sh -c '<template>'`. Raw project
    /// text: whoever shows it neutralises it ([`crate::text`]).
    fn runs(&self) -> String;

    /// The files whose content is part of the definition digest: the file
    /// that defines the tool and what it executes.
    fn files(&self) -> Vec<PathBuf>;

    /// Run one call with validated `args` under `grant` and format its
    /// result. Blocking. A kind that runs one command in the sandbox
    /// builds it ([`Encode`]) and hands it to `run_command`.
    fn execute(
        &self,
        tool: &str,
        args: &Map<String, Value>,
        grant: &Grant,
        run: Run<'_>,
    ) -> Result<CallResult, CallError>;

    /// [`ToolRunner::execute`] where `toolbox` runs the calls this call
    /// makes itself (a script's `ctx.tool`). Most kinds make none.
    fn execute_in(
        &self,
        tool: &str,
        args: &Map<String, Value>,
        grant: &Grant,
        run: Run<'_>,
        _toolbox: &dyn Toolbox,
    ) -> Result<CallResult, CallError> {
        self.execute(tool, args, grant, run)
    }
}

/// The kinds whose call is one command in the sandbox (Octomind, clawd,
/// the OpenCrabs shell executor): the command they build.
pub(crate) trait Encode {
    /// The sandboxed command for validated `args` under `grant`.
    fn encode(&self, args: &Map<String, Value>, grant: &Grant) -> Result<Encoded, EncodeError>;
}

/// [`ToolRunner::execute`] of an [`Encode`] kind: encode, run under
/// `grant`, format the result.
fn run_command(
    kind: &impl Encode,
    tool: &str,
    args: &Map<String, Value>,
    grant: &Grant,
    run: Run<'_>,
) -> Result<CallResult, CallError> {
    let mut encoded = kind.encode(args, grant).map_err(|e| match e {
        EncodeError::Invalid(message) => CallError::InvalidArguments {
            tool: tool.to_string(),
            message,
        },
        EncodeError::Internal(m) => CallError::Sandbox(SandboxError::Prepare(m)),
    })?;
    // `encoded` (and its parameters file) lives until the run is over.
    encoded.command.explain = run.explain;
    let outcome = crate::sandbox::run(grant, &encoded.command, run.cancel)?;
    drop(encoded);
    let (text, is_error) = result::format(&outcome, grant);
    Ok(CallResult {
        text,
        is_error,
        outcome,
        content: None,
        content_kinds: None,
    })
}

/// The runner for `tool`'s kind.
pub(crate) fn runner_for(tool: &ToolSpec) -> Box<dyn ToolRunner + '_> {
    match &tool.kind {
        // One command in the sandbox (`Encode`).
        ToolKind::Octomind { program } => Box::new(octomind::Executable { tool, program }),
        ToolKind::Clawd {
            interpreter,
            entrypoint,
        } => Box::new(clawd::Entrypoint {
            tool,
            interpreter: interpreter.as_deref(),
            entrypoint,
        }),
        ToolKind::OpencrabsShell { command, .. } => Box::new(opencrabs::Shell { command }),
        // No command: toolcage makes the request, runs the script runner,
        // or refuses (an upstream tool outside the gateway).
        ToolKind::OpencrabsHttp { method, url, .. } => {
            Box::new(opencrabs::Http { tool, method, url })
        }
        ToolKind::AgentdirScript { path, .. } => Box::new(agentdir::JsScript { tool, path }),
        ToolKind::Upstream { server, runs, .. } => {
            Box::new(agentdir::Upstream { tool, server, runs })
        }
    }
}

/// `paths` in order, each once.
fn distinct(paths: &[&std::path::Path]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for p in paths {
        if !out.iter().any(|q| q == p) {
            out.push(p.to_path_buf());
        }
    }
    out
}
