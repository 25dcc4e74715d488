//! A tool's own requests, under the trust rule "the operator grants, the
//! project only requests" (docs/policy.md#the-trust-rule). A request can always ask for
//! less; it gets more only where the operator's `[requests]` section allows.

use super::domains::HostRule;
use super::file::NetMode;
use super::grant::{ApprovalMode, RateLimit};
use super::origin::{Origin, Sourced};
use super::state::{State, enum_name, mode_name};
use serde::Serialize;
use std::time::Duration;
use toolcage_text::units::format_duration;

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
pub(crate) fn at_least_as_strict(a: &RateLimit, b: &RateLimit) -> bool {
    a.requests <= b.requests && a.window >= b.window
}

/// What a step grants for one request: the value now in force, the
/// decision and why.
type Answer = (String, Decision, String);

fn outcome(key: &str, requested: String, (granted, decision, reason): Answer) -> RequestOutcome {
    RequestOutcome {
        key: key.into(),
        requested,
        granted,
        decision,
        reason,
    }
}

/// The tool whose requests apply, and the place of its requests among
/// the layers.
struct Asker<'a> {
    tool: &'a str,
    seq: usize,
}

impl Asker<'_> {
    /// The origin of a value a request set.
    fn origin(&self, note: &str) -> Origin {
        Origin::input(format!("tool {} requested it; {note}", self.tool), self.seq)
    }
}

/// Apply the tool's requests to `st`, returning one outcome per request.
pub(crate) fn apply(st: &mut State, tool: &str, r: &Requests, seq: usize) -> Vec<RequestOutcome> {
    let ask = Asker { tool, seq };
    let mut out = Vec::new();
    if let Some(want) = r.network {
        let asked = if want { "on" } else { "off" }.to_string();
        out.push(outcome("network", asked, network(st, &ask, want)));
    }
    if let Some(want) = &r.domains {
        let asked = format!("[{}]", want.join(", "));
        out.push(outcome("network.allow", asked, domains(st, &ask, want)));
    }
    if let Some(t) = r.timeout {
        out.push(outcome("timeout", format_duration(t), timeout(st, &ask, t)));
    }
    if let Some(want) = r.requires_approval {
        let asked = if want { "required" } else { "not required" }.to_string();
        let answer = approval(st, &ask, want, r.approval_default.as_deref());
        out.push(outcome("approval", asked, answer));
    }
    if let Some(want) = r.rate_limit {
        out.push(outcome(
            "rate_limit",
            rate(&want),
            rate_limit(st, &ask, want),
        ));
    }
    out
}

/// `network`: on only where `[requests] network` allows it; off always.
fn network(st: &mut State, ask: &Asker, want: bool) -> Answer {
    let cur = mode_name(st.mode.v).to_string();
    let src = st.mode.o.source.clone();
    if want && st.mode.v != NetMode::Off {
        let why = format!("the policy already allows network ({src})");
        (cur, Decision::Unchanged, why)
    } else if want && st.req_network.v {
        let why = format!("requests.network = true ({})", st.req_network.o.source);
        st.mode = Sourced {
            v: NetMode::On,
            o: ask.origin(&format!("allowed by {why}")),
        };
        ("on".into(), Decision::Granted, why)
    } else if want {
        let why = format!(
            "requests.network = false ({}); an operator can allow it with [requests] network = true or --allow-net",
            st.req_network.o.source
        );
        (cur, Decision::Refused, why)
    } else if st.mode.v == NetMode::Off {
        let why = format!("network is already off ({src})");
        (cur, Decision::Unchanged, why)
    } else if st.mode.o.is_cli() {
        (cur, Decision::Overridden, format!("{src} wins"))
    } else {
        st.mode = Sourced {
            v: NetMode::Off,
            o: ask.origin("a tool may always ask for less"),
        };
        let why = "a tool may always ask for less".to_string();
        ("off".into(), Decision::Granted, why)
    }
}

/// An allow list as shown: `[a.example, b.example]`.
fn shown(l: &[Sourced<HostRule>]) -> String {
    let v: Vec<String> = l.iter().map(|e| e.v.to_string()).collect();
    format!("[{}]", v.join(", "))
}

/// `domains`: the tool asks for `want` hosts only. A domain grant is
/// narrowed to them (never widened); network "on" becomes domains mode
/// with just them.
fn domains(st: &mut State, ask: &Asker, want: &[String]) -> Answer {
    let mut rules = Vec::new();
    for w in want {
        match HostRule::parse(w) {
            Ok(r) => rules.push(r),
            Err(m) => {
                let why = format!("not a host pattern: {m}");
                return (shown(&st.domains.allow), Decision::Refused, why);
            }
        }
    }
    let src = st.mode.o.source.clone();
    if st.mode.o.is_cli() && matches!(st.mode.v, NetMode::On | NetMode::Domains) {
        let granted = match st.mode.v {
            NetMode::On => "on".to_string(),
            _ => shown(&st.domains.allow),
        };
        return (granted, Decision::Overridden, format!("{src} wins"));
    }
    match st.mode.v {
        NetMode::On => {
            let o = ask.origin("a tool may always ask for less than network on");
            st.domains.allow = rules
                .into_iter()
                .map(|v| Sourced { v, o: o.clone() })
                .collect();
            st.mode = Sourced {
                v: NetMode::Domains,
                o,
            };
            let why = format!("the policy allows all network ({src}); narrowed to these hosts");
            (shown(&st.domains.allow), Decision::Granted, why)
        }
        NetMode::Domains => narrow_allow_list(st, ask, &rules, &src),
        NetMode::Off | NetMode::Tcp => {
            let mode = mode_name(st.mode.v);
            let why = format!(
                "network is \"{mode}\" ({src}); a tool's hosts only narrow a grant of network \
                 \"on\" or \"domains\""
            );
            (mode.into(), Decision::Refused, why)
        }
    }
}

/// Domains mode: the allow list keeps only what `rules` also allow.
fn narrow_allow_list(st: &mut State, ask: &Asker, rules: &[HostRule], src: &str) -> Answer {
    let kept = st.domains.policy().narrow(rules);
    let o = ask.origin(&format!("narrowed within the allow list ({src})"));
    st.domains.allow = kept
        .iter()
        .map(|v| Sourced {
            v: v.clone(),
            o: o.clone(),
        })
        .collect();
    let granted = shown(&st.domains.allow);
    if kept.is_empty() {
        let why = "none of them is in the allow list; the call gets no host at all";
        (granted, Decision::Refused, why.into())
    } else if kept.len() == rules.len() && kept.iter().all(|k| rules.contains(k)) {
        (granted, Decision::Granted, "within the allow list".into())
    } else {
        let why = "only what the allow list also allows";
        (granted, Decision::Clamped, why.into())
    }
}

/// `timeout`: anything up to the policy's own or `[requests]
/// max_timeout`, whichever is longer; a longer request is clamped.
fn timeout(st: &mut State, ask: &Asker, t: Duration) -> Answer {
    let cur = st.timeout.v;
    let max = st.max_timeout.v;
    let max_src = format!(
        "requests.max_timeout = {} ({})",
        format_duration(max),
        st.max_timeout.o.source
    );
    if t.is_zero() {
        let why = "a zero timeout is not valid".to_string();
        (format_duration(cur), Decision::Refused, why)
    } else if st.timeout.o.is_cli() {
        let why = format!("{} wins", st.timeout.o.source);
        (format_duration(cur), Decision::Overridden, why)
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
            o: ask.origin(&format!("granted: {why}")),
        };
        (format_duration(t), Decision::Granted, why)
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
                o: ask.origin(&format!("clamped: {why}")),
            };
        }
        (format_duration(new), Decision::Clamped, why)
    }
}

/// `requires_approval`: a tool may always ask for approval, never waive
/// it. `default` says why when the format asked, not the tool's files.
fn approval(st: &mut State, ask: &Asker, want: bool, default: Option<&str>) -> Answer {
    // SECURITY.md: `--yes` is off for tools that asked for approval
    // unless the operator turns it on (`allow_yes` set in any layer).
    if want && st.allow_yes.is_none() {
        st.allow_yes = Some(Sourced {
            v: false,
            o: ask.origin(
                "--yes is off for a tool that asks for approval (set approval.allow_yes to allow it)",
            ),
        });
    }
    let cur = enum_name(&st.approval.v);
    let src = st.approval.o.source.clone();
    if want && st.approval.v == ApprovalMode::Never {
        let always = "a tool may always ask for approval";
        let o = match default {
            Some(why) => Origin::input(
                format!("tool {} requested it ({why}); {always}", ask.tool),
                ask.seq,
            ),
            None => ask.origin(always),
        };
        st.approval = Sourced {
            v: ApprovalMode::Always,
            o,
        };
        ("always".into(), Decision::Granted, always.into())
    } else if want {
        let why = format!("approval is already {cur} ({src})");
        (cur, Decision::Unchanged, why)
    } else if st.approval.v != ApprovalMode::Never {
        let why = format!("a tool cannot waive approval (approval.mode = {cur}, {src})");
        (cur, Decision::Refused, why)
    } else {
        let why = format!("approval is not required ({src})");
        (cur, Decision::Unchanged, why)
    }
}

/// `rate_limit`: granted when it is stricter than the policy's in every
/// stretch of time (or the policy sets none).
fn rate_limit(st: &mut State, ask: &Asker, want: RateLimit) -> Answer {
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
    match &cur {
        _ if want.requests == 0 || want.window.is_zero() => {
            let why = "a rate limit needs at least 1 request and a non-zero window".into();
            (cur_text, Decision::Refused, why)
        }
        Some((c, src)) if at_least_as_strict(c, &want) => {
            let why = format!("the policy's {cur_text} ({src}) is at least as strict");
            (cur_text, Decision::Unchanged, why)
        }
        // Neither is stricter in every stretch of time: keep the policy's,
        // which only the operator may loosen. (The gate also enforces the
        // tool's own limit, so both apply at call time.)
        Some((c, src)) if !at_least_as_strict(&want, c) => {
            let why = format!(
                "it would allow more calls than the policy's {cur_text} ({src}) in some stretch of time; the policy's stays"
            );
            (cur_text, Decision::Refused, why)
        }
        _ => {
            let why = match &cur {
                None => "the policy sets no rate limit".to_string(),
                Some((_, src)) => format!("stricter than the policy's {cur_text} ({src})"),
            };
            let o = ask.origin(&format!("granted: {why}"));
            st.rl_requests = Some(Sourced {
                v: want.requests,
                o: o.clone(),
            });
            st.rl_window = Some(Sourced { v: want.window, o });
            (rate(&want), Decision::Granted, why)
        }
    }
}
