//! Policy: pure functions from (tool requests, policy files, CLI flags) to a
//! [`Grant`]. No syscalls here beyond reading policy files and resolving paths.

mod error;
mod file;
mod grant;
mod units;

pub use error::PolicyError;
pub use grant::{ApprovalMode, Enforcement, Grant, Limits, Network, OutputCaps, RateLimit};
pub use units::{format_duration, format_size, parse_duration, parse_size};
