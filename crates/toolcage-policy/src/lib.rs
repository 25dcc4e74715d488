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
//!
//! # Order of the files
//!
//! Each file imports only files earlier in this list, so the crate builds
//! up from the first files (no import cycles, no import of a parent):
//!
//! 1. `error`, `paths`, `glob`, `hostname`, `profiles`: leaves.
//! 2. `canon` (symlink resolution), `secrets` (what every grant denies),
//!    `home` (homes, and what a fix never names).
//! 3. `domains` (host rules), `grant` (the result), `file` and `parse` (a
//!    policy file), `origin` (where a value came from), `presets`.
//! 4. `entries` (a path as written → grant entries), `state` (the values
//!    being merged, each with its origin).
//! 5. The steps that change a state: `netrules`, `layer`, `overrides`,
//!    `with`, `floor`, `env_dirs`, `requests`, then `finish` (the grant
//!    and its provenance).
//! 6. `search_path` (the call's PATH), `context` (the places variables
//!    name), `stack` (the parsed layers), `session`, `upstreams`.
//! 7. `resolve` (layers → grant for one call), `render` (`toolcage
//!    policy`'s text).
#![forbid(unsafe_code)]

mod error;
mod glob;
pub mod hostname;
mod paths;
mod profiles;

pub mod canon;
mod home;
mod secrets;

mod domains;
mod file;
mod grant;
mod origin;
mod parse;
pub mod presets;

mod entries;
mod state;

mod env_dirs;
mod finish;
mod floor;
mod layer;
mod netrules;
mod overrides;
mod requests;
mod with;

mod context;
pub mod search_path;
mod session;
mod stack;
mod upstreams;

mod render;
mod resolve;

#[cfg(test)]
mod tests;

// The public face, by use. Everything else is `pub(crate)`.

// Loading and resolving a policy (the CLI, the MCP server, the gate).
pub use context::Context;
pub use error::PolicyError;
pub use finish::Provenance;
pub use overrides::Overrides;
pub use profiles::profile_names;
pub use render::render_text;
pub use requests::{Decision, RequestOutcome, Requests};
pub use resolve::{Resolved, ToolInput, load, load_and_resolve};
pub use stack::{PolicyStack, Sources};

// What a resolved policy says beyond one call's grant.
pub use file::{Expose, Resources, StoreSection};
pub use session::{AuditPolicy, ManagePolicy, SessionPolicy};
pub use upstreams::UpstreamSettings;

// The grant the sandbox enforces, and the domain rules its proxy applies.
pub use domains::{DomainPolicy, DomainRefusal, HostRule, RefusalKind};
pub use grant::{
    ApprovalMode, Enforcement, Grant, Limits, NamespaceFree, NamespaceFreePolicy, Network,
    OutputCaps, RateLimit,
};
pub use hostname::Host;

// Rules the sandbox and the CLI apply again to what a call meets: paths,
// secrets, the call's tmp and home, and the fixes an agent may be shown.
pub use env_dirs::{PRIVATE_TMP, TMP_VARS, is_explicit};
pub use home::{never_offered, project_refusal_at};
pub use paths::{canonical_lenient, state_base, within};
pub use secrets::{built_in_secret, home_secret};
pub use toolcage_text::units::{format_duration, format_size};
