//! What `list` and `check` say about a tool beyond its definition, from
//! its resolved grant: whether a person must approve its calls, and why.

use crate::discover::ToolSpec;
use crate::gate::mode_name;
use crate::policy::{ApprovalMode, Resolved};
use serde::Serialize;

/// A tool whose calls wait for a person's yes.
#[derive(Debug, Clone, Serialize)]
pub struct Approval {
    /// `always`, `once` or `once-per-args`.
    pub mode: &'static str,
    /// Where the mode came from, with what would change it.
    pub why: String,
}

impl Approval {
    /// One line: "asks for approval before every call: <why>".
    pub fn text(&self) -> String {
        let when = match self.mode {
            "always" => "before every call",
            "once" => "at its first call in a session",
            _ => "once for each distinct set of arguments",
        };
        format!("asks for approval {when}: {}", self.why)
    }
}

/// The approval `tool`'s calls need under `resolved`, if any. A format's
/// default that raised it (an OpenCrabs tool without `requires_approval`)
/// is named with the key that changes it; otherwise the policy line the
/// mode came from, as `toolcage policy` shows it.
pub fn approval(tool: &ToolSpec, resolved: &Resolved) -> Option<Approval> {
    let mode = resolved.grant.approval;
    if mode == ApprovalMode::Never {
        return None;
    }
    let source = resolved
        .provenance
        .iter()
        .find(|p| p.key == "approval")
        .map_or_else(|| "built-in".to_string(), |p| p.source.clone());
    let why = match &tool.requests.approval_default {
        Some(default) if source.contains(default.as_str()) => default.clone(),
        _ => format!("approval mode {} ({source})", mode_name(mode)),
    };
    Some(Approval {
        mode: mode_name(mode),
        why,
    })
}
