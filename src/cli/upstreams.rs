//! `toolcage upstreams [--json]`: the project's upstream MCP servers
//! (`.mcp.json`, A3S `kind: mcp`), each started in its sandbox to show
//! its state, tools and pins. After a change held definitions back,
//! `toolcage upstreams show NAME` prints each held definition, its diff
//! against the pinned one and the digest to approve it with, and
//! `toolcage upstreams approve NAME --digest HEX` pins exactly those
//! definitions (NAME a server, or one tool by its flat name or
//! `server__tool`); it refuses when the server now reports others.

use super::{Global, PolicyArgs, status};
use crate::text;
use crate::upstream::pins::{self, Pin};
use crate::upstream::{Gateway, Session, Status};
use clap::{Args, Subcommand};
use rmcp::model::Tool;
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;

#[derive(Debug, Args)]
pub(crate) struct UpstreamsArgs {
    #[command(flatten)]
    pub(crate) policy: PolicyArgs,
    /// Print a JSON array of {name, source, transport, runs, expose, state, reason, tools, pinned, held, renamed, displaced, prompt_collisions}.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(subcommand)]
    pub(crate) action: Option<UpstreamsAction>,
    #[command(flatten)]
    pub(crate) opts: super::options::StoreCmdOpts,
}

#[derive(Debug, Subcommand)]
pub(crate) enum UpstreamsAction {
    /// Show what is held of server NAME, or of one tool (its flat name, or server__tool): each definition now, its diff against the pinned one, and the digest `approve` takes.
    Show {
        name: String,
        /// Print {name, server, held: [{tool, name, pinned_sha256, sha256, pinned, now, diff}], digest, approve} as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        policy: PolicyArgs,
        #[command(flatten)]
        opts: super::options::StoreCmdOpts,
    },
    /// Pin the held definitions of server NAME, or of one tool, exactly as `upstreams show NAME` showed them: HEX is the digest it printed; refused if the server now reports another.
    Approve {
        name: String,
        /// The digest `toolcage upstreams show NAME` printed (64 hex digits).
        #[arg(long, value_name = "HEX")]
        digest: Option<String>,
        #[command(flatten)]
        policy: PolicyArgs,
        #[command(flatten)]
        opts: super::options::StoreCmdOpts,
    },
}

impl UpstreamsAction {
    fn name(&self) -> &str {
        match self {
            UpstreamsAction::Show { name, .. } | UpstreamsAction::Approve { name, .. } => name,
        }
    }

    fn opts(&self) -> &super::options::StoreCmdOpts {
        match self {
            UpstreamsAction::Show { opts, .. } | UpstreamsAction::Approve { opts, .. } => opts,
        }
    }

    fn policy(&self) -> &PolicyArgs {
        match self {
            UpstreamsAction::Show { policy, .. } | UpstreamsAction::Approve { policy, .. } => {
                policy
            }
        }
    }
}

impl UpstreamsArgs {
    /// The shared options, from `approve NAME ...` over `upstreams ...`.
    pub(crate) fn given(&self) -> super::options::Given {
        let here = super::options::Given::from(&self.opts);
        match &self.action {
            Some(action) => super::options::Given::from(action.opts()).over(here),
            None => here,
        }
    }
}

/// A command's session whose project declares upstream servers.
struct Started<'a> {
    session: &'a Session,
    gateway: &'a Arc<Gateway>,
}

pub(crate) fn run(global: &Global, args: &UpstreamsArgs) -> u8 {
    // The policy options may come before or after `approve NAME`.
    let policy = match args.action.as_ref().map(UpstreamsAction::policy) {
        Some(policy) if policy.profile.is_some() || policy.policy.is_some() => policy,
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
    let skipped = crate::upstream::skipped_status(&engine);
    if let Some(name) = args.action.as_ref().map(UpstreamsAction::name)
        && let Some(s) = skipped.iter().find(|s| s.name == name)
    {
        super::say(&format!(
            "upstream server '{name}' was skipped at load ({}): {}",
            s.state,
            s.reason.as_deref().unwrap_or_default()
        ));
        return status::INVALID;
    }
    let session = match Session::for_command(&engine) {
        Ok(s) => s,
        Err(e) => {
            super::say(&e);
            return status::INTERNAL;
        }
    };
    let Some(gateway) = session.gateway() else {
        return no_servers(args, skipped);
    };
    let gw = Started {
        session: &session,
        gateway,
    };
    match &args.action {
        Some(UpstreamsAction::Show { name, json, .. }) => show_held(&gw, name, *json || args.json),
        Some(UpstreamsAction::Approve { name, digest, .. }) => {
            approve(&gw, name, digest.as_deref())
        }
        None => {
            let mut rows = session.status();
            rows.extend(skipped);
            rows.sort_by(|a, b| a.name.cmp(&b.name));
            show(rows, args.json)
        }
    }
}

/// The project declares no server toolcage could start: the skipped ones,
/// or that there are none.
fn no_servers(args: &UpstreamsArgs, skipped: Vec<Status>) -> u8 {
    if args.action.is_none() && !skipped.is_empty() {
        return show(skipped, args.json);
    }
    if let Some(name) = args.action.as_ref().map(UpstreamsAction::name)
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
        super::say(&"no upstream servers: the project has no .mcp.json and no A3S kind: mcp tools");
        return status::INVALID;
    }
    if args.json {
        outln!("[]");
    } else {
        outln!("no upstream servers (none in .mcp.json or tools/*.md kind: mcp)");
    }
    status::OK
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
        for n in &r.displaced {
            outln!(
                "    not offered: {} ({}): {}",
                text::one_line(&n.tool),
                text::one_line(&n.name),
                text::one_line(&n.why)
            );
        }
        for n in &r.prompt_collisions {
            outln!(
                "    not offered: prompt {} ({}): {}",
                text::one_line(&n.tool),
                text::one_line(&n.name),
                text::one_line(&n.why)
            );
        }
        for h in &r.held {
            outln!(
                "    held: {} changed its definition since it was pinned (review it: toolcage upstreams show {})",
                text::one_line(h),
                text::one_line(&r.name)
            );
        }
    }
    status::OK
}

/// What `show` and `approve` act on: a server's held tools, or one tool's.
struct Target {
    server: String,
    /// One tool (the server's own name for it), or every held one.
    only: Option<String>,
}

/// NAME as a server, a tool's flat name (offered, held or pinned), or
/// `server__tool`.
fn target(gw: &Started, name: &str) -> Result<Target, String> {
    let g = &gw.gateway;
    if g.server(name).is_some() {
        return Ok(Target {
            server: name.into(),
            only: None,
        });
    }
    let exposed = g.exposed();
    let listed = exposed
        .tools
        .iter()
        .find(|t| t.name == name)
        .map(|t| (t.server.clone(), t.tool.name.to_string()))
        .or_else(|| {
            exposed
                .held
                .iter()
                .find(|h| h.name == name)
                .map(|h| (h.server.clone(), h.tool.clone()))
        });
    let found = match listed {
        Some(st) => Some(st),
        None => g.pins.by_name(name)?,
    };
    let found = found.or_else(|| {
        let (s, t) = name.split_once("__")?;
        g.server(s).map(|_| (s.to_string(), t.to_string()))
    });
    match found {
        Some((server, tool)) => Ok(Target {
            server,
            only: Some(tool),
        }),
        None => {
            let known: Vec<&str> = g.servers.iter().map(|s| s.spec.name.as_str()).collect();
            Err(format!(
                "no upstream server or tool '{name}' (servers: {}); name a server, or a tool as \
                 `toolcage list` or `toolcage upstreams` names it",
                known.join(", ")
            ))
        }
    }
}

/// One held definition: the tool as its server reports it now, and its pin.
struct HeldNow {
    /// Its flat name.
    name: String,
    tool: Tool,
    pin: Option<Pin>,
    /// A prompt (pinned in `prompt-pins`), not a tool.
    prompt: bool,
    /// The messages of a prompt's get with no arguments (pinned in
    /// `prompt-message-pins`), not its definition.
    messages: bool,
}

/// The held definitions of `t`, as the server reports them in one
/// listing: what `show` prints and `approve` pins are the same objects.
fn held_now(gw: &Started, t: &Target) -> Result<Vec<HeldNow>, String> {
    let g = &gw.gateway;
    let exposed = g.exposed();
    if let Some(why) = &exposed.unusable {
        return Err(why.clone());
    }
    let instance = gw
        .session
        .block_on(g.instance(&t.server))
        .unwrap_or_else(|| Err("no upstream servers".into()))
        .map_err(|e| format!("cannot start '{}' to read its tools: {e}", t.server))?;
    let tools = instance
        .tools
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let mut out = Vec::new();
    for h in exposed.held.iter().filter(|h| {
        h.server == t.server && !h.displaced && t.only.as_ref().is_none_or(|o| *o == h.tool)
    }) {
        let Some(tool) = tools.iter().find(|x| x.name == h.tool.as_str()) else {
            continue;
        };
        out.push(HeldNow {
            name: h.name.clone(),
            tool: tool.clone(),
            pin: g.pins.pin(&t.server, &h.tool)?,
            prompt: false,
            messages: false,
        });
    }
    let prompts = gw
        .session
        .block_on(g.held_prompts(&t.server))
        .unwrap_or_default();
    let messages = gw
        .session
        .block_on(g.held_prompt_messages(&t.server))
        .unwrap_or_default();
    // Held prompt definitions, then held messages (each in its own pins).
    for (held, pins, messages) in [
        (prompts, &g.prompt_pins, false),
        (messages, &g.prompt_message_pins, true),
    ] {
        for (name, prompt) in held {
            if t.only.as_ref().is_some_and(|o| *o != prompt.name.as_ref()) {
                continue;
            }
            out.push(HeldNow {
                pin: pins.pin(&t.server, &prompt.name)?,
                name,
                tool: prompt,
                prompt: true,
                messages,
            });
        }
    }
    Ok(out)
}

fn approval_digest(held: &[HeldNow]) -> String {
    let items: Vec<(String, String)> = held
        .iter()
        .map(|h| (h.tool.name.to_string(), pins::digest(&h.tool)))
        .collect();
    pins::approval_digest(&items)
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

#[derive(Serialize)]
struct ShownTool {
    /// `tool`, `prompt`, or `prompt_messages` (what a prompt's get with
    /// no arguments returns).
    kind: &'static str,
    tool: String,
    name: String,
    pinned_sha256: Option<String>,
    sha256: String,
    /// The pinned definition (absent in a pin of an older version).
    pinned: Option<Value>,
    now: Value,
    diff: String,
}

#[derive(Serialize)]
struct Shown {
    name: String,
    server: String,
    held: Vec<ShownTool>,
    /// What `approve NAME --digest` takes; absent when nothing is held.
    digest: Option<String>,
    approve: Option<String>,
}

/// The server or tool `name` names, and what of it is held now; the
/// error already said, as the exit status.
fn held_target(gw: &Started, name: &str) -> Result<(Target, Vec<HeldNow>), u8> {
    let t = target(gw, name).map_err(|e| {
        super::say(&e);
        status::INVALID
    })?;
    let held = held_now(gw, &t).map_err(|e| {
        super::say(&e);
        status::INTERNAL
    })?;
    Ok((t, held))
}

fn show_held(gw: &Started, name: &str, json: bool) -> u8 {
    let (t, held) = match held_target(gw, name) {
        Ok(found) => found,
        Err(status) => return status,
    };
    let digest = (!held.is_empty()).then(|| approval_digest(&held));
    let shown = Shown {
        name: name.into(),
        server: t.server.clone(),
        held: held
            .iter()
            .map(|h| {
                let now = pins::definition(&h.tool);
                let pinned = h.pin.as_ref().and_then(|p| p.definition.clone());
                let label = |side: &str| format!("{} ({side})", h.name);
                let mut diff = crate::mcp::manage::write::diff(
                    &h.name,
                    pinned.as_ref().map(pretty).as_deref(),
                    Some(&pretty(&now)),
                );
                if !diff.is_empty() {
                    diff = diff
                        .replacen(&format!("a/{}", h.name), &label("pinned"), 1)
                        .replacen(&format!("b/{}", h.name), &label("now"), 1);
                }
                ShownTool {
                    kind: match (h.prompt, h.messages) {
                        (true, true) => "prompt_messages",
                        (true, false) => "prompt",
                        _ => "tool",
                    },
                    tool: h.tool.name.to_string(),
                    name: h.name.clone(),
                    pinned_sha256: h.pin.as_ref().map(|p| p.sha256.clone()),
                    sha256: pins::digest(&h.tool),
                    pinned,
                    now,
                    diff,
                }
            })
            .collect(),
        approve: digest
            .as_ref()
            .map(|d| format!("toolcage upstreams approve {name} --digest {d}")),
        digest,
    };
    if json {
        return super::print_json(&shown).unwrap_or(status::OK);
    }
    if shown.held.is_empty() {
        let what = match &t.only {
            Some(tool) => format!(
                "tool '{}' of upstream server '{}'",
                text::one_line(tool),
                t.server
            ),
            None => format!("upstream server '{}'", t.server),
        };
        outln!(
            "{}: nothing of {what} is held; nothing to approve",
            text::one_line(name)
        );
        return status::OK;
    }
    for h in &shown.held {
        match h.kind {
            "prompt_messages" => outln!(
                "{}: the messages prompt '{}' of upstream server '{}' returns for no arguments are held: they changed since they were pinned",
                text::one_line(&h.name),
                text::one_line(&h.tool),
                text::one_line(&t.server)
            ),
            kind => outln!(
                "{}: {kind} '{}' of upstream server '{}' is held: its definition changed since it was pinned",
                text::one_line(&h.name),
                text::one_line(&h.tool),
                text::one_line(&t.server)
            ),
        }
        outln!(
            "  pinned sha256 {}",
            h.pinned_sha256.as_deref().unwrap_or("(none)")
        );
        outln!("  now    sha256 {}", h.sha256);
        if h.pinned.is_none() {
            outln!(
                "  (the pin, from an older toolcage, kept only the digest: the whole definition now follows)"
            );
        }
        for line in h.diff.lines() {
            outln!("{}", text::one_line(line));
        }
    }
    outln!(
        "to approve exactly {}, run:\n  {}",
        match shown.held.len() {
            1 => "this definition".to_string(),
            n => format!("these {n} definitions"),
        },
        text::one_line(shown.approve.as_deref().unwrap_or_default())
    );
    status::OK
}

fn approve(gw: &Started, name: &str, digest: Option<&str>) -> u8 {
    let Some(given) = digest else {
        super::say(&format!(
            "approve pins only what you reviewed: run `toolcage upstreams show {name}`, then \
             `toolcage upstreams approve {name} --digest <the digest it prints>`"
        ));
        return status::INVALID;
    };
    // A prefix or a typo is not the digest of anything the operator saw;
    // say so before starting the server.
    let given = given.trim().to_ascii_lowercase();
    if given.len() != 64 || !given.bytes().all(|b| b.is_ascii_hexdigit()) {
        super::say(&format!(
            "--digest {}: not a digest: give the whole sha256 (64 hex characters) that              `toolcage upstreams show {name}` prints; nothing was approved",
            text::one_line(&given)
        ));
        return status::INVALID;
    }
    let (t, held) = match held_target(gw, name) {
        Ok(found) => found,
        Err(status) => return status,
    };
    if held.is_empty() {
        outln!(
            "{}: nothing is held; nothing to approve",
            text::one_line(name)
        );
        return status::OK;
    }
    let now = approval_digest(&held);
    if given != now {
        // The digest of what it reports now is not printed here: it is
        // `show`'s to print, beside the definitions it covers.
        super::say(&format!(
            "{name}: the server now reports other definitions than the ones the digest {given} \
             covers; nothing was approved; review them again: toolcage upstreams show {name}"
        ));
        return status::INVALID;
    }
    let of = |prompt: bool, messages: bool| -> Vec<&Tool> {
        (held.iter())
            .filter(|h| h.prompt == prompt && h.messages == messages)
            .map(|h| &h.tool)
            .collect()
    };
    let g = &gw.gateway;
    let pinned = g
        .pins
        .approve(&t.server, &of(false, false))
        .and_then(|mut changed| {
            changed.extend(g.prompt_pins.approve(&t.server, &of(true, false))?);
            let messages = g.prompt_message_pins.approve(&t.server, &of(true, true))?;
            changed.extend(messages.into_iter().map(|n| format!("{n} (its messages)")));
            Ok(changed)
        });
    match pinned {
        Ok(changed) => {
            for n in changed {
                outln!("pinned {}", text::one_line(&n));
            }
            status::OK
        }
        Err(e) => {
            super::say(&e);
            status::INTERNAL
        }
    }
}
