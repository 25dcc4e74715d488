//! Writing a change: the lock that serializes changes, atomic file writes
//! (temp file + rename in the same directory), and the diff the person
//! approving and the audit log see.

use nix::fcntl::{Flock, FlockArg};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// One step of a change, applied in order.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    /// Replace (or create) a file atomically, with this mode.
    Write {
        path: PathBuf,
        text: String,
        mode: u32,
    },
    /// Create a directory with these files at once: staged under a hidden
    /// name (discovery skips dot names), then renamed into place.
    NewDir {
        dir: PathBuf,
        files: Vec<(String, String, u32)>,
    },
    Remove(PathBuf),
    /// Renamed to a hidden name first, so it vanishes at once.
    RemoveDir(PathBuf),
}

impl Op {
    /// The files the step writes or removes.
    pub(crate) fn paths(&self) -> Vec<PathBuf> {
        match self {
            Op::Write { path, .. } | Op::Remove(path) | Op::RemoveDir(path) => vec![path.clone()],
            Op::NewDir { dir, files } => files.iter().map(|(n, _, _)| dir.join(n)).collect(),
        }
    }
}

/// Refuse to write through a link: `path` must not be a symlink, and its
/// nearest existing ancestor must resolve inside `project` (discovery does
/// not read tool files that lead out of the project either).
pub(crate) fn inside(project: &Path, path: &Path) -> Result<(), String> {
    if path
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
    {
        return Err(format!(
            "{} is a symbolic link; not written",
            path.display()
        ));
    }
    let existing = path.ancestors().skip(1).find(|a| a.exists());
    let resolved = existing.and_then(|a| a.canonicalize().ok());
    match resolved {
        Some(r) if r.starts_with(project) => Ok(()),
        _ => Err(format!(
            "{} leads out of the project; not written",
            path.display()
        )),
    }
}

/// A unique hidden sibling name for `path`: `.<name>.<tag>-<pid>-<nanos>`.
fn hidden_sibling(path: &Path, tag: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    path.with_file_name(format!(".{name}.{tag}-{}-{nanos}", std::process::id()))
}

fn write_new(path: &Path, text: &str, mode: u32) -> std::io::Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)?;
    f.write_all(text.as_bytes())?;
    // The mode is set explicitly: the umask must not drop the exec bit.
    f.set_permissions(std::fs::Permissions::from_mode(mode))?;
    f.sync_all()
}

/// Write `text` to `path` atomically: readers see the old file or the new
/// one, never a part.
pub(crate) fn atomic_write(path: &Path, text: &str, mode: u32) -> std::io::Result<()> {
    let tmp = hidden_sibling(path, "tmp");
    if let Err(e) = write_new(&tmp, text, mode).and_then(|()| std::fs::rename(&tmp, path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(())
}

/// Apply `ops` in order; the first failure stops (and is returned with the
/// path it concerned).
pub(crate) fn apply(project: &Path, ops: &[Op]) -> Result<(), String> {
    for op in ops {
        match op {
            Op::NewDir { dir, .. } => inside(project, dir)?,
            _ => op.paths().iter().try_for_each(|p| inside(project, p))?,
        }
    }
    let fail = |p: &Path, e: std::io::Error| format!("cannot write {}: {e}", p.display());
    for op in ops {
        match op {
            Op::Write { path, text, mode } => {
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| fail(parent, e))?;
                }
                atomic_write(path, text, *mode).map_err(|e| fail(path, e))?;
            }
            Op::NewDir { dir, files } => {
                let stage = hidden_sibling(dir, "new");
                std::fs::create_dir_all(&stage).map_err(|e| fail(&stage, e))?;
                let staged = files.iter().try_for_each(|(name, text, mode)| {
                    write_new(&stage.join(name), text, *mode)
                        .map_err(|e| fail(&stage.join(name), e))
                });
                let moved = staged.and_then(|()| {
                    // rename(2) onto an existing empty directory would succeed:
                    // a tool that appeared meanwhile is refused, not replaced.
                    if dir.symlink_metadata().is_ok() {
                        return Err(format!("{} appeared meanwhile", dir.display()));
                    }
                    std::fs::rename(&stage, dir).map_err(|e| fail(dir, e))
                });
                if let Err(e) = moved {
                    let _ = std::fs::remove_dir_all(&stage);
                    return Err(e);
                }
            }
            Op::Remove(path) => std::fs::remove_file(path).map_err(|e| fail(path, e))?,
            Op::RemoveDir(dir) => {
                let gone = hidden_sibling(dir, "deleted");
                std::fs::rename(dir, &gone).map_err(|e| fail(dir, e))?;
                std::fs::remove_dir_all(&gone).map_err(|e| fail(&gone, e))?;
            }
        }
    }
    Ok(())
}

/// The exclusive lock every change of a project's tool dirs holds, from
/// reading the files to writing them: `manage.lock` in the state
/// directory, an `flock` (per open file, so it serializes sessions of one
/// server as well as several servers).
pub(crate) fn lock(state_dir: &Path) -> Result<Flock<File>, String> {
    std::fs::create_dir_all(state_dir)
        .map_err(|e| format!("cannot create {}: {e}", state_dir.display()))?;
    let path = state_dir.join("manage.lock");
    let f = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    Flock::lock(f, FlockArg::LockExclusive)
        .map_err(|(_, e)| format!("cannot lock {}: {e}", path.display()))
}

/// Lines compared at most (old × new) before the diff falls back to
/// replacing the whole file.
const MAX_CELLS: usize = 4_000_000;
const CONTEXT: usize = 3;

/// A unified diff of `old` → `new` labelled `label` (`None` old: a new
/// file; `None` new: removed).
pub(crate) fn diff(label: &str, old: Option<&str>, new: Option<&str>) -> String {
    let a: Vec<&str> = old.map(|t| t.lines().collect()).unwrap_or_default();
    let b: Vec<&str> = new.map(|t| t.lines().collect()).unwrap_or_default();
    if old == new {
        return String::new();
    }
    let from = if old.is_some() {
        format!("a/{label}")
    } else {
        "/dev/null".into()
    };
    let to = if new.is_some() {
        format!("b/{label}")
    } else {
        "/dev/null".into()
    };
    let mut out = format!("--- {from}\n+++ {to}\n");
    let script = edit_script(&a, &b);
    // Hunks: runs of changes with CONTEXT lines around them.
    let changed: Vec<usize> = (0..script.len()).filter(|&i| script[i].0 != ' ').collect();
    let mut i = 0;
    while i < changed.len() {
        let start = changed[i].saturating_sub(CONTEXT);
        let mut end = changed[i];
        while i + 1 < changed.len() && changed[i + 1] <= end + 2 * CONTEXT + 1 {
            i += 1;
            end = changed[i];
        }
        let end = (end + CONTEXT + 1).min(script.len());
        let (mut oa, mut ob) = (0, 0);
        for (c, _) in &script[..start] {
            oa += usize::from(*c != '+');
            ob += usize::from(*c != '-');
        }
        let hunk = &script[start..end];
        let na = hunk.iter().filter(|(c, _)| *c != '+').count();
        let nb = hunk.iter().filter(|(c, _)| *c != '-').count();
        out.push_str(&format!("@@ -{},{na} +{},{nb} @@\n", oa + 1, ob + 1));
        for (c, l) in hunk {
            out.push_str(&format!("{c}{l}\n"));
        }
        i += 1;
    }
    out
}

/// The edit script (`' '`, `'-'`, `'+'`, line) from a longest common
/// subsequence; whole replacement when the files are too large to compare.
fn edit_script<'a>(a: &[&'a str], b: &[&'a str]) -> Vec<(char, &'a str)> {
    if a.len().saturating_mul(b.len()) > MAX_CELLS {
        let mut s: Vec<(char, &str)> = a.iter().map(|l| ('-', *l)).collect();
        s.extend(b.iter().map(|l| ('+', *l)));
        return s;
    }
    let (n, m) = (a.len(), b.len());
    // lcs[i][j]: the LCS length of a[i..] and b[j..].
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut s) = (0, 0, Vec::with_capacity(n + m));
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            s.push((' ', a[i]));
            (i, j) = (i + 1, j + 1);
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            s.push(('-', a[i]));
            i += 1;
        } else {
            s.push(('+', b[j]));
            j += 1;
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_shows_only_the_changed_lines_with_context() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = "a\nb\nc\nd\nE\nf\ng\nh\n";
        let d = diff("x", Some(old), Some(new));
        assert_eq!(
            d,
            "--- a/x\n+++ b/x\n@@ -2,7 +2,7 @@\n b\n c\n d\n-e\n+E\n f\n g\n h\n"
        );
        assert_eq!(diff("x", Some(old), Some(old)), "");
        assert!(
            diff("x", None, Some("new\n"))
                .contains("--- /dev/null\n+++ b/x\n@@ -1,0 +1,1 @@\n+new\n")
        );
    }

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp_file() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("f");
        atomic_write(&p, "one", 0o644).unwrap();
        atomic_write(&p, "two", 0o755).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "two");
        assert_eq!(std::fs::read_dir(t.path()).unwrap().count(), 1);
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o755);
    }
}
