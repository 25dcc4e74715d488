//! The default store: the project's state directory. Rate limits are
//! `ratelimit.json` ([`super::super::persist::FileRates`]); a document
//! `NAME` is `NAME.json`, read and replaced under an exclusive `flock` on
//! `NAME.lock`, written to a unique temp file, synced, renamed into place
//! and the directory synced: it is the old text or the new one, whole.

use super::{DocError, Store, Update};
use crate::gate::persist::{FileRates, RateCheck, RateRefusal};
use crate::policy::RateLimit;
use nix::fcntl::{Flock, FlockArg};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Gate state in a state directory.
#[derive(Debug, Clone)]
pub(crate) struct FileStore {
    dir: PathBuf,
    rates: FileRates,
}

impl FileStore {
    pub(crate) fn new(state_dir: &Path) -> FileStore {
        FileStore {
            dir: state_dir.to_path_buf(),
            rates: FileRates::new(state_dir),
        }
    }

    /// The file of document `name`.
    pub(crate) fn doc_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.json"))
    }

    /// The exclusive lock every read-modify-write of `name` holds.
    fn locked(&self, name: &str) -> Result<Flock<File>, String> {
        crate::audit::location::private_dir(&self.dir)?;
        let lock = self.dir.join(format!("{name}.lock"));
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
            .open(&lock)
            .map_err(|e| format!("cannot open {}: {e}", lock.display()))?;
        Flock::lock(f, FlockArg::LockExclusive)
            .map_err(|(_, e)| format!("cannot lock {}: {e}", lock.display()))
    }

    /// Replace `name`'s file with `text`. Called under [`FileStore::locked`].
    fn save(&self, name: &str, text: &str) -> Result<(), String> {
        let path = self.doc_path(name);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let tmp = self
            .dir
            .join(format!(".{name}.json.{}-{nanos}.tmp", std::process::id()));
        let written = (|| {
            let mut t = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
                .open(&tmp)?;
            t.write_all(text.as_bytes())?;
            t.sync_all()?;
            drop(t);
            std::fs::rename(&tmp, &path)?;
            File::open(&self.dir)?.sync_all()
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written.map_err(|e| format!("cannot write {}: {e}", path.display()))
    }
}

impl RateCheck for FileStore {
    fn check(&self, limits: &[(String, RateLimit)], now: Duration) -> Result<(), RateRefusal> {
        self.rates.check(limits, now)
    }
}

impl Store for FileStore {
    fn doc_location(&self, name: &str) -> String {
        self.doc_path(name).display().to_string()
    }

    fn doc_reset(&self, name: &str) -> String {
        format!("rm {}", self.doc_path(name).display())
    }

    fn read_doc(&self, name: &str) -> Result<Option<String>, DocError> {
        let path = self.doc_path(name);
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
            .open(&path);
        let mut file = match file {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(DocError::Store(format!("cannot open it: {e}"))),
        };
        let mut text = String::new();
        file.read_to_string(&mut text)
            .map_err(|e| DocError::Store(format!("cannot read it: {e}")))?;
        Ok(Some(text))
    }

    fn update_doc(&self, name: &str, update: &mut Update<'_>) -> Result<(), DocError> {
        let _lock = self.locked(name).map_err(DocError::Store)?;
        let now = self.read_doc(name)?;
        match update(now.as_deref()).map_err(DocError::Content)? {
            Some(text) => self.save(name, &text).map_err(DocError::Store),
            None => Ok(()),
        }
    }

    fn ping(&self) -> Result<(), String> {
        Ok(())
    }
}
