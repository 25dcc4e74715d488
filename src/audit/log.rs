//! Appending records: one `write(2)` of one whole line, `O_APPEND`, under an
//! exclusive `flock` so writers of several processes never interleave.
//!
//! A record is never split over two writes. If the file does not end with a
//! newline (a writer crashed mid-line, or a short write), the next record
//! starts with one, so a torn line never swallows the record after it.
//! Earlier lines are never rewritten.
//!
//! `[audit] path = "-"`: the lines go to standard output instead (a
//! cluster's log pipeline collects them), one `write` each under this
//! process's lock; only `serve --http` allows it ([`allow_stdout`]), as
//! every other command's stdout carries something else (stdio MCP, a
//! call's result).

use super::record::AuditRecord;
use nix::fcntl::{Flock, FlockArg};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by `serve --http`, whose stdout carries nothing else.
static STDOUT_ALLOWED: AtomicBool = AtomicBool::new(false);

/// Let `[audit] path = "-"` write the records to this process's stdout.
pub(crate) fn allow_stdout() {
    STDOUT_ALLOWED.store(true, Ordering::SeqCst);
}

/// An open audit log.
#[derive(Debug)]
pub(crate) struct AuditLog {
    path: PathBuf,
    file: Mutex<Option<File>>,
    /// `fdatasync` after each record.
    pub sync: bool,
    /// Standard output (`[audit] path = "-"`): no file lock, no torn-line
    /// check (a pipe has no last byte to read).
    stdout: bool,
}

impl AuditLog {
    /// Open (create, 0600, parent directories 0700) for appending.
    pub(crate) fn open(path: &Path) -> Result<AuditLog, String> {
        if super::location::is_stdout(path) {
            return open_stdout();
        }
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
            stdout: false,
        })
    }

    /// Append one record as one line.
    pub(crate) fn append(&self, record: &AuditRecord) -> Result<(), String> {
        let line = record
            .to_line()
            .map_err(|e| format!("cannot encode audit record: {e}"))?;
        self.append_bytes(line.as_bytes())
    }

    /// Append `line` (which ends with a newline) in one write.
    pub(crate) fn append_bytes(&self, line: &[u8]) -> Result<(), String> {
        let shown = self.path.display();
        let mut guard = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if self.stdout {
            let file = guard
                .as_mut()
                .ok_or_else(|| "the audit log (stdout) is unavailable".to_string())?;
            return file
                .write_all(line)
                .map_err(|e| format!("cannot write an audit record to stdout: {e}"));
        }
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
        let result = write_line(&mut *locked, line, self.sync)
            .map_err(|e| format!("cannot write audit log {shown}: {e}"));
        match locked.unlock() {
            Ok(f) => *guard = Some(f),
            Err((l, _)) => drop(l),
        }
        result
    }
}

/// A duplicate of fd 1 (close-on-exec, so no tool inherits it).
fn open_stdout() -> Result<AuditLog, String> {
    use std::os::fd::AsFd;
    if !STDOUT_ALLOWED.load(Ordering::SeqCst) {
        return Err(
            "[audit] path = \"-\" (records as JSON lines on stdout) is only for `toolcage serve \
             --http`: here stdout carries the command's own output (fix: give [audit] path a \
             file, or leave it out for the state directory's audit.jsonl)"
                .into(),
        );
    }
    let fd = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| format!("cannot use stdout for the audit log: {e}"))?;
    Ok(AuditLog {
        path: PathBuf::from(crate::policy::AuditPolicy::STDOUT),
        file: Mutex::new(Some(File::from(fd))),
        sync: false,
        stdout: true,
    })
}

/// What appending needs of the log file: a seam so a test can count the
/// system calls a record costs.
trait Appendable {
    fn len(&self) -> std::io::Result<u64>;
    fn last_byte(&self, len: u64) -> std::io::Result<u8>;
    fn write_once(&mut self, buf: &[u8]) -> std::io::Result<usize>;
    fn sync_data(&self) -> std::io::Result<()>;
}

impl Appendable for File {
    fn len(&self) -> std::io::Result<u64> {
        Ok(self.metadata()?.len())
    }
    fn last_byte(&self, len: u64) -> std::io::Result<u8> {
        let mut last = [0u8; 1];
        self.read_exact_at(&mut last, len - 1)?;
        Ok(last[0])
    }
    fn write_once(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write(buf)
    }
    fn sync_data(&self) -> std::io::Result<()> {
        File::sync_data(self)
    }
}

/// One record: one `write(2)` of the whole line (a newline first after a
/// torn line), and one `fdatasync` when asked; never more.
fn write_line(file: &mut impl Appendable, line: &[u8], sync: bool) -> std::io::Result<()> {
    let len = file.len()?;
    let mut buf = Vec::with_capacity(line.len() + 1);
    if len > 0 && file.last_byte(len)? != b'\n' {
        buf.push(b'\n');
    }
    buf.extend_from_slice(line);
    let n = file.write_once(&buf)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// A log file in memory that counts writes and syncs.
    #[derive(Default)]
    struct Counting {
        bytes: Vec<u8>,
        writes: usize,
        syncs: Cell<usize>,
    }

    impl Appendable for Counting {
        fn len(&self) -> std::io::Result<u64> {
            Ok(self.bytes.len() as u64)
        }
        fn last_byte(&self, len: u64) -> std::io::Result<u8> {
            Ok(self.bytes[len as usize - 1])
        }
        fn write_once(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.writes += 1;
            self.bytes.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn sync_data(&self) -> std::io::Result<()> {
            self.syncs.set(self.syncs.get() + 1);
            Ok(())
        }
    }

    #[test]
    fn a_record_is_one_write_even_after_a_torn_line() {
        let mut f = Counting::default();
        write_line(&mut f, b"{\"a\":1}\n", false).unwrap();
        assert_eq!(f.writes, 1);
        // A writer that died mid-line: the repair newline goes in the same write.
        f.bytes.extend_from_slice(b"{\"torn");
        write_line(&mut f, b"{\"b\":2}\n", false).unwrap();
        assert_eq!((f.writes, f.syncs.get()), (2, 0));
        assert_eq!(f.bytes, b"{\"a\":1}\n{\"torn\n{\"b\":2}\n");
    }

    #[test]
    fn a_synced_record_is_one_write_and_one_sync() {
        let mut f = Counting::default();
        for _ in 0..3 {
            write_line(&mut f, b"{}\n", true).unwrap();
        }
        assert_eq!((f.writes, f.syncs.get()), (3, 3));
    }
}
