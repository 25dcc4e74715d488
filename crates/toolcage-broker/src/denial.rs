//! What a call was refused, for the person reading its result: "blocked:
//! evil.example:443 (not in the allow list)" instead of a timeout. Domain
//! mode's proxy and DNS stub record every refusal here, exactly; refusals
//! of files are inferred from the tool's own error messages (`infer`).

use serde::Serialize;

/// One refused operation (identical ones are counted, not repeated).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Denial {
    /// The layer that refused: `proxy`, `dns`, `http`, or `filesystem`.
    pub layer: &'static str,
    /// What was attempted: `connect` (CONNECT), `http` (plain HTTP through
    /// the proxy), `tcp` (a connection to a name's synthetic address, from a
    /// program that ignores the proxy variables), `dns` (a lookup); `read`
    /// or `write` of a file.
    pub op: &'static str,
    /// `host:port`, or the name for a lookup.
    pub target: String,
    /// The `deny` pattern that matched, when one did.
    pub rule: Option<String>,
    /// Why, for people.
    pub reason: String,
    /// What would grant it, when something would.
    pub fix: Option<String>,
    pub count: u32,
    /// Read from the tool's error output and the grant, not reported by
    /// the kernel or the proxy: likely, not certain.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub inferred: bool,
}

impl Denial {
    /// `blocked: evil.example:443 (not in the allow list)`.
    pub fn line(&self) -> String {
        let times = if self.count > 1 {
            format!(", {} times", self.count)
        } else {
            String::new()
        };
        let likely = if self.inferred { ", inferred" } else { "" };
        format!("blocked: {} ({}{times}{likely})", self.target, self.reason)
    }
}

/// The denials of one call, bounded: at most [`MAX_KINDS`] different ones
/// are kept; the rest are only counted.
#[derive(Debug, Default)]
pub(crate) struct DenialLog {
    pub(crate) kept: Vec<Denial>,
    pub(crate) dropped: u64,
}

pub(crate) const MAX_KINDS: usize = 64;

impl DenialLog {
    pub(crate) fn record(&mut self, d: Denial) {
        let same = |k: &Denial| {
            k.layer == d.layer && k.op == d.op && k.target == d.target && k.reason == d.reason
        };
        if let Some(k) = self.kept.iter_mut().find(|k| same(k)) {
            k.count = k.count.saturating_add(1);
        } else if self.kept.len() < MAX_KINDS {
            self.kept.push(d);
        } else {
            self.dropped += 1;
        }
    }
}
