//! The isolation a call runs in and what it lacks there: the words the
//! mode decision ([`super::mode`]) and the enforcement report
//! ([`super::report`]) share, in a leaf of their own.

use serde::Serialize;

/// The isolation a call runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IsolationMode {
    Namespaces,
    NamespaceFree,
    /// No process at all: toolcage makes the call itself (an OpenCrabs
    /// http tool), under the grant's network policy.
    InProcess,
}

impl IsolationMode {
    pub fn name(self) -> &'static str {
        match self {
            IsolationMode::Namespaces => "namespaces",
            IsolationMode::NamespaceFree => "namespace-free",
            IsolationMode::InProcess => "in-process",
        }
    }
}

/// A part of the namespaced sandbox that namespace-free mode lacks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Lack {
    /// Short name, as `[sandbox] namespace_free_accepts` spells it.
    pub id: &'static str,
    /// What is missing, for people.
    pub part: String,
    /// The layer that covers the gap for this grant; `None`: nothing does.
    pub compensated_by: Option<String>,
}
