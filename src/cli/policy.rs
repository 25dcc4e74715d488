//! `toolcage policy [NAME]`: the resolved grant for a tool, or the defaults,
//! each setting with where it came from, and the tool's requests.

use super::{Global, PolicyArgs, status};
use crate::call::CallError;
use crate::policy::{PolicyError, Resolved, render_text};
use clap::Args;

#[derive(Debug, Args)]
pub struct PolicyCmdArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Print the resolved grant, provenance and requests as JSON.
    #[arg(long)]
    pub json: bool,
    /// The tool (default: the policy defaults, for no tool).
    #[arg(value_name = "NAME")]
    pub name: Option<String>,
}

pub fn run(global: &Global, args: &PolicyCmdArgs) -> u8 {
    let resolved = match &args.name {
        None => defaults(global, &args.policy).map_err(|e| (e.to_string(), status::INTERNAL)),
        Some(name) => for_tool(global, &args.policy, name),
    };
    let resolved = match resolved {
        Ok(r) => r,
        Err((e, code)) => {
            super::say(&e);
            return code;
        }
    };
    // The operator's PATH as the call would get it (the context of this
    // process, as the grant was resolved in).
    let dropped =
        crate::policy::Context::detect(&global.project, crate::discover::tooldirs::holds_a3s_tools)
            .map(|ctx| resolved.path_dropped(&ctx))
            .unwrap_or_default();
    if args.json {
        let json = serde_json::to_value(&resolved).and_then(|mut v| {
            v["path_dropped"] = serde_json::to_value(&dropped)?;
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
        let text = render_text(&resolved, &dropped);
        super::out::text(&crate::text::multi_line(&text));
    }
    status::OK
}

/// The defaults (no tool) under `policy`: what `toolcage policy` shows and
/// what `toolcage doctor` checks for each shipped profile. No discovery.
pub fn defaults(global: &Global, policy: &PolicyArgs) -> Result<Resolved, PolicyError> {
    let engine = global.engine_without_tools(policy)?;
    engine.stack.resolve(&engine.ctx, &engine.overrides, None)
}

/// The grant of tool `name`, with the exit status for each failure.
fn for_tool(global: &Global, policy: &PolicyArgs, name: &str) -> Result<Resolved, (String, u8)> {
    let internal = |e: PolicyError| (e.to_string(), status::INTERNAL);
    let engine = global.engine(policy).map_err(internal)?;
    let Some(tool) = engine.catalog.get(name) else {
        let e = CallError::unknown_tool(&engine.catalog, name);
        return Err((e.to_string(), status::INVALID));
    };
    engine.resolve(tool).map_err(internal)
}
