//! The resolved permission set for one call: what the sandbox enforces.
//!
//! A `Grant` is produced by [`crate::PolicyStack::resolve`] and consumed by
//! `toolcage_sandbox::run`. It is plain data: no syscalls, no I/O.

use super::domains::{DomainPolicy, HostRule};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Network access for the sandboxed process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Network {
    /// No sockets except AF_UNIX stream/seqpacket pairs; no `connect()` at all.
    Off,
    /// Full network access.
    On,
    /// TCP only, to and from the listed ports (Landlock ABI >= 4).
    Tcp { connect: Vec<u16>, bind: Vec<u16> },
    /// Named hosts only: the call gets its own network namespace with only
    /// loopback, where toolcage's proxy and DNS stub listen; the proxy (in
    /// toolcage, outside the sandbox) decides every connection. Never read
    /// back (the pool's maker, the one reader, prepares no domain mode).
    #[serde(skip_deserializing)]
    Domains(DomainPolicy),
}

impl Network {
    /// One line for people: `off`, `on`, `tcp connect [443] bind []`,
    /// `domains allow [api.github.com] deny [] hosts [allowed.test = 127.0.0.1]`.
    pub fn summary(&self) -> String {
        let list = |v: &[HostRule]| {
            v.iter()
                .map(|r| r.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self {
            Network::Off => "off".to_string(),
            Network::On => "on".to_string(),
            Network::Tcp { connect, bind } => format!("tcp connect {connect:?} bind {bind:?}"),
            Network::Domains(d) => {
                let mut s = format!("domains allow [{}]", list(&d.allow));
                if !d.deny.is_empty() {
                    s.push_str(&format!(" deny [{}]", list(&d.deny)));
                }
                if !d.hosts.is_empty() {
                    let pins: Vec<String> =
                        d.hosts.iter().map(|(n, a)| format!("{n} = {a}")).collect();
                    s.push_str(&format!(" hosts [{}]", pins.join(", ")));
                }
                s
            }
        }
    }
}

/// Resource limits applied with `setrlimit` in the child. `None` leaves the
/// inherited limit. Core dumps are always disabled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// RLIMIT_AS, bytes.
    pub address_space: Option<u64>,
    /// RLIMIT_CPU, seconds.
    pub cpu_seconds: Option<u64>,
    /// RLIMIT_NPROC (not enforced by the kernel for uid 0; see SECURITY.md).
    pub processes: Option<u64>,
    /// RLIMIT_FSIZE, bytes.
    pub file_size: Option<u64>,
    /// RLIMIT_NOFILE.
    pub open_files: Option<u64>,
    /// Bytes of memory the call's private `/tmp` and `/dev/shm` may hold
    /// together: one tmpfs of this size holds both (not an rlimit; files
    /// there are RAM outside `address_space`).
    pub tmp: u64,
}

/// `[limits] tmp` when no layer sets it.
pub(crate) const DEFAULT_TMP: u64 = 2 << 30;
/// Below this the private `/tmp` is too small for ordinary tools.
pub(crate) const LEAST_TMP: u64 = 1 << 20;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            address_space: None,
            cpu_seconds: None,
            processes: None,
            file_size: None,
            open_files: None,
            tmp: DEFAULT_TMP,
        }
    }
}

/// How many bytes of each stream are kept; the rest is drained and counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputCaps {
    pub stdout: usize,
    pub stderr: usize,
}

impl Default for OutputCaps {
    fn default() -> Self {
        OutputCaps {
            stdout: 64 * 1024,
            stderr: 16 * 1024,
        }
    }
}

/// When a person must say yes before a call runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalMode {
    #[default]
    Never,
    Always,
    Once,
    OncePerArgs,
}

/// `requests` calls per `window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateLimit {
    pub requests: u32,
    #[serde(with = "duration_secs")]
    pub window: Duration,
}

/// How strictly missing kernel features are treated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Enforcement {
    /// Refuse when Landlock is not enforced at all; run with a report when
    /// some features are missing.
    #[default]
    Standard,
    /// Refuse on any degradation (profile `ci`).
    Strict,
    /// Run even when Landlock is not enforced (`--allow-degraded`).
    Degraded,
}

/// Whether a call may run without namespaces (where the kernel or a
/// container runtime refuses them), and on what terms.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NamespaceFree {
    /// Never: fail with the reason namespaces are unavailable.
    Refuse,
    /// Only when every part it lacks is compensated by another layer or
    /// named in `accepts`.
    Compensated,
    /// Always, with the report naming what it lacks.
    #[default]
    Allow,
}

/// `[sandbox] namespace_free` and `namespace_free_accepts`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceFreePolicy {
    pub mode: NamespaceFree,
    /// Uncompensated gaps (`metadata`, `proc`, ...) that `Compensated` accepts.
    pub accepts: Vec<String>,
}

/// Everything the sandbox needs to know to run one command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Grant {
    /// The project root: working directory of every call.
    pub project: PathBuf,
    /// Read + execute beneath these paths (directories or files).
    pub read: Vec<PathBuf>,
    /// Full access beneath these paths.
    pub write: Vec<PathBuf>,
    /// Read-only even when inside a write root. Missing paths are allowed.
    pub protected: Vec<PathBuf>,
    /// No access even when inside a read or write root.
    pub denied: Vec<PathBuf>,
    pub network: Network,
    /// Variable names (or `PREFIX*` patterns) copied from toolcage's own environment.
    pub env_allow: Vec<String>,
    /// Variables set explicitly (after the allowlist; they win).
    pub env_set: BTreeMap<String, String>,
    /// Give the call a private, empty, writable `TMPDIR` that is removed afterwards.
    pub private_tmp: bool,
    #[serde(with = "duration_secs")]
    pub timeout: Duration,
    /// Time between SIGTERM and SIGKILL when the timeout fires.
    #[serde(with = "duration_secs")]
    pub kill_grace: Duration,
    pub limits: Limits,
    pub output: OutputCaps,
    pub enforcement: Enforcement,
    /// Running where namespaces are unavailable.
    pub namespace_free: NamespaceFreePolicy,
    pub approval: ApprovalMode,
    /// Pre-approval (`toolcage call --yes`) is honoured for this tool.
    pub allow_yes: bool,
    pub rate_limit: Option<RateLimit>,
    /// At most this many calls of the tool at once (`None`: no cap).
    pub concurrent: Option<u32>,
    /// The operator's homes (`Context::homes`): what a fix shown to an
    /// agent never names, with the secrets in them.
    #[serde(skip)]
    pub homes: Vec<PathBuf>,
    /// Where any call of the session can create symlinks besides this
    /// grant's own write roots and project: every write root of every
    /// grant, canonical (what resolution refused links in). A root is
    /// opened at use time without following a link inside one: a call of
    /// another tool may plant one between resolution and use (while this
    /// call waits for approval). See [`Grant::link_bases`].
    #[serde(skip)]
    pub session_writes: Vec<PathBuf>,
}

impl Grant {
    /// A grant with no filesystem access at all, network off, nothing in the
    /// environment: the starting point that policies add to.
    pub fn closed(project: PathBuf) -> Self {
        Grant {
            project,
            read: Vec::new(),
            write: Vec::new(),
            protected: Vec::new(),
            denied: Vec::new(),
            network: Network::Off,
            env_allow: Vec::new(),
            env_set: BTreeMap::new(),
            private_tmp: true,
            timeout: Duration::from_secs(30),
            kill_grace: Duration::from_millis(500),
            limits: Limits::default(),
            output: OutputCaps::default(),
            enforcement: Enforcement::Standard,
            namespace_free: NamespaceFreePolicy::default(),
            approval: ApprovalMode::Never,
            allow_yes: true,
            rate_limit: None,
            concurrent: None,
            homes: Vec::new(),
            session_writes: Vec::new(),
        }
    }

    /// Where a root must not go through a symlink when it is opened: the
    /// grant's write roots, its project and the session's write roots.
    pub fn link_bases(&self) -> Vec<PathBuf> {
        let mut bases: Vec<PathBuf> = self
            .write
            .iter()
            .chain(std::iter::once(&self.project))
            .cloned()
            .collect();
        for b in &self.session_writes {
            if !bases.contains(b) {
                bases.push(b.clone());
            }
        }
        bases
    }

    /// Whether the operator's variable `name` is passed through (a name or
    /// `PREFIX*` pattern of the allowlist matches it).
    pub fn passes(&self, name: &str) -> bool {
        self.env_allow.iter().any(|p| match p.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == p,
        })
    }

    /// True when the grant lets the call change nothing outside its private
    /// tmp. `/dev/null` does not count: every profile grants it.
    pub fn is_read_only(&self) -> bool {
        self.write.iter().all(|p| p.as_os_str() == "/dev/null")
    }
}

mod duration_secs {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let secs = f64::deserialize(d)?;
        Duration::try_from_secs_f64(secs).map_err(serde::de::Error::custom)
    }
}
