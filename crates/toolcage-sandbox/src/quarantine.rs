//! After the call: a protected path that was absent stays absent.
//!
//! No mount can cover a name that does not exist, and Landlock cannot forbid
//! one name inside a writable directory, so a call can create a missing
//! protected path (`tools.toml`, `.mcp.json`, a tool directory, `.envrc`,
//! a fresh `.git`). Whatever it created there is moved, as soon as the call
//! ends, into a directory toolcage makes for it beside the path (the same
//! filesystem, so the rename cannot cross devices) under a random name the
//! call could not have guessed, `.toolcage-quarantine-XXXXXXXXXXXX`; the
//! rename never replaces anything there (`RENAME_NOREPLACE`). Where that
//! fails it is removed; where removal fails too, the path is reported as not
//! undone and the call's result is an error. A protected symlink the call
//! replaced is put back the same way. Discovery never reads the quarantine
//! (a hidden directory beside the tool directories, never inside one); the
//! person can inspect it and restore it by hand.

use super::outcome::{Quarantined, Unrestorable};
use nix::errno::Errno;
use nix::fcntl::{OFlag, RenameFlags};
use nix::sys::stat::Mode;
use std::collections::BTreeMap;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// Names of the per-call directories what a call created is moved into.
pub(crate) const PREFIX: &str = ".toolcage-quarantine-";

/// What toolcage did about protected paths after a call.
#[derive(Debug, Default)]
pub(crate) struct AfterCall {
    pub created: Vec<PathBuf>,
    pub quarantined: Vec<Quarantined>,
    pub removed: Vec<PathBuf>,
    pub failed: Vec<Unrestorable>,
}

/// The call's quarantine directories, made on first use, one per parent.
#[derive(Default)]
struct Aside {
    dirs: BTreeMap<PathBuf, (OwnedFd, PathBuf)>,
}

/// How a path was put out of the way.
enum Undone {
    Moved(PathBuf),
    Removed,
}

/// Twelve letters and digits from the kernel's random source.
fn random_name() -> std::io::Result<String> {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut bytes = [0u8; 12];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes
        .iter()
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect())
}

fn open_dir(dirfd: Option<&OwnedFd>, path: &Path) -> nix::Result<OwnedFd> {
    let flags = OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    match dirfd {
        Some(fd) => nix::fcntl::openat(fd, path, flags, Mode::empty()),
        None => nix::fcntl::open(path, flags, Mode::empty()),
    }
}

impl Aside {
    /// A fresh directory beside `parent`'s entries: created here (mkdir
    /// fails on any existing name, so it is ours) and opened without
    /// following links. Returns the parent's and its descriptors.
    fn dir_in(&mut self, parent: &Path) -> Result<(&OwnedFd, &Path), String> {
        if !self.dirs.contains_key(parent) {
            let pfd = open_dir(None, parent).map_err(|e| format!("opening the parent: {e}"))?;
            let mut last = Errno::EEXIST;
            for _ in 0..8 {
                let name = format!("{PREFIX}{}", random_name().map_err(|e| e.to_string())?);
                match nix::sys::stat::mkdirat(&pfd, name.as_str(), Mode::from_bits_truncate(0o700))
                {
                    Ok(()) => {
                        let qfd = open_dir(Some(&pfd), Path::new(&name))
                            .map_err(|e| format!("opening {name}: {e}"))?;
                        self.dirs
                            .insert(parent.to_path_buf(), (qfd, parent.join(&name)));
                        break;
                    }
                    Err(e) => last = e,
                }
            }
            if !self.dirs.contains_key(parent) {
                return Err(format!("creating the quarantine directory: {last}"));
            }
            drop(pfd);
        }
        let (fd, path) = &self.dirs[parent];
        Ok((fd, path))
    }

    /// Move `path` into the quarantine beside it; never replaces anything.
    fn move_in(&mut self, path: &Path) -> Result<PathBuf, String> {
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err("no parent directory".into());
        };
        let pfd = open_dir(None, parent).map_err(|e| format!("opening the parent: {e}"))?;
        let (qfd, qpath) = self.dir_in(parent)?;
        let to = qpath.join(name);
        nix::fcntl::renameat2(&pfd, name, qfd, name, RenameFlags::RENAME_NOREPLACE)
            .map_err(|e| format!("moving it aside: {e}"))?;
        Ok(to)
    }

    /// Put `path` out of the way: moved aside, else removed. Checks that
    /// nothing is left at the path.
    fn undo(&mut self, path: &Path) -> Result<Undone, String> {
        let done = match self.move_in(path) {
            Ok(to) => Undone::Moved(to),
            Err(moving) => remove(path)
                .map(|()| Undone::Removed)
                .map_err(|e| format!("{moving}; removing it: {e}"))?,
        };
        match path.symlink_metadata() {
            Err(_) => Ok(done),
            Ok(_) => Err("something is there again".into()),
        }
    }
}

/// Remove `path`, a whole directory without following links in it.
pub(crate) fn remove(path: &Path) -> std::io::Result<()> {
    match path.symlink_metadata()?.is_dir() {
        true => std::fs::remove_dir_all(path),
        false => std::fs::remove_file(path),
    }
}

/// Check the protected paths after a call: `missing` were absent before it,
/// `links` were symlinks (with their target). What the call created or
/// replaced there is put out of the way, into `out`.
pub(crate) fn after_call(
    missing: Vec<PathBuf>,
    links: Vec<(PathBuf, PathBuf)>,
    out: &mut AfterCall,
) {
    let mut aside = Aside::default();
    let mut undo = |p: &Path, out: &mut AfterCall| match aside.undo(p) {
        Ok(Undone::Moved(to)) => {
            out.quarantined.push(Quarantined {
                path: p.to_path_buf(),
                moved_to: to,
            });
            true
        }
        Ok(Undone::Removed) => {
            out.removed.push(p.to_path_buf());
            true
        }
        Err(reason) => {
            out.failed.push(Unrestorable {
                path: p.to_path_buf(),
                reason,
            });
            false
        }
    };
    for p in missing {
        if p.symlink_metadata().is_ok() {
            undo(&p, out);
            out.created.push(p);
        }
    }
    for (p, link) in links {
        if std::fs::read_link(&p).ok().as_ref() == Some(&link) {
            continue;
        }
        let cleared = p.symlink_metadata().is_err() || undo(&p, out);
        if cleared && let Err(e) = std::os::unix::fs::symlink(&link, &p) {
            out.failed.push(Unrestorable {
                path: p.clone(),
                reason: format!("putting the symlink back: {e}"),
            });
        }
        out.created.push(p);
    }
}

/// The paths of `replaced` the call could have replaced: those whose parent
/// directory lies inside a write root. A path elsewhere changed during the
/// call, not by it (a host's `useradd` replacing `/etc/shadow`).
pub(crate) fn reachable(replaced: Vec<PathBuf>, write: &[PathBuf]) -> Vec<PathBuf> {
    replaced
        .into_iter()
        .filter(|p| write.iter().any(|w| p.starts_with(w) && p != w))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_created_missing_path_is_moved_aside_and_a_swapped_link_restored() {
        let t = tempfile::tempdir().unwrap();
        let missing = t.path().join("tools.toml");
        std::fs::write(&missing, "planted").unwrap();
        let link = t.path().join(".agents");
        std::fs::create_dir(&link).unwrap(); // replaced the symlink
        let untouched = t.path().join(".mcp.json"); // still absent
        let mut out = AfterCall::default();
        after_call(
            vec![missing.clone(), untouched.clone()],
            vec![(link.clone(), PathBuf::from("agents-real"))],
            &mut out,
        );
        assert_eq!(out.created, vec![missing.clone(), link.clone()]);
        assert_eq!(out.quarantined.len(), 2);
        assert!(out.failed.is_empty(), "{:?}", out.failed);
        assert!(
            missing.symlink_metadata().is_err(),
            "tools.toml stays absent"
        );
        let q = &out.quarantined[0];
        assert_eq!(std::fs::read_to_string(&q.moved_to).unwrap(), "planted");
        let dir = q.moved_to.parent().unwrap();
        assert_eq!(dir.parent().unwrap(), t.path());
        let name = dir.file_name().unwrap().to_string_lossy();
        assert!(name.starts_with(PREFIX) && name.len() == PREFIX.len() + 12);
        // One directory per call and parent.
        assert_eq!(out.quarantined[1].moved_to, dir.join(".agents"));
        assert_eq!(
            std::fs::read_link(&link).unwrap(),
            PathBuf::from("agents-real")
        );
        assert!(!untouched.exists());
    }

    #[test]
    fn pre_created_names_cannot_keep_a_created_path_in_place() {
        // Every name the old scheme would try, and more, taken in advance.
        let t = tempfile::tempdir().unwrap();
        for n in 0..200 {
            std::fs::create_dir(t.path().join(format!(".git.quarantined-by-toolcage-{n}")))
                .unwrap();
            std::fs::create_dir(t.path().join(format!("{PREFIX}{n}"))).unwrap();
        }
        let git = t.path().join(".git");
        std::fs::create_dir(&git).unwrap();
        std::fs::write(git.join("config"), "[core]\nfsmonitor = evil\n").unwrap();
        let mut out = AfterCall::default();
        after_call(vec![git.clone()], vec![], &mut out);
        assert!(git.symlink_metadata().is_err());
        assert!(out.quarantined[0].moved_to.join("config").is_file());
    }

    #[test]
    fn what_can_be_neither_moved_nor_removed_is_a_failure() {
        // /proc/self/status cannot be renamed or unlinked, by root either.
        let p = PathBuf::from("/proc/self/status");
        let mut out = AfterCall::default();
        after_call(vec![p.clone()], vec![], &mut out);
        assert_eq!(out.created, vec![p.clone()]);
        assert!(out.quarantined.is_empty() && out.removed.is_empty());
        assert_eq!(out.failed.len(), 1, "{:?}", out.failed);
        assert_eq!(out.failed[0].path, p);
        assert!(out.failed[0].reason.contains("removing it"));
    }

    #[test]
    fn only_paths_the_call_can_reach_are_its_doing() {
        let write = vec![PathBuf::from("/p")];
        let got = reachable(
            vec!["/etc/shadow".into(), "/p".into(), "/p/.env".into()],
            &write,
        );
        assert_eq!(got, vec![PathBuf::from("/p/.env")]);
    }
}
