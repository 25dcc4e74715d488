//! Defensive file access for discovery: bounded reads that never block on a
//! FIFO, and directory listings that turn every I/O failure into a
//! [`Diagnostic`].

use super::Diagnostic;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Human text for an I/O error, with the symlink-loop case spelled out.
pub(crate) fn io_message(e: &io::Error) -> String {
    if e.raw_os_error() == Some(libc::ELOOP) {
        "symlink loop (too many levels of symbolic links)".into()
    } else if e.kind() == io::ErrorKind::NotFound {
        "file vanished or is a dangling symlink".into()
    } else {
        e.to_string()
    }
}

/// The result of a bounded read.
pub(crate) struct Bytes {
    pub data: Vec<u8>,
    /// The file is longer than the cap.
    pub truncated: bool,
}

/// Read at most `cap` bytes of the regular file at `path` (following
/// symlinks). Opens non-blocking so a FIFO planted in a tool dir cannot
/// hang discovery, and re-checks the type on the open descriptor.
pub(crate) fn read_capped(path: &Path, cap: usize) -> io::Result<Bytes> {
    let file: File = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    let mut data = Vec::with_capacity(cap.min(16 * 1024));
    let limit = u64::try_from(cap).unwrap_or(u64::MAX).saturating_add(1);
    file.take(limit).read_to_end(&mut data)?;
    let truncated = data.len() > cap;
    data.truncate(cap);
    Ok(Bytes { data, truncated })
}

/// Whether the text of the file at `path` (at most 1 MiB) gives a tool
/// the name `name`: `name = "x"` (TOML), `"name": "x"` (JSON) or
/// `name: x` (YAML). For saying why a tool of a file that could not be
/// parsed is missing.
pub(crate) fn defines_name(path: &Path, name: &str) -> bool {
    let Ok(b) = read_capped(path, 1 << 20) else {
        return false;
    };
    let text = String::from_utf8_lossy(&b.data);
    text.match_indices("name").any(|(i, key)| {
        let before = text[..i].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '-') {
            return false;
        }
        let rest = text[i + key.len()..]
            .strip_prefix('"')
            .unwrap_or(&text[i + key.len()..]);
        let Some(value) = rest
            .trim_start_matches([' ', '\t'])
            .strip_prefix([':', '='])
        else {
            return false;
        };
        let value = value.trim_start_matches([' ', '\t']);
        let value = value.strip_prefix(['"', '\'']).unwrap_or(value);
        value.strip_prefix(name).is_some_and(|after| {
            after.is_empty() || after.starts_with(['"', '\'', ',', '}', ' ', '\t', '\r', '\n'])
        })
    })
}

/// Read a whole (small) file as UTF-8, or explain why not.
pub(crate) fn read_text(path: &Path, cap: usize) -> Result<String, Diagnostic> {
    let b = read_capped(path, cap).map_err(|e| {
        Diagnostic::error(path, None, format!("cannot read: {}", io_message(&e)))
            .fix("make the file a readable regular file")
    })?;
    if b.truncated {
        return Err(
            Diagnostic::error(path, None, format!("file larger than {} KiB", cap / 1024))
                .fix("shrink the file"),
        );
    }
    String::from_utf8(b.data).map_err(|e| {
        let off = e.utf8_error().valid_up_to();
        let line = e.as_bytes()[..off].iter().filter(|&&c| c == b'\n').count() + 1;
        Diagnostic::error(path, Some(line), "not valid UTF-8").fix("save the file as UTF-8")
    })
}

/// One directory entry, with its metadata (symlinks followed) or the error.
pub(crate) struct Entry {
    pub name: String,
    pub path: PathBuf,
    pub meta: io::Result<Metadata>,
}

/// The entries of `dir`, sorted by name. `None` when `dir` does not exist
/// (the format is simply not used) or cannot be listed (reported in
/// `diags`); entries whose names are not UTF-8 are reported and dropped.
pub(crate) fn list_dir(dir: &Path, diags: &mut Vec<Diagnostic>) -> Option<Vec<Entry>> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            return None;
        }
        Err(e) => {
            // A loop, no permission.
            diags.push(
                Diagnostic::error(
                    dir,
                    None,
                    format!("cannot list directory: {}", io_message(&e)),
                )
                .fix("make the directory readable"),
            );
            return None;
        }
    };
    let mut out = Vec::new();
    for ent in rd {
        let ent = match ent {
            Ok(e) => e,
            Err(e) => {
                diags.push(
                    Diagnostic::error(
                        dir,
                        None,
                        format!("cannot read directory entry: {}", io_message(&e)),
                    )
                    .fix("make the directory readable"),
                );
                continue;
            }
        };
        let path = ent.path();
        let Some(name) = ent.file_name().to_str().map(str::to_owned) else {
            diags.push(
                Diagnostic::error(&path, None, "file name is not valid UTF-8")
                    .fix("rename the file"),
            );
            continue;
        };
        let meta = std::fs::metadata(&path);
        out.push(Entry { name, path, meta });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Some(out)
}

/// Where `path` really leads when that is outside `root` (both resolved,
/// so a symlink of `path` itself or of a directory on the way counts).
/// Only the links are resolved; nothing is opened. `None` when it stays
/// inside `root`, or when either does not resolve (reading `path` reports
/// a dangling link or a loop).
pub(crate) fn leads_outside(path: &Path, root: &Path) -> Option<PathBuf> {
    let real_root = std::fs::canonicalize(root).ok()?;
    let real = std::fs::canonicalize(path).ok()?;
    (!real.starts_with(&real_root)).then_some(real)
}

/// When `path` leads outside `root` (see [`leads_outside`]), report it in
/// `diags` and return true: the entry must not be read. The diagnostic
/// names the link, its own text and where it resolves, never anything of
/// the target's content. `inside` names `root` for people (".agents/tools").
pub(crate) fn refuse_outside(
    path: &Path,
    root: &Path,
    inside: &str,
    diags: &mut Vec<Diagnostic>,
) -> bool {
    let Some(real) = leads_outside(path, root) else {
        return false;
    };
    let link = match std::fs::read_link(path) {
        Ok(target) => format!("symlink to {}", target.display()),
        Err(_) => "path (through a symlinked directory)".to_string(),
    };
    diags.push(
        Diagnostic::error(
            path,
            None,
            format!(
                "{link} leads outside {inside} (to {}); not read, tool skipped",
                real.display()
            ),
        )
        .fix(format!(
            "put the file itself inside {inside} instead of a link to it, or remove the link"
        )),
    );
    true
}
