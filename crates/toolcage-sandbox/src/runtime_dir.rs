//! toolcage's per-user runtime directory, created once and reused:
//! `<tmp>/.toolcage-<uid>/root` is the mount point of every call's staging
//! tmpfs, in which the call's constructed root is built (see `rootfs`).
//! Only the call's own mount namespace ever mounts there; the host sees an
//! empty directory. Reusing it keeps file creation off the per-call path.
//! `resolv.conf` beside it is what domain mode binds over the call's
//! `/etc/resolv.conf`. Namespace-free, each call's private tmp is a
//! directory in it too (`namespace_free::HostTmp`).
//!
//! No call may reach it: in the constructed root it is covered wherever a
//! root would show it; namespace-free, read roots are split around it, and
//! a write root that holds it is refused ([`RuntimeDir::refuse_in_write_roots`]).

use super::error::SandboxError;
use std::fs::DirBuilder;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use toolcage_policy::{Grant, canon, within};

#[derive(Debug)]
pub(crate) struct RuntimeDir {
    /// `<tmp>/.toolcage-<uid>`: hidden from every call.
    pub base: PathBuf,
    /// An empty directory; each call mounts its staging tmpfs over it.
    pub root: PathBuf,
    /// Domain mode's `/etc/resolv.conf`: the call's own DNS stub.
    pub resolv_conf: PathBuf,
}

/// What domain mode binds over `/etc/resolv.conf`.
const RESOLV_CONF: &str =
    "# toolcage: the call's DNS stub (network mode \"domains\")\nnameserver 127.0.0.1\n";

fn euid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
}

/// A directory we own, not a symlink, not accessible to anyone else.
fn trusted_dir(p: &Path) -> bool {
    p.symlink_metadata()
        .map(|m| m.is_dir() && m.uid() == euid() && m.mode() & 0o077 == 0)
        .unwrap_or(false)
}

fn setup(base: &Path) -> std::io::Result<RuntimeDir> {
    match DirBuilder::new().mode(0o700).create(base) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    if !trusted_dir(base) {
        return Err(std::io::Error::other(format!(
            "{} is not a private directory owned by uid {}",
            base.display(),
            euid()
        )));
    }
    let root = base.join("root");
    match DirBuilder::new().mode(0o700).create(&root) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    if !root.symlink_metadata().map(|m| m.is_dir()).unwrap_or(false) {
        return Err(std::io::Error::other(format!(
            "{} has unexpected contents; remove it",
            base.display()
        )));
    }
    let resolv_conf = base.join("resolv.conf");
    if std::fs::read(&resolv_conf).ok().as_deref() != Some(RESOLV_CONF.as_bytes()) {
        let tmp = base.join(format!("resolv.conf.{}", std::process::id()));
        std::fs::write(&tmp, RESOLV_CONF)?;
        std::fs::rename(&tmp, &resolv_conf)?;
    }
    Ok(RuntimeDir {
        base: base.to_path_buf(),
        root,
        resolv_conf,
    })
}

impl RuntimeDir {
    /// Namespace-free, Landlock cannot take a directory out of a write root
    /// (its rights are a union, and there is no mount to cover it): a call
    /// whose write root holds the runtime directory could list, read and
    /// replace every other call's private tmp in it. Such a grant is
    /// refused, with the two ways out.
    pub(crate) fn refuse_in_write_roots(&self, grant: &Grant) -> Result<(), SandboxError> {
        let base = canon::canonical(&self.base).unwrap_or_else(|_| self.base.clone());
        let Some(root) = grant
            .write
            .iter()
            .find(|w| within(&base, w) || within(w, &base))
        else {
            return Ok(());
        };
        let beneath = if within(&base, root) {
            format!(
                "grant the directories beneath {} the call needs instead of all of it, or ",
                root.display()
            )
        } else {
            String::new()
        };
        Err(SandboxError::Refused(format!(
            "namespace-free, the write root {} holds toolcage's runtime directory {}, \
             where other calls keep their private /tmp, and Landlock cannot keep it out \
             of a write root without a mount namespace; {beneath}run toolcage with \
             TMPDIR set to a private directory outside every write root (the runtime \
             directory goes there)",
            root.display(),
            base.display()
        )))
    }
}

/// Where the call layer keeps a call's own files that must be readable to
/// that call only (an OpenCrabs parameters file): `<runtime>/params`, 0700,
/// inside the runtime directory that no call can see or reach, so a call
/// whose grant shows the host's `/tmp` cannot list or read another's. The
/// call's own file is granted to it by path (`Command::extra_read`).
pub fn private_files_dir() -> Result<PathBuf, SandboxError> {
    let base = &get()?.base;
    let dir = base.join("params");
    match DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(SandboxError::Prepare(format!("{}: {e}", dir.display()))),
    }
    if !trusted_dir(&dir) {
        return Err(SandboxError::Prepare(format!(
            "{} is not a private directory owned by uid {} (remove it)",
            dir.display(),
            euid()
        )));
    }
    Ok(dir)
}

/// The runtime directory, created on first use.
pub(crate) fn get() -> Result<&'static RuntimeDir, SandboxError> {
    static DIR: OnceLock<Result<RuntimeDir, String>> = OnceLock::new();
    DIR.get_or_init(|| {
        let base = std::env::temp_dir().join(format!(".toolcage-{}", euid()));
        setup(&base).map_err(|e| format!("runtime dir {}: {e}", base.display()))
    })
    .as_ref()
    .map_err(|e| SandboxError::Prepare(e.clone()))
}
