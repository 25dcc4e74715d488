//! The engine: one project's policy layers and discovered tools, and the
//! tool side of the call pipeline ([`Toolbox`]): look up, validate,
//! resolve the grant, and run through the tool kind's runner.

use super::runner::runner_for;
use super::toolbox::Toolbox;
use super::{CallError, CallResult, Definition, PreparedCall, annotations, definition, validate};
use crate::discover::{Catalog, Options, ToolSpec};
use crate::gate::Setup;
use crate::gate::store::{FileStore, Store};
use crate::policy::{Context, Overrides, PolicyError, PolicyStack, Resolved, Sources, ToolInput};
use crate::sandbox::CancelToken;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Everything needed to serve calls for one project: its policy layers and
/// its discovered tools. `Send + Sync`; the MCP server shares one.
#[derive(Debug, Clone)]
pub struct Engine {
    pub ctx: Context,
    pub stack: PolicyStack,
    pub overrides: Overrides,
    pub options: Options,
    pub catalog: Catalog,
    /// Calls ask the sandbox for exact denial records (`call --explain`).
    pub explain: bool,
    /// Where rate limits and pins are kept across processes: the project's
    /// state directory unless the operator named a store (`--store`).
    pub store: Arc<dyn Store>,
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
        let ctx = Context::detect(project, crate::discover::agentdir::holds_a3s_tools)
            .map_err(|e| PolicyError::Input(format!("cannot resolve the project: {e}")))?;
        if !ctx.project.is_dir() {
            return Err(PolicyError::Input(format!(
                "project {} is not a directory (check -C/--project)",
                ctx.project.display()
            )));
        }
        let stack = crate::policy::load(sources, &ctx)?;
        catalog.tools.sort_by(|a, b| a.name.cmp(&b.name));
        let root = ctx
            .project
            .canonicalize()
            .unwrap_or_else(|_| ctx.project.clone());
        let store: Arc<dyn Store> = Arc::new(FileStore::new(&crate::audit::location::state_dir(
            &root, &ctx,
        )));
        Ok(Engine {
            ctx,
            stack,
            overrides,
            options,
            catalog,
            explain: false,
            store,
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
                Definition::new(tool, annotations::annotations(tool, &r.grant)),
                None,
            ),
            Err(e) => (Definition::new(tool, serde_json::json!({})), Some(e)),
        }
    }

    /// What the gate needs from the policy.
    pub fn gate_setup<'a>(&'a self, project_root: &'a Path) -> Setup<'a> {
        Setup {
            project_root,
            ctx: &self.ctx,
            stack: &self.stack,
            overrides: &self.overrides,
            store: &self.store,
        }
    }

    /// Look up → refuse a kind that cannot run → validate → resolve the
    /// grant. Nothing runs.
    pub fn prepare(&self, name: &str, args: serde_json::Value) -> Result<PreparedCall, CallError> {
        let tool = self
            .catalog
            .get(name)
            .ok_or_else(|| CallError::unknown_tool(&self.catalog, name))?;
        // Its file removed since discovery (no reload yet, or none at all:
        // `serve --no-watch`): gone, not a policy that cannot be applied.
        if let Some(path) = removed(tool) {
            return Err(CallError::Removed {
                name: tool.name.clone(),
                path,
            });
        }
        let runner = runner_for(tool);
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
            runs: runner.runs(),
            callers: Vec::new(),
        })
    }

    /// Encode the arguments, run under the grant, format the result: the
    /// tool kind's [`super::runner::ToolRunner`]. Blocking; `cancel` kills
    /// the call's process tree.
    pub fn execute(
        &self,
        call: &PreparedCall,
        cancel: Option<&CancelToken>,
    ) -> Result<CallResult, CallError> {
        runner_for(&call.tool).execute_in(
            &call.tool.name,
            &call.args,
            &call.resolved.grant,
            super::runner::Run {
                cancel,
                explain: self.explain,
                callers: &call.callers,
            },
            self,
        )
    }

    /// [`Engine::prepare`] then [`Engine::execute`], without a gate or an
    /// audit record (tests, embedders).
    pub fn call(
        &self,
        name: &str,
        args: serde_json::Value,
        cancel: Option<&CancelToken>,
    ) -> Result<CallResult, CallError> {
        let prepared = self.prepare(name, args)?;
        self.execute(&prepared, cancel)
    }
}

/// The file of `tool` that no longer exists, if one does not: of the paths
/// its call must read (its script, its directory), the tool's own file
/// when that is gone too.
fn removed(tool: &ToolSpec) -> Option<PathBuf> {
    let gone = |p: &Path| matches!(p.symlink_metadata(), Err(e) if e.kind() == std::io::ErrorKind::NotFound);
    let missing = tool.needs_read.iter().find(|p| gone(p))?;
    Some(match gone(&tool.source) {
        true => tool.source.clone(),
        false => missing.clone(),
    })
}

impl Toolbox for Engine {
    fn prepare(&self, name: &str, args: serde_json::Value) -> Result<PreparedCall, CallError> {
        Engine::prepare(self, name, args)
    }

    fn execute(
        &self,
        call: &PreparedCall,
        cancel: Option<&CancelToken>,
    ) -> Result<CallResult, CallError> {
        Engine::execute(self, call, cancel)
    }

    fn spec(&self, name: &str) -> Option<ToolSpec> {
        self.catalog.get(name).cloned()
    }
}
