//! The audit log: one JSON object per line (JSON Lines), one final line per
//! call that reached the gate, allowed or denied, written before the result
//! is returned; a call that runs is preceded by a `started` line
//! ([`record::Phase`]) written before the tool starts.
//!
//! - [`record`]: what a line holds.
//! - [`log`]: appending (one `write(2)` per line, `O_APPEND`, `flock`).
//! - [`read`]: reading back, skipping and reporting torn or corrupt lines.
//! - [`GrantSummary`]: what a record (and the approval prompt) shows of a
//!   grant.
//! - [`redact`]: `[audit] redact = true`, every value scrubbed from a
//!   record's texts.
//! - [`location`]: the default path and the rule that it lies outside every
//!   write root.

mod grant_summary;
pub(crate) mod location;
pub(crate) mod log;
pub mod read;
pub(crate) mod record;
pub(crate) mod redact;

#[cfg(test)]
mod tests;

pub use grant_summary::GrantSummary;
pub(crate) use log::AuditLog;
pub use record::{AuditRecord, RecordedDecision};
