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
pub fn explain(e: &SandboxError, resolved: &Resolved, ctx: &Context) -> String {
    match e {
        SandboxError::OutsideGrant {
            program,
            found,
            resolved: real,
        } => outside_message(program, found, real, Some(&fix_for(real, resolved, ctx))),
        SandboxError::NotFound(name) => match lookup(name, &resolved.grant, ctx).dropped {
            Some(found) => format!(
                "{name}: command not found in the call's PATH; {} exists, but the grant \
                 cannot read its directory (fix: {})",
                found.display(),
                fix_for(&found, resolved, ctx)
            ),
            None => e.to_string(),
        },
        _ => e.to_string(),
    }
}

/// A note when a bare `name` runs as another program than the operator's
/// PATH finds first (that one is in a directory the grant cannot read).
pub fn shadowed(name: &str, resolved: &Resolved, ctx: &Context) -> Option<String> {
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
    let host = ctx.host();
    let in_effect = |p: Preset| {
        resolved
            .provenance
            .iter()
            .any(|l| l.key == "with" && l.value == p.name())
    };
    match presets::covering(path, &host) {
        Some(p) if !in_effect(p) => p.flag(),
        _ => format!("--read {}", presets::prefix_of(path, &host).display()),
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
