//! Calls a running call makes (an A3S script's `ctx.tool`): each goes
//! through the same pipeline as the outer call, so it is validated, gated
//! (rate limits, concurrency cap, approval) and recorded in the audit log
//! in the outer call's session marked with the outer tool
//! (`<session>>tool`). It runs inline on the outer call's thread,
//! in the outer call's run slot, with its cancel token; approval is asked
//! where the outer call's was (the terminal, the MCP client), or refused
//! where nobody can be asked, and the refusal is recorded.
//!
//! The call carries the chain of scripts that made it ([`Surface::callers`],
//! then [`PreparedCall::callers`]): the inner call below runs on a thread of
//! its own, so nothing kept per thread could count how deep scripts nest.

use super::{Job, JobDone, NotRun, Pipeline, Surface, Turn};
use crate::call::{CallError, CallResult, PreparedCall};
use crate::discover::{ToolKind, ToolSpec};
use crate::gate::{ApprovalChannel, BoxFuture, SessionId};
use crate::sandbox::CancelToken;
use serde_json::Value;
use std::cell::RefCell;
use std::sync::Arc;

/// Scripts calling scripts: at most this many run nested (the outer one
/// counts).
pub(crate) const MAX_DEPTH: usize = 4;

/// Why a call of `tool` made by `callers` (outermost first) is too deep to
/// run: a script past [`MAX_DEPTH`] nested scripts, or any tool called
/// from deeper than the deepest script may run. `None`: it may run.
pub(crate) fn too_deep(tool: &ToolSpec, callers: &[String]) -> Option<String> {
    let script = matches!(tool.kind, ToolKind::AgentdirScript { .. });
    let fits = match script {
        true => callers.len() < MAX_DEPTH,
        false => callers.len() <= MAX_DEPTH,
    };
    if fits {
        return None;
    }
    let chain = callers
        .iter()
        .map(String::as_str)
        .chain([tool.name.as_str()])
        .collect::<Vec<_>>()
        .join(" → ");
    Some(format!(
        "{chain}: refused, scripts calling scripts nest at most {MAX_DEPTH} deep \
         (fix: have a script return its result instead of calling another script that deep)"
    ))
}

/// The pipeline the call running on this thread came through.
struct Outer {
    pipeline: Pipeline,
    surface: Arc<dyn Surface>,
    tool: String,
}

thread_local! {
    static OUTER: RefCell<Vec<Outer>> = const { RefCell::new(Vec::new()) };
}

/// While alive, calls made on this thread go through `pipeline`.
pub(super) struct Running;

impl Running {
    pub(super) fn enter(pipeline: &Pipeline, surface: &Arc<dyn Surface>, tool: &str) -> Running {
        OUTER.with(|o| {
            o.borrow_mut().push(Outer {
                pipeline: pipeline.clone(),
                surface: surface.clone(),
                tool: tool.to_string(),
            })
        });
        Running
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        OUTER.with(|o| {
            o.borrow_mut().pop();
        });
    }
}

/// Call `name` from inside the call running on this thread, through its
/// pipeline, as made by `callers` (the scripts above it, outermost first,
/// the calling one last); `None` when no call runs here through a pipeline
/// (an engine used directly: the caller runs it itself).
pub(crate) fn call(
    name: &str,
    args: Value,
    cancel: Option<&CancelToken>,
    callers: &[String],
) -> Option<Result<CallResult, CallError>> {
    let (pipeline, outer, tool) = OUTER.with(|o| {
        o.borrow()
            .last()
            .map(|t| (t.pipeline.clone(), t.surface.clone(), t.tool.clone()))
    })?;
    // The outer session, marked with the tool whose run made the call: the
    // audit log links each inner record to its caller.
    let surface = Arc::new(Inner {
        session: SessionId::new(format!("{}>{tool}", outer.session().0)),
        outer,
        cancel: cancel.cloned(),
        tool,
        callers: callers.to_vec(),
    });
    // On a thread of its own: the outer call may itself be driven by an
    // executor on this one (`toolcage call`), which cannot be entered twice.
    let name = name.to_string();
    Some(std::thread::scope(|s| {
        s.spawn(|| futures::executor::block_on(pipeline.call(&name, args, surface)))
            .join()
            .unwrap_or_else(|_| {
                Err(CallError::Internal(format!(
                    "{name}: the inner call failed"
                )))
            })
    }))
}

struct Inner {
    session: SessionId,
    /// The outer call's surface: its approval channel is this call's.
    outer: Arc<dyn Surface>,
    cancel: Option<CancelToken>,
    /// The tool whose run makes this call.
    tool: String,
    /// The scripts above this call, outermost first.
    callers: Vec<String>,
}

impl Surface for Inner {
    fn session(&self) -> &SessionId {
        &self.session
    }

    fn approval(&self) -> &dyn ApprovalChannel {
        self.outer.approval()
    }

    fn prepared(&self, _call: &Arc<PreparedCall>) {}

    fn callers(&self) -> &[String] {
        &self.callers
    }

    fn interrupted<'a>(&'a self, _: &'a str) -> BoxFuture<'a, NotRun> {
        Box::pin(std::future::pending())
    }

    /// The outer call's slot is this call's: it runs at once.
    fn turn<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<Turn, NotRun>> {
        let turn: Turn = Box::new(());
        Box::pin(std::future::ready(Ok(turn)))
    }

    fn carry<'a>(&'a self, _: &'a str, job: Job) -> BoxFuture<'a, Result<JobDone, CallError>> {
        Box::pin(std::future::ready(Ok(job(self.cancel.as_ref()))))
    }

    fn stopped_by(&self) -> Option<String> {
        None
    }

    fn gone(&self, name: &str) -> String {
        format!("{name}: not run (called by {})", self.tool)
    }
}
