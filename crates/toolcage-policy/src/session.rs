//! Settings that apply to a whole session rather than to one tool:
//! `[global_rate_limit]` (all tools together), `[audit]` and `[manage]`. Top level only;
//! later layers win key by key, like every other setting.

use super::canon;
use super::context::Context;
use super::error::PolicyError;
use super::file::{AuditSection, ManageSection};
use super::grant::RateLimit;
use super::origin::{At, Origin};
use super::paths::{Vars, expand};
use super::stack::PolicyStack;
use std::path::PathBuf;
use std::time::Duration;

/// `[audit]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditPolicy {
    /// `path`, expanded and absolute; `None`: the default location.
    pub path: Option<PathBuf>,
    /// Log the arguments' digest only, not the arguments.
    pub redact: bool,
    /// A failed audit write fails the call (default true).
    pub fail_closed: bool,
}

impl AuditPolicy {
    /// `[audit] path = "-"`: records go to standard output as JSON lines
    /// (for a cluster's log pipeline; only `serve --http` accepts it).
    pub const STDOUT: &'static str = "-";

    /// The records go to standard output.
    pub fn to_stdout(&self) -> bool {
        self.path
            .as_deref()
            .is_some_and(|p| p.as_os_str() == Self::STDOUT)
    }
}

impl Default for AuditPolicy {
    fn default() -> Self {
        AuditPolicy {
            path: None,
            redact: false,
            fail_closed: true,
        }
    }
}

/// `[manage]`: the runtime tool management tools of `toolcage serve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ManagePolicy {
    /// Offer clawd's `custom_script` (default false).
    pub custom_script: bool,
    /// Offer OpenCrabs' `tool_manage` (default false).
    pub tool_manage: bool,
    /// Ask the person before every change (default true).
    pub approval: bool,
}

impl Default for ManagePolicy {
    fn default() -> Self {
        ManagePolicy {
            custom_script: false,
            tool_manage: false,
            approval: true,
        }
    }
}

/// The session-wide settings of a policy stack.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionPolicy {
    /// `[global_rate_limit]`: calls of all tools together.
    pub global_rate_limit: Option<RateLimit>,
    pub audit: AuditPolicy,
    pub manage: ManagePolicy,
}

impl AuditPolicy {
    /// A layer's `[audit]`, key by key (`path` relative to the project).
    fn merge(
        &mut self,
        a: &AuditSection,
        vars: &Vars,
        path_origin: impl Fn() -> Origin,
    ) -> Result<(), PolicyError> {
        if let Some(p) = &a.path {
            self.path = Some(if p == AuditPolicy::STDOUT {
                PathBuf::from(AuditPolicy::STDOUT)
            } else {
                expand(p, vars, vars.project).map_err(|m| path_origin().error(m))?
            });
        }
        if let Some(r) = a.redact {
            self.redact = r;
        }
        if let Some(f) = a.fail_closed {
            self.fail_closed = f;
        }
        Ok(())
    }
}

impl ManagePolicy {
    /// A layer's `[manage]`, key by key.
    fn merge(&mut self, m: &ManageSection) {
        if let Some(b) = m.custom_script {
            self.custom_script = b;
        }
        if let Some(b) = m.tool_manage {
            self.tool_manage = b;
        }
        if let Some(b) = m.approval {
            self.approval = b;
        }
    }
}

impl PolicyStack {
    /// The session-wide settings (`[global_rate_limit]`, `[audit]`).
    pub fn session(&self, ctx: &Context) -> Result<SessionPolicy, PolicyError> {
        let project = canon::lenient(&ctx.project);
        let vars = Vars {
            project: &project,
            home: &ctx.home,
            tmp: &ctx.tmp,
            a3s_tools: false,
            write_bases: &[],
        };
        let mut out = SessionPolicy::default();
        let mut requests: Option<u32> = None;
        let mut window: Option<(Duration, Origin)> = None;
        for (seq, l) in self.layers.iter().enumerate() {
            let origin = |section: &str, key: &str| Origin {
                source: l.source.clone(),
                at: At::File {
                    file: l.file.clone(),
                    key: vec![section.to_string(), key.to_string()],
                    index: None,
                },
                seq,
                written: None,
            };
            let (rl, audit, manage) = &l.session;
            out.manage.merge(manage);
            if let Some(c) = rl.requests {
                let o = origin("global_rate_limit", "requests");
                let n = u32::try_from(c.0)
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| o.error("must be a whole number from 1 to 4294967295"))?;
                requests = Some(n);
            }
            if let Some(d) = rl.window {
                let o = origin("global_rate_limit", "window");
                if d.0.is_zero() {
                    return Err(o.error("must be greater than zero"));
                }
                window = Some((d.0, o));
            }
            out.audit.merge(audit, &vars, || origin("audit", "path"))?;
        }
        out.global_rate_limit = match (requests, window) {
            (Some(requests), w) => Some(RateLimit {
                requests,
                window: w.map_or(Duration::from_secs(60), |(d, _)| d),
            }),
            (None, Some((_, o))) => {
                return Err(
                    o.error("a window without global_rate_limit.requests (add requests = N)")
                );
            }
            (None, None) => None,
        };
        Ok(out)
    }
}
