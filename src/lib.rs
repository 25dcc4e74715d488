//! toolcage: discover agent tools, resolve a policy per tool, and run each
//! call in a sandbox enforced by the kernel.
//!
//! ARCHITECTURE.md maps the modules and the way their dependencies point
//! (checked by `tests/architecture.rs`). Only `sandbox` may use `unsafe`,
//! and every block there says why it is sound.
#![forbid(unsafe_code)]

pub mod audit;
pub mod call;
pub mod cli;
pub mod discover;
pub mod gate;
pub mod mcp;
pub mod spec;

// The library crates below this one, under the names the modules had
// before the split, so `toolcage::policy::Grant` keeps working.
pub use toolcage_broker as broker;
pub use toolcage_policy as policy;
pub use toolcage_sandbox as sandbox;
pub use toolcage_text as text;
