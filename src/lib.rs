//! toolcage: discover agent tools, resolve a policy per tool, and run each
//! call in a sandbox enforced by the kernel.
//!
//! ARCHITECTURE.md maps the modules and the way their dependencies point
//! (checked by `tests/architecture.rs`). Only `sandbox` may use `unsafe`,
//! and every block there says why it is sound.
//!
//! # Public surface
//!
//! Every module is `pub` because the binary (`src/main.rs`), the
//! integration tests (`tests/`), the benches (`benches/`) or the fuzz
//! targets (`fuzz/`) reach into it; inside a module an item is `pub` only
//! when one of those uses it (or a `pub` item's signature names it), and
//! `pub(crate)` otherwise. What they use:
//!
//! - `cli::main` (the binary) and `cli::status` (exit statuses);
//! - `discover`: `discover`, `Options`, `Catalog`, `ToolSpec`, `ToolKind`,
//!   `CrabParam`, `Coerce`, `agentdir::holds_a3s_tools`, and the fuzz
//!   entry points `discover::fuzz`;
//! - `gate`: `Gate`, `Gatekeeper`, `admit`, `Admission`, `Verdict`,
//!   `Permit`, `GateDenial`, `DenyReason`, the approval channel types,
//!   `SessionId`, `PreparedCall`, and the rate-limit and store parts the
//!   tests and benches drive (`ratelimit`, `persist`, `store::redis::RedisStore`);
//! - `audit`: `AuditRecord`, `RecordedDecision`, `audit::read`;
//! - `spec::Format`;
//! - `call` (the engine, `Toolbox`, `PreparedCall`, `CallError`,
//!   `script::set_child_binary`) and `mcp` (the server, its transports
//!   and the stdio fuzz entry points);
//! - the crates below, re-exported as `policy`, `sandbox` and `text`.
#![forbid(unsafe_code)]

pub mod audit;
pub mod call;
pub mod cli;
pub mod discover;
pub mod gate;
pub mod mcp;
pub mod spec;
pub mod upstream;

// The library crates below this one, under the names the modules had
// before the split, so `toolcage::policy::Grant` keeps working.
pub use toolcage_broker as broker;
pub use toolcage_policy as policy;
pub use toolcage_sandbox as sandbox;
pub use toolcage_text as text;
