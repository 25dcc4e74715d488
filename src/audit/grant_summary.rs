//! What a person (the approval prompt) and the audit log see of a grant:
//! its roots, network and timeout.

use crate::policy::Grant;
use crate::text::format_duration;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What a person needs to see to decide about a grant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GrantSummary {
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    /// `off`, `on`, `tcp connect [..] bind [..]` or `domains allow [..]`.
    pub network: String,
    pub timeout_secs: f64,
}

impl GrantSummary {
    pub fn of(g: &Grant) -> GrantSummary {
        let network = g.network.summary();
        GrantSummary {
            read: g.read.clone(),
            write: g.write.clone(),
            network,
            timeout_secs: g.timeout.as_secs_f64(),
        }
    }

    /// `30s`, `2m`, ...
    pub(crate) fn timeout_text(&self) -> String {
        format_duration(std::time::Duration::from_secs_f64(
            self.timeout_secs.max(0.0),
        ))
    }
}
