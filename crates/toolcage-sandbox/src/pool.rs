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
//!   no ready sandbox starts cold (and its key is prepared for next time);
//!   a sandbox of another key is never used.
//! - **Single use**: a sandbox taken serves one call and is torn down with
//!   it; one found stale at take (its init gone, a root's path now another
//!   file, a protected path created or changed) is discarded and the call
//!   starts cold.
//! - **Bounded**: at most N ready sandboxes in all, for at most N keys (the
//!   most recently called); [`clear`] discards them all (hot reload).
//! - **Off** for calls that cannot be prepared ahead: `exec`'s own stdio
//!   and `--explain`, domain mode (its proxy serves one init's namespace
//!   from toolcage's process), namespace-free mode (nothing namespaced to
//!   prepare; its snapshot of protected paths must be taken at the call).

use super::maker::{self, Maker};
use super::spawn::ready::Ready;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
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

/// A fresh ready sandbox for `grant` and `extra_read`, if one is ready;
/// either way the key is marked wanted and the filler woken.
pub(crate) fn take(grant: &Grant, extra_read: &[PathBuf]) -> Option<(Ready, Running)> {
    let pool = POOL.get()?;
    let key = Key {
        grant: grant.clone(),
        extra_read: extra_read.to_vec(),
    };
    let mut stale = Vec::new();
    let found = {
        let mut s = pool.lock();
        if s.off {
            return None;
        }
        s.want(&key, pool.size, &mut stale);
        let mut found = None;
        while let Some(i) = s.ready.iter().position(|(k, _)| *k == key) {
            let (_, r) = s.ready.swap_remove(i);
            if r.fresh() {
                found = Some(r);
                break;
            }
            stale.push(r);
        }
        if found.is_some() {
            s.running += 1;
        }
        found
    };
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

    /// The wanted key with the fewest ready sandboxes (the most recent
    /// first among equals), while fewer than `size` are ready and fewer
    /// than the calls running from the pool (else after they end).
    fn next(&self, size: usize) -> Option<Key> {
        let busy = self.running > 0 && self.ready.len() >= self.running;
        if self.off || self.ready.len() >= size || busy {
            return None;
        }
        let count = |k: &Key| self.ready.iter().filter(|(r, _)| r == k).count();
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
