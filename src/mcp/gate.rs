//! The seam for approval, rate limits and audit (issue 5): a [`Gate`] sees
//! every prepared call after validation and before anything runs, with the
//! client's peer (for elicitation when the client declared it). A refusal
//! becomes a `tools/call` result with `isError: true` and the refusal's text.
//!
//! The server runs without a gate (every prepared call proceeds) until one
//! is installed with [`super::McpServer::with_gate`].

use crate::call::{CallError, PreparedCall};
use futures::future::BoxFuture;
use rmcp::{Peer, RoleServer};

pub trait Gate: Send + Sync + 'static {
    /// Allow (`Ok`) or refuse (`Err`, e.g. `CallError::Denied`) one call.
    /// May await the client (elicitation); the call's cancellation drops it.
    fn check<'a>(
        &'a self,
        call: &'a PreparedCall,
        peer: &'a Peer<RoleServer>,
    ) -> BoxFuture<'a, Result<(), CallError>>;
}
