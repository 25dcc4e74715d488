//! The gate as a surface uses it (the seam for the MCP server): approval
//! modes through a channel, rate limits with a fake clock, the concurrency
//! cap, and the audit record of every call, allowed, denied or failed.

mod common;

use common::Project;
use futures::executor::block_on;
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use toolcage::audit::{AuditRecord, RecordedDecision as Recorded, read};
use toolcage::call::{Engine, PreparedCall};
use toolcage::discover::{Catalog, Options, Runner, ToolSpec};
use toolcage::gate::ratelimit::FakeClock;
use toolcage::gate::{
    Admission, ApprovalAnswer, ApprovalChannel, ApprovalRequest, BoxFuture, DeniedCall, DenyReason,
    Gate, Gatekeeper, PreApproved, Ran, Refusal, SessionId, admit,
};
use toolcage::policy::Requests;
use toolcage::policy::{Overrides, RateLimit, Sources};
use toolcage::spec::Format;

/// A scratch project whose gate state lives beside it (never inside a write root).
struct Env {
    p: Project,
    state: tempfile::TempDir,
}

impl Env {
    fn new(tag: &str) -> Env {
        Env {
            p: Project::new(tag),
            state: tempfile::tempdir().unwrap(),
        }
    }

    fn tool(&self, name: &str, body: &str, requests: Requests) -> ToolSpec {
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
            runner: Runner::Octomind { program: path },
            needs_read: vec![self.p.path(".agents/tools")],
        }
    }

    /// An engine whose policy also points the audit log into the state dir.
    fn engine(&self, policy: &str, tools: Vec<ToolSpec>) -> Engine {
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

    fn audit_section(&self) -> String {
        format!("[audit]\npath = \"{}\"\n", self.log().display())
    }

    fn log(&self) -> PathBuf {
        self.state.path().join("audit.jsonl")
    }

    fn gate(&self, engine: &Engine, clock: Arc<FakeClock>) -> Arc<dyn Gatekeeper> {
        let root = engine.project_root();
        let setup = engine.gate_setup(&root);
        Arc::new(Gate::with_clock(&setup, clock, self.state.path().join("state")).unwrap())
    }

    fn records(&self) -> Vec<AuditRecord> {
        let parsed = read::read(&self.log()).unwrap().unwrap();
        assert!(parsed.bad.is_empty(), "{:?}", parsed.bad);
        parsed.records.into_iter().map(|(_, r)| r).collect()
    }
}

const ECHO: &str = "#!/bin/sh\necho \"got $(cat)\"\n";

/// A channel that answers from a script and counts the questions.
struct Scripted {
    answers: Mutex<Vec<ApprovalAnswer>>,
    asked: Mutex<Vec<ApprovalRequest>>,
}

impl Scripted {
    fn new(answers: Vec<ApprovalAnswer>) -> Scripted {
        Scripted {
            answers: Mutex::new(answers),
            asked: Mutex::new(Vec::new()),
        }
    }
    fn asked(&self) -> usize {
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

fn yes() -> ApprovalAnswer {
    ApprovalAnswer::Approved {
        by: "scripted".into(),
    }
}

/// Ask the gate about `p` (blocking).
fn admit_now(
    gate: &Arc<dyn Gatekeeper>,
    p: &Arc<PreparedCall>,
    s: &SessionId,
    ch: &dyn ApprovalChannel,
) -> Result<Admission, DeniedCall> {
    block_on(admit(gate, p.clone(), s, ch, Arc::new(|| "gone".into())))
}

/// Admit, run when allowed, record; the denial if any.
fn call(
    e: &Engine,
    gate: &Arc<dyn Gatekeeper>,
    s: &SessionId,
    ch: &dyn ApprovalChannel,
    name: &str,
    args: Value,
) -> Option<toolcage::gate::Denial> {
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
            };
            admission.complete(ran, None).unwrap();
            None
        }
    }
}

#[test]
fn rate_limit_exceed_and_recovery_with_a_fake_clock() {
    let env = Env::new("gate-rate");
    let t = env.tool("echo", ECHO, Requests::default());
    let e = env.engine("[rate_limit]\nrequests = 2\nwindow = \"60s\"\n", vec![t]);
    let clock = Arc::new(FakeClock::default());
    let gate = env.gate(&e, clock.clone());
    let s = SessionId::new("s");
    let ch = Scripted::new(vec![]);
    assert!(call(&e, &gate, &s, &ch, "echo", json!({})).is_none());
    clock.advance(Duration::from_secs(20));
    assert!(call(&e, &gate, &s, &ch, "echo", json!({})).is_none());
    let d = call(&e, &gate, &s, &ch, "echo", json!({})).expect("third call limited");
    assert_eq!(d.reason, DenyReason::RateLimited);
    assert_eq!(d.retry_after, Some(Duration::from_secs(40)));
    assert!(d.message.contains("try again in 40s"), "{}", d.message);
    assert!(d.message.contains("2 call(s) per 1m"), "{}", d.message);
    assert_eq!(toolcage::cli::status::of_denial(d.reason), 3);
    clock.advance(Duration::from_secs(39));
    let d = call(&e, &gate, &s, &ch, "echo", json!({})).unwrap();
    assert_eq!(d.retry_after, Some(Duration::from_secs(1)));
    // Recovery: the first call leaves the window.
    clock.advance(Duration::from_secs(1));
    assert!(call(&e, &gate, &s, &ch, "echo", json!({})).is_none());
    let kinds: Vec<bool> = env
        .records()
        .iter()
        .map(|r| matches!(r.decision, Recorded::Denied { .. }))
        .collect();
    assert_eq!(kinds, [false, false, true, true, false]);
}

#[test]
fn own_and_global_rate_limits_apply_too() {
    let env = Env::new("gate-rate-global");
    let own = Requests {
        // 3 per 10s is not stricter than the policy's 10 per 1m in every
        // stretch of time (18 per minute), so the policy keeps its own; the
        // gate enforces both.
        rate_limit: Some(RateLimit {
            requests: 3,
            window: Duration::from_secs(10),
        }),
        ..Requests::default()
    };
    let a = env.tool("a", ECHO, own);
    let b = env.tool("b", ECHO, Requests::default());
    let policy =
        "[rate_limit]\nrequests = 10\n[global_rate_limit]\nrequests = 5\nwindow = \"1m\"\n";
    let e = env.engine(policy, vec![a, b]);
    let gate = env.gate(&e, Arc::new(FakeClock::default()));
    let s = SessionId::new("s");
    let ch = Scripted::new(vec![]);
    for _ in 0..3 {
        assert!(call(&e, &gate, &s, &ch, "a", json!({})).is_none());
    }
    let d = call(&e, &gate, &s, &ch, "a", json!({})).unwrap();
    assert!(
        d.message.contains("its own [tools.rate_limit]"),
        "{}",
        d.message
    );
    assert!(d.message.contains("try again in 10s"), "{}", d.message);
    // The refused call took no global slot: b gets the remaining two.
    assert!(call(&e, &gate, &s, &ch, "b", json!({})).is_none());
    assert!(call(&e, &gate, &s, &ch, "b", json!({})).is_none());
    let d = call(&e, &gate, &s, &ch, "b", json!({})).unwrap();
    assert!(d.message.contains("all tools"), "{}", d.message);
}

#[test]
fn the_concurrency_cap_holds_until_finish() {
    let env = Env::new("gate-conc");
    let t = env.tool("echo", ECHO, Requests::default());
    let e = env.engine("[limits]\nconcurrent = 1\n", vec![t]);
    let gate = env.gate(&e, Arc::new(FakeClock::default()));
    let s = SessionId::new("s");
    let ch = Scripted::new(vec![]);
    let p = Arc::new(e.prepare("echo", json!({})).unwrap());
    let first = admit_now(&gate, &p, &s, &ch);
    assert!(first.is_ok());
    match admit_now(&gate, &p, &s, &ch) {
        Err(refused) => {
            let d = refused.denial;
            assert_eq!(d.reason, DenyReason::Concurrency);
            assert!(d.message.contains("concurrent = 1"), "{}", d.message);
            refused.recorded.unwrap();
        }
        other => panic!("{other:?}"),
    }
    first.unwrap().complete(Ran::NotRun, None).unwrap();
    // Control: the slot is free again.
    assert!(call(&e, &gate, &s, &ch, "echo", json!({})).is_none());
}

#[test]
fn once_is_remembered_per_session_and_tool() {
    let env = Env::new("gate-once");
    let t = env.tool("echo", ECHO, Requests::default());
    let e = env.engine("[approval]\nmode = \"once\"\n", vec![t]);
    let gate = env.gate(&e, Arc::new(FakeClock::default()));
    let ch = Scripted::new(vec![ApprovalAnswer::Declined, yes(), yes()]);
    let (a, b) = (SessionId::new("a"), SessionId::new("b"));
    let d = call(&e, &gate, &a, &ch, "echo", json!({"x": 1})).unwrap();
    assert_eq!(d.reason, DenyReason::Approval(Refusal::Declined));
    assert!(call(&e, &gate, &a, &ch, "echo", json!({"x": 1})).is_none());
    assert!(call(&e, &gate, &a, &ch, "echo", json!({"x": 2})).is_none());
    assert_eq!(ch.asked(), 2);
    assert!(call(&e, &gate, &b, &ch, "echo", json!({})).is_none());
    assert_eq!(ch.asked(), 3);
    // The person saw the tool, its arguments and its grant.
    let shown = ch.asked.lock().unwrap()[0].clone();
    assert_eq!(shown.tool, "echo");
    assert_eq!(shown.arguments, json!({"x": 1}));
    assert!(shown.grant.write.contains(&env.p.dir), "{:?}", shown.grant);
    assert_eq!(shown.grant.network, "off");
    let r = env.records();
    assert!(
        matches!(&r[0].decision, Recorded::Denied { reason, .. } if reason == "approval_declined")
    );
    assert_eq!(
        r[1].decision,
        Recorded::Approved {
            by: "scripted".into(),
            remembered: false
        }
    );
    assert_eq!(
        r[2].decision,
        Recorded::Approved {
            by: "scripted".into(),
            remembered: true
        }
    );
}

#[test]
fn a_tool_asking_for_approval_is_asked_and_yes_needs_allow_yes() {
    let env = Env::new("gate-hitl");
    let asks = Requests {
        requires_approval: Some(true),
        ..Requests::default()
    };
    let t = env.tool("deploy", ECHO, asks);
    let e = env.engine("", vec![t.clone()]);
    let gate = env.gate(&e, Arc::new(FakeClock::default()));
    let s = SessionId::new("s");
    let d = call(&e, &gate, &s, &PreApproved, "deploy", json!({})).unwrap();
    assert_eq!(
        d.reason,
        DenyReason::Approval(Refusal::PreApprovalNotAllowed)
    );
    assert!(d.message.contains("allow_yes = true"), "{}", d.message);
    let d = call(
        &e,
        &gate,
        &s,
        &Scripted::new(vec![ApprovalAnswer::NoChannel]),
        "deploy",
        json!({}),
    );
    let d = d.unwrap();
    assert_eq!(d.reason, DenyReason::Approval(Refusal::NoChannel));
    assert!(d.message.contains("no one could be asked"), "{}", d.message);
    // Control: the operator permits pre-approval.
    let e = env.engine("[approval]\nallow_yes = true\n", vec![t]);
    let gate = env.gate(&e, Arc::new(FakeClock::default()));
    assert!(call(&e, &gate, &s, &PreApproved, "deploy", json!({})).is_none());
    let last = env.records().pop().unwrap();
    assert_eq!(
        last.decision,
        Recorded::Approved {
            by: "--yes".into(),
            remembered: false
        }
    );
}

/// A channel that knows up front that no one can answer (no terminal).
struct Unreachable;

impl ApprovalChannel for Unreachable {
    fn name(&self) -> &str {
        "terminal"
    }
    fn can_ask(&self) -> bool {
        false
    }
    fn ask<'a>(&'a self, _: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer> {
        panic!("asked a channel that cannot ask")
    }
}

#[test]
fn approval_no_one_can_give_uses_up_no_rate_limit() {
    let env = Env::new("gate-unanswerable");
    let asks = Requests {
        requires_approval: Some(true),
        ..Requests::default()
    };
    let t = env.tool("deploy", ECHO, asks);
    let e = env.engine("[rate_limit]\nrequests = 1\nwindow = \"1h\"\n", vec![t]);
    let gate = env.gate(&e, Arc::new(FakeClock::default()));
    let s = SessionId::new("s");
    for _ in 0..3 {
        let d = call(&e, &gate, &s, &Unreachable, "deploy", json!({})).unwrap();
        assert_eq!(d.reason, DenyReason::Approval(Refusal::NoChannel));
        let d = call(&e, &gate, &s, &PreApproved, "deploy", json!({})).unwrap();
        assert_eq!(
            d.reason,
            DenyReason::Approval(Refusal::PreApprovalNotAllowed)
        );
    }
    // The one call the limit allows is still there for a person to approve,
    // and a refusal by that person does count.
    let ch = Scripted::new(vec![ApprovalAnswer::Declined, yes()]);
    let d = call(&e, &gate, &s, &ch, "deploy", json!({})).unwrap();
    assert_eq!(d.reason, DenyReason::Approval(Refusal::Declined));
    let d = call(&e, &gate, &s, &ch, "deploy", json!({})).unwrap();
    assert_eq!(d.reason, DenyReason::RateLimited);
    assert_eq!(ch.asked(), 1);
    assert!(d.message.contains("(policy"), "{}", d.message);
}

struct AsyncScripted(ApprovalAnswer, Mutex<u32>);

impl ApprovalChannel for AsyncScripted {
    fn name(&self) -> &str {
        "elicitation"
    }
    fn ask<'a>(&'a self, _: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer> {
        *self.1.lock().unwrap() += 1;
        let a = self.0.clone();
        Box::pin(async move { a })
    }
}

#[test]
fn admit_asks_an_async_channel() {
    let env = Env::new("gate-async");
    let t = env.tool("echo", ECHO, Requests::default());
    let e = env.engine("[approval]\nmode = \"always\"\n", vec![t]);
    let gate = env.gate(&e, Arc::new(FakeClock::default()));
    let s = SessionId::new("s");
    let p = Arc::new(e.prepare("echo", json!({})).unwrap());
    for (answer, want) in [
        (ApprovalAnswer::Declined, Some(Refusal::Declined)),
        (ApprovalAnswer::Cancelled, Some(Refusal::Cancelled)),
        (ApprovalAnswer::TimedOut, Some(Refusal::TimedOut)),
        (ApprovalAnswer::NoChannel, Some(Refusal::NoChannel)),
        (
            ApprovalAnswer::Approved {
                by: "elicitation".into(),
            },
            None,
        ),
    ] {
        let ch = AsyncScripted(answer, Mutex::new(0));
        let d = admit_now(&gate, &p, &s, &ch);
        match (&d, want) {
            (Err(d), Some(r)) => assert_eq!(d.denial.reason, DenyReason::Approval(r)),
            (Ok(_), None) => {}
            other => panic!("{other:?}"),
        }
        assert_eq!(*ch.1.lock().unwrap(), 1);
        match d {
            Ok(a) => a.complete(Ran::NotRun, None).unwrap(),
            Err(refused) => refused.recorded.unwrap(),
        }
    }
}

#[test]
fn audit_records_allowed_denied_and_failed_calls() {
    let env = Env::new("gate-audit");
    let ok = env.tool("echo", ECHO, Requests::default());
    let fail = env.tool(
        "fail",
        "#!/bin/sh\necho partial\nexit 3\n",
        Requests::default(),
    );
    let mut broken = env.tool("broken", ECHO, Requests::default());
    broken.runner = Runner::Octomind {
        program: env.p.path(".agents/tools/missing"),
    };
    let e = env.engine(
        "[tools.fail.approval]\nmode = \"always\"\n",
        vec![ok, fail, broken],
    );
    let gate = env.gate(&e, Arc::new(FakeClock::default()));
    let s = SessionId::new("s1");
    let ch = Scripted::new(vec![ApprovalAnswer::Declined, yes()]);
    assert!(call(&e, &gate, &s, &ch, "echo", json!({"secret": "hunter2"})).is_none());
    assert!(call(&e, &gate, &s, &ch, "fail", json!({})).is_some());
    assert!(call(&e, &gate, &s, &ch, "fail", json!({})).is_none());
    // A call that cannot start is recorded as failed.
    let p = Arc::new(e.prepare("broken", json!({})).unwrap());
    let admitted = admit_now(&gate, &p, &s, &ch).unwrap();
    let err = e.execute(&p, None).unwrap_err().to_string();
    let ran = Ran::Failed {
        error: &err,
        after: Duration::from_millis(5),
    };
    admitted.complete(ran, None).unwrap();

    let r = env.records();
    assert_eq!(r.len(), 4);
    let allowed = &r[0];
    assert_eq!(allowed.tool, "echo");
    assert_eq!(allowed.format, "octomind");
    assert_eq!(allowed.session, "s1");
    assert!(allowed.source.ends_with(".agents/tools/echo"));
    assert_eq!(allowed.args, Some(json!({"secret": "hunter2"})));
    assert_eq!(
        allowed.args_sha256,
        toolcage::gate::approval::args_digest(&json!({"secret": "hunter2"}))
    );
    assert_eq!(allowed.decision, Recorded::Allowed);
    assert_eq!(allowed.exit_status, Some(0));
    assert_eq!(allowed.is_error, Some(false));
    assert!(allowed.duration_ms.is_some());
    assert!(allowed.stdout.unwrap().kept > 0);
    assert_eq!(allowed.enforcement.as_ref().unwrap()["seccomp"], true);
    assert_eq!(allowed.grant.as_ref().unwrap().network, "off");
    assert!(
        allowed.time.ends_with('Z') && allowed.time.len() == 24,
        "{}",
        allowed.time
    );

    let denied = &r[1];
    assert!(
        matches!(&denied.decision, Recorded::Denied { reason, message }
            if reason == "approval_declined" && message.contains("declined")),
        "{:?}",
        denied.decision
    );
    assert_eq!(denied.exit_status, None);
    assert_eq!(denied.enforcement, None);
    assert_eq!(denied.approval_mode.as_deref(), Some("always"));

    let failed = &r[2];
    assert_eq!(failed.exit_status, Some(3));
    assert_eq!(failed.is_error, Some(true));

    let broken = &r[3];
    assert_eq!(broken.is_error, Some(true));
    assert!(broken.error.is_some(), "{broken:?}");
    assert_eq!(broken.exit_status, None);
}

#[test]
fn redact_keeps_only_the_digest() {
    let env = Env::new("gate-redact");
    let t = env.tool("echo", ECHO, Requests::default());
    // A later [audit] section wins key by key: redact, same path.
    let e = env.engine("", vec![t.clone()]);
    let gate = env.gate(&e, Arc::new(FakeClock::default()));
    let s = SessionId::new("s");
    let ch = Scripted::new(vec![]);
    call(&e, &gate, &s, &ch, "echo", json!({"k": "v"}));
    let text = format!("{}redact = true\n", env.audit_section());
    std::fs::write(env.state.path().join("p2.toml"), text).unwrap();
    let sources = Sources {
        profile: None,
        policy_file: Some(env.state.path().join("p2.toml")),
    };
    let e2 = Engine::with_catalog(
        &env.p.dir,
        &sources,
        Overrides::default(),
        Options::default(),
        Catalog {
            tools: vec![t],
            ..Default::default()
        },
    )
    .unwrap();
    let gate = env.gate(&e2, Arc::new(FakeClock::default()));
    call(&e2, &gate, &s, &ch, "echo", json!({"k": "v"}));
    let r = env.records();
    assert_eq!(r[0].args, Some(json!({"k": "v"})), "control: not redacted");
    assert_eq!(r[1].args, None);
    assert_eq!(r[1].args_sha256, r[0].args_sha256);
    let raw = std::fs::read_to_string(env.log()).unwrap();
    assert_eq!(raw.lines().nth(1).unwrap().matches("\"v\"").count(), 0);
}

#[test]
fn an_audit_log_inside_a_write_root_is_refused() {
    let env = Env::new("gate-audit-root");
    let t = env.tool("echo", ECHO, Requests::default());
    let sources = Sources {
        profile: None,
        policy_file: Some(env.p.write(
            "inside.toml",
            "[audit]\npath = \"{project}/logs/audit.jsonl\"\n",
        )),
    };
    let e = Engine::with_catalog(
        &env.p.dir,
        &sources,
        Overrides::default(),
        Options::default(),
        Catalog {
            tools: vec![t.clone()],
            ..Default::default()
        },
    )
    .unwrap();
    let root = e.project_root();
    let err = Gate::with_clock(
        &e.gate_setup(&root),
        Arc::new(FakeClock::default()),
        env.state.path().into(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("inside write root"), "{err}");
    assert!(!env.p.path("logs/audit.jsonl").exists());
    // A tool-level grant that adds a write root over the log is refused per call.
    let outside = env.state.path().join("log/audit.jsonl");
    let policy = format!(
        "[audit]\npath = \"{}\"\n[tools.echo.fs]\nadd_write = [\"{}\"]\n",
        outside.display(),
        env.state.path().display()
    );
    let e = env.engine(&policy, vec![t]);
    let gate = env.gate(&e, Arc::new(FakeClock::default()));
    let p = Arc::new(e.prepare("echo", json!({})).unwrap());
    match admit_now(&gate, &p, &SessionId::new("s"), &Scripted::new(vec![])) {
        Err(DeniedCall { denial: d, .. }) => {
            assert_eq!(d.reason, DenyReason::Unavailable);
            assert_eq!(toolcage::cli::status::of_denial(d.reason), 125);
            assert!(d.message.contains("inside write root"), "{}", d.message);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_failed_audit_write_fails_the_call_unless_configured() {
    let env = Env::new("gate-audit-full");
    let t = env.tool("echo", ECHO, Requests::default());
    let s = SessionId::new("s");
    let ch = Scripted::new(vec![]);
    for (fail_closed, want_err) in [("true", true), ("false", false)] {
        let policy = format!("[audit]\npath = \"/dev/full\"\nfail_closed = {fail_closed}\n");
        let e = env.engine(&policy, vec![t.clone()]);
        let gate = env.gate(&e, Arc::new(FakeClock::default()));
        let p = Arc::new(e.prepare("echo", json!({})).unwrap());
        let admitted = admit_now(&gate, &p, &s, &ch).unwrap();
        let r = e.execute(&p, None).unwrap();
        let ran = Ran::Finished {
            outcome: &r.outcome,
            is_error: r.is_error,
        };
        let out = admitted.complete(ran, None);
        assert_eq!(
            out.is_err(),
            want_err,
            "fail_closed = {fail_closed}: {out:?}"
        );
        if let Err(e) = out {
            assert!(e.contains("withheld"), "{e}");
        }
    }
}
