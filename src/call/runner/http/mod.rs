//! OpenCrabs `executor = "http"` tools: toolcage makes the request itself
//! (no process runs), through the same decision as a sandboxed call's
//! proxy ([`crate::broker::proxy::connect`]: decide on the host, resolve,
//! refuse private addresses, connect to the checked address).
//!
//! Which hosts: under network `domains`, the grant's allow list (already
//! narrowed at resolution to the url's host, the tool's own request);
//! under network `on`, the url's host alone; under `off` or `tcp` the call
//! is refused. A redirect (at most 5) is decided again like the first
//! request, so it cannot lead anywhere the policy does not allow. The
//! response body is capped like a tool's stdout; the grant's timeout bounds
//! the whole exchange. The result text is OpenCrabs': the body on a 2xx,
//! else `HTTP <status> <reason>: <body>` as an error.
//!
//! Kept apart from the sandboxed runners so it plugs into the call
//! pipeline's runner trait as one implementation.

pub(crate) mod client;
mod render;
mod tls;

use crate::broker::proxy::{self, OpenError};
use crate::call::{CallError, CallResult};
use crate::discover::{ToolKind, ToolSpec};
use crate::policy::Grant;
use crate::policy::hostname::target;
use crate::policy::{DomainPolicy, DomainRefusal as Refusal, HostRule, Network};
use crate::sandbox::{CancelToken, Captured, Denial, EnforcementReport, Exit, Outcome};
use client::{Failure, Limited, Response};
use render::Target;
use serde_json::{Map, Value};
use std::io::Write;
use std::time::{Duration, Instant};

const MAX_REDIRECTS: usize = 5;

/// Run a call of the http tool `tool` with validated `args` under `grant`.
pub(crate) fn run(
    tool: &ToolSpec,
    args: &Map<String, Value>,
    grant: &Grant,
    cancel: Option<&CancelToken>,
) -> Result<CallResult, CallError> {
    let ToolKind::OpencrabsHttp {
        method,
        url,
        headers,
        ..
    } = &tool.kind
    else {
        return Err(CallError::Unsupported("not an http tool".into()));
    };
    let invalid = |message: String| CallError::InvalidArguments {
        tool: tool.name.clone(),
        message,
    };
    let mut target = render::url(url, args).map_err(invalid)?;
    let headers = render::headers(headers, args).map_err(invalid)?;
    let policy = policy_for(&tool.name, &grant.network, &target)?;
    let start = Instant::now();
    let deadline = start + grant.timeout;
    let mut method = method.clone();
    let mut body = render::body(&method, args);
    let mut denials = Vec::new();
    let mut redirects = 0;
    let finished = loop {
        let response = match request(
            &policy,
            &target,
            &method,
            &headers,
            body.as_deref(),
            grant.output.stdout,
            deadline,
            cancel,
        ) {
            Ok(r) => r,
            Err(Step::Refused(r)) => {
                denials.push(denial(&target, &r));
                let text = format!("toolcage: blocked: {} ({})", target_text(&target), r.reason);
                break Finished::error(text);
            }
            Err(Step::Failed(Failure::Timeout)) => break Finished::exit(Exit::Timeout),
            Err(Step::Failed(Failure::Cancelled)) => break Finished::exit(Exit::Cancelled),
            Err(Step::Failed(Failure::Other(e))) => {
                break Finished::error(format!("HTTP request to {} failed: {e}", target.url));
            }
        };
        let location = response.header("location").map(str::to_string);
        if let (true, Some(loc)) = ((300..400).contains(&response.status), location) {
            if redirects == MAX_REDIRECTS {
                break Finished::error(format!("more than {MAX_REDIRECTS} redirects"));
            }
            redirects += 1;
            let next = target
                .url
                .join(&loc)
                .map_err(|e| e.to_string())
                .and_then(Target::new);
            target = match next {
                Ok(t) => t,
                Err(e) => break Finished::error(format!("redirect to {loc:?}: {e}")),
            };
            // 303, and 301/302 after a POST, continue as GET without a body.
            if response.status == 303 || (method == "POST" && matches!(response.status, 301 | 302))
            {
                method = "GET".into();
                body = None;
            }
            continue;
        }
        break Finished::response(response);
    };
    let is_error = finished.is_error();
    let text = finished.text.clone();
    let outcome = Outcome {
        exit: finished.exit,
        stdout: finished.body,
        stderr: Captured {
            text: String::new(),
            bytes_kept: 0,
            bytes_omitted: 0,
        },
        duration: start.elapsed(),
        enforcement: EnforcementReport::in_process(),
        created_protected: Vec::new(),
        quarantined: Vec::new(),
        restored: Vec::new(),
        removed: Vec::new(),
        unrestorable: Vec::new(),
        unchecked: Vec::new(),
        denials,
    };
    let text = match outcome.exit {
        Exit::Timeout => crate::call::result::timed_out(grant),
        Exit::Cancelled => "cancelled".into(),
        _ => text,
    };
    Ok(CallResult {
        text,
        is_error,
        outcome,
        content: None,
        content_kinds: None,
    })
}

/// One exchange for another part of toolcage that speaks HTTP under a
/// grant (the gateway's Streamable HTTP upstreams): `url` must be one the
/// grant's network reaches (decided before resolving, private addresses
/// refused unless pinned, as for an http tool). No redirects are followed.
#[allow(clippy::too_many_arguments)]
pub(crate) fn exchange(
    who: &str,
    network: &Network,
    url: &str,
    method: &str,
    headers: &[(String, String)],
    body: Option<&[u8]>,
    cap: usize,
    timeout: Duration,
) -> Result<client::Response, String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("url {url}: {e}"))?;
    let target = Target::new(parsed)?;
    let policy = policy_for(who, network, &target).map_err(|e| e.to_string())?;
    let deadline = Instant::now() + timeout;
    match request(&policy, &target, method, headers, body, cap, deadline, None) {
        Ok(r) => Ok(r),
        Err(Step::Refused(r)) => Err(format!(
            "toolcage: blocked: {} ({})",
            target_text(&target),
            r.reason
        )),
        Err(Step::Failed(Failure::Timeout)) => Err(format!("{url}: no answer in time")),
        Err(Step::Failed(Failure::Cancelled)) => Err(format!("{url}: cancelled")),
        Err(Step::Failed(Failure::Other(e))) => Err(format!("{url}: {e}")),
    }
}

/// The hosts this call may reach (see the module comment).
fn policy_for(tool: &str, network: &Network, target: &Target) -> Result<DomainPolicy, CallError> {
    match network {
        Network::Domains(d) => Ok(d.clone()),
        Network::On => {
            let rule = HostRule::parse(&target_text(target))
                .map_err(|e| grant_denied(format!("tool {tool}: url host: {e}")))?;
            Ok(DomainPolicy {
                allow: vec![rule],
                ..Default::default()
            })
        }
        Network::Off | Network::Tcp { .. } => Err(grant_denied(format!(
            "tool {tool} makes HTTP requests to {}, but its grant has no network; an operator \
             can allow that host with [network] mode = \"domains\", allow = [\"{}\"] (and \
             [requests] network = true, or for this tool in [tools.{tool}.network])",
            target_text(target),
            target_text(target)
        ))),
    }
}

fn grant_denied(message: String) -> CallError {
    CallError::Denied(crate::gate::GateDenial::new(
        crate::gate::DenyReason::Grant,
        message,
    ))
}

fn target_text(t: &Target) -> String {
    target(&t.host, Some(t.port))
}

fn denial(t: &Target, r: &Refusal) -> Denial {
    Denial {
        layer: "http",
        op: "http",
        target: target_text(t),
        rule: r.rule.clone(),
        reason: r.reason.clone(),
        fix: (r.kind == crate::policy::RefusalKind::NotAllowed)
            .then(|| "add it to [network] allow (the tool's url host is what it asks for)".into()),
        count: 1,
        inferred: false,
    }
}

enum Step {
    Refused(Refusal),
    Failed(Failure),
}

#[allow(clippy::too_many_arguments)]
fn request(
    policy: &DomainPolicy,
    t: &Target,
    method: &str,
    headers: &[(String, String)],
    body: Option<&[u8]>,
    cap: usize,
    deadline: Instant,
    cancel: Option<&CancelToken>,
) -> Result<Response, Step> {
    let tcp = proxy::connect(policy, &t.host, t.port).map_err(|e| match e {
        OpenError::Refused(r) => Step::Refused(r),
        OpenError::Failed(e) => Step::Failed(Failure::Other(e)),
    })?;
    let failed = |e: std::io::Error| Step::Failed(Failure::Other(e.to_string()));
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    // Sending (and a TLS handshake) may take up to the deadline; reading
    // the answer waits in slices so a cancellation is noticed.
    tcp.set_read_timeout(Some(left)).map_err(failed)?;
    tcp.set_write_timeout(Some(left)).map_err(failed)?;
    let accept = match headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("accept"))
    {
        true => "",
        false => "Accept: */*\r\n",
    };
    let mut head = format!(
        "{method} {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: toolcage\r\n{accept}Connection: close\r\n",
        t.path(),
        t.authority()
    );
    let mut has_type = false;
    for (n, v) in headers {
        let lower = n.to_ascii_lowercase();
        if matches!(
            lower.as_str(),
            "host" | "connection" | "content-length" | "transfer-encoding"
        ) {
            continue; // toolcage frames the request itself
        }
        has_type |= lower == "content-type";
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    if let Some(b) = body {
        if !has_type {
            head.push_str("Content-Type: application/json\r\n");
        }
        head.push_str(&format!("Content-Length: {}\r\n", b.len()));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body.unwrap_or_default());
    let head_only = method == "HEAD";
    let limited = |inner| Limited {
        inner,
        deadline,
        cancel,
    };
    let r = if t.tls {
        let mut stream = tls::connect(&t.host, tcp).map_err(|e| Step::Failed(Failure::Other(e)))?;
        stream
            .write_all(&bytes)
            .and_then(|_| stream.flush())
            .map_err(timeout_or)?;
        let slice = stream.sock.set_read_timeout(Some(client::SLICE));
        slice.map_err(failed)?;
        client::exchange(
            Limited {
                inner: stream,
                deadline,
                cancel,
            },
            head_only,
            cap,
        )
    } else {
        let mut tcp = tcp;
        tcp.write_all(&bytes).map_err(timeout_or)?;
        tcp.set_read_timeout(Some(client::SLICE)).map_err(failed)?;
        client::exchange(limited(tcp), head_only, cap)
    };
    r.map_err(Step::Failed)
}

fn timeout_or(e: std::io::Error) -> Step {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            Step::Failed(Failure::Timeout)
        }
        _ => Step::Failed(Failure::Other(e.to_string())),
    }
}

/// How the call ended, before it becomes a result.
struct Finished {
    exit: Exit,
    text: String,
    body: Captured,
}

impl Finished {
    fn error(text: String) -> Finished {
        Finished {
            exit: Exit::Code(1),
            text,
            body: empty(),
        }
    }

    fn exit(exit: Exit) -> Finished {
        Finished {
            exit,
            text: String::new(),
            body: empty(),
        }
    }

    fn response(r: Response) -> Finished {
        let shown = crate::call::result::shown_stream(&r.body);
        if (200..300).contains(&r.status) {
            Finished {
                exit: Exit::Code(0),
                text: shown,
                body: r.body,
            }
        } else {
            Finished {
                exit: Exit::Code(1),
                text: format!("HTTP {} {}: {shown}", r.status, r.reason),
                body: r.body,
            }
        }
    }

    fn is_error(&self) -> bool {
        self.exit != Exit::Code(0)
    }
}

fn empty() -> Captured {
    Captured {
        text: String::new(),
        bytes_kept: 0,
        bytes_omitted: 0,
    }
}
