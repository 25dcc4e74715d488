//! The pool of sandboxes prepared ahead (`toolcage serve --pool N`): for
//! the grants recent calls used, sandboxes made up to the seam of
//! `spawn/mod.rs` (namespaces, the constructed root, loopback, Landlock
//! and seccomp compiled, the init waiting), so that a call finds one ready
//! and pays only for its own half. One background thread orders them from
//! the pool's maker, a small process forked when the pool starts
//! (`maker.rs`: why not from toolcage itself).
//!
//! - **Keyed** by everything the prepared part depends on: the whole
//!   resolved grant and the call's readable paths (`Command::extra_read`),
//!   in namespace mode, under this process's user. A call whose key has
//!   no ready sandbox waits for one made for it (below); a sandbox of
//!   another key is never used.
//! - **Single use**: a sandbox taken serves one call and is torn down with
//!   it; one found stale at take (its init gone, a root's path now another
//!   file, a protected path created or changed) is discarded and the call
//!   starts cold.
//! - **Bounded**: at most N ready sandboxes in all, for at most N keys (the
//!   most recently called), plus one for each call waiting for its own;
//!   [`clear`] discards them all (hot reload).
//! - **Waited for**: a call whose key has none ready waits for the maker
//!   (at most [`WAIT_FOR_MAKER`]) rather than start cold. A cold start
//!   forks toolcage's multi-threaded server, and under concurrent calls
//!   its copy-on-write pages and their TLB-flush interrupts cost more CPU
//!   than the sandbox itself; the maker is small and single-threaded.
//! - **Off** for calls that cannot be prepared ahead: `exec`'s own stdio
//!   and `--explain`, domain mode (its proxy serves one init's namespace
//!   from toolcage's process), namespace-free mode (nothing namespaced to
//!   prepare; its snapshot of protected paths must be taken at the call).

use super::maker::{self, Maker};
use super::spawn::ready::Ready;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};
use toolcage_policy::Grant;

/// What a prepared sandbox depends on (see the module).
#[derive(Clone, PartialEq)]
struct Key {
    grant: Grant,
    extra_read: Vec<PathBuf>,
}

struct Pool {
    size: usize,
    state: Mutex<State>,
    /// Wakes the filler: a key wanted, a sandbox taken, the pool cleared.
    wake: Condvar,
    /// Wakes the calls waiting for a sandbox: one made, or the maker
    /// failed or stopped.
    made: Condvar,
}

#[derive(Default)]
struct State {
    /// The keys to keep ready, most recently called first (at most `size`).
    wanted: VecDeque<Key>,
    ready: Vec<(Key, Ready)>,
    /// Bumped by [`clear`]: a sandbox made before it is not kept.
    generation: u64,
    /// Namespaces refused: nothing is prepared any more.
    off: bool,
    /// Calls running in a sandbox taken from the pool: while there are
    /// as many ready as running, the filler waits for them to end rather
    /// than take a CPU from them.
    running: usize,
    /// The keys of the calls waiting for a sandbox, one entry per call,
    /// the longest waiting first.
    waiting: Vec<Key>,
}

/// A call running in a sandbox from the pool (see `State::running`).
pub(crate) struct Running(&'static Pool);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.lock().running -= 1;
        self.0.wake.notify_one();
    }
}

static POOL: OnceLock<Pool> = OnceLock::new();

/// The pool's size when `serve` is not told (`--pool`).
pub const DEFAULT_SIZE: usize = 4;

/// The longest a call waits for the maker to make its sandbox before it
/// starts cold. A sandbox takes the maker a few milliseconds; this bounds
/// a maker that is slow (a loaded machine, many calls queued).
pub(crate) const WAIT_FOR_MAKER: Duration = Duration::from_secs(2);

/// Keep up to `size` sandboxes ready for this process's calls (0: none):
/// forks the pool's maker, so call it before the process starts any
/// thread (with more than one it refuses, and the pool stays off).
/// The maker and the inits it makes die with this process
/// (`PR_SET_PDEATHSIG`). Once per process; a second call changes nothing.
pub fn start(size: usize) -> std::io::Result<()> {
    if size == 0 || POOL.get().is_some() {
        return Ok(());
    }
    let Some(maker) = maker::start()? else {
        return Err(std::io::Error::other(
            "its maker must be forked before toolcage starts a thread",
        ));
    };
    let pool = POOL.get_or_init(|| Pool {
        size,
        state: Mutex::new(State::default()),
        wake: Condvar::new(),
        made: Condvar::new(),
    });
    std::thread::Builder::new()
        .name("toolcage-pool".into())
        .spawn(move || fill(pool, maker))
        .map(drop)
}

/// Discard every ready sandbox (hot reload: a grant may have changed).
pub fn clear() {
    let Some(pool) = POOL.get() else { return };
    let dropped = {
        let mut s = pool.lock();
        s.generation += 1;
        s.wanted.clear();
        std::mem::take(&mut s.ready)
    };
    pool.made.notify_all(); // waiting calls start cold
    drop(dropped); // the inits are killed outside the lock
}

/// The ready sandboxes' inits' process ids (children of the maker).
pub fn ready_pids() -> Vec<i32> {
    POOL.get().map_or_else(Vec::new, |p| {
        p.lock().ready.iter().map(|(_, r)| r.pid()).collect()
    })
}

/// The pool's size; 0 when it is off.
pub fn size() -> usize {
    POOL.get().filter(|p| !p.lock().off).map_or(0, |p| p.size)
}

/// A fresh sandbox for `grant` and `extra_read`: a ready one, else one
/// the maker makes for this call, waited for (up to [`WAIT_FOR_MAKER`]);
/// `None`: the pool is off, or cleared, or could not make one in time (the
/// call starts cold). Either way the key is marked wanted.
pub(crate) fn take(grant: &Grant, extra_read: &[PathBuf]) -> Option<(Ready, Running)> {
    let pool = POOL.get()?;
    let key = Key {
        grant: grant.clone(),
        extra_read: extra_read.to_vec(),
    };
    let deadline = Instant::now() + WAIT_FOR_MAKER;
    let mut stale = Vec::new();
    let mut s = pool.lock();
    if s.off {
        return None;
    }
    s.want(&key, pool.size, &mut stale);
    let generation = s.generation;
    let mut waits = false;
    let found = loop {
        if let Some(r) = s.take_fresh(&key, &mut stale) {
            break Some(r);
        }
        let now = Instant::now();
        // Given up on: the pool went off or was cleared, the key could not
        // be made (the filler dropped it), or the wait ran out.
        if s.off || s.generation != generation || !s.wanted.contains(&key) || now >= deadline {
            break None;
        }
        if !waits {
            waits = true;
            s.waiting.push(key.clone());
            pool.wake.notify_one();
        }
        s = pool
            .made
            .wait_timeout(s, deadline - now)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    };
    if waits && let Some(i) = s.waiting.iter().position(|k| *k == key) {
        s.waiting.remove(i);
    }
    if found.is_some() {
        s.running += 1;
    }
    drop(s);
    pool.wake.notify_one();
    drop(stale);
    found.map(|r| (r, Running(pool)))
}

impl Pool {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl State {
    /// A ready sandbox of `key` that is still fresh; stale ones met on the
    /// way go to `stale`.
    fn take_fresh(&mut self, key: &Key, stale: &mut Vec<Ready>) -> Option<Ready> {
        while let Some(i) = self.ready.iter().position(|(k, _)| k == key) {
            let (_, r) = self.ready.swap_remove(i);
            if r.fresh() {
                return Some(r);
            }
            stale.push(r);
        }
        None
    }

    /// `key` to the front of the wanted keys; a key pushed out of the
    /// `size` most recent loses its ready sandboxes (into `dropped`).
    fn want(&mut self, key: &Key, size: usize, dropped: &mut Vec<Ready>) {
        if let Some(i) = self.wanted.iter().position(|k| k == key) {
            let k = self.wanted.remove(i).expect("present");
            self.wanted.push_front(k);
            return;
        }
        self.wanted.push_front(key.clone());
        while self.wanted.len() > size {
            let Some(old) = self.wanted.pop_back() else {
                break;
            };
            let mut i = 0;
            while i < self.ready.len() {
                if self.ready[i].0 == old {
                    dropped.push(self.ready.swap_remove(i).1);
                } else {
                    i += 1;
                }
            }
        }
    }

    /// The key of the longest waiting call whose key has fewer ready
    /// sandboxes than calls waiting for it (whatever the size and the
    /// load: that call would start cold); else the wanted key with the
    /// fewest ready (the most recent first among equals), while fewer than
    /// `size` are ready and fewer than the calls running from the pool
    /// (else after they end).
    fn next(&self, size: usize) -> Option<Key> {
        if self.off {
            return None;
        }
        let count = |k: &Key| self.ready.iter().filter(|(r, _)| r == k).count();
        let waiters = |k: &Key| self.waiting.iter().filter(|w| *w == k).count();
        if let Some(k) = self.waiting.iter().find(|k| count(k) < waiters(k)) {
            return Some(k.clone());
        }
        let busy = self.running > 0 && self.ready.len() >= self.running;
        if self.ready.len() >= size || busy {
            return None;
        }
        self.wanted
            .iter()
            .enumerate()
            .min_by_key(|(i, k)| (count(k), *i))
            .map(|(_, k)| k.clone())
    }
}

/// The filler: wait for a key to prepare, order it from the maker
/// (outside the lock), keep it unless the pool was cleared meanwhile.
fn fill(pool: &'static Pool, mut maker: Maker) {
    loop {
        let (key, generation) = {
            let mut s = pool.lock();
            loop {
                if let Some(k) = s.next(pool.size) {
                    break (k, s.generation);
                }
                s = pool.wake.wait(s).unwrap_or_else(|e| e.into_inner());
            }
        };
        let made = maker.make(&key.grant, &key.extra_read);
        let mut s = pool.lock();
        pool.made.notify_all();
        match made {
            Ok(r) if s.generation == generation && s.wanted.contains(&key) => {
                s.ready.push((key, r));
            }
            Ok(r) => {
                drop(s);
                drop(r);
            }
            Err(super::spawn::start::RunError::Unavailable(_)) => {
                // The kernel or a container refuses namespaces (calls run
                // namespace-free, which is not prepared ahead), or the
                // maker is gone: every call starts cold.
                s.off = true;
                let dropped = std::mem::take(&mut s.ready);
                drop(s);
                drop(dropped);
            }
            Err(super::spawn::start::RunError::Failed(_)) => {
                // This grant cannot be prepared: its calls start cold and
                // meet the same error there, where it is reported.
                s.wanted.retain(|k| *k != key);
            }
        }
    }
}
