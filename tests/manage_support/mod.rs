//! Helpers for the management tool tests: a project in a temp dir with its
//! own state dir and an operator policy outside it, and `toolcage serve`
//! over stdio driven line by line, answering elicitation as told.
#![allow(dead_code)]

use crate::stdio_client;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub struct Fixture {
    dir: tempfile::TempDir,
    /// State (lock, audit log) and the policy, outside the project.
    pub state: tempfile::TempDir,
}

impl Fixture {
    pub fn new(policy: &str) -> Fixture {
        let f = Fixture {
            dir: tempfile::Builder::new()
                .prefix("tc-manage-")
                .tempdir()
                .unwrap(),
            state: tempfile::Builder::new()
                .prefix("tc-manage-state-")
                .tempdir()
                .unwrap(),
        };
        std::fs::create_dir(f.root().join(".git")).unwrap();
        std::fs::write(f.policy(), policy).unwrap();
        f
    }

    pub fn root(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap()
    }

    pub fn policy(&self) -> PathBuf {
        self.state.path().join("policy.toml")
    }

    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.root().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root().join(rel)).unwrap_or_default()
    }

    pub fn toolcage(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_toolcage"));
        c.current_dir(self.root())
            .env("XDG_STATE_HOME", self.state.path())
            .arg("-C")
            .arg(self.root())
            .args(args)
            .arg("--policy")
            .arg(self.policy());
        c
    }

    /// `toolcage check` (stdout).
    pub fn check(&self) -> String {
        let o = self.toolcage(&["check"]).output().unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// Every audit record (`toolcage audit --json`).
    pub fn records(&self) -> Vec<Value> {
        let o = self
            .toolcage(&["audit", "--json"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// `serve --no-watch` (changes must show without the file watch);
    /// `elicit`: the client's answer to approval requests (`None`: the
    /// client does not declare elicitation).
    pub fn serve(&self, elicit: Option<&str>) -> Serve {
        Serve::spawn(self.toolcage(&["serve", "--no-watch"]), elicit)
    }
}

pub use stdio_client::Serve;

/// The policy that offers both tools; `approval` as given.
pub fn enabled(approval: bool) -> String {
    format!("[manage]\ncustom_script = true\ntool_manage = true\napproval = {approval}\n")
}

pub fn exists(root: &Path, rel: &str) -> bool {
    root.join(rel).symlink_metadata().is_ok()
}
