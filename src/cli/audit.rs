//! `toolcage audit [--tail N] [--json]`: read the project's audit log.
//!
//! Text: one line per call (time, tool, decision, exit, duration, bytes).
//! `--json`: the records themselves, one JSON object per line. A call that
//! ran has two records, `started` (written before the tool ran) and its
//! final one; the `started` record is left out when its final record is in
//! the log, and shown as "started, no result (toolcage was killed?)" when
//! it is not (toolcage was killed with SIGKILL, or crashed, mid-call; or
//! the call is still running). `--all` shows every record. Lines that
//! do not parse (a torn last line after a crash, or damage) are skipped and
//! reported on stderr with their line numbers.
//!
//! Exit: 0 every line read; 1 some lines skipped; 125 no usable policy or
//! unreadable log. No log yet is not an error.

use super::{Global, PolicyArgs, status};
use crate::audit::location;
use crate::audit::record::{AuditRecord, Phase, RecordedDecision};
use clap::Args;

#[derive(Debug, Args)]
pub(crate) struct AuditArgs {
    #[command(flatten)]
    pub(crate) policy: LogSource,
    /// Only the last N records.
    #[arg(long, value_name = "N")]
    pub(crate) tail: Option<usize>,
    /// The records as JSON Lines.
    #[arg(long)]
    pub(crate) json: bool,
    /// Every record, also the `started` record of calls whose final record
    /// is in the log.
    #[arg(long)]
    pub(crate) all: bool,
    #[command(flatten)]
    pub(crate) opts: super::options::LogOpts,
}

/// Where the log is: the policy's `[audit] path`, from the profile and
/// the policy file. A grant's flags (`--read`, `--allow-net`, ...) do not
/// move it, so `audit` does not take them.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct LogSource {
    /// A shipped profile: default, untrusted, ci, network.
    #[arg(long, value_name = "NAME", value_parser = super::docs::ProfileName)]
    pub(crate) profile: Option<String>,
    /// A policy file (TOML) whose [audit] path names the log.
    #[arg(long, value_name = "FILE")]
    pub(crate) policy: Option<std::path::PathBuf>,
}

impl LogSource {
    fn policy_args(&self) -> PolicyArgs {
        PolicyArgs {
            profile: self.profile.clone(),
            policy: self.policy.clone(),
            ..PolicyArgs::default()
        }
    }
}

/// The records to show: without the `started` records whose call has a
/// final record (same `call_id`), unless `all`.
pub(crate) fn calls(records: &[(usize, AuditRecord)], all: bool) -> Vec<&AuditRecord> {
    let finished: std::collections::HashSet<&str> = records
        .iter()
        .filter(|(_, r)| r.phase.is_none())
        .filter_map(|(_, r)| r.call_id.as_deref())
        .collect();
    records
        .iter()
        .map(|(_, r)| r)
        .filter(|r| {
            all || r.phase != Some(Phase::Started)
                || !r.call_id.as_deref().is_some_and(|id| finished.contains(id))
        })
        .collect()
}

/// One line of text for a record. Every field came from a client or a
/// project (a tool name can hold `\r` and escape sequences that would forge
/// an earlier line), so the whole line is neutralised ([`crate::text`]).
pub(crate) fn summary(r: &AuditRecord) -> String {
    crate::text::one_line(&summary_raw(r))
}

fn summary_raw(r: &AuditRecord) -> String {
    let decision = match &r.decision {
        RecordedDecision::Allowed => "allowed".to_string(),
        RecordedDecision::Approved { by, remembered } => {
            format!(
                "approved by {by}{}",
                if *remembered { " (remembered)" } else { "" }
            )
        }
        RecordedDecision::Denied { reason, message } => format!("denied ({reason}): {message}"),
    };
    let mut s = format!("{}  {}  {decision}", r.time, r.tool);
    if let Some(c) = &r.change {
        s.push_str(&format!(
            "  {} {} ({} file(s); `--json` has the diff)",
            c.action,
            c.target,
            c.files.len()
        ));
    }
    if r.phase == Some(Phase::Started) {
        s.push_str("  started, no result (toolcage was killed?)");
        return s;
    }
    if let Some(code) = r.exit_status {
        s.push_str(&format!("  exit {code}"));
    }
    if let Some(e) = &r.error {
        s.push_str(&format!("  error: {e}"));
    }
    if let Some(by) = &r.stopped_by {
        s.push_str(&format!("  (cancelled: {by})"));
    }
    if let Some(ms) = r.duration_ms {
        s.push_str(&format!("  {ms}ms"));
    }
    if let (Some(o), Some(e)) = (&r.stdout, &r.stderr) {
        s.push_str(&format!(
            "  stdout {}B (+{} omitted) stderr {}B (+{} omitted)",
            o.kept, o.omitted, e.kept, e.omitted
        ));
    }
    s
}

pub(crate) fn run(global: &Global, args: &AuditArgs) -> u8 {
    let engine = match global.engine_without_tools(&args.policy.policy_args()) {
        Ok(e) => e,
        Err(e) => {
            super::say(&e);
            return status::INTERNAL;
        }
    };
    let session = match engine.stack.session(&engine.ctx) {
        Ok(s) => s,
        Err(e) => {
            super::say(&e);
            return status::INTERNAL;
        }
    };
    let dir = location::state_dir(&engine.project_root(), &engine.ctx);
    let path = location::audit_path(&session.audit, &dir);
    if location::is_stdout(&path) {
        super::say(
            &"[audit] path = \"-\": the records went to the standard output of `toolcage serve \
             --http`; read them where its output is collected (a log pipeline), not here",
        );
        return status::INVALID;
    }
    let parsed = match crate::audit::read::read(&path) {
        Ok(Some(p)) => p,
        Ok(None) => {
            super::notice(&format!("no audit log yet at {}", path.display()));
            return status::OK;
        }
        Err(e) => {
            super::say(&e);
            return status::INTERNAL;
        }
    };
    for b in &parsed.bad {
        if b.torn {
            eprintln!(
                "toolcage: {}:{}: torn last line (a write cut short), skipped: {}",
                path.display(),
                b.line,
                crate::text::one_line(&b.error)
            );
        } else {
            eprintln!(
                "toolcage: {}:{}: not a record, skipped: {}",
                path.display(),
                b.line,
                crate::text::one_line(&b.error)
            );
        }
    }
    let shown = calls(&parsed.records, args.all);
    let skip = args.tail.map_or(0, |n| shown.len().saturating_sub(n));
    let mut lines = String::new();
    for r in shown.into_iter().skip(skip) {
        let line = if args.json {
            serde_json::to_string(r).unwrap_or_default()
        } else {
            summary(r)
        };
        lines.push_str(&line);
        lines.push('\n');
    }
    super::out::text(&lines);
    if parsed.bad.is_empty() {
        status::OK
    } else {
        status::TOOL_ERROR
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(tool: &str, call_id: Option<&str>, started: bool) -> AuditRecord {
        let line = serde_json::json!({
            "time": "2026-01-01T00:00:00.000Z", "session": "s", "tool": tool,
            "format": "octomind", "source": "/p/t", "args_sha256": "0",
            "decision": {"kind": "allowed"},
            "call_id": call_id, "phase": if started { Some("started") } else { None },
        });
        serde_json::from_value(line).unwrap()
    }

    #[test]
    fn started_records_fold_into_their_final_record() {
        let records = vec![
            (1, rec("a", Some("1"), true)),
            (2, rec("b", Some("2"), true)),
            (3, rec("a", Some("1"), false)),
            (4, rec("denied", None, false)),
        ];
        let shown: Vec<&str> = calls(&records, false)
            .iter()
            .map(|r| r.tool.as_str())
            .collect();
        assert_eq!(shown, ["b", "a", "denied"]);
        assert_eq!(calls(&records, true).len(), 4);
        let orphan = summary(&records[1].1);
        assert!(
            orphan.ends_with("b  allowed  started, no result (toolcage was killed?)"),
            "{orphan}"
        );
    }
}
