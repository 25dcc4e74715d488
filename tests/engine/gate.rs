//! The gate as the call pipeline uses it: approval modes through a
//! channel, rate limits with a fake clock, the concurrency cap. The audit
//! records: `gate_audit.rs`.

use crate::gate_support;

use gate_support::{ECHO, Env, Scripted, admit_now, call, yes};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use toolcage::audit::RecordedDecision as Recorded;
use toolcage::gate::ratelimit::FakeClock;
use toolcage::gate::{
    ApprovalAnswer, ApprovalChannel, ApprovalRequest, BoxFuture, DenyReason, PreApproved, Ran,
    Refusal, SessionId,
};
use toolcage::policy::{RateLimit, Requests};

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
