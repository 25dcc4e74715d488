//! What `list` and `check` say about a tool beyond its definition, from
//! its resolved grant: whether a person must approve its calls, and why;
//! whether the program that starts it can be found inside the call.

use super::hints;
use crate::discover::clawd::INTERPRETERS;
use crate::discover::{Diagnostic, Runner, ToolSpec};
use crate::gate::mode_name;
use crate::policy::{ApprovalMode, Context, Resolved};
use serde::Serialize;

/// A tool whose calls wait for a person's yes.
#[derive(Debug, Clone, Serialize)]
pub struct Approval {
    /// `always`, `once` or `once-per-args`.
    pub mode: &'static str,
    /// Where the mode came from, with what would change it.
    pub why: String,
}

impl Approval {
    /// One line: "asks for approval before every call: <why>".
    pub fn text(&self) -> String {
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
pub fn approval(tool: &ToolSpec, resolved: &Resolved) -> Option<Approval> {
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
pub fn interpreter(tool: &ToolSpec, resolved: &Resolved, ctx: &Context) -> Option<Diagnostic> {
    let extra = &tool.needs_read;
    let (line, what, fix) = match &tool.runner {
        Runner::Clawd {
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
        Runner::Octomind { program }
        | Runner::Clawd {
            interpreter: None,
            entrypoint: program,
        } => {
            let u = hints::shebang_unreachable(program, extra, resolved, ctx)?;
            let fix = u
                .fix
                .unwrap_or_else(|| "install it, or change the script's #! line".into());
            let what = format!("the #! line's interpreter {}; its calls will fail", u.what);
            (Some(1), what, fix)
        }
        _ => return None,
    };
    let file = match &tool.runner {
        Runner::Octomind { program } => program.as_path(),
        _ => tool.source.as_path(),
    };
    let message = format!("tool {}: {what}", tool.name);
    Some(Diagnostic::warning(file, line, message).fix(fix))
}
