//! The sandbox's `PATH`: only the directories the grant can read, in the
//! operator's order. The sandbox applies it ([`filter`]); `toolcage policy`
//! and the `--json` results list what it drops ([`entries`]).
//!
//! A directory the grant cannot read does not exist inside the call, so
//! keeping it would only make every lookup through it fail (`python3`
//! found as a pyenv shim in a home the call cannot see). A readable
//! directory reached through a symlink outside the grant (fnm's per-shell
//! link in `/run`, a symlinked home) is kept under its real name, the only
//! name it has inside.

use super::canon;
use super::grant::Grant;
use super::paths::normalize;
use super::presets::{self, Operator};
use serde::Serialize;
use std::cell::OnceCell;
use std::path::{Component, Path, PathBuf};

/// The PATH a call gets when none is passed through or set.
pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Whether `file` lies beneath a root the grant can read (read or write
/// roots, or `extra_read`) and not beneath a denied path. Symlinks are
/// resolved first, as the kernel checks the file it finally opens.
pub fn can_read(grant: &Grant, extra_read: &[PathBuf], file: &Path) -> bool {
    Roots::new(grant, extra_read).can_read(file)
}

/// A grant's readable roots and denied paths, each canonicalized at most
/// once (lazily: the grant's own are canonical already, a hand-built
/// grant's `/bin` may be a link) however many paths are checked.
struct Roots<'a> {
    allow: Vec<(&'a Path, OnceCell<Option<PathBuf>>)>,
    deny: Vec<(&'a Path, OnceCell<Option<PathBuf>>)>,
}

impl<'a> Roots<'a> {
    fn new(grant: &'a Grant, extra_read: &'a [PathBuf]) -> Roots<'a> {
        let cells = |it: &mut dyn Iterator<Item = &'a PathBuf>| {
            it.map(|p| (p.as_path(), OnceCell::new())).collect()
        };
        Roots {
            allow: cells(&mut grant.read.iter().chain(&grant.write).chain(extra_read)),
            deny: cells(&mut grant.denied.iter()),
        }
    }

    fn can_read(&self, file: &Path) -> bool {
        let Ok(real) = canon::canonical(file) else {
            return false;
        };
        let beneath = |(root, real_root): &(&Path, OnceCell<Option<PathBuf>>)| {
            real.starts_with(root)
                || real_root
                    .get_or_init(|| canon::canonical(root).ok())
                    .as_ref()
                    .is_some_and(|r| real.starts_with(r))
        };
        self.allow.iter().any(beneath) && !self.deny.iter().any(beneath)
    }
}

/// One entry of the operator's PATH and what the call gets for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathEntry {
    /// As written in PATH.
    pub dir: String,
    /// What the call's PATH holds for it; `None`: dropped.
    pub inside: Option<String>,
    /// The directory exists (on the host); a missing one is dropped quietly.
    pub exists: bool,
}

/// Every entry of `path` with its fate. Relative entries (and the empty
/// one) are taken from the project, the working directory of every call.
pub fn entries(grant: &Grant, path: &str) -> Vec<PathEntry> {
    let roots = Roots::new(grant, &[]);
    path.split(':')
        .map(|dir| {
            let p = normalize(&grant.project.join(dir));
            let real = canon::canonical(&p).ok().filter(|r| r.is_dir());
            let inside = match &real {
                Some(real) if roots.can_read(real) => {
                    if Path::new(dir).is_relative() || visible(grant, &p) {
                        Some(dir.to_string())
                    } else {
                        real.to_str().map(str::to_string)
                    }
                }
                _ => None,
            };
            PathEntry {
                dir: dir.to_string(),
                inside,
                exists: real.is_some(),
            }
        })
        .collect()
}

/// The call's PATH: the readable entries of `path`, in order. When none
/// is left, the readable part of [`DEFAULT_PATH`].
pub fn filter(grant: &Grant, path: &str) -> String {
    let kept: Vec<String> = entries(grant, path)
        .into_iter()
        .filter_map(|e| e.inside)
        .collect();
    if kept.is_empty() && path != DEFAULT_PATH {
        return filter(grant, DEFAULT_PATH);
    }
    kept.join(":")
}

/// The PATH the call starts from: an explicit value, else the operator's
/// when the grant passes it through, else [`DEFAULT_PATH`].
pub fn source<'a>(grant: &'a Grant, host_path: Option<&'a str>) -> &'a str {
    if let Some(p) = grant.env_set.get("PATH") {
        return p;
    }
    match host_path {
        Some(p) if grant.passes("PATH") => p,
        _ => DEFAULT_PATH,
    }
}

/// A directory of the operator's PATH that the call's PATH leaves out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DroppedDir {
    /// As written in PATH.
    pub dir: String,
    /// The flag that grants it: `--with python`, or `--read DIR`.
    pub fix: String,
}

/// The existing directories of the call's starting PATH ([`source`]) that
/// it leaves out, once each, with the flag that would keep them.
pub(crate) fn dropped(grant: &Grant, op: &Operator) -> Vec<DroppedDir> {
    let mut out: Vec<DroppedDir> = Vec::new();
    let mut covering = None;
    for e in entries(grant, source(grant, op.env.get("PATH"))) {
        if e.inside.is_some() || !e.exists || out.iter().any(|d| d.dir == e.dir) {
            continue;
        }
        let dir = normalize(&grant.project.join(&e.dir));
        let covering = covering.get_or_insert_with(|| presets::Covering::new(op));
        let fix = match covering.find(&dir) {
            Some(p) => p.flag(),
            None => {
                let dir = canon::canonical(&dir).unwrap_or(dir);
                match super::home::never_offered(&dir, &grant.homes, false) {
                    // Text an agent may read: never `--read` of a home or `/`.
                    Some(why) => format!("none offered ({why})"),
                    None => format!("--read {}", dir.display()),
                }
            }
        };
        out.push(DroppedDir { dir: e.dir, fix });
    }
    out
}

/// Whether `p` (absolute, normal) exists inside the call under this name:
/// beneath a root as written, or after a top-level link of `/` that the
/// constructed root re-creates (`/bin -> usr/bin`).
fn visible(grant: &Grant, p: &Path) -> bool {
    let mut parts = p.components();
    let top = match (parts.next(), parts.next()) {
        (Some(Component::RootDir), Some(Component::Normal(top))) => Path::new("/").join(top),
        _ => return false,
    };
    let through_top = top
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
        .then(|| canon::canonical(top).ok())
        .flatten()
        .map(|t| t.join(parts.as_path()));
    grant
        .read
        .iter()
        .chain(&grant.write)
        .any(|r| p.starts_with(r) || through_top.as_ref().is_some_and(|t| t.starts_with(r)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(root: &Path) -> Grant {
        let mut g = Grant::closed(root.join("project"));
        g.read = vec![root.join("usr"), root.join("toolchain")];
        g.write = vec![root.join("project")];
        g.denied = vec![root.join("usr/secret")];
        g
    }

    #[test]
    fn unreadable_directories_are_dropped_in_order() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        for d in [
            "usr/bin",
            "usr/secret/bin",
            "home/.pyenv/shims",
            "toolchain/bin",
            "project/bin",
        ] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        let g = grant(&root);
        let r = |d: &str| root.join(d).display().to_string();
        let path = [
            r("home/.pyenv/shims"),
            r("usr/bin"),
            r("missing"),
            r("usr/secret/bin"),
            r("toolchain/bin"),
            "bin".to_string(),
        ]
        .join(":");
        assert_eq!(
            filter(&g, &path),
            [r("usr/bin"), r("toolchain/bin"), "bin".into()].join(":")
        );
        let dropped: Vec<(String, bool)> = entries(&g, &path)
            .into_iter()
            .filter(|e| e.inside.is_none())
            .map(|e| (e.dir, e.exists))
            .collect();
        assert_eq!(
            dropped,
            [
                (r("home/.pyenv/shims"), true),
                (r("missing"), false),
                (r("usr/secret/bin"), true)
            ]
        );
    }

    #[test]
    fn a_directory_reached_through_a_link_outside_the_grant_keeps_its_real_name() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("toolchain/v20/bin")).unwrap();
        std::fs::create_dir_all(root.join("run")).unwrap();
        std::fs::create_dir_all(root.join("project")).unwrap();
        let link = root.join("run/shell1");
        std::os::unix::fs::symlink(root.join("toolchain/v20"), &link).unwrap();
        let g = grant(&root);
        let path = link.join("bin").display().to_string();
        assert_eq!(
            filter(&g, &path),
            root.join("toolchain/v20/bin").display().to_string()
        );
    }

    #[test]
    fn nothing_readable_falls_back_to_the_readable_default() {
        let g = Grant::closed("/nonexistent-project".into());
        assert_eq!(filter(&g, "/usr/bin"), "");
        let mut g = g;
        g.read.push("/usr".into());
        let f = filter(&g, "/opt/nothing-here");
        assert!(f.split(':').any(|d| d == "/usr/bin"), "{f}");
        assert!(!f.contains("/opt"), "{f}");
    }

    #[test]
    fn the_source_is_an_explicit_value_then_the_passed_one_then_the_default() {
        let mut g = Grant::closed("/p".into());
        assert_eq!(source(&g, Some("/a")), DEFAULT_PATH);
        g.env_allow.push("PA*".into());
        assert_eq!(source(&g, Some("/a")), "/a");
        assert_eq!(source(&g, None), DEFAULT_PATH);
        g.env_set.insert("PATH".into(), "/b".into());
        assert_eq!(source(&g, Some("/a")), "/b");
    }
}
