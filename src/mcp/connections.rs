//! How many HTTP connections are open (`--max-connections`), and what
//! happens at the limit.
//!
//! A connection is *trusted* once it has sent a request that passed the
//! bearer token check. At the limit, a newly accepted connection takes the
//! place of the oldest connection that is not trusted (one that never
//! finished an admitted request: trickling headers, or unauthenticated), so
//! clients that hold connections open without using them cannot lock out
//! those with the token. When every open connection is trusted, the server
//! stops accepting until one closes (new ones wait in the kernel's backlog).
//! The header timeout bounds the rest: see [`super::http`].

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// The open connections of one HTTP server.
pub(crate) struct Connections {
    places: Arc<Semaphore>,
    max: usize,
    next_id: AtomicU64,
    /// Open connections, oldest first.
    open: Mutex<VecDeque<Entry>>,
    /// "At the limit" was logged since the last time under it.
    warned: AtomicBool,
}

struct Entry {
    id: u64,
    trusted: Arc<AtomicBool>,
    evict: CancellationToken,
}

/// One open connection's place; dropping it frees the place.
pub(crate) struct Place {
    id: u64,
    connections: Arc<Connections>,
    /// Set when the connection sends an admitted request.
    pub(crate) trusted: Arc<AtomicBool>,
    /// Cancelled when a new connection takes this one's place: close it.
    pub(crate) evicted: CancellationToken,
    _permit: OwnedSemaphorePermit,
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut open = self.connections.lock();
        if let Some(i) = open.iter().position(|e| e.id == self.id) {
            open.remove(i);
        }
    }
}

impl Connections {
    pub(crate) fn new(max: usize) -> Arc<Connections> {
        let max = max.max(1);
        Arc::new(Connections {
            places: Arc::new(Semaphore::new(max)),
            max,
            next_id: AtomicU64::new(0),
            open: Mutex::new(VecDeque::new()),
            warned: AtomicBool::new(false),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Entry>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A place for a connection just accepted: a free one, else the place
    /// of the oldest untrusted connection (closed for it), else wait until a
    /// connection closes. `None` only if the places were torn down.
    pub(crate) async fn admit(self: &Arc<Self>) -> Option<Place> {
        let permit = match self.places.clone().try_acquire_owned() {
            Ok(p) => {
                self.warned.store(false, Ordering::Relaxed);
                p
            }
            Err(_) => {
                let evicted = self.evict_oldest_untrusted();
                if !self.warned.swap(true, Ordering::Relaxed) {
                    if evicted {
                        tracing::warn!(
                            "{} HTTP connections open (--max-connections): closing the oldest \
                             that never sent an admitted request, to make room",
                            self.max
                        );
                    } else {
                        tracing::warn!(
                            "{} HTTP connections open (--max-connections), all in use: not \
                             accepting more until one closes",
                            self.max
                        );
                    }
                }
                self.places.clone().acquire_owned().await.ok()?
            }
        };
        let entry = Entry {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            trusted: Arc::new(AtomicBool::new(false)),
            evict: CancellationToken::new(),
        };
        let place = Place {
            id: entry.id,
            connections: self.clone(),
            trusted: entry.trusted.clone(),
            evicted: entry.evict.clone(),
            _permit: permit,
        };
        self.lock().push_back(entry);
        Some(place)
    }

    /// Out of file descriptors: close the oldest connection that never sent
    /// an admitted request, if there is one.
    pub(crate) fn make_room(&self) {
        if self.evict_oldest_untrusted() {
            tracing::debug!("closed the oldest untrusted connection to free a descriptor");
        }
    }

    /// Close the oldest connection that has not sent an admitted request.
    /// False when every open connection is trusted.
    fn evict_oldest_untrusted(&self) -> bool {
        let mut open = self.lock();
        let Some(i) = open
            .iter()
            .position(|e| !e.trusted.load(Ordering::Relaxed) && !e.evict.is_cancelled())
        else {
            return false;
        };
        if let Some(e) = open.remove(i) {
            e.evict.cancel();
        }
        true
    }
}

/// How many connections fit in `open_files` descriptors: what the server
/// itself, its `max_concurrent` running calls (pipes, Landlock rule
/// descriptors, pidfds) and the accept loop need comes first. At least 4.
pub(crate) fn connection_budget(open_files: u64, max_concurrent: usize) -> usize {
    let reserved = 64 + 16 * max_concurrent as u64;
    let left = open_files.saturating_sub(reserved);
    usize::try_from(left).unwrap_or(usize::MAX).max(4)
}

/// After a failed accept (EMFILE, ENFILE, ENOBUFS...): wait, longer each
/// time up to a second, and log once per run of failures.
#[derive(Default)]
pub(crate) struct AcceptBackoff {
    failures: u32,
}

impl AcceptBackoff {
    pub(crate) fn failed(&mut self, e: &std::io::Error) -> Duration {
        if self.failures == 0 {
            tracing::warn!("accept failed: {e}; backing off until it succeeds");
        } else {
            tracing::debug!("accept failed again: {e}");
        }
        self.failures = self.failures.saturating_add(1);
        Duration::from_millis(10u64 << self.failures.min(7)).min(Duration::from_secs(1))
    }

    pub(crate) fn succeeded(&mut self) {
        if self.failures > 0 {
            tracing::info!("accepting connections again");
        }
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn at_the_limit_the_oldest_untrusted_connection_makes_room() {
        let c = Connections::new(3);
        let trusted = c.admit().await.unwrap();
        trusted.trusted.store(true, Ordering::Relaxed);
        let idle = c.admit().await.unwrap();
        let newer = c.admit().await.unwrap();
        // A fourth: the oldest untrusted one is told to close; its place
        // goes when it has.
        let next = tokio::spawn({
            let c = c.clone();
            async move { c.admit().await.is_some() }
        });
        tokio::time::timeout(Duration::from_secs(5), idle.evicted.cancelled())
            .await
            .unwrap();
        assert!(!trusted.evicted.is_cancelled() && !newer.evicted.is_cancelled());
        drop(idle);
        assert!(next.await.unwrap());
    }

    #[test]
    fn the_budget_leaves_room_for_running_calls() {
        assert_eq!(connection_budget(1024, 8), 1024 - 64 - 128);
        assert_eq!(connection_budget(64, 8), 4);
        assert!(connection_budget(u64::MAX, 1) > 1 << 30);
    }

    #[tokio::test]
    async fn when_all_are_trusted_a_new_one_waits_for_a_close() {
        let c = Connections::new(1);
        let only = c.admit().await.unwrap();
        only.trusted.store(true, Ordering::Relaxed);
        let waited = tokio::time::timeout(Duration::from_millis(50), c.admit()).await;
        assert!(waited.is_err());
        assert!(!only.evicted.is_cancelled());
        drop(only);
        assert!(c.admit().await.is_some());
    }
}
