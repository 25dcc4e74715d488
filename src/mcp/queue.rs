//! The server's call queue: how many `tools/call` may be pending (taken and
//! not finished: waiting for approval or a run slot, or running) per session
//! and overall, and who gets the next of the `--max-concurrent` run slots.
//!
//! - [`CallQueue::enqueue`] answers at once: a [`Place`] while the session
//!   is under `max_pending_per_session` and the server under `max_pending`, a
//!   [`Busy`] refusal otherwise. The place counts the call as pending until it is
//!   dropped (when the call has ended, its run included).
//! - [`Place::slot`] waits for a run slot. Waiting calls queue per session
//!   (FIFO). A freed slot goes to the waiting session that runs the fewest
//!   calls now, the longest-waiting of those first (round robin among
//!   equals), so one session's flood cannot starve another session's call:
//!   a session with nothing running gets the very next slot.
//! - A [`RunSlot`] is one running call; dropping it hands the slot straight to
//!   the next waiting call, or frees it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// The limits, from `serve --max-concurrent`, `--max-pending`,
/// `--max-pending-per-session`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QueueLimits {
    pub(crate) max_concurrent: usize,
    pub(crate) max_pending: usize,
    pub(crate) max_pending_per_session: usize,
}

/// Which session a call belongs to (a number per MCP session).
pub(crate) type SessionKey = u64;

/// Pending counts and run slots of one server.
pub(crate) struct CallQueue {
    limits: QueueLimits,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    running: usize,
    pending: usize,
    sessions: HashMap<SessionKey, SessionQueue>,
    /// Sessions with a waiting call, in the order they get a slot.
    turn: VecDeque<SessionKey>,
}

#[derive(Default)]
struct SessionQueue {
    pending: usize,
    running: usize,
    waiting: VecDeque<oneshot::Sender<()>>,
}

/// A call refused because too many are pending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Busy {
    Session { pending: usize, limit: usize },
    Server { pending: usize, limit: usize },
}

impl std::fmt::Display for Busy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Busy::Session { pending, limit } => write!(
                f,
                "{pending} calls already pending for this session (limit {limit}); retry later"
            ),
            Busy::Server { pending, limit } => write!(
                f,
                "{pending} calls already pending on this server (limit {limit}); retry later"
            ),
        }
    }
}

impl CallQueue {
    pub(crate) fn new(limits: QueueLimits) -> Arc<CallQueue> {
        let limits = QueueLimits {
            max_concurrent: limits.max_concurrent.max(1),
            max_pending: limits.max_pending.max(1),
            max_pending_per_session: limits.max_pending_per_session.max(1),
        };
        Arc::new(CallQueue {
            limits,
            state: Mutex::new(State::default()),
        })
    }

    /// Calls pending now (waiting or running), across sessions.
    pub(crate) fn pending(&self) -> usize {
        self.lock().pending
    }

    /// Admit one more call of `session`, or refuse it at once.
    pub(crate) fn enqueue(self: &Arc<Self>, session: SessionKey) -> Result<Place, Busy> {
        let mut st = self.lock();
        let mine = st.sessions.get(&session).map_or(0, |s| s.pending);
        if mine >= self.limits.max_pending_per_session {
            return Err(Busy::Session {
                pending: mine,
                limit: self.limits.max_pending_per_session,
            });
        }
        if st.pending >= self.limits.max_pending {
            return Err(Busy::Server {
                pending: st.pending,
                limit: self.limits.max_pending,
            });
        }
        st.pending += 1;
        st.sessions.entry(session).or_default().pending += 1;
        Ok(Place {
            queue: self.clone(),
            session,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A call of `session` ended: hand its slot to the first waiting call
    /// of the waiting session that runs the fewest, or free it.
    fn release_slot(&self, session: SessionKey) {
        let mut st = self.lock();
        let State {
            running,
            sessions,
            turn,
            ..
        } = &mut *st;
        if let Some(q) = sessions.get_mut(&session) {
            q.running = q.running.saturating_sub(1);
            if q.pending == 0 && q.running == 0 && q.waiting.is_empty() {
                sessions.remove(&session);
            }
        }
        loop {
            let next = turn
                .iter()
                .enumerate()
                .min_by_key(|(_, k)| sessions.get(k).map_or(0, |q| q.running))
                .map(|(i, _)| i);
            let Some(key) = next.and_then(|i| turn.remove(i)) else {
                break;
            };
            let Some(queue) = sessions.get_mut(&key) else {
                continue;
            };
            let mut handed = false;
            while let Some(tx) = queue.waiting.pop_front() {
                // A waiter that went away (cancelled) is skipped.
                if tx.send(()).is_ok() {
                    handed = true;
                    queue.running += 1;
                    break;
                }
            }
            if !queue.waiting.is_empty() {
                turn.push_back(key);
            }
            if handed {
                return;
            }
        }
        *running = running.saturating_sub(1);
    }
}

/// A call's place in the queue: counts it as pending until dropped.
pub(crate) struct Place {
    queue: Arc<CallQueue>,
    session: SessionKey,
}

impl Place {
    /// Wait for a run slot, in this session's turn. `None` only if the
    /// slot can never come (the queue was torn down).
    pub(crate) async fn slot(&self) -> Option<RunSlot> {
        let rx = {
            let mut st = self.queue.lock();
            if st.running < self.queue.limits.max_concurrent && st.turn.is_empty() {
                st.running += 1;
                st.sessions.entry(self.session).or_default().running += 1;
                return Some(RunSlot {
                    queue: self.queue.clone(),
                    session: self.session,
                });
            }
            let (tx, rx) = oneshot::channel();
            let queue = st.sessions.entry(self.session).or_default();
            let first = queue.waiting.is_empty();
            queue.waiting.push_back(tx);
            if first {
                st.turn.push_back(self.session);
            }
            rx
        };
        let mut waiting = Waiting {
            rx: Some(rx),
            queue: &self.queue,
            session: self.session,
        };
        let got = match waiting.rx.as_mut() {
            Some(rx) => rx.await.is_ok(),
            None => false,
        };
        waiting.rx = None;
        got.then(|| RunSlot {
            queue: self.queue.clone(),
            session: self.session,
        })
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut st = self.queue.lock();
        st.pending = st.pending.saturating_sub(1);
        if let Some(queue) = st.sessions.get_mut(&self.session) {
            queue.pending = queue.pending.saturating_sub(1);
            if queue.pending == 0 && queue.running == 0 && queue.waiting.is_empty() {
                st.sessions.remove(&self.session);
            }
        }
    }
}

/// A call waiting for its slot; if it is dropped (cancelled), its place in
/// the queue goes, and a slot handed to it meanwhile is passed on.
struct Waiting<'a> {
    rx: Option<oneshot::Receiver<()>>,
    queue: &'a CallQueue,
    session: SessionKey,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let Some(mut rx) = self.rx.take() else {
            return;
        };
        rx.close();
        let handed = rx.try_recv().is_ok();
        {
            let mut st = self.queue.lock();
            let State { sessions, turn, .. } = &mut *st;
            if let Some(queue) = sessions.get_mut(&self.session) {
                queue.waiting.retain(|tx| !tx.is_closed());
                if queue.waiting.is_empty() {
                    turn.retain(|k| *k != self.session);
                }
            }
        }
        if handed {
            self.queue.release_slot(self.session);
        }
    }
}

/// One of the `--max-concurrent` run slots, held while the call runs.
pub(crate) struct RunSlot {
    queue: Arc<CallQueue>,
    session: SessionKey,
}

impl Drop for RunSlot {
    fn drop(&mut self) {
        self.queue.release_slot(self.session);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn limits(c: usize, p: usize, s: usize) -> QueueLimits {
        QueueLimits {
            max_concurrent: c,
            max_pending: p,
            max_pending_per_session: s,
        }
    }

    #[test]
    fn caps_per_session_and_overall() {
        let a = CallQueue::new(limits(1, 3, 2));
        let t1 = a.enqueue(1).unwrap();
        let _t2 = a.enqueue(1).unwrap();
        assert_eq!(
            a.enqueue(1).err(),
            Some(Busy::Session {
                pending: 2,
                limit: 2
            })
        );
        let _t3 = a.enqueue(2).unwrap();
        assert_eq!(
            a.enqueue(3).err(),
            Some(Busy::Server {
                pending: 3,
                limit: 3
            })
        );
        drop(t1);
        assert!(a.enqueue(1).is_ok());
        assert_eq!(a.pending(), 3 - 1);
    }

    #[tokio::test]
    async fn slots_go_round_robin_across_sessions() {
        let a = CallQueue::new(limits(1, 100, 100));
        let first = a.enqueue(1).unwrap();
        let running = first.slot().await.unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        // Session 1 queues five calls, then session 2 queues one.
        for (i, session) in [1, 1, 1, 1, 1, 2].into_iter().enumerate() {
            let place = a.enqueue(session).unwrap();
            let order = order.clone();
            tasks.push(tokio::spawn(async move {
                let slot = place.slot().await.unwrap();
                order.lock().unwrap().push((i, session));
                drop(slot);
            }));
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        drop(running);
        for t in tasks {
            t.await.unwrap();
        }
        let order = order.lock().unwrap().clone();
        let second = order.iter().position(|(_, s)| *s == 2).unwrap();
        assert!(second <= 1, "session 2 waited behind session 1: {order:?}");
        drop(first);
        assert_eq!(a.pending(), 0);
    }

    #[tokio::test]
    async fn the_session_running_fewest_gets_the_next_slot() {
        let a = CallQueue::new(limits(2, 100, 100));
        // Session 1 runs two calls and queues two more; session 2 queues one.
        let (ta, tb) = (a.enqueue(1).unwrap(), a.enqueue(1).unwrap());
        let (sa, _sb) = (ta.slot().await.unwrap(), tb.slot().await.unwrap());
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for session in [1, 1, 2] {
            let place = a.enqueue(session).unwrap();
            let order = order.clone();
            tasks.push(tokio::spawn(async move {
                let slot = place.slot().await.unwrap();
                order.lock().unwrap().push(session);
                tokio::time::sleep(Duration::from_millis(20)).await;
                drop(slot);
            }));
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        drop(sa);
        tokio::time::sleep(Duration::from_millis(5)).await;
        // Session 1 still runs one, session 2 none: session 2 goes first.
        assert_eq!(order.lock().unwrap().first(), Some(&2));
        for t in tasks {
            t.abort();
        }
    }

    #[tokio::test]
    async fn a_cancelled_waiter_passes_its_turn_on() {
        let a = CallQueue::new(limits(1, 100, 100));
        let t0 = a.enqueue(1).unwrap();
        let running = t0.slot().await.unwrap();
        let gone = a.enqueue(2).unwrap();
        let waited = tokio::time::timeout(Duration::from_millis(20), gone.slot()).await;
        assert!(waited.is_err());
        let next = a.enqueue(3).unwrap();
        let later = tokio::spawn(async move { next.slot().await.is_some() });
        tokio::time::sleep(Duration::from_millis(5)).await;
        drop(running);
        assert!(later.await.unwrap());
        // The slot went back when the last holder finished.
        let t4 = a.enqueue(4).unwrap();
        assert!(
            tokio::time::timeout(Duration::from_millis(100), t4.slot())
                .await
                .unwrap()
                .is_some()
        );
    }
}
