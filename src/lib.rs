//! toolcage: discover agent tools, resolve a policy per tool, and run each
//! call in a sandbox enforced by the kernel.
//!
//! ARCHITECTURE.md maps the modules and the way their dependencies point
//! (checked by `tests/architecture.rs`). Only `sandbox` may use `unsafe`,
//! and every block there says why it is sound.
#![deny(clippy::undocumented_unsafe_blocks)]

#[forbid(unsafe_code)]
pub mod audit;
#[forbid(unsafe_code)]
pub mod call;
#[forbid(unsafe_code)]
pub mod cli;
#[forbid(unsafe_code)]
pub mod discover;
#[forbid(unsafe_code)]
pub mod gate;
#[forbid(unsafe_code)]
pub mod mcp;
#[forbid(unsafe_code)]
pub mod policy;
pub mod sandbox;
#[forbid(unsafe_code)]
pub mod spec;
#[forbid(unsafe_code)]
pub mod text;
