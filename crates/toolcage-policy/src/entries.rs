//! From one path as written in a policy to the entries of a grant list:
//! roots are canonicalized and must exist; guards (protected and denied
//! paths) may be missing, are kept under both names when they are symlinks,
//! and may end in a `*` wildcard that is expanded against what exists.

use super::canon;
use super::error::PolicyError;
use super::glob::{matches, wildcard};
use super::origin::{Layer, Origin, Sourced};
use super::paths::{Vars, expand, within};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Kind {
    /// A read or write root: must exist, canonicalized.
    Root,
    /// A protected or denied path: may be missing; may end in a wildcard.
    Guard,
}

/// The guard that names the project's `tools/` only when it is an A3S
/// tool directory: in an ordinary repository `tools/` is just source.
pub(crate) const A3S_TOOLS: &str = "{a3s_tools}";

/// The entries of one `[fs]` list of a file layer. A `{a3s_tools}` guard
/// that names nothing here goes to `skipped` (shown by `toolcage policy`).
pub(crate) fn from_list(
    l: &Layer,
    key: &str,
    list: &[String],
    kind: Kind,
    vars: &Vars,
    skipped: &mut Vec<Sourced<PathBuf>>,
) -> Result<Vec<Sourced<PathBuf>>, PolicyError> {
    let mut out = Vec::new();
    for (i, raw) in list.iter().enumerate() {
        let o = l.origin("fs", key, Some(i));
        if raw.contains(A3S_TOOLS) {
            a3s_tools(raw, kind, vars, o, &mut out, skipped)?;
            continue;
        }
        let glob = kind == Kind::Guard && wildcard(raw).map_err(|m| o.error(m))?;
        let p = expand(raw, vars, vars.project).map_err(|m| o.error(m))?;
        if glob {
            expand_glob(&p, &o, &mut out);
        } else {
            let what = format!("fs.{key}");
            resolve_path(&p, kind, l.shipped, &o, &what, vars.write_bases, &mut out)?;
        }
    }
    Ok(out)
}

/// `{a3s_tools}`: `{project}/tools` when it holds A3S tool files (see
/// [`Vars::a3s_tools`]), else nothing.
fn a3s_tools(
    raw: &str,
    kind: Kind,
    vars: &Vars,
    o: Origin,
    out: &mut Vec<Sourced<PathBuf>>,
    skipped: &mut Vec<Sourced<PathBuf>>,
) -> Result<(), PolicyError> {
    if kind != Kind::Guard || raw != A3S_TOOLS {
        return Err(o.error(format!(
            "\"{raw}\": {A3S_TOOLS} stands alone, and only in protected and denied paths \
             (write \"{{project}}/tools\" for the directory itself)"
        )));
    }
    let dir = vars.project.join("tools");
    if vars.a3s_tools {
        let o = Origin {
            source: format!("{}: {A3S_TOOLS}, it holds A3S tool files", o.source),
            ..o
        };
        guard(&dir, &o, out);
    } else if dir.exists() {
        let o = Origin {
            source: format!(
                "{}: {A3S_TOOLS}, no A3S tool files (*.md with front matter) in it",
                o.source
            ),
            ..o
        };
        skipped.push(Sourced { v: dir, o });
    }
    Ok(())
}

/// Expand a guard whose last component is a wildcard: one guard entry per
/// existing name in the parent directory that matches, in name order. A
/// parent that is missing or cannot be listed matches nothing (protected
/// and denied paths may be missing).
pub(crate) fn expand_glob(p: &Path, o: &Origin, out: &mut Vec<Sourced<PathBuf>>) {
    let (Some(parent), Some(pattern)) = (p.parent(), p.file_name()) else {
        return;
    };
    let Ok(dir) = std::fs::read_dir(parent) else {
        return;
    };
    let mut names: Vec<_> = dir
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .filter(|n| matches(pattern.as_bytes(), n.as_bytes()))
        .collect();
    names.sort();
    for name in names {
        guard(&parent.join(OsStr::new(&name)), o, out);
    }
}

/// Expand one path into entries: roots are canonicalized and must exist
/// (missing ones in shipped profiles are skipped), and must not resolve
/// through a symlink inside `write_bases` ([`planted_link`]); guards are
/// canonicalized leniently, and a guard that is itself a symlink is kept
/// under both names.
pub(crate) fn resolve_path(
    p: &Path,
    kind: Kind,
    shipped: bool,
    o: &Origin,
    what: &str,
    write_bases: &[PathBuf],
    out: &mut Vec<Sourced<PathBuf>>,
) -> Result<(), PolicyError> {
    match kind {
        Kind::Root => match canon::canonical(p) {
            Ok(c) => {
                if let Some(m) = planted_link(p, &c, write_bases, what) {
                    return Err(o.error(m));
                }
                let written = (c != p).then(|| p.to_path_buf());
                let o = Origin {
                    written,
                    ..o.clone()
                };
                out.push(Sourced { v: c, o })
            }
            Err(e) if shipped && e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let hint = if p.as_os_str().as_bytes().contains(&b'*') {
                    " (a * wildcard is expanded only in protected and denied paths)"
                } else {
                    ""
                };
                return Err(o.error(format!(
                    "{} does not exist (create it or remove it from {what}){hint}",
                    p.display()
                )));
            }
            Err(e) => return Err(o.error(format!("{}: {e}", p.display()))),
        },
        Kind::Guard => guard(p, o, out),
    }
    Ok(())
}

/// Why root `p` (canonical `c`) must not be granted: it resolves through
/// a symlink that lives inside one of `write_bases`, where a call can
/// create or replace links, so the next resolution would grant whatever
/// the link then names. `None` for links outside them (the operator's
/// own, like `/lib64` or a linked home above the project).
pub(crate) fn planted_link(
    p: &Path,
    c: &Path,
    write_bases: &[PathBuf],
    what: &str,
) -> Option<String> {
    if write_bases.is_empty() {
        return None;
    }
    let (link, target) = canon::links(p)
        .into_iter()
        .find(|(link, _)| write_bases.iter().any(|b| within(link, b)))?;
    let base = write_bases.iter().find(|b| within(&link, b))?;
    Some(format!(
        "{} resolves through the symlink {} -> {}, which lies inside the write root {} \
         (a call can replace that link to point anywhere); name the directory itself \
         ({}) in {what} instead, or replace the link with a real directory",
        p.display(),
        link.display(),
        target.display(),
        base.display(),
        c.display()
    ))
}

fn guard(p: &Path, o: &Origin, out: &mut Vec<Sourced<PathBuf>>) {
    let mut push = |v: PathBuf| out.push(Sourced { v, o: o.clone() });
    let c = canon::lenient(p);
    if canon::is_symlink(p) && c != p {
        push(canon::lenient(p.parent().unwrap_or(p)).join(p.file_name().unwrap_or_default()));
    }
    push(c);
}
