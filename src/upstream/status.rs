//! What `toolcage upstreams` and `check` show of each server: the
//! gateway's servers ([`Gateway::status`]) and the ones discovery skipped
//! ([`skipped_status`]).

use super::exposed::Exposed;
use super::pins::Pins;
use super::{Gateway, Server, Slot};
use crate::call::Engine;
use serde::Serialize;
use std::sync::Arc;

/// What `toolcage upstreams` and `check` show of one server.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Status {
    pub(crate) name: String,
    pub(crate) source: String,
    pub(crate) transport: String,
    pub(crate) runs: String,
    pub(crate) expose: crate::policy::Expose,
    /// `running`, `failed`, `refused`, `disabled`, `stopped`; for a server
    /// skipped at load ([`skipped_status`]) `unsupported` or `skipped`.
    pub(crate) state: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
    pub(crate) tools: usize,
    pub(crate) pinned: usize,
    /// Tools held back because their definition changed.
    pub(crate) held: Vec<String>,
    /// Tools not offered because their pinned name is now a local tool's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) displaced: Vec<Renamed>,
    /// Tools offered under another name than `server__tool`, and why
    /// (a collision, a long name, characters replaced).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) renamed: Vec<Renamed>,
    /// Prompts not offered because another prompt has their name (`prefix
    /// = false`): an error of the operator's configuration (`check` fails).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) prompt_collisions: Vec<Renamed>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Renamed {
    pub(crate) tool: String,
    pub(crate) name: String,
    pub(crate) why: String,
    /// A `prefix = false` name another tool has: an error of the
    /// operator's configuration (`check` fails), not only a tool left out.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) collision: bool,
}

impl Gateway {
    /// Every server's state, for `upstreams` and `check`.
    pub(crate) async fn status(self: &Arc<Self>) -> Vec<Status> {
        // Only a `prefix = false` server's prompts can take another's name:
        // the others' prompts are not listed for this (listed before the
        // slots are held: listing starts servers).
        let collisions = match self.servers.iter().any(|s| !s.settings.prefix) {
            true => self.prompt_collisions().await,
            false => Vec::new(),
        };
        let slots = self.slots.lock().await;
        let exposed = self.exposed();
        self.servers
            .iter()
            .map(|s| {
                let name = &s.spec.name;
                let (state, reason, tools) = state_of(s, slots.get(name));
                // Pins that cannot be read refuse every server's tools.
                let (state, reason) = match &exposed.unusable {
                    Some(why) if state == "running" => ("refused".into(), Some(why.clone())),
                    _ => (state, reason),
                };
                Status {
                    name: name.clone(),
                    source: source_of(&s.spec.source, s.spec.line),
                    transport: match s.spec.stdio() {
                        true => "stdio".into(),
                        false => "http".into(),
                    },
                    runs: s.spec.transport.describe(),
                    expose: s.settings.expose,
                    state,
                    reason,
                    tools,
                    pinned: self.pins.count(name),
                    held: exposed
                        .held
                        .iter()
                        .filter(|h| &h.server == name && !h.displaced)
                        .map(|h| h.tool.clone())
                        .collect(),
                    displaced: displaced(&exposed, name),
                    renamed: renamed(&exposed, name),
                    prompt_collisions: collisions
                        .iter()
                        .filter(|c| &c.server == name)
                        .map(|c| Renamed {
                            tool: c.prompt.clone(),
                            name: c.name.clone(),
                            why: c.why.clone(),
                            collision: true,
                        })
                        .collect(),
                }
            })
            .collect()
    }
}

/// A server's state, why, and how many tools it lists.
fn state_of(s: &Server, slot: Option<&Slot>) -> (String, Option<String>, usize) {
    match (Gateway::refusal(s), slot) {
        (Some((state, why)), _) => (state.to_string(), Some(why), 0),
        (None, Some(Slot::Running(i))) => match i.exited() {
            Some(why) => ("failed".into(), Some(why), 0),
            None => (
                "running".into(),
                None,
                i.tools.lock().unwrap_or_else(|p| p.into_inner()).len(),
            ),
        },
        (None, Some(Slot::Failed { why, .. })) => ("failed".into(), Some(why.clone()), 0),
        (None, None) => ("stopped".into(), None, 0),
    }
}

/// Where a server is declared: `file:line`, or the file.
fn source_of(source: &std::path::Path, line: Option<usize>) -> String {
    match line {
        Some(l) => format!("{}:{l}", source.display()),
        None => source.display().to_string(),
    }
}

/// `server`'s tools not offered because their pinned name is now a local
/// tool's.
fn displaced(exposed: &Exposed, server: &str) -> Vec<Renamed> {
    exposed
        .held
        .iter()
        .filter(|h| h.server == server && h.displaced)
        .map(|h| Renamed {
            tool: h.tool.clone(),
            name: h.name.clone(),
            collision: h.why.is_some(),
            why: h.why.clone().unwrap_or_else(|| {
                "its pinned name is now a local tool's; rename the local tool to offer it again"
                    .into()
            }),
        })
        .collect()
}

/// `server`'s tools offered under another name than `server__tool`.
fn renamed(exposed: &Exposed, server: &str) -> Vec<Renamed> {
    exposed
        .tools
        .iter()
        .filter(|t| t.server == server)
        .filter_map(|t| {
            Some(Renamed {
                tool: t.tool.name.to_string(),
                name: t.name.clone(),
                why: t.renamed.clone()?,
                collision: false,
            })
        })
        .collect()
}

/// The servers discovery skipped (an unset `${VAR}`, `"type": "sse"`, a
/// malformed entry), as `toolcage upstreams` lists them beside the
/// gateway's: state `skipped` or `unsupported`, the reason and fix `check`
/// gives. Nothing is started.
pub(crate) fn skipped_status(engine: &Engine) -> Vec<Status> {
    let skipped = &engine.catalog.skipped_upstreams;
    if skipped.is_empty() {
        return Vec::new();
    }
    let pins = Pins::in_store(engine.store.clone());
    skipped
        .iter()
        .map(|s| {
            let d = &s.diagnostic;
            let reason = match &d.fix {
                Some(fix) => format!("{} (fix: {fix})", d.message),
                None => d.message.clone(),
            };
            Status {
                name: s.name.clone(),
                source: source_of(&s.source, s.line),
                transport: s.transport.clone(),
                runs: s.runs.clone(),
                expose: engine.stack.upstream_settings(&s.name).expose,
                state: s.state.to_string(),
                reason: Some(reason),
                tools: 0,
                pinned: pins.count(&s.name),
                held: Vec::new(),
                displaced: Vec::new(),
                renamed: Vec::new(),
                prompt_collisions: Vec::new(),
            }
        })
        .collect()
}
