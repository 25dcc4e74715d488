//! Finding the program to execute, before the child starts.
//!
//! A bare name is searched in the sandbox's `PATH` the way `execvp(3)` does,
//! except that a candidate the grant cannot read is passed over: a version
//! manager's shim in the user's home (pyenv, nvm) is first on the operator's
//! PATH but unreadable inside the sandbox, while the system's copy in
//! `/usr/bin` runs fine.

use super::SandboxError;
use crate::policy::Grant;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

fn is_executable_file(p: &Path) -> bool {
    p.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Whether `file` lies beneath a root the sandbox can read (read or write
/// roots, or `extra_read`) and not beneath a denied path. Symlinks are
/// resolved first, as the kernel checks the file it finally opens.
pub(super) fn grant_can_read(grant: &Grant, extra_read: &[PathBuf], file: &Path) -> bool {
    let Ok(real) = file.canonicalize() else {
        return false;
    };
    let beneath = |root: &PathBuf| {
        real.starts_with(root) || root.canonicalize().is_ok_and(|r| real.starts_with(r))
    };
    let allowed = grant
        .read
        .iter()
        .chain(&grant.write)
        .chain(extra_read)
        .any(beneath);
    allowed && !grant.denied.iter().any(beneath)
}

/// Resolve the program: `/` in the name means a path (relative to the
/// project); otherwise search `path_var`, skipping what `readable` rejects.
pub(super) fn resolve(
    argv0: &OsStr,
    project: &Path,
    path_var: &str,
    readable: impl Fn(&Path) -> bool,
) -> Result<PathBuf, SandboxError> {
    let name = argv0.to_string_lossy().into_owned();
    if name.is_empty() {
        return Err(SandboxError::NotFound(name));
    }
    if argv0.as_bytes().contains(&b'/') {
        let p = project.join(argv0);
        return match p.metadata() {
            Err(_) => Err(SandboxError::NotFound(name)),
            Ok(m) if m.is_dir() => Err(SandboxError::CannotExecute {
                program: name,
                reason: "is a directory".into(),
            }),
            Ok(_) if !is_executable_file(&p) => Err(SandboxError::CannotExecute {
                program: name,
                reason: "permission denied (not executable: chmod +x)".into(),
            }),
            Ok(_) => Ok(p),
        };
    }
    let mut unreadable: Option<PathBuf> = None;
    for dir in path_var.split(':').filter(|d| !d.is_empty()) {
        let candidate = project.join(dir).join(argv0);
        if !is_executable_file(&candidate) {
            continue;
        }
        if readable(&candidate) {
            return Ok(candidate);
        }
        unreadable.get_or_insert(candidate);
    }
    match unreadable {
        Some(p) => Err(SandboxError::CannotExecute {
            program: name,
            reason: format!(
                "found only at {}, outside the policy's read roots (fix: --read {} or a policy read root)",
                p.display(),
                p.parent().unwrap_or(Path::new("/")).display()
            ),
        }),
        None => Err(SandboxError::NotFound(name)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn exe(dir: &Path, name: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    fn search(
        name: &str,
        path: &str,
        readable: impl Fn(&Path) -> bool,
    ) -> Result<PathBuf, SandboxError> {
        resolve(&OsString::from(name), Path::new("/"), path, readable)
    }

    #[test]
    fn the_first_readable_candidate_on_path_wins() {
        let t = tempfile::tempdir().unwrap();
        let (shim, system) = (t.path().join("shim"), t.path().join("system"));
        std::fs::create_dir_all(&shim).unwrap();
        std::fs::create_dir_all(&system).unwrap();
        let in_shim = exe(&shim, "python3");
        let in_system = exe(&system, "python3");
        let path = format!("{}:{}", shim.display(), system.display());

        assert_eq!(search("python3", &path, |_| true).unwrap(), in_shim);
        let beneath_system = |p: &Path| p.starts_with(&system);
        assert_eq!(search("python3", &path, beneath_system).unwrap(), in_system);
    }

    #[test]
    fn a_program_found_only_outside_the_grant_names_the_fix() {
        let t = tempfile::tempdir().unwrap();
        exe(t.path(), "tool");
        let err = search("tool", &t.path().display().to_string(), |_| false).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, SandboxError::CannotExecute { .. }), "{text}");
        assert!(text.contains("outside the policy's read roots"), "{text}");
        assert!(
            text.contains(&format!("--read {}", t.path().display())),
            "{text}"
        );
        let missing = search("no-such-tool", &t.path().display().to_string(), |_| true);
        assert!(matches!(missing, Err(SandboxError::NotFound(_))));
    }

    #[test]
    fn grant_can_read_follows_symlinks_and_honours_denied_paths() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        let (allowed, other) = (root.join("allowed"), root.join("other"));
        std::fs::create_dir_all(allowed.join("secret")).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        let inside = exe(&allowed, "a");
        let hidden = exe(&allowed.join("secret"), "b");
        let outside = exe(&other, "c");
        let link = allowed.join("link");
        std::os::unix::fs::symlink(&outside, &link).unwrap();

        let mut grant = Grant::closed(root.clone());
        grant.read.push(allowed.clone());
        grant.denied.push(allowed.join("secret"));
        assert!(grant_can_read(&grant, &[], &inside));
        assert!(!grant_can_read(&grant, &[], &hidden));
        assert!(!grant_can_read(&grant, &[], &outside));
        assert!(
            !grant_can_read(&grant, &[], &link),
            "a symlink is judged by its target"
        );
        assert!(grant_can_read(&grant, std::slice::from_ref(&other), &link));
    }
}
