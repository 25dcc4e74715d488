//! toolcage: discover agent tools, resolve a policy per tool, and run each
//! call in a sandbox enforced by the kernel.

pub mod audit;
pub mod call;
pub mod cli;
pub mod discover;
pub mod gate;
pub mod mcp;
pub mod policy;
pub mod sandbox;
pub mod spec;
pub mod text;
