//! Policy: pure functions from (tool requests, policy files, CLI flags) to a
//! [`Grant`]. No syscalls here.

mod grant;

pub use grant::{ApprovalMode, Enforcement, Grant, Limits, Network, OutputCaps, RateLimit};
