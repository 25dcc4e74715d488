//! Canonicalization with a memory: one resolution canonicalizes ~60 paths
//! that share a few parents (the project, `/etc`), and `realpath(3)` walks
//! every component of each again (~550 syscalls per resolution). Here each
//! path component is looked at once per `Canon`; the results match
//! `std::fs::canonicalize` and [`super::paths::canonical_lenient`].
//!
//! The memory lives for one resolution (`memo`), or for the preparation
//! of one call up to its clone ([`remember`], in the sandbox crate): the
//! filesystem may change between calls (a protected directory created, a
//! symlink replaced). Outside one, [`canonical`] and `lenient` ask the
//! kernel every time.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// What one path (whose parent is canonical) is.
#[derive(Clone)]
enum Node {
    Dir,
    /// Anything else that exists and is not a symlink.
    Other,
    Link(PathBuf),
    /// lstat or readlink failed with this errno.
    Error(i32),
}

/// Symlinks followed in one walk before `ELOOP`, as the kernel allows.
const MAX_LINKS: usize = 40;

/// The memory of one resolution.
#[derive(Default)]
pub(crate) struct Canon {
    /// By the path's bytes: every key is a canonical directory joined with
    /// one name, so equal paths have equal bytes.
    nodes: RefCell<BTreeMap<Vec<u8>, Node>>,
    /// Answers of [`Canon::canonical`] for normal absolute paths: most
    /// paths of a grant share their parents.
    done: RefCell<BTreeMap<Vec<u8>, Result<PathBuf, i32>>>,
}

fn errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

impl Canon {
    pub(crate) fn new() -> Canon {
        Canon::default()
    }

    /// `lstat` (and `readlink` for a link) of `p`, a canonical parent
    /// joined with one name, remembered.
    fn node(&self, p: &Path) -> Node {
        let key = p.as_os_str().as_bytes();
        if let Some(n) = self.nodes.borrow().get(key) {
            return n.clone();
        }
        let n = match p.symlink_metadata() {
            Ok(m) if m.file_type().is_symlink() => match std::fs::read_link(p) {
                Ok(t) => Node::Link(t),
                Err(e) => Node::Error(errno(&e)),
            },
            Ok(m) if m.is_dir() => Node::Dir,
            Ok(_) => Node::Other,
            Err(e) => Node::Error(errno(&e)),
        };
        self.nodes.borrow_mut().insert(key.to_vec(), n.clone());
        n
    }

    /// What `std::fs::canonicalize(p)` returns (relative paths are taken
    /// from the current directory).
    pub(crate) fn canonical(&self, p: &Path) -> io::Result<PathBuf> {
        let bytes = p.as_os_str().as_bytes();
        // A normal absolute path without `..`: its parent's answer, then
        // one more name.
        let direct = super::paths::is_plain(p) && !bytes.split(|b| *b == b'/').any(|n| n == b"..");
        if !direct {
            return self.walk(p, &mut Vec::new());
        }
        if let Some(r) = self.done.borrow().get(bytes) {
            return r.clone().map_err(io::Error::from_raw_os_error);
        }
        let r = match (p.parent(), p.file_name()) {
            (Some(parent), Some(name)) => self.canonical(parent).and_then(|dir| {
                let next = dir.join(name);
                match self.node(&next) {
                    Node::Dir | Node::Other => Ok(next),
                    Node::Error(e) => Err(io::Error::from_raw_os_error(e)),
                    // The target, taken from the link's directory.
                    Node::Link(target) => self.walk(&dir.join(target), &mut Vec::new()),
                }
            }),
            _ => Ok(PathBuf::from("/")),
        };
        let stored = r.as_ref().map(|c| c.clone()).map_err(errno);
        self.done.borrow_mut().insert(bytes.to_vec(), stored);
        r
    }

    /// `canonical` for any path: component by component from the root (or
    /// the current directory), following links; each link followed goes to
    /// `links` as (where it lives, canonical; what it holds).
    fn walk(&self, p: &Path, links: &mut Vec<(PathBuf, PathBuf)>) -> io::Result<PathBuf> {
        let start = if p.is_absolute() {
            PathBuf::from("/")
        } else {
            std::env::current_dir()?
        };
        if p.as_os_str().is_empty() {
            return Err(io::Error::from_raw_os_error(libc::ENOENT));
        }
        // Names still to walk, the next one last.
        let mut todo: Vec<OsString> = names(p);
        todo.reverse();
        let mut cur = start;
        let followed = links.len();
        while let Some(name) = todo.pop() {
            match name.as_bytes() {
                b"." => continue,
                b".." => {
                    cur.pop();
                    continue;
                }
                _ => {}
            }
            let next = cur.join(&name);
            match self.node(&next) {
                Node::Dir => cur = next,
                Node::Other if todo.is_empty() => cur = next,
                Node::Other => return Err(io::Error::from_raw_os_error(libc::ENOTDIR)),
                Node::Error(e) => return Err(io::Error::from_raw_os_error(e)),
                Node::Link(target) => {
                    links.push((next, target.clone()));
                    if links.len() - followed > MAX_LINKS {
                        return Err(io::Error::from_raw_os_error(libc::ELOOP));
                    }
                    if target.is_absolute() {
                        cur = PathBuf::from("/");
                    }
                    let mut more = names(&target);
                    more.reverse();
                    todo.extend(more);
                }
            }
        }
        Ok(cur)
    }

    /// The symlinks followed on the way from `p` to its canonical path
    /// (as far as it exists): where each lives (its canonical directory
    /// joined with its name) and what it holds, in the order met.
    pub(crate) fn links(&self, p: &Path) -> Vec<(PathBuf, PathBuf)> {
        let mut links = Vec::new();
        let _ = self.walk(p, &mut links);
        links
    }

    /// [`super::paths::canonical_lenient`]: the longest existing ancestor
    /// canonicalized, the rest appended.
    pub(crate) fn lenient(&self, p: &Path) -> PathBuf {
        if let Ok(c) = self.canonical(p) {
            return c;
        }
        let p = super::paths::normalize(p);
        let mut existing = p.clone();
        let mut rest = Vec::new();
        while let Some(name) = existing.file_name().map(|n| n.to_os_string()) {
            existing.pop();
            rest.push(name);
            if let Ok(mut c) = self.canonical(&existing) {
                for n in rest.iter().rev() {
                    c.push(n);
                }
                return c;
            }
        }
        p
    }

    /// What `lstat(p)` finds, from memory; `None` for a path whose last
    /// name is not a plain one (`x/`, `x/.`: `lstat` follows those).
    fn lstat(&self, p: &Path) -> Option<Node> {
        let (parent, name) = (p.parent()?, p.file_name()?);
        let bytes = p.as_os_str().as_bytes();
        if bytes.ends_with(b"/") || bytes.ends_with(b"/.") {
            return None;
        }
        Some(match self.canonical(parent) {
            Ok(dir) => self.node(&dir.join(name)),
            Err(e) => Node::Error(errno(&e)),
        })
    }

    /// Whether `p` itself is a symlink (`lstat`).
    pub(crate) fn is_symlink(&self, p: &Path) -> bool {
        match self.lstat(p) {
            Some(n) => matches!(n, Node::Link(_)),
            None => p
                .symlink_metadata()
                .is_ok_and(|m| m.file_type().is_symlink()),
        }
    }

    /// Whether `p` exists without following a final symlink (`lstat`).
    pub(crate) fn exists_nofollow(&self, p: &Path) -> bool {
        match self.lstat(p) {
            Some(n) => !matches!(n, Node::Error(_)),
            None => p.symlink_metadata().is_ok(),
        }
    }
}

thread_local! {
    static CURRENT: RefCell<Option<std::rc::Rc<Canon>>> = const { RefCell::new(None) };
}

/// Run `f` with a fresh memory for [`canonical`] and [`lenient`] (the
/// outer one when already inside a `memo`).
pub(crate) fn memo<T>(f: impl FnOnce() -> T) -> T {
    let _memory = remember();
    f()
}

/// A memory for [`canonical`] and `lenient` on this thread until the
/// guard is dropped (the outer one, kept, when one is active already).
/// Only for a stretch where nothing toolcage itself creates or replaces is
/// looked up again: answers are not re-checked.
#[must_use = "the memory ends when the guard is dropped"]
pub fn remember() -> Memory {
    Memory(CURRENT.with(|c| {
        let mut c = c.borrow_mut();
        let fresh = c.is_none();
        if fresh {
            *c = Some(std::rc::Rc::new(Canon::new()));
        }
        fresh
    }))
}

/// See [`remember`].
pub struct Memory(bool);

impl Drop for Memory {
    fn drop(&mut self) {
        if self.0 {
            CURRENT.with(|c| c.borrow_mut().take());
        }
    }
}

fn current() -> Option<std::rc::Rc<Canon>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// `std::fs::canonicalize`, remembered inside `memo`.
pub fn canonical(p: impl AsRef<Path>) -> io::Result<PathBuf> {
    let p = p.as_ref();
    match current() {
        Some(c) => c.canonical(p),
        None => std::fs::canonicalize(p),
    }
}

/// [`Canon::links`], remembered inside [`memo`].
pub(crate) fn links(p: &Path) -> Vec<(PathBuf, PathBuf)> {
    match current() {
        Some(c) => c.links(p),
        None => Canon::new().links(p),
    }
}

/// [`super::paths::canonical_lenient`], remembered inside [`memo`].
pub(crate) fn lenient(p: &Path) -> PathBuf {
    match current() {
        Some(c) => c.lenient(p),
        None => super::paths::canonical_lenient(p),
    }
}

/// Whether `p` is a symlink (`lstat`), remembered inside [`memo`].
pub(crate) fn is_symlink(p: &Path) -> bool {
    match current() {
        Some(c) => c.is_symlink(p),
        None => p
            .symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink()),
    }
}

/// Whether `p` exists, a final symlink not followed (`lstat`), remembered
/// inside [`memo`].
pub(crate) fn exists_nofollow(p: &Path) -> bool {
    match current() {
        Some(c) => c.exists_nofollow(p),
        None => p.symlink_metadata().is_ok(),
    }
}

/// The names of `p`, `.` and `..` kept; a trailing `/` is a `.` (the name
/// before it must be a directory, as for `realpath`).
fn names(p: &Path) -> Vec<OsString> {
    let bytes = p.as_os_str().as_bytes();
    let parts: Vec<&[u8]> = bytes.split(|b| *b == b'/').collect();
    let last = parts.len() - 1;
    parts
        .iter()
        .enumerate()
        .filter_map(|(i, n)| match (n.is_empty(), i) {
            (false, _) => Some(OsString::from(std::ffi::OsStr::from_bytes(n))),
            (true, i) if i == last && i > 0 => Some(".".into()),
            (true, _) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paths::canonical_lenient;
    use std::os::unix::fs::symlink;

    /// A tree with every kind of link the walk must follow.
    fn tree() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        std::fs::create_dir_all(r.join("a/b/c")).unwrap();
        std::fs::write(r.join("a/file"), "").unwrap();
        symlink("b", r.join("a/rel")).unwrap();
        symlink(r.join("a/b/c"), r.join("abs")).unwrap();
        symlink("../a/b", r.join("a/b/c/up")).unwrap();
        symlink("up/c/up", r.join("a/b/c/chain")).unwrap();
        symlink("missing", r.join("a/dangling")).unwrap();
        symlink("loop2", r.join("loop1")).unwrap();
        symlink("loop1", r.join("loop2")).unwrap();
        symlink("file", r.join("a/tofile")).unwrap();
        d
    }

    #[test]
    fn agrees_with_realpath() {
        let d = tree();
        let r = d.path();
        let canon = Canon::new();
        let cases = [
            "",
            "a",
            "a/",
            "a/.",
            "a/b/c",
            "a/rel",
            "a/rel/c",
            "abs",
            "abs/up",
            "abs/up/c/chain",
            "a/b/c/chain/c",
            "a/file",
            "a/file/",
            "a/file/x",
            "a/file/..",
            "a/tofile",
            "a/tofile/x",
            "a/dangling",
            "a/dangling/x",
            "missing",
            "missing/x",
            "loop1",
            "loop1/x",
            "a/b/../rel",
            "abs/..",
            "abs/../../a",
            "a/./b//c",
            "/",
            "/..",
        ];
        for case in cases {
            let p = if case.starts_with('/') {
                PathBuf::from(case)
            } else {
                r.join(case)
            };
            for _ in 0..2 {
                // The second round answers from memory.
                let want = std::fs::canonicalize(&p).map_err(|e| e.raw_os_error());
                let got = canon.canonical(&p).map_err(|e| e.raw_os_error());
                assert_eq!(got, want, "canonical({})", p.display());
                assert_eq!(
                    canon.lenient(&p),
                    canonical_lenient(&p),
                    "lenient({})",
                    p.display()
                );
                let is_link = p
                    .symlink_metadata()
                    .is_ok_and(|m| m.file_type().is_symlink());
                assert_eq!(canon.is_symlink(&p), is_link, "is_symlink({})", p.display());
                assert_eq!(
                    canon.exists_nofollow(&p),
                    p.symlink_metadata().is_ok(),
                    "exists_nofollow({})",
                    p.display()
                );
            }
        }
    }

    #[test]
    fn links_names_every_link_followed_where_it_lives() {
        let d = tree();
        let r = std::fs::canonicalize(d.path()).unwrap();
        let canon = Canon::new();
        assert!(canon.links(&r.join("a/b/c")).is_empty());
        assert_eq!(
            canon.links(&r.join("abs/up")),
            vec![
                (r.join("abs"), r.join("a/b/c")),
                (r.join("a/b/c/up"), PathBuf::from("../a/b")),
            ]
        );
        // A missing tail: the links before it still count.
        assert_eq!(
            canon.links(&r.join("a/rel/missing")),
            vec![(r.join("a/rel"), PathBuf::from("b"))]
        );
    }

    #[test]
    fn memo_is_scoped() {
        let d = tree();
        let p = d.path().join("a/later");
        memo(|| {
            assert!(!exists_nofollow(&p));
            std::fs::create_dir(&p).unwrap();
            // Inside one resolution the first answer stands ...
            assert!(!exists_nofollow(&p));
            memo(|| assert!(!exists_nofollow(&p)));
        });
        // ... the next one looks again.
        memo(|| assert!(exists_nofollow(&p)));
        assert!(exists_nofollow(&p));
    }

    #[test]
    fn unsearchable_directories_fail_as_realpath_does() {
        use std::os::unix::fs::PermissionsExt;
        let d = tree();
        let locked = d.path().join("a/b");
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
        // Root (or CAP_DAC_READ_SEARCH) searches every directory: the check
        // needs a user the mode stops.
        if std::fs::read_dir(&locked).is_ok() {
            std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
            return;
        }
        let p = locked.join("c");
        let want = std::fs::canonicalize(&p).map_err(|e| e.raw_os_error());
        let got = Canon::new().canonical(&p).map_err(|e| e.raw_os_error());
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(got, want);
    }
}
