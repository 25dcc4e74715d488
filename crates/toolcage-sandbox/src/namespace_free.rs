//! Namespace-free mode's pieces on the parent side: remembering that
//! namespaces are unavailable, the reason in one line, and the call's
//! private tmp as a host directory.

use super::error::SandboxError;
use super::runtime_dir;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

/// The errno with which creating the sandbox's namespaces failed in this
/// process (0: not failed). Later calls go namespace-free without trying.
pub(super) static NAMESPACES_FAILED: AtomicI32 = AtomicI32::new(0);

/// Why the sandbox's namespaces are unavailable, in one line.
pub(crate) fn namespaces_unavailable_reason(errno: i32) -> String {
    super::probe::classify(errno).message()
}

/// Whether namespaces already failed in this process, with the errno.
pub(crate) fn namespaces_failed() -> Option<i32> {
    match NAMESPACES_FAILED.load(Ordering::Relaxed) {
        0 => None,
        e => Some(e),
    }
}

/// A directory on the host that is the call's `/tmp` in namespace-free
/// mode (there is no private tmpfs to mount); removed after the call.
pub(super) struct HostTmp(pub PathBuf);

impl HostTmp {
    pub(super) fn create(runtime: &runtime_dir::RuntimeDir) -> Result<HostTmp, SandboxError> {
        use std::os::unix::fs::DirBuilderExt;
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = runtime.base.join(format!(
            "tmp-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| SandboxError::Prepare(format!("{}: {e}", dir.display())))?;
        Ok(HostTmp(dir))
    }
}

impl Drop for HostTmp {
    fn drop(&mut self) {
        // Does not follow symlinks the call may have left inside.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The private tmp's path inside the environment becomes `dir`.
pub(super) fn retarget_private_tmp(
    env: &mut std::collections::BTreeMap<String, String>,
    dir: &Path,
) {
    let dir = dir.display().to_string();
    for key in ["TMPDIR", "TMP", "TEMP", "HOME"] {
        if let Some(v) = env.get_mut(key)
            && v == super::env::PRIVATE_TMP
        {
            *v = dir.clone();
        }
    }
}
