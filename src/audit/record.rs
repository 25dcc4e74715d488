//! One audit record: one JSON object per line.
//!
//! Fields a client or a project controls are capped before a record is
//! written ([`AuditRecord::to_line`]), so a client cannot grow the log by
//! megabytes per call (say, with a 2 MiB unknown tool name):
//!
//! - `tool` longer than [`MAX_TOOL_NAME`] bytes (256), and the denial
//!   `message` and `error` longer than [`MAX_MESSAGE`] bytes (4 KiB), become
//!   their first [`PREFIX_KEPT`] bytes, then `… [N bytes, sha256 HEX]` (the
//!   hash of the whole text);
//! - arguments whose JSON text is longer than [`MAX_ARGS_TEXT`] bytes
//!   (4 KiB) are not stored: `args` is absent and `args_cut` holds the
//!   size and the first [`PREFIX_KEPT`] bytes of that text (`args_sha256` is
//!   always the hash of the whole arguments).

use super::GrantSummary;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::time::{SystemTime, UNIX_EPOCH};

/// Tool names longer than this many bytes are stored cut, with their hash.
pub(crate) const MAX_TOOL_NAME: usize = 256;
/// Argument JSON longer than this many bytes is not stored (see `args_cut`).
pub(crate) const MAX_ARGS_TEXT: usize = 4096;
/// Denial messages and errors longer than this are stored cut, with a hash.
pub(crate) const MAX_MESSAGE: usize = 4096;
/// How much of a cut text is kept.
pub(crate) const PREFIX_KEPT: usize = 64;

/// The arguments of a call whose JSON text was too long to store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArgsCut {
    /// Length of the arguments' JSON text.
    pub bytes: u64,
    /// Its first [`PREFIX_KEPT`] bytes (cut on a character boundary).
    pub prefix: String,
}

/// The first `max` bytes of `s` or fewer, ending on a character boundary.
fn head(s: &str, max: usize) -> &str {
    let mut cut = max.min(s.len());
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    &s[..cut]
}

/// `s` itself when it is at most `max` bytes; otherwise its first
/// [`PREFIX_KEPT`] bytes, then `… [N bytes, sha256 HEX]`.
pub(crate) fn cap_text(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let hash: String = Sha256::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!(
        "{}… [{} bytes, sha256 {hash}]",
        head(s, PREFIX_KEPT),
        s.len()
    )
}

/// Whether the call was allowed, and by whom.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RecordedDecision {
    /// No approval needed.
    Allowed,
    /// A person approved through `by` (`terminal`, `elicitation`, `--yes`);
    /// `remembered`: an earlier approval in the session covered it.
    Approved { by: String, remembered: bool },
    /// Not run: `reason` is the machine code, `message` the text shown.
    Denied { reason: String, message: String },
}

/// Which record of a call this is. A call that runs gets two: `started`,
/// written before the tool runs (it survives `kill -9` of toolcage), and
/// the final record (no `phase`) with its result, both with the same
/// `call_id`. Denied calls get only the final record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Started,
}

/// Bytes kept and omitted of one output stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamBytes {
    pub kept: u64,
    pub omitted: u64,
}

/// One call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// RFC 3339, UTC, milliseconds.
    pub time: String,
    /// `started` for the record written before the tool runs; absent on
    /// the final record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// Pairs a `started` record with the final one (calls that ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    pub session: String,
    pub tool: String,
    pub format: String,
    /// The file that defines the tool.
    pub source: String,
    /// A tool of an upstream MCP server: which server, and the tool's name
    /// there (`tool` is the name the agent called).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<UpstreamRef>,
    /// The tool's definition digest (spec, grant, script or tool file
    /// content) that an approval was given for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition_sha256: Option<String>,
    /// SHA-256 of the canonical JSON arguments.
    pub args_sha256: String,
    /// The arguments, unless `[audit] redact = true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<serde_json::Value>,
    /// Set instead of `args` when their JSON text was over
    /// [`MAX_ARGS_TEXT`] bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args_cut: Option<ArgsCut>,
    pub decision: RecordedDecision,
    /// `never`, `always`, `once`, `once-per-args`; absent when the call was
    /// rejected before its grant was resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_mode: Option<String>,
    /// Absent when the call was rejected before its grant was resolved
    /// (unknown tool, invalid arguments).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<GrantSummary>,
    /// The sandbox's enforcement report; for a call that did not run,
    /// [`not_ran`] with why (absent on `started` records and on records
    /// written before this field said so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enforcement: Option<serde_json::Value>,
    /// `{"kind": "code", "value": 0}`, `{"kind": "timeout"}`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<serde_json::Value>,
    /// The shell-style status (124 timeout, 128+N signal); for a call
    /// cancelled because toolcage got signal N, 128+N as toolcage returns
    /// (`stopped_by` names it); for one a client cancelled, 130.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// Why the call failed to run (sandbox setup, unsupported runner, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What stopped a running call from outside: `SIGTERM to toolcage`,
    /// ... (its process tree was killed; `exit` is `cancelled`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout: Option<StreamBytes>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<StreamBytes>,
    /// What the call was refused (domain mode's proxy and DNS stub, the
    /// gate's denial of a call that did not run); absent when nothing was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denials: Option<serde_json::Value>,
    /// A change to a tool directory by a management tool (`custom_script`,
    /// `tool_manage`); absent on every other record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<ChangeRecord>,
    /// An upstream tool's result: each kind of content it held (`text`,
    /// `image`, `audio`, `resource`, `resource_link`, `structuredContent`)
    /// with `blocks`, and the bytes `kept` and `omitted` (over the cap);
    /// absent for every other call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<serde_json::Value>,
}

/// What a management tool changed (or would have, when refused).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeRecord {
    /// The mode or action: `add`, `edit`, `delete`, `remove`, `enable`, `disable`.
    pub action: String,
    /// The tool changed, as the agent sees it (`ct_<id>`, the tools.toml name).
    pub target: String,
    /// The files written or removed.
    pub files: Vec<String>,
    /// Unified diff of the change, cut at [`MAX_DIFF`] bytes; absent under
    /// `[audit] redact = true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// SHA-256 of the whole diff.
    pub diff_sha256: String,
}

/// The enforcement report of a call that did not run (refused, unknown,
/// invalid): no report of what the kernel enforced, and why. Results and
/// audit records carry it where a run's report would be.
pub(crate) fn not_ran(note: String) -> serde_json::Value {
    serde_json::json!({"mode": "not-run", "note": note})
}

/// A change's diff longer than this is stored cut (its hash is whole).
pub(crate) const MAX_DIFF: usize = 16 * 1024;

impl AuditRecord {
    /// The record under `[audit] redact = true`: no arguments, and every
    /// text that could quote one of them (the denial message, the error,
    /// the denials, the enforcement note) scrubbed of their values
    /// ([`super::redact`]).
    pub(crate) fn redacted(mut self, args: &serde_json::Value) -> AuditRecord {
        let needles = super::redact::Needles::of(args);
        self.args = None;
        self.args_cut = None;
        if let RecordedDecision::Denied { message, .. } = &mut self.decision {
            *message = needles.scrub(message);
        }
        if let Some(e) = &mut self.error {
            *e = needles.scrub(e);
        }
        for v in [&mut self.denials, &mut self.enforcement]
            .into_iter()
            .flatten()
        {
            needles.scrub_value(v);
        }
        self
    }

    /// One line of JSON, with its newline; long fields capped first
    /// ([`AuditRecord::capped`]).
    pub fn to_line(&self) -> Result<String, serde_json::Error> {
        // Encoded once as it is when nothing can need a cap: the arguments'
        // text is part of the line, so a line within the arguments' limit
        // holds arguments within it too.
        if self.short_texts() {
            let mut s = serde_json::to_string(self)?;
            if s.len() <= MAX_ARGS_TEXT {
                s.push('\n');
                return Ok(s);
            }
        }
        let mut s = serde_json::to_string(&self.clone().capped())?;
        s.push('\n');
        Ok(s)
    }

    /// The tool name, denial message and error are all within their caps
    /// ([`AuditRecord::capped`] would leave them as they are).
    fn short_texts(&self) -> bool {
        let message = match &self.decision {
            RecordedDecision::Denied { message, .. } => message.len(),
            _ => 0,
        };
        let error = self.error.as_ref().map_or(0, String::len);
        self.tool.len() <= MAX_TOOL_NAME && message <= MAX_MESSAGE && error <= MAX_MESSAGE
    }

    /// The record with the tool name, arguments, denial message and error
    /// capped (see the module documentation for the limits).
    pub fn capped(mut self) -> AuditRecord {
        self.tool = cap_text(&self.tool, MAX_TOOL_NAME);
        if let Some(args) = &self.args {
            let text = serde_json::to_string(args).unwrap_or_default();
            if text.len() > MAX_ARGS_TEXT {
                self.args_cut = Some(ArgsCut {
                    bytes: text.len() as u64,
                    prefix: head(&text, PREFIX_KEPT).to_string(),
                });
                self.args = None;
            }
        }
        if let RecordedDecision::Denied { message, .. } = &mut self.decision {
            *message = cap_text(message, MAX_MESSAGE);
        }
        if let Some(e) = &mut self.error {
            *e = cap_text(e, MAX_MESSAGE);
        }
        self
    }
}

/// `2024-05-01T12:34:56.789Z`.
pub(crate) fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, day) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// Howard Hinnant's days-to-civil algorithm (days since 1970-01-01).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn rfc3339_known_instants() {
        let at = |s: u64, ms: u64| {
            rfc3339(UNIX_EPOCH + Duration::from_secs(s) + Duration::from_millis(ms))
        };
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(at(1_709_251_199, 999), "2024-02-29T23:59:59.999Z");
        assert_eq!(at(4_102_444_800, 0), "2100-01-01T00:00:00.000Z");
        assert_eq!(at(1_234_567_890, 0), "2009-02-13T23:31:30.000Z");
    }
}

/// The upstream server and tool behind a gateway call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpstreamRef {
    pub server: String,
    pub tool: String,
}
