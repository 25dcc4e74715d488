//! Helpers for the gateway tests: a project whose `.mcp.json` starts the
//! fixture upstream (`upstream.py`), and `toolcage serve` over stdio
//! driven line by line.
#![allow(dead_code)]

use crate::stdio_client;

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

pub const FIXTURE: &str = include_str!("upstream.py");

pub struct Fixture {
    pub dir: tempfile::TempDir,
    /// Its own state dir (pins, audit log), outside the project.
    pub state: tempfile::TempDir,
}

impl Fixture {
    /// A project with the fixture server as `fx` (`env` added to its
    /// `.mcp.json` entry) and `policy.toml` holding `policy`.
    pub fn new(tag: &str, env: Value, policy: &str) -> Fixture {
        let dir = tempfile::Builder::new()
            .prefix(&format!("tc-gw-{tag}-"))
            .tempdir()
            .unwrap();
        let state = tempfile::Builder::new()
            .prefix(&format!("tc-gw-{tag}-state-"))
            .tempdir()
            .unwrap();
        let f = Fixture { dir, state };
        f.write("fx.py", FIXTURE);
        f.set_env(env);
        f.write_outside("policy.toml", policy);
        f
    }

    pub fn root(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap()
    }

    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    /// The policy lives beside the state, not in the project.
    pub fn write_outside(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.state.path().join(rel);
        std::fs::write(&p, text).unwrap();
        p
    }

    pub fn set_env(&self, env: Value) {
        // The project's path as an argument marks the server's processes.
        let marker = self.dir.path().to_string_lossy().to_string();
        let mcp = json!({"mcpServers": {"fx": {"command": "python3", "args": ["fx.py", marker], "env": env}}});
        self.write(".mcp.json", &mcp.to_string());
    }

    pub fn policy(&self) -> PathBuf {
        self.state.path().join("policy.toml")
    }

    /// `toolcage ARGS` in the project, with its own state directory.
    pub fn toolcage(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_toolcage"));
        c.current_dir(self.dir.path())
            .env("XDG_STATE_HOME", self.state.path())
            .env("TOOLCAGE_TEST_HOST_SECRET", "host-secret-value")
            .arg("-C")
            .arg(self.dir.path())
            .args(args);
        c
    }

    /// Run `toolcage ARGS --policy policy.toml`: (status, stdout, stderr).
    pub fn run(&self, args: &[&str]) -> (i32, String, String) {
        let mut c = self.toolcage(args);
        c.arg("--policy").arg(self.policy());
        let out = c.output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    pub fn serve(&self) -> Serve {
        self.serve_answering(None)
    }

    /// `serve` with a client that declares elicitation and answers every
    /// request with `action` (`None`: declares none).
    pub fn serve_answering(&self, action: Option<&str>) -> Serve {
        let mut c = self.toolcage(&["serve", "--no-watch"]);
        c.arg("--policy").arg(self.policy());
        Serve::spawn(c, action)
    }

    /// Replace the server's `.mcp.json` entry with `server` (`fx`).
    pub fn set_server(&self, server: Value) {
        self.write(
            ".mcp.json",
            &json!({"mcpServers": {"fx": server}}).to_string(),
        );
    }

    /// The fixture's entry with `env` and extra `args` after `fx.py`.
    pub fn server_with(&self, env: Value, args: &[&str]) -> Value {
        let mut all = vec!["fx.py".to_string()];
        all.extend(args.iter().map(|a| a.to_string()));
        all.push(self.dir.path().to_string_lossy().to_string());
        json!({"command": "python3", "args": all, "env": env})
    }
}

pub use stdio_client::Serve;

/// The text of a tool result.
pub fn text(result: &Value) -> String {
    result["content"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|c| c["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

pub fn is_error(result: &Value) -> bool {
    result["isError"] == json!(true)
}

/// Processes whose command line mentions `needle` (the fixture's path).
pub fn processes_with(needle: &Path) -> Vec<String> {
    let needle = needle.to_string_lossy().to_string();
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(&needle) {
                found.push(cmd);
            }
        }
    }
    found
}
