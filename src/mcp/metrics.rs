//! Prometheus metrics of `serve --http --metrics ADDR`, in the text
//! exposition format (version 0.0.4), written here by hand: seven families,
//! one histogram, and label values escaped as the format says (backslash,
//! double quote, newline). A crate would add a dependency tree for ~150
//! lines that the tests below pin down.
//!
//! Label sets are bounded: `tool` is a tool this server offers (its own,
//! its upstream servers', the management tools), else `(unknown)`, so a
//! client cannot mint series with made-up names; `decision`, `outcome`,
//! `layer` and `state` come from fixed lists in the code.

use crate::call::{CallError, CallErrorKind, CallResult};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

/// The label a tool name not offered by this server is counted under.
pub(crate) const UNKNOWN_TOOL: &str = "(unknown)";

/// Upper bounds of the call duration buckets, in seconds: milliseconds
/// (an `echo`) to ten minutes (a build).
const BUCKETS: [f64; 16] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
];

#[derive(Default)]
struct Histogram {
    /// Per bucket (not cumulative); the last is `+Inf`.
    counts: [u64; BUCKETS.len() + 1],
    sum: f64,
    count: u64,
}

/// The counters one server keeps; gauges are read when scraped ([`Gauges`]).
#[derive(Default)]
pub(crate) struct Metrics {
    calls: Mutex<BTreeMap<(String, &'static str, &'static str), u64>>,
    denials: Mutex<BTreeMap<&'static str, u64>>,
    duration: Mutex<Histogram>,
}

/// What is read at scrape time.
#[derive(Debug, Default)]
pub(crate) struct Gauges {
    pub(crate) sessions: usize,
    pub(crate) pending_calls: usize,
    /// Upstream servers by state (`running`, `failed`, ...), over sessions.
    pub(crate) upstream_servers: BTreeMap<String, u64>,
    /// Failed operations on the shared store (`crate::gate::store::errors`).
    pub(crate) store_errors: u64,
    /// Whether the last operation on the shared store succeeded (`None`:
    /// none yet, no store).
    pub(crate) store_up: Option<bool>,
}

/// `decision` and `outcome` of a finished `tools/call`:
///
/// | decision | outcome | when |
/// |---|---|---|
/// | `allowed` | `ok`, `error` | it ran; `error` is an `isError` result |
/// | `allowed` | `failed` | admitted, but the sandbox or toolcage failed around the run |
/// | `denied` | `denied` | the gate refused it (`toolcage_denials_total` says which layer) |
/// | `refused` | `not_run` | stopped before the gate: too many pending, cancelled, stopping, draining |
/// | `refused` | `invalid` | unknown tool, invalid arguments, unsupported kind, policy error |
/// | `refused` | `audit` | the audit record could not be written (`[audit] fail_closed`) |
pub(crate) fn classify(result: &Result<CallResult, CallError>) -> (&'static str, &'static str) {
    match result {
        Ok(r) if r.is_error => ("allowed", "error"),
        Ok(_) => ("allowed", "ok"),
        Err(e) => match e.kind() {
            CallErrorKind::Denied(_) => ("denied", "denied"),
            CallErrorKind::NotRun => ("refused", "not_run"),
            CallErrorKind::UnknownTool
            | CallErrorKind::InvalidArguments
            | CallErrorKind::Unsupported
            | CallErrorKind::Policy => ("refused", "invalid"),
            CallErrorKind::Audit => ("refused", "audit"),
            CallErrorKind::Sandbox(_) | CallErrorKind::Internal => ("allowed", "failed"),
        },
    }
}

impl Metrics {
    /// Count one finished call of `tool` (already bounded: a tool this
    /// server offers, or [`UNKNOWN_TOOL`]); `took` is observed when it ran.
    pub(crate) fn call(&self, tool: &str, result: &Result<CallResult, CallError>, took: Duration) {
        let (decision, outcome) = classify(result);
        *lock(&self.calls)
            .entry((tool.to_string(), decision, outcome))
            .or_default() += 1;
        if let Err(CallError::Denied(d)) = result {
            *lock(&self.denials).entry(d.reason.layer()).or_default() += 1;
        }
        if decision == "allowed" {
            let secs = took.as_secs_f64();
            let mut h = lock(&self.duration);
            let i = BUCKETS
                .iter()
                .position(|b| secs <= *b)
                .unwrap_or(BUCKETS.len());
            h.counts[i] += 1;
            h.sum += secs;
            h.count += 1;
        }
    }

    /// The exposition text.
    pub(crate) fn render(&self, g: &Gauges) -> String {
        let mut o = String::new();
        self.render_calls(&mut o);
        self.render_duration(&mut o);
        self.render_denials(&mut o);
        render_gauges(&mut o, g);
        o
    }

    /// `toolcage_calls_total`.
    fn render_calls(&self, o: &mut String) {
        family(
            o,
            "toolcage_calls_total",
            "counter",
            "tools/call requests by tool, gate decision and outcome.",
        );
        for ((tool, decision, outcome), n) in lock(&self.calls).iter() {
            let labels = [
                ("tool", tool.as_str()),
                ("decision", decision),
                ("outcome", outcome),
            ];
            sample(o, "toolcage_calls_total", &labels, *n as f64);
        }
    }

    /// `toolcage_call_duration_seconds`, a histogram.
    fn render_duration(&self, o: &mut String) {
        family(
            o,
            "toolcage_call_duration_seconds",
            "histogram",
            "Time from tools/call to result, for calls the gate allowed.",
        );
        let h = lock(&self.duration);
        let mut cumulative = 0;
        for (i, le) in BUCKETS.iter().enumerate() {
            cumulative += h.counts[i];
            let le = le.to_string();
            sample(
                o,
                "toolcage_call_duration_seconds_bucket",
                &[("le", &le)],
                cumulative as f64,
            );
        }
        sample(
            o,
            "toolcage_call_duration_seconds_bucket",
            &[("le", "+Inf")],
            h.count as f64,
        );
        sample(o, "toolcage_call_duration_seconds_sum", &[], h.sum);
        sample(
            o,
            "toolcage_call_duration_seconds_count",
            &[],
            h.count as f64,
        );
    }

    /// `toolcage_denials_total`.
    fn render_denials(&self, o: &mut String) {
        family(
            o,
            "toolcage_denials_total",
            "counter",
            "Calls the gate denied, by the layer that denied them.",
        );
        for (layer, n) in lock(&self.denials).iter() {
            sample(o, "toolcage_denials_total", &[("layer", layer)], *n as f64);
        }
    }
}

/// The gauges (sessions, pending calls, upstream servers) and the store's
/// error count.
fn render_gauges(o: &mut String, g: &Gauges) {
    family(o, "toolcage_sessions", "gauge", "MCP sessions open.");
    sample(o, "toolcage_sessions", &[], g.sessions as f64);
    family(
        o,
        "toolcage_pending_calls",
        "gauge",
        "Calls waiting for approval or a run slot, or running.",
    );
    sample(o, "toolcage_pending_calls", &[], g.pending_calls as f64);
    family(
        o,
        "toolcage_upstream_servers",
        "gauge",
        "Upstream MCP server instances of open sessions, by state.",
    );
    for (state, n) in &g.upstream_servers {
        sample(
            o,
            "toolcage_upstream_servers",
            &[("state", state)],
            *n as f64,
        );
    }
    family(
        o,
        "toolcage_store_errors_total",
        "counter",
        "Failed operations on a shared state store.",
    );
    sample(o, "toolcage_store_errors_total", &[], g.store_errors as f64);
    if let Some(up) = g.store_up {
        family(
            o,
            "toolcage_store_up",
            "gauge",
            "1 when the last operation on the shared store succeeded, 0 when it failed \
             (degraded: limited and upstream calls are refused).",
        );
        sample(o, "toolcage_store_up", &[], f64::from(u8::from(up)));
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn family(o: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(o, "# HELP {name} {help}");
    let _ = writeln!(o, "# TYPE {name} {kind}");
}

fn sample(o: &mut String, name: &str, labels: &[(&str, &str)], value: f64) {
    o.push_str(name);
    if !labels.is_empty() {
        o.push('{');
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                o.push(',');
            }
            let _ = write!(o, "{k}=\"{}\"", escape(v));
        }
        o.push('}');
    }
    let _ = writeln!(o, " {value}");
}

/// A label value as the text format quotes it: `\` `"` and newline escaped.
pub(crate) fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
        assert_eq!(escape("plain_tool"), "plain_tool");
    }

    #[test]
    fn histogram_buckets_are_cumulative() {
        let m = Metrics::default();
        // Admitted, then failed around the run: counted as allowed, timed.
        let ok = || Err(CallError::Internal("x".into()));
        m.call("t", &ok(), Duration::from_millis(3));
        m.call("t", &ok(), Duration::from_secs(2));
        m.call("t", &ok(), Duration::from_secs(3600));
        let text = m.render(&Gauges::default());
        assert!(text.contains("toolcage_call_duration_seconds_bucket{le=\"0.005\"} 1\n"));
        assert!(text.contains("toolcage_call_duration_seconds_bucket{le=\"2.5\"} 2\n"));
        assert!(text.contains("toolcage_call_duration_seconds_bucket{le=\"600\"} 2\n"));
        assert!(text.contains("toolcage_call_duration_seconds_bucket{le=\"+Inf\"} 3\n"));
        assert!(text.contains("toolcage_call_duration_seconds_count 3\n"));
        assert!(
            text.contains(
                "toolcage_calls_total{tool=\"t\",decision=\"allowed\",outcome=\"failed\"} 3\n"
            ),
            "{text}"
        );
        assert!(text.contains("toolcage_store_errors_total 0\n"));
        // Every sample line belongs to a family declared before it.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name = line.split(['{', ' ']).next().unwrap();
            let base = name
                .trim_end_matches("_bucket")
                .trim_end_matches("_sum")
                .trim_end_matches("_count");
            assert!(text.contains(&format!("# TYPE {base} ")), "{line}");
        }
    }
}
