//! Reading a tool's files for the management tools the way discovery does:
//! never through a symbolic link, never a file outside the project, never
//! a FIFO or a device. A sandboxed tool may plant links in the project
//! (even in a tool directory it creates while it runs); what `view`, `edit`
//! and `delete` show the agent must not become a way around the sandbox.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// How much of a file is read at most.
const READ_CAP: u64 = 4 << 20;

/// Why a file is not read, or what it holds.
#[derive(Debug)]
pub(crate) enum Got {
    /// It is not there.
    Missing,
    /// It is there, and is not read: a link, out of the project, not a
    /// regular file, unreadable.
    Refused(String),
    Bytes(Vec<u8>),
}

/// Read `path`, a file below `project` (canonical), without following a
/// link anywhere on the way: the file opened is checked, after opening,
/// to be the one at `path` inside the project (a directory swapped for a
/// link between a check and the open is caught).
pub(crate) fn file(project: &Path, path: &Path) -> Got {
    match path.symlink_metadata() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Got::Missing,
        Err(e) => return Got::Refused(format!("cannot read: {e}")),
        Ok(m) if m.file_type().is_symlink() => {
            return Got::Refused("a symbolic link; not read".into());
        }
        Ok(m) if !m.is_file() => return Got::Refused("not a regular file; not read".into()),
        Ok(_) => {}
    }
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path);
    let file = match opened {
        Ok(f) => f,
        Err(e) => return Got::Refused(format!("cannot read: {e}")),
    };
    let real = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()));
    let expected = path
        .parent()
        .and_then(|d| d.canonicalize().ok())
        .zip(path.file_name())
        .map(|(d, n)| d.join(n));
    match (real, expected) {
        (Ok(r), Some(e)) if r == e && r.starts_with(project) => {}
        _ => return Got::Refused("leads out of the project; not read".into()),
    }
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Got::Refused("not a regular file; not read".into());
    }
    let mut bytes = Vec::new();
    match file.take(READ_CAP).read_to_end(&mut bytes) {
        Ok(_) => Got::Bytes(bytes),
        Err(e) => Got::Refused(format!("cannot read: {e}")),
    }
}

/// [`file`] as text: `None` when missing, `Err` with why when refused.
pub(crate) fn text(project: &Path, path: &Path) -> Result<Option<String>, String> {
    match file(project, path) {
        Got::Missing => Ok(None),
        Got::Refused(why) => Err(format!("{}: {why}", path.display())),
        Got::Bytes(b) => String::from_utf8(b)
            .map(Some)
            .map_err(|_| format!("{}: not UTF-8 text", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_anywhere_on_the_way_are_not_followed() {
        let t = tempfile::tempdir().unwrap();
        let project = t.path().canonicalize().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret");
        std::fs::write(&secret, "host secret").unwrap();
        std::fs::create_dir_all(project.join("tools/a")).unwrap();
        std::fs::write(project.join("tools/a/run.sh"), "mine").unwrap();
        // Control: a plain file of the project is read.
        assert_eq!(
            text(&project, &project.join("tools/a/run.sh")),
            Ok(Some("mine".into()))
        );
        assert!(matches!(
            file(&project, &project.join("tools/a/none")),
            Got::Missing
        ));
        // A link as the file, and a directory on the way that is a link.
        std::os::unix::fs::symlink(&secret, project.join("tools/a/leak")).unwrap();
        std::os::unix::fs::symlink(outside.path(), project.join("tools/b")).unwrap();
        for p in ["tools/a/leak", "tools/b/secret"] {
            let got = text(&project, &project.join(p));
            assert!(got.is_err(), "{p}: {got:?}");
        }
        // A FIFO is not opened for reading (it would block).
        nix::unistd::mkfifo(&project.join("tools/a/fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(text(&project, &project.join("tools/a/fifo")).is_err());
    }
}
