//! Octomind: exec the script; the arguments as a JSON object on stdin and
//! as `OCTOMIND_PARAM_<UPPER>`, plus `OCTOMIND_TOOL_NAME` and
//! `OCTOMIND_WORKDIR`.

use super::{Encode, Run, ToolRunner};
use crate::call::encode::{EncodeError, Encoded, octomind_env, stdin_json};
use crate::call::{CallError, CallResult};
use crate::discover::ToolSpec;
use crate::policy::Grant;
use crate::sandbox::Command;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

pub(crate) struct Executable<'a> {
    pub(crate) tool: &'a ToolSpec,
    pub(crate) program: &'a Path,
}

impl ToolRunner for Executable<'_> {
    fn runs(&self) -> String {
        self.program.display().to_string()
    }

    fn files(&self) -> Vec<PathBuf> {
        super::distinct(&[&self.tool.source, self.program])
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

impl Encode for Executable<'_> {
    fn encode(&self, args: &Map<String, Value>, grant: &Grant) -> Result<Encoded, EncodeError> {
        Ok(Encoded {
            command: Command {
                argv: vec![self.program.as_os_str().to_owned()],
                env: octomind_env(&self.tool.name, args, grant),
                stdin: stdin_json(args),
                ..Default::default()
            },
            params_file: None,
        })
    }
}
