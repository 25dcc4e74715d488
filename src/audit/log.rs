//! Appending records: one `write(2)` of one whole line, `O_APPEND`, under an
//! exclusive `flock` so writers of several processes never interleave.
//!
//! A record is never split over two writes. If the file does not end with a
//! newline (a writer crashed mid-line, or a short write), the next record
//! starts with one, so a torn line never swallows the record after it.
//! Earlier lines are never rewritten.

use super::record::AuditRecord;
use nix::fcntl::{Flock, FlockArg};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// An open audit log.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    file: Mutex<Option<File>>,
    /// `fdatasync` after each record.
    pub sync: bool,
}

impl AuditLog {
    /// Open (create, 0600, parent directories 0700) for appending.
    pub fn open(path: &Path) -> Result<AuditLog, String> {
        if let Some(dir) = path.parent() {
            super::location::private_dir(dir)?;
        }
        // Read too: the last byte is checked for a torn line.
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
            .open(path)
            .map_err(|e| format!("cannot open audit log {}: {e}", path.display()))?;
        Ok(AuditLog {
            path: path.to_path_buf(),
            file: Mutex::new(Some(file)),
            sync: false,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one record as one line.
    pub fn append(&self, record: &AuditRecord) -> Result<(), String> {
        let line = record
            .to_line()
            .map_err(|e| format!("cannot encode audit record: {e}"))?;
        self.append_bytes(line.as_bytes())
    }

    /// Append `line` (which ends with a newline) in one write.
    pub fn append_bytes(&self, line: &[u8]) -> Result<(), String> {
        let shown = self.path.display();
        let mut guard = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let file = guard
            .take()
            .ok_or_else(|| format!("audit log {shown} is unavailable"))?;
        let mut locked = match Flock::lock(file, FlockArg::LockExclusive) {
            Ok(l) => l,
            Err((f, e)) => {
                *guard = Some(f);
                return Err(format!("cannot lock audit log {shown}: {e}"));
            }
        };
        let result = write_line(&mut locked, line, self.sync)
            .map_err(|e| format!("cannot write audit log {shown}: {e}"));
        match locked.unlock() {
            Ok(f) => *guard = Some(f),
            Err((l, _)) => drop(l),
        }
        result
    }
}

fn write_line(file: &mut File, line: &[u8], sync: bool) -> std::io::Result<()> {
    let len = file.metadata()?.len();
    let mut buf = Vec::with_capacity(line.len() + 1);
    if len > 0 {
        let mut last = [0u8; 1];
        file.read_exact_at(&mut last, len - 1)?;
        if last[0] != b'\n' {
            buf.push(b'\n');
        }
    }
    buf.extend_from_slice(line);
    let n = file.write(&buf)?;
    if n != buf.len() {
        return Err(std::io::Error::other(format!(
            "short write: {n} of {} bytes",
            buf.len()
        )));
    }
    if sync {
        file.sync_data()?;
    }
    Ok(())
}
