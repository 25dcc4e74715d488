//! Namespace-free mode cannot make a protected path inside a write root
//! read-only (Landlock cannot take rights back beneath a granted
//! directory, and there is no mount namespace to re-bind it). Instead the
//! protected trees are saved before the call and put back after it:
//! an entry the call created is moved aside, an entry it changed or
//! removed is restored from the copy. Files too large for the copy are
//! only checked; a change to one of them is reported as not restorable.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Files larger than this are checked, not copied.
const FILE_COPY_LIMIT: u64 = 4 << 20;
/// Bytes copied per call across every protected tree.
const TOTAL_COPY_LIMIT: u64 = 32 << 20;
/// Entries walked per call; beyond it the rest is reported as unchecked.
const ENTRY_LIMIT: usize = 100_000;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Content {
    Dir,
    File(Option<Vec<u8>>),
    Symlink(PathBuf),
    Other,
}

#[derive(Debug, Clone)]
struct Saved {
    content: Content,
    mode: u32,
    /// dev, ino, size, mtime (ns), ctime (ns): any change shows in one.
    stamp: (u64, u64, u64, i128, i128),
}

fn stamp(m: &fs::Metadata) -> (u64, u64, u64, i128, i128) {
    let ns = |s: i64, n: i64| s as i128 * 1_000_000_000 + n as i128;
    (
        m.dev(),
        m.ino(),
        m.size(),
        ns(m.mtime(), m.mtime_nsec()),
        ns(m.ctime(), m.ctime_nsec()),
    )
}

/// The protected trees as they were before the call.
#[derive(Debug, Default)]
pub struct Snapshot {
    entries: BTreeMap<PathBuf, Saved>,
    roots: Vec<PathBuf>,
    /// Trees too large to walk completely: not guarded.
    pub incomplete: Vec<PathBuf>,
}

/// What [`Snapshot::restore`] did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Restored {
    /// Changed or removed by the call, put back.
    pub restored: Vec<PathBuf>,
    /// Created by the call, moved aside: (path, where to).
    pub moved_aside: Vec<(PathBuf, PathBuf)>,
    /// Changed by the call and not restorable (no copy, or restoring failed).
    pub unrestorable: Vec<PathBuf>,
}

impl Snapshot {
    /// Save the trees beneath `roots` (paths that do not exist are skipped:
    /// the quarantine handles protected paths a call creates).
    pub fn take(roots: &[PathBuf]) -> Snapshot {
        let mut snap = Snapshot::default();
        let mut budget = TOTAL_COPY_LIMIT;
        for root in roots {
            if root.symlink_metadata().is_err() {
                continue;
            }
            snap.roots.push(root.clone());
            if !snap.walk(root, &mut budget) {
                snap.incomplete.push(root.clone());
            }
        }
        snap
    }

    /// Record `path` and what is beneath it; false when the entry limit
    /// stopped the walk.
    fn walk(&mut self, path: &Path, budget: &mut u64) -> bool {
        if self.entries.len() >= ENTRY_LIMIT {
            return false;
        }
        let Ok(m) = path.symlink_metadata() else {
            return true;
        };
        let ft = m.file_type();
        let content = if ft.is_dir() {
            Content::Dir
        } else if ft.is_symlink() {
            Content::Symlink(fs::read_link(path).unwrap_or_default())
        } else if ft.is_file() {
            let copy = (m.size() <= FILE_COPY_LIMIT && m.size() <= *budget)
                .then(|| fs::read(path).ok())
                .flatten();
            if let Some(c) = &copy {
                *budget -= c.len() as u64;
            }
            Content::File(copy)
        } else {
            Content::Other
        };
        self.entries.insert(
            path.to_path_buf(),
            Saved {
                content: content.clone(),
                mode: m.permissions().mode() & 0o7777,
                stamp: stamp(&m),
            },
        );
        if content == Content::Dir
            && let Ok(rd) = fs::read_dir(path)
        {
            let mut children: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
            children.sort();
            for child in children {
                if !self.walk(&child, budget) {
                    return false;
                }
            }
        }
        true
    }

    /// Put the trees back as they were; see [`Restored`].
    pub fn restore(&self, now_secs: u64) -> Restored {
        let mut out = Restored::default();
        // New entries first (deepest last is fine: moving a new directory
        // aside takes what is in it along).
        for root in &self.roots {
            self.move_aside_new(root, now_secs, &mut out);
        }
        // Then every saved entry, parents before children (BTreeMap order).
        for (path, saved) in &self.entries {
            if self.unchanged(path, saved) {
                continue;
            }
            match self.put_back(path, saved) {
                Ok(()) => out.restored.push(path.clone()),
                Err(_) => out.unrestorable.push(path.clone()),
            }
        }
        out
    }

    fn unchanged(&self, path: &Path, saved: &Saved) -> bool {
        let Ok(m) = path.symlink_metadata() else {
            return false;
        };
        if m.permissions().mode() & 0o7777 != saved.mode {
            return false;
        }
        match &saved.content {
            // A directory's own stamp changes whenever an entry is added or
            // removed; its entries are checked one by one.
            Content::Dir => m.is_dir() && (m.dev(), m.ino()) == (saved.stamp.0, saved.stamp.1),
            _ => stamp(&m) == saved.stamp,
        }
    }

    fn move_aside_new(&self, path: &Path, now_secs: u64, out: &mut Restored) {
        let Ok(m) = path.symlink_metadata() else {
            return;
        };
        if !self.entries.contains_key(path) {
            let aside = aside_name(path, now_secs);
            if fs::rename(path, &aside).is_ok() {
                out.moved_aside.push((path.to_path_buf(), aside));
            } else {
                out.unrestorable.push(path.to_path_buf());
            }
            return;
        }
        if m.is_dir()
            && let Ok(rd) = fs::read_dir(path)
        {
            for e in rd.flatten() {
                self.move_aside_new(&e.path(), now_secs, out);
            }
        }
    }

    fn put_back(&self, path: &Path, saved: &Saved) -> std::io::Result<()> {
        let current = path.symlink_metadata().ok();
        let same_kind = current.as_ref().is_some_and(|m| match &saved.content {
            Content::Dir => m.is_dir(),
            Content::File(_) => m.is_file(),
            Content::Symlink(_) => m.file_type().is_symlink(),
            Content::Other => false,
        });
        match &saved.content {
            Content::Dir => {
                if !same_kind {
                    if current.is_some() {
                        fs::remove_file(path)?;
                    }
                    fs::create_dir(path)?;
                }
                fs::set_permissions(path, fs::Permissions::from_mode(saved.mode))
            }
            Content::File(Some(bytes)) => {
                // Write beside it and rename over: a hard link the call made
                // to the file elsewhere keeps the call's content, not ours.
                let tmp = path.with_file_name(format!(
                    ".{}.toolcage-restore",
                    path.file_name().unwrap_or_default().to_string_lossy()
                ));
                let _ = fs::remove_file(&tmp);
                let mut f = fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(saved.mode)
                    .open(&tmp)?;
                f.write_all(bytes)?;
                f.set_permissions(fs::Permissions::from_mode(saved.mode))?;
                drop(f);
                if current.as_ref().is_some_and(|m| m.is_dir()) {
                    fs::remove_dir_all(path)?;
                }
                fs::rename(&tmp, path)
            }
            Content::File(None) | Content::Other => {
                // No copy: only a mode change can be undone.
                match current {
                    Some(m) if same_kind && stamp_but_ctime(&m) == stamp_but_ctime_saved(saved) => {
                        fs::set_permissions(path, fs::Permissions::from_mode(saved.mode))
                    }
                    _ => Err(std::io::Error::other("no copy")),
                }
            }
            Content::Symlink(target) => {
                if let Some(m) = &current {
                    if m.is_dir() {
                        fs::remove_dir_all(path)?;
                    } else {
                        fs::remove_file(path)?;
                    }
                }
                std::os::unix::fs::symlink(target, path)
            }
        }
    }
}

fn stamp_but_ctime(m: &fs::Metadata) -> (u64, u64, u64, i128) {
    let s = stamp(m);
    (s.0, s.1, s.2, s.3)
}

fn stamp_but_ctime_saved(s: &Saved) -> (u64, u64, u64, i128) {
    (s.stamp.0, s.stamp.1, s.stamp.2, s.stamp.3)
}

/// `<name>.quarantined-by-toolcage-<secs>` beside `path`.
pub fn aside_name(path: &Path, now_secs: u64) -> PathBuf {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    path.with_file_name(format!("{name}.quarantined-by-toolcage-{now_secs}"))
}

/// What namespace-free mode saves before a call and restores after it:
/// protected paths inside write roots, denied paths inside them
/// (unreadable they cannot be made; unchanged they stay), and what a
/// protected symlink inside a write root points to (as the constructed
/// root's read-only bind would protect it).
pub fn guarded(grant: &toolcage_policy::Grant) -> Vec<std::path::PathBuf> {
    let mut guarded = super::mode::protected_inside_write_roots(grant);
    // Denied paths too: unreadable they cannot be, unchanged they stay.
    guarded.extend(
        grant
            .denied
            .iter()
            .filter(|p| grant.write.iter().any(|w| p.starts_with(w) && *p != w))
            .cloned(),
    );
    // A protected symlink protects what it points to (as the read-only
    // bind of the constructed root does).
    let targets: Vec<PathBuf> = grant
        .protected
        .iter()
        .filter(|p| {
            p.symlink_metadata()
                .is_ok_and(|m| m.file_type().is_symlink())
        })
        .filter_map(|p| p.canonicalize().ok())
        .filter(|t| grant.write.iter().any(|w| t.starts_with(w)))
        .collect();
    guarded.extend(targets);
    guarded
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let git = d.path().join(".git");
        fs::create_dir_all(git.join("hooks")).unwrap();
        fs::write(git.join("config"), "[core]\n").unwrap();
        fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        (d, git)
    }

    #[test]
    fn unchanged_tree_restores_nothing() {
        let (_d, git) = tree();
        let snap = Snapshot::take(std::slice::from_ref(&git));
        assert_eq!(snap.restore(1), Restored::default());
    }

    #[test]
    fn changes_are_undone_and_new_entries_moved_aside() {
        let (_d, git) = tree();
        let snap = Snapshot::take(std::slice::from_ref(&git));
        fs::write(git.join("config"), "[core]\nfsmonitor = evil\n").unwrap();
        fs::remove_file(git.join("HEAD")).unwrap();
        fs::write(git.join("hooks/pre-commit"), "#!/bin/sh\nevil\n").unwrap();
        fs::set_permissions(git.join("hooks"), fs::Permissions::from_mode(0o777)).unwrap();
        let r = snap.restore(7);
        assert_eq!(fs::read_to_string(git.join("config")).unwrap(), "[core]\n");
        assert_eq!(
            fs::read_to_string(git.join("HEAD")).unwrap(),
            "ref: refs/heads/main\n"
        );
        assert!(!git.join("hooks/pre-commit").exists());
        assert!(
            git.join("hooks/pre-commit.quarantined-by-toolcage-7")
                .exists()
        );
        let mode = fs::metadata(git.join("hooks"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_ne!(mode, 0o777);
        assert!(r.unrestorable.is_empty(), "{r:?}");
        assert_eq!(r.moved_aside.len(), 1);
    }

    #[test]
    fn replaced_by_a_symlink_is_put_back() {
        let (d, git) = tree();
        let snap = Snapshot::take(std::slice::from_ref(&git));
        let evil = d.path().join("evil");
        fs::write(&evil, "x").unwrap();
        fs::remove_file(git.join("config")).unwrap();
        std::os::unix::fs::symlink(&evil, git.join("config")).unwrap();
        snap.restore(1);
        let m = git.join("config").symlink_metadata().unwrap();
        assert!(m.is_file());
        assert_eq!(fs::read_to_string(git.join("config")).unwrap(), "[core]\n");
    }

    #[test]
    fn missing_roots_are_skipped() {
        let d = tempfile::tempdir().unwrap();
        let snap = Snapshot::take(&[d.path().join("absent")]);
        assert!(snap.roots.is_empty());
    }
}
