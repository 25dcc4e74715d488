//! The upstream tools a session is offered, built from the running
//! servers' tool lists and their pins: flat servers' tools as
//! `server__tool` definitions; deferred servers' tools in the index behind
//! `find_tools` / `call_mcp_tool`; changed definitions held back.

use super::Gateway;
use super::names;
use super::pins::{Checked, PinState};
use crate::call::{Definition, annotations};
use crate::discover::{ToolKind, ToolSpec};
use crate::policy::Expose;
use rmcp::model::Tool;
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// One upstream tool the session can call.
#[derive(Debug, Clone)]
pub(crate) struct Offered {
    /// Its flat name (`server__tool`, sanitised): how calls name it.
    pub(crate) name: String,
    pub(crate) server: String,
    pub(crate) tool: Tool,
    /// Why the flat name is not plain `server__tool`, when it is not.
    pub(crate) renamed: Option<String>,
    pub(crate) expose: Expose,
    /// Its definition as a tool of this session (annotations from the
    /// server's grant).
    pub(crate) definition: Definition,
    pub(crate) spec: ToolSpec,
}

/// A tool not offered: its definition changed since it was pinned, or
/// its pinned name is now a local tool's (`displaced`).
#[derive(Debug, Clone)]
pub(crate) struct Held {
    pub(crate) server: String,
    pub(crate) tool: String,
    /// Its pinned flat name.
    pub(crate) name: String,
    pub(crate) pinned: String,
    pub(crate) now: String,
    pub(crate) displaced: bool,
    /// Why it is displaced, when not the default reason (a `prefix =
    /// false` name another tool has).
    pub(crate) why: Option<String>,
}

#[derive(Debug, Default)]
pub(crate) struct Exposed {
    /// Every callable upstream tool, sorted by flat name.
    pub(crate) tools: Vec<Offered>,
    pub(crate) held: Vec<Held>,
    /// Whether `find_tools` and `call_mcp_tool` are offered.
    pub(crate) deferred: bool,
    /// Why the pins cannot be read (a damaged `pins.json`): no upstream
    /// tool is offered and every call of one is refused with this.
    pub(crate) unusable: Option<String>,
}

pub(crate) const FIND_TOOLS: &str = "find_tools";
pub(crate) const CALL_MCP_TOOL: &str = "call_mcp_tool";

impl Exposed {
    /// From the tool lists of running servers (`(index in gw.servers, tools)`).
    pub(crate) fn build(gw: &Gateway, running: &[(usize, Vec<Tool>)]) -> Exposed {
        let mut taken: BTreeSet<String> = gw.local_names.iter().cloned().collect();
        // Who has each name, for a `prefix = false` collision's message.
        let mut owners: std::collections::BTreeMap<String, String> = gw
            .local_names
            .iter()
            .map(|n| (n.clone(), format!("the local tool '{n}'")))
            .collect();
        let deferred = gw
            .servers
            .iter()
            .any(|s| s.settings.expose == Expose::Deferred && Gateway::refusal(s).is_none());
        if deferred {
            taken.insert(FIND_TOOLS.into());
            taken.insert(CALL_MCP_TOOL.into());
        }
        let mut out = Exposed {
            deferred,
            ..Exposed::default()
        };
        for (i, tools) in running {
            let server = &gw.servers[*i];
            // Names come from the pins: given once, never by list position.
            let checked = match gw.pins.check(&server.spec.name, tools, &taken) {
                Ok(c) => c,
                Err(e) => {
                    out.unusable = Some(e);
                    out.tools.clear();
                    out.held.clear();
                    break;
                }
            };
            let grant = server.grant.as_ref().ok().map(|r| &r.grant);
            for (tool, Checked { name, state }) in tools.iter().zip(checked) {
                // `prefix = false`: its own name, when that is a valid one.
                let own = !server.settings.prefix && names::valid(&tool.name);
                let name = if own { tool.name.to_string() } else { name };
                let owner = format!(
                    "tool '{}' of upstream server '{}'",
                    tool.name, server.spec.name
                );
                let collision = own.then(|| owners.get(&name)).flatten().map(|other| {
                    format!(
                        "{owner}: its own name '{name}' (prefix = false in [upstreams.{}]) \
                             is also the name of {other}; rename one, or set prefix = true",
                        server.spec.name
                    )
                });
                taken.insert(name.clone());
                owners.entry(name.clone()).or_insert(owner);
                let held = |pinned: String, now: String, displaced: bool| Held {
                    server: server.spec.name.clone(),
                    tool: tool.name.to_string(),
                    name: name.clone(),
                    pinned,
                    now,
                    displaced,
                    why: None,
                };
                if let Some(why) = collision {
                    // The operator's configuration is wrong: an error,
                    // logged when the session starts the server.
                    tracing::error!("upstream {}: {why}", server.spec.name);
                    let d = super::pins::digest(tool);
                    out.held.push(Held {
                        why: Some(why),
                        ..held(d.clone(), d, true)
                    });
                    continue;
                }
                match state {
                    PinState::Changed { pinned, now } => {
                        out.held.push(held(pinned, now, false));
                        continue;
                    }
                    PinState::NameTaken => {
                        let d = super::pins::digest(tool);
                        out.held.push(held(d.clone(), d, true));
                        continue;
                    }
                    PinState::New | PinState::Pinned => {}
                }
                out.tools.push(offer(server, tool, name, own, grant));
            }
        }
        out.tools.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// The definitions `tools/list` adds: flat tools, and the two deferred
    /// tools when a server is deferred.
    pub(crate) fn definitions(&self) -> Vec<Definition> {
        let mut defs: Vec<Definition> = self
            .tools
            .iter()
            .filter(|t| t.expose == Expose::Flat)
            .map(|t| t.definition.clone())
            .collect();
        if self.deferred {
            defs.extend(deferred_definitions());
        }
        defs
    }

    /// Every upstream tool's name, flat or deferred, held or not: the
    /// names a `[tools.NAME]` section can give.
    pub(crate) fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.tools.iter().map(|t| t.name.clone()).collect();
        names.extend(self.held.iter().map(|h| h.name.clone()));
        names
    }

    pub(crate) fn offered_names(&self) -> Vec<String> {
        self.definitions().into_iter().map(|d| d.name).collect()
    }

    /// The tool called `name` (its flat name).
    pub(crate) fn get(&self, name: &str) -> Option<&Offered> {
        self.tools
            .binary_search_by(|t| t.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.tools[i])
    }

    /// The held tool `name` is (its pinned name, or `server__tool`), if
    /// one is held for a changed definition.
    pub(crate) fn held_as(&self, name: &str) -> Option<&Held> {
        self.held.iter().find(|h| {
            !h.displaced && (h.name == name || format!("{}__{}", h.server, h.tool) == name)
        })
    }

    /// Why a call of `name` is refused because the pins cannot be read:
    /// when they cannot and `name` is one of `servers`' (`server__...`).
    pub(crate) fn unusable_for(&self, name: &str, servers: &[super::Server]) -> Option<&str> {
        let why = self.unusable.as_deref()?;
        servers
            .iter()
            .any(|s| name.starts_with(&format!("{}__", names::sanitize(&s.spec.name))))
            .then_some(why)
    }
}

/// A running server's tool as offered: its definition under `name` (its
/// own when `own`), annotated from the server's `grant`.
fn offer(
    server: &super::Server,
    tool: &Tool,
    name: String,
    own: bool,
    grant: Option<&crate::policy::Grant>,
) -> Offered {
    let renamed = match own {
        true => None,
        false => names::why(&server.spec.name, &tool.name, &name),
    };
    let spec = ToolSpec {
        name: name.clone(),
        format: server.spec.format,
        source: server.spec.source.clone(),
        line: server.spec.line,
        description: tool.description.as_deref().unwrap_or_default().to_string(),
        input_schema: Value::Object((*tool.input_schema).clone()),
        requests: server.requests().clone(),
        kind: ToolKind::Upstream {
            server: server.spec.name.clone(),
            tool: tool.name.to_string(),
            runs: server.spec.transport.describe(),
        },
        needs_read: Vec::new(),
    };
    let mut ann = grant.map_or_else(|| json!({}), |g| annotations::annotations(&spec, g));
    // The server's own hints are untrusted: they may only add caution.
    if tool.annotations.as_ref().and_then(|a| a.destructive_hint) == Some(true) && ann.is_object() {
        ann["destructiveHint"] = json!(true);
    }
    Offered {
        definition: Definition::new(&spec, ann),
        name,
        server: server.spec.name.clone(),
        tool: tool.clone(),
        renamed,
        expose: server.settings.expose,
        spec,
    }
}

/// The two deferred tools' definitions (`find_tools`, `call_mcp_tool`:
/// `deferred.rs` answers them).
fn deferred_definitions() -> Vec<Definition> {
    vec![
        Definition {
            name: CALL_MCP_TOOL.into(),
            description: "Call a tool of an upstream MCP server by the exact name find_tools \
                returned, with its arguments as an object."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "tool_name": {"type": "string", "description": "Exact tool name from find_tools"},
                    "arguments": {"type": "object", "description": "The tool's arguments"}
                },
                "required": ["tool_name"],
                "additionalProperties": false
            }),
            annotations: json!({}),
        },
        Definition {
            name: FIND_TOOLS.into(),
            description: "Search the tools of the upstream MCP servers by keywords; returns up to \
                15 matches with their exact names and parameter schemas."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": {"query": {"type": "string", "description": "Keywords"}},
                "required": ["query"],
                "additionalProperties": false
            }),
            annotations: json!({"readOnlyHint": true, "destructiveHint": false, "openWorldHint": false}),
        },
    ]
}
