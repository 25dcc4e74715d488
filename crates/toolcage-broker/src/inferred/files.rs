//! Refusals of files: a path a message names, classified against the
//! grant; and the host's `/tmp` namespace-free.

use super::markers::{Error, MARKERS, OWN, under};
use super::paths::paths_in;
use crate::denial::Denial;
use std::path::Path;
use toolcage_policy::Grant;

/// Namespace-free there is no private tmpfs over `/tmp`: the call sees
/// the host's `/tmp`, readable by no rule and writable only when a write
/// root holds it (which would show it every file of the host's `/tmp`).
/// Programs that write `/tmp` by name, or through glibc's `tmpfile()`
/// (which ignores `TMPDIR`: it opens `/tmp` with `O_TMPFILE`, for which
/// Landlock wants read and write rights on all of `/tmp`), fail with EACCES.
/// Their refusal, when `text` shows one: a path in `/tmp` outside the
/// grant and the call's own tmp (`own`), or `tmpfile` named by the message.
pub fn host_tmp(grant: &Grant, own: Option<&Path>, text: &str) -> Option<Denial> {
    let tmp = Path::new("/tmp");
    if under(tmp, &grant.write).is_some() {
        return None;
    }
    let refused_in_tmp = |line: &str| {
        let refused = MARKERS
            .iter()
            .any(|(m, e)| *e != Error::Missing && line.contains(m));
        refused
            && (line.contains("tmpfile")
                || paths_in(line, tmp).iter().any(|p| {
                    p.starts_with(tmp)
                        && under(p, &grant.write).is_none()
                        && own.is_none_or(|o| !p.starts_with(o))
                }))
    };
    let count = text.lines().filter(|l| refused_in_tmp(l)).count();
    if count == 0 {
        return None;
    }
    let (reason, first_fix) = if grant.private_tmp {
        (
            "namespace-free, /tmp is the host's, not writable: the call's private tmp is \
             $TMPDIR, which tmpfile() and programs that write /tmp by name ignore",
            "use $TMPDIR where the program lets you",
        )
    } else {
        (
            "namespace-free, /tmp is the host's, not writable, and private_tmp = false \
             gives the call no TMPDIR",
            "[fs] private_tmp = true, for programs that honour TMPDIR",
        )
    };
    Some(Denial {
        layer: "filesystem",
        op: "create",
        target: "/tmp".into(),
        rule: None,
        reason: reason.into(),
        fix: Some(format!(
            "{first_fix}; or [fs] private_tmp = false and add_write = [\"/tmp\"], knowing the \
             call then reads and writes every file of the host's /tmp your user can (run \
             toolcage with TMPDIR outside /tmp: its runtime directory must not be in a write \
             root); or run where user namespaces work (`toolcage doctor` says why they do not)"
        )),
        count: u32::try_from(count).unwrap_or(u32::MAX),
        inferred: true,
    })
}

/// Why the grant refuses `path` and what would grant it, for a refusal
/// the kernel reported exactly (a Landlock audit record, `landlock_log.rs`).
pub(crate) fn explain_path(grant: &Grant, path: &Path) -> Option<(String, Option<String>)> {
    if let Some(d) = classify(grant, path, Error::Refused) {
        return Some((d.reason, d.fix));
    }
    outside_roots(grant, path).then(|| {
        offer(
            grant,
            "outside every read root: not in the sandbox".to_string(),
            "--read",
            path,
        )
    })
}

/// The reason and the fix `FLAG path`, unless the fix would grant what a
/// call's text must never suggest (`toolcage_policy::never_offered`: `/`,
/// the operator's home, a secret, a write to a system directory): then
/// only the reason, which says why no fix is offered. An agent reads
/// these lines, and would relay the fix to the person as a request.
fn offer(grant: &Grant, reason: String, flag: &str, path: &Path) -> (String, Option<String>) {
    match toolcage_policy::never_offered(path, &grant.homes, flag == "--write") {
        Some(why) => (format!("{reason}; {why}: no fix is offered"), None),
        None => (reason, Some(format!("{flag} {}", path.display()))),
    }
}

/// [`classify`] the path, or where it leads on the host when it (or a
/// directory above it) is a symlink.
pub(super) fn classify_resolved(grant: &Grant, path: &Path, error: Error) -> Option<Denial> {
    classify(grant, path, error).or_else(|| {
        let real = std::fs::canonicalize(path).ok().or_else(|| {
            let dir = std::fs::canonicalize(path.parent()?).ok()?;
            Some(dir.join(path.file_name()?))
        })?;
        (real != path)
            .then(|| classify(grant, &real, error))
            .flatten()
    })
}

/// What `error` on `path` says about the grant, as steps: the call's own
/// places say nothing; a secret or denied path is never granted; a
/// protected one is read-only; a write root's refusal is the file's own;
/// a read root's is a refused write; anything else is outside every root.
fn classify(grant: &Grant, path: &Path, error: Error) -> Option<Denial> {
    if OWN.iter().any(|o| path.starts_with(o)) && outside_roots(grant, path) {
        return None;
    }
    // Missing on the host too: the secret or denied path is not hidden,
    // it is not there.
    let absent = error == Error::Missing && path.symlink_metadata().is_err();
    if let Some(d) = never_granted(grant, path).filter(|_| !absent) {
        return Some(d);
    }
    if let Some(d) = protected(grant, path).filter(|_| error != Error::Missing) {
        return Some(d);
    }
    if under(path, &grant.write).is_some() {
        return None; // writable: the refusal is the file's own
    }
    if under(path, &grant.read).is_some() {
        // Readable but not writable: a refused or read-only write.
        return (error != Error::Missing).then(|| read_only(grant, path));
    }
    // Outside every root: inside a constructed root it is not there at all,
    // so "missing" counts when the host has it, or has the directory it
    // would be made in.
    if path.symlink_metadata().is_err() {
        return (error == Error::Missing)
            .then(|| not_there(grant, path))
            .flatten();
    }
    let (reason, fix) = offer(
        grant,
        "outside every read root: not in the sandbox".into(),
        "--read",
        path,
    );
    Some(denial(path, "read", reason, fix))
}

fn outside_roots(grant: &Grant, path: &Path) -> bool {
    under(path, &grant.read).is_none() && under(path, &grant.write).is_none()
}

/// An inferred filesystem denial of `op` on `path`.
fn denial(path: &Path, op: &'static str, reason: String, fix: Option<String>) -> Denial {
    Denial {
        layer: "filesystem",
        op,
        target: path.display().to_string(),
        rule: None,
        reason,
        fix,
        count: 1,
        inferred: true,
    }
}

/// A built-in secret, a secret in the operator's home, or a path the
/// policy denies: never granted by a flag.
fn never_granted(grant: &Grant, path: &Path) -> Option<Denial> {
    if let Some(what) = toolcage_policy::built_in_secret(path) {
        let reason = format!("a built-in secret ({what}): never granted");
        return Some(denial(path, "read", reason, None));
    }
    if let Some(what) = toolcage_policy::home_secret(path, &grant.homes) {
        let reason = format!("a secret in the operator's home ({what}): never granted by a flag");
        return Some(denial(path, "read", reason, None));
    }
    let d = under(path, &grant.denied)?;
    Some(denial(
        path,
        "read",
        format!("denied by the policy ({})", d.display()),
        // The layer that denies it may be a preset or a pattern:
        // `policy` names it.
        Some(format!(
            "`toolcage policy` names the layer that denies {}; drop it there if calls may read it",
            d.display()
        )),
    ))
}

/// A write under a protected path: read-only inside the project.
fn protected(grant: &Grant, path: &Path) -> Option<Denial> {
    let p = under(path, &grant.protected)?;
    Some(denial(
        path,
        "write",
        format!("protected: read-only inside the project ({})", p.display()),
        Some(format!(
            "remove {} from [fs] protected, if tools may rewrite it",
            p.display()
        )),
    ))
}

/// A refused write inside a read root; the fix writes its directory.
fn read_only(grant: &Grant, path: &Path) -> Denial {
    let dir = if path.is_dir() {
        path
    } else {
        path.parent().unwrap_or(path)
    };
    let (reason, fix) = offer(
        grant,
        "read-only: inside a read root, not a write root".into(),
        "--write",
        dir,
    );
    denial(path, "write", reason, fix)
}

/// A path missing in the call whose directory the host has, outside every
/// root: the call cannot create it there.
fn not_there(grant: &Grant, path: &Path) -> Option<Denial> {
    let dir = path.parent()?;
    (outside_roots(grant, dir) && dir.is_dir()).then(|| {
        let (reason, fix) = offer(
            grant,
            format!(
                "its directory {} is outside every root: not in the sandbox",
                dir.display()
            ),
            "--write",
            dir,
        );
        denial(path, "create", reason, fix)
    })
}
