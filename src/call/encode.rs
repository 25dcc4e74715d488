//! Per-format argument encoding: from validated arguments to the sandboxed
//! command (argv, stdin, environment, extra readable paths).
//!
//! - Octomind: `[program]`, the arguments as a JSON object on stdin and as
//!   `OCTOMIND_PARAM_<UPPER>`, plus `OCTOMIND_TOOL_NAME` and `OCTOMIND_WORKDIR`.
//! - clawd: `[interpreter, entrypoint]` (or `[entrypoint]`), JSON on stdin.
//! - OpenCrabs shell: `/bin/sh -c <rendered command> sh <values...>`, each
//!   `{{param}}` a positional parameter reference (never pasted source);
//!   `$OPENCRABS_PARAMS` names a 0600 JSON file removed after the call.

use super::params_file::ParamsFile;
use crate::discover::{Runner, ToolSpec};
use crate::policy::Grant;
use crate::sandbox::Command;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// A command ready for the sandbox, and what must live until it has run.
#[derive(Debug)]
pub struct Encoded {
    pub command: Command,
    /// Removed on drop (after the run, even on error).
    pub params_file: Option<ParamsFile>,
}

/// Why arguments could not be encoded (a template that cannot render, a
/// parameters file that cannot be written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EncodeError {
    /// The tool cannot run at all in this version.
    Unsupported(String),
    /// The arguments do not fit the tool's command template.
    Invalid(String),
    /// toolcage could not prepare the call (I/O).
    Internal(String),
}

/// Build the sandboxed command for `tool` called with `args` under `grant`.
pub fn encode(
    tool: &ToolSpec,
    args: &Map<String, Value>,
    grant: &Grant,
) -> Result<Encoded, EncodeError> {
    let stdin = || serde_json::to_vec(args).unwrap_or_else(|_| b"{}".to_vec());
    match &tool.runner {
        Runner::Octomind { program } => Ok(Encoded {
            command: Command {
                argv: vec![program.clone().into_os_string()],
                env: octomind_env(&tool.name, args, grant),
                stdin: stdin(),
                ..Default::default()
            },
            params_file: None,
        }),
        Runner::Clawd {
            interpreter,
            entrypoint,
        } => {
            let mut argv = Vec::new();
            if let Some(i) = interpreter {
                argv.push(i.into());
            }
            argv.push(entrypoint.clone().into_os_string());
            Ok(Encoded {
                command: Command {
                    argv,
                    stdin: stdin(),
                    ..Default::default()
                },
                params_file: None,
            })
        }
        Runner::OpencrabsShell { command, .. } => {
            let rendered = crate::discover::template::render(command, args).map_err(|e| {
                EncodeError::Invalid(format!("cannot render the command template: {e}"))
            })?;
            let file = ParamsFile::create(&stdin()).map_err(|e| {
                EncodeError::Internal(format!("cannot write the parameters file: {e}"))
            })?;
            let mut env = BTreeMap::new();
            env.insert(
                "OPENCRABS_PARAMS".to_string(),
                file.path().display().to_string(),
            );
            // Values travel as positional parameters, never as shell source.
            let mut argv: Vec<std::ffi::OsString> = vec![
                "/bin/sh".into(),
                "-c".into(),
                rendered.script.into(),
                "sh".into(),
            ];
            argv.extend(rendered.args.into_iter().map(Into::into));
            Ok(Encoded {
                command: Command {
                    argv,
                    env,
                    extra_read: vec![file.path().to_path_buf()],
                    ..Default::default()
                },
                params_file: Some(file),
            })
        }
        Runner::OpencrabsHttp { .. } => Err(EncodeError::Unsupported(unsupported_http(tool))),
        Runner::AgentdirScript { .. } | Runner::AgentdirMcp { .. } => {
            Err(EncodeError::Unsupported(unsupported_agentdir(tool)))
        }
    }
}

pub fn unsupported_http(tool: &ToolSpec) -> String {
    format!(
        "tool {} ({}) is an http tool: toolcage makes its request itself, it has no command",
        tool.name,
        tool.source.display()
    )
}

pub fn unsupported_agentdir(tool: &ToolSpec) -> String {
    let kind = match tool.runner {
        Runner::AgentdirMcp { .. } => "kind: mcp (an upstream MCP server)",
        _ => "kind: script (a QuickJS program)",
    };
    format!(
        "{kind} tools are not supported yet: tool {} ({}) is listed and validated, but calls are refused",
        tool.name,
        tool.source.display()
    )
}

/// Whether `name` can be an environment variable name (`[A-Za-z_][A-Za-z0-9_]*`).
pub fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The natural text of a value: strings raw, numbers and booleans as
/// written, arrays and objects as JSON. `None` for null (the variable is
/// not set, as if the parameter were absent).
pub fn env_text(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::Array(_) | Value::Object(_) => Some(v.to_string()),
    }
}

/// `OCTOMIND_PARAM_<UPPER>` for each parameter whose name is a valid env
/// name (the others travel on stdin only), and the two context variables.
/// Values holding a NUL byte cannot be environment values: stdin only.
pub fn octomind_env(
    tool: &str,
    args: &Map<String, Value>,
    grant: &Grant,
) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for (k, v) in args {
        if !is_env_name(k) {
            continue;
        }
        if let Some(text) = env_text(v)
            && !text.contains('\0')
        {
            env.insert(format!("OCTOMIND_PARAM_{}", k.to_ascii_uppercase()), text);
        }
    }
    env.insert("OCTOMIND_TOOL_NAME".into(), tool.to_string());
    env.insert(
        "OCTOMIND_WORKDIR".into(),
        grant.project.display().to_string(),
    );
    env
}
