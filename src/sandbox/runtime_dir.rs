//! toolcage's per-user runtime directory, created once and reused:
//! `<tmp>/.toolcage-<uid>/tmp` is the mount point of every call's private
//! tmpfs, and `<tmp>/.toolcage-<uid>/mask` is an empty mode-000 file bind
//! mounted over denied files. Reusing it keeps file creation off the per-call
//! path (a private tmp dir on disk cost ~0.4 ms per call here).

use super::SandboxError;
use std::fs::DirBuilder;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

#[derive(Debug)]
pub struct RuntimeDir {
    /// An empty directory; each call mounts a fresh tmpfs over it.
    pub tmp: PathBuf,
    /// An empty, unreadable file.
    pub mask: PathBuf,
}

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
    let tmp = base.join("tmp");
    match DirBuilder::new().mode(0o700).create(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let mask = base.join("mask");
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o000)
        .open(&mask)
    {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let ok_tmp = tmp.symlink_metadata().map(|m| m.is_dir()).unwrap_or(false);
    let ok_mask = mask
        .symlink_metadata()
        .map(|m| m.is_file() && m.len() == 0 && m.mode() & 0o777 == 0)
        .unwrap_or(false);
    if !ok_tmp || !ok_mask {
        return Err(std::io::Error::other(format!(
            "{} has unexpected contents; remove it",
            base.display()
        )));
    }
    Ok(RuntimeDir { tmp, mask })
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
