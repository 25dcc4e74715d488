//! OpenCrabs: the shell executor runs `/bin/sh -c <rendered command> sh
//! <values...>`, each `{{param}}` a positional parameter reference (never
//! pasted source); `$OPENCRABS_PARAMS` names a 0600 JSON file removed after
//! the call. The http executor runs no process: toolcage makes the request
//! itself ([`super::http`]).

use super::{Encode, Run, ToolRunner};
use crate::call::encode::{EncodeError, Encoded, stdin_json};
use crate::call::params_file::ParamsFile;
use crate::call::{CallError, CallResult};
use crate::discover::ToolSpec;
use crate::policy::Grant;
use crate::sandbox::Command;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;

pub(crate) struct Shell<'a> {
    pub(crate) command: &'a str,
}

impl ToolRunner for Shell<'_> {
    fn runs(&self) -> String {
        format!("sh -c '{}'", self.command)
    }

    /// The `tools.toml` entry is the spec itself: editing another entry in
    /// the same file does not change this tool's digest.
    fn files(&self) -> Vec<PathBuf> {
        Vec::new()
    }

    fn execute(
        &self,
        tool: &str,
        args: &Map<String, Value>,
        grant: &Grant,
        run: Run<'_>,
    ) -> Result<CallResult, CallError> {
        super::run_command(self, tool, args, grant, run)
    }
}

impl Encode for Shell<'_> {
    fn encode(&self, args: &Map<String, Value>, _grant: &Grant) -> Result<Encoded, EncodeError> {
        let rendered =
            crate::discover::opencrabs::shellctx::render(self.command, args).map_err(|e| {
                EncodeError::Invalid(format!("cannot render the command template: {e}"))
            })?;
        let file = ParamsFile::create(&stdin_json(args))
            .map_err(|e| EncodeError::Internal(format!("cannot write the parameters file: {e}")))?;
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
}

pub(crate) struct Http<'a> {
    pub(crate) tool: &'a ToolSpec,
    pub(crate) method: &'a str,
    pub(crate) url: &'a str,
}

impl ToolRunner for Http<'_> {
    fn runs(&self) -> String {
        format!("http {} {}", self.method, self.url)
    }

    fn files(&self) -> Vec<PathBuf> {
        Vec::new()
    }

    /// No process: toolcage makes the request, through the same decision
    /// as a sandboxed call's proxy (see [`super::http`]).
    fn execute(
        &self,
        _tool: &str,
        args: &Map<String, Value>,
        grant: &Grant,
        run: Run<'_>,
    ) -> Result<CallResult, CallError> {
        super::http::run(self.tool, args, grant, run.cancel)
    }
}
