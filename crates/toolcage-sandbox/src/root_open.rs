//! Opening a grant's root one name at a time from `/`, at the moment it
//! is used. A symlink that lies inside one of the grant's write roots, its
//! project, or a write root of any grant of the session is refused, never
//! followed: a call may have planted it after the grant was resolved
//! (resolution refuses such links too, but another call, of this tool or
//! another, can plant one in between: while this one waits for approval).
//! Links elsewhere (`/bin ->
//! usr/bin`, an operator's `~/work -> /data/work`) are followed as the
//! kernel would. Each step is relative to a descriptor already held, so
//! nothing can be swapped between the check and the descriptor; Landlock
//! rules are built on it, and the constructed root checks its binds
//! against its identity.

use nix::fcntl::{OFlag, open, openat, readlinkat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat};
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use toolcage_policy::within;

/// Symlinks followed before `ELOOP`, as the kernel allows.
const MAX_LINKS: usize = 40;

#[derive(Debug)]
pub(crate) enum RootError {
    Io(std::io::Error),
    /// `link`, holding `target`, lies inside the write root `base`.
    Planted {
        link: PathBuf,
        target: PathBuf,
        base: PathBuf,
    },
    /// The last name is a symlink and was not to be followed.
    LastIsLink,
}

impl From<nix::errno::Errno> for RootError {
    fn from(e: nix::errno::Errno) -> RootError {
        RootError::Io(e.into())
    }
}

impl RootError {
    /// The one-line reason a call is refused, for root `root`.
    pub(crate) fn describe(&self, root: &Path) -> String {
        match self {
            RootError::Planted { link, target, base } => format!(
                "{}: {} is a symlink (-> {}) inside the write root {}, made after the grant \
                 was resolved (by a call?); refused rather than followed: run the call again \
                 (resolution names the link and the fix)",
                root.display(),
                link.display(),
                target.display(),
                base.display()
            ),
            RootError::LastIsLink => format!("{}: is a symlink", root.display()),
            RootError::Io(e) => format!("{}: {e}", root.display()),
        }
    }
}

/// The names of `p`, `.` and `..` kept, the first one last (to pop).
fn names_rev(p: &Path) -> Vec<OsString> {
    let mut v: Vec<OsString> = p
        .as_os_str()
        .as_bytes()
        .split(|b| *b == b'/')
        .filter(|n| !n.is_empty())
        .map(|n| std::ffi::OsStr::from_bytes(n).to_os_string())
        .collect();
    v.reverse();
    v
}

/// An `O_PATH` descriptor for absolute `root`, resolved without following
/// a symlink that lies inside any of `bases` (see the module). A final
/// symlink is followed only when `follow_last`. (The tests' shorthand for
/// [`open_root_stat`].)
#[cfg(test)]
pub(crate) fn open_root(
    root: &Path,
    bases: &[PathBuf],
    follow_last: bool,
) -> Result<OwnedFd, RootError> {
    open_root_stat(root, bases, follow_last).map(|(fd, _)| fd)
}

/// An `O_PATH` descriptor for absolute `root`, resolved without following
/// a symlink that lies inside any of `bases` (see the module), and its
/// `fstat` (the walk made it already: callers need not ask again). A final
/// symlink is followed only when `follow_last`.
pub(crate) fn open_root_stat(
    root: &Path,
    bases: &[PathBuf],
    follow_last: bool,
) -> Result<(OwnedFd, FileStat), RootError> {
    if !root.is_absolute() {
        return Err(RootError::Io(std::io::Error::from_raw_os_error(
            libc::EINVAL,
        )));
    }
    let dir_flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    // The directories walked so far, with their paths and their `fstat`
    // (none for `/`): `..` goes back one.
    let mut stack: Vec<(OwnedFd, PathBuf, Option<FileStat>)> = vec![(
        open("/", dir_flags, Mode::empty())?,
        PathBuf::from("/"),
        None,
    )];
    let mut todo = names_rev(root);
    let mut links = 0;
    while let Some(name) = todo.pop() {
        match name.as_bytes() {
            b"." => continue,
            b".." => {
                if stack.len() > 1 {
                    stack.pop();
                }
                continue;
            }
            _ => {}
        }
        let (dir, dir_path, _) = stack.last().expect("the root stays on the stack");
        let path = dir_path.join(&name);
        let fd = openat(
            dir,
            name.as_os_str(),
            OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        let st = fstat(&fd)?;
        let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
        if kind != SFlag::S_IFLNK {
            stack.push((fd, path, Some(st)));
            continue;
        }
        let target = PathBuf::from(readlinkat(&fd, "")?);
        if let Some(base) = bases.iter().find(|b| within(&path, b)) {
            return Err(RootError::Planted {
                link: path,
                target,
                base: base.clone(),
            });
        }
        if todo.is_empty() && !follow_last {
            return Err(RootError::LastIsLink);
        }
        links += 1;
        if links > MAX_LINKS {
            return Err(nix::errno::Errno::ELOOP.into());
        }
        if target.is_absolute() {
            stack.truncate(1);
        }
        // On top of what is left, its first name to be popped first.
        todo.extend(names_rev(&target));
    }
    let (fd, _, st) = stack.pop().expect("the root stays on the stack");
    let st = match st {
        Some(st) => st,
        None => fstat(&fd)?,
    };
    Ok((fd, st))
}

/// The device and inode `root` leads to ([`open_root_stat`], links followed).
pub(crate) fn identity(root: &Path, bases: &[PathBuf]) -> Result<(u64, u64), RootError> {
    let (_, st) = open_root_stat(root, bases, true)?;
    Ok((st.st_dev, st.st_ino))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, symlink};

    fn id(p: &Path) -> (u64, u64) {
        let m = std::fs::metadata(p).unwrap();
        (m.dev(), m.ino())
    }

    #[test]
    fn follows_links_outside_the_bases_and_refuses_those_inside() {
        let d = tempfile::tempdir().unwrap();
        let r = std::fs::canonicalize(d.path()).unwrap();
        let (project, outside) = (r.join("project"), r.join("outside"));
        std::fs::create_dir_all(project.join("real/sub")).unwrap();
        std::fs::create_dir_all(outside.join("data")).unwrap();
        symlink(outside.join("data"), r.join("operator")).unwrap();
        symlink("real", project.join("rel")).unwrap();
        symlink(&outside, project.join("planted")).unwrap();
        symlink("../outside/data", outside.join("relup")).unwrap();
        let bases = vec![project.clone()];
        // The operator's links, outside every base: followed.
        assert_eq!(
            identity(&r.join("operator"), &bases).unwrap(),
            id(&outside.join("data"))
        );
        assert_eq!(
            identity(&outside.join("relup"), &bases).unwrap(),
            id(&outside.join("data"))
        );
        assert_eq!(
            identity(&project.join("real/sub"), &bases).unwrap(),
            id(&project.join("real/sub"))
        );
        // Links inside a base, last or in the middle: refused, named.
        for (p, link) in [
            (project.join("planted"), project.join("planted")),
            (project.join("planted/data"), project.join("planted")),
            (project.join("rel/sub"), project.join("rel")),
        ] {
            match open_root(&p, &bases, true) {
                Err(RootError::Planted { link: l, base, .. }) => {
                    assert_eq!((l, base), (link, project.clone()), "{}", p.display())
                }
                other => panic!("{}: {other:?}", p.display()),
            }
        }
        // Control: the same paths with no base are followed.
        assert_eq!(
            identity(&project.join("planted/data"), &[]).unwrap(),
            id(&outside.join("data"))
        );
        // Not following a final link; a missing name is an error.
        assert!(matches!(
            open_root(&r.join("operator"), &bases, false),
            Err(RootError::LastIsLink)
        ));
        assert!(matches!(
            open_root(&r.join("missing"), &bases, true),
            Err(RootError::Io(_))
        ));
    }
}
