//! The parsed policy layers ([`PolicyStack`]), in order, later wins: the
//! shipped `default` profile, `--profile NAME`, `--policy FILE`. Each file
//! is read and parsed once; `resolve.rs` resolves them for many tools.

use super::canon;
use super::context::Context;
use super::error::PolicyError;
use super::file::{Body, SessionParts, StoreSection, UpstreamBody};
use super::parse::{self, FileText};
use super::paths::{normalize, within};
use super::profiles::{profile_names, profile_text};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Which policy files to load.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    /// `--profile NAME`: a shipped profile.
    pub profile: Option<String>,
    /// `--policy FILE` (relative to the cwd).
    pub policy_file: Option<PathBuf>,
}

#[derive(Debug, Clone)]
pub(crate) struct FileLayer {
    pub(crate) source: String,
    pub(crate) file: Arc<FileText>,
    pub(crate) shipped: bool,
    /// The operator's `--policy FILE` (absolute); `None` for a shipped profile.
    pub(crate) path: Option<PathBuf>,
    pub(crate) body: Body,
    /// Where `body` sits in its file (`upstreams.NAME` for a server's
    /// section), for line numbers and key names in messages.
    pub(crate) prefix: Vec<String>,
    pub(crate) tools: BTreeMap<String, Body>,
    /// `[upstreams.NAME]` sections.
    pub(crate) upstreams: BTreeMap<String, UpstreamBody>,
    /// `[global_rate_limit]`, `[audit]` and `[manage]`: top level only.
    pub(crate) session: SessionParts,
    /// `allow_home_project` (top level only).
    pub(crate) allow_home_project: Option<bool>,
    /// `[store]` (top level only).
    pub(crate) store: Option<StoreSection>,
}

impl FileLayer {
    /// The operator's `--policy` file, lying outside `project`: neither
    /// shipped nor a file the project holds (which its calls could write,
    /// or which came with it). Only such a file may lift a home secret or
    /// let home be the project.
    pub(crate) fn outside(&self, project: &Path) -> bool {
        self.path
            .as_ref()
            .is_some_and(|p| !within(&canon::lenient(p), project))
    }
}

/// The parsed policy layers: load once, resolve for many tools.
#[derive(Debug, Clone)]
pub struct PolicyStack {
    pub(crate) layers: Vec<FileLayer>,
    /// Every write root any grant of the session can get, as written: the
    /// layers' own, their `[tools.NAME]` and `[upstreams.NAME]` sections'
    /// (an upstream's stack keeps its session's). See [`Vars::write_bases`].
    pub(crate) writes: Vec<String>,
}

/// The write roots `layers` name anywhere, as written.
pub(crate) fn write_names(layers: &[FileLayer]) -> Vec<String> {
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

pub(crate) fn shipped(name: &str) -> Result<FileLayer, PolicyError> {
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

/// The operator's `--policy FILE` (absolute), read and parsed.
fn policy_file(path: PathBuf) -> Result<FileLayer, PolicyError> {
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
    Ok(FileLayer {
        source: format!("policy {}", path.display()),
        file,
        shipped: false,
        path: Some(path),
        body,
        prefix: Vec::new(),
        tools,
        upstreams,
        session,
        allow_home_project,
        store,
    })
}

impl PolicyStack {
    /// The layers `sources` names, parsed (a `--policy` path is relative
    /// to `cwd`).
    pub(crate) fn read(sources: &Sources, cwd: &Path) -> Result<PolicyStack, PolicyError> {
        let mut layers = vec![shipped("default")?];
        if let Some(name) = &sources.profile
            && name != "default"
        {
            layers.push(shipped(name)?);
        }
        if let Some(path) = &sources.policy_file {
            layers.push(policy_file(normalize(&cwd.join(path)))?);
        }
        Ok(PolicyStack {
            writes: write_names(&layers),
            layers,
        })
    }

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
}
