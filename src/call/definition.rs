//! What a tool is, as an agent and as a person approving it see it.
//!
//! - [`Definition`]: the MCP tool definition (`name`, `description`,
//!   `inputSchema`, `annotations`), the one shape `toolcage schema` prints
//!   and `tools/list` serves ([`crate::call::Engine::definition`]).
//! - [`runs`] and [`digest`]: the command or entry point a call will run,
//!   and a digest of the whole definition that an approval is bound to.
//!
//! The digest covers the tool's spec as discovered (name, format, source
//! file and line, description, input schema, requests, runner: the command
//! or entry point), the resolved grant, and the content (SHA-256) of every
//! file the call executes or is defined by ([`files`]): the Octomind
//! script, the clawd `tool.json` and its entry point. An OpenCrabs entry is
//! its spec (the `tools.toml` entry itself), so editing another entry in the
//! same file does not change it. A remembered approval (`once`,
//! `once-per-args`) holds only for the same digest: an edited script, a
//! same-named tool that now wins the collision, or a changed grant asks
//! again.
//!
//! Not covered: files a script or a shell command reads or runs by itself
//! (`./deploy.sh` called from a `tools.toml` command); those are project
//! files the person is trusting when they approve.

use super::runner::runner_for;
use crate::discover::ToolSpec;
use crate::policy::Grant;
use sha2::{Digest, Sha256};
use std::fs::OpenOptions;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// One tool as an MCP client sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Definition {
    pub name: String,
    pub description: String,
    /// JSON Schema, `type: object`.
    pub input_schema: serde_json::Value,
    /// MCP `ToolAnnotations` as JSON (`readOnlyHint`, ...); `{}` when the
    /// tool's grant did not resolve, so nothing can be promised.
    pub annotations: serde_json::Value,
}

impl Definition {
    /// `tool` with `annotations`; a schema that is not an object (which
    /// MCP does not allow) is shown as `{"type": "object"}`.
    pub fn new(tool: &ToolSpec, annotations: serde_json::Value) -> Definition {
        let input_schema = if tool.input_schema.is_object() {
            tool.input_schema.clone()
        } else {
            serde_json::json!({"type": "object"})
        };
        Definition {
            name: tool.name.clone(),
            description: tool.description.clone(),
            input_schema,
            annotations,
        }
    }

    /// `{name, description, inputSchema, annotations}`; annotations are
    /// left out when there are none.
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
        });
        if self.annotations.as_object().is_some_and(|o| !o.is_empty()) {
            v["annotations"] = self.annotations.clone();
        }
        v
    }
}

/// The command line a person is shown: the script, `<interpreter>
/// <entrypoint>`, or `sh -c '<command template>'` ([`super::runner::ToolRunner::runs`]).
/// Raw project text: the caller neutralises it ([`crate::text`]) before
/// showing it.
pub(crate) fn runs(tool: &ToolSpec) -> String {
    runner_for(tool).runs()
}

/// The files whose content is part of the definition: the source file
/// (except a `tools.toml`, whose entry is the spec) and what it executes
/// ([`super::runner::ToolRunner::files`]).
pub(crate) fn files(tool: &ToolSpec) -> Vec<PathBuf> {
    runner_for(tool).files()
}

/// `sha256:<hex>` of a regular file's content, or why it cannot be read
/// (the call will fail to start; the text still changes the digest).
/// Opened non-blocking, so a FIFO cannot hang the gate.
pub(crate) fn file_digest(path: &Path) -> String {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path);
    let mut file = match file {
        Ok(f) => f,
        Err(e) => return format!("unreadable: {e}"),
    };
    match file.metadata() {
        Ok(m) if m.is_file() => {}
        Ok(_) => return "not a regular file".into(),
        Err(e) => return format!("unreadable: {e}"),
    }
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return format!("unreadable: {e}"),
        }
    }
    format!("sha256:{}", hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Lowercase hex SHA-256 of the canonical JSON of the spec, the grant and
/// the content of [`files`].
pub(crate) fn digest(tool: &ToolSpec, grant: &Grant) -> String {
    let contents: Vec<serde_json::Value> = files(tool)
        .iter()
        .map(|p| serde_json::json!([p.display().to_string(), file_digest(p)]))
        .collect();
    let whole = serde_json::json!({
        "spec": serde_json::to_value(tool).unwrap_or(serde_json::Value::Null),
        "grant": serde_json::to_value(grant).unwrap_or(serde_json::Value::Null),
        "files": contents,
    });
    let text = crate::gate::approval::canonical_json(&whole);
    hex(&Sha256::digest(text.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discover::ToolKind;
    use crate::policy::Requests;
    use crate::spec::Format;
    use std::os::unix::fs::PermissionsExt;

    fn octomind(dir: &Path, body: &str) -> ToolSpec {
        let script = dir.join("deploy");
        std::fs::write(&script, body).unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        ToolSpec {
            name: "deploy".into(),
            format: Format::Octomind,
            source: script.clone(),
            line: None,
            description: "d".into(),
            input_schema: serde_json::json!({"type": "object"}),
            requests: Requests::default(),
            kind: ToolKind::Octomind { program: script },
            needs_read: vec![],
        }
    }

    #[test]
    fn the_digest_follows_the_script_the_runner_and_the_grant() {
        let dir = tempfile::tempdir().unwrap();
        let grant = Grant::closed(dir.path().to_path_buf());
        let t = octomind(dir.path(), "#!/bin/sh\necho one\n");
        let first = digest(&t, &grant);
        assert_eq!(first.len(), 64);
        // Control: nothing changed, same digest.
        assert_eq!(digest(&t, &grant), first);
        // The script's content.
        let t2 = octomind(dir.path(), "#!/bin/sh\necho two\n");
        let edited = digest(&t2, &grant);
        assert_ne!(edited, first);
        // The runner (another command under the same name).
        let mut shell = t2.clone();
        shell.format = Format::Opencrabs;
        shell.kind = ToolKind::OpencrabsShell {
            command: "echo hi".into(),
            params: vec![],
        };
        assert_ne!(digest(&shell, &grant), edited);
        // The grant.
        let mut wider = grant.clone();
        wider.write.push("/tmp".into());
        assert_ne!(digest(&t2, &wider), edited);
    }

    #[test]
    fn runs_names_the_command_or_entry_point() {
        let dir = tempfile::tempdir().unwrap();
        let t = octomind(dir.path(), "#!/bin/sh\n");
        assert_eq!(runs(&t), dir.path().join("deploy").display().to_string());
        let mut c = t.clone();
        c.kind = ToolKind::Clawd {
            interpreter: Some("python3".into()),
            entrypoint: "/p/.clawd/tools/x/main.py".into(),
        };
        assert_eq!(runs(&c), "python3 /p/.clawd/tools/x/main.py");
        assert_eq!(files(&c).len(), 2);
        c.kind = ToolKind::OpencrabsShell {
            command: "echo {{a}}".into(),
            params: vec![],
        };
        assert_eq!(runs(&c), "sh -c 'echo {{a}}'");
        assert!(files(&c).is_empty());
    }

    #[test]
    fn a_fifo_or_a_missing_file_does_not_hang_or_fail() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert_eq!(file_digest(&fifo), "not a regular file");
        assert!(file_digest(&dir.path().join("gone")).starts_with("unreadable"));
    }
}
