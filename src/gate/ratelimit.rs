//! Sliding-window rate limits and a cap on concurrent calls, with an
//! injectable clock for deterministic tests.
//!
//! A limit of `requests` per `window` admits a call when fewer than
//! `requests` calls were admitted in the `window` before now. Limits are
//! kept per key: `tool:NAME` (the grant's `[rate_limit]`), `own:NAME` (the
//! tool's own `[tools.rate_limit]`) and `global` (`[global_rate_limit]`).

use crate::policy::RateLimit;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Monotonic time since an arbitrary start.
pub trait Clock: Send + Sync {
    fn now(&self) -> Duration;
}

/// Wall-clock time since the Unix epoch: what a rate-limit file shared by
/// several processes (`toolcage call`) is kept in.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct WallClock;

impl Clock for WallClock {
    fn now(&self) -> Duration {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
    }
}

/// A clock that moves only when told to (tests).
#[derive(Debug, Default)]
pub struct FakeClock {
    now: Mutex<Duration>,
}

impl FakeClock {
    pub fn advance(&self, d: Duration) {
        let mut n = self.now.lock().unwrap_or_else(|e| e.into_inner());
        *n += d;
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Duration {
        *self.now.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One admitted call in one window; give it back with [`RateLimiter::release`]
/// when the call does not run after all (declined approval).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ticket {
    key: String,
    at: Duration,
}

/// Which limit refused a call, and how long until it would admit one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limited {
    /// The index into the limits passed to [`RateLimiter::try_acquire`].
    pub index: usize,
    pub retry_after: Duration,
}

/// Where admitted calls are counted: in memory ([`RateLimiter`], one
/// process) or in a locked file ([`super::persist::FileRates`], every
/// `toolcage call` of a project).
pub(crate) trait RateStore: Send + Sync {
    /// Admit one call under every `(key, limit)` at once, or none.
    fn try_acquire(
        &self,
        limits: &[(String, RateLimit)],
        now: Duration,
    ) -> Result<Vec<Ticket>, Limited>;
}

/// Admitted calls per key, oldest first.
pub(crate) type Windows = HashMap<String, VecDeque<Duration>>;

#[derive(Debug, Default)]
pub struct RateLimiter {
    windows: Mutex<Windows>,
}

impl RateStore for RateLimiter {
    fn try_acquire(
        &self,
        limits: &[(String, RateLimit)],
        now: Duration,
    ) -> Result<Vec<Ticket>, Limited> {
        RateLimiter::try_acquire(self, limits, now)
    }
}

impl RateLimiter {
    /// A limiter that starts from recorded calls.
    pub(crate) fn from_windows(windows: Windows) -> RateLimiter {
        RateLimiter {
            windows: Mutex::new(windows),
        }
    }

    /// The recorded calls.
    pub(crate) fn into_windows(self) -> Windows {
        self.windows.into_inner().unwrap_or_else(|e| e.into_inner())
    }

    /// Admit one call under every `(key, limit)` at once, or none.
    pub(crate) fn try_acquire(
        &self,
        limits: &[(String, RateLimit)],
        now: Duration,
    ) -> Result<Vec<Ticket>, Limited> {
        let mut w = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        for (index, (key, limit)) in limits.iter().enumerate() {
            let q = w.entry(key.clone()).or_default();
            while q
                .front()
                .is_some_and(|&t| now.saturating_sub(t) >= limit.window)
            {
                q.pop_front();
            }
            if q.len() >= limit.requests as usize {
                // The call that frees a slot is the one `requests` back.
                let idx = q.len() - limit.requests as usize;
                let oldest = q.get(idx).copied().unwrap_or(now);
                let retry_after = (oldest + limit.window).saturating_sub(now);
                return Err(Limited { index, retry_after });
            }
        }
        let mut tickets = Vec::new();
        for (key, _) in limits {
            w.entry(key.clone()).or_default().push_back(now);
            tickets.push(Ticket {
                key: key.clone(),
                at: now,
            });
        }
        Ok(tickets)
    }

    /// Give back calls that did not run.
    #[cfg(test)]
    pub(crate) fn release(&self, tickets: &[Ticket]) {
        let mut w = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        for t in tickets {
            if let Some(q) = w.get_mut(&t.key)
                && let Some(i) = q.iter().rposition(|&at| at == t.at)
            {
                q.remove(i);
            }
        }
    }
}

/// "12s", rounded up to whole seconds (at least 1s).
pub(crate) fn wait_text(d: Duration) -> String {
    let secs = d.as_millis().div_ceil(1000).max(1);
    crate::text::format_duration(Duration::from_secs(secs as u64))
}

/// Calls running per tool.
#[derive(Debug, Default, Clone)]
pub(crate) struct Concurrency {
    running: Arc<Mutex<HashMap<String, u32>>>,
}

/// Held while a call runs; dropping it frees the slot.
#[derive(Debug)]
pub(crate) struct ConcurrencyGuard {
    running: Arc<Mutex<HashMap<String, u32>>>,
    tool: String,
}

impl Concurrency {
    /// Enter a slot for `tool`, or return how many are running when `cap`
    /// are already.
    pub(crate) fn try_enter(&self, tool: &str, cap: Option<u32>) -> Result<ConcurrencyGuard, u32> {
        let mut r = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let n = r.entry(tool.to_string()).or_insert(0);
        if cap.is_some_and(|c| *n >= c) {
            return Err(*n);
        }
        *n += 1;
        Ok(ConcurrencyGuard {
            running: self.running.clone(),
            tool: tool.to_string(),
        })
    }

    #[cfg(test)]
    pub(crate) fn running(&self, tool: &str) -> u32 {
        let r = self.running.lock().unwrap_or_else(|e| e.into_inner());
        r.get(tool).copied().unwrap_or(0)
    }
}

impl Drop for ConcurrencyGuard {
    fn drop(&mut self) {
        let mut r = self.running.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = r.get_mut(&self.tool) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                r.remove(&self.tool);
            }
        }
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
    fn sliding_window_exceed_and_recover() {
        let clock = FakeClock::default();
        let rl_ = RateLimiter::default();
        let limits = vec![("tool:t".to_string(), rl(3, 60))];
        for _ in 0..3 {
            rl_.try_acquire(&limits, clock.now()).unwrap();
            clock.advance(Duration::from_secs(10));
        }
        // t=30: 3 calls at 0, 10, 20; the next slot opens at 60.
        let e = rl_.try_acquire(&limits, clock.now()).unwrap_err();
        assert_eq!(e.retry_after, Duration::from_secs(30));
        assert_eq!(wait_text(e.retry_after), "30s");
        clock.advance(Duration::from_secs(29));
        assert!(rl_.try_acquire(&limits, clock.now()).is_err());
        clock.advance(Duration::from_secs(1));
        // t=60: the call at 0 left the window.
        rl_.try_acquire(&limits, clock.now()).unwrap();
        let e = rl_.try_acquire(&limits, clock.now()).unwrap_err();
        assert_eq!(e.retry_after, Duration::from_secs(10));
    }

    #[test]
    fn all_or_nothing_and_release() {
        let clock = FakeClock::default();
        let r = RateLimiter::default();
        let both = vec![
            ("tool:a".to_string(), rl(5, 60)),
            ("global".to_string(), rl(1, 60)),
        ];
        let t = r.try_acquire(&both, clock.now()).unwrap();
        let e = r.try_acquire(&both, clock.now()).unwrap_err();
        assert_eq!(e.index, 1);
        // The refused call used no slot of tool:a: 4 more fit once global is free.
        r.release(&t);
        for _ in 0..5 {
            let t = r.try_acquire(&both, clock.now()).unwrap();
            r.release(&t[1..]);
        }
        assert_eq!(r.try_acquire(&both, clock.now()).unwrap_err().index, 0);
    }

    #[test]
    fn wait_text_rounds_up() {
        assert_eq!(wait_text(Duration::from_millis(1)), "1s");
        assert_eq!(wait_text(Duration::from_millis(11_001)), "12s");
        assert_eq!(wait_text(Duration::ZERO), "1s");
    }

    #[test]
    fn concurrency_cap_and_release_on_drop() {
        let c = Concurrency::default();
        let a = c.try_enter("t", Some(2)).unwrap();
        let b = c.try_enter("t", Some(2)).unwrap();
        assert_eq!(c.try_enter("t", Some(2)).unwrap_err(), 2);
        let _other = c.try_enter("u", Some(2)).unwrap();
        drop(a);
        let _c = c.try_enter("t", Some(2)).unwrap();
        drop(b);
        assert_eq!(c.running("t"), 1);
        assert!(c.try_enter("t", None).is_ok());
    }
}
