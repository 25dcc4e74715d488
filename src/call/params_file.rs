//! The OpenCrabs `$OPENCRABS_PARAMS` file: the call's arguments as JSON in a
//! file only its owner can read, in toolcage's runtime directory (hidden
//! from every call: only this call is granted its own file), removed when
//! the guard drops (after the run, whatever happened).

use std::fs::OpenOptions;
use std::hash::{BuildHasher, Hasher};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// A parameters file; removed on drop.
#[derive(Debug)]
pub(crate) struct ParamsFile {
    path: PathBuf,
}

/// The directory for parameters files: inside toolcage's runtime
/// directory, which no call can see (a call granted the host's `/tmp`
/// listed every running call's arguments when they lived in
/// `<tmp>/.toolcage-params-<uid>`).
pub(crate) fn private_dir() -> std::io::Result<PathBuf> {
    crate::sandbox::private_files_dir().map_err(|e| std::io::Error::other(e.to_string()))
}

fn random_name() -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    h.write_u32(std::process::id());
    if let Ok(d) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(d.as_nanos());
    }
    format!("params-{:016x}.json", h.finish())
}

impl ParamsFile {
    /// Write `content` to a new file (O_EXCL, mode 0600) in [`private_dir`].
    pub(crate) fn create(content: &[u8]) -> std::io::Result<ParamsFile> {
        let dir = private_dir()?;
        let mut last = None;
        for _ in 0..8 {
            let path = dir.join(random_name());
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&path)
            {
                Ok(mut f) => {
                    let guard = ParamsFile { path };
                    f.write_all(content)?;
                    return Ok(guard);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| std::io::Error::other("no free file name")))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ParamsFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn file_is_private_and_removed_on_drop() {
        let f = ParamsFile::create(br#"{"a":1}"#).unwrap();
        let p = f.path().to_path_buf();
        let m = std::fs::metadata(&p).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o600);
        let dm = std::fs::metadata(p.parent().unwrap()).unwrap();
        assert_eq!(dm.permissions().mode() & 0o777, 0o700);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), r#"{"a":1}"#);
        drop(f);
        assert!(!p.exists());
    }

    #[test]
    fn two_files_get_two_names() {
        let a = ParamsFile::create(b"{}").unwrap();
        let b = ParamsFile::create(b"{}").unwrap();
        assert_ne!(a.path(), b.path());
    }
}
