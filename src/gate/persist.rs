//! Gate state shared by every process of a project (`toolcage call` runs
//! one process per call): rate-limit windows in a locked JSON file and
//! concurrency slots as lock files.
//!
//! Both live in the project's state directory ([`crate::audit::location`]),
//! which the policy refuses inside any write root of a grant, so a tool
//! cannot reset its own limits.
//!
//! - `ratelimit.json`: `{"key": [millis since the epoch, ...]}`, shared by
//!   every `toolcage call` and every `toolcage serve` of the project. Read
//!   and replaced under an exclusive `flock` on `ratelimit.lock`; a new
//!   state is written to `ratelimit.json.tmp`, synced, and renamed over the
//!   old one, so a crash leaves either the old state or the new one, never
//!   an empty file. No file yet is a fresh start; an empty file or one that
//!   does not parse refuses every call (fail closed) with the way to reset
//!   it ([`reset_hint`]).
//! - `slots/<tool-hash>.<i>.lock`: a call holds an exclusive `flock` on one
//!   of `concurrent` slot files while it runs. The kernel drops the lock when
//!   the process dies, so a crash never leaks a slot.

use super::ratelimit::{Concurrency, ConcurrencyGuard, Limited, RateLimiter, RateStore, Ticket};
use crate::policy::RateLimit;
use nix::fcntl::{Flock, FlockArg};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
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
fn private_dir(dir: &Path) -> Result<(), StateError> {
    crate::audit::location::private_dir(dir).map_err(StateError)
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

/// How to reset a damaged rate-limit state: remove the file (the next call
/// starts with empty windows).
pub(crate) fn reset_hint(path: &Path) -> String {
    format!(
        "calls are refused until it is reset; to reset every rate limit of the project, run: rm {}",
        path.display()
    )
}

/// Rate-limit windows in `<state dir>/ratelimit.json`.
#[derive(Debug, Clone)]
pub struct FileRates {
    path: PathBuf,
    lock: PathBuf,
    temp: PathBuf,
}

impl FileRates {
    pub fn new(state_dir: &Path) -> FileRates {
        FileRates {
            path: state_dir.join("ratelimit.json"),
            lock: state_dir.join("ratelimit.lock"),
            temp: state_dir.join("ratelimit.json.tmp"),
        }
    }

    /// The state file (`<state dir>/ratelimit.json`).
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn load(text: &str) -> Result<super::ratelimit::Windows, String> {
        if text.trim().is_empty() {
            return Err("the file is empty".into());
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
        // No limit applies: nothing to count, no lock, no write (and no
        // fsync) on every unlimited call; but a damaged state refuses it
        // too (fail closed: damage may be tampering, and the limits it
        // held are unknown). The state is replaced by rename, so a read
        // without the lock sees it whole.
        if limits.is_empty() {
            if let Some(text) = self.read_state()? {
                self.parse(&text)?;
            }
            return Ok(Ok(Vec::new()));
        }
        if let Some(dir) = self.path.parent() {
            private_dir(dir)?;
        }
        let shown = self.path.display();
        // Held until the new state is in place; released on drop.
        let _lock = open_locked(&self.lock, false)?
            .ok_or_else(|| StateError(format!("cannot lock {}", self.lock.display())))?;
        let windows = match self.read_state()? {
            None => HashMap::new(),
            Some(text) => self.parse(&text)?,
        };
        let limiter = RateLimiter::from_windows(windows);
        let result = limiter.try_acquire(limits, now);
        if result.is_ok() {
            self.replace(&Self::store(limiter.into_windows()))
                .map_err(|e| StateError(format!("cannot write {shown}: {e}")))?;
        }
        Ok(result)
    }

    /// The windows in the state's `text`, or the refusal that says how to
    /// reset a damaged state.
    fn parse(&self, text: &str) -> Result<super::ratelimit::Windows, StateError> {
        Self::load(text).map_err(|e| {
            StateError(format!(
                "rate-limit state {} is damaged ({e}); {}",
                self.path.display(),
                reset_hint(&self.path)
            ))
        })
    }

    /// The state's text; `None` when there is no state yet.
    fn read_state(&self) -> Result<Option<String>, StateError> {
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
            .open(&self.path);
        let mut file = match file {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(StateError(format!(
                    "cannot open {}: {e}",
                    self.path.display()
                )));
            }
        };
        let mut text = String::new();
        file.read_to_string(&mut text)
            .map_err(|e| StateError(format!("cannot read {}: {e}", self.path.display())))?;
        Ok(Some(text))
    }

    /// Write `text` to the temp file, sync it, rename it over the state and
    /// sync the directory: the state is the old one or the new one, whole.
    fn replace(&self, text: &str) -> std::io::Result<()> {
        let mut tmp = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
            .open(&self.temp)?;
        tmp.write_all(text.as_bytes())?;
        tmp.sync_all()?;
        drop(tmp);
        std::fs::rename(&self.temp, &self.path)?;
        if let Some(dir) = self.path.parent() {
            File::open(dir)?.sync_all()?;
        }
        Ok(())
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
#[allow(dead_code)] // the guards are held, never read: their drop frees the slot
pub(crate) enum Slot {
    /// The tool has no cap.
    Unlimited,
    Memory(ConcurrencyGuard),
    File(Flock<File>),
}

/// Where concurrency slots are counted.
pub(crate) trait SlotStore: Send + Sync {
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
pub(crate) struct FileSlots {
    dir: PathBuf,
}

impl FileSlots {
    pub(crate) fn new(state_dir: &Path) -> FileSlots {
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
    fn a_corrupt_or_empty_rate_file_fails_closed_with_the_reset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ratelimit.json");
        let limits = vec![("tool:t".to_string(), rl(5, 60))];
        for damaged in ["{not json", "", "  \n"] {
            std::fs::write(&path, damaged).unwrap();
            // A limited call and an unlimited one alike.
            for limits in [&limits[..], &[]] {
                match FileRates::new(dir.path()).check(limits, Duration::from_secs(1)) {
                    Err(RateRefusal::Unavailable(e)) => {
                        assert!(e.0.contains("is damaged"), "{e}");
                        assert!(e.0.contains(&format!("rm {}", path.display())), "{e}");
                    }
                    other => panic!("{damaged:?}: {other:?}"),
                }
            }
            // Refusing leaves the damaged file as it was.
            assert_eq!(std::fs::read_to_string(&path).unwrap(), damaged);
        }
        // Control: the same checks on a fresh file admit.
        std::fs::remove_file(dir.path().join("ratelimit.json")).unwrap();
        let rates = FileRates::new(dir.path());
        rates.check(&[], Duration::from_secs(1)).unwrap();
        rates.check(&limits, Duration::from_secs(1)).unwrap();
        rates.check(&[], Duration::from_secs(2)).unwrap();
    }

    #[test]
    fn a_call_without_limits_touches_no_state() {
        let dir = tempfile::tempdir().unwrap();
        let rates = FileRates::new(dir.path().join("state").as_path());
        rates.check(&[], Duration::from_secs(1)).unwrap();
        assert!(!dir.path().join("state").exists());
    }

    #[test]
    fn the_state_is_replaced_whole_and_never_left_empty() {
        let dir = tempfile::tempdir().unwrap();
        let rates = FileRates::new(dir.path());
        let limits = vec![("tool:t".to_string(), rl(5, 60))];
        rates.check(&limits, Duration::from_secs(1)).unwrap();
        let before = std::fs::metadata(rates.path()).unwrap();
        rates.check(&limits, Duration::from_secs(2)).unwrap();
        let after = std::fs::metadata(rates.path()).unwrap();
        use std::os::unix::fs::MetadataExt;
        // A new file renamed into place, not the old one rewritten.
        assert_ne!(before.ino(), after.ino());
        assert_eq!(after.mode() & 0o777, 0o600);
        assert!(!dir.path().join("ratelimit.json.tmp").exists());
        let text = std::fs::read_to_string(rates.path()).unwrap();
        assert_eq!(text, r#"{"tool:t":[1000,2000]}"#);
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
