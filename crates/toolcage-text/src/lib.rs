//! The bottom of the dependency graph: text helpers every layer shares, and
//! nothing else. It imports nothing from the rest of toolcage (see
//! ARCHITECTURE.md; `tests/architecture.rs` enforces it).
//!
//! - [`neutral`]: untrusted text made safe to show on a terminal
//!   ([`one_line`], [`multi_line`]).
//! - [`units`]: durations and sizes as policy files and flags spell them.
//! - [`lines`]: byte offsets to 1-based line numbers for `file:line`.
#![forbid(unsafe_code)]

pub mod lines;
pub mod neutral;
pub mod units;

pub use lines::line_at;
pub use neutral::{escape_except, is_dangerous, multi_line, one_line};
pub use units::{format_duration, format_size, parse_duration, parse_size};
