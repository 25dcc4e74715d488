//! What the gate decided about one call: a [`Verdict`], allowed with a
//! [`Permit`] or denied with a [`GateDenial`].

use super::approval::Refusal;
use super::persist::Slot;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

/// The gate's answer for one call.
#[derive(Debug)]
pub enum Verdict {
    /// Run it; the permit holds the tool's concurrency slot until the
    /// call's [`super::Admission`] ends.
    Allowed(Permit),
    Denied(GateDenial),
}

/// How an allowed call got past approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    /// Mode `never`.
    NotNeeded,
    /// A person said yes through `by` (`terminal`, `elicitation`, `--yes`);
    /// `remembered`: an earlier yes in the session covered it.
    Approved { by: String, remembered: bool },
}

/// Permission to run one call.
#[derive(Debug)]
pub struct Permit {
    pub approval: Approval,
    /// Pairs the call's `started` audit record with its final one.
    pub call_id: String,
    /// The arguments' digest, computed once for the call's records.
    args_sha256: std::sync::OnceLock<String>,
    _slot: Slot,
}

/// `<pid>-<nanoseconds since the epoch>-<counter>`: unique per process and
/// across processes writing the same log.
fn fresh_call_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{}-{nanos}-{n}", std::process::id())
}

impl Permit {
    pub(super) fn new(approval: Approval, slot: Slot) -> Permit {
        Permit {
            approval,
            call_id: fresh_call_id(),
            args_sha256: std::sync::OnceLock::new(),
            _slot: slot,
        }
    }

    /// The permit, with the arguments' digest the gate already computed.
    pub(super) fn with_digest(self, digest: String) -> Permit {
        let _ = self.args_sha256.set(digest);
        self
    }

    /// The digest of the call's arguments: `compute`d for the first of its
    /// records, then the same text for the other.
    pub(crate) fn args_sha256(&self, compute: impl FnOnce() -> String) -> &str {
        self.args_sha256.get_or_init(compute)
    }

    /// A permit that holds no concurrency slot, for gatekeepers other than
    /// [`super::Gate`] (tests, surfaces with their own limits).
    pub fn without_slot(approval: Approval) -> Permit {
        Permit::new(approval, Slot::Unlimited)
    }
}

/// Why a call was denied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DenyReason {
    Approval(Refusal),
    RateLimited,
    /// The tool's concurrency cap is reached.
    Concurrency,
    /// The gate cannot work safely: its state or the audit log is unusable
    /// or lies inside a write root. A configuration problem, not a refusal.
    Unavailable,
    /// The tool's grant does not allow what the call needs (an http tool
    /// whose host its network grant does not reach).
    Grant,
    /// An upstream server's tool whose definition changed since it was
    /// pinned: held back until the operator approves the change.
    Held,
    /// The tool's definition (its file, its script) changed between the
    /// moment a person was asked and the run: the yes was for another tool.
    ChangedSinceApproval,
}

impl DenyReason {
    /// The machine code recorded in the audit log.
    pub(crate) fn code(self) -> &'static str {
        match self {
            DenyReason::Approval(Refusal::Declined) => "approval_declined",
            DenyReason::Approval(Refusal::Cancelled) => "approval_cancelled",
            DenyReason::Approval(Refusal::TimedOut) => "approval_timed_out",
            DenyReason::Approval(Refusal::NoChannel) => "approval_no_channel",
            DenyReason::Approval(Refusal::PreApprovalNotAllowed) => "pre_approval_not_allowed",
            DenyReason::Approval(Refusal::Interrupted) => "approval_interrupted",
            DenyReason::RateLimited => "rate_limited",
            DenyReason::Concurrency => "concurrency",
            DenyReason::Unavailable => "gate_unavailable",
            DenyReason::Grant => "grant_denied",
            DenyReason::Held => "definition_changed",
            DenyReason::ChangedSinceApproval => "changed_since_approval",
        }
    }

    /// The layer that refused, as a result's `denials` name it.
    pub(crate) fn layer(self) -> &'static str {
        match self {
            DenyReason::Approval(_) => "approval",
            DenyReason::RateLimited => "rate_limit",
            DenyReason::Concurrency => "concurrency",
            DenyReason::Unavailable => "gate",
            DenyReason::Grant => "policy",
            DenyReason::Held => "pins",
            DenyReason::ChangedSinceApproval => "approval",
        }
    }
}

/// A call the gate denied: the reason, the text for the caller, and for
/// rate limits how long to wait. Not `sandbox::Denial`, one operation
/// refused while a call ran; [`GateDenial::entry`] makes one of those for
/// a result's `denials` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateDenial {
    pub reason: DenyReason,
    pub message: String,
    pub retry_after: Option<Duration>,
}

impl GateDenial {
    pub fn new(reason: DenyReason, message: String) -> GateDenial {
        GateDenial {
            reason,
            message,
            retry_after: None,
        }
    }

    /// The entry of a result's `denials` list for a call of `tool` this
    /// refused: by its layer and rule, as the sandbox's own are.
    pub(crate) fn entry(&self, tool: &str) -> crate::sandbox::Denial {
        crate::sandbox::Denial {
            layer: self.reason.layer(),
            op: "call",
            target: tool.to_string(),
            rule: Some(self.reason.code().to_string()),
            reason: self.message.clone(),
            fix: None,
            count: 1,
            inferred: false,
        }
    }
}
