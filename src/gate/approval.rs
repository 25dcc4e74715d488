//! Human approval: who is asked ([`ApprovalChannel`]),
//! what they are shown ([`ApprovalRequest`]), what they can answer
//! ([`ApprovalAnswer`]), and what is remembered for the rest of a session.
//!
//! Modes (from the grant, [`ApprovalMode`]):
//! - `never`: no one is asked.
//! - `always`: every call is asked.
//! - `once`: the first call of a tool in a session is asked; a yes covers
//!   the tool for the rest of the session, as long as its definition is the
//!   same.
//! - `once-per-args`: like `once`, per tool and per canonical arguments
//!   (SHA-256 of the JSON with sorted keys, see [`args_digest`]).
//!
//! A remembered yes is bound to what was approved: the tool's name and its
//! definition digest ([`crate::call::definition::digest`]: format, source
//! file, runner with its command or entry point, schema, the content of
//! the script or tool file, and the grant). An edited script, a same-named
//! tool that now wins the collision (after a hot reload), or a changed
//! grant is a different key, so the person is asked again.
//!
//! A tool's own `requires_approval = true` (OpenCrabs) turns `never` into
//! `always` and never lowers a stricter mode; `requires_approval = false`
//! never waives approval (`policy::requests`). An OpenCrabs tool without the
//! key asks for approval: OpenCrabs' own default is `true`
//! (`#[serde(default = "default_true")] requires_approval` in its
//! `DynamicToolDef`; the seed's examples are silent), so discovery records
//! the request and the operator's `never` becomes `always` for that tool.
//!
//! Never fail open: when approval is needed and no channel can ask, the call
//! is denied ([`ApprovalAnswer::NoChannel`]) with text saying how to allow it.

use crate::spec::Format;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;

pub(crate) use crate::audit::GrantSummary;
pub(crate) use crate::policy::ApprovalMode;

/// One question to a person: may this call run?
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApprovalRequest {
    pub tool: String,
    pub format: Format,
    /// What will run: the script, `<interpreter> <entrypoint>`, or the
    /// shell command template ([`crate::call::definition::runs`]).
    pub runs: String,
    /// The file that defines the tool, with `:line` where known.
    pub source: String,
    /// The definition digest a yes is remembered for.
    pub definition_sha256: String,
    /// The validated arguments (JSON object).
    pub arguments: serde_json::Value,
    pub grant: GrantSummary,
    /// Why approval is needed: the mode and where it came from.
    pub reason: String,
}

/// What a channel answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum ApprovalAnswer {
    /// A person said yes; `by` names the channel (`terminal`, `elicitation`, `--yes`).
    Approved {
        by: String,
    },
    Declined,
    /// The person (or the client) cancelled the whole operation.
    Cancelled,
    TimedOut,
    /// No one could be asked (no terminal, client without elicitation).
    NoChannel,
    /// toolcage itself was interrupted (Ctrl-C, SIGTERM, SIGHUP) while
    /// asking.
    Interrupted,
}

/// A boxed, `Send` future (what `futures::future::BoxFuture` is).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A way to ask a person, provided by each surface: the terminal for
/// `toolcage call` ([`super::terminal::Terminal`], which blocks while it
/// asks), `--yes` ([`PreApproved`]), the MCP client's elicitation (the MCP
/// server's `Elicitation`). Object-safe: the future is boxed.
pub trait ApprovalChannel: Send + Sync {
    /// Recorded as `approved by` in the audit log.
    fn name(&self) -> &str;
    fn ask<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer>;
    /// True for pre-approval (`--yes`): honoured only where the grant's
    /// `allow_yes` is true.
    fn is_pre_approval(&self) -> bool {
        false
    }
    /// False when asking is known to be impossible (no terminal, a client
    /// without elicitation): the call is refused before it counts against
    /// any rate limit.
    fn can_ask(&self) -> bool {
        true
    }
}

/// The refusal due before anyone is asked: `--yes` where pre-approval is
/// not permitted, or a channel that cannot reach a person.
pub(crate) fn unanswerable(pre_approval: bool, allow_yes: bool, can_ask: bool) -> Option<Refusal> {
    if pre_approval && !allow_yes {
        Some(Refusal::PreApprovalNotAllowed)
    } else if !can_ask {
        Some(Refusal::NoChannel)
    } else {
        None
    }
}

/// `toolcage call --yes`: approves without asking, where the grant's
/// `allow_yes` is true (default: every mode but `always`).
#[derive(Debug, Clone, Copy, Default)]
pub struct PreApproved;

impl ApprovalChannel for PreApproved {
    fn name(&self) -> &str {
        "--yes"
    }
    fn ask<'a>(&'a self, _: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer> {
        Box::pin(std::future::ready(ApprovalAnswer::Approved {
            by: "--yes".into(),
        }))
    }
    fn is_pre_approval(&self) -> bool {
        true
    }
}

/// JSON with object keys sorted at every level and no insignificant
/// whitespace: the same arguments always give the same text.
pub fn canonical_json(v: &serde_json::Value) -> String {
    // serde_json's own compact text, when every object's keys already come
    // sorted (its map is a BTreeMap unless `preserve_order` is enabled):
    // the same bytes, one encoding, none of the copies below.
    if keys_sorted(v) {
        return v.to_string();
    }
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

/// Whether every object in `v` iterates its keys in sorted order.
fn keys_sorted(v: &serde_json::Value) -> bool {
    use serde_json::Value;
    match v {
        Value::Object(m) => m.keys().is_sorted() && m.values().all(keys_sorted),
        Value::Array(a) => a.iter().all(keys_sorted),
        _ => true,
    }
}

fn write_canonical(v: &serde_json::Value, out: &mut String) {
    use serde_json::Value;
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(&m[k], out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, e) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(e, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Lowercase hex SHA-256 of [`canonical_json`].
pub fn args_digest(args: &serde_json::Value) -> String {
    let d = Sha256::digest(canonical_json(args).as_bytes());
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// The key an approval is remembered under: the session, the tool's name,
/// its definition digest, and the argument digest for `once-per-args`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct MemKey {
    pub session: String,
    pub tool: String,
    pub definition: String,
    pub args: Option<String>,
}

/// Approvals remembered for `once` and `once-per-args`: [`MemKey`] → the
/// channel that approved.
#[derive(Debug, Default)]
pub(crate) struct Memory {
    approved: Mutex<HashMap<MemKey, String>>,
}

impl Memory {
    /// The key a mode remembers under; `None` for modes that remember nothing.
    pub(crate) fn key(
        mode: ApprovalMode,
        session: &str,
        tool: &Bound,
        digest: &str,
    ) -> Option<MemKey> {
        let key = |args| MemKey {
            session: session.into(),
            tool: tool.name.into(),
            definition: tool.definition.into(),
            args,
        };
        match mode {
            ApprovalMode::Once => Some(key(None)),
            ApprovalMode::OncePerArgs => Some(key(Some(digest.into()))),
            ApprovalMode::Never | ApprovalMode::Always => None,
        }
    }

    pub(crate) fn get(&self, key: &MemKey) -> Option<String> {
        self.approved
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .cloned()
    }

    pub(crate) fn remember(&self, key: MemKey, by: &str) {
        self.approved
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, by.to_string());
    }
}

/// What approval a call still needs, given the mode and the session's memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Need {
    /// Mode `never`: nobody is asked.
    Nothing,
    /// An earlier yes in this session covers this call (`once`, `once-per-args`).
    Remembered { by: String },
    /// Ask a person; a yes is remembered under `key` (none for `always`).
    Ask { key: Option<MemKey> },
}

/// The tool an approval is for: its name and definition digest.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bound<'a> {
    pub name: &'a str,
    pub definition: &'a str,
}

/// Pure: what `mode` requires for this call. Never asks anyone.
pub(crate) fn need(
    mode: ApprovalMode,
    memory: &Memory,
    session: &str,
    tool: &Bound,
    digest: &str,
) -> Need {
    if mode == ApprovalMode::Never {
        return Need::Nothing;
    }
    let key = Memory::key(mode, session, tool, digest);
    if let Some(k) = &key
        && let Some(by) = memory.get(k)
    {
        return Need::Remembered { by };
    }
    Need::Ask { key }
}

/// Why a call that needed approval does not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Refusal {
    Declined,
    Cancelled,
    TimedOut,
    /// No one could be asked.
    NoChannel,
    /// `--yes` where the policy does not permit pre-approval.
    PreApprovalNotAllowed,
    /// toolcage was interrupted (Ctrl-C, SIGTERM, SIGHUP) at the prompt.
    Interrupted,
}

/// Pure: ask `channel` (unless pre-approval is not allowed) and turn the
/// answer into a yes (`Ok(by)`, remembered under `key`) or a refusal.
/// Anything but an explicit yes is a refusal: never fail open.
pub(crate) fn settle(
    answer: impl FnOnce() -> ApprovalAnswer,
    pre_approval: bool,
    allow_yes: bool,
    memory: &Memory,
    key: Option<MemKey>,
) -> Result<String, Refusal> {
    if pre_approval && !allow_yes {
        return Err(Refusal::PreApprovalNotAllowed);
    }
    match answer() {
        ApprovalAnswer::Approved { by } => {
            if let Some(k) = key {
                memory.remember(k, &by);
            }
            Ok(by)
        }
        ApprovalAnswer::Declined => Err(Refusal::Declined),
        ApprovalAnswer::Cancelled => Err(Refusal::Cancelled),
        ApprovalAnswer::TimedOut => Err(Refusal::TimedOut),
        ApprovalAnswer::NoChannel => Err(Refusal::NoChannel),
        ApprovalAnswer::Interrupted => Err(Refusal::Interrupted),
    }
}

/// The text for a refused call: what happened and how to approve it.
pub(crate) fn refusal_message(
    r: Refusal,
    tool: &str,
    mode: ApprovalMode,
    mode_source: &str,
) -> String {
    let mode_name = match mode {
        ApprovalMode::Never => "never",
        ApprovalMode::Always => "always",
        ApprovalMode::Once => "once",
        ApprovalMode::OncePerArgs => "once-per-args",
    };
    let why = format!("tool '{tool}' needs approval (approval mode {mode_name}: {mode_source})");
    match r {
        Refusal::Declined => format!("{why}: declined"),
        Refusal::Cancelled => format!("{why}: cancelled"),
        Refusal::TimedOut => format!("{why}: no answer in time; declined"),
        Refusal::Interrupted => {
            format!("{why}: toolcage was interrupted while asking; not run")
        }
        Refusal::NoChannel => format!(
            "{why} and no one could be asked (no terminal, or a client without elicitation); \
             denied. To approve: use an MCP client that supports elicitation, run `toolcage call` \
             from a terminal and answer y, or pass --yes where the operator's policy permits \
             pre-approval ([tools.{tool}.approval] allow_yes = true)"
        ),
        Refusal::PreApprovalNotAllowed => format!(
            "{why}; --yes is not permitted for it (approval.allow_yes = false). \
             Run without --yes from a terminal to be asked, or let the operator set \
             [tools.{tool}.approval] allow_yes = true"
        ),
    }
}

#[cfg(test)]
mod tests;
