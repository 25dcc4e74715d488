//! What a grant holds while its layers are merged: a [`State`] in which
//! every value remembers where it came from. The steps that change it sit
//! above this file: `layer.rs` (a file layer), `netrules.rs` (domain
//! settings), `overrides.rs` (the flags), `with.rs` (presets),
//! `requests.rs` (a tool's requests), `floor.rs` (the safety floor); then
//! `finish.rs` turns it into the [`Grant`].

use super::domains::{DomainPolicy, HostRule};
use super::entries::{Kind, resolve_path};
use super::error::PolicyError;
use super::file::NetMode;
use super::grant::{ApprovalMode, Enforcement, Grant, NamespaceFree};
use super::origin::{Origin, Sourced};
use super::paths::{is_plain, normalize, within};
use super::presets::Preset;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Everything a grant holds, each value with its origin.
#[derive(Debug, Clone)]
pub(crate) struct State {
    /// Toolchain presets, from every layer (applied in `with.rs`).
    pub with: Vec<Sourced<Preset>>,
    /// Guards written as `{a3s_tools}` that name nothing here (`tools/`
    /// holds no A3S tool files), with their list's key, for `policy`.
    pub not_guarded: Vec<(&'static str, Sourced<PathBuf>)>,
    pub read: Vec<Sourced<PathBuf>>,
    pub write: Vec<Sourced<PathBuf>>,
    pub protected: Vec<Sourced<PathBuf>>,
    pub denied: Vec<Sourced<PathBuf>>,
    pub private_tmp: Sourced<bool>,
    pub mode: Sourced<NetMode>,
    pub connect: Sourced<Vec<u16>>,
    pub bind: Sourced<Vec<u16>>,
    /// `[network] allow`, `deny`, `hosts` (mode "domains").
    pub domains: DomainState,
    pub env_allow: Vec<Sourced<String>>,
    pub env_set: BTreeMap<String, Sourced<String>>,
    pub timeout: Sourced<Duration>,
    pub kill_grace: Sourced<Duration>,
    pub address_space: Sourced<Option<u64>>,
    pub cpu: Sourced<Option<u64>>,
    pub processes: Sourced<Option<u64>>,
    pub file_size: Sourced<Option<u64>>,
    pub open_files: Sourced<Option<u64>>,
    pub tmp: Sourced<u64>,
    pub stdout: Sourced<u64>,
    pub stderr: Sourced<u64>,
    pub enforcement: Sourced<Enforcement>,
    pub namespace_free: Sourced<NamespaceFree>,
    pub namespace_free_accepts: Sourced<Vec<String>>,
    pub approval: Sourced<ApprovalMode>,
    pub req_network: Sourced<bool>,
    pub max_timeout: Sourced<Duration>,
    pub rl_requests: Option<Sourced<u32>>,
    pub rl_window: Option<Sourced<Duration>>,
    /// `[approval] allow_yes`; unset: false for `always`, true otherwise.
    pub allow_yes: Option<Sourced<bool>>,
    /// `[limits] concurrent`.
    pub concurrent: Option<Sourced<u32>>,
    /// The operator's homes, where the floor denies the home secrets.
    pub homes: Vec<PathBuf>,
    /// `[fs] allow_secrets`: home secrets (`~/.npmrc`) the floor leaves out.
    pub allow_secrets: Vec<Sourced<String>>,
}

/// The domain-mode part of [`State`].
#[derive(Debug, Clone, Default)]
pub(crate) struct DomainState {
    pub allow: Vec<Sourced<HostRule>>,
    pub deny: Vec<Sourced<HostRule>>,
    pub hosts: std::collections::BTreeMap<String, Sourced<IpAddr>>,
}

impl DomainState {
    /// Anything set, and the latest layer that set it.
    pub(crate) fn latest(&self) -> Option<&Origin> {
        self.allow
            .iter()
            .chain(&self.deny)
            .map(|e| &e.o)
            .chain(self.hosts.values().map(|e| &e.o))
            .max_by_key(|o| o.seq)
    }

    pub(crate) fn policy(&self) -> DomainPolicy {
        DomainPolicy {
            allow: self.allow.iter().map(|e| e.v.clone()).collect(),
            deny: self.deny.iter().map(|e| e.v.clone()).collect(),
            hosts: self.hosts.iter().map(|(k, e)| (k.clone(), e.v)).collect(),
        }
    }
}

pub(crate) fn val<T>(v: T, o: &Origin) -> Sourced<T> {
    Sourced { v, o: o.clone() }
}

impl State {
    /// The values before any layer: [`Grant::closed`].
    pub(crate) fn closed() -> State {
        let g = Grant::closed(PathBuf::new());
        let o = Origin::input("built-in".into(), 0);
        State {
            with: Vec::new(),
            not_guarded: Vec::new(),
            read: Vec::new(),
            write: Vec::new(),
            protected: Vec::new(),
            denied: Vec::new(),
            private_tmp: val(g.private_tmp, &o),
            mode: val(NetMode::Off, &o),
            connect: val(Vec::new(), &o),
            bind: val(Vec::new(), &o),
            domains: Default::default(),
            env_allow: Vec::new(),
            env_set: BTreeMap::new(),
            timeout: val(g.timeout, &o),
            kill_grace: val(g.kill_grace, &o),
            address_space: val(None, &o),
            cpu: val(None, &o),
            processes: val(None, &o),
            file_size: val(None, &o),
            open_files: val(None, &o),
            tmp: val(g.limits.tmp, &o),
            stdout: val(g.output.stdout as u64, &o),
            stderr: val(g.output.stderr as u64, &o),
            enforcement: val(g.enforcement, &o),
            namespace_free: val(g.namespace_free.mode, &o),
            namespace_free_accepts: val(g.namespace_free.accepts.clone(), &o),
            approval: val(g.approval, &o),
            req_network: val(false, &o),
            max_timeout: val(Duration::from_secs(300), &o),
            rl_requests: None,
            rl_window: None,
            allow_yes: None,
            concurrent: None,
            homes: Vec::new(),
            allow_secrets: Vec::new(),
        }
    }

    /// Add a tool's own source directories as read roots. They must exist.
    /// Links among them are discovery's to judge, not the write roots'
    /// (a tool entry may link within its tool directory, one that leads
    /// out is skipped: discovery's `leads_outside`, at every discovery);
    /// the grant holds where they lead, which the sandbox opens again
    /// without following a link inside the project.
    pub(crate) fn add_tool_dirs(
        &mut self,
        tool: &str,
        dirs: &[PathBuf],
        cwd: &Path,
        seq: usize,
    ) -> Result<(), PolicyError> {
        let o = Origin::input(format!("tool {tool} (its source directory)"), seq);
        for d in dirs {
            let p = normalize(&cwd.join(d));
            resolve_path(
                &p,
                Kind::Root,
                false,
                &o,
                "the tool's source directories",
                &[],
                &mut self.read,
            )?;
        }
        Ok(())
    }
}

/// Remove duplicates and paths beneath another path of the same list
/// (`/usr/bin` when `/usr` is there), keeping the first of equals.
pub(crate) fn dedup(list: &mut Vec<Sourced<PathBuf>>) {
    if list.iter().all(|e| is_plain(&e.v)) {
        // Normal paths: equal bytes are equal paths, and a path lies beneath
        // another exactly when one of its ancestors is that other.
        let mut seen = std::collections::BTreeSet::new();
        list.retain(|e| seen.insert(e.v.as_os_str().as_bytes().to_vec()));
        list.retain(|e| {
            !e.v.ancestors()
                .skip(1)
                .any(|a| seen.contains(a.as_os_str().as_bytes()))
        });
        return;
    }
    dedup_by(list, |e| e.v.clone());
    let all: Vec<PathBuf> = list.iter().map(|e| e.v.clone()).collect();
    list.retain(|e| !all.iter().any(|a| *a != e.v && within(&e.v, a)));
}

pub(crate) fn dedup_by<T, K: Ord>(list: &mut Vec<Sourced<T>>, key: impl Fn(&Sourced<T>) -> K) {
    let mut seen = std::collections::BTreeSet::new();
    list.retain(|e| seen.insert(key(e)));
}

pub(crate) fn mode_name(m: NetMode) -> &'static str {
    match m {
        NetMode::Off => "off",
        NetMode::On => "on",
        NetMode::Tcp => "tcp",
        NetMode::Domains => "domains",
    }
}

/// The kebab-case name serde gives an enum variant.
pub(crate) fn enum_name<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}
