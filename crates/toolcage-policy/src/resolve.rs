//! Loading the policy layers and resolving them into a [`Grant`] for one
//! call.
//!
//! Order, later wins: the `default` profile, `--profile NAME`, `--policy
//! FILE`, the CLI flags. For a named tool, each file's `[tools.NAME]` section
//! applies right after that file (so a per-tool setting beats the same file's
//! general one, and CLI flags still beat every file). Then the tool's own
//! requests apply, bounded by the operator's `[requests]` section.

use super::canon;
use super::error::PolicyError;
use super::file::{Body, SessionParts, StoreSection, UpstreamBody};
use super::grant::Grant;
use super::parse::{self, FileText};
use super::paths::{Vars, expand, normalize, state_base, within};
use super::presets::{Host, HostEnv};
use super::profiles::{profile_names, profile_text};
use super::requests::Requests;
use super::requests::{self, RequestOutcome};
use super::search_path::{self, DroppedDir};
use super::state::{Layer, State};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The places path variables and relative paths refer to.
#[derive(Debug, Clone)]
pub struct Context {
    /// The project root (absolute). `{project}`; base of relative policy paths.
    pub project: PathBuf,
    /// `{home}`: `$HOME`.
    pub home: PathBuf,
    /// The home of the real user's passwd entry (`/root` as root): with
    /// `home`, where the home secrets are denied and what may not be the
    /// project ([`Context::homes`]).
    pub login_home: Option<PathBuf>,
    /// `{tmp}`: the system temp directory (not the per-call private one).
    pub tmp: PathBuf,
    /// Base of relative CLI paths (`--read`, `--write`, `--policy`).
    pub cwd: PathBuf,
    /// `$XDG_STATE_HOME` as found (`None` when unset): with `home`, where
    /// toolcage keeps its own state ([`Context::state_base`]).
    pub xdg_state_home: Option<PathBuf>,
    /// The operator's variables that presets, the call's PATH and explicit
    /// `TMPDIR`/`HOME` values are resolved from.
    pub env: HostEnv,
    /// Whether the project's `tools/` holds A3S tool files (`{a3s_tools}`):
    /// discover's rule, given by the caller so that policy does not depend
    /// on it.
    pub holds_a3s_tools: fn(&Path) -> bool,
}

impl Context {
    /// The context of this process: `project` relative to the current
    /// directory, `$HOME`, `$XDG_STATE_HOME` and the system temp directory.
    pub fn detect(project: &Path, holds_a3s_tools: fn(&Path) -> bool) -> std::io::Result<Context> {
        let cwd = std::env::current_dir()?;
        let home =
            std::env::var_os("HOME").map_or_else(|| PathBuf::from("/nonexistent"), PathBuf::from);
        Ok(Context {
            project: normalize(&cwd.join(project)),
            home,
            login_home: super::home::login_home(),
            tmp: std::env::temp_dir(),
            cwd,
            xdg_state_home: std::env::var_os("XDG_STATE_HOME").map(PathBuf::from),
            env: HostEnv::capture(),
            holds_a3s_tools,
        })
    }

    /// The base of toolcage's own state (audit logs, rate limits, slots):
    /// denied in every grant, and where the gate keeps each project's state.
    pub fn state_base(&self) -> PathBuf {
        state_base(self.xdg_state_home.as_deref(), &self.home)
    }

    /// The operator's homes: `$HOME` and the passwd entry's, symlinks
    /// resolved, once each.
    pub fn homes(&self) -> Vec<PathBuf> {
        let mut c: Vec<&Path> = vec![&self.home];
        c.extend(self.login_home.as_deref());
        super::home::homes_of(&c)
    }

    /// Why the project may not be the project (the root directory, a
    /// home or what holds one), unless `allow_home_project` says so.
    pub fn project_refusal(&self) -> Option<String> {
        super::home::project_refusal(&canon::lenient(&self.project), &self.homes())
    }

    /// The operator as toolchain presets see them.
    pub fn host(&self) -> Host<'_> {
        Host {
            home: &self.home,
            env: &self.env,
        }
    }
}

/// What the CLI flags say. The last layer: these always win over files.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    /// `--allow-net`: network on.
    pub allow_net: bool,
    /// `--allow-domain HOST[:PORT]`: domains mode with these hosts allowed.
    pub allow_domain: Vec<String>,
    /// `--with PRESET`: toolchain presets (rust, node, python).
    pub with: Vec<String>,
    /// `--read PATH`: extra read roots (relative to the cwd; must exist).
    pub read: Vec<PathBuf>,
    /// `--write PATH`: extra write roots (relative to the cwd; must exist).
    pub write: Vec<PathBuf>,
    /// `--env NAME` passes NAME through (`PREFIX*` allowed); `--env NAME=VALUE` sets it.
    pub env: Vec<String>,
    /// `--timeout DUR`.
    pub timeout: Option<String>,
    /// `--allow-degraded`: enforcement = degraded.
    pub allow_degraded: bool,
}

/// The tool a grant is resolved for.
#[derive(Debug, Clone)]
pub struct ToolInput<'a> {
    pub name: &'a str,
    /// What the tool's own files ask for.
    pub requests: &'a Requests,
    /// The tool's own source directories: read roots (must exist; relative to the cwd).
    pub extra_read: Vec<PathBuf>,
}

/// Which policy files to load.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    /// `--profile NAME`: a shipped profile.
    pub profile: Option<String>,
    /// `--policy FILE` (relative to the cwd).
    pub policy_file: Option<PathBuf>,
}

/// One setting of the grant, as shown by `toolcage policy`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Provenance {
    /// `read`, `network`, `limits`-style names: `timeout`, `env.allow`, ...
    pub key: String,
    pub value: String,
    /// Where it came from: `profile ci`, `policy /x/p.toml`, `--read`, ...
    pub source: String,
    /// A read or write root as written, when `value` (what it resolved
    /// to, and what the grant holds) differs: a symlink on the way.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub written: Option<String>,
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
        search_path::dropped(&self.grant, &ctx.host())
    }
}

#[derive(Debug, Clone)]
pub(super) struct FileLayer {
    pub(super) source: String,
    pub(super) file: Arc<FileText>,
    pub(super) shipped: bool,
    /// The operator's `--policy FILE` (absolute); `None` for a shipped profile.
    pub(super) path: Option<PathBuf>,
    pub(super) body: Body,
    /// Where `body` sits in its file (`upstreams.NAME` for a server's
    /// section), for line numbers and key names in messages.
    pub(super) prefix: Vec<String>,
    pub(super) tools: BTreeMap<String, Body>,
    /// `[upstreams.NAME]` sections.
    pub(super) upstreams: BTreeMap<String, UpstreamBody>,
    /// `[global_rate_limit]`, `[audit]` and `[manage]`: top level only.
    pub(super) session: SessionParts,
    /// `allow_home_project` (top level only).
    pub(super) allow_home_project: Option<bool>,
    /// `[store]` (top level only).
    pub(super) store: Option<StoreSection>,
}

impl FileLayer {
    /// The operator's `--policy` file, lying outside `project`: neither
    /// shipped nor a file the project holds (which its calls could write,
    /// or which came with it). Only such a file may lift a home secret or
    /// let home be the project.
    pub(super) fn outside(&self, project: &Path) -> bool {
        self.path
            .as_ref()
            .is_some_and(|p| !super::paths::within(&canon::lenient(p), project))
    }
}

/// The parsed policy layers: load once, resolve for many tools.
#[derive(Debug, Clone)]
pub struct PolicyStack {
    pub(super) layers: Vec<FileLayer>,
    /// Every write root any grant of the session can get, as written: the
    /// layers' own, their `[tools.NAME]` and `[upstreams.NAME]` sections'
    /// (an upstream's stack keeps its session's). See [`Vars::write_bases`].
    pub(super) writes: Vec<String>,
}

/// The write roots `layers` name anywhere, as written.
pub(super) fn write_names(layers: &[FileLayer]) -> Vec<String> {
    let mut out = Vec::new();
    for l in layers {
        let bodies = std::iter::once(&l.body.fs)
            .chain(l.tools.values().map(|b| &b.fs))
            .chain(l.upstreams.values().map(|u| &u.fs));
        for fs in bodies {
            for list in [&fs.write, &fs.add_write].into_iter().flatten() {
                out.extend(list.iter().cloned());
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

pub(super) fn shipped(name: &str) -> Result<FileLayer, PolicyError> {
    let text = profile_text(name).ok_or_else(|| PolicyError::UnknownProfile {
        name: name.to_string(),
        valid: profile_names().join(", "),
    })?;
    let file = Arc::new(FileText {
        label: format!("<shipped>/{name}.toml"),
        text: text.to_string(),
    });
    let parsed = parse::parse(&file)?;
    let session = parsed.session_parts();
    let parsed_store = parsed.store.clone();
    let (body, tools, upstreams) = parsed.into_parts();
    Ok(FileLayer {
        source: format!("profile {name}"),
        file,
        shipped: true,
        path: None,
        body,
        prefix: Vec::new(),
        tools,
        upstreams,
        session,
        allow_home_project: None,
        store: parsed_store,
    })
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
    let mut layers = vec![shipped("default")?];
    if let Some(name) = &sources.profile
        && name != "default"
    {
        layers.push(shipped(name)?);
    }
    if let Some(path) = &sources.policy_file {
        let path = normalize(&ctx.cwd.join(path));
        let label = path.display().to_string();
        let text = std::fs::read_to_string(&path).map_err(|source| PolicyError::Read {
            file: label.clone(),
            source,
        })?;
        let file = Arc::new(FileText { label, text });
        let parsed = parse::parse(&file)?;
        let session = parsed.session_parts();
        let allow_home_project = parsed.allow_home_project;
        let store = parsed.store.clone();
        let (body, tools, upstreams) = parsed.into_parts();
        layers.push(FileLayer {
            source: format!("policy {}", path.display()),
            file,
            shipped: false,
            path: Some(path.clone()),
            body,
            prefix: Vec::new(),
            tools,
            upstreams,
            session,
            allow_home_project,
            store,
        });
    }
    let stack = PolicyStack {
        writes: write_names(&layers),
        layers,
    };
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
    /// Whether `allow_home_project = true` lets the project be what
    /// [`Context::project_refusal`] refuses (never `/`). Said by a file
    /// inside the project, it is an error: the project cannot vouch for
    /// itself.
    pub fn allows_home_project(&self, ctx: &Context) -> Result<bool, PolicyError> {
        let project = canon::lenient(&ctx.project);
        let mut allowed = false;
        for l in &self.layers {
            let Some(v) = l.allow_home_project else {
                continue;
            };
            if !l.outside(&project) {
                return Err(PolicyError::File {
                    file: l.file.label.clone(),
                    line: l.file.line_of(&["allow_home_project".to_string()], None),
                    key: "allow_home_project".into(),
                    message: format!(
                        "only a --policy file outside {} may say this (one inside it \
                         could be written by a call, or have come with the files)",
                        project.display()
                    ),
                });
            }
            allowed = v;
        }
        Ok(allowed && project.parent().is_some())
    }

    /// `[store]`: the shared store the operator's `--policy` file names
    /// (the last one that does). Said by a file inside the project, it is
    /// an error: a call could write it, pointing the limits and pins at a
    /// store of its own.
    pub fn store(&self, ctx: &Context) -> Result<Option<StoreSection>, PolicyError> {
        let project = canon::lenient(&ctx.project);
        let mut out = None;
        for l in &self.layers {
            let Some(s) = &l.store else {
                continue;
            };
            let fail = |key: &str, message: String| PolicyError::File {
                file: l.file.label.clone(),
                line: l
                    .file
                    .line_of(&["store".to_string(), key.to_string()], None),
                key: format!("store.{key}"),
                message,
            };
            if !l.shipped && !l.outside(&project) {
                return Err(fail(
                    "url",
                    format!(
                        "only a --policy file outside {} may say this (one inside it could be \
                         written by a call, or have come with the files)",
                        project.display()
                    ),
                ));
            }
            if s.url.is_none() {
                return Err(fail(
                    "url",
                    "[store] without url (add url = \"redis://HOST:PORT/DB\")".into(),
                ));
            }
            if s.password_file.is_some() && s.password_env.is_some() {
                return Err(fail(
                    "password_env",
                    "give password_file or password_env, not both".into(),
                ));
            }
            if let Some(f) = &s.password_file
                && !Path::new(f).is_absolute()
            {
                return Err(fail(
                    "password_file",
                    format!("'{f}' is not an absolute path"),
                ));
            }
            out = Some(s.clone());
        }
        Ok(out)
    }

    /// The tool names that have a `[tools.NAME]` section in any layer.
    pub fn tool_sections(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .layers
            .iter()
            .flat_map(|l| l.tools.keys().cloned())
            .collect();
        names.sort();
        names.dedup();
        names
    }

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
        let mut seq = 1;
        for l in &self.layers {
            let operator = l.outside(&project);
            let layer = Layer {
                source: l.source.clone(),
                file: &l.file,
                prefix: l.prefix.clone(),
                seq,
                shipped: l.shipped,
                operator,
            };
            st.apply(&layer, &l.body, &vars)?;
            seq += 1;
            if let Some(t) = tool
                && let Some(body) = l.tools.get(t.name)
            {
                let layer = Layer {
                    source: format!("{} [tools.{}]", l.source, t.name),
                    file: &l.file,
                    prefix: vec!["tools".into(), t.name.into()],
                    seq,
                    shipped: l.shipped,
                    operator,
                };
                st.apply(&layer, body, &vars)?;
                seq += 1;
            }
        }
        st.apply_cli(cli, &vars, &ctx.cwd, seq)?;
        seq += 1;
        st.apply_presets(&ctx.host(), &write_bases)?;
        let mut requested = Vec::new();
        if let Some(t) = tool {
            st.add_tool_dirs(t.name, &t.extra_read, &ctx.cwd, seq)?;
            requested = requests::apply(&mut st, t.name, t.requests, seq);
        }
        let policy_file = self.layers.iter().find_map(|l| l.path.as_deref());
        st.add_floor(&ctx.state_base(), policy_file)?;
        // Standard output is not a file a grant could name.
        let audit = self.session(ctx)?.audit;
        let to_stdout = audit.to_stdout();
        if let Some(log) = audit.path.filter(|_| !to_stdout) {
            st.deny_audit_log(&log)?;
        }
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
}
