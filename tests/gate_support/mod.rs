//! What the gate tests share: a scratch project with its gate state beside
//! it, scripted approval channels, and one call through the gate.
#![allow(dead_code)]

use crate::common::Project;
use futures::executor::block_on;
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use toolcage::audit::{AuditRecord, read};
use toolcage::call::{Engine, PreparedCall};
use toolcage::discover::{Catalog, Options, ToolKind, ToolSpec};
use toolcage::gate::ratelimit::FakeClock;
use toolcage::gate::{
    Admission, ApprovalAnswer, ApprovalChannel, ApprovalRequest, BoxFuture, DeniedCall, Gate,
    Gatekeeper, Ran, SessionId, admit,
};
use toolcage::policy::{Overrides, Requests, Sources};
use toolcage::spec::Format;

/// A scratch project whose gate state lives beside it (never inside a write root).
pub struct Env {
    pub p: Project,
    pub state: tempfile::TempDir,
}

impl Env {
    pub fn new(tag: &str) -> Env {
        Env {
            p: Project::new(tag),
            state: tempfile::tempdir().unwrap(),
        }
    }

    pub fn tool(&self, name: &str, body: &str, requests: Requests) -> ToolSpec {
        let path = self.p.write(&format!(".agents/tools/{name}"), body);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        ToolSpec {
            name: name.into(),
            format: Format::Octomind,
            source: path.clone(),
            line: Some(1),
            description: "test".into(),
            input_schema: json!({"type": "object"}),
            requests,
            kind: ToolKind::Octomind { program: path },
            needs_read: vec![self.p.path(".agents/tools")],
        }
    }

    /// An engine whose policy also points the audit log into the state dir.
    pub fn engine(&self, policy: &str, tools: Vec<ToolSpec>) -> Engine {
        let text = if policy.contains("[audit]") {
            policy.to_string()
        } else {
            format!("{}\n{policy}", self.audit_section())
        };
        let sources = Sources {
            profile: None,
            policy_file: Some(self.state.path().join("policy.toml")),
        };
        std::fs::write(sources.policy_file.as_ref().unwrap(), text).unwrap();
        let catalog = Catalog {
            tools,
            ..Default::default()
        };
        Engine::with_catalog(
            &self.p.dir,
            &sources,
            Overrides::default(),
            Options::default(),
            catalog,
        )
        .unwrap()
    }

    pub fn audit_section(&self) -> String {
        format!("[audit]\npath = \"{}\"\n", self.log().display())
    }

    pub fn log(&self) -> PathBuf {
        self.state.path().join("audit.jsonl")
    }

    pub fn gate(&self, engine: &Engine, clock: Arc<FakeClock>) -> Arc<dyn Gatekeeper> {
        let root = engine.project_root();
        let setup = engine.gate_setup(&root);
        Arc::new(Gate::with_clock(&setup, clock, self.state.path().join("state")).unwrap())
    }

    pub fn records(&self) -> Vec<AuditRecord> {
        let parsed = read::read(&self.log()).unwrap().unwrap();
        assert!(parsed.bad.is_empty(), "{:?}", parsed.bad);
        parsed.records.into_iter().map(|(_, r)| r).collect()
    }
}

pub const ECHO: &str = "#!/bin/sh\necho \"got $(cat)\"\n";

/// A channel that answers from a script and counts the questions.
pub struct Scripted {
    pub answers: Mutex<Vec<ApprovalAnswer>>,
    pub asked: Mutex<Vec<ApprovalRequest>>,
}

impl Scripted {
    pub fn new(answers: Vec<ApprovalAnswer>) -> Scripted {
        Scripted {
            answers: Mutex::new(answers),
            asked: Mutex::new(Vec::new()),
        }
    }
    pub fn asked(&self) -> usize {
        self.asked.lock().unwrap().len()
    }
}

impl ApprovalChannel for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }
    fn ask<'a>(&'a self, r: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer> {
        self.asked.lock().unwrap().push(r.clone());
        let answer = self.answers.lock().unwrap().remove(0);
        Box::pin(std::future::ready(answer))
    }
}

pub fn yes() -> ApprovalAnswer {
    ApprovalAnswer::Approved {
        by: "scripted".into(),
    }
}

/// Ask the gate about `p` (blocking).
pub fn admit_now(
    gate: &Arc<dyn Gatekeeper>,
    p: &Arc<PreparedCall>,
    s: &SessionId,
    ch: &dyn ApprovalChannel,
) -> Result<Admission, DeniedCall> {
    block_on(admit(gate, p.clone(), s, ch, Arc::new(|| "gone".into())))
}

/// Admit, run when allowed, record; the denial if any.
pub fn call(
    e: &Engine,
    gate: &Arc<dyn Gatekeeper>,
    s: &SessionId,
    ch: &dyn ApprovalChannel,
    name: &str,
    args: Value,
) -> Option<toolcage::gate::GateDenial> {
    let prepared = Arc::new(e.prepare(name, args).unwrap());
    match admit_now(gate, &prepared, s, ch) {
        Err(refused) => {
            refused.recorded.unwrap();
            Some(refused.denial)
        }
        Ok(admission) => {
            let r = e.execute(&prepared, None).unwrap();
            let ran = Ran::Finished {
                outcome: &r.outcome,
                is_error: r.is_error,
                content: None,
            };
            admission.complete(ran, None).unwrap();
            None
        }
    }
}
