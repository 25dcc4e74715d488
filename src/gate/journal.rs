//! The gate's audit log: where it is, when it is opened, and what a failed
//! write means.
//!
//! The log and the gate's state must lie outside every write root of the
//! grants that may run, or a tool could rewrite its own record or reset its
//! limits. A server opens the log at once, after checking the locations
//! against the policy's defaults ([`Journal::open_now`]). `toolcage call`
//! runs one call: it opens the log at its first record, checked against
//! that call's own grant ([`Journal::open_later`]), so the policy is
//! resolved once per call; only a record without a grant (a call refused
//! before the gate) resolves the defaults.

use super::GateError;
use crate::audit::{AuditLog, AuditRecord, location};
use crate::policy::{AuditPolicy, Grant};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Resolves the policy's defaults, for a record that carries no grant.
pub(crate) type Defaults = Box<dyn Fn() -> Result<Grant, String> + Send + Sync>;

pub(crate) struct Journal {
    policy: AuditPolicy,
    path: PathBuf,
    state_dir: PathBuf,
    /// `Some(None)`: running without a log (`[audit] fail_closed = false`).
    log: OnceLock<Option<AuditLog>>,
    defaults: Option<Defaults>,
}

/// Why a record was not written.
#[derive(Debug)]
pub(crate) enum Unwritten {
    /// The log lies where the record's grant could write it: never opened.
    Misplaced(String),
    Failed(String),
}

impl Journal {
    /// Check the locations against `defaults` and open the log now.
    pub(crate) fn open_now(
        policy: AuditPolicy,
        path: PathBuf,
        state_dir: PathBuf,
        defaults: &Grant,
    ) -> Result<Journal, GateError> {
        check_locations(&path, &state_dir, defaults).map_err(GateError::Audit)?;
        let log = open(&policy, &path).map_err(GateError::Audit)?;
        let journal = Journal {
            policy,
            path,
            state_dir,
            log: OnceLock::new(),
            defaults: None,
        };
        let _ = journal.log.set(log);
        Ok(journal)
    }

    /// Open the log at the first record, checked against its grant.
    pub(crate) fn open_later(
        policy: AuditPolicy,
        path: PathBuf,
        state_dir: PathBuf,
        defaults: Defaults,
    ) -> Journal {
        Journal {
            policy,
            path,
            state_dir,
            log: OnceLock::new(),
            defaults: Some(defaults),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    pub(crate) fn redact(&self) -> bool {
        self.policy.redact
    }

    /// Refuse a grant that could write the log or the state.
    pub(crate) fn check_locations(&self, grant: &Grant) -> Result<(), String> {
        check_locations(&self.path, &self.state_dir, grant)
    }

    /// The open log (`None`: running without one), opening it first if
    /// needed, checked against `grant` (or the defaults).
    fn log(&self, grant: Option<&Grant>) -> Result<Option<&AuditLog>, Unwritten> {
        if let Some(log) = self.log.get() {
            return Ok(log.as_ref());
        }
        let defaults;
        let grant = match (grant, &self.defaults) {
            (Some(g), _) => g,
            (None, Some(resolve)) => {
                defaults = resolve().map_err(Unwritten::Failed)?;
                &defaults
            }
            (None, None) => return Ok(None),
        };
        self.check_locations(grant).map_err(Unwritten::Misplaced)?;
        let opened = open(&self.policy, &self.path).map_err(Unwritten::Failed)?;
        Ok(self.log.get_or_init(|| opened).as_ref())
    }

    /// Append `record` of a call run under `grant`. A failed write is an
    /// error only under `fail_closed` (then `consequence` says what it
    /// means for the call); a log in the wrong place always is.
    pub(crate) fn write(
        &self,
        record: &AuditRecord,
        grant: Option<&Grant>,
        consequence: &str,
    ) -> Result<(), Unwritten> {
        let written = match self.log(grant)? {
            Some(log) => log.append(record),
            None => Ok(()),
        };
        match written {
            Err(e) if self.policy.fail_closed => Err(Unwritten::Failed(format!(
                "{e}; {consequence} ([audit] fail_closed = true)"
            ))),
            Err(e) => {
                tracing::warn!("{e} ([audit] fail_closed = false: the call goes on)");
                Ok(())
            }
            Ok(()) => Ok(()),
        }
    }

    /// Append `record` of a call refused before the gate: `Err` whenever
    /// it was not written.
    pub(crate) fn append(&self, record: &AuditRecord) -> Result<(), String> {
        match self.log(None) {
            Ok(Some(log)) => log.append(record),
            Ok(None) => Ok(()),
            Err(Unwritten::Misplaced(e) | Unwritten::Failed(e)) => Err(e),
        }
    }
}

fn check_locations(audit: &Path, state: &Path, grant: &Grant) -> Result<(), String> {
    match location::misplaced(audit, state, grant).into_iter().next() {
        Some(why) => Err(why),
        None => Ok(()),
    }
}

/// Open the log; without one, `fail_closed` refuses calls and otherwise
/// they run unrecorded (`Ok(None)`).
fn open(policy: &AuditPolicy, path: &Path) -> Result<Option<AuditLog>, String> {
    match AuditLog::open(path) {
        Ok(l) => Ok(Some(l)),
        Err(e) if policy.fail_closed => Err(format!(
            "{e} (the policy's [audit] fail_closed = true refuses calls without an audit log)"
        )),
        Err(e) => {
            tracing::warn!("{e}; calls run without an audit record ([audit] fail_closed = false)");
            Ok(None)
        }
    }
}
