//! The merge engine: policy layers applied one after another onto a
//! [`State`] in which every value remembers where it came from.

use super::entries::{Kind, from_list, resolve_path};
use super::error::PolicyError;
use super::file::{Body, Limit, NetMode};
use super::grant::{ApprovalMode, Enforcement, Grant, NamespaceFree};

/// The uncompensated gaps of namespace-free mode a policy may accept
/// (`sandbox::mode::lacks` names them).
pub const NAMESPACE_FREE_GAPS: &[&str] = &[
    "pid",
    "ipc",
    "network",
    "unix-sockets",
    "protected",
    "denied",
    "metadata",
    "proc",
];
pub use super::origin::{At, Layer, Origin, Sourced};
use super::paths::{Vars, expand, is_plain, within};
use super::presets::Preset;
use super::resolve::Overrides;
use super::units::parse_duration;
use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Everything a grant holds, each value with its origin.
#[derive(Debug, Clone)]
pub struct State {
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
    pub domains: super::netrules::DomainState,
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

fn val<T>(v: T, o: &Origin) -> Sourced<T> {
    Sourced { v, o: o.clone() }
}

fn nonzero<T: PartialEq + Default>(v: T, o: &Origin, hint: &str) -> Result<T, PolicyError> {
    if v == T::default() {
        Err(o.error(format!("must be greater than zero{hint}")))
    } else {
        Ok(v)
    }
}

fn rlimit<T>(
    l: Limit<T>,
    o: &Origin,
    f: impl Fn(T) -> u64,
) -> Result<Sourced<Option<u64>>, PolicyError> {
    match l {
        Limit::Unlimited => Ok(val(None, o)),
        Limit::Set(t) => {
            let n = nonzero(f(t), o, " (or \"unlimited\" to keep the inherited limit)")?;
            Ok(val(Some(n), o))
        }
    }
}

/// A valid environment name, or (when `pattern`) `PREFIX*`.
fn check_env_name(name: &str, pattern: bool) -> Result<(), String> {
    let base = if pattern {
        name.strip_suffix('*').unwrap_or(name)
    } else {
        name
    };
    let ok = base.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !base.starts_with(|c: char| c.is_ascii_digit())
        && (!base.is_empty() || (pattern && name == "*"));
    if ok {
        Ok(())
    } else if pattern {
        Err(format!(
            "invalid variable name \"{name}\" (use NAME or PREFIX*)"
        ))
    } else {
        Err(format!(
            "invalid variable name \"{name}\" (use letters, digits and _)"
        ))
    }
}

fn ports(list: &[i64], l: &Layer, key: &str) -> Result<Vec<u16>, PolicyError> {
    let mut out = Vec::new();
    for (i, &p) in list.iter().enumerate() {
        match u16::try_from(p) {
            Ok(p) if p != 0 => {
                if !out.contains(&p) {
                    out.push(p)
                }
            }
            _ => {
                return Err(l
                    .origin("network", key, Some(i))
                    .error(format!("invalid port {p} (use 1-65535)")));
            }
        }
    }
    Ok(out)
}

impl State {
    /// The values before any layer: [`Grant::closed`].
    pub fn closed() -> State {
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

    /// Apply one file layer.
    pub fn apply(&mut self, l: &Layer, b: &Body, vars: &Vars) -> Result<(), PolicyError> {
        for (i, name) in b.with.iter().flatten().enumerate() {
            let o = l.origin_at(&["with"], Some(i));
            let v = Preset::parse(name).map_err(|m| o.error(m))?;
            self.with.push(Sourced { v, o });
        }
        let fs = &b.fs;
        let lists = [
            (&fs.read, &fs.add_read, "read", "add_read", Kind::Root),
            (&fs.write, &fs.add_write, "write", "add_write", Kind::Root),
            (
                &fs.protected,
                &fs.add_protected,
                "protected",
                "add_protected",
                Kind::Guard,
            ),
            (
                &fs.denied,
                &fs.add_denied,
                "denied",
                "add_denied",
                Kind::Guard,
            ),
        ];
        for (i, (set, add, set_key, add_key, kind)) in lists.into_iter().enumerate() {
            let target = match i {
                0 => &mut self.read,
                1 => &mut self.write,
                2 => &mut self.protected,
                _ => &mut self.denied,
            };
            let mut skipped = Vec::new();
            if let Some(list) = set {
                *target = from_list(l, set_key, list, kind, vars, &mut skipped)?;
                self.not_guarded.retain(|(k, _)| *k != set_key);
            }
            if let Some(list) = add {
                target.extend(from_list(l, add_key, list, kind, vars, &mut skipped)?);
            }
            let key = if i == 2 { "protected" } else { "denied" };
            self.not_guarded
                .extend(skipped.into_iter().map(|e| (key, e)));
        }
        if let Some(v) = fs.private_tmp {
            self.private_tmp = val(v, &l.origin("fs", "private_tmp", None));
        }
        for (i, name) in fs.allow_secrets.iter().flatten().enumerate() {
            let o = l.origin("fs", "allow_secrets", Some(i));
            self.allow_secret(l, name, o)?;
        }

        let net = &b.network;
        if let Some(m) = net.mode {
            self.mode = val(m, &l.origin("network", "mode", None));
        }
        for (list, key) in [(&net.connect, "connect"), (&net.bind, "bind")] {
            let Some(list) = list else { continue };
            let o = l.origin("network", key, None);
            let v = ports(list, l, key)?;
            if let Some(m) = net.mode
                && m != NetMode::Tcp
                && !v.is_empty()
            {
                return Err(o.error(format!(
                    "ports only apply with network.mode = \"tcp\" (this file sets mode = \"{}\")",
                    mode_name(m)
                )));
            }
            let target = if key == "connect" {
                &mut self.connect
            } else {
                &mut self.bind
            };
            *target = val(v, &o);
        }
        self.apply_domains(l, net)?;

        let env = &b.env;
        for (list, key, replace) in [
            (&env.allow, "allow", true),
            (&env.add_allow, "add_allow", false),
        ] {
            let Some(list) = list else { continue };
            let mut entries = Vec::new();
            for (i, name) in list.iter().enumerate() {
                let o = l.origin("env", key, Some(i));
                check_env_name(name, true).map_err(|m| o.error(m))?;
                entries.push(Sourced { v: name.clone(), o });
            }
            if replace {
                self.env_allow = entries;
            } else {
                self.env_allow.extend(entries);
            }
        }
        if let Some(set) = &env.set {
            for (name, value) in set {
                let mut o = l.origin("env", "set", None);
                if let At::File { key, .. } = &mut o.at {
                    key.push(name.clone());
                }
                check_env_name(name, false).map_err(|m| o.error(m))?;
                if value.contains('\0') {
                    return Err(o.error("value contains a NUL byte"));
                }
                self.env_set.insert(
                    name.clone(),
                    Sourced {
                        v: value.clone(),
                        o,
                    },
                );
            }
        }

        let lim = &b.limits;
        if let Some(d) = lim.timeout {
            let o = l.origin("limits", "timeout", None);
            self.timeout = val(nonzero(d.0, &o, "")?, &o);
        }
        if let Some(d) = lim.kill_grace {
            self.kill_grace = val(d.0, &l.origin("limits", "kill_grace", None));
        }
        if let Some(v) = lim.address_space {
            let o = l.origin("limits", "address_space", None);
            self.address_space = rlimit(v, &o, |b| b.0)?;
            // Below this, the dynamic loader itself cannot map a program:
            // every call would die of SIGSEGV with no word of why.
            const LEAST: u64 = 16 << 20;
            if self.address_space.v.is_some_and(|n| n < LEAST) {
                return Err(o.error("too small for any program to start (at least 16MiB)"));
            }
        }
        if let Some(v) = lim.cpu {
            // RLIMIT_CPU has whole seconds: round up.
            self.cpu = rlimit(v, &l.origin("limits", "cpu", None), |d| {
                d.0.as_millis().div_ceil(1000) as u64
            })?;
        }
        if let Some(v) = lim.processes {
            self.processes = rlimit(v, &l.origin("limits", "processes", None), |c| c.0)?;
        }
        if let Some(v) = lim.file_size {
            self.file_size = rlimit(v, &l.origin("limits", "file_size", None), |b| b.0)?;
        }
        if let Some(v) = lim.open_files {
            self.open_files = rlimit(v, &l.origin("limits", "open_files", None), |c| c.0)?;
        }
        if let Some(v) = lim.tmp {
            let o = l.origin("limits", "tmp", None);
            if v.0 < super::grant::LEAST_TMP {
                return Err(o.error(format!(
                    "{} is too small for the call's private /tmp and /dev/shm \
                     (at least 1MiB, e.g. tmp = \"256MiB\")",
                    super::units::format_size(v.0)
                )));
            }
            self.tmp = val(v.0, &o);
        }
        for (v, key) in [(lim.stdout, "stdout"), (lim.stderr, "stderr")] {
            let Some(v) = v else { continue };
            let o = l.origin("limits", key, None);
            let n = nonzero(v.0, &o, " (an output cap of zero hides all output)")?;
            if key == "stdout" {
                self.stdout = val(n, &o);
            } else {
                self.stderr = val(n, &o);
            }
        }

        if let Some(e) = b.sandbox.enforcement {
            self.enforcement = val(e, &l.origin("sandbox", "enforcement", None));
        }
        if let Some(m) = b.sandbox.namespace_free {
            self.namespace_free = val(m, &l.origin("sandbox", "namespace_free", None));
        }
        if let Some(gaps) = &b.sandbox.namespace_free_accepts {
            let o = l.origin("sandbox", "namespace_free_accepts", None);
            if let Some(bad) = gaps
                .iter()
                .find(|g| !NAMESPACE_FREE_GAPS.contains(&g.as_str()))
            {
                return Err(o.error(format!(
                    "unknown gap '{bad}' (known: {})",
                    NAMESPACE_FREE_GAPS.join(", ")
                )));
            }
            self.namespace_free_accepts = val(gaps.clone(), &o);
        }
        if let Some(n) = b.requests.network {
            self.req_network = val(n, &l.origin("requests", "network", None));
        }
        if let Some(d) = b.requests.max_timeout {
            let o = l.origin("requests", "max_timeout", None);
            self.max_timeout = val(nonzero(d.0, &o, "")?, &o);
        }
        if let Some(m) = b.approval.mode {
            self.approval = val(m, &l.origin("approval", "mode", None));
        }
        if let Some(y) = b.approval.allow_yes {
            self.allow_yes = Some(val(y, &l.origin("approval", "allow_yes", None)));
        }
        if let Some(c) = lim.concurrent {
            let o = l.origin("limits", "concurrent", None);
            let n = u32::try_from(nonzero(c.0, &o, " (to forbid a tool, do not expose it)")?)
                .map_err(|_| o.error(format!("{} is too large", c.0)))?;
            self.concurrent = Some(val(n, &o));
        }
        if let Some(c) = b.rate_limit.requests {
            let o = l.origin("rate_limit", "requests", None);
            let n = u32::try_from(nonzero(c.0, &o, " (to forbid a tool, do not expose it)")?)
                .map_err(|_| o.error(format!("{} is too large", c.0)))?;
            self.rl_requests = Some(val(n, &o));
        }
        if let Some(d) = b.rate_limit.window {
            let o = l.origin("rate_limit", "window", None);
            self.rl_window = Some(val(nonzero(d.0, &o, "")?, &o));
        }
        Ok(())
    }

    /// One entry of `[fs] allow_secrets`: a home secret named as listed,
    /// from the operator's own policy file only.
    fn allow_secret(&mut self, l: &Layer, name: &str, o: Origin) -> Result<(), PolicyError> {
        if !l.operator {
            return Err(o.error(
                "only a --policy file outside the project may lift a home secret (a file inside \
                 it could be written by a call, or have come with the files)",
            ));
        }
        let Some(secret) = super::home::home_secret_named(name) else {
            let names: Vec<String> = super::home::HOME_SECRETS.iter().map(|s| s.name()).collect();
            return Err(o.error(format!(
                "\"{name}\" is not a home secret (one of: {}; the /etc secrets are never lifted)",
                names.join(", ")
            )));
        };
        let v = secret.name();
        if !self.allow_secrets.iter().any(|e| e.v == v) {
            self.allow_secrets.push(Sourced { v, o });
        }
        Ok(())
    }

    /// Apply the CLI flags (paths relative to `cwd`).
    pub fn apply_cli(
        &mut self,
        cli: &Overrides,
        vars: &Vars,
        cwd: &Path,
        seq: usize,
    ) -> Result<(), PolicyError> {
        if cli.allow_net {
            self.mode = val(NetMode::On, &Origin::flag("--allow-net", seq));
        }
        self.apply_allow_domain(&cli.allow_domain, cli.allow_net, seq)?;
        for name in &cli.with {
            let o = Origin::flag("--with", seq);
            let v = Preset::parse(name).map_err(|m| o.error(m))?;
            self.with.push(Sourced { v, o });
        }
        for (list, flag) in [(&cli.read, "--read"), (&cli.write, "--write")] {
            let o = Origin::flag(flag, seq);
            let mut entries = Vec::new();
            for p in list {
                let raw = p
                    .to_str()
                    .ok_or_else(|| o.error(format!("{} is not UTF-8", p.display())))?;
                let p = expand(raw, vars, cwd).map_err(|m| o.error(m))?;
                resolve_path(
                    &p,
                    Kind::Root,
                    false,
                    &o,
                    flag,
                    vars.write_bases,
                    &mut entries,
                )?;
            }
            if flag == "--write" {
                self.write.extend(entries);
            } else {
                self.read.extend(entries);
            }
        }
        for spec in &cli.env {
            let o = Origin::flag("--env", seq);
            if let Some((name, value)) = spec.split_once('=') {
                check_env_name(name, false).map_err(|m| o.error(m))?;
                self.env_set.insert(
                    name.to_string(),
                    Sourced {
                        v: value.to_string(),
                        o,
                    },
                );
            } else {
                check_env_name(spec, true).map_err(|m| o.error(m))?;
                self.env_allow.push(Sourced { v: spec.clone(), o });
            }
        }
        if let Some(t) = &cli.timeout {
            let o = Origin::flag("--timeout", seq);
            let d = parse_duration(t).map_err(|m| o.error(m))?;
            self.timeout = val(nonzero(d, &o, "")?, &o);
        }
        if cli.allow_degraded {
            if self.enforcement.v == Enforcement::Strict {
                return Err(Origin::flag("--allow-degraded", seq).error(format!(
                    "{} asks for strict enforcement (refuse any degradation); \
                     --allow-degraded would silently waive it. Drop the flag, or use \
                     --profile default --allow-degraded to run degraded on purpose",
                    self.enforcement.o.source
                )));
            }
            let o = Origin::flag("--allow-degraded", seq);
            self.namespace_free = val(NamespaceFree::Allow, &o);
            self.enforcement = val(
                Enforcement::Degraded,
                &Origin::flag("--allow-degraded", seq),
            );
        }
        Ok(())
    }

    /// Add a tool's own source directories as read roots. They must exist.
    /// Links among them are discovery's to judge, not the write roots'
    /// (a tool entry may link within its tool directory, one that leads
    /// out is skipped: discovery's `leads_outside`, at every discovery);
    /// the grant holds where they lead, which the sandbox opens again
    /// without following a link inside the project.
    pub fn add_tool_dirs(
        &mut self,
        tool: &str,
        dirs: &[PathBuf],
        cwd: &Path,
        seq: usize,
    ) -> Result<(), PolicyError> {
        let o = Origin::input(format!("tool {tool} (its source directory)"), seq);
        for d in dirs {
            let p = super::paths::normalize(&cwd.join(d));
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
pub fn dedup(list: &mut Vec<Sourced<PathBuf>>) {
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

pub fn dedup_by<T, K: Ord>(list: &mut Vec<Sourced<T>>, key: impl Fn(&Sourced<T>) -> K) {
    let mut seen = std::collections::BTreeSet::new();
    list.retain(|e| seen.insert(key(e)));
}

pub fn mode_name(m: NetMode) -> &'static str {
    match m {
        NetMode::Off => "off",
        NetMode::On => "on",
        NetMode::Tcp => "tcp",
        NetMode::Domains => "domains",
    }
}

/// The kebab-case name serde gives an enum variant.
pub fn enum_name<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}
