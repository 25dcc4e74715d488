//! The gate's audit record of every call, allowed, denied or failed; where
//! the log may lie; what a failed write means.

use crate::gate_support;

use gate_support::{ECHO, Env, Scripted, admit_now, call, yes};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use toolcage::audit::RecordedDecision as Recorded;
use toolcage::call::Engine;
use toolcage::discover::{Catalog, Options, ToolKind};
use toolcage::gate::ratelimit::FakeClock;
use toolcage::gate::{ApprovalAnswer, DeniedCall, DenyReason, Gate, Ran, SessionId};
use toolcage::policy::{Overrides, Requests, Sources};

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
    broken.kind = ToolKind::Octomind {
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
    // Nothing ran: said so, and the denial by its layer and rule.
    let e = denied.enforcement.as_ref().expect("enforcement");
    assert_eq!(e["mode"], "not-run", "{e}");
    let d = denied.denials.as_ref().expect("denials");
    assert_eq!(d[0]["rule"], "approval_declined", "{d}");
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
            content: None,
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
