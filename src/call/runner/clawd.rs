//! clawd: `<interpreter> <entrypoint>` (or the entry point itself when no
//! interpreter), the arguments as JSON on stdin.

use super::{Encode, Run, ToolRunner};
use crate::call::encode::{EncodeError, Encoded, stdin_json};
use crate::call::{CallError, CallResult};
use crate::discover::ToolSpec;
use crate::policy::Grant;
use crate::sandbox::Command;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

pub(crate) struct Entrypoint<'a> {
    pub(crate) tool: &'a ToolSpec,
    pub(crate) interpreter: Option<&'a str>,
    pub(crate) entrypoint: &'a Path,
}

impl ToolRunner for Entrypoint<'_> {
    fn runs(&self) -> String {
        match self.interpreter {
            Some(i) => format!("{i} {}", self.entrypoint.display()),
            None => self.entrypoint.display().to_string(),
        }
    }

    fn files(&self) -> Vec<PathBuf> {
        super::distinct(&[&self.tool.source, self.entrypoint])
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

impl Encode for Entrypoint<'_> {
    fn encode(&self, args: &Map<String, Value>, _grant: &Grant) -> Result<Encoded, EncodeError> {
        let mut argv = Vec::new();
        if let Some(i) = self.interpreter {
            argv.push(i.into());
        }
        argv.push(self.entrypoint.as_os_str().to_owned());
        Ok(Encoded {
            command: Command {
                argv,
                stdin: stdin_json(args),
                ..Default::default()
            },
            params_file: None,
        })
    }
}
