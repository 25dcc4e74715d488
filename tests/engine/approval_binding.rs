//! Approvals are bound to what was approved, through the binary: a `once`
//! or `once-per-args` yes given over MCP elicitation covers the same tool
//! only while its definition is unchanged (an edited script, or a
//! same-named tool that wins after a hot reload, asks again); the prompt
//! shows what will run and where it is defined; Ctrl-C at the terminal
//! prompt leaves an `approval_interrupted` record.

use crate::common;

use common::Project;
use serde_json::{Value, json};
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn exe(p: &Project, rel: &str, body: &str) {
    let path = p.write(rel, body);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn deploy_script(p: &Project, says: &str) {
    exe(
        p,
        ".agents/tools/deploy",
        &format!("#!/bin/sh\n# @description Deploy.\n# @param target string Where.\necho {says}\n"),
    );
}

/// A policy outside the project that asks for approval of `deploy`.
fn policy(mode: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("approve.toml");
    std::fs::write(
        &path,
        format!("[tools.deploy.approval]\nmode = \"{mode}\"\n"),
    )
    .unwrap();
    let p = path.display().to_string();
    (dir, p)
}

fn toolcage(p: &Project) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_toolcage"));
    c.arg("-C")
        .arg(&p.dir)
        .current_dir(&p.dir)
        .env("XDG_STATE_HOME", p.state_dir());
    c
}

fn records(p: &Project) -> Vec<Value> {
    let o = toolcage(p)
        .args(["audit", "--json"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A stdio MCP client that declares elicitation and accepts every request.
struct Client {
    child: Child,
    stdin: ChildStdin,
    rx: mpsc::Receiver<Value>,
    next_id: u64,
}

impl Client {
    fn start(p: &Project, policy: &str) -> Client {
        let mut child = toolcage(p)
            .args(["serve", "--policy", policy])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && tx.send(v).is_err()
                {
                    break;
                }
            }
        });
        let stdin = child.stdin.take().unwrap();
        let mut c = Client {
            child,
            stdin,
            rx,
            next_id: 1,
        };
        c.send(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "t", "version": "0"}}}),
        );
        c.recv_until(|m| m["id"] == 0);
        c.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        c
    }

    fn send(&mut self, v: Value) {
        let mut line = serde_json::to_string(&v).unwrap();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).unwrap();
        self.stdin.flush().unwrap();
    }

    fn recv_until(&mut self, want: impl Fn(&Value) -> bool) -> Value {
        loop {
            let m = self
                .rx
                .recv_timeout(Duration::from_secs(60))
                .expect("the server answers");
            if want(&m) {
                return m;
            }
        }
    }

    /// Call `deploy`; accept every elicitation. Returns the result text and
    /// the elicitation messages shown.
    fn deploy(&mut self) -> (String, Vec<String>) {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                         "params": {"name": "deploy", "arguments": {"target": "prod"}}}));
        let mut asked = Vec::new();
        loop {
            let m = self.recv_until(|_| true);
            if m["method"] == "elicitation/create" {
                asked.push(m["params"]["message"].as_str().unwrap_or("").to_string());
                self.send(json!({"jsonrpc": "2.0", "id": m["id"],
                                 "result": {"action": "accept", "content": {}}}));
            } else if m["id"] == id {
                let text = m["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{m}"))
                    .to_string();
                return (text, asked);
            }
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn an_approval_over_mcp_covers_only_the_unchanged_tool() {
    for mode in ["once", "once-per-args"] {
        let p = Project::new(&format!("bind-mcp-{mode}"));
        deploy_script(&p, "v1");
        let (_keep, policy) = policy(mode);
        let mut c = Client::start(&p, &policy);

        let (text, asked) = c.deploy();
        assert_eq!(text, "v1\n", "{mode}");
        assert_eq!(asked.len(), 1, "{mode}: the first call is asked");
        let script = p.path(".agents/tools/deploy").display().to_string();
        assert!(
            asked[0].contains(&format!("runs:       {script}")),
            "{}",
            asked[0]
        );
        assert!(
            asked[0].contains(&format!("defined in: {script}")),
            "{}",
            asked[0]
        );
        // Control: the unchanged tool is remembered.
        let (text, asked) = c.deploy();
        assert_eq!((text.as_str(), asked.len()), ("v1\n", 0), "{mode}");

        // The script is edited: asked again (with or without a reload).
        deploy_script(&p, "v2");
        let (text, asked) = c.deploy();
        assert_eq!((text.as_str(), asked.len()), ("v2\n", 1), "{mode}");
        let (text, asked) = c.deploy();
        assert_eq!((text.as_str(), asked.len()), ("v2\n", 0), "{mode}");

        // A same-named tool of higher priority appears: after the hot
        // reload it is a different tool, asked again.
        p.write(
            "tools.toml",
            "[[tools]]\nname = \"deploy\"\ndescription = \"Crab.\"\nexecutor = \"shell\"\n\
             command = \"echo crab {{target}}\"\n\n[[tools.params]]\nname = \"target\"\n\
             type = \"string\"\nrequired = true\n",
        );
        c.recv_until(|m| m["method"] == "notifications/tools/list_changed");
        let (text, asked) = c.deploy();
        assert_eq!((text.as_str(), asked.len()), ("crab prod\n", 1), "{mode}");
        assert!(
            asked[0].contains("runs:       sh -c 'echo crab {{target}}'"),
            "{}",
            asked[0]
        );
        assert!(asked[0].contains("tools.toml:1"), "{}", asked[0]);
        drop(c);

        // The records name the definition each approval was for.
        let r = records(&p);
        let defs: Vec<&str> = r
            .iter()
            .map(|x| x["definition_sha256"].as_str().unwrap())
            .collect();
        assert_eq!(defs.len(), 5, "{r:?}");
        assert_eq!(defs[0], defs[1]);
        assert_ne!(defs[1], defs[2]);
        assert_eq!(defs[2], defs[3]);
        assert_ne!(defs[3], defs[4]);
        let remembered: Vec<bool> = r
            .iter()
            .map(|x| x["decision"]["remembered"].as_bool().unwrap())
            .collect();
        assert_eq!(remembered, [false, true, false, true, false], "{mode}");
    }
}

/// Run `toolcage` on a fresh pseudo-terminal (its controlling terminal);
/// type `answer` once the prompt is shown. Returns the output and what the
/// terminal displayed.
fn run_on_tty(p: &Project, args: &[&str], answer: &[u8]) -> (Output, String) {
    let pty = nix::pty::openpty(None, None).unwrap();
    let mut c = toolcage(p);
    c.args(args)
        .stdin(Stdio::from(pty.slave.try_clone().unwrap()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: setsid and ioctl are async-signal-safe; fd 0 is the pty
    // slave, which becomes the child's controlling terminal.
    unsafe {
        c.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = c.spawn().unwrap();
    drop(c);
    drop(pty.slave);
    let mut master = File::from(pty.master);
    let mut shown = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut answered = false;
    loop {
        if !answered && String::from_utf8_lossy(&shown).contains("Allow this call?") {
            master.write_all(answer).unwrap();
            answered = true;
        }
        let mut fds = [nix::poll::PollFd::new(
            master.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        let ready = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(200u16)).unwrap_or(0);
        if ready == 0 {
            if Instant::now() > deadline {
                break;
            }
            continue;
        }
        let mut chunk = [0u8; 4096];
        match master.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => shown.extend_from_slice(&chunk[..n]),
        }
    }
    let out = child.wait_with_output().unwrap();
    (out, String::from_utf8_lossy(&shown).into_owned())
}

#[test]
fn the_terminal_prompt_shows_what_runs_and_ctrl_c_is_recorded() {
    let p = Project::new("bind-tty");
    deploy_script(&p, "v1");
    let (_keep, policy) = policy("once");
    let args = ["call", "--policy", &policy, "deploy", "target=prod"];
    let (o, shown) = run_on_tty(&p, &args, b"\x03");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}\n{shown}");
    assert!(o.stdout.is_empty(), "nothing ran");
    let script = p.path(".agents/tools/deploy").display().to_string();
    assert!(shown.contains(&format!("runs:       {script}")), "{shown}");
    assert!(shown.contains(&format!("defined in: {script}")), "{shown}");
    assert!(shown.contains("interrupted; not run"), "{shown}");
    let r = records(&p);
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(r[0]["decision"]["kind"], "denied");
    assert_eq!(r[0]["decision"]["reason"], "approval_interrupted");

    // Control: the same prompt answered y runs the call. Each `toolcage
    // call` is its own session, so the next one is asked again, and an
    // edited script is shown and run.
    let (o, shown) = run_on_tty(&p, &args, b"y\n");
    assert_eq!(o.status.code(), Some(0), "{shown}");
    assert_eq!(o.stdout, b"v1\n");
    deploy_script(&p, "v2");
    let (o, shown) = run_on_tty(&p, &args, b"y\n");
    assert_eq!(o.status.code(), Some(0), "{shown}");
    assert!(shown.contains("Allow this call?"), "{shown}");
    assert_eq!(o.stdout, b"v2\n");
    let r = records(&p);
    assert_eq!(r.len(), 3, "{r:?}");
    assert_ne!(r[1]["definition_sha256"], r[2]["definition_sha256"]);
}
