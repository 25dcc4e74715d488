//! Policy: pure functions from (tool requests, policy files, toolchain
//! presets, CLI flags) to a [`Grant`]. No syscalls here beyond reading
//! policy files, resolving paths (existence, symlinks, listing a directory
//! for a `*` wildcard or a preset's links), reading the operator's
//! toolchain variables (`presets.rs`) and asking discovery whether
//! `tools/` holds A3S tool files (`{a3s_tools}`).
//! Every grant also holds a safety floor (`floor.rs`): secrets in `/etc`
//! and in the operator's home (`home.rs`) and toolcage's own state denied,
//! a `--policy` file in a write root protected.
//!
//! ```no_run
//! use toolcage_policy::{self as policy, Context, Overrides, Sources};
//! let ctx = Context::detect(std::path::Path::new("."), |_| false).unwrap();
//! let stack = policy::load(&Sources { profile: Some("ci".into()), policy_file: None }, &ctx).unwrap();
//! let resolved = stack.resolve(&ctx, &Overrides::default(), None).unwrap();
//! print!("{}", policy::render_text(&resolved, &resolved.path_dropped(&ctx)));
//! ```
//!
//! The file format is documented in `file.rs` and in `policies/default.toml`.
#![forbid(unsafe_code)]

pub mod canon;
mod domains;
mod entries;
mod env_dirs;
mod error;
mod file;
mod finish;
mod floor;
mod grant;
mod home;
pub mod hostname;
mod netrules;
mod origin;
mod parse;
mod paths;
pub mod presets;
mod profiles;
mod render;
mod requests;
mod resolve;
pub mod search_path;
mod session;
mod state;
#[cfg(test)]
mod tests;
mod upstreams;
mod with;
// Durations and sizes live in the bottom text module; the policy files
// use them as `super::units`.
use toolcage_text::units;

pub use domains::{DomainPolicy, HostRule, Refusal, RefusalKind, parse_pin};
pub use env_dirs::{PRIVATE_TMP, TMP_VARS, is_explicit};
pub use error::PolicyError;
pub use file::{Expose, StoreSection};
pub use floor::built_in_secret;
pub use grant::{
    ApprovalMode, Enforcement, Grant, Limits, NamespaceFree, NamespaceFreePolicy, Network,
    OutputCaps, RateLimit,
};
pub use home::{HOME_SECRETS, HomeSecret, home_secret, never_offered, project_refusal_at};
pub use hostname::Host;
pub use paths::{canonical_lenient, state_base, within};
pub use profiles::profile_names;
pub use render::render_text;
pub use requests::{Decision, RequestOutcome, Requests};
pub use resolve::{
    Context, Overrides, PolicyStack, Provenance, Resolved, Sources, ToolInput, load,
    load_and_resolve,
};
pub use session::{AuditPolicy, ManagePolicy, SessionPolicy};
pub use units::{format_duration, format_size, parse_duration, parse_size};
pub use upstreams::{DEFAULT_IDLE_TIMEOUT, DEFAULT_UPSTREAM_PROFILE, UpstreamSettings};
