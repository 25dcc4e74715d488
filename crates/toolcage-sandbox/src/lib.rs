//! The sandbox: the only module with `unsafe` and raw syscalls.
//!
//! [`run`] takes a [`Grant`] and a [`Command`] and returns an [`Outcome`]:
//! exit status, capped stdout/stderr with truncation counts, duration and
//! the enforcement report. See docs/sandbox.md for the mechanics.
//!
//! The public face, all the top crate, its tests and benches use:
//! [`run`] with [`Command`], [`Outcome`] and what it holds ([`Exit`],
//! [`Captured`], [`EnforcementReport`], [`Denial`], ...), [`SandboxError`]
//! and [`CancelToken`]; the host probe and the mode decision for `toolcage
//! doctor` ([`probe`], [`mode`], [`kernel_abi`]); capped output
//! ([`output`]); the script runner's bytecode load and its own filter
//! ([`script`]); a terminal's exclusive flag ([`tty`]); the network
//! namespace made ahead ([`network_namespace_ahead`],
//! [`keep_network_namespace_ready`]) and the private files directory
//! ([`private_files_dir`]). Everything else is `pub(crate)`. What runs in
//! toolcage's process for the call and reads its bytes (the domain proxy,
//! the denial inference, the audit reader) is the broker crate's.
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(unsafe_op_in_unsafe_fn)]

mod bpf;
mod child;
mod command;
mod env;
mod error;
mod init_guard;
mod isolation;
mod landlock;
mod landlock_abi;
mod limits;
mod maker;
pub mod mode;
mod namespace_free;
mod netns;
mod outcome;
pub mod output;
pub mod pool;
pub mod probe;
mod program;
mod proxy;
mod quarantine;
mod report;
mod restore;
mod root_open;
mod rootfs;
mod runtime_dir;
pub mod script;
mod seccomp;
mod spawn;
mod steps;
mod supervise;
pub mod tty;

pub use command::Command;
pub use error::{SandboxError, SandboxErrorKind, outside_message};
pub use landlock_abi::kernel_abi;
pub use netns::ahead as network_namespace_ahead;
pub use netns::keep_ready as keep_network_namespace_ready;
pub use outcome::{Exit, Outcome, Quarantined, Unrestorable};
pub use output::Captured;
pub use report::{Degradation, EnforcementReport, LandlockReport, LandlockStatus};
pub use runtime_dir::private_files_dir;
pub use spawn::run;
pub use supervise::{CancelToken, answer_calls_on_report};
pub use toolcage_broker::Denial;
