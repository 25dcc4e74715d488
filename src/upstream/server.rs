//! One declared server: its declaration with `${VAR}` expanded as the
//! policy allows ([`Launch`]), its grant, and the grant a call of one of
//! its tools passes the gate with ([`Gateway::tool_grant`]).

use super::Gateway;
use crate::call::Engine;
use crate::discover::UpstreamSpec;
use crate::policy::{Overrides, Resolved, ToolInput, UpstreamSettings};

/// One declared server and what the policy gives it.
pub(crate) struct Server {
    /// As declared: `${VAR}` as written (what every surface shows).
    pub(crate) spec: UpstreamSpec,
    pub(crate) settings: UpstreamSettings,
    /// What is started: the declaration with `${VAR}` expanded as
    /// `env_from_host` allows, or why it cannot be (the server is refused).
    pub(crate) launch: Result<Launch, String>,
    /// Its grant, or why it does not resolve (the server is refused).
    pub(crate) grant: Result<Resolved, String>,
}

/// A server's declaration with its `${VAR}` expanded: never printed.
pub(crate) struct Launch {
    pub(crate) transport: crate::discover::Transport,
    /// What it requests of the policy (an expanded url's host).
    pub(crate) requests: crate::policy::Requests,
    /// The host values read, `(VAR, value)`: toolcage's own messages about
    /// the server show `${VAR}` where a value would appear.
    pub(crate) hidden: Vec<(String, String)>,
}

impl Launch {
    /// `spec` expanded with the host variables `allowed` names.
    fn of(spec: &UpstreamSpec, allowed: &[String]) -> Result<Launch, String> {
        use crate::discover::upstream::Unexpanded;
        let at = match spec.line {
            Some(l) => format!("{}:{l}", spec.source.display()),
            None => spec.source.display().to_string(),
        };
        let name = &spec.name;
        let lookup = |v: &str| std::env::var(v).ok();
        let (transport, hidden) = spec.transport.expand(allowed, &lookup).map_err(|e| {
            let field = &e.field;
            match e.why {
                Unexpanded::NotAllowed(var) => format!(
                    "{at}: {field}: ${{{var}}} would read the operator's environment, which no \
                     policy file allows for this server (fix: if the server should have it, add \
                     env_from_host = [\"{var}\"] to [upstreams.{name}] in your --policy file; \
                     a project's own files cannot allow it)"
                ),
                Unexpanded::Unset(var) => format!(
                    "{at}: {field}: environment variable {var} is not set (fix: set it before \
                     starting toolcage, or write ${{{var}:-default}})"
                ),
                Unexpanded::Syntax(why) => format!("{at}: {field}: {why}"),
            }
        })?;
        let mut requests = spec.requests.clone();
        if let crate::discover::Transport::Http { url, .. } = &transport
            && spec.format == crate::spec::Format::McpJson
            && requests.domains.is_none()
        {
            requests = crate::discover::upstream::url_requests(url)
                .map_err(|(m, fix)| format!("{at}: {} (fix: {fix})", hide(&m, &hidden)))?;
        }
        Ok(Launch {
            transport,
            requests,
            hidden,
        })
    }
}

/// `text` with each host value in `hidden` shown as `${VAR}` (values
/// shorter than 4 bytes are left: they would mangle ordinary text).
pub(crate) fn hide(text: &str, hidden: &[(String, String)]) -> String {
    let mut out = text.to_string();
    for (var, value) in hidden {
        if value.len() >= 4 {
            out = out.replace(value.as_str(), &format!("${{{var}}}"));
        }
    }
    out
}

impl Server {
    /// `spec` with its settings, launch and grant under `engine`'s policy.
    pub(super) fn of(spec: &UpstreamSpec, engine: &Engine) -> Server {
        let settings = engine.stack.upstream_settings(&spec.name);
        let launch = Launch::of(spec, &settings.env_from_host);
        let requests = launch.as_ref().map_or(&spec.requests, |l| &l.requests);
        let grant = engine
            .stack
            .upstream_stack(&spec.name)
            .and_then(|stack| {
                let input = ToolInput {
                    name: &spec.name,
                    requests,
                    extra_read: Vec::new(),
                };
                stack.resolve(&engine.ctx, &Overrides::default(), Some(&input))
            })
            .map_err(|e| e.to_string());
        Server {
            spec: spec.clone(),
            settings,
            launch,
            grant,
        }
    }

    /// What the server requests of the policy, as started.
    pub(crate) fn requests(&self) -> &crate::policy::Requests {
        self.launch
            .as_ref()
            .map_or(&self.spec.requests, |l| &l.requests)
    }
}

pub(super) struct ToolPolicy {
    pub(super) stack: crate::policy::PolicyStack,
    pub(super) ctx: crate::policy::Context,
    pub(super) sections: Vec<String>,
}

/// The grant keys that decide a call at the gate, which an upstream tool's
/// own section may set; the rest of its grant is its server's.
const GATE_KEYS: [&str; 4] = ["approval", "approval.allow_yes", "rate_limit", "concurrent"];

impl Gateway {
    /// The grant a call of `name`, an exposed tool of `server`, passes the
    /// gate with: its server's, with the approval, rate limit and
    /// concurrency of a `[tools."name"]` section where the operator wrote
    /// one (its files and network stay the server's: one process serves
    /// every tool of the server).
    pub(crate) fn tool_grant(&self, server: &Server, name: &str) -> Result<Resolved, String> {
        let mut resolved = server.grant.clone()?;
        let p = &self.tool_policy;
        if !p.sections.iter().any(|s| s == name) {
            return Ok(resolved);
        }
        let input = ToolInput {
            name,
            requests: server.requests(),
            extra_read: Vec::new(),
        };
        let own = p
            .stack
            .upstream_tool_stack(&server.spec.name)
            .and_then(|s| s.resolve(&p.ctx, &Overrides::default(), Some(&input)))
            .map_err(|e| e.to_string())?;
        let g = &mut resolved.grant;
        g.approval = own.grant.approval;
        g.allow_yes = own.grant.allow_yes;
        g.rate_limit = own.grant.rate_limit;
        g.concurrent = own.grant.concurrent;
        resolved
            .provenance
            .retain(|l| !GATE_KEYS.contains(&l.key.as_str()));
        resolved.provenance.extend(
            own.provenance
                .into_iter()
                .filter(|l| GATE_KEYS.contains(&l.key.as_str())),
        );
        Ok(resolved)
    }
}
