//! After the call: a protected path that was absent stays absent.
//!
//! No mount can cover a name that does not exist, and Landlock cannot forbid
//! one name inside a writable directory, so a call can create a missing
//! protected path (`tools.toml`, `.mcp.json`, a tool directory, `.envrc`,
//! `.git/hooks` of a fresh `.git`). Whatever it created there is moved aside
//! to a sibling named `<name>.quarantined-by-toolcage-<time>` as soon as the
//! call ends (the same directory, so the rename cannot cross filesystems),
//! and a protected symlink the call replaced is put back. Discovery never
//! reads the quarantined name; the person can inspect it and restore it by
//! hand.

use super::Quarantined;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

fn aside(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?.to_string_lossy().into_owned();
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let parent = path.parent()?;
    (0..100)
        .map(|n| {
            let suffix = if n == 0 {
                String::new()
            } else {
                format!("-{n}")
            };
            parent.join(format!("{name}.quarantined-by-toolcage-{secs}{suffix}"))
        })
        .find(|p| p.symlink_metadata().is_err())
}

fn move_aside(path: &Path) -> Option<Quarantined> {
    let to = aside(path)?;
    std::fs::rename(path, &to).ok()?;
    Some(Quarantined {
        path: path.to_path_buf(),
        moved_to: to,
    })
}

/// Check the protected paths after a call. `missing` were absent before it,
/// `links` were symlinks (with their target), `replaced` changed identity.
/// Returns every path the call created or replaced, and what was undone.
pub fn after_call(
    missing: Vec<PathBuf>,
    links: Vec<(PathBuf, PathBuf)>,
    replaced: Vec<PathBuf>,
) -> (Vec<PathBuf>, Vec<Quarantined>) {
    let mut created = Vec::new();
    let mut undone = Vec::new();
    for p in missing {
        if p.symlink_metadata().is_ok() {
            undone.extend(move_aside(&p));
            created.push(p);
        }
    }
    for (p, link) in links {
        if std::fs::read_link(&p).ok().as_ref() == Some(&link) {
            continue;
        }
        if p.symlink_metadata().is_ok() {
            undone.extend(move_aside(&p));
        }
        let _ = std::os::unix::fs::symlink(&link, &p);
        created.push(p);
    }
    created.extend(replaced);
    (created, undone)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_created_missing_path_is_moved_aside_and_a_swapped_link_restored() {
        let t = tempfile::tempdir().unwrap();
        let missing = t.path().join("tools.toml");
        std::fs::write(&missing, "planted").unwrap();
        let link = t.path().join(".agents");
        std::fs::create_dir(&link).unwrap(); // replaced the symlink
        let untouched = t.path().join(".mcp.json"); // still absent
        let (created, undone) = after_call(
            vec![missing.clone(), untouched.clone()],
            vec![(link.clone(), PathBuf::from("agents-real"))],
            vec![],
        );
        assert_eq!(created, vec![missing.clone(), link.clone()]);
        assert_eq!(undone.len(), 2);
        assert!(
            missing.symlink_metadata().is_err(),
            "tools.toml stays absent"
        );
        assert_eq!(
            std::fs::read_to_string(&undone[0].moved_to).unwrap(),
            "planted"
        );
        assert!(
            undone[0]
                .moved_to
                .to_string_lossy()
                .contains("tools.toml.quarantined-by-toolcage-")
        );
        assert_eq!(
            std::fs::read_link(&link).unwrap(),
            PathBuf::from("agents-real")
        );
        assert!(!untouched.exists());
    }
}
