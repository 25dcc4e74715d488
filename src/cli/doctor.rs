//! `toolcage doctor [--json]`: what this machine and user can enforce, and
//! the mode each shipped profile will run in here, with what it will lack.
//! Exit 0 when `default` and `ci` run fully (namespaces, Landlock fully
//! enforced, nothing uncompensated), 1 otherwise.

use super::{Global, PolicyArgs, status};
use crate::policy::profile_names;
use crate::sandbox::mode::{self, IsolationMode, Lack};
use crate::sandbox::probe::{self, HostSupport, Sysctls};
use crate::sandbox::{LandlockReport, LandlockStatus};
use clap::Args;
use serde_json::{Value, json};

#[derive(Debug, Args)]
pub(crate) struct DoctorArgs {
    /// Print one JSON object with the same facts (keys in docs/commands.md).
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) opts: super::options::LogOpts,
}

/// The profiles whose full enforcement decides the exit status.
const MUST_RUN_FULLY: [&str; 2] = ["default", "ci"];

/// What each Landlock ABI adds (the kernel's documentation).
const LANDLOCK_FEATURES: [(i32, &str); 7] = [
    (1, "filesystem"),
    (2, "refer"),
    (3, "truncate"),
    (4, "TCP rules"),
    (5, "device ioctl"),
    (6, "abstract-socket and signal scoping"),
    (7, "audit logging"),
];

/// One shipped profile on this host.
struct ProfileCheck {
    name: &'static str,
    /// `Err`: the profile's default grant could not be resolved.
    result: Result<Checked, String>,
}

struct Checked {
    mode: IsolationMode,
    /// The gaps the profile accepts without compensation
    /// (`[sandbox] namespace_free_accepts`).
    accepts: Vec<String>,
    lacking: Vec<Lack>,
    refusal: Option<String>,
    landlock: LandlockReport,
}

impl ProfileCheck {
    fn runs_fully(&self) -> bool {
        self.result.as_ref().is_ok_and(|c| {
            c.mode == IsolationMode::Namespaces
                && c.refusal.is_none()
                && c.landlock.status == LandlockStatus::FullyEnforced
                && c.lacking.iter().all(|l| l.compensated_by.is_some())
        })
    }

    /// `runs_fully`, `runs_with_gaps`, `refused` or `error`.
    fn status(&self) -> &'static str {
        match &self.result {
            Err(_) => "error",
            Ok(c) if c.refusal.is_some() => "refused",
            Ok(_) if self.runs_fully() => "runs_fully",
            Ok(_) => "runs_with_gaps",
        }
    }
}

/// The profile's default grant, resolved as `toolcage policy --profile NAME`
/// does, and what it gets on `host`.
fn check_profile(global: &Global, name: &'static str, host: &HostSupport) -> ProfileCheck {
    let args = PolicyArgs {
        profile: Some(name.to_string()),
        ..Default::default()
    };
    let result = super::policy::defaults(global, &args)
        .map(|resolved| check_grant(&resolved.grant, host))
        .map_err(|e| e.to_string());
    ProfileCheck { name, result }
}

/// What `grant` gets on `host`: its mode, what that mode lacks (Landlock's
/// own gaps too), the mode's refusal, the Landlock report.
fn check_grant(grant: &crate::policy::Grant, host: &HostSupport) -> Checked {
    let decision = mode::decide_here(grant, host);
    let constructed = decision.mode == IsolationMode::Namespaces;
    let landlock = probe::landlock_report(grant, constructed);
    let mut lacking = decision.lacking;
    // Landlock's own gaps, unless the decision already names them.
    if landlock.status == LandlockStatus::NotEnforced {
        lacking.push(Lack {
            id: "landlock",
            part: "landlock: not available (no filesystem or TCP restriction)".into(),
            compensated_by: None,
        });
    }
    for d in &landlock.missing {
        if !lacking.iter().any(|l| l.part == d.feature) {
            lacking.push(Lack {
                id: "landlock",
                part: d.feature.clone(),
                compensated_by: d.compensated.then(|| d.note.clone()),
            });
        }
    }
    Checked {
        mode: decision.mode,
        accepts: grant.namespace_free.accepts.clone(),
        lacking,
        refusal: decision.refusal,
        landlock,
    }
}

/// Whether a call under `grant` can run on this host, decided as `doctor`
/// decides it for a profile, and as the sandbox will at the call: the
/// mode's refusal (namespace-free mode the policy does not accept), then
/// the enforcement level against Landlock (`standard` needs Landlock and
/// its TCP rules when asked; `strict` refuses any uncompensated gap).
/// `serve --http` answers `/readyz` with it.
pub(crate) fn enforceable(grant: &crate::policy::Grant) -> Result<(), String> {
    use crate::policy::Enforcement;
    let c = check_grant(grant, probe::host());
    if let Some(why) = c.refusal {
        return Err(why);
    }
    let open: Vec<&str> = (c.landlock.missing.iter())
        .filter(|d| !d.compensated)
        .map(|d| d.feature.as_str())
        .collect();
    let landlock_off = c.landlock.status == LandlockStatus::NotEnforced;
    match grant.enforcement {
        Enforcement::Degraded => Ok(()),
        _ if landlock_off => Err(
            "Landlock is not available on this kernel, and the policy's enforcement needs it \
             (toolcage doctor; --allow-degraded runs without it)"
                .into(),
        ),
        Enforcement::Standard => match open.iter().find(|f| f.contains("TCP port rules")) {
            Some(f) => Err(format!("{f} (toolcage doctor)")),
            None => Ok(()),
        },
        Enforcement::Strict if !open.is_empty() => Err(format!(
            "strict enforcement refuses degraded features: {} (toolcage doctor)",
            open.join("; ")
        )),
        Enforcement::Strict => Ok(()),
    }
}

pub(crate) fn run(global: &Global, args: &DoctorArgs) -> u8 {
    let host = probe::host();
    let profiles: Vec<ProfileCheck> = profile_names()
        .into_iter()
        .map(|name| check_profile(global, name, host))
        .collect();
    let ok = profiles
        .iter()
        .filter(|p| MUST_RUN_FULLY.contains(&p.name))
        .all(ProfileCheck::runs_fully);
    let sysctls = Sysctls::read();
    let nnp = probe::no_new_privs();
    if args.json {
        let report = to_json(host, &sysctls, nnp, &profiles, ok);
        if let Some(code) = super::print_json(&report) {
            return code;
        }
    } else {
        // Profile errors quote paths from the project.
        super::out::text(&crate::text::multi_line(&to_text(
            host, &sysctls, nnp, &profiles, ok,
        )));
    }
    if ok { status::OK } else { 1 }
}

fn landlock_has(abi: i32) -> Vec<&'static str> {
    LANDLOCK_FEATURES
        .iter()
        .filter(|(since, _)| abi >= *since)
        .map(|(_, what)| *what)
        .collect()
}

fn landlock_lacks(abi: i32) -> Vec<String> {
    LANDLOCK_FEATURES
        .iter()
        .filter(|(since, _)| abi < *since)
        .map(|(since, what)| format!("{what} (ABI {since})"))
        .collect()
}

fn sysctl_pairs(s: &Sysctls) -> [(&'static str, Option<u64>); 3] {
    [
        ("user.max_user_namespaces", s.max_user_namespaces),
        (
            "kernel.unprivileged_userns_clone",
            s.unprivileged_userns_clone,
        ),
        (
            "kernel.apparmor_restrict_unprivileged_userns",
            s.apparmor_restrict_unprivileged_userns,
        ),
    ]
}

fn to_json(
    host: &HostSupport,
    sysctls: &Sysctls,
    no_new_privs: bool,
    profiles: &[ProfileCheck],
    ok: bool,
) -> Value {
    let blocked = host
        .namespaces
        .as_ref()
        .err()
        .map(|b| json!({ "cause": b.cause, "errno": b.errno, "message": b.message() }));
    let sysctls: serde_json::Map<String, Value> = sysctl_pairs(sysctls)
        .into_iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    let profiles: Vec<Value> = profiles
        .iter()
        .map(|p| {
            let (mode, landlock, lacking, refusal, error) = match &p.result {
                Ok(c) => (
                    Some(c.mode.name()),
                    Some(c.landlock.status),
                    c.lacking
                        .iter()
                        .map(|l| json!({ "part": l.part, "compensated_by": l.compensated_by }))
                        .collect(),
                    c.refusal.clone(),
                    None,
                ),
                Err(e) => (None, None, Vec::new(), None, Some(e.clone())),
            };
            json!({
                "name": p.name,
                "mode": mode,
                "status": p.status(),
                "runs_fully": p.runs_fully(),
                "landlock": landlock,
                "lacking": lacking,
                "refusal": refusal,
                "error": error,
            })
        })
        .collect();
    json!({
        "kernel": host.kernel,
        "euid": host.euid,
        "root": host.euid == 0,
        "cap_sys_admin": host.cap_sys_admin,
        "landlock": {
            "abi": host.landlock_abi,
            "features": landlock_has(host.landlock_abi),
            "missing": landlock_lacks(host.landlock_abi),
        },
        "seccomp": {
            "available": host.seccomp,
            "filtered": host.seccomp_filtered,
            "no_new_privs": no_new_privs,
        },
        "namespaces": {
            "available": host.namespaces.is_ok(),
            "kinds": probe::namespace_names(host.euid),
            "blocked": blocked,
        },
        "sysctls": sysctls,
        "serve_pool": serve_pool_json(host),
        "profiles": profiles,
        "runs_fully": ok,
    })
}

/// What `serve` prepares ahead of a call (`sandbox::pool`), and why it is
/// safe: the part of a sandbox that depends only on the grant, for one
/// call each, keyed by the whole grant.
const POOL_PREPARED: &str = "namespaces, the constructed root, loopback, Landlock and seccomp compiled, the init waiting; made by a small process forked when serve starts, which shares no memory with the server and dies with it";
const POOL_SAFE: &str = "each sandbox serves one call and is torn down after it; one is used only by a call with the same grant and readable paths, and only while every path its root was built from is the same file";

fn serve_pool_json(host: &HostSupport) -> Value {
    json!({
        "default_size": crate::sandbox::pool::DEFAULT_SIZE,
        "available": host.namespaces.is_ok(),
        "prepared": POOL_PREPARED,
        "safe_because": POOL_SAFE,
        "not_prepared": ["namespace-free mode", "domain mode", "exec and --explain"],
    })
}

fn serve_pool_text(host: &HostSupport) -> String {
    match host.namespaces {
        Ok(()) => format!(
            "serve keeps {} sandboxes prepared ahead (--pool): one call each, \
             only for the same grant (not domain mode)",
            crate::sandbox::pool::DEFAULT_SIZE
        ),
        Err(_) => "off: namespace-free calls are not prepared ahead".into(),
    }
}

/// `label` padded so the values line up.
fn line(out: &mut String, label: &str, value: &str) {
    out.push_str(&format!("{label:<12}{value}\n"));
}

fn to_text(
    host: &HostSupport,
    sysctls: &Sysctls,
    no_new_privs: bool,
    profiles: &[ProfileCheck],
    ok: bool,
) -> String {
    let mut out = String::new();
    line(&mut out, "kernel", &host.kernel);
    let who = match (host.euid, host.cap_sys_admin) {
        (0, true) => "root (euid 0), with CAP_SYS_ADMIN".to_string(),
        (0, false) => "root (euid 0), without CAP_SYS_ADMIN".to_string(),
        (uid, _) => format!("not root (euid {uid}): calls get a user namespace"),
    };
    line(&mut out, "user", &who);
    let abi = host.landlock_abi;
    if abi == 0 {
        line(&mut out, "landlock", "not available");
    } else {
        line(
            &mut out,
            "landlock",
            &format!("ABI {abi}: {}", landlock_has(abi).join(", ")),
        );
        let lacks = landlock_lacks(abi);
        if !lacks.is_empty() {
            line(&mut out, "", &format!("without: {}", lacks.join(", ")));
        }
    }
    let seccomp = format!(
        "{}; {}; no_new_privs {}",
        if host.seccomp {
            "available"
        } else {
            "not available"
        },
        if host.seccomp_filtered {
            "toolcage already runs under a filter (a container runtime's or service manager's)"
        } else {
            "toolcage runs unfiltered"
        },
        if no_new_privs { "set" } else { "not set" },
    );
    line(&mut out, "seccomp", &seccomp);
    let kinds = probe::namespace_names(host.euid).join(", ");
    match &host.namespaces {
        Ok(()) => line(&mut out, "namespaces", &format!("available ({kinds})")),
        Err(b) => {
            line(&mut out, "namespaces", &format!("blocked ({kinds})"));
            line(&mut out, "", &format!("cause: {}", b.message()));
        }
    }
    let sysctls: Vec<String> = sysctl_pairs(sysctls)
        .into_iter()
        .map(|(k, v)| match v {
            Some(v) => format!("{k} = {v}"),
            None => format!("{k}: absent"),
        })
        .collect();
    line(&mut out, "sysctls", &sysctls.join(", "));
    line(&mut out, "serve pool", &serve_pool_text(host));
    out.push('\n');
    let block = host.namespaces.as_ref().err().map(|b| b.message());
    let shared = shared_gaps(profiles);
    for p in profiles {
        profile_text(&mut out, p, block.as_deref(), &shared);
    }
    shared_text(&mut out, &shared);
    out.push('\n');
    out.push_str(if ok {
        "default and ci run fully here\n"
    } else {
        "default or ci does not run fully here (exit 1)\n"
    });
    out
}

/// How one gap stands for one profile, as the text report says it.
fn gap_how(c: &Checked, l: &Lack) -> String {
    match &l.compensated_by {
        Some(by) => format!("compensated: {by}"),
        None if c.accepts.iter().any(|a| a == l.id) => {
            "not compensated; this profile accepts it (namespace_free_accepts)".into()
        }
        None => "NOT compensated".into(),
    }
}

/// The gaps every profile has, and has the same way: said once, after
/// the profiles, not under each of them. `(part, how)`.
fn shared_gaps(profiles: &[ProfileCheck]) -> Vec<(String, String)> {
    let checked: Vec<&Checked> = profiles
        .iter()
        .filter_map(|p| p.result.as_ref().ok())
        .collect();
    let Some(first) = checked.first() else {
        return Vec::new();
    };
    first
        .lacking
        .iter()
        .map(|l| (l.part.clone(), gap_how(first, l)))
        .filter(|(part, how)| {
            checked.len() > 1
                && checked.iter().all(|c| {
                    c.lacking
                        .iter()
                        .any(|l| &l.part == part && &gap_how(c, l) == how)
                })
        })
        .collect()
}

/// A gap's name without its explanation: `PID namespace`.
fn gap_name(part: &str) -> &str {
    part.split(" (").next().unwrap_or(part)
}

/// The shared gaps: in full when there is one, else one line each by name
/// (`--json` has every explanation).
fn shared_text(out: &mut String, shared: &[(String, String)]) {
    match shared {
        [] => {}
        [(part, how)] => out.push_str(&format!("every profile lacks {part}; {how}\n")),
        many => {
            out.push_str(
                "every profile lacks (what each is and how it is compensated: doctor --json):\n",
            );
            for (part, how) in many {
                let how = how.split(": ").next().unwrap_or(how);
                out.push_str(&format!("{:<20}{}; {how}\n", "", gap_name(part)));
            }
        }
    }
}

fn profile_text(
    out: &mut String,
    p: &ProfileCheck,
    block: Option<&str>,
    shared: &[(String, String)],
) {
    let label = format!("profile {}", p.name);
    let c = match &p.result {
        Ok(c) => c,
        Err(e) => {
            out.push_str(&format!("{label:<20}error: {e}\n"));
            return;
        }
    };
    let verdict = match (&c.refusal, p.runs_fully()) {
        // The namespaces line above already gives the cause in full.
        (Some(r), _) => match block {
            Some(b) if r.contains(b) => format!(
                "refused: {}",
                r.replace(b, "namespaces blocked (cause above)")
            ),
            _ => format!("refused: {r}"),
        },
        (None, true) => "runs fully".into(),
        (None, false) => "runs with gaps".into(),
    };
    out.push_str(&format!("{label:<20}{:<16}{verdict}\n", c.mode.name()));
    // This profile's own gaps, by name, grouped by how each stands.
    let own: Vec<(&Lack, String)> = c
        .lacking
        .iter()
        .map(|l| (l, gap_how(c, l)))
        .filter(|(l, how)| !shared.iter().any(|(p, h)| *p == l.part && h == how))
        .collect();
    // Two gaps of one name (the constructed root's files and its sockets)
    // are told apart by their id.
    let name = |l: &Lack| {
        let short = gap_name(&l.part);
        match c
            .lacking
            .iter()
            .filter(|o| gap_name(&o.part) == short)
            .count()
        {
            1 => short.to_string(),
            _ => format!("{short} ({})", l.id),
        }
    };
    let groups = [
        "NOT compensated",
        "not compensated; this profile accepts it (namespace_free_accepts)",
        "compensated",
    ];
    for group in groups {
        let names: Vec<String> = own
            .iter()
            .filter(|(_, how)| how.split(": ").next() == Some(group))
            .map(|(l, _)| name(l))
            .collect();
        if !names.is_empty() {
            out.push_str(&format!("{:<20}lacks, {group}: {}\n", "", names.join(", ")));
        }
    }
}
