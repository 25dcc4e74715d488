//! The operator's home: which directories are homes, which may never be
//! the project, the credentials in it that every grant denies, and the
//! paths a fix shown to an agent must never name.
//!
//! "Home" is `$HOME` as toolcage got it and the home of the real user's
//! passwd entry (as root, `/root`): an MCP client may start toolcage with
//! another `$HOME`, and the files worth protecting stay where the account
//! keeps them.

use super::canon;
use super::entries::matches;
use super::paths::within;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// One credential store in a home: `path` relative to the home (a `*` in
/// its last component is a wildcard). With `keep`, the directory itself
/// stays readable and each entry of it is denied except those matching
/// `keep` (`~/.ssh`: the keys, not `known_hosts` or `config`).
#[derive(Debug, Clone, Copy)]
pub struct HomeSecret {
    pub path: &'static str,
    pub keep: &'static [&'static str],
    pub what: &'static str,
}

const fn secret(path: &'static str, what: &'static str) -> HomeSecret {
    HomeSecret {
        path,
        keep: &[],
        what,
    }
}

/// Denied under every root, whatever the layers say; `[fs] allow_secrets`
/// in the operator's policy file lifts one by its name (`~/.npmrc`). Kept
/// in step with `policies/default.toml` and SECURITY.md by a test.
pub const HOME_SECRETS: &[HomeSecret] = &[
    HomeSecret {
        path: ".ssh",
        keep: &["config", "known_hosts", "known_hosts.old", "*.pub"],
        what: "SSH private keys",
    },
    secret(".aws", "AWS credentials"),
    secret(".azure", "Azure credentials"),
    secret(".config/gcloud", "Google Cloud credentials"),
    secret(".gnupg", "GnuPG private keys"),
    secret(".netrc", "passwords for curl, ftp and git over HTTP"),
    secret(".git-credentials", "git's stored passwords and tokens"),
    secret(".docker/config.json", "container registry credentials"),
    secret(".kube", "Kubernetes credentials"),
    secret(".config/gh", "GitHub CLI token"),
    secret(".npmrc", "npm registry tokens"),
    secret(".pypirc", "PyPI upload tokens"),
    secret(".cargo/credentials*", "crates.io tokens"),
    secret(".vault-token", "HashiCorp Vault token"),
    secret(".password-store", "pass, the password store"),
    secret(".local/share/keyrings", "GNOME keyring"),
    secret(".local/share/kwalletd", "KDE wallet"),
    secret(".mozilla", "Firefox profiles: saved passwords, cookies"),
    secret(".thunderbird", "Thunderbird profiles: mail passwords"),
    secret(
        ".config/google-chrome",
        "Chrome profiles: saved passwords, cookies",
    ),
    secret(
        ".config/chromium",
        "Chromium profiles: saved passwords, cookies",
    ),
    secret(
        ".config/BraveSoftware",
        "Brave profiles: saved passwords, cookies",
    ),
];

impl HomeSecret {
    /// The name a policy file uses for it: `~/.npmrc`.
    pub fn name(&self) -> String {
        format!("~/{}", self.path)
    }

    /// Whether `path` is (or lies in) this secret under `home`.
    fn covers(&self, path: &Path, home: &Path) -> bool {
        let Ok(rel) = path.strip_prefix(home) else {
            return false;
        };
        let pattern = Path::new(self.path);
        let mut parts = rel.components();
        for want in pattern.components() {
            let Some(got) = parts.next() else {
                return false;
            };
            let (w, g) = (want.as_os_str().as_bytes(), got.as_os_str().as_bytes());
            if !matches(w, g) {
                return false;
            }
        }
        if self.keep.is_empty() {
            return true;
        }
        // A directory of keys: the directory itself is not a secret; an
        // entry of it is, unless kept.
        parts.next().is_some_and(|entry| {
            !self
                .keep
                .iter()
                .any(|k| matches(k.as_bytes(), entry.as_os_str().as_bytes()))
        })
    }

    /// The paths to deny under `home`: the secret when it exists, or each
    /// entry of a `keep` directory that is not kept. Wildcards and `keep`
    /// are matched against what exists now (the grant is resolved again for
    /// every call).
    pub fn existing(&self, home: &Path) -> Vec<PathBuf> {
        let p = home.join(self.path);
        if !self.keep.is_empty() {
            let Ok(dir) = std::fs::read_dir(&p) else {
                return Vec::new();
            };
            let mut out: Vec<PathBuf> = dir
                .filter_map(Result::ok)
                .map(|e| e.file_name())
                .filter(|n| {
                    !self
                        .keep
                        .iter()
                        .any(|k| matches(k.as_bytes(), n.as_bytes()))
                })
                .map(|n| p.join(n))
                .collect();
            out.sort();
            return out;
        }
        let (Some(parent), Some(pattern)) = (p.parent(), p.file_name()) else {
            return Vec::new();
        };
        if !pattern.as_bytes().contains(&b'*') {
            return if canon::exists_nofollow(&p) {
                vec![p]
            } else {
                Vec::new()
            };
        }
        let Ok(dir) = std::fs::read_dir(parent) else {
            return Vec::new();
        };
        let mut out: Vec<PathBuf> = dir
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .filter(|n| matches(pattern.as_bytes(), n.as_bytes()))
            .map(|n| parent.join(n))
            .collect();
        out.sort();
        out
    }
}

/// The entry of [`HOME_SECRETS`] named `name` (`~/.npmrc` or
/// `{home}/.npmrc`, as `[fs] allow_secrets` writes it).
pub fn home_secret_named(name: &str) -> Option<&'static HomeSecret> {
    let rel = name
        .strip_prefix("~/")
        .or_else(|| name.strip_prefix("{home}/"))?
        .trim_end_matches('/');
    HOME_SECRETS.iter().find(|s| s.path == rel)
}

/// What `path` is when it is (or lies in) a secret in one of `homes`.
pub fn home_secret(path: &Path, homes: &[PathBuf]) -> Option<&'static str> {
    homes.iter().find_map(|home| {
        HOME_SECRETS
            .iter()
            .find(|s| s.covers(path, home))
            .map(|s| s.what)
    })
}

/// The home directory of the real user's passwd entry in `/etc/passwd`
/// (`None` when the user is not listed there, e.g. only in LDAP).
/// Read once per process: the real user does not change.
pub fn login_home() -> Option<PathBuf> {
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
pub fn homes_of(candidates: &[&Path]) -> Vec<PathBuf> {
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
pub fn project_refusal(project: &Path, homes: &[PathBuf]) -> Option<String> {
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

/// [`project_refusal`] of `project` (absolute) for this process's homes:
/// `$HOME` and the passwd entry's, as [`crate::Context::homes`] finds them.
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
    if let Some(what) = super::floor::built_in_secret(path).or_else(|| home_secret(path, homes)) {
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
    fn secrets_are_matched_by_component_and_keys_leave_known_hosts() {
        let homes = vec![PathBuf::from("/h/u")];
        let s = |p: &str| home_secret(Path::new(p), &homes);
        assert!(s("/h/u/.ssh/id_ed25519").is_some());
        assert!(s("/h/u/.ssh/github").is_some());
        assert!(s("/h/u/.ssh/known_hosts").is_none());
        assert!(s("/h/u/.ssh/config").is_none());
        assert!(s("/h/u/.ssh/id_ed25519.pub").is_none());
        assert!(s("/h/u/.ssh").is_none(), "the directory itself");
        assert!(s("/h/u/.aws/credentials").is_some());
        assert!(s("/h/u/.aws").is_some());
        assert!(s("/h/u/.awsx").is_none());
        assert!(s("/h/u/.cargo/credentials.toml").is_some());
        assert!(s("/h/u/.cargo/config.toml").is_none());
        assert!(s("/h/u/notes.txt").is_none());
        assert!(s("/h/other/.aws").is_none());
    }

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

    #[test]
    fn allow_secrets_names_an_entry_as_listed() {
        assert_eq!(home_secret_named("~/.npmrc").unwrap().path, ".npmrc");
        assert_eq!(home_secret_named("{home}/.ssh/").unwrap().path, ".ssh");
        assert!(home_secret_named("~/.ssh/id_rsa").is_none());
        assert!(home_secret_named("/etc/shadow").is_none());
    }
}
