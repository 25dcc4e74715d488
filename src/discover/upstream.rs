//! Upstream MCP servers: what `.mcp.json` and A3S `kind: mcp` files
//! declare. A server is not a tool: its tools are known only once it runs
//! (the gateway, `crate::upstream`), so discovery hands out the
//! servers and their diagnostics.
//!
//! `${VAR}` and `${VAR:-default}` stay as written here: discovery checks
//! their syntax and never reads the operator's environment. The gateway
//! expands them when it starts the server ([`Transport::expand`]), reading
//! only the variables the operator's `env_from_host` allows for that
//! server; everything that shows a server (`upstreams`, prompts, logs)
//! shows the text as written.

use crate::policy::Requests;
use crate::spec::Format;
use serde::Serialize;
use std::path::PathBuf;

/// One declared upstream server.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UpstreamSpec {
    /// The server's name as declared (the key in `mcpServers`, the A3S
    /// `name`): the prefix of its flat tool names.
    pub name: String,
    pub format: Format,
    /// The file that declares it (absolute).
    pub source: PathBuf,
    pub line: Option<usize>,
    pub transport: Transport,
    /// What the declaration asks of the policy (an http server: network).
    /// A request, never a grant: `[upstreams.NAME]` decides.
    pub requests: Requests,
}

/// A declared upstream server that discovery skipped: `toolcage check`
/// reports its diagnostic, `toolcage upstreams` lists it with its state.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SkippedUpstream {
    pub name: String,
    pub format: Format,
    /// The file that declares it (absolute).
    pub source: PathBuf,
    pub line: Option<usize>,
    /// `unsupported`: a transport toolcage does not speak (`"type": "sse"`);
    /// `skipped`: the declaration cannot be used as written (an unset
    /// `${VAR}`, a field of the wrong type).
    pub state: &'static str,
    /// The transport as declared (`stdio`, `http`, `sse`, ...).
    pub transport: String,
    /// What it runs or reaches, as written (variables not expanded).
    pub runs: String,
    /// Why, with the fix: the diagnostic `check` prints.
    pub diagnostic: super::Diagnostic,
}

/// How toolcage speaks to the server.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Transport {
    /// A long-lived child in the sandbox, MCP over its stdin and stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        /// Expanded values, which may hold secrets: serialised redacted.
        #[serde(serialize_with = "redact")]
        env: Vec<(String, String)>,
        /// The working directory, inside the project (`None`: the project).
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP at `url`.
    Http {
        url: String,
        #[serde(serialize_with = "redact")]
        headers: Vec<(String, String)>,
    },
}

impl Transport {
    /// What a person approving a call is shown.
    pub(crate) fn describe(&self) -> String {
        match self {
            Transport::Stdio { command, args, .. } => {
                let mut words = vec![command.clone()];
                words.extend(args.iter().cloned());
                words.join(" ")
            }
            Transport::Http { url, .. } => url.clone(),
        }
    }
}

/// Why a `${...}` could not be expanded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unexpanded {
    /// `${VAR}` without a default, and VAR is not in `env_from_host`.
    NotAllowed(String),
    /// `${VAR}` allowed, without a default, and VAR is unset.
    Unset(String),
    /// Not `${NAME}` or `${NAME:-default}`.
    Syntax(String),
}

/// One field that could not be expanded: its label (`args[1]`,
/// `env.TOKEN`, `url`) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExpandError {
    pub field: String,
    pub why: Unexpanded,
}

/// Check the `${...}` syntax of `s` without reading any variable.
pub(crate) fn check_template(s: &str) -> Result<(), String> {
    expand_env(s, |_| Some(String::new())).map(|_| ())
}

/// Expand `${VAR}` and `${VAR:-default}` with `lookup`; the error names
/// an unset variable that has no default.
pub(crate) fn expand_env(
    s: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(p) = rest.find("${") {
        out.push_str(&rest[..p]);
        let after = &rest[p + 2..];
        let Some(end) = after.find('}') else {
            return Err("unterminated ${".into());
        };
        // `${VAR:-default}`: the default when VAR is unset or empty.
        let (var, default) = match after[..end].split_once(":-") {
            Some((v, d)) => (v, Some(d)),
            None => (&after[..end], None),
        };
        if !super::valid_env_name(var) {
            return Err(format!("invalid variable name '{var}' in ${{...}}"));
        }
        match (
            lookup(var).filter(|v| default.is_none() || !v.is_empty()),
            default,
        ) {
            (Some(v), _) => out.push_str(&v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => return Err(format!("environment variable {var} is not set")),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// `s` with `${VAR}` and `${VAR:-default}` expanded: VAR is read (through
/// `lookup`) only when `allowed` names it; a VAR not allowed gives its
/// default, never the host's value, and without a default is an error.
/// Each host value read is added to `read` as `(VAR, value)`.
pub(crate) fn expand_allowed(
    s: &str,
    allowed: &[String],
    lookup: &dyn Fn(&str) -> Option<String>,
    read: &mut Vec<(String, String)>,
) -> Result<String, Unexpanded> {
    let seen = std::cell::RefCell::new(std::mem::take(read));
    let out = expand_env(s, |var| {
        if !allowed.iter().any(|a| a == var) {
            return None;
        }
        let v = lookup(var)?;
        let mut seen = seen.borrow_mut();
        if !v.is_empty() && !seen.iter().any(|(k, _)| k == var) {
            seen.push((var.to_string(), v.clone()));
        }
        Some(v)
    });
    *read = seen.into_inner();
    match out {
        Ok(x) => Ok(x),
        Err(e) if e.ends_with(" is not set") => {
            let var = e
                .trim_start_matches("environment variable ")
                .trim_end_matches(" is not set")
                .to_string();
            match allowed.contains(&var) {
                true => Err(Unexpanded::Unset(var)),
                false => Err(Unexpanded::NotAllowed(var)),
            }
        }
        Err(e) => Err(Unexpanded::Syntax(e)),
    }
}

impl Transport {
    /// The transport with every `${...}` expanded ([`expand_allowed`]),
    /// and the host values it read (`(VAR, value)`), which nothing may
    /// print.
    pub(crate) fn expand(
        &self,
        allowed: &[String],
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(Transport, Vec<(String, String)>), ExpandError> {
        let mut read = Vec::new();
        let mut one = |field: String, s: &str| {
            expand_allowed(s, allowed, lookup, &mut read).map_err(|why| ExpandError { field, why })
        };
        let mut pairs = |key: &str, p: &[(String, String)]| {
            p.iter()
                .map(|(k, v)| Ok((k.clone(), one(format!("{key}.{k}"), v)?)))
                .collect::<Result<Vec<_>, ExpandError>>()
        };
        let t = match self {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let env = pairs("env", env)?;
                let command = one("command".into(), command)?;
                let args = args
                    .iter()
                    .enumerate()
                    .map(|(i, a)| one(format!("args[{i}]"), a))
                    .collect::<Result<Vec<_>, _>>()?;
                Transport::Stdio {
                    command,
                    args,
                    env,
                    cwd: cwd.clone(),
                }
            }
            Transport::Http { url, headers } => {
                let headers = pairs("headers", headers)?;
                Transport::Http {
                    url: one("url".into(), url)?,
                    headers,
                }
            }
        };
        Ok((t, read))
    }
}

/// What an http server's `url` requests of the policy: network, and its
/// host and port. Err: the message and the fix.
pub(crate) fn url_requests(url: &str) -> Result<Requests, (String, &'static str)> {
    let parsed = url::Url::parse(url).map_err(|e| {
        (
            format!("url '{url}': {e}"),
            "write an absolute http:// or https:// URL",
        )
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err((
            format!("url '{url}' is not http or https"),
            "write an http:// or https:// URL",
        ));
    }
    let mut requests = Requests {
        network: Some(true),
        ..Requests::default()
    };
    if let Some(host) = parsed.host_str() {
        let port = parsed.port_or_known_default().unwrap_or(443);
        requests.domains = Some(vec![format!("{host}:{port}")]);
    }
    Ok(requests)
}

/// A server name a person could take for toolcage itself (`toolcage`,
/// `TOOLCAGE`, `tool-cage`): its elicitation requests would seem to come
/// from toolcage.
pub(crate) fn impersonates_toolcage(name: &str) -> bool {
    let plain: String = name
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    plain == "toolcage"
}

fn redact<S: serde::Serializer>(pairs: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(pairs.len()))?;
    for (k, _) in pairs {
        seq.serialize_element(&(k, "<redacted>"))?;
    }
    seq.end()
}

impl UpstreamSpec {
    pub(crate) fn stdio(&self) -> bool {
        matches!(self.transport, Transport::Stdio { .. })
    }
}
