//! A session's upstream servers, and the one place a session's toolbox (the
//! local tools plus its upstream servers' tools) is put together. Every
//! surface gets its tools here: `toolcage call`, `list`, `schema`, `check`
//! and `upstreams` open a [`Session`] for the one command; the MCP server
//! wraps each client session's gateway in one ([`Session::on_server`]).

use super::exposed::Exposed;
use super::toolbox::SessionTools;
use super::{Gateway, Status, Wiring};
use crate::call::{Engine, Toolbox};
use rmcp::{Peer, RoleServer};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// The upstream servers of one session (none when the project declares
/// none), and the runtime their clients run on.
pub(crate) struct Session {
    upstream: Option<Upstream>,
}

struct Upstream {
    gateway: Arc<Gateway>,
    runtime: Runtime,
}

enum Runtime {
    /// A command's own: its servers stop when the session ends.
    Own(tokio::runtime::Runtime),
    /// The MCP server's: the server stops its gateways when they idle.
    Shared(tokio::runtime::Handle),
}

impl Upstream {
    fn handle(&self) -> tokio::runtime::Handle {
        match &self.runtime {
            Runtime::Own(rt) => rt.handle().clone(),
            Runtime::Shared(h) => h.clone(),
        }
    }
}

impl Session {
    /// No upstream server: the toolbox is the local tools alone.
    pub(crate) fn none() -> Session {
        Session { upstream: None }
    }

    /// For one command: the project's upstream servers started, on a
    /// runtime of the session's own, and stopped when it is dropped. No
    /// runtime is started when the project declares no upstream server.
    pub(crate) fn for_command(engine: &Engine) -> Result<Session, String> {
        if engine.catalog.upstreams.is_empty() {
            return Ok(Session::none());
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the gateway's runtime: {e}"))?;
        let gateway = Arc::new(Gateway::new(engine, Wiring::default()));
        runtime.block_on(gateway.ensure_started());
        Ok(Session {
            upstream: Some(Upstream {
                gateway,
                runtime: Runtime::Own(runtime),
            }),
        })
    }

    /// The gateway of an MCP client session, made on its first use: `peer`
    /// is the client elicitation is forwarded to and `list_changed` sent
    /// to; the gateway stops its servers when the session idles. `None`
    /// when the project declares no upstream server.
    pub(crate) fn gateway_for_client(
        engine: &Engine,
        peer: &Peer<RoleServer>,
        elicitation_timeout: Duration,
    ) -> Option<Arc<Gateway>> {
        if engine.catalog.upstreams.is_empty() {
            return None;
        }
        let notify = peer.clone();
        let wiring = Wiring {
            downstream: Some(peer.clone()),
            on_change: Some(Arc::new(move || {
                let peer = notify.clone();
                tokio::spawn(async move {
                    let _ = peer.notify_tool_list_changed().await;
                });
            })),
            elicitation_timeout,
        };
        let gw = Arc::new(Gateway::new(engine, wiring));
        super::stop_when_idle(&gw);
        Some(gw)
    }

    /// For an MCP client session: its gateway, if it has made one, on the
    /// server's runtime (call it inside that runtime).
    pub(crate) fn on_server(gateway: Option<Arc<Gateway>>) -> Session {
        Session {
            upstream: gateway.map(|gateway| Upstream {
                gateway,
                runtime: Runtime::Shared(tokio::runtime::Handle::current()),
            }),
        }
    }

    /// The session's toolbox: `local`, and the upstream servers' tools
    /// by the names calls use. What the call pipeline runs through.
    pub(crate) fn toolbox(&self, local: Arc<dyn Toolbox>) -> Arc<dyn Toolbox> {
        match &self.upstream {
            Some(u) => Arc::new(SessionTools {
                local,
                gateway: u.gateway.clone(),
                runtime: u.handle(),
            }),
            None => local,
        }
    }

    /// The gateway, when the project declares upstream servers.
    pub(crate) fn gateway(&self) -> Option<&Arc<Gateway>> {
        self.upstream.as_ref().map(|u| &u.gateway)
    }

    /// The tools the servers offer (and hold back), when there are servers.
    pub(crate) fn exposed(&self) -> Option<Arc<Exposed>> {
        self.gateway().map(|g| g.exposed())
    }

    /// Each server's state; empty when there are none.
    pub(crate) fn status(&self) -> Vec<Status> {
        match &self.upstream {
            Some(u) => u.handle().block_on(u.gateway.status()),
            None => Vec::new(),
        }
    }

    /// Run `f` on the servers' runtime, from outside it (a command).
    pub(crate) fn block_on<F: Future>(&self, f: F) -> Option<F::Output> {
        self.upstream.as_ref().map(|u| u.handle().block_on(f))
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(Upstream {
            gateway,
            runtime: Runtime::Own(rt),
        }) = &self.upstream
        {
            rt.block_on(gateway.stop_all());
        }
    }
}
