//! What a run gives back: how the child ended ([`Exit`]), its output and
//! enforcement report ([`Outcome`]), and what toolcage undid or could not.

use crate::output::Captured;
use crate::report::EnforcementReport;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;
use toolcage_broker::Denial;

/// How the child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Exit {
    Code(i32),
    Signal(i32),
    /// Killed because the grant's timeout expired.
    Timeout,
    /// Killed because the caller cancelled the call.
    Cancelled,
}

impl Exit {
    /// The shell convention: the code, 128+N for signal N, 124 on timeout.
    pub fn shell_status(self) -> i32 {
        match self {
            Exit::Code(c) => c,
            Exit::Signal(s) => 128 + s,
            Exit::Timeout => 124,
            Exit::Cancelled => 130,
        }
    }

    pub fn success(self) -> bool {
        self == Exit::Code(0)
    }
}

/// The result of one sandboxed run.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub exit: Exit,
    pub stdout: Captured,
    pub stderr: Captured,
    #[serde(serialize_with = "ser_secs")]
    pub duration: Duration,
    pub enforcement: EnforcementReport,
    /// Protected paths the call created, protected symlinks it replaced or
    /// removed, and protected or denied paths inside its write roots whose
    /// identity changed (a path the call cannot reach is not its doing and
    /// is not listed).
    pub created_protected: Vec<PathBuf>,
    /// What toolcage undid after the call: a protected path that did not
    /// exist stays absent (what the call created there is moved into a
    /// fresh directory beside it), and a replaced protected symlink is put
    /// back.
    pub quarantined: Vec<Quarantined>,
    /// Namespace-free mode: protected paths the call changed or removed,
    /// restored from the copy taken before the call.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub restored: Vec<PathBuf>,
    /// What the call left inside a protected directory (namespace-free
    /// mode), or created at a protected path that could not be moved
    /// aside: removed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<PathBuf>,
    /// What toolcage could not undo: the call's result is an error
    /// (`toolcage exec` and `call` exit 125), each with the reason.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unrestorable: Vec<Unrestorable>,
    /// Namespace-free mode: protected trees with more entries than toolcage
    /// walks; the parts that decide what runs later (a `.git`'s config,
    /// hooks and info) were checked whole, the rest only up to the limit.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unchecked: Vec<PathBuf>,
    /// What the call was refused (domain mode: every host its proxy or DNS
    /// stub turned away).
    pub denials: Vec<Denial>,
}

/// A path the call created where a protected path was absent, moved aside.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Quarantined {
    pub path: PathBuf,
    pub moved_to: PathBuf,
}

/// A protected path the call changed that toolcage could not put back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unrestorable {
    pub path: PathBuf,
    /// Why, in a few words (`no copy: over 4 MiB`, an errno).
    pub reason: String,
}

impl Outcome {
    /// One line per protected path the call (`who`: "call", "command")
    /// created or replaced, saying what toolcage undid.
    pub fn protected_notes(&self, who: &str) -> Vec<String> {
        let restored = self.restored.iter().map(|p| {
            format!(
                "the {who} changed protected path {}; restored it",
                p.display()
            )
        });
        let removed = self
            .removed
            .iter()
            .filter(|p| !self.created_protected.contains(p))
            .map(|p| {
                format!(
                    "the {who} left {} inside a protected directory; removed it",
                    p.display()
                )
            });
        let unrestorable = self.unrestorable.iter().map(|u| {
            format!(
                "the {who} changed protected path {}, which toolcage could not undo ({}): check it",
                u.path.display(),
                u.reason
            )
        });
        let unchecked = self.unchecked.iter().map(|p| {
            format!(
                "protected tree {} is too large to check whole: its hooks and config were \
                 guarded, the rest only in part",
                p.display()
            )
        });
        self.created_protected
            .iter()
            .map(|p| match self.quarantined.iter().find(|q| &q.path == p) {
                Some(q) => format!(
                    "the {who} created protected path {}; moved it aside to {}",
                    p.display(),
                    q.moved_to.display()
                ),
                None if self.removed.contains(p) => {
                    format!(
                        "the {who} created protected path {}; removed it",
                        p.display()
                    )
                }
                None => format!(
                    "the {who} created or replaced protected path {}",
                    p.display()
                ),
            })
            .chain(restored)
            .chain(removed)
            .chain(unrestorable)
            .chain(unchecked)
            .collect()
    }

    /// Why the call's result is an error although the command ran: a change
    /// to a protected path that toolcage could not undo. `None` when every
    /// change was undone.
    pub fn not_undone(&self) -> Option<String> {
        let first = self.unrestorable.first()?;
        let more = match self.unrestorable.len() {
            1 => String::new(),
            n => format!(" and {} more", n - 1),
        };
        Some(format!(
            "the call changed protected path {}{more} and toolcage could not undo it ({}): \
             review it before running git, the agent or the editor there",
            first.path.display(),
            first.reason
        ))
    }
}

fn ser_secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}
