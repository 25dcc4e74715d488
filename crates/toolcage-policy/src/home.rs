//! The operator's home: which directories are homes, which may never be
//! the project, and the paths a fix shown to an agent must never name (the
//! credentials in it that every grant denies are in `secrets.rs`).
//!
//! "Home" is `$HOME` as toolcage got it and the home of the real user's
//! passwd entry (as root, `/root`): an MCP client may start toolcage with
//! another `$HOME`, and the files worth protecting stay where the account
//! keeps them.

use super::canon;
use super::paths::within;
use super::secrets::{built_in_secret, home_secret};
use std::path::{Path, PathBuf};

/// The home directory of the real user's passwd entry in `/etc/passwd`
/// (`None` when the user is not listed there, e.g. only in LDAP).
/// Read once per process: the real user does not change.
pub(crate) fn login_home() -> Option<PathBuf> {
    static HOME: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    HOME.get_or_init(read_login_home).clone()
}

fn read_login_home() -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    // The owner of /proc/self is the real user: no libc call needed.
    let uid = std::fs::metadata("/proc/self").ok()?.uid().to_string();
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() >= 7 && f[2] == uid && f[5].starts_with('/')).then(|| PathBuf::from(f[5]))
    })
}

/// `candidates` as homes: existing directories, symlinks resolved, once
/// each. A `$HOME` that does not exist holds no keys and no start-up
/// files; a home that is `/` is left out (it would make every path a home
/// path; `/` is refused as a project anyway).
pub(crate) fn homes_of(candidates: &[&Path]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for c in candidates {
        if !c.is_absolute() || !c.is_dir() {
            continue;
        }
        let h = canon::lenient(c);
        if h.parent().is_some() && !out.contains(&h) {
            out.push(h);
        }
    }
    out
}

/// Why `project` (absolute, symlinks resolved) may not be the project:
/// the root directory, a home, or an ancestor of a home. Every call may
/// write its project, so any of them would hand a call the operator's
/// keys, shell start-up files and (as root) `/etc`.
pub(crate) fn project_refusal(project: &Path, homes: &[PathBuf]) -> Option<String> {
    if project.parent().is_none() {
        return Some("the root directory /".into());
    }
    homes.iter().find_map(|h| {
        if project == h {
            Some(format!("your home directory {}", h.display()))
        } else if within(h, project) {
            Some(format!(
                "{}, which holds your home directory {}",
                project.display(),
                h.display()
            ))
        } else {
            None
        }
    })
}

/// `project_refusal` of `project` (absolute) for this process's homes:
/// `$HOME` and the passwd entry's, as `Context::homes` finds them.
pub fn project_refusal_at(project: &Path) -> Option<String> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let login = login_home();
    let mut c: Vec<&Path> = Vec::new();
    c.extend(home.as_deref());
    c.extend(login.as_deref());
    project_refusal(
        &canon::lenient(&super::paths::normalize(project)),
        &homes_of(&c),
    )
}

/// System trees a write fix shown to an agent never names: a write there
/// is the operator's decision to make, not an agent's request to relay.
const SYSTEM: &[&str] = &[
    "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/boot", "/var", "/run", "/proc",
    "/sys", "/dev", "/root", "/home",
];

/// Why a fix that grants `path` (for writing, when `write`) must not be
/// offered in text an agent reads: `/`, a home or what holds one, a secret
/// (in `/etc` or a home), or, for a write, a system tree. `None`: the fix
/// may be shown.
pub fn never_offered(path: &Path, homes: &[PathBuf], write: bool) -> Option<&'static str> {
    if path.parent().is_none() {
        return Some("the root directory");
    }
    if homes.iter().any(|h| within(h, path)) {
        return Some("the operator's home");
    }
    if let Some(what) = built_in_secret(path).or_else(|| home_secret(path, homes)) {
        return Some(what);
    }
    // /var/tmp is everyone's scratch space, like /tmp.
    let system = write
        && SYSTEM.iter().any(|s| within(path, Path::new(s)))
        && !within(path, Path::new("/var/tmp"))
        && !homes.iter().any(|h| within(path, h));
    system.then_some("a system directory")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn home_its_ancestors_and_root_are_refused_as_projects() {
        let homes = vec![PathBuf::from("/h/u")];
        for p in ["/", "/h", "/h/u"] {
            assert!(project_refusal(Path::new(p), &homes).is_some(), "{p}");
        }
        for p in ["/h/u/src", "/h/v", "/tmp/x"] {
            assert!(project_refusal(Path::new(p), &homes).is_none(), "{p}");
        }
    }

    #[test]
    fn fixes_never_name_system_trees_homes_or_secrets() {
        let homes = vec![PathBuf::from("/root")];
        for p in [
            "/",
            "/etc",
            "/etc/cron.d",
            "/usr",
            "/root",
            "/root/.ssh/id_rsa",
            "/home",
        ] {
            assert!(never_offered(Path::new(p), &homes, true).is_some(), "{p}");
        }
        for p in ["/", "/root", "/root/.ssh/id_rsa", "/etc/shadow"] {
            assert!(never_offered(Path::new(p), &homes, false).is_some(), "{p}");
        }
        // Controls: a project's directory, data elsewhere; reading a system
        // directory (the default read roots hold them anyway).
        for p in ["/root/src/app", "/data/x", "/tmp/y", "/var/tmp/z"] {
            assert!(never_offered(Path::new(p), &homes, true).is_none(), "{p}");
        }
        for p in ["/usr/local/bin", "/root/.ssh/known_hosts", "/opt/x"] {
            assert!(never_offered(Path::new(p), &homes, false).is_none(), "{p}");
        }
    }
}
