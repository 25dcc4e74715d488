//! toolcage's per-user runtime directory, created once and reused:
//! `<tmp>/.toolcage-<uid>/root` is the mount point of every call's staging
//! tmpfs, in which the call's constructed root is built (see `rootfs`).
//! Only the call's own mount namespace ever mounts there; the host sees an
//! empty directory. Reusing it keeps file creation off the per-call path.
//! `resolv.conf` beside it is what domain mode binds over the call's
//! `/etc/resolv.conf`.

use super::SandboxError;
use std::fs::DirBuilder;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

#[derive(Debug)]
pub struct RuntimeDir {
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

/// The runtime directory, created on first use.
pub fn get() -> Result<&'static RuntimeDir, SandboxError> {
    static DIR: OnceLock<Result<RuntimeDir, String>> = OnceLock::new();
    DIR.get_or_init(|| {
        let base = std::env::temp_dir().join(format!(".toolcage-{}", euid()));
        setup(&base).map_err(|e| format!("runtime dir {}: {e}", base.display()))
    })
    .as_ref()
    .map_err(|e| SandboxError::Prepare(e.clone()))
}
