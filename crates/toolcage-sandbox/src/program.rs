//! Finding the program to execute, before the child starts.
//!
//! A bare name is searched in the sandbox's `PATH` the way `execvp(3)`
//! does; that `PATH` holds only directories the grant can read (`env.rs`),
//! so a version manager's shim dir in the operator's home is not searched.
//! The program found, or named by its path, must resolve (through its
//! symlinks: a venv's `python`, a toolchain proxy) to a file the grant can
//! read. When it does not, the call fails here with the resolved path
//! ([`SandboxError::OutsideGrant`]), which the caller turns into the flag
//! that grants it; the kernel would only say EACCES or ENOENT.

use super::error::SandboxError;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use toolcage_policy::{Grant, search_path};

fn is_executable_file(p: &Path) -> bool {
    p.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Whether the grant (with `extra_read`) lets the call read `file`, judged
/// by the file its symlinks lead to.
pub(super) fn grant_can_read(grant: &Grant, extra_read: &[PathBuf], file: &Path) -> bool {
    search_path::can_read(grant, extra_read, file)
}

fn outside(program: String, found: PathBuf) -> SandboxError {
    let resolved = found.canonicalize().unwrap_or_else(|_| found.clone());
    SandboxError::OutsideGrant {
        program,
        found,
        resolved,
    }
}

/// Resolve the program: `/` in the name means a path (relative to the
/// working directory `project`); otherwise search `path_var`. The result must be `readable`.
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
            Ok(_) if !readable(&p) => Err(outside(name, p)),
            Ok(_) => Ok(p),
        };
    }
    for dir in path_var.split(':').filter(|d| !d.is_empty()) {
        let candidate = project.join(dir).join(argv0);
        if !is_executable_file(&candidate) {
            continue;
        }
        // The first candidate is the program the PATH names: running a
        // later one instead would run another program silently.
        if readable(&candidate) {
            return Ok(candidate);
        }
        return Err(outside(name, candidate));
    }
    Err(SandboxError::NotFound(name))
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
    fn the_first_candidate_on_path_is_the_program() {
        let t = tempfile::tempdir().unwrap();
        let (first, second) = (t.path().join("first"), t.path().join("second"));
        std::fs::create_dir_all(&first).unwrap();
        std::fs::create_dir_all(&second).unwrap();
        let in_first = exe(&first, "python3");
        exe(&second, "python3");
        let path = format!("{}:{}", first.display(), second.display());
        assert_eq!(search("python3", &path, |_| true).unwrap(), in_first);
        // Unreadable, it is an error naming it, not a silent switch to the
        // second one.
        let beneath_second = |p: &Path| p.starts_with(&second);
        let err = search("python3", &path, beneath_second).unwrap_err();
        assert!(
            matches!(&err, SandboxError::OutsideGrant { found, .. } if *found == in_first),
            "{err}"
        );
        let missing = search("no-such-tool", &path, |_| true);
        assert!(matches!(missing, Err(SandboxError::NotFound(_))));
    }

    #[test]
    fn a_program_that_resolves_outside_the_grant_names_the_resolved_path() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        let (venv, pyenv) = (root.join("p/.venv/bin"), root.join("home/.pyenv/bin"));
        std::fs::create_dir_all(&venv).unwrap();
        std::fs::create_dir_all(&pyenv).unwrap();
        let real = exe(&pyenv, "python3.11");
        std::os::unix::fs::symlink(&real, venv.join("python")).unwrap();
        let project = root.join("p");
        let in_project = |p: &Path| p.canonicalize().is_ok_and(|r| r.starts_with(&project));
        for (argv0, path) in [
            (".venv/bin/python", String::new()),
            ("python", venv.display().to_string()),
        ] {
            let err = resolve(&OsString::from(argv0), &project, &path, in_project).unwrap_err();
            let text = err.to_string();
            assert!(
                matches!(&err, SandboxError::OutsideGrant { resolved, .. } if *resolved == real),
                "{text}"
            );
            assert!(text.contains(&real.display().to_string()), "{text}");
            assert!(
                text.contains(&format!("--read {}", pyenv.display())),
                "{text}"
            );
            assert_eq!(err.kind(), super::super::SandboxErrorKind::CannotExecute);
        }
        // Control: with the target granted it runs.
        let got = resolve(&OsString::from(".venv/bin/python"), &project, "", |_| true);
        assert_eq!(got.unwrap(), project.join(".venv/bin/python"));
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
