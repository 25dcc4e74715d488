//! `toolcage policy [NAME]`: the resolved grant for a tool, or the defaults,
//! each setting with where it came from, and the tool's requests.

use super::{Global, PolicyArgs, status};
use crate::call::CallError;
use crate::policy::render_text;
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
    // The defaults need no discovery.
    let loaded = match &args.name {
        Some(_) => global.engine(&args.policy),
        None => global.engine_without_tools(&args.policy),
    };
    let engine = match loaded {
        Ok(e) => e,
        Err(e) => {
            super::say(&e);
            return status::INTERNAL;
        }
    };
    let resolved = match &args.name {
        Some(name) => {
            let Some(tool) = engine.catalog.get(name) else {
                let e = CallError::UnknownTool {
                    name: name.clone(),
                    known: engine
                        .catalog
                        .tools
                        .iter()
                        .map(|t| t.name.clone())
                        .collect(),
                };
                super::say(&e);
                return status::INVALID;
            };
            engine.resolve(tool)
        }
        None => engine.stack.resolve(&engine.ctx, &engine.overrides, None),
    };
    let resolved = match resolved {
        Ok(r) => r,
        Err(e) => {
            super::say(&e);
            return status::INTERNAL;
        }
    };
    if args.json {
        match serde_json::to_string_pretty(&resolved) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                super::say(&e);
                return status::INTERNAL;
            }
        }
    } else {
        // Tool names and request notes come from the project.
        print!("{}", crate::text::multi_line(&render_text(&resolved)));
    }
    status::OK
}
