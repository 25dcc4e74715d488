//! Upstream MCP servers: what `.mcp.json` and A3S `kind: mcp` files
//! declare. A server is not a tool: its tools are known only once it runs
//! (the gateway, `crate::mcp::gateway`), so discovery hands out the
//! servers and their diagnostics.

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
    pub fn describe(&self) -> String {
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

fn redact<S: serde::Serializer>(pairs: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(pairs.len()))?;
    for (k, _) in pairs {
        seq.serialize_element(&(k, "<redacted>"))?;
    }
    seq.end()
}

impl UpstreamSpec {
    pub fn stdio(&self) -> bool {
        matches!(self.transport, Transport::Stdio { .. })
    }
}
