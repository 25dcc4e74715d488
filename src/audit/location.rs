//! Where a project's gate state and audit log live, and the rule that no
//! sandboxed call may write there.
//!
//! State directory: `$XDG_STATE_HOME/toolcage/<project-hash>/`, or
//! `~/.local/state/toolcage/<project-hash>/` when `XDG_STATE_HOME` is unset
//! or relative; `<project-hash>` is the first 16 hex digits of the SHA-256
//! of the canonical project path. It holds `audit.jsonl` (unless
//! `[audit] path` says otherwise), `ratelimit.json` and `slots/`.

use crate::policy::{AuditPolicy, Context, Grant, canonical_lenient};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// First 16 hex digits of SHA-256 of the canonical project path.
pub(crate) fn project_hash(project: &Path) -> String {
    let canon = canonical_lenient(project);
    let d = Sha256::digest(canon.as_os_str().as_encoded_bytes());
    d.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// The state directory of `project`: beneath [`Context::state_base`], the
/// base that every grant denies (the rule itself lives in the policy layer,
/// `crate::policy::state_base`).
pub(crate) fn state_dir(project: &Path, ctx: &Context) -> PathBuf {
    ctx.state_base().join(project_hash(project))
}

/// Create `dir` (and parents) private to the user (mode 0700): the state
/// directory, the audit log's directory.
pub(crate) fn private_dir(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))
}

/// The audit log: `[audit] path`, else `<state dir>/audit.jsonl`.
pub(crate) fn audit_path(policy: &AuditPolicy, state_dir: &Path) -> PathBuf {
    policy
        .path
        .clone()
        .unwrap_or_else(|| state_dir.join("audit.jsonl"))
}

/// `[audit] path = "-"`: the records go to standard output.
pub(crate) fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == AuditPolicy::STDOUT
}

/// Refuse `path` (what) when a call under `grant` could write it: inside a
/// write root. `/dev/null` is not a root that contains anything.
pub(crate) fn check_outside_write_roots(
    what: &str,
    path: &Path,
    grant: &Grant,
) -> Result<(), String> {
    let p = canonical_lenient(path);
    for root in &grant.write {
        if root.as_os_str() == "/dev/null" {
            continue;
        }
        let r = canonical_lenient(root);
        if p.starts_with(&r) {
            return Err(format!(
                "the {what} {} lies inside write root {} of the grant, where a sandboxed tool \
                 could change it; set [audit] path (or XDG_STATE_HOME) to a place outside every \
                 write root",
                path.display(),
                root.display()
            ));
        }
    }
    Ok(())
}

/// Each of the operator's files a grant could write (the audit log, the
/// state directory): the reason for each, empty when none. The gate
/// refuses the call on the first; `check` reports them all.
pub(crate) fn misplaced(audit: &Path, state: &Path, grant: &Grant) -> Vec<String> {
    [("audit log", audit), ("state directory", state)]
        .into_iter()
        .filter(|(_, path)| !is_stdout(path))
        .filter_map(|(what, path)| check_outside_write_roots(what, path, grant).err())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_dir_is_beneath_the_base_by_project_hash() {
        let ctx = Context {
            project: "/p".into(),
            home: "/home/u".into(),
            login_home: None,
            tmp: "/tmp".into(),
            cwd: "/".into(),
            xdg_state_home: Some("/x/state".into()),
            env: Default::default(),
            holds_a3s_tools: |_| false,
        };
        let p = Path::new("/nonexistent/a");
        assert_eq!(
            state_dir(p, &ctx),
            PathBuf::from("/x/state/toolcage").join(project_hash(p))
        );
        let a = project_hash(Path::new("/nonexistent/a"));
        assert_eq!(a.len(), 16);
        assert_ne!(a, project_hash(Path::new("/nonexistent/b")));
        assert_eq!(a, project_hash(Path::new("/nonexistent/x/../a")));
    }

    #[test]
    fn audit_path_inside_a_write_root_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let proj = dir.path().join("proj");
        std::fs::create_dir(&proj).unwrap();
        let mut g = Grant::closed(proj.clone());
        g.write = vec![proj.clone(), "/dev/null".into()];
        let e = check_outside_write_roots("audit log", &proj.join("logs/a.jsonl"), &g).unwrap_err();
        assert!(e.contains("inside write root"), "{e}");
        // Through a symlink into the root: still refused.
        std::os::unix::fs::symlink(&proj, dir.path().join("link")).unwrap();
        assert!(
            check_outside_write_roots("audit log", &dir.path().join("link/a.jsonl"), &g).is_err()
        );
        // Control: beside the root is fine.
        check_outside_write_roots("audit log", &dir.path().join("state/a.jsonl"), &g).unwrap();
        assert_eq!(
            audit_path(&AuditPolicy::default(), Path::new("/s")),
            PathBuf::from("/s/audit.jsonl")
        );
    }
}
