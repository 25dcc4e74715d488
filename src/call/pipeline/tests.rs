//! The pipeline's promise: every call that enters leaves a record, whoever
//! stops it and wherever. Fakes for the toolbox, the gate and the surface;
//! each stop has its control (the same call, not stopped, runs).

use super::*;
use crate::discover::ToolSpec;
use crate::gate::{Approval, CallEvent, Permit, PreApproved, Verdict};
use crate::policy::{Grant, Requests, Resolved};
use crate::sandbox::Outcome;
use crate::spec::Format;
use futures::executor::block_on;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// One tool, `t`; counts its runs.
#[derive(Default)]
struct Tools {
    runs: AtomicUsize,
}

fn outcome() -> Outcome {
    use crate::call::result::tests::{cap, outcome};
    outcome(Exit::Code(0), cap("", 0), cap("", 0))
}

impl Toolbox for Tools {
    fn prepare(&self, name: &str, args: Value) -> Result<PreparedCall, CallError> {
        if name != "t" {
            return Err(CallError::UnknownTool {
                name: name.into(),
                known: vec!["t".into()],
                not_loaded: None,
            });
        }
        let tool = ToolSpec {
            name: "t".into(),
            format: Format::Octomind,
            source: "/p/t".into(),
            line: None,
            description: String::new(),
            input_schema: serde_json::json!({"type": "object"}),
            requests: Requests::default(),
            kind: crate::discover::ToolKind::Octomind {
                program: "/p/t".into(),
            },
            needs_read: vec![],
        };
        Ok(PreparedCall {
            tool,
            args: args.as_object().cloned().unwrap_or_default(),
            resolved: Resolved {
                tool: Some("t".into()),
                grant: Grant::closed("/p".into()),
                provenance: vec![],
                requested: vec![],
            },
            definition_sha256: String::new(),
            runs: "/p/t".into(),
            callers: vec![],
        })
    }

    fn execute(&self, _: &PreparedCall, _: Option<&CancelToken>) -> Result<CallResult, CallError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(CallResult {
            text: "ran".into(),
            is_error: false,
            outcome: outcome(),
            content: None,
            content_kinds: None,
        })
    }
}

/// Allows every call, or never answers; writes records as text.
#[derive(Default)]
struct Log {
    never_answer: bool,
    records: Mutex<Vec<String>>,
}

impl Gatekeeper for Log {
    fn decide<'a>(
        &'a self,
        _: &'a PreparedCall,
        _: &'a SessionId,
        _: &'a dyn ApprovalChannel,
    ) -> BoxFuture<'a, Verdict> {
        if self.never_answer {
            return Box::pin(std::future::pending());
        }
        Box::pin(std::future::ready(Verdict::Allowed(Permit::without_slot(
            Approval::NotNeeded,
        ))))
    }

    fn record(&self, entry: &CallEvent<'_>) -> Result<(), String> {
        let line = match entry.ran {
            Ran::Starting => "started".to_string(),
            Ran::Finished { .. } => "finished".to_string(),
            Ran::Failed { error, .. } => format!("failed: {error}"),
            Ran::NotRun => "not run".to_string(),
            Ran::Refused { denial, .. } => format!("refused: {}", denial.message),
        };
        self.records.lock().unwrap().push(line);
        Ok(())
    }

    fn reject(&self, r: &Rejected<'_>) -> Result<(), String> {
        let line = format!("rejected {} ({}): {}", r.name, r.reason, r.message);
        self.records.lock().unwrap().push(line);
        Ok(())
    }
}

/// Where a fake surface stops its call.
#[derive(Clone, Copy, PartialEq)]
enum StopAt {
    Nowhere,
    BeforeTheGate,
    TheTurn,
    /// `carry` fails without running the job.
    Carry,
}

struct Fake {
    session: SessionId,
    stop: StopAt,
}

impl Surface for Fake {
    fn session(&self) -> &SessionId {
        &self.session
    }
    fn approval(&self) -> &dyn ApprovalChannel {
        &PreApproved
    }
    fn interrupted<'a>(&'a self, name: &'a str) -> BoxFuture<'a, NotRun> {
        if self.stop != StopAt::BeforeTheGate {
            return Box::pin(std::future::pending());
        }
        Box::pin(std::future::ready(NotRun {
            kind: NotRunKind::Stopping,
            text: format!("{name}: stopping"),
            stopped_by: None,
        }))
    }
    fn turn<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Turn, NotRun>> {
        let turn = match self.stop {
            StopAt::TheTurn => Err(NotRun {
                kind: NotRunKind::Cancelled,
                text: format!("{name}: cancelled while waiting"),
                stopped_by: None,
            }),
            _ => Ok(Box::new(()) as Turn),
        };
        Box::pin(std::future::ready(turn))
    }
    fn carry<'a>(&'a self, _: &'a str, job: Job) -> BoxFuture<'a, Result<JobDone, CallError>> {
        if self.stop == StopAt::Carry {
            drop(job);
            return Box::pin(std::future::ready(Err(CallError::Internal("no".into()))));
        }
        Box::pin(async move { Ok(job(None)) })
    }
    fn stopped_by(&self) -> Option<String> {
        None
    }
    fn gone(&self, name: &str) -> String {
        format!("{name}: gone")
    }
}

fn call(stop: StopAt, log: Arc<Log>, name: &str) -> (Result<CallResult, CallError>, usize) {
    let tools = Arc::new(Tools::default());
    let pipeline = Pipeline {
        tools: tools.clone(),
        gate: Some(log),
    };
    let surface = Arc::new(Fake {
        session: SessionId::new("s"),
        stop,
    });
    let r = block_on(pipeline.call(name, serde_json::json!({}), surface));
    (r, tools.runs.load(Ordering::SeqCst))
}

fn records(log: &Log) -> Vec<String> {
    log.records.lock().unwrap().clone()
}

#[test]
fn a_call_that_runs_leaves_its_started_and_final_records() {
    let log = Arc::new(Log::default());
    let (r, runs) = call(StopAt::Nowhere, log.clone(), "t");
    assert_eq!(r.unwrap().text, "ran");
    assert_eq!(runs, 1);
    assert_eq!(records(&log), ["started", "finished"]);
}

#[test]
fn a_call_refused_before_the_gate_is_recorded() {
    let log = Arc::new(Log::default());
    let (r, runs) = call(StopAt::Nowhere, log.clone(), "nope");
    assert!(matches!(r, Err(CallError::UnknownTool { .. })), "{r:?}");
    assert_eq!(runs, 0);
    let rec = records(&log);
    assert_eq!(rec.len(), 1);
    assert!(
        rec[0].starts_with("rejected nope (unknown_tool)"),
        "{rec:?}"
    );
}

#[test]
fn a_call_stopped_before_the_gate_is_recorded_as_gone() {
    let log = Arc::new(Log::default());
    let (r, runs) = call(StopAt::BeforeTheGate, log.clone(), "t");
    assert!(matches!(r, Err(CallError::NotRun(_))), "{r:?}");
    assert_eq!(runs, 0);
    assert_eq!(records(&log), ["rejected t (denied): t: gone"]);
}

#[test]
fn a_call_stopped_while_its_verdict_is_pending_is_recorded_as_gone() {
    let log = Arc::new(Log {
        never_answer: true,
        ..Log::default()
    });
    let pipeline = Pipeline {
        tools: Arc::new(Tools::default()),
        gate: Some(log.clone()),
    };
    let surface = Arc::new(Fake {
        session: SessionId::new("s"),
        stop: StopAt::Nowhere,
    });
    let mut pending = Box::pin(pipeline.call("t", serde_json::json!({}), surface));
    let waker = futures::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(pending.as_mut().poll(&mut cx).is_pending());
    assert!(
        records(&log).is_empty(),
        "nothing yet: the verdict is pending"
    );
    // The surface stops waiting (the client went away): dropped, recorded.
    drop(pending);
    assert_eq!(records(&log), ["rejected t (denied): t: gone"]);
}

#[test]
fn an_admitted_call_stopped_before_its_turn_is_recorded_as_not_run() {
    let log = Arc::new(Log::default());
    let (r, runs) = call(StopAt::TheTurn, log.clone(), "t");
    assert!(matches!(r, Err(CallError::NotRun(_))), "{r:?}");
    assert_eq!(runs, 0);
    assert_eq!(records(&log), ["failed: t: cancelled while waiting"]);
}

#[test]
fn an_admission_dropped_unfinished_is_recorded_as_abandoned() {
    let log = Arc::new(Log::default());
    let (r, runs) = call(StopAt::Carry, log.clone(), "t");
    assert!(matches!(r, Err(CallError::Internal(_))), "{r:?}");
    assert_eq!(runs, 0);
    assert_eq!(records(&log), ["started", "failed: t: gone"]);
}

#[test]
fn without_a_gate_nothing_is_asked_or_recorded() {
    let tools = Arc::new(Tools::default());
    let pipeline = Pipeline {
        tools: tools.clone(),
        gate: None,
    };
    let surface = Arc::new(Fake {
        session: SessionId::new("s"),
        stop: StopAt::Nowhere,
    });
    let r = block_on(pipeline.call("t", serde_json::json!({}), surface));
    assert_eq!(r.unwrap().text, "ran");
    assert_eq!(tools.runs.load(Ordering::SeqCst), 1);
}
