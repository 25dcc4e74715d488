//! `toolcage upstreams [--json]`: the project's upstream MCP servers
//! (`.mcp.json`, A3S `kind: mcp`), each started in its sandbox to show
//! its state, tools and pins; `toolcage upstreams approve NAME` pins the
//! current definitions of a server's tools (`NAME`) or of one tool
//! (`server__tool`) after a change held them back.
//!
//! Also the gateway the other commands use for upstream tools
//! ([`CliGateway`]): `list`, `schema`, `call` and `check` start the
//! servers for the one command and stop them when it ends.

use super::{Global, PolicyArgs, status};
use crate::call::{Engine, Toolbox};
use crate::mcp::gateway::{Gateway, Status, Wiring, toolbox::SessionTools};
use crate::text;
use clap::{Args, Subcommand};
use std::sync::Arc;

#[derive(Debug, Args)]
pub struct UpstreamsArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Print a JSON array of {name, source, transport, runs, expose, state, reason, tools, pinned, held}.
    #[arg(long)]
    pub json: bool,
    #[command(subcommand)]
    pub action: Option<UpstreamsAction>,
}

#[derive(Debug, Subcommand)]
pub enum UpstreamsAction {
    /// Pin the current definitions of server NAME's tools, or of one tool (server__tool).
    Approve {
        name: String,
        #[command(flatten)]
        policy: PolicyArgs,
    },
}

/// The upstream servers of one command, started for it.
pub struct CliGateway {
    pub runtime: tokio::runtime::Runtime,
    pub gateway: Arc<Gateway>,
}

impl CliGateway {
    /// `None` when the project declares no upstream server.
    pub fn start(engine: &Engine) -> Result<Option<CliGateway>, String> {
        if engine.catalog.upstreams.is_empty() {
            return Ok(None);
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the gateway's runtime: {e}"))?;
        let gateway = Arc::new(Gateway::new(engine, Wiring::default()));
        runtime.block_on(gateway.ensure_started());
        Ok(Some(CliGateway { runtime, gateway }))
    }

    /// The local tools and these servers' tools, for the call pipeline.
    pub fn toolbox(&self, local: Arc<dyn Toolbox>) -> Arc<dyn Toolbox> {
        Arc::new(SessionTools {
            local,
            gateway: self.gateway.clone(),
            runtime: self.runtime.handle().clone(),
        })
    }

    pub fn status(&self) -> Vec<Status> {
        self.runtime.block_on(self.gateway.status())
    }
}

impl Drop for CliGateway {
    fn drop(&mut self) {
        self.runtime.block_on(self.gateway.stop_all());
    }
}

pub fn run(global: &Global, args: &UpstreamsArgs) -> u8 {
    // The policy options may come before or after `approve NAME`.
    let policy = match &args.action {
        Some(UpstreamsAction::Approve { policy, .. })
            if policy.profile.is_some() || policy.policy.is_some() =>
        {
            policy
        }
        _ => &args.policy,
    };
    let engine = match global.engine(policy) {
        Ok(e) => e,
        Err(e) => {
            super::say(&e);
            return status::INTERNAL;
        }
    };
    // Servers skipped at load are listed too, with why.
    let skipped = crate::mcp::gateway::skipped_status(&engine);
    if let Some(UpstreamsAction::Approve { name, .. }) = &args.action
        && let Some(s) = skipped.iter().find(|s| &s.name == name)
    {
        super::say(&format!(
            "upstream server '{name}' was skipped at load ({}): {}",
            s.state,
            s.reason.as_deref().unwrap_or_default()
        ));
        return status::INVALID;
    }
    let gw = match CliGateway::start(&engine) {
        Ok(Some(g)) => g,
        Ok(None) if args.action.is_none() && !skipped.is_empty() => {
            return show(skipped, args.json);
        }
        Ok(None) => {
            if let Some(UpstreamsAction::Approve { name, .. }) = &args.action
                && !skipped.is_empty()
            {
                let names: Vec<&str> = skipped.iter().map(|s| s.name.as_str()).collect();
                super::say(&format!(
                    "no upstream server '{name}' (skipped at load: {}; see toolcage upstreams)",
                    names.join(", ")
                ));
                return status::INVALID;
            }
            if args.action.is_some() {
                super::say(
                    &"no upstream servers: the project has no .mcp.json and no A3S kind: mcp tools",
                );
                return status::INVALID;
            }
            if args.json {
                outln!("[]");
            } else {
                outln!("no upstream servers (none in .mcp.json or tools/*.md kind: mcp)");
            }
            return status::OK;
        }
        Err(e) => {
            super::say(&e);
            return status::INTERNAL;
        }
    };
    match &args.action {
        Some(UpstreamsAction::Approve { name, .. }) => approve(&gw, name),
        None => {
            let mut rows = gw.status();
            rows.extend(skipped);
            rows.sort_by(|a, b| a.name.cmp(&b.name));
            show(rows, args.json)
        }
    }
}

fn show(rows: Vec<Status>, json: bool) -> u8 {
    if json {
        return super::print_json(&rows).unwrap_or(status::OK);
    }
    for r in &rows {
        outln!(
            "{}  {}  {} tool(s), {} pinned, expose {}  ({}: {})",
            text::one_line(&r.name),
            r.state,
            r.tools,
            r.pinned,
            serde_json::to_value(r.expose)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            r.transport,
            text::one_line(&r.runs)
        );
        outln!("    declared in {}", text::one_line(&r.source));
        if let Some(why) = &r.reason {
            for line in why.lines() {
                outln!("    {}", text::one_line(line));
            }
        }
        for n in &r.renamed {
            outln!(
                "    {} is offered as {}: {}",
                text::one_line(&n.tool),
                text::one_line(&n.name),
                text::one_line(&n.why)
            );
        }
        for h in &r.held {
            outln!(
                "    held: {} changed its definition since it was pinned (review it, then: toolcage upstreams approve {}__{})",
                text::one_line(h),
                text::one_line(&r.name),
                text::one_line(h)
            );
        }
    }
    status::OK
}

fn approve(gw: &CliGateway, name: &str) -> u8 {
    let (server, only) = match gw.gateway.server(name) {
        Some(_) => (name.to_string(), None),
        None => match name.split_once("__") {
            Some((s, t)) if gw.gateway.server(s).is_some() => (s.to_string(), Some(t.to_string())),
            _ => {
                let known: Vec<&str> = gw
                    .gateway
                    .servers
                    .iter()
                    .map(|s| s.spec.name.as_str())
                    .collect();
                super::say(&format!(
                    "no upstream server '{name}' (servers: {}); name a server or server__tool",
                    known.join(", ")
                ));
                return status::INVALID;
            }
        },
    };
    let instance = match gw.runtime.block_on(gw.gateway.instance(&server)) {
        Ok(i) => i,
        Err(e) => {
            super::say(&format!("cannot start '{server}' to read its tools: {e}"));
            return status::INTERNAL;
        }
    };
    let tools = instance
        .tools
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    if let Some(t) = &only
        && !tools.iter().any(|x| x.name == t.as_str())
    {
        super::say(&format!("server '{server}' has no tool '{t}'"));
        return status::INVALID;
    }
    match gw.gateway.pins.approve(&server, &tools, only.as_deref()) {
        Ok(changed) if changed.is_empty() => {
            outln!("{server}: every definition was already pinned; nothing changed");
            status::OK
        }
        Ok(changed) => {
            for t in changed {
                outln!("pinned {server}__{}", text::one_line(&t));
            }
            status::OK
        }
        Err(e) => {
            super::say(&e);
            status::INTERNAL
        }
    }
}
