//! What `list` and `check` say about a tool beyond its definition, from
//! its resolved grant: whether a person must approve its calls, and why;
//! whether the program that starts it can be found inside the call.

use super::hints;
use crate::discover::clawd::INTERPRETERS;
use crate::discover::{Diagnostic, ToolKind, ToolSpec};
use crate::gate::mode_name;
use crate::policy::{ApprovalMode, Context, Resolved};
use serde::Serialize;

/// A tool whose calls wait for a person's yes.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Approval {
    /// `always`, `once` or `once-per-args`.
    pub(crate) mode: &'static str,
    /// Where the mode came from, with what would change it.
    pub(crate) why: String,
}

impl Approval {
    /// One line: "asks for approval before every call: <why>".
    pub(crate) fn text(&self) -> String {
        let when = match self.mode {
            "always" => "before every call",
            "once" => "at its first call in a session",
            _ => "once for each distinct set of arguments",
        };
        format!("asks for approval {when}: {}", self.why)
    }
}

/// The approval `tool`'s calls need under `resolved`, if any. A format's
/// default that raised it (an OpenCrabs tool without `requires_approval`)
/// is named with the key that changes it; otherwise the policy line the
/// mode came from, as `toolcage policy` shows it.
pub(crate) fn approval(tool: &ToolSpec, resolved: &Resolved) -> Option<Approval> {
    let mode = resolved.grant.approval;
    if mode == ApprovalMode::Never {
        return None;
    }
    let source = resolved
        .provenance
        .iter()
        .find(|p| p.key == "approval")
        .map_or_else(|| "built-in".to_string(), |p| p.source.clone());
    let why = match &tool.requests.approval_default {
        Some(default) if source.contains(default.as_str()) => default.clone(),
        _ => format!("approval mode {} ({source})", mode_name(mode)),
    };
    Some(Approval {
        mode: mode_name(mode),
        why,
    })
}

/// A warning when the program that starts `tool` will not be found or not
/// be readable inside the call: a clawd tool's
/// interpreter, or the `#!` line of a script that runs itself (Octomind, a
/// clawd entry point without an interpreter). The tool stays listed.
pub(crate) fn interpreter(
    tool: &ToolSpec,
    resolved: &Resolved,
    ctx: &Context,
) -> Option<Diagnostic> {
    let extra = &tool.needs_read;
    let (line, what, fix) = match &tool.kind {
        ToolKind::Clawd {
            interpreter: Some(name),
            ..
        } => {
            let u = hints::unreachable(name, extra, resolved, ctx)?;
            let other = format!(
                "set \"interpreter\" in tool.json to one that is ({})",
                INTERPRETERS.join(", ")
            );
            let fix = match u.fix {
                Some(flag) => format!("{flag}, or {other}"),
                None => format!("install {name}, or {other}"),
            };
            let what = format!("interpreter {}; its calls will exit 127", u.what);
            (tool.line, what, fix)
        }
        ToolKind::Octomind { program }
        | ToolKind::Clawd {
            interpreter: None,
            entrypoint: program,
        } => {
            if let Some(why) = not_runnable(program) {
                let fix = match tool.kind {
                    ToolKind::Clawd { .. } => {
                        "add a #! line (e.g. #!/bin/sh), or set \"interpreter\" in tool.json"
                    }
                    _ => "add a #! line naming its interpreter (e.g. #!/bin/sh)",
                };
                let message = format!("tool {}: {why}; its calls will exit 126", tool.name);
                return Some(Diagnostic::warning(program, Some(1), message).fix(fix));
            }
            let u = hints::shebang_unreachable(program, extra, resolved, ctx)?;
            let fix = u
                .fix
                .unwrap_or_else(|| "install it, or change the script's #! line".into());
            let what = format!("the #! line's interpreter {}; its calls will fail", u.what);
            (Some(1), what, fix)
        }
        _ => return None,
    };
    let file = match &tool.kind {
        ToolKind::Octomind { program } => program.as_path(),
        _ => tool.source.as_path(),
    };
    let message = format!("tool {}: {what}", tool.name);
    Some(Diagnostic::warning(file, line, message).fix(fix))
}

/// Why the kernel will not run `program` itself: neither a `#!` line nor
/// an ELF binary (execve fails with ENOEXEC). `None` when it can, or when
/// the file cannot be read here (the call says why).
fn not_runnable(program: &std::path::Path) -> Option<&'static str> {
    use std::io::Read;
    let mut head = [0u8; 4];
    let mut f = std::fs::File::open(program).ok()?;
    let n = f.read(&mut head).ok()?;
    let runnable = head[..n].starts_with(b"#!") || head[..n].starts_with(b"\x7fELF");
    (!runnable).then_some("it has no #! line and is not a binary, so the kernel cannot run it")
}

/// How deep `check` looks for git repositories inside the project, and
/// how many directories it reads at most: a project's own nested clones
/// sit near the top, and `check` must stay quick on a large tree.
const NESTED_REPO_DEPTH: usize = 4;
const NESTED_REPO_DIRS: usize = 5000;

/// Warnings for git repositories nested in the project (a `.git`
/// directory below the root) that calls may write: their hooks and config
/// run commands when someone uses git there later, outside the sandbox.
/// Only the project's own `.git` is protected by default. A submodule's
/// `.git` is a file pointing into the project's `.git`, so it is covered.
pub(crate) fn nested_repositories(
    root: &std::path::Path,
    grant: &crate::policy::Grant,
) -> Vec<Diagnostic> {
    let writable = |p: &std::path::Path| {
        grant.write.iter().any(|w| p.starts_with(w))
            && !grant.protected.iter().any(|r| p.starts_with(r))
    };
    let mut found = Vec::new();
    let mut queue = std::collections::VecDeque::from([(root.to_path_buf(), 0usize)]);
    let mut read = 0;
    while let Some((dir, depth)) = queue.pop_front() {
        read += 1;
        if read > NESTED_REPO_DIRS {
            break;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(kind) = e.file_type() else { continue };
            if !kind.is_dir() {
                continue; // symlinks and files (a submodule's .git) too
            }
            let name = e.file_name();
            if name == ".git" {
                if depth > 0 && writable(&e.path()) {
                    found.push(
                        Diagnostic::warning(
                            &e.path(),
                            None,
                            "a nested git repository that calls may write: its hooks and \
                             config run commands when git is used there, outside the sandbox",
                        )
                        .fix(format!(
                            "add \"{{project}}/{}\" to add_protected in the policy's [fs] section",
                            e.path().strip_prefix(root).unwrap_or(&e.path()).display()
                        )),
                    );
                }
                continue;
            }
            if depth + 1 < NESTED_REPO_DEPTH && name != "node_modules" && name != "target" {
                queue.push_back((e.path(), depth + 1));
            }
        }
    }
    found
}
