//! Where the gate state that outlives one process is kept: rate-limit
//! windows and documents such as the gateway's pins. Two stores, one
//! trait ([`Store`]):
//!
//! - [`FileStore`] (the default): the project's state directory, as
//!   `toolcage call` and `toolcage serve` of one machine share it.
//! - [`redis::RedisStore`] (`--store redis://HOST:PORT[/DB]`): one Redis shared by
//!   every replica of a service, so a rate limit counts calls across all of
//!   them and a definition approved once is approved on each.
//!
//! A store that cannot answer fails closed: the calls that need it (a
//! limited tool, an upstream tool) are refused with the store and the
//! error named; the others run. Every failed operation is counted
//! ([`errors`]) for `toolcage_store_errors_total`.

mod file;
pub mod redis;

pub(crate) use file::FileStore;

use super::persist::RateCheck;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

/// Failed store operations since the process started.
static ERRORS: AtomicU64 = AtomicU64::new(0);

/// How the last operation on the shared store went: [`UNUSED`] (none yet:
/// no store, or not asked), [`UP`] or [`DOWN`].
static LAST: AtomicU8 = AtomicU8::new(UNUSED);
const UNUSED: u8 = 0;
const UP: u8 = 1;
const DOWN: u8 = 2;

/// Whether the last operation on the shared store succeeded (`None`: no
/// operation yet), for `toolcage_store_up`.
pub(crate) fn up() -> Option<bool> {
    match LAST.load(Ordering::Relaxed) {
        UP => Some(true),
        DOWN => Some(false),
        _ => None,
    }
}

/// Note how an operation on store `shown` went; the change from answering
/// to not (and back) is logged once, not at every call.
pub(crate) fn note_outcome(shown: &str, error: Option<&str>) {
    let now = if error.is_some() { DOWN } else { UP };
    let before = LAST.swap(now, Ordering::Relaxed);
    match (before, error) {
        (UNUSED | UP, Some(e)) => tracing::warn!(
            "store {shown} degraded: {e}; calls with a rate limit and upstream tools are \
             refused until it answers, other tools run"
        ),
        (DOWN, None) => tracing::warn!("store {shown} answers again"),
        _ => {}
    }
}

/// How many store operations failed in this process.
pub(crate) fn errors() -> u64 {
    ERRORS.load(Ordering::Relaxed)
}

pub(crate) fn count_error() {
    ERRORS.fetch_add(1, Ordering::Relaxed);
}

/// Why a document could not be read or updated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DocError {
    /// The store did not answer (unreachable, a timeout, a write that
    /// failed): nothing is known about the document.
    Store(String),
    /// The document is there but its owner refused its content (damaged).
    Content(String),
}

/// A read-modify-write of a document: its text now (`None`: none yet) in,
/// the new text out (`None`: leave it as it is), or why its content
/// cannot be used.
pub(crate) type Update<'a> = dyn FnMut(Option<&str>) -> Result<Option<String>, String> + 'a;

/// Gate state shared by every process (and, for Redis, every replica).
pub trait Store: RateCheck + std::fmt::Debug {
    /// Where document `name` is, for messages.
    fn doc_location(&self, name: &str) -> String;
    /// The command that removes document `name` (to start it afresh).
    fn doc_reset(&self, name: &str) -> String;
    /// The text of document `name`, `None` when there is none yet.
    fn read_doc(&self, name: &str) -> Result<Option<String>, DocError>;
    /// Apply `update` to document `name` atomically against every other
    /// process and replica.
    fn update_doc(&self, name: &str, update: &mut Update<'_>) -> Result<(), DocError>;
    /// Whether the store answers now (readiness).
    fn ping(&self) -> Result<(), String>;
}

/// Where a password for the store comes from: never the URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PasswordFrom {
    File(PathBuf),
    Env(String),
}

/// The operator's choice of store: `--store URL` with its password source
/// and the namespace of its keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreSpec {
    /// `redis://HOST:PORT[/DB]` or `rediss://…`, without a password.
    pub url: String,
    pub password: Option<PasswordFrom>,
    /// `--store-prefix` / `[store] prefix`: the namespace of every key
    /// (`None`: derived from the project, [`default_prefix`]).
    pub prefix: Option<String>,
    /// Where `prefix` was said, for messages.
    pub prefix_from: &'static str,
}

/// The namespace of a project's keys when the operator names none: the
/// project's state-directory name (the first 16 hex digits of the SHA-256
/// of its canonical path), so two projects sharing one Redis share no
/// limit and no pin, and replicas serving the project at the same path
/// share both.
pub(crate) fn default_prefix(project: &Path) -> String {
    crate::audit::location::project_hash(project)
}

/// Check a namespace the operator named: 1 to 64 letters, digits, `.`,
/// `_` or `-`. No `:` (one namespace could then reach into another's keys)
/// and no glob characters (an ACL pattern `~toolcage:NAME:*` must mean
/// only these keys).
/// `what` names where it was said (`--store-prefix`, `[store] prefix`).
pub(crate) fn check_prefix(what: &str, name: &str) -> Result<(), String> {
    let ok = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{what} '{}': not a namespace name (fix: 1 to 64 letters, digits, '.', '_'              or '-', e.g. the deployment's name)",
            crate::text::one_line(name)
        ))
    }
}
