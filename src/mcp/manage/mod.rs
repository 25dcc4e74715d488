//! Runtime tool management (issue 15): clawd's `custom_script` and
//! OpenCrabs' `tool_manage`, offered by `serve` when the operator's policy
//! enables them (`[manage]`, off by default).
//!
//! The tool dirs are read-only to every tool, so these tools are answered
//! by toolcage itself, outside any sandbox. A change:
//!
//! ```text
//! lock (state dir's manage.lock: changes are serialized across sessions and servers)
//!   → read the files, build the new text, validate it with discovery's parser
//!     (refused with check's diagnostics; a tools.toml that does not parse is never written)
//!   → ask the person (elicitation) with the diff, unless [manage] approval = false
//!   → audit record with the diff (not written: under fail_closed, no change)
//!   → write atomically (temp file + rename) → unlock
//!   → rediscover → list_changed
//! ```
//!
//! The lock is held while the person is asked, so what they approve is
//! exactly what is written: a second change waits for the first.

mod clawd;
mod crabs;
mod manager;
mod read;
pub(crate) mod write;

use super::McpServer;
use super::elicitation::Elicitation;
use crate::audit::AuditRecord;
use crate::audit::record::{ChangeRecord, MAX_DIFF, RecordedDecision, rfc3339};
use crate::call::Definition;
use crate::discover::Diagnostic;
use crate::gate::ApprovalAnswer;
pub(crate) use manager::Manager;
use rmcp::model::CallToolResult;
use rmcp::{Peer, RoleServer};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use write::Op;

/// A management tool's answer as MCP shows it.
fn answer(text: String, is_error: bool) -> Handled {
    Handled::Answer(super::answer::build(text, is_error, json!({})))
}

/// What a management call comes to.
pub(crate) enum Plan {
    /// Answered at once (list, view, a refusal).
    Answer {
        text: String,
        is_error: bool,
    },
    /// `custom_script execute`: a call of this tool through the pipeline.
    Run {
        name: String,
        args: Value,
    },
    /// `tool_manage reload`.
    Reload,
    Change(Change),
}

impl Plan {
    fn answer(text: String) -> Plan {
        Plan::Answer {
            text,
            is_error: false,
        }
    }
}

/// A validated change, not yet written.
pub(crate) struct Change {
    /// `custom_script` or `tool_manage`.
    pub(crate) tool: &'static str,
    pub(crate) action: String,
    /// The tool changed, as the agent sees it.
    pub(crate) target: String,
    pub(crate) format: &'static str,
    /// The file that defines the tool.
    pub(crate) source: PathBuf,
    pub(crate) ops: Vec<Op>,
    pub(crate) diff: String,
    /// What the tool will run after the change (a `tools.toml` entry's
    /// command line, a clawd script's source), shown to the person first;
    /// `None` when the change makes nothing new runnable (delete, remove,
    /// disable, an edit of the description only).
    pub(crate) runs: Option<String>,
}

fn refuse(text: String) -> Plan {
    Plan::Answer {
        text,
        is_error: true,
    }
}

/// `path` relative to the project when inside it.
fn rel(project: &Path, path: &Path) -> String {
    path.strip_prefix(project)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Diagnostics as `toolcage check` prints them.
fn render(project: &Path, diags: &[Diagnostic]) -> String {
    diags
        .iter()
        .map(|d| d.check_line(&rel(project, &d.file)) + "\n")
        .collect()
}

/// `s` cut at `max` bytes (on a character boundary), saying how much was left out.
fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [{} more bytes]\n", &s[..end], s.len() - end)
}

/// What the person is asked to approve, at most [`PROMPT_BUDGET`] bytes:
/// what the tool will run first (whole, or cut with the cut said right
/// after it, so a long description cannot push the command out of sight),
/// then the diff in what room is left.
fn prompt(project: &Path, c: &Change) -> String {
    let mut text = format!(
        "toolcage: {} asks to {} the tool {} ({}).\n",
        c.tool,
        c.action,
        c.target,
        rel(project, &c.source)
    );
    if let Some(runs) = &c.runs {
        text.push_str("It will run:\n");
        text.push_str(&shown_cut(
            runs,
            RUNS_BUDGET,
            "it will run those too: decline, and \
             read the whole file with view before adding it",
        ));
        text.push('\n');
    }
    let room = PROMPT_BUDGET.saturating_sub(text.len()).max(512);
    text.push_str("The change:\n");
    text.push_str(&shown_cut(&c.diff, room, "the change holds more"));
    text.push_str("\nAccept to write this change, decline to refuse it.");
    text
}

/// The whole prompt's size, and the part of it what runs may take.
const PROMPT_BUDGET: usize = 6000;
const RUNS_BUDGET: usize = 3500;

/// `s` whole when it fits in `max` bytes; otherwise cut on a character
/// boundary, followed by a line that says so and why it matters.
fn shown_cut(s: &str, max: usize, why: &str) -> String {
    if s.len() <= max {
        let mut t = s.to_string();
        if !t.ends_with('\n') {
            t.push('\n');
        }
        return t;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[cut here: {} more bytes not shown; {why}]\n",
        &s[..end],
        s.len() - end
    )
}

/// A tool the session already offers under `name`, and where it comes
/// from: `add` never takes over another tool's name (a `tools.toml` entry
/// outranks Octomind and clawd tools of the same name, and would run with
/// that tool's `[tools.NAME]` grant).
fn taken(server: &McpServer, project: &Path, name: &str) -> Option<String> {
    // The management tools' own names, enabled or not: an added tool of
    // that name would be hidden behind the management tool (or, with it
    // off, answer in its place next session).
    if name == clawd::NAME || name == crabs::NAME {
        return Some("a management tool of toolcage".into());
    }
    if let Some(spec) = server.shared.host.spec(name) {
        let format = serde_json::to_value(spec.format)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        return Some(format!("{format}, {}", rel(project, &spec.source)));
    }
    if server.shared.host.tools().iter().any(|d| d.name == name) {
        return Some("a tool this server offers".into());
    }
    let upstream = server
        .session_gateway()
        .is_some_and(|g| g.listed().definitions().iter().any(|d| d.name == name));
    upstream.then(|| "a tool of an upstream MCP server".into())
}

/// What a management call asks of the call pipeline.
pub(crate) enum Handled {
    Answer(CallToolResult),
    /// Call this tool instead (through the pipeline: grant, approval, audit).
    Run {
        name: String,
        args: Value,
    },
}

const CHANGING: [&str; 6] = ["add", "edit", "delete", "remove", "enable", "disable"];

impl Manager {
    /// The management tools the policy enables.
    pub(crate) fn definitions(&self) -> Vec<Definition> {
        let mut out = Vec::new();
        if self.policy.custom_script {
            out.push(clawd::definition());
        }
        if self.policy.tool_manage {
            out.push(crabs::definition());
        }
        out
    }

    pub(crate) fn offers(&self, name: &str) -> bool {
        (name == clawd::NAME && self.policy.custom_script)
            || (name == crabs::NAME && self.policy.tool_manage)
    }

    /// Answer a call of a management tool `name` from `server`'s session:
    /// plan it under the lock, ask, record, write, rediscover.
    pub(crate) async fn call(
        &self,
        server: &McpServer,
        peer: &Peer<RoleServer>,
        cancel: &tokio_util::sync::CancellationToken,
        name: &str,
        args: &Value,
    ) -> Handled {
        let (lock, plan) = match self.plan(name, args).await {
            Ok(p) => p,
            Err(e) => return answer(format!("{name}: {e}"), true),
        };
        let change = match plan {
            Plan::Change(c) => c,
            Plan::Answer { text, is_error } => {
                drop(lock);
                return self.answered(server, name, args, text, is_error);
            }
            Plan::Run { name, args } => return Handled::Run { name, args },
            Plan::Reload => {
                drop(lock);
                return self.reloaded(server, name).await;
            }
        };
        if let Some(text) = self.refuse_taken(server, name, args, &change) {
            drop(lock);
            return answer(text, true);
        }
        let decision = match self.decide(server, peer, cancel, name, args, &change).await {
            Ok(d) => d,
            Err(text) => {
                drop(lock);
                return answer(text, true);
            }
        };
        // Recorded before it is written: under [audit] fail_closed a change
        // the log cannot hold is not made.
        if let Err(e) = self.record(server, name, args, decision.clone(), Some(&change), None)
            && self.gate.session_policy().audit.fail_closed
        {
            drop(lock);
            return answer(
                format!("{name}: not written: {e} ([audit] fail_closed = true)"),
                true,
            );
        }
        self.write(server, name, args, lock, change, decision).await
    }

    /// Take the lock and plan the call (reading the files), off the runtime.
    async fn plan(
        &self,
        name: &str,
        args: &Value,
    ) -> Result<(nix::fcntl::Flock<std::fs::File>, Plan), String> {
        let (project, state) = (self.project.clone(), self.gate.state_dir().to_path_buf());
        let (tool, a) = (name.to_string(), args.clone());
        tokio::task::spawn_blocking(move || {
            let lock = write::lock(&state)?;
            let plan = if tool == clawd::NAME {
                clawd::plan(&project, &a)
            } else {
                crabs::plan(&project, &a)
            };
            Ok::<_, String>((lock, plan))
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r)
    }

    /// A plan answered at once; a refused change is recorded.
    fn answered(
        &self,
        server: &McpServer,
        name: &str,
        args: &Value,
        text: String,
        is_error: bool,
    ) -> Handled {
        let mode = args
            .get("mode")
            .or_else(|| args.get("action"))
            .and_then(Value::as_str)
            .unwrap_or("");
        if is_error && CHANGING.contains(&mode) {
            let denied = RecordedDecision::Denied {
                reason: "invalid".into(),
                message: text.clone(),
            };
            let _ = self.record(server, name, args, denied, None, None);
        }
        answer(text, is_error)
    }

    /// `tool_manage reload`.
    async fn reloaded(&self, server: &McpServer, name: &str) -> Handled {
        let changed = self.reload(server).await;
        let n = server.shared.host.tools().len();
        answer(
            format!("{name}: reloaded; {n} tool(s); the tool list changed: {changed}"),
            false,
        )
    }

    /// An `add` that would take another tool's name: the refusal's text,
    /// recorded.
    fn refuse_taken(
        &self,
        server: &McpServer,
        name: &str,
        args: &Value,
        change: &Change,
    ) -> Option<String> {
        if change.action != "add" {
            return None;
        }
        let by = taken(server, &self.project, &change.target)?;
        let text = format!(
            "{name}: not added: a tool named '{}' already exists ({by}); an added tool may \
             not take another tool's name or its grant (fix: choose another name)",
            change.target
        );
        let denied = RecordedDecision::Denied {
            reason: "name_taken".into(),
            message: text.clone(),
        };
        let _ = self.record(server, name, args, denied, Some(change), None);
        Some(text)
    }

    /// Ask the person (unless `[manage] approval = false`); a refusal is
    /// recorded and its text returned. The client's cancellation or a
    /// stopping server withdraws the question.
    async fn decide(
        &self,
        server: &McpServer,
        peer: &Peer<RoleServer>,
        cancel: &tokio_util::sync::CancellationToken,
        name: &str,
        args: &Value,
        change: &Change,
    ) -> Result<RecordedDecision, String> {
        if !self.policy.approval {
            return Ok(RecordedDecision::Allowed);
        }
        let asker = Elicitation {
            peer: peer.clone(),
            timeout: server.shared.config.approval_timeout,
        };
        let message = crate::gate::terminal::sanitize(&prompt(&self.project, change));
        let answered = tokio::select! {
            a = asker.confirm(message) => a,
            _ = cancel.cancelled() => ApprovalAnswer::Cancelled,
            _ = server.shared.stopping.cancelled() => ApprovalAnswer::Cancelled,
        };
        if let ApprovalAnswer::Approved { by } = answered {
            return Ok(RecordedDecision::Approved {
                by,
                remembered: false,
            });
        }
        let (reason, why) = refusal(&answered);
        let text = format!("{name}: not written: {why}");
        let denied = RecordedDecision::Denied {
            reason: reason.into(),
            message: text.clone(),
        };
        let _ = self.record(server, name, args, denied, Some(change), None);
        Err(text)
    }

    /// Write the change atomically, release the lock, rediscover.
    async fn write(
        &self,
        server: &McpServer,
        name: &str,
        args: &Value,
        lock: nix::fcntl::Flock<std::fs::File>,
        change: Change,
        decision: RecordedDecision,
    ) -> Handled {
        let (ops, project) = (change.ops.clone(), self.project.clone());
        let written = tokio::task::spawn_blocking(move || {
            let r = write::apply(&project, &ops);
            drop(lock);
            r
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r);
        if let Err(e) = written {
            let _ = self.record(server, name, args, decision, Some(&change), Some(e.clone()));
            return answer(format!("{name}: {} failed: {e}", change.action), true);
        }
        let changed = self.reload(server).await;
        let shown = &change.target;
        answer(
            format!(
                "{name}: {} {shown}: written{}.\n{}",
                change.action,
                if changed {
                    "; the tool list changed"
                } else {
                    ""
                },
                cut(&change.diff, 8192)
            ),
            false,
        )
    }

    /// Rediscover now (not waiting for the file watch) and tell every
    /// client when the list changed.
    async fn reload(&self, server: &McpServer) -> bool {
        let host = server.shared.host.clone();
        let changed = tokio::task::spawn_blocking(move || host.reload())
            .await
            .unwrap_or(false);
        if changed {
            server.notify_tools_changed().await;
        }
        changed
    }

    fn record(
        &self,
        server: &McpServer,
        name: &str,
        args: &Value,
        decision: RecordedDecision,
        change: Option<&Change>,
        error: Option<String>,
    ) -> Result<(), String> {
        let redact = self.gate.redact();
        let change_rec = change.map(|c| ChangeRecord {
            action: c.action.clone(),
            target: c.target.clone(),
            files: c
                .ops
                .iter()
                .flat_map(Op::paths)
                .map(|p| p.display().to_string())
                .collect(),
            diff: (!redact).then(|| cut(&c.diff, MAX_DIFF)),
            diff_sha256: Sha256::digest(c.diff.as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect(),
        });
        let denied = matches!(decision, RecordedDecision::Denied { .. });
        let record = AuditRecord {
            time: rfc3339(std::time::SystemTime::now()),
            phase: None,
            call_id: None,
            session: server.session.id.0.clone(),
            tool: name.to_string(),
            format: change.map(|c| c.format.to_string()).unwrap_or_default(),
            source: change
                .map(|c| c.source.display().to_string())
                .unwrap_or_default(),
            upstream: None,
            definition_sha256: None,
            args_sha256: crate::gate::approval::args_digest(args),
            args: Some(args.clone()),
            args_cut: None,
            decision,
            approval_mode: Some(
                if self.policy.approval {
                    "always"
                } else {
                    "never"
                }
                .into(),
            ),
            grant: None,
            enforcement: None,
            exit: None,
            exit_status: None,
            is_error: Some(denied || error.is_some()),
            error,
            stopped_by: None,
            duration_ms: None,
            stdout: None,
            stderr: None,
            denials: None,
            change: change_rec,
            content: None,
        };
        let record = if redact {
            record.redacted(args)
        } else {
            record
        };
        let written = self.gate.append_record(&record);
        if let Err(e) = &written {
            tracing::warn!("{name}: cannot write the audit record of a change: {e}");
        }
        written
    }
}

/// The audit reason code and the text of a change not approved.
fn refusal(answer: &ApprovalAnswer) -> (&'static str, &'static str) {
    match answer {
        ApprovalAnswer::Declined => ("approval_declined", "the person declined the change"),
        ApprovalAnswer::TimedOut => (
            "approval_timed_out",
            "no answer to the approval request in time",
        ),
        ApprovalAnswer::Cancelled => ("approval_cancelled", "the person cancelled the change"),
        _ => (
            "approval_no_channel",
            "the policy's [manage] approval = true needs a person's yes, and this client cannot \
             be asked (no elicitation) (fix: use a client with elicitation, or set approval = \
             false under [manage] in the operator's policy)",
        ),
    }
}
