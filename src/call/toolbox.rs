//! The tool side of the pipeline ([`Toolbox`]): what the pipeline asks of
//! the tools it runs. Its own file so the runners, the engine and the
//! pipeline all depend on it and not on one another.

use super::{CallError, CallResult, PreparedCall};
use crate::discover::ToolSpec;
use crate::sandbox::CancelToken;
use serde_json::Value;

/// The tool side of the pipeline: look up, validate and resolve a call,
/// and run it. [`super::Engine`] is the real one; tests install fakes.
pub trait Toolbox: Send + Sync + 'static {
    /// Look up, validate the arguments, resolve the grant. Nothing runs.
    fn prepare(&self, name: &str, args: Value) -> Result<PreparedCall, CallError>;
    /// Encode, run, format. Blocking; `cancel` kills what the call started.
    fn execute(
        &self,
        call: &PreparedCall,
        cancel: Option<&CancelToken>,
    ) -> Result<CallResult, CallError>;
    /// The discovered tool behind `name`, for the record of a call refused
    /// before the gate.
    fn spec(&self, _name: &str) -> Option<ToolSpec> {
        None
    }
}
