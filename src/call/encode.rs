//! Encoding validated arguments into a sandboxed command (argv, stdin,
//! environment, extra readable paths): the shared pieces. Each kind's own
//! encoding is its runner's ([`super::runner`]).

use super::params_file::ParamsFile;
use crate::policy::Grant;
use crate::sandbox::Command;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// A command ready for the sandbox, and what must live until it has run.
#[derive(Debug)]
pub(crate) struct Encoded {
    pub(crate) command: Command,
    /// Removed on drop (after the run, even on error): held, never read.
    #[expect(dead_code, reason = "held for its Drop, which removes the file")]
    pub(crate) params_file: Option<ParamsFile>,
}

/// Why arguments could not be encoded (a template that cannot render, a
/// parameters file that cannot be written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EncodeError {
    /// The arguments do not fit the tool's command template.
    Invalid(String),
    /// toolcage could not prepare the call (I/O).
    Internal(String),
}

/// The arguments as a JSON object: what Octomind and clawd tools read on
/// stdin and OpenCrabs tools find in `$OPENCRABS_PARAMS`.
pub(crate) fn stdin_json(args: &Map<String, Value>) -> Vec<u8> {
    serde_json::to_vec(args).unwrap_or_else(|_| b"{}".to_vec())
}

/// Whether `name` can be an environment variable name (`[A-Za-z_][A-Za-z0-9_]*`).
pub(crate) fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The natural text of a value: strings raw, numbers and booleans as
/// written, arrays and objects as JSON. `None` for null (the variable is
/// not set, as if the parameter were absent).
pub(crate) fn env_text(v: &Value) -> Option<String> {
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
pub(crate) fn octomind_env(
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
