//! Upstream MCP servers (`.mcp.json`, A3S `kind: mcp`) and the gateway to
//! them: each a long-lived child in the sandbox under its own grant
//! (`[upstreams.NAME]`, by default the `untrusted` profile: project
//! read-only, no network), one instance per (server, client session),
//! never one per call. Uses nothing of the surfaces (`cli`, `mcp`); they
//! use it through [`Session`].
//!
//! - [`session`]: a session's servers and the one constructor of its
//!   toolbox (local tools plus upstream tools), for every surface.
//! - [`instance`]: one running server (sandbox + rmcp client).
//! - [`client`]: what toolcage declares to a server and does with its
//!   requests (elicitation forwarded only to a client that declared it).
//! - [`exposed`]: the tools offered: flat `server__tool`, or deferred
//!   behind Octo's `find_tools` / `call_mcp_tool` ([`deferred`]).
//! - [`pins`]: a changed tool definition is held until approved (and a
//!   prompt's, and the messages it returns: `prompts`, `prompt_messages`).
//! - `server`: one declared server, its launch and grants; `status`: what
//!   `upstreams` and `check` show of each.
//! - [`toolbox`]: the gateway's tools as part of the call pipeline, so an
//!   upstream call passes the same gate (approval, rate limits, audit).
//!
//! A server that dies is restarted on the next call, after a backoff of
//! 1 s doubling to 30 s; a call in flight when it died fails (`isError`)
//! and is never sent again.

pub(crate) mod client;
mod complete;
pub(crate) mod deferred;
pub(crate) mod exposed;
pub(crate) mod http_client;
pub(crate) mod instance;
pub(crate) mod names;
pub(crate) mod pins;
mod prompt_messages;
pub(crate) mod prompts;
pub(crate) mod resources;
mod server;
pub(crate) mod session;
mod start_error;
mod status;
pub(crate) mod toolbox;

use crate::call::Engine;
use client::{OnListChanged, UpstreamClient};
use instance::Instance;
use pins::Pins;
use rmcp::{Peer, RoleServer};
use server::ToolPolicy;
pub(crate) use server::{Launch, Server, hide};
pub(crate) use session::Session;
pub(crate) use status::{Status, skipped_status};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const BACKOFF_FIRST: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

enum Slot {
    Running(Arc<Instance>),
    Failed {
        why: String,
        failures: u32,
        retry_at: Instant,
    },
}

/// Options a surface gives its gateway.
#[derive(Clone, Default)]
pub(crate) struct Wiring {
    /// The downstream client (elicitation forwarding).
    pub(crate) downstream: Option<Peer<RoleServer>>,
    /// Called when the tools the gateway exposes may have changed.
    pub(crate) on_change: Option<Arc<dyn Fn() + Send + Sync>>,
    pub(crate) elicitation_timeout: Duration,
}

/// The upstream servers of one client session.
pub(crate) struct Gateway {
    pub(crate) servers: Vec<Server>,
    pub(crate) pins: Pins,
    /// The pins of the servers' prompts (`prompt-pins`).
    pub(crate) prompt_pins: Pins,
    /// The pins of the messages their gets return for no arguments
    /// (`prompt-message-pins`).
    pub(crate) prompt_message_pins: Pins,
    /// Each prompt offered or held, by the name the client sees.
    pub(crate) prompt_routes: Mutex<BTreeMap<String, prompts::Route>>,
    /// The prompt name collisions logged in this session (each once).
    prompt_collisions_logged: Mutex<std::collections::BTreeSet<String>>,
    slots: tokio::sync::Mutex<BTreeMap<String, Slot>>,
    /// Names taken by local tools: flat names avoid them.
    pub(crate) local_names: Vec<String>,
    wiring: Wiring,
    /// The exposed tools, recomputed when an instance starts or re-lists.
    exposed: Mutex<Arc<exposed::Exposed>>,
    /// The client has been sent a tool list: changes after it are news.
    listed: std::sync::atomic::AtomicBool,
    /// Where the progress of a call goes, by its cancel token
    /// ([`Gateway::route_progress`]).
    progress: Mutex<std::collections::HashMap<usize, client::ProgressSink>>,
    /// What an upstream tool's own `[tools."server__tool"]` section is
    /// resolved with ([`Gateway::tool_grant`]).
    tool_policy: ToolPolicy,
    /// Upstream elicitation requests forwarded in this session.
    session_elicits: Arc<std::sync::atomic::AtomicUsize>,
    /// Which server listed each resource URI and template, as last listed.
    pub(crate) resource_routes: Mutex<resources::Routes>,
}

impl Gateway {
    /// The servers of `engine`'s project with their grants; nothing starts.
    pub(crate) fn new(engine: &Engine, wiring: Wiring) -> Gateway {
        let servers = engine
            .catalog
            .upstreams
            .iter()
            .map(|spec| Server::of(spec, engine))
            .collect();
        Gateway {
            servers,
            pins: Pins::in_store(engine.store.clone()),
            prompt_pins: Pins::prompts_in(engine.store.clone()),
            prompt_message_pins: Pins::prompt_messages_in(engine.store.clone()),
            prompt_routes: Mutex::default(),
            prompt_collisions_logged: Mutex::default(),
            slots: tokio::sync::Mutex::new(BTreeMap::new()),
            local_names: engine
                .catalog
                .tools
                .iter()
                .map(|t| t.name.clone())
                .collect(),
            wiring,
            exposed: Mutex::new(Arc::new(exposed::Exposed::default())),
            listed: std::sync::atomic::AtomicBool::new(false),
            progress: Mutex::new(std::collections::HashMap::new()),
            tool_policy: ToolPolicy {
                stack: engine.stack.clone(),
                ctx: engine.ctx.clone(),
                sections: engine.stack.tool_sections(),
            },
            session_elicits: Default::default(),
            resource_routes: Mutex::default(),
        }
    }

    /// The client this session's gateway serves, if any.
    pub(crate) fn downstream(&self) -> Option<&Peer<RoleServer>> {
        self.wiring.downstream.as_ref()
    }

    pub(crate) fn server(&self, name: &str) -> Option<&Server> {
        self.servers.iter().find(|s| s.spec.name == name)
    }

    /// Why `server` cannot be started at all (disabled, or its grant does
    /// not resolve), if so.
    fn refusal(server: &Server) -> Option<(&'static str, String)> {
        if !server.settings.enabled {
            return Some(("disabled", "enabled = false in [upstreams]".into()));
        }
        if let Err(e) = &server.launch {
            return Some(("refused", e.clone()));
        }
        if let Err(e) = &server.grant {
            return Some(("refused", e.clone()));
        }
        None
    }

    /// Start every server that can run and is not running (in parallel),
    /// unless it failed and its backoff has not passed.
    pub(crate) async fn ensure_started(self: &Arc<Self>) {
        let names: Vec<String> = self
            .servers
            .iter()
            .filter(|s| Self::refusal(s).is_none())
            .map(|s| s.spec.name.clone())
            .collect();
        let starts = names.iter().map(|n| self.instance(n));
        futures::future::join_all(starts).await;
    }

    /// The running instance of `name`, started if needed.
    pub(crate) async fn instance(self: &Arc<Self>, name: &str) -> Result<Arc<Instance>, String> {
        let server = self
            .server(name)
            .ok_or_else(|| format!("no upstream server '{name}'"))?;
        if let Some((_, why)) = Self::refusal(server) {
            return Err(format!("upstream server '{name}': {why}"));
        }
        let mut slots = self.slots.lock().await;
        let failures = match slots.get(name) {
            Some(Slot::Running(i)) => match i.exited() {
                None => return Ok(i.clone()),
                Some(why) => {
                    tracing::warn!("upstream {name}: {why}");
                    1
                }
            },
            Some(Slot::Failed {
                why,
                failures,
                retry_at,
            }) => {
                if Instant::now() < *retry_at {
                    return Err(format!(
                        "upstream server '{name}' failed ({why}); retrying in {}s",
                        retry_at.saturating_duration_since(Instant::now()).as_secs() + 1
                    ));
                }
                *failures
            }
            None => 0,
        };
        let grant = match &server.grant {
            Ok(r) => r.grant.clone(),
            Err(e) => return Err(e.clone()),
        };
        let launch = match &server.launch {
            Ok(l) => l,
            Err(e) => return Err(e.clone()),
        };
        let client = self.client_for(server, &grant);
        match Instance::start(&server.spec, launch, &grant, client).await {
            Ok(i) => {
                let i = Arc::new(i);
                slots.insert(name.to_string(), Slot::Running(i.clone()));
                drop(slots);
                self.recompute().await;
                Ok(i)
            }
            Err(why) => {
                let failures = failures + 1;
                let backoff = BACKOFF_FIRST
                    .saturating_mul(1 << failures.min(6).saturating_sub(1))
                    .min(BACKOFF_MAX);
                slots.insert(
                    name.to_string(),
                    Slot::Failed {
                        why: why.clone(),
                        failures,
                        retry_at: Instant::now() + backoff,
                    },
                );
                Err(why)
            }
        }
    }

    fn client_for(
        self: &Arc<Self>,
        server: &Server,
        grant: &crate::policy::Grant,
    ) -> UpstreamClient {
        let weak = Arc::downgrade(self);
        let on_list_changed: OnListChanged = Arc::new(move |name: String| {
            let Some(gw) = weak.upgrade() else { return };
            tokio::spawn(async move { gw.relist(&name).await });
        });
        let roots = grant
            .read
            .iter()
            .filter(|p| p.starts_with(&grant.project))
            .map(|p| format!("file://{}", p.display()))
            .collect();
        let weak = Arc::downgrade(self);
        let on_resource: client::OnResource = Arc::new(move |name, uri| {
            let Some(gw) = weak.upgrade() else { return };
            tokio::spawn(async move { gw.resource_news(&name, uri).await });
        });
        UpstreamClient {
            server: server.spec.name.clone(),
            downstream: self.wiring.downstream.clone(),
            on_list_changed: Some(on_list_changed),
            on_resource: Some(on_resource),
            roots,
            elicitation_timeout: self.wiring.elicitation_timeout,
            progress: Default::default(),
            elicits: Default::default(),
            session_elicits: self.session_elicits.clone(),
        }
    }

    /// A server said its tools changed: list them again, re-check pins,
    /// tell the client if what is offered changed. Notifications that come
    /// while a listing runs make one more listing, not one each; a listing
    /// past its bounds stops the server.
    async fn relist(&self, name: &str) {
        let instance = match self.slots.lock().await.get(name) {
            Some(Slot::Running(i)) => i.clone(),
            _ => return,
        };
        use std::sync::atomic::Ordering::SeqCst;
        instance.relist_again.store(true, SeqCst);
        if instance.relisting.swap(true, SeqCst) {
            return;
        }
        while instance.relist_again.swap(false, SeqCst) {
            if let Err(e) = instance.refresh_tools().await {
                tracing::warn!("upstream {name}: cannot list its tools again: {e}");
                instance.relisting.store(false, SeqCst);
                let why = format!("'{name}' did not list its tools: {e}");
                let mut slots = self.slots.lock().await;
                // Only the instance that failed: a newer one stays.
                if matches!(slots.get(name), Some(Slot::Running(i)) if Arc::ptr_eq(i, &instance)) {
                    slots.insert(
                        name.to_string(),
                        Slot::Failed {
                            why,
                            failures: 1,
                            retry_at: Instant::now() + BACKOFF_MAX,
                        },
                    );
                }
                drop(slots);
                self.recompute().await;
                return;
            }
        }
        instance.relisting.store(false, SeqCst);
        self.recompute().await;
    }

    /// Rebuild the exposed set from the running instances; tell the
    /// client when it changed.
    async fn recompute(&self) {
        let running = {
            let slots = self.slots.lock().await;
            self.running_of(&slots)
        };
        self.apply(&running);
    }

    /// The tool lists of the running instances (`(index in servers, tools)`).
    fn running_of(&self, slots: &BTreeMap<String, Slot>) -> Vec<(usize, Vec<rmcp::model::Tool>)> {
        self.servers
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match slots.get(&s.spec.name) {
                Some(Slot::Running(inst)) => Some((
                    i,
                    inst.tools.lock().unwrap_or_else(|p| p.into_inner()).clone(),
                )),
                _ => None,
            })
            .collect()
    }

    /// Check `running` against the pins and offer the result.
    fn apply(&self, running: &[(usize, Vec<rmcp::model::Tool>)]) {
        let new = exposed::Exposed::build(self, running);
        let changed = {
            let mut cur = self.exposed.lock().unwrap_or_else(|p| p.into_inner());
            let changed = cur.offered_names() != new.offered_names()
                || cur.definitions() != new.definitions();
            *cur = Arc::new(new);
            changed
        };
        let listed = self.listed.load(std::sync::atomic::Ordering::Relaxed);
        if changed
            && listed
            && let Some(f) = &self.wiring.on_change
        {
            f();
        }
    }

    /// What is offered now, as the client is sent it in `tools/list`: from
    /// now on a change is announced with `list_changed`.
    pub(crate) fn listed(&self) -> Arc<exposed::Exposed> {
        self.listed
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.exposed()
    }

    /// What is offered now. When the pins could not be read (a store that
    /// did not answer, a damaged file), they are read again first: a store
    /// that is back serves this very call, no new session needed.
    pub(crate) fn exposed(&self) -> Arc<exposed::Exposed> {
        let cur = self
            .exposed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if cur.unusable.is_none() {
            return cur;
        }
        // Busy (an instance starting or listing): it rebuilds when done.
        let Ok(slots) = self.slots.try_lock() else {
            return cur;
        };
        let running = self.running_of(&slots);
        drop(slots);
        self.apply(&running);
        self.exposed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Send the upstream progress of the call that `cancel` belongs to
    /// into `sink` (the surface forwards it to its client), until
    /// [`Gateway::unroute_progress`].
    pub(crate) fn route_progress(
        &self,
        cancel: &crate::sandbox::CancelToken,
        sink: client::ProgressSink,
    ) {
        self.progress
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(cancel.id(), sink);
    }

    pub(crate) fn unroute_progress(&self, cancel: &crate::sandbox::CancelToken) {
        self.progress
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&cancel.id());
    }

    fn progress_sink(
        &self,
        cancel: Option<&crate::sandbox::CancelToken>,
    ) -> Option<client::ProgressSink> {
        let cancel = cancel?;
        self.progress
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&cancel.id())
            .cloned()
    }

    /// Stop servers unused for longer than their `idle_timeout`.
    pub(crate) async fn stop_idle(&self) {
        let mut slots = self.slots.lock().await;
        let idle: Vec<String> = slots
            .iter()
            .filter_map(|(name, slot)| {
                let Slot::Running(i) = slot else { return None };
                let limit = self.server(name)?.settings.idle_timeout?;
                let last = *i.last_used.lock().unwrap_or_else(|p| p.into_inner());
                (last.elapsed() > limit).then(|| name.clone())
            })
            .collect();
        for name in idle {
            tracing::info!("upstream {name}: idle; stopped");
            slots.remove(&name);
        }
    }

    /// Stop every server (their process trees are killed).
    pub(crate) async fn stop_all(&self) {
        self.slots.lock().await.clear();
    }

    /// Mark `name` failed after a call found it gone (the next call
    /// restarts it after the backoff).
    async fn mark_gone(&self, name: &str, why: &str) {
        let mut slots = self.slots.lock().await;
        slots.insert(
            name.to_string(),
            Slot::Failed {
                // With its stderr's tail: the next call within the backoff
                // says why as the failed one did.
                why: why.to_string(),
                failures: 1,
                retry_at: Instant::now() + BACKOFF_FIRST,
            },
        );
    }
}

/// Stop `gw`'s idle servers every 30 s, for as long as it exists.
pub(crate) fn stop_when_idle(gw: &Arc<Gateway>) {
    let weak = Arc::downgrade(gw);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(30));
        tick.tick().await;
        loop {
            tick.tick().await;
            let Some(gw) = weak.upgrade() else { return };
            gw.stop_idle().await;
        }
    });
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field(
                "servers",
                &self
                    .servers
                    .iter()
                    .map(|s| &s.spec.name)
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}
