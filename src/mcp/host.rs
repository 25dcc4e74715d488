//! What the MCP server needs from the rest of toolcage, as a small trait so
//! the protocol layer can be tested with a fake host, and its implementation
//! over [`Engine`] (with hot-reload snapshots).

use crate::call::{CallError, CallResult, Definition, Engine, PreparedCall, Toolbox};
use crate::sandbox::CancelToken;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

/// The tools a server exposes: their definitions for `tools/list`, the
/// tool side of the call pipeline ([`Toolbox`]), and hot reload.
pub trait ToolHost: Toolbox {
    /// The current definitions, sorted by name.
    fn tools(&self) -> Arc<[Definition]>;
    /// Discover again. True when the tool definitions changed.
    fn reload(&self) -> bool;
    /// Files and directories whose changes should trigger [`ToolHost::reload`].
    fn watch_paths(&self) -> Vec<PathBuf>;
    /// The engine behind the tools (its upstream servers, its policy), for
    /// a session's gateway; `None` for hosts without one (test fakes).
    fn engine(&self) -> Option<Engine> {
        None
    }
}

/// An [`Engine`] behind a swappable snapshot: a reload builds a new engine
/// and swaps it in; calls already running keep the snapshot they started on.
pub struct EngineHost {
    current: RwLock<Arc<Snapshot>>,
}

struct Snapshot {
    engine: Engine,
    defs: Arc<[Definition]>,
}

impl EngineHost {
    pub fn new(engine: Engine) -> EngineHost {
        let defs = definitions(&engine);
        EngineHost {
            current: RwLock::new(Arc::new(Snapshot { engine, defs })),
        }
    }

    fn snapshot(&self) -> Arc<Snapshot> {
        match self.current.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

impl Toolbox for EngineHost {
    fn prepare(&self, name: &str, args: Value) -> Result<PreparedCall, CallError> {
        self.snapshot().engine.prepare(name, args)
    }

    fn execute(
        &self,
        call: &PreparedCall,
        cancel: Option<&CancelToken>,
    ) -> Result<CallResult, CallError> {
        self.snapshot().engine.execute(call, cancel)
    }

    fn spec(&self, name: &str) -> Option<crate::discover::ToolSpec> {
        self.snapshot().engine.catalog.get(name).cloned()
    }
}

impl ToolHost for EngineHost {
    fn tools(&self) -> Arc<[Definition]> {
        self.snapshot().defs.clone()
    }

    fn reload(&self) -> bool {
        let old = self.snapshot();
        let mut engine = old.engine.clone();
        engine.rediscover();
        log_diagnostics(&engine.catalog.diagnostics);
        let defs = definitions(&engine);
        let changed = defs != old.defs;
        let new = Arc::new(Snapshot { engine, defs });
        match self.current.write() {
            Ok(mut g) => *g = new,
            Err(poisoned) => *poisoned.into_inner() = new,
        }
        changed
    }

    fn engine(&self) -> Option<Engine> {
        Some(self.snapshot().engine.clone())
    }

    fn watch_paths(&self) -> Vec<PathBuf> {
        let snap = self.snapshot();
        crate::discover::watch_paths(&snap.engine.ctx.project, &snap.engine.options)
    }
}

/// Discovery's diagnostics in the server log: each at debug, and one
/// warning line with the counts that points at `toolcage check` (which
/// explains each with its fix), so a start or a reload prints one line
/// however many files have something to say.
pub(crate) fn log_diagnostics(diagnostics: &[crate::discover::Diagnostic]) {
    use crate::discover::Severity;
    for d in diagnostics {
        tracing::debug!("{d}");
    }
    if diagnostics.is_empty() {
        return;
    }
    let errors = diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count();
    let warnings = diagnostics.len() - errors;
    let mut counts = Vec::new();
    if errors > 0 {
        counts.push(format!("{errors} error(s) (those tools are not served)"));
    }
    if warnings > 0 {
        counts.push(format!("{warnings} warning(s)"));
    }
    tracing::warn!(
        "tool files: {}; `toolcage check` explains each with its fix (or --log debug)",
        counts.join(", ")
    );
}

/// The `tools/list` entries for every discovered tool: the definitions
/// `toolcage schema` prints.
fn definitions(engine: &Engine) -> Arc<[Definition]> {
    engine
        .catalog
        .tools
        .iter()
        // A tool no call can run (a kind not supported yet) is not offered:
        // `toolcage check` and `list` still show it, with why.
        .filter(|t| match crate::call::runner::runner_for(t).refusal() {
            Some(why) => {
                tracing::debug!("{}: not offered: {why}", t.name);
                false
            }
            None => true,
        })
        .map(|t| {
            let (definition, unresolved) = engine.definition(t);
            if let Some(e) = unresolved {
                tracing::warn!("{}: cannot resolve its grant: {e}", t.name);
            }
            definition
        })
        .collect()
}
