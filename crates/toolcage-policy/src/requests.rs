//! A tool's own requests, under the trust rule "the operator grants, the
//! project only requests" (docs/policy.md#the-trust-rule). A request can always ask for
//! less; it gets more only where the operator's `[requests]` section allows.

use super::file::NetMode;
use super::grant::{ApprovalMode, RateLimit};
use super::state::{Origin, Sourced, State, enum_name, mode_name};
use super::units::format_duration;
use serde::Serialize;
use std::time::Duration;

/// What a tool's own files ask for (discovery fills it in). The operator's
/// policy decides what is granted: a request never widens a grant by itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Requests {
    /// The tool asks for network access.
    pub network: Option<bool>,
    /// The tool asks for a different timeout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
    /// The tool asks to be approved by a person before each run.
    pub requires_approval: Option<bool>,
    /// Set when `requires_approval` is the format's own default rather than
    /// written in the tool's files: why, and the key that changes it (shown
    /// by `policy`, `list`, `check` and approval refusals).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_default: Option<String>,
    /// `requests` per `window`, from the tool's own definition.
    pub rate_limit: Option<RateLimit>,
    /// The only hosts the tool needs (`host[:port]` patterns, e.g. an
    /// OpenCrabs http tool's url): narrows a domain grant, never widens one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domains: Option<Vec<String>>,
}

/// What happened to one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Applied as asked.
    Granted,
    /// Not applied: the policy does not allow it.
    Refused,
    /// Applied only up to the operator's bound.
    Clamped,
    /// Nothing to do: the policy already gives this (or something stricter).
    Unchanged,
    /// A CLI flag set this value explicitly; the flag wins.
    Overridden,
}

/// One request of a tool and what was granted for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RequestOutcome {
    /// `network`, `timeout`, `approval` or `rate_limit`.
    pub key: String,
    pub requested: String,
    pub granted: String,
    pub decision: Decision,
    /// Why, naming the policy setting and where it came from.
    pub reason: String,
}

fn rate(r: &RateLimit) -> String {
    format!("{} per {}", r.requests, format_duration(r.window))
}

/// True when `a` never allows more calls than `b` in any stretch of time:
/// no more requests, over a window at least as long. A lower average rate is
/// not enough: 1000 per 2h is "slower" than 10 per 1m but allows a burst of
/// 1000 calls in one minute.
pub fn at_least_as_strict(a: &RateLimit, b: &RateLimit) -> bool {
    a.requests <= b.requests && a.window >= b.window
}

/// Apply the tool's requests to `st`, returning one outcome per request.
pub fn apply(st: &mut State, tool: &str, r: &Requests, seq: usize) -> Vec<RequestOutcome> {
    let mut out = Vec::new();
    let origin = |note: String| Origin::input(format!("tool {tool} requested it; {note}"), seq);
    let mut note =
        |key: &str, requested: String, granted: String, decision: Decision, reason: String| {
            out.push(RequestOutcome {
                key: key.into(),
                requested,
                granted,
                decision,
                reason,
            })
        };

    if let Some(want) = r.network {
        let asked = if want { "on" } else { "off" }.to_string();
        let cur = mode_name(st.mode.v).to_string();
        let src = st.mode.o.source.clone();
        if want && st.mode.v != NetMode::Off {
            note(
                "network",
                asked,
                cur,
                Decision::Unchanged,
                format!("the policy already allows network ({src})"),
            );
        } else if want && st.req_network.v {
            let why = format!("requests.network = true ({})", st.req_network.o.source);
            st.mode = Sourced {
                v: NetMode::On,
                o: origin(format!("allowed by {why}")),
            };
            note("network", asked, "on".into(), Decision::Granted, why);
        } else if want {
            let why = format!(
                "requests.network = false ({}); an operator can allow it with [requests] network = true or --allow-net",
                st.req_network.o.source
            );
            note("network", asked, cur, Decision::Refused, why);
        } else if st.mode.v == NetMode::Off {
            note(
                "network",
                asked,
                cur,
                Decision::Unchanged,
                format!("network is already off ({src})"),
            );
        } else if st.mode.o.is_cli() {
            note(
                "network",
                asked,
                cur,
                Decision::Overridden,
                format!("{src} wins"),
            );
        } else {
            st.mode = Sourced {
                v: NetMode::Off,
                o: origin("a tool may always ask for less".into()),
            };
            note(
                "network",
                asked,
                "off".into(),
                Decision::Granted,
                "a tool may always ask for less".into(),
            );
        }
    }

    if let Some(want) = &r.domains {
        let d = st.request_domains(tool, want, seq);
        note(
            "network.allow",
            format!("[{}]", want.join(", ")),
            d.granted,
            d.decision,
            d.reason,
        );
    }

    if let Some(t) = r.timeout {
        let asked = format_duration(t);
        let cur = st.timeout.v;
        let max = st.max_timeout.v;
        let max_src = format!(
            "requests.max_timeout = {} ({})",
            format_duration(max),
            st.max_timeout.o.source
        );
        if t.is_zero() {
            note(
                "timeout",
                asked,
                format_duration(cur),
                Decision::Refused,
                "a zero timeout is not valid".into(),
            );
        } else if st.timeout.o.is_cli() {
            let why = format!("{} wins", st.timeout.o.source);
            note(
                "timeout",
                asked,
                format_duration(cur),
                Decision::Overridden,
                why,
            );
        } else if t <= cur || t <= max {
            let why = if t <= cur {
                format!(
                    "not longer than the policy's {} ({})",
                    format_duration(cur),
                    st.timeout.o.source
                )
            } else {
                format!("within {max_src}")
            };
            st.timeout = Sourced {
                v: t,
                o: origin(format!("granted: {why}")),
            };
            note("timeout", asked, format_duration(t), Decision::Granted, why);
        } else {
            let new = max.max(cur);
            // The policy's own timeout may be the longer one: say which.
            let why = match max < cur {
                true => format!(
                    "above {max_src}; the policy's {} ({}) stays",
                    format_duration(cur),
                    st.timeout.o.source
                ),
                false => format!("above {max_src}"),
            };
            if new != cur {
                st.timeout = Sourced {
                    v: new,
                    o: origin(format!("clamped: {why}")),
                };
            }
            note(
                "timeout",
                asked,
                format_duration(new),
                Decision::Clamped,
                why,
            );
        }
    }

    if let Some(want) = r.requires_approval {
        // SECURITY.md: `--yes` is off for tools that asked for approval
        // unless the operator turns it on (`allow_yes` set in any layer).
        if want && st.allow_yes.is_none() {
            st.allow_yes = Some(Sourced {
                v: false,
                o: origin("--yes is off for a tool that asks for approval (set approval.allow_yes to allow it)".into()),
            });
        }
        let asked = if want { "required" } else { "not required" }.to_string();
        let cur = enum_name(&st.approval.v);
        let src = st.approval.o.source.clone();
        if want && st.approval.v == ApprovalMode::Never {
            let o = match &r.approval_default {
                Some(why) => Origin::input(
                    format!("tool {tool} requested it ({why}); a tool may always ask for approval"),
                    seq,
                ),
                None => origin("a tool may always ask for approval".into()),
            };
            st.approval = Sourced {
                v: ApprovalMode::Always,
                o,
            };
            note(
                "approval",
                asked,
                "always".into(),
                Decision::Granted,
                "a tool may always ask for approval".into(),
            );
        } else if want {
            note(
                "approval",
                asked,
                cur.clone(),
                Decision::Unchanged,
                format!("approval is already {cur} ({src})"),
            );
        } else if st.approval.v != ApprovalMode::Never {
            let why = format!("a tool cannot waive approval (approval.mode = {cur}, {src})");
            note("approval", asked, cur, Decision::Refused, why);
        } else {
            note(
                "approval",
                asked,
                cur,
                Decision::Unchanged,
                format!("approval is not required ({src})"),
            );
        }
    }

    if let Some(want) = r.rate_limit {
        let asked = rate(&want);
        let cur = st.rl_requests.as_ref().map(|r| {
            let window = st
                .rl_window
                .as_ref()
                .map_or(Duration::from_secs(60), |w| w.v);
            (
                RateLimit {
                    requests: r.v,
                    window,
                },
                r.o.source.clone(),
            )
        });
        let cur_text = cur.as_ref().map_or("none".to_string(), |(c, _)| rate(c));
        if want.requests == 0 || want.window.is_zero() {
            let why = "a rate limit needs at least 1 request and a non-zero window".into();
            note("rate_limit", asked, cur_text, Decision::Refused, why);
        } else if cur
            .as_ref()
            .is_some_and(|(c, _)| at_least_as_strict(c, &want))
        {
            let src = cur.map(|(_, s)| s).unwrap_or_default();
            let why = format!("the policy's {cur_text} ({src}) is at least as strict");
            note("rate_limit", asked, cur_text, Decision::Unchanged, why);
        } else if cur
            .as_ref()
            .is_some_and(|(c, _)| !at_least_as_strict(&want, c))
        {
            // Neither is stricter in every stretch of time: keep the policy's,
            // which only the operator may loosen. (The gate also enforces the
            // tool's own limit, so both apply at call time.)
            let src = cur.map(|(_, s)| s).unwrap_or_default();
            let why = format!(
                "it would allow more calls than the policy's {cur_text} ({src}) in some stretch of time; the policy's stays"
            );
            note("rate_limit", asked, cur_text, Decision::Refused, why);
        } else {
            let why = match &cur {
                None => "the policy sets no rate limit".to_string(),
                Some((_, src)) => format!("stricter than the policy's {cur_text} ({src})"),
            };
            let o = origin(format!("granted: {why}"));
            st.rl_requests = Some(Sourced {
                v: want.requests,
                o: o.clone(),
            });
            st.rl_window = Some(Sourced { v: want.window, o });
            note("rate_limit", asked.clone(), asked, Decision::Granted, why);
        }
    }
    out
}
