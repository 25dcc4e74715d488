//! Gate state shared by every process of a project (`toolcage call` runs
//! one process per call): rate-limit windows in a locked JSON file and
//! concurrency slots as lock files.
//!
//! Both live in the project's state directory ([`crate::audit::location`]),
//! which the policy refuses inside any write root of a grant, so a tool
//! cannot reset its own limits.
//!
//! - `ratelimit.json`: `{"key": [millis since the epoch, ...]}`, read and
//!   rewritten under an exclusive `flock`. A file that does not parse is an
//!   error (fail closed), not a fresh start.
//! - `slots/<tool-hash>.<i>.lock`: a call holds an exclusive `flock` on one
//!   of `concurrent` slot files while it runs. The kernel drops the lock when
//!   the process dies, so a crash never leaks a slot.

use super::ratelimit::{Concurrency, ConcurrencyGuard, Limited, RateLimiter, RateStore, Ticket};
use crate::policy::RateLimit;
use nix::fcntl::{Flock, FlockArg};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Why a rate or slot check could not be made (not "limited").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StateError(pub String);

/// A rate check that did not admit the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RateRefusal {
    Limited(Limited),
    Unavailable(StateError),
}

/// Create `dir` (and parents) private to the user.
pub fn private_dir(dir: &Path) -> Result<(), StateError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| StateError(format!("cannot create {}: {e}", dir.display())))
}

fn open_locked(path: &Path, nonblock: bool) -> Result<Option<Flock<File>>, StateError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| StateError(format!("cannot open {}: {e}", path.display())))?;
    let arg = if nonblock {
        FlockArg::LockExclusiveNonblock
    } else {
        FlockArg::LockExclusive
    };
    match Flock::lock(file, arg) {
        Ok(l) => Ok(Some(l)),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) if nonblock => Ok(None),
        Err((_, e)) => Err(StateError(format!("cannot lock {}: {e}", path.display()))),
    }
}

/// Rate-limit windows in `<state dir>/ratelimit.json`.
#[derive(Debug, Clone)]
pub struct FileRates {
    path: PathBuf,
}

impl FileRates {
    pub fn new(state_dir: &Path) -> FileRates {
        FileRates {
            path: state_dir.join("ratelimit.json"),
        }
    }

    fn load(text: &str) -> Result<super::ratelimit::Windows, String> {
        if text.trim().is_empty() {
            return Ok(HashMap::new());
        }
        let m: BTreeMap<String, Vec<u64>> =
            serde_json::from_str(text).map_err(|e| e.to_string())?;
        Ok(m.into_iter()
            .map(|(k, v)| {
                let q: VecDeque<Duration> = v.into_iter().map(Duration::from_millis).collect();
                (k, q)
            })
            .collect())
    }

    fn store(w: super::ratelimit::Windows) -> String {
        let m: BTreeMap<String, Vec<u64>> = w
            .into_iter()
            .filter(|(_, q)| !q.is_empty())
            .map(|(k, q)| {
                let v = q
                    .into_iter()
                    .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
                    .collect();
                (k, v)
            })
            .collect();
        serde_json::to_string(&m).unwrap_or_else(|_| "{}".into())
    }

    fn acquire(
        &self,
        limits: &[(String, RateLimit)],
        now: Duration,
    ) -> Result<Result<Vec<Ticket>, Limited>, StateError> {
        if let Some(dir) = self.path.parent() {
            private_dir(dir)?;
        }
        let shown = self.path.display();
        let mut f = open_locked(&self.path, false)?
            .ok_or_else(|| StateError(format!("cannot lock {shown}")))?;
        let mut text = String::new();
        f.read_to_string(&mut text)
            .map_err(|e| StateError(format!("cannot read {shown}: {e}")))?;
        let windows = Self::load(&text).map_err(|e| {
            StateError(format!(
                "rate-limit state {shown} is corrupt ({e}); remove it to reset the limits"
            ))
        })?;
        let limiter = RateLimiter::from_windows(windows);
        let result = limiter.try_acquire(limits, now);
        if result.is_ok() {
            let out = Self::store(limiter.into_windows());
            f.set_len(0)
                .and_then(|_| f.seek(SeekFrom::Start(0)))
                .and_then(|_| f.write_all(out.as_bytes()))
                .map_err(|e| StateError(format!("cannot write {shown}: {e}")))?;
        }
        Ok(result)
    }
}

/// The rate store's answer, with store failures kept apart from limits.
pub trait RateCheck: Send + Sync {
    fn check(&self, limits: &[(String, RateLimit)], now: Duration) -> Result<(), RateRefusal>;
}

impl RateCheck for FileRates {
    fn check(&self, limits: &[(String, RateLimit)], now: Duration) -> Result<(), RateRefusal> {
        match self.acquire(limits, now) {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(l)) => Err(RateRefusal::Limited(l)),
            Err(e) => Err(RateRefusal::Unavailable(e)),
        }
    }
}

impl RateCheck for RateLimiter {
    fn check(&self, limits: &[(String, RateLimit)], now: Duration) -> Result<(), RateRefusal> {
        RateStore::try_acquire(self, limits, now)
            .map(|_| ())
            .map_err(RateRefusal::Limited)
    }
}

/// A held concurrency slot; dropping it frees the slot.
#[derive(Debug)]
pub enum Slot {
    /// The tool has no cap.
    Unlimited,
    Memory(ConcurrencyGuard),
    File(Flock<File>),
}

/// Where concurrency slots are counted.
pub trait SlotStore: Send + Sync {
    /// Enter a slot, `Ok(None)` when all `cap` are taken.
    fn try_enter(&self, tool: &str, cap: Option<u32>) -> Result<Option<Slot>, StateError>;
}

impl SlotStore for Concurrency {
    fn try_enter(&self, tool: &str, cap: Option<u32>) -> Result<Option<Slot>, StateError> {
        if cap.is_none() {
            return Ok(Some(Slot::Unlimited));
        }
        Ok(Concurrency::try_enter(self, tool, cap)
            .ok()
            .map(Slot::Memory))
    }
}

/// Slot lock files in `<state dir>/slots/`.
#[derive(Debug, Clone)]
pub struct FileSlots {
    dir: PathBuf,
}

impl FileSlots {
    pub fn new(state_dir: &Path) -> FileSlots {
        FileSlots {
            dir: state_dir.join("slots"),
        }
    }
}

impl SlotStore for FileSlots {
    fn try_enter(&self, tool: &str, cap: Option<u32>) -> Result<Option<Slot>, StateError> {
        let Some(cap) = cap else {
            return Ok(Some(Slot::Unlimited));
        };
        private_dir(&self.dir)?;
        // Tool names are [A-Za-z0-9_-]+ in every format, but hash anyway:
        // the name never becomes a path component.
        let tag = &super::approval::args_digest(&serde_json::Value::String(tool.into()))[..16];
        for i in 0..cap {
            let path = self.dir.join(format!("{tag}.{i}.lock"));
            if let Some(l) = open_locked(&path, true)? {
                return Ok(Some(Slot::File(l)));
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rl(requests: u32, secs: u64) -> RateLimit {
        RateLimit {
            requests,
            window: Duration::from_secs(secs),
        }
    }

    #[test]
    fn file_rates_survive_a_new_store_and_recover() {
        let dir = tempfile::tempdir().unwrap();
        let limits = vec![("tool:t".to_string(), rl(1, 60))];
        let t0 = Duration::from_secs(1_000_000);
        FileRates::new(dir.path()).check(&limits, t0).unwrap();
        // A second process: the first call is still in the window.
        let e = FileRates::new(dir.path())
            .check(&limits, t0 + Duration::from_secs(15))
            .unwrap_err();
        match e {
            RateRefusal::Limited(l) => assert_eq!(l.retry_after, Duration::from_secs(45)),
            other => panic!("{other:?}"),
        }
        // A refused call is not recorded; after the window, admitted.
        FileRates::new(dir.path())
            .check(&limits, t0 + Duration::from_secs(60))
            .unwrap();
    }

    #[test]
    fn a_corrupt_rate_file_fails_closed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ratelimit.json"), "{not json").unwrap();
        let limits = vec![("tool:t".to_string(), rl(5, 60))];
        match FileRates::new(dir.path()).check(&limits, Duration::from_secs(1)) {
            Err(RateRefusal::Unavailable(e)) => assert!(e.0.contains("corrupt"), "{e}"),
            other => panic!("{other:?}"),
        }
        // Control: the same check on a fresh file admits.
        std::fs::remove_file(dir.path().join("ratelimit.json")).unwrap();
        FileRates::new(dir.path())
            .check(&limits, Duration::from_secs(1))
            .unwrap();
    }

    #[test]
    fn file_slots_cap_and_free_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let s = FileSlots::new(dir.path());
        let a = s.try_enter("t", Some(2)).unwrap().unwrap();
        let _b = s.try_enter("t", Some(2)).unwrap().unwrap();
        assert!(s.try_enter("t", Some(2)).unwrap().is_none());
        // Another tool has its own slots; no cap needs no slot file.
        assert!(s.try_enter("u", Some(1)).unwrap().is_some());
        assert!(matches!(
            s.try_enter("t", None).unwrap(),
            Some(Slot::Unlimited)
        ));
        drop(a);
        assert!(s.try_enter("t", Some(2)).unwrap().is_some());
    }
}
