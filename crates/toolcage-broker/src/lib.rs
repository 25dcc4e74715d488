//! The broker: what runs in toolcage's process on the confined tool's
//! behalf and reads bytes the tool controls. The domain proxy and its DNS
//! stub ([`proxy`]) answer the call's connections and lookups; the denial
//! inference ([`inferred`]) reads the tool's error output; the Landlock
//! audit reader ([`landlock_log`]) reads the kernel's records of what the
//! call was refused. Each turns what it reads into [`Denial`]s.
//!
//! The public face is what the sandbox crate, the top crate (the http
//! runner's [`proxy::connect`]) and the fuzz targets use; the rest is
//! `pub(crate)` (`unreachable_pub` holds it).
//!
//! No `unsafe` here: sockets and polls go through `nix`'s safe wrappers.
//! The mechanism these need from the kernel (the call's namespaces, the
//! init that creates the proxy's listeners inside them and hands them over)
//! is the sandbox crate's, which depends on this one.
#![forbid(unsafe_code)]
#![warn(unreachable_pub)]

mod denial;
#[doc(hidden)]
pub mod fuzz;
pub mod inferred;
pub mod landlock_log;
pub mod proxy;

pub use denial::Denial;
