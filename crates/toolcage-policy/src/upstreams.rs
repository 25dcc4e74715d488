//! The grants of upstream MCP servers (`[upstreams.NAME]`).
//!
//! A server's grant does not start from the operator's general policy:
//! it starts from a shipped profile (`untrusted` unless the section names
//! another: project read-only, private tmp, no network), then each
//! operator file's `[upstreams.NAME]` section applies in order. The
//! server's own declaration (`.mcp.json`, `kind: mcp`) only requests,
//! bounded by the sections' `[requests]`, as a tool's files do.

use super::error::PolicyError;
use super::file::{Expose, Resources};
use super::stack::{FileLayer, PolicyStack, shipped, write_names};
use std::collections::BTreeMap;
use std::time::Duration;

/// The profile a server's grant starts from when its section names none.
pub(crate) const DEFAULT_UPSTREAM_PROFILE: &str = "untrusted";

/// How long a server may sit unused before it is stopped, by default.
pub(crate) const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// The gateway's settings for one server, later files winning.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct UpstreamSettings {
    pub profile: String,
    pub expose: Expose,
    /// `resources`: the server's resources are listed and read (`allow`),
    /// each read asked about (`approve`), or neither (`deny`).
    pub resources: Resources,
    /// `prefix`: names as `server__name` (`true`, the default) or as the
    /// server gives them (`false`, for hosts that front one server).
    pub prefix: bool,
    /// `None`: never stopped for being idle.
    pub idle_timeout: Option<Duration>,
    pub enabled: bool,
    /// `env_from_host`: the host variables `${VAR}` may read for this
    /// server, from every layer's section (only the operator's layers exist:
    /// shipped profiles and `--policy FILE`; nothing in the project is
    /// read as policy).
    pub env_from_host: Vec<String>,
}

impl PolicyStack {
    /// The server names that have an `[upstreams.NAME]` section in any layer.
    pub(crate) fn upstream_sections(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .layers
            .iter()
            .flat_map(|l| l.upstreams.keys().cloned())
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// The gateway settings of server `name`.
    pub fn upstream_settings(&self, name: &str) -> UpstreamSettings {
        let mut s = UpstreamSettings {
            profile: DEFAULT_UPSTREAM_PROFILE.into(),
            expose: Expose::Flat,
            resources: Resources::Allow,
            prefix: true,
            idle_timeout: Some(DEFAULT_IDLE_TIMEOUT),
            enabled: true,
            env_from_host: Vec::new(),
        };
        for u in self.layers.iter().filter_map(|l| l.upstreams.get(name)) {
            if let Some(p) = &u.profile {
                s.profile = p.clone();
            }
            if let Some(e) = u.expose {
                s.expose = e;
            }
            if let Some(r) = u.resources {
                s.resources = r;
            }
            if let Some(p) = u.prefix {
                s.prefix = p;
            }
            if let Some(d) = u.idle_timeout {
                s.idle_timeout = (!d.0.is_zero()).then_some(d.0);
            }
            if let Some(e) = u.enabled {
                s.enabled = e;
            }
            for v in u.env_from_host.iter().flatten() {
                if !s.env_from_host.contains(v) {
                    s.env_from_host.push(v.clone());
                }
            }
        }
        s
    }

    /// Every `env_from_host` entry must be a variable name: a typo is an
    /// error at load, not a variable silently never allowed.
    pub(super) fn check_env_from_host(&self) -> Result<(), PolicyError> {
        for l in &self.layers {
            for (name, u) in &l.upstreams {
                for (i, v) in u.env_from_host.iter().flatten().enumerate() {
                    if valid_var(v) {
                        continue;
                    }
                    let key = ["upstreams", name.as_str(), "env_from_host"].map(String::from);
                    return Err(PolicyError::File {
                        file: l.file.label.clone(),
                        line: l.file.line_of(&key, Some(i)),
                        key: key.join("."),
                        message: format!(
                            "'{v}' is not an environment variable name (letters, digits and \
                             '_', not starting with a digit; write the name, not ${{NAME}})"
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    /// The layers server `name`'s grant is resolved from: `default`, its
    /// profile, then every file's `[upstreams.NAME]` section as that
    /// file's body. Resolve it with the server's requests as the tool's.
    pub fn upstream_stack(&self, name: &str) -> Result<PolicyStack, PolicyError> {
        self.upstream_stack_with(name, false)
    }

    /// [`PolicyStack::upstream_stack`] with each file's `[tools.NAME]`
    /// sections kept: resolved with an exposed upstream tool's name
    /// (`server__tool`), it gives that tool's gate (approval, rate limit,
    /// concurrency) on top of its server's. Its files and network are the
    /// server's: one process serves every tool of the server.
    pub fn upstream_tool_stack(&self, server: &str) -> Result<PolicyStack, PolicyError> {
        self.upstream_stack_with(server, true)
    }

    fn upstream_stack_with(&self, name: &str, tools: bool) -> Result<PolicyStack, PolicyError> {
        let settings = self.upstream_settings(name);
        let mut layers = vec![shipped("default")?];
        if settings.profile != "default" {
            layers.push(shipped(&settings.profile)?);
        }
        for l in &self.layers {
            let u = l.upstreams.get(name);
            let with_tools = tools && !l.tools.is_empty();
            if u.is_none() && !with_tools {
                continue;
            }
            layers.push(FileLayer {
                source: format!("{} [upstreams.{name}]", l.source),
                file: l.file.clone(),
                shipped: l.shipped,
                path: l.path.clone(),
                body: u.map(|u| u.body()).unwrap_or_default(),
                prefix: vec!["upstreams".into(), name.into()],
                tools: if tools {
                    l.tools.clone()
                } else {
                    BTreeMap::new()
                },
                upstreams: BTreeMap::new(),
                session: Default::default(),
                allow_home_project: None,
                store: None,
            });
        }
        let mut writes = self.writes.clone();
        writes.extend(write_names(&layers));
        Ok(PolicyStack { layers, writes })
    }
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
fn valid_var(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}
