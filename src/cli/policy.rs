//! `toolcage policy [NAME]`: the resolved grant for a tool, or the defaults,
//! each setting with where it came from, and the tool's requests.

use super::{Global, PolicyArgs, status};
use crate::call::{CallError, Engine};
use crate::policy::{PolicyError, Resolved, render_text};
use clap::Args;

#[derive(Debug, Args)]
pub(crate) struct PolicyCmdArgs {
    #[command(flatten)]
    pub(crate) policy: PolicyArgs,
    /// Print the resolved grant, provenance and requests as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    /// The tool (default: the policy defaults, for no tool).
    #[arg(value_name = "NAME")]
    pub(crate) name: Option<String>,
    #[command(flatten)]
    pub(crate) opts: super::options::DiscoverOpts,
}

pub(crate) fn run(global: &Global, args: &PolicyCmdArgs) -> u8 {
    // One engine: the grant, the PATH it leaves out and the session-wide
    // settings all come from its layers and context (tools only for NAME).
    let engine = match &args.name {
        None => global.engine_without_tools(&args.policy),
        Some(_) => global.engine(&args.policy),
    };
    let resolved = engine
        .map_err(|e| (e.to_string(), status::INTERNAL))
        .and_then(|engine| {
            let resolved = match &args.name {
                None => engine
                    .stack
                    .resolve(&engine.ctx, &engine.overrides, None)
                    .map_err(|e| (e.to_string(), status::INTERNAL)),
                Some(name) => for_tool(&engine, name),
            }?;
            Ok((resolved, engine))
        });
    let (resolved, engine) = match resolved {
        Ok(r) => r,
        Err((e, code)) => {
            super::say(&e);
            return code;
        }
    };
    // The operator's PATH as the call would get it (the context the grant
    // was resolved in).
    let dropped = resolved.path_dropped(&engine.ctx);
    let session = session_settings(&engine);
    if args.json {
        let json = serde_json::to_value(&resolved).and_then(|mut v| {
            v["path_dropped"] = serde_json::to_value(&dropped)?;
            v["session"] = session.json.clone();
            Ok(v)
        });
        let printed = match json {
            Ok(v) => super::print_json(&v),
            Err(e) => {
                super::say(&e);
                Some(status::INTERNAL)
            }
        };
        if let Some(code) = printed {
            return code;
        }
    } else {
        // Tool names and request notes come from the project.
        let text = render_text(&resolved, &dropped) + &session.text;
        super::out::text(&crate::text::multi_line(&text));
    }
    status::OK
}

/// The session-wide settings that also decide calls: `[global_rate_limit]`
/// and `[audit]`, as text lines and JSON.
struct Session {
    text: String,
    json: serde_json::Value,
}

fn session_settings(engine: &Engine) -> Session {
    use crate::policy::format_duration;
    let Ok(s) = engine.stack.session(&engine.ctx) else {
        return Session {
            text: String::new(),
            json: serde_json::Value::Null,
        };
    };
    let state = crate::audit::location::state_dir(&engine.project_root(), &engine.ctx);
    let audit = crate::audit::location::audit_path(&s.audit, &state);
    let audit_from = match s.audit.path {
        Some(_) => "[audit] path",
        None => "default: the project's state directory",
    };
    let limit = s
        .global_rate_limit
        .map(|r| format!("{} per {}", r.requests, format_duration(r.window)));
    let row = |k: &str, v: &str, from: &str| format!("  {k:<24}{v:<48} ({from})\n");
    let mut text = String::from("\nfor every tool of a session (serve, call):\n");
    text += &row(
        "global_rate_limit",
        limit.as_deref().unwrap_or("none"),
        if limit.is_some() {
            "[global_rate_limit]"
        } else {
            "built-in"
        },
    );
    text += &row("audit.path", &audit.display().to_string(), audit_from);
    text += &row(
        "audit.redact",
        &s.audit.redact.to_string(),
        "[audit] redact, default false",
    );
    text += &row(
        "audit.fail_closed",
        &s.audit.fail_closed.to_string(),
        "[audit] fail_closed, default true",
    );
    let json = serde_json::json!({
        "global_rate_limit": s.global_rate_limit.map(|r| serde_json::json!({
            "requests": r.requests, "window_secs": r.window.as_secs()
        })),
        "audit": {"path": audit, "redact": s.audit.redact, "fail_closed": s.audit.fail_closed},
    });
    Session { text, json }
}

/// The defaults (no tool) under `policy`: what `toolcage policy` shows and
/// what `toolcage doctor` checks for each shipped profile. No discovery.
pub(crate) fn defaults(global: &Global, policy: &PolicyArgs) -> Result<Resolved, PolicyError> {
    let engine = global.engine_without_tools(policy)?;
    engine.stack.resolve(&engine.ctx, &engine.overrides, None)
}

/// The grant of tool `name`, with the exit status for each failure.
fn for_tool(engine: &Engine, name: &str) -> Result<Resolved, (String, u8)> {
    let internal = |e: PolicyError| (e.to_string(), status::INTERNAL);
    let Some(tool) = engine.catalog.get(name) else {
        let e = CallError::unknown_tool(&engine.catalog, name);
        return Err((e.to_string(), status::INVALID));
    };
    engine.resolve(tool).map_err(internal)
}
