//! Approval, rate limits and audit for `tools/call`: every prepared call
//! passes a [`Gate`] after validation and before anything runs.
//!
//! [`crate::gate::Gate`] is the real one: it asks a person through MCP
//! elicitation ([`Elicitation`]) when the client declared the capability,
//! and denies the call otherwise (never fails open). A denial becomes a
//! `tools/call` result with `isError: true` and the gate's text; every call
//! that reached the gate gets an audit record through [`Gate::finish`]
//! before its result is returned.

use crate::call::{CallError, PreparedCall};
use crate::discover::ToolSpec;
use crate::gate::{
    ApprovalAnswer, ApprovalRequest, AsyncApprovalChannel, BoxFuture, Decision, Ran, SessionId,
};
use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::{Peer, RoleServer};
use std::time::Duration;

/// What the server needs from a gate. Object-safe, so tests can install a
/// fake one with [`super::McpServer::with_gate`].
pub trait Gate: Send + Sync + 'static {
    /// Decide whether `call` may run; may await the client (elicitation).
    /// The call's cancellation drops the future.
    fn check<'a>(
        &'a self,
        call: &'a PreparedCall,
        session: &'a SessionId,
        peer: &'a Peer<RoleServer>,
        approval_timeout: Duration,
    ) -> BoxFuture<'a, Decision>;

    /// Record a call refused before the gate (unknown tool, invalid
    /// arguments, ...). `Err`: the audit write failed.
    fn reject(
        &self,
        tool: Option<&ToolSpec>,
        name: &str,
        args: &serde_json::Value,
        session: &SessionId,
        error: &CallError,
    ) -> Result<(), String>;

    /// Record the call's end (denied calls too) and release what the
    /// decision holds. `Err`: the audit write failed and the result must be
    /// withheld.
    fn finish(
        &self,
        call: &PreparedCall,
        session: &SessionId,
        decision: Decision,
        ran: Ran<'_>,
    ) -> Result<(), String>;

    /// Record that an allowed call is about to run (the `started` record),
    /// so it is in the log even if the server is killed. `Err`: the write
    /// failed and the call must not run.
    fn start(
        &self,
        _call: &PreparedCall,
        _session: &SessionId,
        _decision: &Decision,
    ) -> Result<(), String> {
        Ok(())
    }

    /// [`Gate::finish`] for a call stopped from outside (the server got
    /// SIGTERM): `stopped_by` says what stopped it.
    fn finish_stopped(
        &self,
        call: &PreparedCall,
        session: &SessionId,
        decision: Decision,
        ran: Ran<'_>,
        _stopped_by: Option<&str>,
    ) -> Result<(), String> {
        self.finish(call, session, decision, ran)
    }
}

impl Gate for crate::gate::Gate {
    fn check<'a>(
        &'a self,
        call: &'a PreparedCall,
        session: &'a SessionId,
        peer: &'a Peer<RoleServer>,
        approval_timeout: Duration,
    ) -> BoxFuture<'a, Decision> {
        Box::pin(async move {
            let channel = Elicitation {
                peer,
                timeout: approval_timeout,
            };
            self.check_async(call, session, &channel).await
        })
    }

    fn reject(
        &self,
        tool: Option<&ToolSpec>,
        name: &str,
        args: &serde_json::Value,
        session: &SessionId,
        error: &CallError,
    ) -> Result<(), String> {
        crate::gate::Gate::reject(self, tool, name, args, session, error)
    }

    fn finish(
        &self,
        call: &PreparedCall,
        session: &SessionId,
        decision: Decision,
        ran: Ran<'_>,
    ) -> Result<(), String> {
        crate::gate::Gate::finish(self, call, session, decision, ran)
    }

    fn start(
        &self,
        call: &PreparedCall,
        session: &SessionId,
        decision: &Decision,
    ) -> Result<(), String> {
        crate::gate::Gate::start(self, call, session, decision)
    }

    fn finish_stopped(
        &self,
        call: &PreparedCall,
        session: &SessionId,
        decision: Decision,
        ran: Ran<'_>,
        stopped_by: Option<&str>,
    ) -> Result<(), String> {
        crate::gate::Gate::finish_stopped(self, call, session, decision, ran, stopped_by)
    }
}

/// Asks the person behind the MCP client: a form elicitation with nothing
/// to fill in, whose accept / decline / cancel is the answer.
pub struct Elicitation<'a> {
    pub peer: &'a Peer<RoleServer>,
    pub timeout: Duration,
}

impl AsyncApprovalChannel for Elicitation<'_> {
    fn name(&self) -> &str {
        "elicitation"
    }

    fn can_ask(&self) -> bool {
        !self.peer.supported_elicitation_modes().is_empty()
    }

    fn ask<'b>(&'b self, request: &'b ApprovalRequest) -> BoxFuture<'b, ApprovalAnswer> {
        Box::pin(async move {
            if self.peer.supported_elicitation_modes().is_empty() {
                return ApprovalAnswer::NoChannel;
            }
            let message = format!(
                "{}\nAccept to run this call, decline to refuse it.",
                crate::gate::terminal::describe(request)
            );
            let schema: ElicitationSchema = match serde_json::from_value(
                serde_json::json!({"type": "object", "properties": {}}),
            ) {
                Ok(s) => s,
                Err(e) => {
                    tracing::error!("building the elicitation schema: {e}");
                    return ApprovalAnswer::NoChannel;
                }
            };
            let params = ElicitRequestParams::FormElicitationParams {
                meta: None,
                message,
                requested_schema: schema,
            };
            match tokio::time::timeout(self.timeout, self.peer.create_elicitation(params)).await {
                Err(_) => ApprovalAnswer::TimedOut,
                Ok(Err(e)) => {
                    tracing::warn!("elicitation failed: {e}");
                    ApprovalAnswer::NoChannel
                }
                Ok(Ok(r)) => match r.action {
                    ElicitationAction::Accept => ApprovalAnswer::Approved {
                        by: "elicitation".into(),
                    },
                    ElicitationAction::Decline => ApprovalAnswer::Declined,
                    _ => ApprovalAnswer::Cancelled,
                },
            }
        })
    }
}
