//! Path handling for policies: variable expansion, absolutising, and
//! canonicalization (symlinks resolved), and where toolcage keeps its own
//! state. With `entries.rs` (which lists a directory to expand a wildcard),
//! the only filesystem access in the policy layer besides reading policy
//! files.

use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// The values of `{project}`, `{home}` and `{tmp}`.
pub(crate) struct Vars<'a> {
    pub project: &'a Path,
    pub home: &'a Path,
    pub tmp: &'a Path,
    /// The project's `tools/` holds A3S tool files: `{a3s_tools}` in a
    /// protected or denied list names it (`entries.rs`).
    pub a3s_tools: bool,
    /// Where a call may create a symlink: the project and every write
    /// root the session's grants name (canonical). A read or write root
    /// that resolves through a link in one of them is refused
    /// (`entries.rs`): one call could replace it to point anywhere.
    pub write_bases: &'a [PathBuf],
}

/// Expand `{project}`, `{home}`, `{tmp}` and make the result absolute
/// (relative paths are joined to `base`) and lexically normal.
pub(crate) fn expand(raw: &str, vars: &Vars, base: &Path) -> Result<PathBuf, String> {
    if raw.trim().is_empty() {
        return Err("empty path".into());
    }
    if raw == "~" || raw.starts_with("~/") {
        return Err(format!("\"{raw}\": use {{home}} instead of ~"));
    }
    let mut out = String::new();
    let mut rest = raw;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open..];
        let close = after.find('}').ok_or_else(|| {
            format!("\"{raw}\": unclosed '{{' (variables are {{project}}, {{home}}, {{tmp}})")
        })?;
        let value = match &after[..=close] {
            "{project}" => vars.project,
            "{home}" => vars.home,
            "{tmp}" => vars.tmp,
            other => {
                return Err(format!(
                    "\"{raw}\": unknown variable {other} (use {{project}}, {{home}} or {{tmp}})"
                ));
            }
        };
        out.push_str(
            value
                .to_str()
                .ok_or_else(|| format!("{} is not UTF-8", value.display()))?,
        );
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Ok(normalize(&base.join(out)))
}

/// Remove `.` components and resolve `..` lexically. `base.join` of an
/// absolute path is that path, so the result is absolute when `base` is.
pub(crate) fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                // `/..` is `/`; a relative path keeps its leading `..`.
                let at_root = out.components().next_back() == Some(Component::RootDir);
                if !at_root && !out.pop() {
                    out.push(c);
                }
            }
            other => out.push(other),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// `p.starts_with(base)`, whole components compared. Grant paths are
/// normal (absolute, no `.`, no empty or trailing components), for which
/// comparing bytes says the same; anything else takes `Path::starts_with`.
/// Resolution compares every root with every guard: this keeps it cheap.
pub fn within(p: &Path, base: &Path) -> bool {
    let (a, b) = (p.as_os_str().as_bytes(), base.as_os_str().as_bytes());
    if plain(a) && plain(b) {
        a.starts_with(b) && (a.len() == b.len() || b == b"/" || a[b.len()] == b'/')
    } else {
        p.starts_with(base)
    }
}

/// `p` is absolute and normal: its bytes compare as its components do.
pub(crate) fn is_plain(p: &Path) -> bool {
    plain(p.as_os_str().as_bytes())
}

/// Absolute, and no component that `Path::components` would drop (empty,
/// `.`, a trailing `/`).
fn plain(p: &[u8]) -> bool {
    if p == b"/" {
        return true;
    }
    if p.first() != Some(&b'/') || p.last() == Some(&b'/') {
        return false;
    }
    // After each `/`: neither another `/` nor a `.` that ends the name.
    let mut i = 0;
    while i < p.len() {
        if p[i] == b'/' {
            match p.get(i + 1) {
                Some(b'/') => return false,
                Some(b'.') if matches!(p.get(i + 2), None | Some(b'/')) => return false,
                _ => {}
            }
        }
        i += 1;
    }
    true
}

/// Canonicalize a path that may not exist: the longest existing ancestor is
/// canonicalized and the rest appended.
pub fn canonical_lenient(p: &Path) -> PathBuf {
    if let Ok(c) = std::fs::canonicalize(p) {
        return c;
    }
    let p = normalize(p);
    let mut existing = p.clone();
    let mut rest = Vec::new();
    while let Some(name) = existing.file_name().map(|n| n.to_os_string()) {
        existing.pop();
        rest.push(name);
        if let Ok(mut c) = std::fs::canonicalize(&existing) {
            for n in rest.iter().rev() {
                c.push(n);
            }
            return c;
        }
    }
    p
}

/// The base of toolcage's own state (every project's audit log, rate
/// limits and slots): `$XDG_STATE_HOME/toolcage`, or
/// `<home>/.local/state/toolcage` when `XDG_STATE_HOME` is unset or
/// relative (as the XDG spec says to ignore relative values).
pub fn state_base(xdg_state_home: Option<&Path>, home: &Path) -> PathBuf {
    match xdg_state_home {
        Some(x) if x.is_absolute() => x.join("toolcage"),
        _ => home.join(".local/state/toolcage"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> (PathBuf, PathBuf, PathBuf) {
        ("/p".into(), "/h".into(), "/t".into())
    }

    #[test]
    fn expands_variables_and_relative_paths() {
        let (p, h, t) = vars();
        let v = Vars {
            project: &p,
            home: &h,
            tmp: &t,
            a3s_tools: false,
            write_bases: &[],
        };
        let base = Path::new("/p");
        assert_eq!(
            expand("{project}/x", &v, base).unwrap(),
            PathBuf::from("/p/x")
        );
        assert_eq!(
            expand("{home}/.ssh", &v, base).unwrap(),
            PathBuf::from("/h/.ssh")
        );
        assert_eq!(expand("{tmp}", &v, base).unwrap(), PathBuf::from("/t"));
        assert_eq!(
            expand("out/../build", &v, base).unwrap(),
            PathBuf::from("/p/build")
        );
        assert_eq!(
            expand("/abs/./x", &v, base).unwrap(),
            PathBuf::from("/abs/x")
        );
        assert_eq!(expand("/..", &v, base).unwrap(), PathBuf::from("/"));
    }

    #[test]
    fn rejects_bad_variables() {
        let (p, h, t) = vars();
        let v = Vars {
            project: &p,
            home: &h,
            tmp: &t,
            a3s_tools: false,
            write_bases: &[],
        };
        let base = Path::new("/p");
        assert!(
            expand("{proj}/x", &v, base)
                .unwrap_err()
                .contains("unknown variable {proj}")
        );
        assert!(
            expand("{project", &v, base)
                .unwrap_err()
                .contains("unclosed")
        );
        assert!(expand("~/x", &v, base).unwrap_err().contains("use {home}"));
        assert!(expand("  ", &v, base).is_err());
    }

    #[test]
    fn within_agrees_with_starts_with() {
        let paths = [
            "/", "/a", "/a/", "/a/b", "/ab", "/a/b/c", "/a/./b", "/a//b", "/a/.", "/a/..",
            "/a/../b", "a", "a/b", "./a", ".", "", "/./a", "//a", "/a/b/", "/.a", "/a.",
        ];
        for p in paths {
            for b in paths {
                let (p, b) = (Path::new(p), Path::new(b));
                assert_eq!(within(p, b), p.starts_with(b), "{p:?} within {b:?}");
            }
        }
    }

    #[test]
    fn state_base_follows_xdg_then_home() {
        let home = Path::new("/home/u");
        assert_eq!(
            state_base(Some(Path::new("/x/state")), home),
            PathBuf::from("/x/state/toolcage")
        );
        assert_eq!(
            state_base(Some(Path::new("rel")), home),
            PathBuf::from("/home/u/.local/state/toolcage")
        );
        assert_eq!(
            state_base(None, home),
            PathBuf::from("/home/u/.local/state/toolcage")
        );
    }

    #[test]
    fn lenient_canonicalization_resolves_the_existing_part() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("link")).unwrap();
        let got = canonical_lenient(&dir.path().join("link/missing/x"));
        assert_eq!(got, std::fs::canonicalize(&real).unwrap().join("missing/x"));
        assert_eq!(
            canonical_lenient(&dir.path().join("link")),
            std::fs::canonicalize(&real).unwrap()
        );
    }
}
