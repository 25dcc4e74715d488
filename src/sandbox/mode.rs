// PROVISIONAL: replaced by the lead's mode.rs
//! Which isolation a call gets on this host, and what it lacks there.
//! This stand-in knows only the host's namespace probe and Landlock's
//! gaps; the namespace-free mode itself is decided elsewhere.

use super::probe::HostSupport;
use crate::policy::Grant;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IsolationMode {
    Namespaces,
    NamespaceFree,
}

/// A part of the sandbox the call runs without.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lack {
    pub part: String,
    /// The layer that covers the gap; `None`: nothing does.
    pub compensated_by: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModeDecision {
    pub mode: IsolationMode,
    pub lacking: Vec<Lack>,
    /// Why this grant will not run here.
    pub refusal: Option<String>,
}

/// The mode `grant` runs in on `host`.
pub fn decide(grant: &Grant, host: &HostSupport) -> ModeDecision {
    let namespaces = host.namespaces.is_ok();
    let lacking = super::landlock::report_for(grant, namespaces)
        .missing
        .into_iter()
        .map(|d| Lack {
            part: d.feature,
            compensated_by: d.compensated.then_some(d.note),
        })
        .collect();
    match &host.namespaces {
        Ok(()) => ModeDecision {
            mode: IsolationMode::Namespaces,
            lacking,
            refusal: None,
        },
        Err(block) => ModeDecision {
            mode: IsolationMode::NamespaceFree,
            lacking,
            refusal: Some(block.message()),
        },
    }
}
