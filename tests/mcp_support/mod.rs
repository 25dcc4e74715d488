//! A fake [`ToolHost`] for testing the MCP layer before (and independently
//! of) discovery and the engine: canned tools, a cancellable "sleep", and a
//! watched directory whose files become tools on reload.
#![allow(dead_code)]

pub mod http;
pub mod wire;

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use toolcage::call::{CallError, CallResult, Definition, PreparedCall, Toolbox};
use toolcage::discover::{ToolKind, ToolSpec};
use toolcage::mcp::ToolHost;
use toolcage::policy::Requests;
use toolcage::policy::{Grant, Resolved};
use toolcage::sandbox::{
    CancelToken, Captured, EnforcementReport, Exit, LandlockReport, LandlockStatus, Outcome,
    SandboxError,
};
use toolcage::spec::Format;

pub struct FakeHost {
    pub dir: PathBuf,
    tools: RwLock<Arc<[Definition]>>,
    /// Calls that ended because they were cancelled.
    pub cancelled: AtomicUsize,
    /// Calls running right now, and the most seen at once.
    pub running: AtomicUsize,
    pub max_running: AtomicUsize,
}

fn def(name: &str, desc: &str, schema: Value) -> Definition {
    Definition {
        name: name.into(),
        description: desc.into(),
        input_schema: schema,
        annotations: json!({"readOnlyHint": true, "destructiveHint": false, "openWorldHint": false}),
    }
}

fn obj(props: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": props, "required": required})
}

impl FakeHost {
    /// `dir` is watched; each file `NAME` in it is a tool `file_NAME` (a
    /// file whose content is not `ok` is "half-written" and skipped).
    pub fn new(dir: &Path) -> Arc<FakeHost> {
        let h = FakeHost {
            dir: dir.to_path_buf(),
            tools: RwLock::new(Arc::from(Vec::new())),
            cancelled: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
            max_running: AtomicUsize::new(0),
        };
        h.reload();
        Arc::new(h)
    }

    fn base() -> Vec<Definition> {
        let s = json!({"type": "string"});
        vec![
            def("echo", "echo the text", obj(json!({"text": s}), &["text"])),
            def("fail", "exit 1 with a message", obj(json!({}), &[])),
            def("denied", "refused by the sandbox", obj(json!({}), &[])),
            def(
                "sleep",
                "sleep SECS seconds (cancellable)",
                obj(json!({"secs": {"type": "number"}}), &["secs"]),
            ),
            def(
                "test_simple_text",
                "returns simple text",
                obj(json!({}), &[]),
            ),
            def(
                "test_error_handling",
                "returns an error result",
                obj(json!({}), &[]),
            ),
            def(
                "test_tool_with_progress",
                "runs for 3.5 s (progress from the server)",
                obj(json!({}), &[]),
            ),
        ]
    }

    fn find(&self, name: &str) -> Option<Definition> {
        self.tools().iter().find(|t| t.name == name).cloned()
    }
}

fn outcome(exit: Exit, text: &str, duration: Duration) -> Outcome {
    Outcome {
        exit,
        stdout: Captured {
            text: text.into(),
            bytes_kept: text.len() as u64,
            bytes_omitted: 0,
        },
        stderr: Captured {
            text: String::new(),
            bytes_kept: 0,
            bytes_omitted: 0,
        },
        duration,
        enforcement: EnforcementReport {
            mode: toolcage::sandbox::mode::IsolationMode::Namespaces,
            lacking: vec![],
            landlock: LandlockReport {
                abi: 0,
                status: LandlockStatus::NotEnforced,
                missing: vec![],
            },
            seccomp: false,
            capabilities_dropped: false,
            no_new_privs: false,
            pid_namespace: false,
            mount_namespace: false,
            constructed_root: false,
            ipc_namespace: false,
            network_namespace: false,
            tmp_bytes: None,
            rlimits: false,
            rlimits_clamped: vec![],
            degraded: vec!["fake host: nothing enforced".into()],
        },
        created_protected: vec![],
        quarantined: vec![],
        restored: vec![],
        removed: vec![],
        unrestorable: vec![],
        unchecked: vec![],
        denials: vec![],
    }
}

fn result(exit: Exit, text: &str, started: Instant) -> CallResult {
    CallResult {
        text: text.into(),
        is_error: !exit.success(),
        outcome: outcome(exit, text, started.elapsed()),
        content: None,
        content_kinds: None,
    }
}

impl Toolbox for FakeHost {
    fn prepare(&self, name: &str, args: Value) -> Result<PreparedCall, CallError> {
        let Some(d) = self.find(name) else {
            return Err(CallError::UnknownTool {
                name: name.into(),
                known: self.tools().iter().map(|t| t.name.clone()).collect(),
                not_loaded: None,
            });
        };
        let args = args.as_object().cloned().unwrap_or_default();
        for r in d.input_schema["required"].as_array().into_iter().flatten() {
            let r = r.as_str().unwrap_or_default();
            if !args.contains_key(r) {
                return Err(CallError::InvalidArguments {
                    tool: name.into(),
                    message: format!("missing required parameter '{r}'"),
                });
            }
        }
        Ok(PreparedCall {
            tool: ToolSpec {
                name: name.into(),
                format: Format::Octomind,
                source: self.dir.join(name),
                line: None,
                description: d.description.clone(),
                input_schema: d.input_schema.clone(),
                requests: Requests::default(),
                kind: ToolKind::Octomind {
                    program: self.dir.join(name),
                },
                needs_read: vec![],
            },
            args,
            resolved: Resolved {
                tool: Some(name.into()),
                grant: Grant::closed(self.dir.clone()),
                provenance: vec![],
                requested: vec![],
            },
            definition_sha256: String::new(),
            runs: String::new(),
            callers: vec![],
        })
    }

    fn execute(
        &self,
        call: &PreparedCall,
        cancel: Option<&CancelToken>,
    ) -> Result<CallResult, CallError> {
        let n = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_running.fetch_max(n, Ordering::SeqCst);
        let _g = Dec(&self.running);
        let started = Instant::now();
        let sleep = |secs: f64| -> bool {
            let until = started + Duration::from_secs_f64(secs);
            while Instant::now() < until {
                if cancel.is_some_and(|c| c.is_cancelled()) {
                    self.cancelled.fetch_add(1, Ordering::SeqCst);
                    return false;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            true
        };
        let name = call.tool.name.as_str();
        Ok(match name {
            "echo" => result(
                Exit::Code(0),
                call.args["text"].as_str().unwrap_or(""),
                started,
            ),
            "fail" | "test_error_handling" => {
                result(Exit::Code(1), "boom: the tool failed", started)
            }
            "denied" => {
                return Err(CallError::Sandbox(SandboxError::Prepare(
                    "network is off for this tool (grant it with --allow-net)".into(),
                )));
            }
            "sleep" => {
                let secs = call.args["secs"].as_f64().unwrap_or(0.0);
                if sleep(secs) {
                    result(Exit::Code(0), "slept", started)
                } else {
                    result(Exit::Cancelled, "", started)
                }
            }
            "test_tool_with_progress" => {
                if sleep(3.5) {
                    result(Exit::Code(0), "done", started)
                } else {
                    result(Exit::Cancelled, "", started)
                }
            }
            _ => result(Exit::Code(0), &format!("hello from {name}"), started),
        })
    }
}

impl ToolHost for FakeHost {
    fn tools(&self) -> Arc<[Definition]> {
        self.tools.read().unwrap().clone()
    }

    fn reload(&self) -> bool {
        let mut defs = FakeHost::base();
        if let Ok(rd) = std::fs::read_dir(&self.dir) {
            for e in rd.flatten() {
                let content = std::fs::read_to_string(e.path()).unwrap_or_default();
                if content.trim() == "ok" {
                    let n = format!("file_{}", e.file_name().to_string_lossy());
                    defs.push(def(&n, "a tool from a file", obj(json!({}), &[])));
                }
            }
        }
        defs.sort_by(|a, b| a.name.cmp(&b.name));
        let new: Arc<[Definition]> = Arc::from(defs);
        let mut g = self.tools.write().unwrap();
        let changed = *g != new;
        *g = new;
        changed
    }

    fn watch_paths(&self) -> Vec<PathBuf> {
        vec![self.dir.clone()]
    }
}

struct Dec<'a>(&'a AtomicUsize);
impl Drop for Dec<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
