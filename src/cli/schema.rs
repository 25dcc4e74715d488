//! `toolcage schema [NAME]`: MCP tool definitions as JSON, annotations from
//! each tool's resolved grant.

use super::{Global, PolicyArgs, status};
use crate::call::CallError;
use crate::upstream::Session;
use clap::Args;

#[derive(Debug, Args)]
pub(crate) struct SchemaArgs {
    #[command(flatten)]
    pub(crate) policy: PolicyArgs,
    /// One tool: print its definition as one object (default: an array of all).
    #[arg(value_name = "NAME")]
    pub(crate) name: Option<String>,
    #[command(flatten)]
    pub(crate) opts: super::options::StoreCmdOpts,
}

pub(crate) fn run(global: &Global, args: &SchemaArgs) -> u8 {
    let engine = match global.engine(&args.policy) {
        Ok(e) => e,
        Err(e) => {
            super::say(&e);
            return status::INTERNAL;
        }
    };
    // Upstream servers' tools are known once their servers run.
    let upstream = match &args.name {
        Some(n) if engine.catalog.get(n).is_some() => Session::none(),
        _ => match Session::for_command(&engine) {
            Ok(g) => g,
            Err(e) => {
                super::say(&e);
                return status::INTERNAL;
            }
        },
    };
    let exposed = upstream.exposed();
    let tools: Vec<&crate::discover::ToolSpec> = match &args.name {
        Some(name) => {
            if let Some(t) = exposed.as_ref().and_then(|e| e.get(name)) {
                return print_json(&t.definition.to_json());
            }
            let Some(tool) = engine.catalog.get(name) else {
                super::say(&CallError::unknown_tool(&engine.catalog, name));
                return status::INVALID;
            };
            vec![tool]
        }
        None => engine.catalog.tools.iter().collect(),
    };
    let mut defs = Vec::with_capacity(tools.len());
    for tool in tools {
        match engine.definition(tool) {
            (d, None) => defs.push(d.to_json()),
            (_, Some(e)) => {
                super::say(&format!("{e} (run `toolcage check`)"));
                return status::INTERNAL;
            }
        }
    }
    if args.name.is_none()
        && let Some(e) = &exposed
    {
        defs.extend(e.definitions().iter().map(|d| d.to_json()));
        defs.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    }
    // One tool: its definition as one object; otherwise an array of all.
    let value = match &args.name {
        Some(_) => defs.pop().unwrap_or_default(),
        None => serde_json::Value::Array(defs),
    };
    print_json(&value)
}

fn print_json(value: &serde_json::Value) -> u8 {
    super::print_json(value).unwrap_or(status::OK)
}
