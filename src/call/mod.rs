//! One call, end to end (DESIGN.md section 2):
//! validate → gate (approval, rate limit: the surfaces do this between
//! [`Engine::prepare`] and [`Engine::run`]) → encode args → run → format.
//!
//! Per-format argument encoding and result formatting live in submodules.

pub mod annotations;
pub mod definition;
pub mod encode;
pub mod params_file;
pub mod result;
pub mod runner;
pub mod validate;

use crate::discover::{Catalog, Options, ToolSpec};
use crate::policy::{Context, Overrides, PolicyError, PolicyStack, Resolved, Sources, ToolInput};
use crate::sandbox::{CancelToken, Outcome, SandboxError};
pub use definition::Definition;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Everything needed to serve calls for one project: its policy layers and
/// its discovered tools. `Send + Sync`; the MCP server shares one.
#[derive(Debug, Clone)]
pub struct Engine {
    pub ctx: Context,
    pub stack: PolicyStack,
    pub overrides: Overrides,
    pub options: Options,
    pub catalog: Catalog,
}

/// A validated call with its resolved grant, ready for the gate and the run.
#[derive(Debug, Clone)]
pub struct PreparedCall {
    pub tool: ToolSpec,
    /// The arguments after validation (defaults and coercions applied).
    pub args: serde_json::Map<String, serde_json::Value>,
    pub resolved: Resolved,
    /// [`definition::digest`] of the tool as prepared: what an approval
    /// of this call is bound to.
    pub definition_sha256: String,
}

/// What the agent sees: the text (stdout, then `[stderr]` and stderr), and
/// whether it is an error (non-zero exit, signal, timeout).
#[derive(Debug, Clone, Serialize)]
pub struct CallResult {
    pub text: String,
    pub is_error: bool,
    pub outcome: Outcome,
}

/// A call that did not run, or could not.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("unknown tool '{name}'{}", did_you_mean(.known))]
    UnknownTool { name: String, known: Vec<String> },
    #[error("invalid arguments for {tool}: {message}")]
    InvalidArguments { tool: String, message: String },
    #[error("{0}")]
    Denied(String),
    #[error("{0}")]
    Unsupported(String),
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
}

fn did_you_mean(known: &[String]) -> String {
    if known.is_empty() {
        " (no tools discovered; run `toolcage check`)".into()
    } else {
        format!(" (known: {})", known.join(", "))
    }
}

/// What kind of failure a [`CallError`] is: the surfaces decide what each
/// means to them (the CLI's exit status, an MCP error or `isError` result).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallErrorKind {
    UnknownTool,
    InvalidArguments,
    Denied,
    Unsupported,
    Policy,
    Sandbox,
}

impl CallError {
    pub fn kind(&self) -> CallErrorKind {
        match self {
            CallError::UnknownTool { .. } => CallErrorKind::UnknownTool,
            CallError::InvalidArguments { .. } => CallErrorKind::InvalidArguments,
            CallError::Denied(_) => CallErrorKind::Denied,
            CallError::Unsupported(_) => CallErrorKind::Unsupported,
            CallError::Policy(_) => CallErrorKind::Policy,
            CallError::Sandbox(_) => CallErrorKind::Sandbox,
        }
    }
}

impl Engine {
    /// Load the policy layers and discover the project's tools.
    pub fn load(
        project: &Path,
        sources: &Sources,
        overrides: Overrides,
        options: Options,
    ) -> Result<Engine, PolicyError> {
        let mut engine =
            Engine::with_catalog(project, sources, overrides, options, Catalog::default())?;
        engine.rediscover();
        Ok(engine)
    }

    /// Like [`Engine::load`], with a catalog built by the caller instead of
    /// discovered (tests, embedders). The tools are sorted by name.
    pub fn with_catalog(
        project: &Path,
        sources: &Sources,
        overrides: Overrides,
        options: Options,
        mut catalog: Catalog,
    ) -> Result<Engine, PolicyError> {
        let ctx = Context::detect(project)
            .map_err(|e| PolicyError::Input(format!("cannot resolve the project: {e}")))?;
        if !ctx.project.is_dir() {
            return Err(PolicyError::Input(format!(
                "project {} is not a directory (check -C/--project)",
                ctx.project.display()
            )));
        }
        let stack = crate::policy::load(sources, &ctx)?;
        catalog.tools.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Engine {
            ctx,
            stack,
            overrides,
            options,
            catalog,
        })
    }

    /// The project root, with symlinks resolved (falls back to the path as given).
    pub fn project_root(&self) -> PathBuf {
        self.ctx
            .project
            .canonicalize()
            .unwrap_or_else(|_| self.ctx.project.clone())
    }

    /// Discover again (hot reload); the policy layers stay.
    pub fn rediscover(&mut self) {
        let mut catalog = crate::discover::discover(&self.project_root(), &self.options);
        catalog.tools.sort_by(|a, b| a.name.cmp(&b.name));
        self.catalog = catalog;
    }

    /// The grant for `tool` (its requests bounded by the operator's policy).
    pub fn resolve(&self, tool: &ToolSpec) -> Result<Resolved, PolicyError> {
        let input = ToolInput {
            name: &tool.name,
            requests: &tool.requests,
            extra_read: tool.needs_read.clone(),
        };
        self.stack.resolve(&self.ctx, &self.overrides, Some(&input))
    }

    /// The tool's MCP definition, the one `toolcage schema` prints and
    /// `tools/list` serves: annotations from its resolved grant. When the
    /// grant does not resolve, the definition has no annotations and the
    /// error says why (`schema` refuses, `tools/list` warns).
    pub fn definition(&self, tool: &ToolSpec) -> (Definition, Option<PolicyError>) {
        match self.resolve(tool) {
            Ok(r) => (
                Definition::new(tool, annotations::annotations(&r.grant)),
                None,
            ),
            Err(e) => (Definition::new(tool, serde_json::json!({})), Some(e)),
        }
    }

    /// Look up and validate; resolve the grant. Nothing runs.
    pub fn prepare(&self, name: &str, args: serde_json::Value) -> Result<PreparedCall, CallError> {
        let tool = self
            .catalog
            .get(name)
            .ok_or_else(|| CallError::UnknownTool {
                name: name.to_string(),
                known: self.catalog.tools.iter().map(|t| t.name.clone()).collect(),
            })?;
        let runner = runner::runner_for(tool);
        if let Some(refusal) = runner.refusal() {
            return Err(CallError::Unsupported(refusal));
        }
        let args =
            validate::arguments(tool, args).map_err(|message| CallError::InvalidArguments {
                tool: tool.name.clone(),
                message,
            })?;
        let resolved = self.resolve(tool)?;
        let definition_sha256 = definition::digest(tool, &resolved.grant);
        Ok(PreparedCall {
            tool: tool.clone(),
            args,
            resolved,
            definition_sha256,
        })
    }

    /// Encode the arguments, run under the grant, format the result.
    /// Blocking; cancel kills the call's process tree.
    pub fn run(
        &self,
        call: &PreparedCall,
        cancel: Option<&CancelToken>,
    ) -> Result<CallResult, CallError> {
        runner::runner_for(&call.tool).run(
            &call.tool.name,
            &call.args,
            &call.resolved.grant,
            cancel,
        )
    }

    /// [`Engine::prepare`] then [`Engine::run`], for surfaces without a gate.
    pub fn call(
        &self,
        name: &str,
        args: serde_json::Value,
        cancel: Option<&CancelToken>,
    ) -> Result<CallResult, CallError> {
        let prepared = self.prepare(name, args)?;
        self.run(&prepared, cancel)
    }
}
