//! The flag that would let a program run: the sandbox reports the path
//! that blocked it, and this names the toolchain preset that covers that
//! path (`--with python`) or the directory to read. Policy knowledge stays
//! out of the sandbox layer; `exec` and `call` add it here.

use crate::policy::presets::{self, Preset};
use crate::policy::{Context, Grant, Resolved, search_path};
use crate::sandbox::{SandboxError, outside_message};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The message for `e`, with the fix named for this operator.
pub(crate) fn explain(e: &SandboxError, resolved: &Resolved, ctx: &Context) -> String {
    match e {
        SandboxError::OutsideGrant {
            program,
            found,
            resolved: real,
        } => outside_message(program, found, real, Some(&fix_for(real, resolved, ctx))),
        // A script that exists but whose interpreter does not: execve's
        // ENOENT names the script.
        SandboxError::NotFound(name) if name.contains('/') => {
            interpreter_message(name, Path::new(name), resolved, ctx)
                .unwrap_or_else(|| e.to_string())
        }
        // Found on the call's PATH (an activated venv's `pytest`), but its
        // `#!` interpreter is not: execve's ENOENT names the program.
        SandboxError::NotFound(name) if found_script(name, resolved, ctx).is_some() => {
            let script = found_script(name, resolved, ctx).unwrap_or_default();
            interpreter_message(name, &script, resolved, ctx).unwrap_or_else(|| e.to_string())
        }
        // Namespace-free, Landlock refuses the interpreter (EACCES) where
        // the constructed root would not have it (ENOENT): the same fix.
        SandboxError::CannotExecute { program, .. } => {
            let script = match program.contains('/') {
                true => Some(PathBuf::from(program)),
                false => found_script(program, resolved, ctx),
            };
            script
                .and_then(|s| interpreter_message(program, &s, resolved, ctx))
                .unwrap_or_else(|| e.to_string())
        }
        SandboxError::NotFound(name) => match lookup(name, &resolved.grant, ctx).dropped {
            Some(found) => format!(
                "{name}: command not found in the call's PATH; {} exists, but the grant \
                 cannot read its directory (fix: {})",
                found.display(),
                fix_for(&found, resolved, ctx)
            ),
            None if resolved
                .grant
                .env_set
                .get("PATH")
                .is_some_and(|p| p.trim().is_empty()) =>
            {
                format!(
                    "{name}: command not found: the call's PATH is empty (set by [env] set or \
                     --env PATH=; give it directories, or leave PATH to toolcage)"
                )
            }
            None => e.to_string(),
        },
        _ => e.to_string(),
    }
}

/// `{name}: cannot start: the #! line's interpreter ... (fix: ...)` when
/// `script`'s interpreter is what cannot start.
fn interpreter_message(
    name: &str,
    script: &Path,
    resolved: &Resolved,
    ctx: &Context,
) -> Option<String> {
    let u = shebang_unreachable(script, &[], resolved, ctx)?;
    Some(format!(
        "{name}: cannot start: the #! line's interpreter {} (fix: {})",
        u.what,
        u.fix
            .unwrap_or_else(|| "install it, or change the script's #! line".into())
    ))
}

/// The file a bare `name` is on the call's PATH, when the call finds it.
fn found_script(name: &str, resolved: &Resolved, ctx: &Context) -> Option<PathBuf> {
    lookup(name, &resolved.grant, ctx)
        .kept
        .filter(|p| shebang(p).is_some())
}

/// A note when a bare `name` runs as another program than the operator's
/// PATH finds first (that one is in a directory the grant cannot read).
pub(crate) fn shadowed(name: &str, resolved: &Resolved, ctx: &Context) -> Option<String> {
    if name.contains('/') {
        return None;
    }
    let found = lookup(name, &resolved.grant, ctx);
    let (dropped, kept) = (found.dropped?, found.kept?);
    Some(format!(
        "note: {name} runs as {}: your PATH finds {} first, but the grant cannot read \
         its directory (fix: {})",
        kept.display(),
        dropped.display(),
        fix_for(&dropped, resolved, ctx)
    ))
}

/// The flag that lets the call read `path`: a preset not yet in effect
/// that covers it, else reading the program's prefix.
fn fix_for(path: &Path, resolved: &Resolved, ctx: &Context) -> String {
    let host = ctx.operator();
    let in_effect = |p: Preset| {
        resolved
            .provenance
            .iter()
            .any(|l| l.key == "with" && l.value == p.name())
    };
    match presets::covering(path, &host) {
        Some(p) if !in_effect(p) => p.flag(),
        _ => {
            let dir = presets::prefix_of(path, &host);
            match crate::policy::never_offered(&dir, &resolved.grant.homes, false) {
                // Never `--read` of a home or `/`: the agent may read this.
                Some(why) => format!("none offered: {why}"),
                None => format!("--read {}", dir.display()),
            }
        }
    }
}

/// Where `name` is on the operator's PATH: the first hit in a directory
/// the call's PATH leaves out (if it comes before every kept one), and the
/// first hit the call gets.
struct Lookup {
    dropped: Option<PathBuf>,
    kept: Option<PathBuf>,
}

fn lookup(name: &str, grant: &Grant, ctx: &Context) -> Lookup {
    let mut out = Lookup {
        dropped: None,
        kept: None,
    };
    let path = search_path::source(grant, ctx.env.get("PATH"));
    for e in search_path::entries(grant, path) {
        let candidate = grant.project.join(&e.dir).join(name);
        let executable = candidate
            .metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
        if !executable {
            continue;
        }
        match e.inside {
            Some(inside) => {
                out.kept = Some(grant.project.join(inside).join(name));
                break;
            }
            None => {
                out.dropped.get_or_insert(candidate);
            }
        }
    }
    out
}

/// Why `program` (a bare name looked up on the call's PATH, or an
/// absolute path) cannot start under `resolved`, and the fix when a flag
/// is one; `None` when it can. `extra_read` are the tool's own readable
/// paths.
pub(crate) fn unreachable(
    program: &str,
    extra_read: &[PathBuf],
    resolved: &Resolved,
    ctx: &Context,
) -> Option<Unreachable> {
    let grant = &resolved.grant;
    if program.starts_with('/') {
        let path = Path::new(program);
        let runnable = path
            .metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
        return if !runnable {
            Some(Unreachable {
                what: format!("{program} does not exist (or is not executable)"),
                fix: None,
            })
        } else if !search_path::can_read(grant, extra_read, path) {
            Some(Unreachable {
                what: format!("{program}: the grant cannot read it"),
                fix: Some(fix_for(path, resolved, ctx)),
            })
        } else {
            None
        };
    }
    let found = lookup(program, grant, ctx);
    if found.kept.is_some() {
        return None;
    }
    let inside = search_path::filter(grant, search_path::source(grant, ctx.env.get("PATH")));
    Some(match found.dropped {
        Some(at) => Unreachable {
            what: format!(
                "{program}: your PATH finds {}, but the grant cannot read its directory",
                at.display()
            ),
            fix: Some(fix_for(&at, resolved, ctx)),
        },
        None => Unreachable {
            what: format!("{program}: not found on the sandbox's PATH ({inside})"),
            fix: None,
        },
    })
}

/// A program a call would not find: what is wrong, and the flag that
/// fixes it when one does (else the program is not installed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unreachable {
    pub(crate) what: String,
    pub(crate) fix: Option<String>,
}

/// Why the interpreter on `script`'s `#!` line cannot start under
/// `resolved` (the path itself, or the NAME of `#!/usr/bin/env NAME`).
pub(crate) fn shebang_unreachable(
    script: &Path,
    extra_read: &[PathBuf],
    resolved: &Resolved,
    ctx: &Context,
) -> Option<Unreachable> {
    let (path, name) = shebang(script)?;
    // The kernel ends the interpreter's name (or its argument) at a space,
    // a tab or the newline: a `\r` before it is part of the name.
    if path.ends_with('\r') || name.as_deref().is_some_and(|n| n.ends_with('\r')) {
        return Some(Unreachable {
            what: format!(
                "'{}' ends in a carriage return (Windows line endings), so it is not found",
                path.trim_end_matches('\r').escape_default()
            ),
            fix: Some(format!(
                "convert {} to Unix line endings (dos2unix, or sed -i 's/\\r$//')",
                script.display()
            )),
        });
    }
    unreachable(&path, extra_read, resolved, ctx)
        .or_else(|| name.and_then(|n| unreachable(&n, extra_read, resolved, ctx)))
}

/// The interpreter a script's `#!` line names: the path, and for
/// `#!/usr/bin/env [-S] NAME ...` also NAME, looked up on PATH. `None`
/// without a `#!` line.
fn shebang(script: &Path) -> Option<(String, Option<String>)> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(script).ok()?.read(&mut head).ok()?;
    let line = head[..n].split(|&b| b == b'\n').next()?;
    let line = std::str::from_utf8(line.strip_prefix(b"#!")?).ok()?;
    let mut words = line.split([' ', '\t']).filter(|w| !w.is_empty());
    let interpreter = words.next()?.to_string();
    let via_env = Path::new(&interpreter).file_name() == Some("env".as_ref());
    let name = via_env
        .then(|| words.find(|w| !w.starts_with('-') && !w.contains('=')))
        .flatten()
        .map(str::to_string);
    Some((interpreter, name))
}
