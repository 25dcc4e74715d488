//! `toolcage serve` over stdio driven line by line, as a client would:
//! requests and their answers, notifications kept, approval requests
//! (elicitation) answered as told. Shared by the gateway and management
//! tool tests.
#![allow(dead_code)]

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

/// `toolcage serve` on stdio.
pub struct Serve {
    child: Child,
    stdin: Option<ChildStdin>,
    rx: Receiver<Value>,
    next: u64,
    elicit: Option<String>,
    /// Notifications seen so far.
    pub notifications: Vec<Value>,
    /// The messages of the approval requests answered.
    pub asked: Vec<String>,
}

impl Serve {
    /// Start `c` (a `toolcage serve` command) and initialize; `elicit`:
    /// declare elicitation and answer approval requests with this action.
    pub fn spawn(mut c: Command, elicit: Option<&str>) -> Serve {
        c.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = c.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
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
            elicit: elicit.map(str::to_string),
            notifications: Vec::new(),
            asked: Vec::new(),
        };
        let caps = if elicit.is_some() {
            json!({"elicitation": {}})
        } else {
            json!({})
        };
        let init = s.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": caps, "clientInfo": {"name": "t", "version": "1"}}),
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

    /// Send a request; its response. Approval requests meanwhile are
    /// answered, notifications kept.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(v) if v.get("id") == Some(&json!(id)) && v.get("method").is_none() => return v,
                Ok(v)
                    if v["method"] == "elicitation/create"
                        && self.elicit.as_deref() == Some("ignore") =>
                {
                    self.asked
                        .push(v["params"]["message"].as_str().unwrap_or("").to_string());
                }
                Ok(v) if v["method"] == "elicitation/create" => {
                    self.asked
                        .push(v["params"]["message"].as_str().unwrap_or("").to_string());
                    let action = self.elicit.clone().unwrap_or_else(|| "decline".into());
                    self.send(json!({"jsonrpc": "2.0", "id": v["id"],
                                     "result": {"action": action, "content": {}}}));
                }
                Ok(v) => self.notifications.push(v),
                Err(RecvTimeoutError::Timeout) => panic!("no answer to {method} in 90 s"),
                Err(RecvTimeoutError::Disconnected) => panic!("serve exited during {method}"),
            }
        }
    }

    /// How the client answers approval requests from now on (`ignore`: not at all).
    pub fn answer_with(&mut self, action: &str) {
        self.elicit = Some(action.to_string());
    }

    /// Send a `tools/call` without waiting; its request id.
    pub fn start_call(&mut self, name: &str, args: Value) -> u64 {
        let id = self.next;
        self.next += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                         "params": {"name": name, "arguments": args}}));
        id
    }

    /// Wait for the server's next approval request (left unanswered).
    pub fn next_elicitation(&mut self) -> Value {
        loop {
            match self.rx.recv_timeout(Duration::from_secs(30)) {
                Ok(v) if v["method"] == "elicitation/create" => return v,
                Ok(v) => self.notifications.push(v),
                Err(e) => panic!("no approval request: {e}"),
            }
        }
    }

    /// Wait for the response to request `id` (sent with [`Serve::start_call`]).
    pub fn response(&mut self, id: u64) -> Value {
        let is_it = |v: &Value| v.get("id") == Some(&json!(id)) && v.get("method").is_none();
        // Read earlier, while waiting for another response.
        if let Some(i) = self.notifications.iter().position(is_it) {
            return self.notifications.remove(i);
        }
        loop {
            match self.rx.recv_timeout(Duration::from_secs(90)) {
                Ok(v) if v.get("id") == Some(&json!(id)) && v.get("method").is_none() => return v,
                Ok(v) => self.notifications.push(v),
                Err(e) => panic!("no response to request {id}: {e}"),
            }
        }
    }

    /// `tools/call`: the result object (the whole response for a JSON-RPC
    /// error).
    pub fn call(&mut self, name: &str, args: Value) -> Value {
        let r = self.request("tools/call", json!({"name": name, "arguments": args}));
        r.get("result").cloned().unwrap_or(r)
    }

    /// `tools/call`: (isError, text), or the JSON-RPC error as (true, message).
    pub fn call_text(&mut self, name: &str, args: Value) -> (bool, String) {
        let r = self.request("tools/call", json!({"name": name, "arguments": args}));
        if let Some(e) = r.get("error") {
            return (true, e["message"].as_str().unwrap_or("").to_string());
        }
        let res = &r["result"];
        let text = res["content"][0]["text"].as_str().unwrap_or("").to_string();
        (res["isError"] == true, text)
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

    /// How many `notifications/tools/list_changed` were seen, after a
    /// round trip (a notification sent before an answer arrives first).
    pub fn list_changed(&mut self) -> usize {
        self.request("ping", json!({}));
        self.notifications
            .iter()
            .filter(|n| n["method"] == "notifications/tools/list_changed")
            .count()
    }
}

impl Serve {
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

    /// Close stdin and wait for serve to exit; its status.
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
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
