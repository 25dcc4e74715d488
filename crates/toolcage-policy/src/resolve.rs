//! Resolving the policy layers into a [`Grant`] for one call: the top of
//! the crate, where every step below meets.
//!
//! Order, later wins: the `default` profile, `--profile NAME`, `--policy
//! FILE`, the CLI flags. For a named tool, each file's `[tools.NAME]` section
//! applies right after that file (so a per-tool setting beats the same file's
//! general one, and CLI flags still beat every file). Then the tool's own
//! requests apply, bounded by the operator's `[requests]` section.

use super::canon;
use super::context::Context;
use super::error::PolicyError;
use super::finish::Provenance;
use super::grant::Grant;
use super::origin::Layer;
use super::overrides::Overrides;
use super::paths::{Vars, expand, within};
use super::requests::{self, RequestOutcome, Requests};
use super::search_path::{self, DroppedDir};
use super::stack::{PolicyStack, Sources};
use super::state::State;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The tool a grant is resolved for.
#[derive(Debug, Clone)]
pub struct ToolInput<'a> {
    pub name: &'a str,
    /// What the tool's own files ask for.
    pub requests: &'a Requests,
    /// The tool's own source directories: read roots (must exist; relative to the cwd).
    pub extra_read: Vec<PathBuf>,
}

/// A resolved grant and how it came about.
#[derive(Debug, Clone, Serialize)]
pub struct Resolved {
    /// The tool it was resolved for; `None` for `exec` and the defaults.
    pub tool: Option<String>,
    pub grant: Grant,
    /// One entry per shown line (one per path, per env name), in display order.
    pub provenance: Vec<Provenance>,
    /// What the tool asked for and what it got.
    pub requested: Vec<RequestOutcome>,
}

impl Resolved {
    /// Directories of the operator's PATH that the call's PATH leaves out
    /// (the grant cannot read them), with the flag that would keep each.
    /// Computed on demand: only `policy` and the `--json` results show it.
    pub fn path_dropped(&self, ctx: &Context) -> Vec<DroppedDir> {
        search_path::dropped(&self.grant, &ctx.operator())
    }
}

/// Parse the layers named by `sources` and check that they resolve (for the
/// defaults and for every `[tools.NAME]` section), so errors surface here.
pub fn load(sources: &Sources, ctx: &Context) -> Result<PolicyStack, PolicyError> {
    load_checked(sources, ctx).map(|(stack, _)| stack)
}

/// [`load`], then the grant for `cli` without a tool (`exec`). When `cli`
/// changes nothing, that is the resolution `load` checked: it is not done
/// twice.
pub fn load_and_resolve(
    sources: &Sources,
    ctx: &Context,
    cli: &Overrides,
) -> Result<(PolicyStack, Resolved), PolicyError> {
    let (stack, defaults) = load_checked(sources, ctx)?;
    let resolved = if *cli == Overrides::default() {
        defaults
    } else {
        stack.resolve(ctx, cli, None)?
    };
    Ok((stack, resolved))
}

/// [`load`], with the resolution of the defaults.
fn load_checked(sources: &Sources, ctx: &Context) -> Result<(PolicyStack, Resolved), PolicyError> {
    let stack = PolicyStack::read(sources, &ctx.cwd)?;
    stack.check_env_from_host()?;
    let defaults = stack.resolve(ctx, &Overrides::default(), None)?;
    stack.session(ctx)?;
    let none = Requests::default();
    for name in stack.tool_sections() {
        let tool = ToolInput {
            name: &name,
            requests: &none,
            extra_read: Vec::new(),
        };
        stack.resolve(ctx, &Overrides::default(), Some(&tool))?;
    }
    for name in stack.upstream_sections() {
        let tool = ToolInput {
            name: &name,
            requests: &none,
            extra_read: Vec::new(),
        };
        stack
            .upstream_stack(&name)?
            .resolve(ctx, &Overrides::default(), Some(&tool))?;
    }
    Ok((stack, defaults))
}

impl PolicyStack {
    /// The grant for one call: the layers, the CLI flags, then the tool's
    /// requests.
    pub fn resolve(
        &self,
        ctx: &Context,
        cli: &Overrides,
        tool: Option<&ToolInput>,
    ) -> Result<Resolved, PolicyError> {
        // Each path component is looked at once per resolution.
        canon::memo(|| self.resolve_here(ctx, cli, tool))
    }

    /// Where a call may create symlinks: the project (a write root unless a
    /// profile says otherwise, and the other tools' even then) and every
    /// write root of the session, canonical. A write root that itself goes
    /// through a link in an earlier base is left out: resolving it is
    /// refused.
    fn write_bases(&self, vars: &Vars, cli: &Overrides, cwd: &Path) -> Vec<PathBuf> {
        let mut bases = vec![vars.project.to_path_buf()];
        // Policy paths are relative to the project, flags to the cwd.
        let named = self
            .writes
            .iter()
            .filter_map(|raw| expand(raw, vars, vars.project).ok());
        let flags = cli
            .write
            .iter()
            .filter_map(|p| expand(p.to_str()?, vars, cwd).ok());
        for p in named.chain(flags) {
            let planted = canon::links(&p)
                .iter()
                .any(|(link, _)| bases.iter().any(|b| within(link, b)));
            if !planted {
                bases.push(canon::lenient(&p));
            }
        }
        bases
    }

    fn resolve_here(
        &self,
        ctx: &Context,
        cli: &Overrides,
        tool: Option<&ToolInput>,
    ) -> Result<Resolved, PolicyError> {
        let project = canon::lenient(&ctx.project);
        let mut vars = Vars {
            project: &project,
            home: &ctx.home,
            tmp: &ctx.tmp,
            a3s_tools: (ctx.holds_a3s_tools)(&project),
            write_bases: &[],
        };
        let write_bases = self.write_bases(&vars, cli, &ctx.cwd);
        vars.write_bases = &write_bases;
        let mut st = State::closed();
        st.homes = ctx.homes();
        let mut seq = self.apply_layers(&mut st, &vars, tool.map(|t| t.name))?;
        st.apply_cli(cli, &vars, &ctx.cwd, seq)?;
        seq += 1;
        st.apply_presets(&ctx.operator(), &write_bases)?;
        let mut requested = Vec::new();
        if let Some(t) = tool {
            st.add_tool_dirs(t.name, &t.extra_read, &ctx.cwd, seq)?;
            requested = requests::apply(&mut st, t.name, t.requests, seq);
        }
        self.add_floor(&mut st, ctx)?;
        st.check_env_dirs(&ctx.env)?;
        let (mut grant, mut provenance) = st.finish(project.clone())?;
        grant.session_writes = write_bases;
        provenance.insert(
            0,
            Provenance {
                key: "project".into(),
                value: project.display().to_string(),
                source: "-C/--project, or found up from the working directory".into(),
                written: None,
            },
        );
        Ok(Resolved {
            tool: tool.map(|t| t.name.to_string()),
            grant,
            provenance,
            requested,
        })
    }

    /// Each file layer, and right after it its `[tools.NAME]` for `tool`.
    /// Returns the position of the next layer.
    fn apply_layers(
        &self,
        st: &mut State,
        vars: &Vars,
        tool: Option<&str>,
    ) -> Result<usize, PolicyError> {
        let mut seq = 1;
        for l in &self.layers {
            let operator = l.outside(vars.project);
            let layer = Layer {
                source: l.source.clone(),
                file: &l.file,
                prefix: l.prefix.clone(),
                seq,
                shipped: l.shipped,
                operator,
            };
            st.apply(&layer, &l.body, vars)?;
            seq += 1;
            if let Some(t) = tool
                && let Some(body) = l.tools.get(t)
            {
                let layer = Layer {
                    source: format!("{} [tools.{t}]", l.source),
                    file: &l.file,
                    prefix: vec!["tools".into(), t.into()],
                    seq,
                    shipped: l.shipped,
                    operator,
                };
                st.apply(&layer, body, vars)?;
                seq += 1;
            }
        }
        Ok(seq)
    }

    /// The safety floor, with the audit log wherever `[audit] path` moved
    /// it.
    fn add_floor(&self, st: &mut State, ctx: &Context) -> Result<(), PolicyError> {
        let policy_file = self.layers.iter().find_map(|l| l.path.as_deref());
        st.add_floor(&ctx.state_base(), policy_file)?;
        // Standard output is not a file a grant could name.
        let audit = self.session(ctx)?.audit;
        let to_stdout = audit.to_stdout();
        if let Some(log) = audit.path.filter(|_| !to_stdout) {
            st.deny_audit_log(&log)?;
        }
        Ok(())
    }
}
