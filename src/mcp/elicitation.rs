//! Approval over MCP: the person behind the client is asked through
//! elicitation when the client declared the capability; otherwise no one
//! can be asked and the gate denies the call (never fails open).

use crate::gate::{ApprovalAnswer, ApprovalChannel, ApprovalRequest, BoxFuture};
use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::{Peer, RoleServer};
use std::time::Duration;

/// Asks the person behind the MCP client: a form elicitation with nothing
/// to fill in, whose accept / decline / cancel is the answer.
pub(crate) struct Elicitation {
    pub(crate) peer: Peer<RoleServer>,
    pub(crate) timeout: Duration,
}

impl ApprovalChannel for Elicitation {
    fn name(&self) -> &str {
        "elicitation"
    }

    fn can_ask(&self) -> bool {
        !self.peer.supported_elicitation_modes().is_empty()
    }

    fn ask<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer> {
        let message = format!(
            "{}\nAccept to run this call, decline to refuse it.",
            crate::gate::terminal::describe(request)
        );
        Box::pin(self.confirm(message))
    }
}

impl Elicitation {
    /// Ask the person to accept or decline what `message` describes.
    pub(crate) async fn confirm(&self, message: String) -> ApprovalAnswer {
        {
            if self.peer.supported_elicitation_modes().is_empty() {
                return ApprovalAnswer::NoChannel;
            }
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
        }
    }
}
