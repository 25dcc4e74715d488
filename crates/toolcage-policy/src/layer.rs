//! One file layer applied onto a [`State`]: each section of a policy file
//! (or of its `[tools.NAME]`) in turn, every value remembering its origin.
//! The checks run in file order, so the first error reported is the first
//! one written.

use super::entries::{Kind, from_list};
use super::error::PolicyError;
use super::file::{
    ApprovalSection, Body, Count, EnvSection, FsSection, Limit, LimitsSection, NetMode,
    NetworkSection, RateLimitSection, RequestsSection, SandboxSection,
};
use super::grant::LEAST_TMP;
use super::origin::{At, Layer, Origin, Sourced};
use super::paths::Vars;
use super::presets::Preset;
use super::secrets::{HOME_SECRETS, home_secret_named};
use super::state::{State, mode_name, val};
use toolcage_text::units::format_size;

/// The uncompensated gaps of namespace-free mode a policy may accept
/// (`sandbox::mode::lacks` names them).
pub(crate) const NAMESPACE_FREE_GAPS: &[&str] = &[
    "pid",
    "ipc",
    "network",
    "unix-sockets",
    "protected",
    "denied",
    "metadata",
    "proc",
];

pub(crate) fn nonzero<T: PartialEq + Default>(
    v: T,
    o: &Origin,
    hint: &str,
) -> Result<T, PolicyError> {
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

/// A count of calls (`concurrent`, `rate_limit.requests`): at least one,
/// and within `u32`.
fn calls(c: Count, o: &Origin) -> Result<u32, PolicyError> {
    u32::try_from(nonzero(c.0, o, " (to forbid a tool, do not expose it)")?)
        .map_err(|_| o.error(format!("{} is too large", c.0)))
}

/// A valid environment name, or (when `pattern`) `PREFIX*`.
pub(crate) fn check_env_name(name: &str, pattern: bool) -> Result<(), String> {
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
    /// Apply one file layer, section by section.
    pub(crate) fn apply(&mut self, l: &Layer, b: &Body, vars: &Vars) -> Result<(), PolicyError> {
        self.apply_with(l, b.with.as_deref().unwrap_or_default())?;
        self.apply_fs(l, &b.fs, vars)?;
        self.apply_network(l, &b.network)?;
        self.apply_env(l, &b.env)?;
        self.apply_limits(l, &b.limits)?;
        self.apply_sandbox(l, &b.sandbox)?;
        self.apply_requests_section(l, &b.requests)?;
        self.apply_approval(l, &b.approval);
        self.apply_call_rate(l, b.limits.concurrent, &b.rate_limit)
    }

    /// `with = [...]`: presets add up across layers (applied in `with.rs`).
    fn apply_with(&mut self, l: &Layer, names: &[String]) -> Result<(), PolicyError> {
        for (i, name) in names.iter().enumerate() {
            let o = l.origin_at(&["with"], Some(i));
            let v = Preset::parse(name).map_err(|m| o.error(m))?;
            self.with.push(Sourced { v, o });
        }
        Ok(())
    }

    /// `[fs]`: the four path lists (each replaced, or appended to by its
    /// `add_*`), `private_tmp` and `allow_secrets`.
    fn apply_fs(&mut self, l: &Layer, fs: &FsSection, vars: &Vars) -> Result<(), PolicyError> {
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
        let Some(secret) = home_secret_named(name) else {
            let names: Vec<String> = HOME_SECRETS.iter().map(|s| s.name()).collect();
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

    /// `[network]`: the mode, the ports of mode "tcp", then the domain
    /// settings (`netrules.rs`).
    fn apply_network(&mut self, l: &Layer, net: &NetworkSection) -> Result<(), PolicyError> {
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
        self.apply_domains(l, net)
    }

    /// `[env]`: `allow` (replaced) and `add_allow`, then `set`.
    fn apply_env(&mut self, l: &Layer, env: &EnvSection) -> Result<(), PolicyError> {
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
        for (name, value) in env.set.iter().flatten() {
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
        Ok(())
    }

    /// `[limits]`: the timeouts, the resource limits, tmp and the output
    /// caps (`concurrent` goes with the rate limit).
    fn apply_limits(&mut self, l: &Layer, lim: &LimitsSection) -> Result<(), PolicyError> {
        if let Some(d) = lim.timeout {
            let o = l.origin("limits", "timeout", None);
            self.timeout = val(nonzero(d.0, &o, "")?, &o);
        }
        if let Some(d) = lim.kill_grace {
            self.kill_grace = val(d.0, &l.origin("limits", "kill_grace", None));
        }
        self.apply_rlimits(l, lim)?;
        if let Some(v) = lim.tmp {
            let o = l.origin("limits", "tmp", None);
            if v.0 < LEAST_TMP {
                return Err(o.error(format!(
                    "{} is too small for the call's private /tmp and /dev/shm \
                     (at least 1MiB, e.g. tmp = \"256MiB\")",
                    format_size(v.0)
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
        Ok(())
    }

    /// The rlimits of `[limits]`: a number, or "unlimited".
    fn apply_rlimits(&mut self, l: &Layer, lim: &LimitsSection) -> Result<(), PolicyError> {
        let o = |key| l.origin("limits", key, None);
        if let Some(v) = lim.address_space {
            let o = o("address_space");
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
            self.cpu = rlimit(v, &o("cpu"), |d| d.0.as_millis().div_ceil(1000) as u64)?;
        }
        if let Some(v) = lim.processes {
            self.processes = rlimit(v, &o("processes"), |c| c.0)?;
        }
        if let Some(v) = lim.file_size {
            self.file_size = rlimit(v, &o("file_size"), |b| b.0)?;
        }
        if let Some(v) = lim.open_files {
            self.open_files = rlimit(v, &o("open_files"), |c| c.0)?;
        }
        Ok(())
    }

    /// `[sandbox]`: enforcement and namespace-free mode.
    fn apply_sandbox(&mut self, l: &Layer, s: &SandboxSection) -> Result<(), PolicyError> {
        if let Some(e) = s.enforcement {
            self.enforcement = val(e, &l.origin("sandbox", "enforcement", None));
        }
        if let Some(m) = s.namespace_free {
            self.namespace_free = val(m, &l.origin("sandbox", "namespace_free", None));
        }
        if let Some(gaps) = &s.namespace_free_accepts {
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
        Ok(())
    }

    /// `[requests]`: what a tool's own requests may get (`requests.rs`).
    fn apply_requests_section(
        &mut self,
        l: &Layer,
        r: &RequestsSection,
    ) -> Result<(), PolicyError> {
        if let Some(n) = r.network {
            self.req_network = val(n, &l.origin("requests", "network", None));
        }
        if let Some(d) = r.max_timeout {
            let o = l.origin("requests", "max_timeout", None);
            self.max_timeout = val(nonzero(d.0, &o, "")?, &o);
        }
        Ok(())
    }

    /// `[approval]`.
    fn apply_approval(&mut self, l: &Layer, a: &ApprovalSection) {
        if let Some(m) = a.mode {
            self.approval = val(m, &l.origin("approval", "mode", None));
        }
        if let Some(y) = a.allow_yes {
            self.allow_yes = Some(val(y, &l.origin("approval", "allow_yes", None)));
        }
    }

    /// How many calls at once (`[limits] concurrent`) and how often
    /// (`[rate_limit]`).
    fn apply_call_rate(
        &mut self,
        l: &Layer,
        concurrent: Option<Count>,
        rl: &RateLimitSection,
    ) -> Result<(), PolicyError> {
        if let Some(c) = concurrent {
            let o = l.origin("limits", "concurrent", None);
            self.concurrent = Some(val(calls(c, &o)?, &o));
        }
        if let Some(c) = rl.requests {
            let o = l.origin("rate_limit", "requests", None);
            self.rl_requests = Some(val(calls(c, &o)?, &o));
        }
        if let Some(d) = rl.window {
            let o = l.origin("rate_limit", "window", None);
            self.rl_window = Some(val(nonzero(d.0, &o, "")?, &o));
        }
        Ok(())
    }
}
