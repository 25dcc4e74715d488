//! The secrets every grant denies, whatever its layers say: well-known
//! files in `/etc` ([`SECRETS`]) and the credential stores in the
//! operator's homes ([`HOME_SECRETS`]). `floor.rs` adds them to every
//! grant; `home.rs` keeps them out of the fixes an agent is shown.

use super::canon;
use super::glob::matches;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Secrets inside the read roots, each with why it is on the list. A `*`
/// in the last component is a wildcard (as in policy files). Kept in step
/// with the comment in `policies/default.toml` by a test.
pub(crate) const SECRETS: &[(&str, &str)] = &[
    ("/etc/shadow", "password hashes"),
    ("/etc/shadow-", "backup of /etc/shadow"),
    ("/etc/gshadow", "group password hashes"),
    ("/etc/gshadow-", "backup of /etc/gshadow"),
    ("/etc/sudoers", "who may become root, and how"),
    ("/etc/sudoers.d", "the same, in drop-in files"),
    ("/etc/ssh/ssh_host_*_key", "SSH host private keys"),
    ("/etc/ssl/private", "TLS private keys (Debian, Ubuntu)"),
    ("/etc/pki/tls/private", "TLS private keys (Fedora, RHEL)"),
    (
        "/etc/security/opasswd",
        "old password hashes (pam_pwhistory)",
    ),
    ("/etc/krb5.keytab", "Kerberos host keys"),
    ("/etc/ipsec.secrets", "IPsec pre-shared and private keys"),
    ("/etc/wireguard", "WireGuard private keys"),
    (
        "/etc/NetworkManager/system-connections",
        "Wi-Fi and VPN passwords",
    ),
    ("/etc/ppp/chap-secrets", "PPP passwords"),
    ("/etc/ppp/pap-secrets", "PPP passwords"),
    ("/etc/letsencrypt/archive", "certbot private keys"),
    ("/etc/letsencrypt/keys", "certbot private keys"),
    ("/etc/credstore", "systemd system credentials"),
    ("/etc/credstore.encrypted", "systemd system credentials"),
    (
        "/etc/mysql/debian.cnf",
        "MySQL/MariaDB maintenance password (Debian)",
    ),
];

/// The origin label of the secrets.
/// What `path` is when it is (or lies in) one of the built-in `SECRETS`:
/// the policy cannot grant it, whatever it says.
pub fn built_in_secret(path: &Path) -> Option<&'static str> {
    SECRETS.iter().find_map(|(pattern, what)| {
        let pattern = Path::new(pattern);
        let hit = match (pattern.parent(), pattern.file_name()) {
            (Some(dir), Some(name)) if name.as_encoded_bytes().contains(&b'*') => path
                .ancestors()
                .filter(|a| a.parent() == Some(dir))
                .any(|a| {
                    a.file_name()
                        .is_some_and(|n| matches(name.as_encoded_bytes(), n.as_encoded_bytes()))
                }),
            _ => path.starts_with(pattern),
        };
        hit.then_some(*what)
    })
}

/// One credential store in a home: `path` relative to the home (a `*` in
/// its last component is a wildcard). With `keep`, the directory itself
/// stays readable and each entry of it is denied except those matching
/// `keep` (`~/.ssh`: the keys, not `known_hosts` or `config`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct HomeSecret {
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
pub(crate) const HOME_SECRETS: &[HomeSecret] = &[
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
    pub(crate) fn name(&self) -> String {
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
    pub(crate) fn existing(&self, home: &Path) -> Vec<PathBuf> {
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
pub(crate) fn home_secret_named(name: &str) -> Option<&'static HomeSecret> {
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
    fn allow_secrets_names_an_entry_as_listed() {
        assert_eq!(home_secret_named("~/.npmrc").unwrap().path, ".npmrc");
        assert_eq!(home_secret_named("{home}/.ssh/").unwrap().path, ".ssh");
        assert!(home_secret_named("~/.ssh/id_rsa").is_none());
        assert!(home_secret_named("/etc/shadow").is_none());
    }
}
