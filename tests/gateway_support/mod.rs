//! Helpers for the gateway tests: a project whose `.mcp.json` starts the
//! fixture upstream (`upstream.py`), and `toolcage serve` over stdio
//! driven line by line.
#![allow(dead_code)]

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

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
        let mut c = self.toolcage(&["serve", "--no-watch"]);
        c.arg("--policy").arg(self.policy());
        Serve::spawn(c)
    }
}

/// `toolcage serve` on stdio.
pub struct Serve {
    child: Child,
    stdin: Option<ChildStdin>,
    rx: Receiver<Value>,
    next: u64,
    /// Notifications seen so far.
    pub notifications: Vec<Value>,
}

impl Serve {
    fn spawn(mut c: Command) -> Serve {
        c.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = c.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && tx.send(v).is_err()
                {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut s = Serve {
            child,
            stdin,
            rx,
            next: 1,
            notifications: Vec::new(),
        };
        let init = s.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
        );
        assert!(init.get("result").is_some(), "{init}");
        s.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        s
    }

    pub fn send(&mut self, v: Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    }

    /// Send a request; its response (notifications meanwhile are kept).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(v) if v.get("id") == Some(&json!(id)) => return v,
                Ok(v) => self.notifications.push(v),
                Err(RecvTimeoutError::Timeout) => panic!("no answer to {method} in 90 s"),
                Err(RecvTimeoutError::Disconnected) => panic!("serve exited during {method}"),
            }
        }
    }

    /// `tools/call`: the result object.
    pub fn call(&mut self, name: &str, args: Value) -> Value {
        let r = self.request("tools/call", json!({"name": name, "arguments": args}));
        r.get("result").cloned().unwrap_or(r)
    }

    /// The names `tools/list` offers.
    pub fn tools(&mut self) -> Vec<String> {
        let r = self.request("tools/list", json!({}));
        r["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    }

    /// Wait up to `wait` for a notification with `method`.
    pub fn wait_for(&mut self, method: &str, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        loop {
            if self.notifications.iter().any(|n| n["method"] == method) {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(v) => self.notifications.push(v),
                Err(_) => return false,
            }
        }
    }

    /// Close stdin and wait for serve to exit.
    pub fn finish(mut self) -> i32 {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s.code().unwrap_or(-1);
            }
            assert!(Instant::now() < deadline, "serve did not exit on EOF");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

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
