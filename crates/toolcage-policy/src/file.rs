//! The policy file format (TOML) and its parser.
//!
//! Every key is optional; a layer only changes what it names. Layers are
//! applied in order: the `default` profile, `--profile NAME`, `--policy FILE`,
//! CLI flags (later wins). Unknown keys are errors, reported as
//! `policy FILE:LINE: KEY: MESSAGE`.
//!
//! ```toml
//! with = ["rust"]              # toolchain presets: rust, node, python (top
//!                              # level, before any [section]; added to earlier layers' presets)
//! allow_home_project = false   # top level: home or an ancestor of it may be the
//!                              # project (never `/`); only from a --policy file
//!                              # outside that directory
//!
//! [fs]
//! read = ["/usr", "/bin"]      # read + execute roots (replaces earlier layers)
//! write = ["{project}"]        # full-access roots (replaces)
//! protected = ["{project}/.git"] # read-only even inside a write root (replaces)
//! denied = []                  # no access even inside a root (replaces)
//! add_read = [] ; add_write = [] ; add_protected = [] ; add_denied = []  # append
//! private_tmp = true           # a private, empty TMPDIR per call
//! allow_secrets = ["~/.npmrc"] # home secrets calls may read (each named as
//!                              # listed in policies/default.toml); only from
//!                              # a --policy file outside the project
//!
//! [network]
//! mode = "off"                 # off | on | tcp | domains
//! connect = [443]              # TCP ports, mode "tcp" only (1-65535)
//! bind = []                    # TCP ports, mode "tcp" only
//! allow = ["api.github.com", "*.pypi.org", "registry.npmjs.org:443"]
//!                              # mode "domains": host patterns (replaces)
//! deny = []                    # checked first (replaces)
//! add_allow = [] ; add_deny = []  # append
//! hosts = { "allowed.test" = "127.0.0.1" }  # pins, merged key by key
//!
//! [env]
//! allow = ["PATH", "LC_*"]     # names or PREFIX* patterns passed through (replaces)
//! add_allow = []               # append
//! set = { FOO = "bar" }        # explicit values; merged key by key, they win
//!
//! [limits]                     # durations: "30s" "500ms" "5m" "1h" or seconds
//! timeout = "30s"              # sizes: "64KiB" "4GiB" "1MB" or bytes
//! kill_grace = "500ms"
//! address_space = "16GiB"       # rlimits accept "unlimited" (inherit)
//! cpu = "300s"
//! processes = 512
//! file_size = "4GiB"
//! open_files = 1024
//! tmp = "2GiB"                 # RAM for the private /tmp and /dev/shm together
//! stdout = "64KiB"             # output caps
//! stderr = "16KiB"
//!
//! [sandbox]
//! enforcement = "standard"     # standard | strict | degraded
//! namespace_free = "allow"      # refuse | compensated | allow (no user namespaces)
//! namespace_free_accepts = []   # uncompensated gaps "compensated" accepts
//!
//! [requests]                   # what a tool's own files may ask for
//! network = false              # honour a tool asking for network
//! max_timeout = "300s"         # a tool may ask for a timeout up to this
//!
//! [approval]
//! mode = "never"               # never | always | once | once-per-args
//! allow_yes = true             # honour `toolcage call --yes` (pre-approval);
//!                              # default: false for "always", true otherwise
//!
//! [rate_limit]                 # per tool: each tool has its own counter
//! requests = 10                # calls per window (window defaults to 1m)
//! window = "1m"
//!
//! [limits] concurrent = 4      # per tool: calls of one tool running at once
//!
//! [global_rate_limit]          # top level only: all tools together
//! requests = 100
//! window = "1m"
//!
//! [audit]                      # top level only
//! path = "{home}/audit.jsonl"  # default: $XDG_STATE_HOME/toolcage/<project-hash>/audit.jsonl;
//!                              # refused inside a write root of the grant;
//!                              # "-": JSON lines on stdout (serve --http only)
//! redact = false               # true: log the arguments' digest, not the arguments
//! fail_closed = true           # a failed audit write fails the call
//!
//! [manage]                     # top level only: runtime tool management
//! custom_script = false        # offer clawd's custom_script tool (serve)
//! tool_manage = false          # offer OpenCrabs' tool_manage tool (serve)
//! approval = true              # every change is asked of the person first
//!
//! [store]                      # top level only; only from a --policy file
//!                              # outside the project (as --store)
//! url = "redis://redis:6379/0" # rate limits and upstream pins in Redis,
//!                              # shared by every replica; no password here
//! password_file = "/run/secrets/redis"  # or password_env = "REDIS_PASSWORD"
//! prefix = "team-a"            # keys are toolcage:PREFIX:...; default: a
//!                              # digest of the canonical project path
//!
//! [tools.NAME]                 # per-tool overrides: any section above,
//! limits = { timeout = "2m" }  # e.g. [tools.NAME.limits]; no nested tools
//! ```
//!
//! Paths may use `{project}`, `{home}` and `{tmp}`; relative paths are
//! relative to the project.

use super::grant::{ApprovalMode, Enforcement, NamespaceFree};
use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;
use toolcage_text::units::{parse_duration, parse_size};

/// A policy file as written: every key optional.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PolicyFile {
    // The fields of `Body`, repeated: serde's `flatten` cannot be combined
    // with `deny_unknown_fields` and loses the spans our messages need.
    #[serde(default)]
    with: Option<Vec<String>>,
    #[serde(default)]
    fs: FsSection,
    #[serde(default)]
    network: NetworkSection,
    #[serde(default)]
    env: EnvSection,
    #[serde(default)]
    limits: LimitsSection,
    #[serde(default)]
    sandbox: SandboxSection,
    #[serde(default)]
    requests: RequestsSection,
    #[serde(default)]
    approval: ApprovalSection,
    #[serde(default)]
    rate_limit: RateLimitSection,
    /// All tools together (top level only).
    #[serde(default)]
    pub global_rate_limit: RateLimitSection,
    /// The audit log (top level only).
    #[serde(default)]
    pub audit: AuditSection,
    /// Runtime tool management (top level only).
    #[serde(default)]
    pub manage: ManageSection,
    /// The shared store (top level only; only from a `--policy` file
    /// outside the project).
    #[serde(default)]
    pub store: Option<StoreSection>,
    /// Per-tool overrides, by tool name.
    #[serde(default)]
    pub tools: BTreeMap<String, Body>,
    /// Upstream MCP servers' grants and gateway settings, by server name.
    #[serde(default)]
    pub upstreams: BTreeMap<String, UpstreamBody>,
    /// Home, or a directory holding it, may be the project (top level
    /// only; only from a `--policy` file outside that directory).
    #[serde(default)]
    pub allow_home_project: Option<bool>,
}

impl PolicyFile {
    /// Split into the top-level body and the per-tool bodies (the top-level
    /// only sections are taken first with [`PolicyFile::session_parts`]).
    pub(crate) fn into_parts(
        self,
    ) -> (Body, BTreeMap<String, Body>, BTreeMap<String, UpstreamBody>) {
        let body = Body {
            with: self.with,
            fs: self.fs,
            network: self.network,
            env: self.env,
            limits: self.limits,
            sandbox: self.sandbox,
            requests: self.requests,
            approval: self.approval,
            rate_limit: self.rate_limit,
        };
        (body, self.tools, self.upstreams)
    }

    /// The sections that apply to a whole session, not to one tool.
    pub(crate) fn session_parts(&self) -> SessionParts {
        (
            self.global_rate_limit.clone(),
            self.audit.clone(),
            self.manage.clone(),
        )
    }
}

/// The sections that can appear at the top level and under `[tools.NAME]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Body {
    /// Toolchain presets (`presets.rs`), added to those of earlier layers.
    #[serde(default)]
    pub with: Option<Vec<String>>,
    #[serde(default)]
    pub fs: FsSection,
    #[serde(default)]
    pub network: NetworkSection,
    #[serde(default)]
    pub env: EnvSection,
    #[serde(default)]
    pub limits: LimitsSection,
    #[serde(default)]
    pub sandbox: SandboxSection,
    #[serde(default)]
    pub requests: RequestsSection,
    #[serde(default)]
    pub approval: ApprovalSection,
    #[serde(default)]
    pub rate_limit: RateLimitSection,
}

/// The names `Body` accepts, for "unknown key" messages.
pub(crate) const SECTIONS: &[&str] = &[
    "with",
    "fs",
    "network",
    "env",
    "limits",
    "sandbox",
    "requests",
    "approval",
    "rate_limit",
    "global_rate_limit",
    "audit",
    "manage",
    "store",
    "tools",
    "upstreams",
];

/// How the gateway offers an upstream server's tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Expose {
    /// Each tool as `server__tool`.
    #[default]
    Flat,
    /// Behind Octo's `find_tools` and `call_mcp_tool`.
    Deferred,
}

/// What the gateway does with an upstream server's resources
/// (`resources = "allow" | "approve" | "deny"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Resources {
    /// Listed, and read through the gate (rate limit, audit, size cap).
    #[default]
    Allow,
    /// Listed; each read asks a person first.
    Approve,
    /// Not listed; a read is refused.
    Deny,
}

/// `[upstreams.NAME]`: the keys of a tool section (the server's grant),
/// plus the gateway's own.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpstreamBody {
    /// The shipped profile the server's grant starts from (`untrusted`
    /// when not given).
    #[serde(default)]
    pub profile: Option<String>,
    #[serde(default)]
    pub expose: Option<Expose>,
    /// What its resources may do (`allow` when not given).
    #[serde(default)]
    pub resources: Option<Resources>,
    /// `false`: its tools, prompts and resources under their own names,
    /// not `server__name`.
    #[serde(default)]
    pub prefix: Option<bool>,
    /// Stop the server after this long without a call (`0`: never).
    #[serde(default)]
    pub idle_timeout: Option<Dur>,
    /// `false`: the server is not started and its tools are not offered.
    #[serde(default)]
    pub enabled: Option<bool>,
    /// The operator's environment variables that `${VAR}` in the server's
    /// declaration may read. Any other `${VAR}` is an error for the server
    /// (`${VAR:-default}` takes the default): a project's file must not
    /// copy the operator's secrets into a server it wrote.
    #[serde(default)]
    pub env_from_host: Option<Vec<String>>,
    #[serde(default)]
    pub with: Option<Vec<String>>,
    #[serde(default)]
    pub fs: FsSection,
    #[serde(default)]
    pub network: NetworkSection,
    #[serde(default)]
    pub env: EnvSection,
    #[serde(default)]
    pub limits: LimitsSection,
    #[serde(default)]
    pub sandbox: SandboxSection,
    #[serde(default)]
    pub requests: RequestsSection,
    #[serde(default)]
    pub approval: ApprovalSection,
    #[serde(default)]
    pub rate_limit: RateLimitSection,
}

impl UpstreamBody {
    /// The grant's part.
    pub(crate) fn body(&self) -> Body {
        Body {
            with: self.with.clone(),
            fs: self.fs.clone(),
            network: self.network.clone(),
            env: self.env.clone(),
            limits: self.limits.clone(),
            sandbox: self.sandbox.clone(),
            requests: self.requests.clone(),
            approval: self.approval.clone(),
            rate_limit: self.rate_limit.clone(),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FsSection {
    pub read: Option<Vec<String>>,
    pub write: Option<Vec<String>>,
    pub protected: Option<Vec<String>>,
    pub denied: Option<Vec<String>>,
    pub add_read: Option<Vec<String>>,
    pub add_write: Option<Vec<String>>,
    pub add_protected: Option<Vec<String>>,
    pub add_denied: Option<Vec<String>>,
    pub private_tmp: Option<bool>,
    /// Home secrets this layer lets calls read (`~/.npmrc`); only from a
    /// `--policy` file outside the project.
    pub allow_secrets: Option<Vec<String>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum NetMode {
    Off,
    On,
    Tcp,
    Domains,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NetworkSection {
    pub mode: Option<NetMode>,
    /// Kept wide so out-of-range ports get our own message with a line.
    pub connect: Option<Vec<i64>>,
    pub bind: Option<Vec<i64>>,
    /// Host patterns, mode "domains" only.
    pub allow: Option<Vec<String>>,
    pub deny: Option<Vec<String>>,
    pub add_allow: Option<Vec<String>>,
    pub add_deny: Option<Vec<String>>,
    /// `[network.hosts]`: name = address pins.
    pub hosts: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EnvSection {
    pub allow: Option<Vec<String>>,
    pub add_allow: Option<Vec<String>>,
    pub set: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LimitsSection {
    pub timeout: Option<Dur>,
    pub kill_grace: Option<Dur>,
    pub address_space: Option<Limit<Bytes>>,
    pub cpu: Option<Limit<Dur>>,
    pub processes: Option<Limit<Count>>,
    pub file_size: Option<Limit<Bytes>>,
    pub open_files: Option<Limit<Count>>,
    /// The private `/tmp` and `/dev/shm` together (one tmpfs).
    pub tmp: Option<Bytes>,
    pub stdout: Option<Bytes>,
    pub stderr: Option<Bytes>,
    /// Calls of one tool running at the same time.
    pub concurrent: Option<Count>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SandboxSection {
    pub enforcement: Option<Enforcement>,
    pub namespace_free: Option<NamespaceFree>,
    pub namespace_free_accepts: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RequestsSection {
    pub network: Option<bool>,
    pub max_timeout: Option<Dur>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ApprovalSection {
    pub mode: Option<ApprovalMode>,
    /// Honour pre-approval (`toolcage call --yes`).
    pub allow_yes: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AuditSection {
    pub path: Option<String>,
    pub redact: Option<bool>,
    pub fail_closed: Option<bool>,
}

/// `[manage]`: the management tools `serve` offers (off by default).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ManageSection {
    pub custom_script: Option<bool>,
    pub tool_manage: Option<bool>,
    /// `false`: changes are written without asking anyone.
    pub approval: Option<bool>,
}

/// `[store]`: where rate limits and pins are shared (`--store`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreSection {
    /// `redis://HOST:PORT[/DB]` or `rediss://…`.
    pub url: Option<String>,
    /// An absolute path to a file holding the password.
    pub password_file: Option<String>,
    /// The environment variable holding the password.
    pub password_env: Option<String>,
    /// The namespace of every key (`--store-prefix`).
    pub prefix: Option<String>,
}

/// The top-level-only sections of one layer.
pub(crate) type SessionParts = (RateLimitSection, AuditSection, ManageSection);

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RateLimitSection {
    pub requests: Option<Count>,
    pub window: Option<Dur>,
}

/// A value written as a string with a unit or as a bare integer.
pub(crate) trait Unit: Sized {
    fn from_str(s: &str) -> Result<Self, String>;
    fn from_int(n: i64) -> Result<Self, String>;
    fn expecting() -> &'static str;
}

/// A duration (`"30s"` or seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Dur(pub Duration);
/// A size in bytes (`"64KiB"` or bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bytes(pub u64);
/// A plain count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Count(pub u64);
/// An rlimit: a value or `"unlimited"` (leave the inherited limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Limit<T> {
    Unlimited,
    Set(T),
}

fn non_negative(n: i64, what: &str) -> Result<u64, String> {
    u64::try_from(n).map_err(|_| format!("{what} must not be negative, got {n}"))
}

impl Unit for Dur {
    fn from_str(s: &str) -> Result<Self, String> {
        parse_duration(s).map(Dur)
    }
    fn from_int(n: i64) -> Result<Self, String> {
        non_negative(n, "a duration").map(|s| Dur(Duration::from_secs(s)))
    }
    fn expecting() -> &'static str {
        "a duration such as \"30s\""
    }
}

impl Unit for Bytes {
    fn from_str(s: &str) -> Result<Self, String> {
        parse_size(s).map(Bytes)
    }
    fn from_int(n: i64) -> Result<Self, String> {
        non_negative(n, "a size").map(Bytes)
    }
    fn expecting() -> &'static str {
        "a size such as \"64KiB\""
    }
}

impl Unit for Count {
    fn from_str(s: &str) -> Result<Self, String> {
        s.trim()
            .parse()
            .map(Count)
            .map_err(|_| format!("invalid number \"{s}\" (use a whole number such as 512)"))
    }
    fn from_int(n: i64) -> Result<Self, String> {
        non_negative(n, "a count").map(Count)
    }
    fn expecting() -> &'static str {
        "a whole number"
    }
}

impl<T: Unit> Unit for Limit<T> {
    fn from_str(s: &str) -> Result<Self, String> {
        if s.trim().eq_ignore_ascii_case("unlimited") {
            Ok(Limit::Unlimited)
        } else {
            T::from_str(s).map(Limit::Set)
        }
    }
    fn from_int(n: i64) -> Result<Self, String> {
        T::from_int(n).map(Limit::Set)
    }
    fn expecting() -> &'static str {
        T::expecting()
    }
}

struct UnitVisitor<T>(std::marker::PhantomData<T>);

impl<T: Unit> Visitor<'_> for UnitVisitor<T> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(T::expecting())
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        T::from_str(v).map_err(E::custom)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        T::from_int(v).map_err(E::custom)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        T::from_int(i64::try_from(v).unwrap_or(i64::MAX)).map_err(E::custom)
    }
}

macro_rules! unit_deserialize {
    ($($t:ty),*) => {$(
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_any(UnitVisitor::<$t>(std::marker::PhantomData))
            }
        }
    )*};
}
unit_deserialize!(Dur, Bytes, Count, Limit<Bytes>, Limit<Dur>, Limit<Count>);
