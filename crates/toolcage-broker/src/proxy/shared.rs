//! What the proxy's threads share for one call: the domain policy, the
//! synthetic addresses handed out, the refusals recorded and the open
//! connections to cut when the call ends.

use super::dns;
use crate::denial::{Denial, DenialLog};
use std::collections::HashMap;
use std::net::{IpAddr, TcpStream};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use toolcage_policy::{DomainPolicy, DomainRefusal, RefusalKind};

/// Resolves a name to addresses (the system resolver; tests count calls).
pub(super) type Resolver = fn(&str, u16) -> std::io::Result<Vec<IpAddr>>;

/// What the threads share.
pub(crate) struct Shared {
    pub(super) policy: DomainPolicy,
    pub(super) synth: Mutex<dns::Synthetic>,
    pub(super) denials: Mutex<DenialLog>,
    /// Duplicates of both sides of every relayed connection, shut down
    /// when the call ends so no thread outlives it for long.
    pub(super) active: Mutex<HashMap<u64, [TcpStream; 2]>>,
    pub(super) next_id: AtomicU64,
    pub(super) connections: AtomicUsize,
    pub(super) stopping: AtomicBool,
    pub(super) resolve: Resolver,
}

impl Shared {
    pub(super) fn new(policy: DomainPolicy, resolve: Resolver) -> Shared {
        Shared {
            policy,
            synth: Mutex::default(),
            denials: Mutex::default(),
            active: Mutex::default(),
            next_id: AtomicU64::new(0),
            connections: AtomicUsize::new(0),
            stopping: AtomicBool::new(false),
            resolve,
        }
    }

    pub(super) fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }

    /// Record a refusal of `op` on `target` by `layer`.
    pub(super) fn deny(
        &self,
        layer: &'static str,
        op: &'static str,
        target: String,
        r: &DomainRefusal,
    ) {
        let fix = match r.kind {
            RefusalKind::NotAllowed => Some(format!(
                "add it to [network] allow, or to the tool's [tools.NAME.network] allow where \
                 its section has a list of its own (or pass --allow-domain {target})"
            )),
            RefusalKind::Denylist => r
                .rule
                .as_ref()
                .map(|rule| format!("remove \"{rule}\" from [network] deny")),
            _ => None,
        };
        self.denials.lock().unwrap().record(Denial {
            layer,
            op,
            target,
            rule: r.rule.clone(),
            reason: r.reason.clone(),
            fix,
            count: 1,
            inferred: false,
        });
    }

    pub(super) fn register(&self, a: &TcpStream, b: &TcpStream) -> Option<u64> {
        let (a, b) = (a.try_clone().ok()?, b.try_clone().ok()?);
        let mut active = self.active.lock().unwrap();
        if self.stopping() {
            return None;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        active.insert(id, [a, b]);
        Some(id)
    }

    pub(super) fn unregister(&self, id: u64) {
        self.active.lock().unwrap().remove(&id);
    }
}
