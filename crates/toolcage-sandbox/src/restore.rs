//! Namespace-free mode cannot make a protected path inside a write root
//! read-only (Landlock cannot take rights back beneath a granted
//! directory, and there is no mount namespace to re-bind it). Instead the
//! protected trees are saved before the call and put back after it: an
//! entry the call created is removed, an entry it changed or removed is
//! restored from the copy, and a change that cannot be undone (a file too
//! large to copy) makes the call's result an error.
//!
//! What decides what runs later is saved first and always, whatever else
//! the trees hold: every file of agent, editor and tool config, and in a
//! `.git` its config, hooks and info (a submodule's and a worktree's
//! too). The rest of a `.git` (objects, refs, logs) gets what is left of
//! the entry limit and a copy budget of its own.

use super::outcome::Unrestorable;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Files larger than this are checked, not copied.
const FILE_COPY_LIMIT: u64 = 4 << 20;
/// Bytes copied per call of files that decide what runs later.
const DECISIVE_COPY_LIMIT: u64 = 64 << 20;
/// Bytes copied per call of every other file.
const TOTAL_COPY_LIMIT: u64 = 32 << 20;
/// Entries walked per call; beyond it the rest of a `.git` is unchecked.
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
    /// It decides what runs later (see [`decisive`]).
    decisive: bool,
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

/// Whether `path` beneath the guarded `root` decides what runs later:
/// everything in a guarded tree other than a `.git`; in a `.git`, its
/// config files and whatever lies in a `hooks` or `info` directory.
fn decisive(root: &Path, path: &Path) -> bool {
    if root.file_name().is_none_or(|n| n != ".git") {
        return true;
    }
    let Ok(rel) = path.strip_prefix(root) else {
        return false;
    };
    let last = rel.file_name();
    rel.components()
        .any(|c| c.as_os_str() == "hooks" || c.as_os_str() == "info")
        || last.is_some_and(|n| n == "config" || n == "config.worktree" || n == "commondir")
}

/// Whether `path` in a `.git` may hold decisive entries deeper down: the
/// git directories of submodules (`modules/NAME/`, nested) and worktrees,
/// not their object stores.
fn may_hold_decisive(root: &Path, path: &Path) -> bool {
    let Ok(rel) = path.strip_prefix(root) else {
        return false;
    };
    let mut comps = rel.components().map(|c| c.as_os_str());
    matches!(comps.next(), Some(c) if c == "modules" || c == "worktrees")
        && !comps.any(|c| ["objects", "refs", "logs", "lfs"].iter().any(|o| c == *o))
}

/// The protected trees as they were before the call.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    entries: BTreeMap<PathBuf, Saved>,
    /// Directories whose every entry was recorded: whatever else is in
    /// them after the call, the call put there.
    listed: BTreeSet<PathBuf>,
    /// Roots that are protected (the rest are denied paths: saved and
    /// restored all the same, but nothing in them runs later).
    protected: BTreeSet<PathBuf>,
    /// Trees too large to walk completely: beyond what decides what runs
    /// later, only partly checked.
    pub incomplete: Vec<PathBuf>,
}

/// What [`Snapshot::restore`] did.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Restored {
    /// Changed or removed by the call, put back.
    pub restored: Vec<PathBuf>,
    /// Created by the call inside a protected directory: removed.
    pub removed: Vec<PathBuf>,
    /// Changed by the call and not restorable (no copy, or restoring failed).
    pub unrestorable: Vec<Unrestorable>,
}

impl Snapshot {
    /// Save the trees beneath the `protected` and `denied` roots. Paths
    /// that do not exist and symlinks are skipped: the quarantine handles a
    /// protected path a call creates or a link it replaces (a link's target
    /// is a root of its own). Fails when what decides what runs later is
    /// too large to walk.
    pub(crate) fn take(protected: &[PathBuf], denied: &[PathBuf]) -> Result<Snapshot, String> {
        let mut snap = Snapshot {
            protected: protected.iter().cloned().collect(),
            ..Snapshot::default()
        };
        let roots: Vec<&PathBuf> = protected
            .iter()
            .chain(denied)
            .filter(|r| r.symlink_metadata().is_ok_and(|m| !m.is_symlink()))
            .collect();
        for root in protected.iter().filter(|r| roots.contains(r)) {
            if !snap.walk_decisive(root, root) {
                return Err(format!(
                    "{} holds more than {ENTRY_LIMIT} entries of hooks and config: too many \
                     to guard without namespaces",
                    root.display()
                ));
            }
        }
        for root in &roots {
            if !snap.walk_all(root, root) {
                snap.incomplete.push(root.to_path_buf());
            }
        }
        snap.copy_files();
        Ok(snap)
    }

    /// Record `path` (once); whether it is a directory.
    fn record(&mut self, root: &Path, path: &Path) -> bool {
        if let Some(s) = self.entries.get(path) {
            return s.content == Content::Dir;
        }
        let Ok(m) = path.symlink_metadata() else {
            return false;
        };
        let ft = m.file_type();
        let content = if ft.is_dir() {
            Content::Dir
        } else if ft.is_symlink() {
            Content::Symlink(fs::read_link(path).unwrap_or_default())
        } else if ft.is_file() {
            Content::File(None) // copied once every entry is known
        } else {
            Content::Other
        };
        let dir = content == Content::Dir;
        self.entries.insert(
            path.to_path_buf(),
            Saved {
                content,
                mode: m.permissions().mode() & 0o7777,
                stamp: stamp(&m),
                decisive: self.decides(root, path),
            },
        );
        dir
    }

    fn children(path: &Path) -> Vec<PathBuf> {
        let mut children: Vec<PathBuf> = fs::read_dir(path)
            .map(|rd| rd.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        children.sort();
        children
    }

    fn decides(&self, root: &Path, path: &Path) -> bool {
        self.protected.contains(root) && decisive(root, path)
    }

    /// First pass: what decides what runs later, whole, and the
    /// directories leading to it. False when over the entry limit.
    fn walk_decisive(&mut self, root: &Path, path: &Path) -> bool {
        if self.decides(root, path) {
            return self.walk_all(root, path);
        }
        if self.entries.len() >= ENTRY_LIMIT {
            return false;
        }
        if !self.record(root, path) {
            return true;
        }
        for c in Self::children(path) {
            let wanted = self.decides(root, &c) || may_hold_decisive(root, &c);
            if wanted && !self.walk_decisive(root, &c) {
                return false;
            }
        }
        true
    }

    /// Second pass: everything else, up to the entry limit. False when the
    /// limit stopped the walk.
    fn walk_all(&mut self, root: &Path, path: &Path) -> bool {
        if self.listed.contains(path) {
            return true; // walked whole in the first pass
        }
        if self.entries.len() >= ENTRY_LIMIT && !self.entries.contains_key(path) {
            return false;
        }
        if !self.record(root, path) {
            return true;
        }
        for child in Self::children(path) {
            if !self.walk_all(root, &child) {
                return false;
            }
        }
        self.listed.insert(path.to_path_buf());
        true
    }

    /// Copy the files' content: what decides what runs later first, each
    /// kind within its own budget.
    fn copy_files(&mut self) {
        let (mut decisive_left, mut rest_left) = (DECISIVE_COPY_LIMIT, TOTAL_COPY_LIMIT);
        for first in [true, false] {
            for (path, saved) in self.entries.iter_mut() {
                if saved.decisive != first || saved.content != Content::File(None) {
                    continue;
                }
                let left = if first {
                    &mut decisive_left
                } else {
                    &mut rest_left
                };
                let size = saved.stamp.2;
                if size > FILE_COPY_LIMIT || size > *left {
                    continue;
                }
                if let Ok(bytes) = fs::read(path)
                    && bytes.len() as u64 == size
                {
                    *left -= size;
                    saved.content = Content::File(Some(bytes));
                }
            }
        }
    }

    /// Put the trees back as they were; see [`Restored`].
    pub(crate) fn restore(&self) -> Restored {
        let mut out = Restored::default();
        // New entries first: a directory walked whole holds nothing else.
        let uncopied = self.uncopied();
        for dir in &self.listed {
            self.remove_new(dir, &uncopied, &mut out);
        }
        // Then every saved entry, parents before children (BTreeMap order).
        for (path, saved) in &self.entries {
            if self.unchanged(path, saved) {
                continue;
            }
            match self.put_back(path, saved) {
                Ok(()) => out.restored.push(path.clone()),
                Err(e) => out.unrestorable.push(Unrestorable {
                    path: path.clone(),
                    reason: e.to_string(),
                }),
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

    /// The identities of the saved files toolcage has no copy of.
    fn uncopied(&self) -> HashSet<(u64, u64)> {
        self.entries
            .values()
            .filter(|s| matches!(s.content, Content::File(None) | Content::Other))
            .map(|s| (s.stamp.0, s.stamp.1))
            .collect()
    }

    /// Remove what is in `dir` now and was not before (a directory that is
    /// no longer one is put back by [`Self::put_back`]). What holds a file
    /// toolcage has no copy of (the call renamed or linked it there) is
    /// left in place and reported: removing it would lose the only one.
    fn remove_new(&self, dir: &Path, uncopied: &HashSet<(u64, u64)>, out: &mut Restored) {
        if !dir.symlink_metadata().is_ok_and(|m| m.is_dir()) {
            return;
        }
        for child in Self::children(dir) {
            if self.entries.contains_key(&child) {
                continue;
            }
            if !uncopied.is_empty() && holds_any(&child, uncopied, &mut 0) {
                out.unrestorable.push(Unrestorable {
                    path: child,
                    reason: "the call moved or linked there a file toolcage has no copy of; \
                             left in place"
                        .into(),
                });
                continue;
            }
            match super::quarantine::remove(&child) {
                Ok(()) => out.removed.push(child),
                Err(e) => out.unrestorable.push(Unrestorable {
                    path: child,
                    reason: format!("removing what the call left there: {e}"),
                }),
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
                    _ => Err(std::io::Error::other(no_copy(saved))),
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

/// Whether `path` is, or holds without following links, a file whose
/// identity is in `ids`; past [`ENTRY_LIMIT`] entries it is assumed to.
fn holds_any(path: &Path, ids: &HashSet<(u64, u64)>, seen: &mut usize) -> bool {
    *seen += 1;
    if *seen > ENTRY_LIMIT {
        return true;
    }
    let Ok(m) = path.symlink_metadata() else {
        return false;
    };
    if ids.contains(&(m.dev(), m.ino())) {
        return true;
    }
    m.is_dir()
        && fs::read_dir(path)
            .map(|rd| rd.flatten().any(|e| holds_any(&e.path(), ids, seen)))
            .unwrap_or(false)
}

/// Why there is no copy of `saved`.
fn no_copy(saved: &Saved) -> String {
    let mib = |b: u64| b >> 20;
    match &saved.content {
        Content::Other => "not a file, directory or symlink: no copy".into(),
        _ if saved.stamp.2 > FILE_COPY_LIMIT => format!(
            "no copy: namespace-free mode copies files up to {} MiB",
            mib(FILE_COPY_LIMIT)
        ),
        _ => format!(
            "no copy: over namespace-free mode's copy budget ({} MiB for hooks and config, \
             {} MiB for the rest)",
            mib(DECISIVE_COPY_LIMIT),
            mib(TOTAL_COPY_LIMIT)
        ),
    }
}

fn stamp_but_ctime(m: &fs::Metadata) -> (u64, u64, u64, i128) {
    let s = stamp(m);
    (s.0, s.1, s.2, s.3)
}

fn stamp_but_ctime_saved(s: &Saved) -> (u64, u64, u64, i128) {
    (s.stamp.0, s.stamp.1, s.stamp.2, s.stamp.3)
}

/// What namespace-free mode saves before a call and restores after it:
/// protected paths inside write roots, with what a protected symlink
/// inside a write root points to (as the constructed root's read-only bind
/// would protect it); and denied paths inside them (unreadable they cannot
/// be made; unchanged they stay). Returns (protected, denied).
pub(crate) fn guarded(grant: &toolcage_policy::Grant) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut protected = super::mode::protected_inside_write_roots(grant);
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
    protected.extend(targets);
    let denied = grant
        .denied
        .iter()
        .filter(|p| grant.write.iter().any(|w| p.starts_with(w) && *p != w))
        .cloned()
        .collect();
    (protected, denied)
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

    fn take(root: &Path) -> Snapshot {
        Snapshot::take(&[root.to_path_buf()], &[]).unwrap()
    }

    #[test]
    fn unchanged_tree_restores_nothing() {
        let (_d, git) = tree();
        assert_eq!(take(&git).restore(), Restored::default());
    }

    #[test]
    fn changes_are_undone_and_new_entries_removed() {
        let (_d, git) = tree();
        let snap = take(&git);
        fs::write(git.join("config"), "[core]\nfsmonitor = evil\n").unwrap();
        fs::remove_file(git.join("HEAD")).unwrap();
        fs::write(git.join("hooks/pre-commit"), "#!/bin/sh\nevil\n").unwrap();
        fs::create_dir_all(git.join("objects/ab")).unwrap();
        fs::set_permissions(git.join("hooks"), fs::Permissions::from_mode(0o777)).unwrap();
        let r = snap.restore();
        assert_eq!(fs::read_to_string(git.join("config")).unwrap(), "[core]\n");
        assert_eq!(
            fs::read_to_string(git.join("HEAD")).unwrap(),
            "ref: refs/heads/main\n"
        );
        assert!(!git.join("hooks/pre-commit").exists());
        assert!(!git.join("objects").exists());
        let mode = fs::metadata(git.join("hooks"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_ne!(mode, 0o777);
        assert!(r.unrestorable.is_empty(), "{r:?}");
        assert_eq!(
            r.removed,
            vec![git.join("objects"), git.join("hooks/pre-commit")]
        );
        // Nothing of it is left for the next call's snapshot to walk.
        assert_eq!(fs::read_dir(&git).unwrap().count(), 3);
    }

    #[test]
    fn hooks_and_config_are_copied_whatever_else_the_tree_holds() {
        let (_d, git) = tree();
        // Files sorted before `config`, more than the copy budget.
        fs::create_dir(git.join("aaa")).unwrap();
        let four_mib = vec![b'x'; FILE_COPY_LIMIT as usize];
        for n in 0..=TOTAL_COPY_LIMIT / FILE_COPY_LIMIT {
            fs::write(git.join(format!("aaa/{n}")), &four_mib).unwrap();
        }
        fs::write(git.join("hooks/post-checkout"), "#!/bin/sh\n").unwrap();
        let snap = take(&git);
        fs::write(git.join("config"), "[core]\nfsmonitor = evil\n").unwrap();
        fs::write(git.join("hooks/post-checkout"), "#!/bin/sh\nevil\n").unwrap();
        let r = snap.restore();
        assert!(r.unrestorable.is_empty(), "{r:?}");
        assert_eq!(fs::read_to_string(git.join("config")).unwrap(), "[core]\n");
        assert_eq!(
            fs::read_to_string(git.join("hooks/post-checkout")).unwrap(),
            "#!/bin/sh\n"
        );
        // Control: what is past the budget and not decisive has no copy,
        // and a change to it is reported, not hidden.
        let last = git.join(format!("aaa/{}", TOTAL_COPY_LIMIT / FILE_COPY_LIMIT));
        fs::write(&last, "changed").unwrap();
        let r = snap.restore();
        assert_eq!(r.unrestorable.len(), 1, "{r:?}");
        assert_eq!(r.unrestorable[0].path, last);
        assert!(r.unrestorable[0].reason.contains("copy budget"), "{r:?}");
    }

    #[test]
    fn a_file_without_copy_moved_into_a_new_entry_is_not_removed() {
        let (_d, git) = tree();
        let pack = git.join("objects/pack/big.pack");
        fs::create_dir_all(pack.parent().unwrap()).unwrap();
        fs::write(&pack, vec![b'p'; FILE_COPY_LIMIT as usize + 1]).unwrap();
        let snap = take(&git);
        fs::create_dir(git.join("moved")).unwrap();
        fs::rename(git.join("objects"), git.join("moved/objects")).unwrap();
        fs::create_dir(git.join("planted")).unwrap();
        let r = snap.restore();
        // The only instance of the pack stays where the call put it...
        assert_eq!(
            fs::metadata(git.join("moved/objects/pack/big.pack"))
                .unwrap()
                .len(),
            FILE_COPY_LIMIT + 1
        );
        let failed: Vec<&Path> = r.unrestorable.iter().map(|u| u.path.as_path()).collect();
        assert_eq!(failed, vec![git.join("moved").as_path(), pack.as_path()]);
        // ...control: what holds nothing of the kind is removed.
        assert_eq!(r.removed, vec![git.join("planted")]);
    }

    #[test]
    fn only_git_config_hooks_and_info_are_decisive() {
        let g = Path::new("/p/.git");
        for p in [
            "config",
            "hooks/pre-commit",
            "info/attributes",
            "modules/sub/config",
            "modules/sub/hooks/post-merge",
            "worktrees/w/config.worktree",
        ] {
            assert!(decisive(g, &g.join(p)), "{p}");
        }
        for p in ["objects/ab/cdef", "HEAD", "refs/heads/main", "modules/sub"] {
            assert!(!decisive(g, &g.join(p)), "{p}");
        }
        assert!(decisive(Path::new("/p/.vscode"), Path::new("/p/.vscode/x")));
        assert!(may_hold_decisive(g, &g.join("modules/a/modules/b")));
        assert!(!may_hold_decisive(g, &g.join("modules/a/objects")));
    }

    #[test]
    fn replaced_by_a_symlink_is_put_back() {
        let (d, git) = tree();
        let snap = take(&git);
        let evil = d.path().join("evil");
        fs::write(&evil, "x").unwrap();
        fs::remove_file(git.join("config")).unwrap();
        std::os::unix::fs::symlink(&evil, git.join("config")).unwrap();
        snap.restore();
        let m = git.join("config").symlink_metadata().unwrap();
        assert!(m.is_file());
        assert_eq!(fs::read_to_string(git.join("config")).unwrap(), "[core]\n");
    }

    #[test]
    fn missing_roots_are_skipped() {
        let d = tempfile::tempdir().unwrap();
        let snap = take(&d.path().join("absent"));
        assert!(snap.entries.is_empty());
    }
}
