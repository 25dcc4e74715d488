//! `toolcage schema [NAME]`: MCP tool definitions as JSON, annotations from
//! each tool's resolved grant.

use super::{Global, PolicyArgs, status};
use crate::call::CallError;
use clap::Args;

#[derive(Debug, Args)]
pub struct SchemaArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// One tool: print its definition as one object (default: an array of all).
    #[arg(value_name = "NAME")]
    pub name: Option<String>,
}

pub fn run(global: &Global, args: &SchemaArgs) -> u8 {
    let engine = match global.engine(&args.policy) {
        Ok(e) => e,
        Err(e) => {
            super::say(&e);
            return status::INTERNAL;
        }
    };
    let value = match &args.name {
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
            engine.definition(tool)
        }
        None => engine
            .catalog
            .tools
            .iter()
            .map(|t| engine.definition(t))
            .collect::<Result<Vec<_>, _>>()
            .map(serde_json::Value::Array),
    };
    match value.map(|v| serde_json::to_string_pretty(&v)) {
        Ok(Ok(s)) => {
            println!("{s}");
            status::OK
        }
        Ok(Err(e)) => {
            super::say(&e);
            status::INTERNAL
        }
        Err(e) => {
            super::say(&format!("{e} (run `toolcage check`)"));
            status::INTERNAL
        }
    }
}
