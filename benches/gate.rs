//! What a call pays besides its sandbox, in process, as `toolcage serve`
//! pays it: look up, validate and resolve the grant (`Engine::prepare`),
//! then the gate (`gate::admit`: concurrency, rate limits, approval) and the
//! two audit records (`started`, then the final one), with the real state
//! directory (its rate-limit file, its audit log) of a scratch project.
//!
//! Run with `cargo bench --bench gate`. Prints medians per step; asserts
//! nothing. The tool runs once, for an outcome the final record describes:
//! nothing is sandboxed in the timed steps.
//!
//! Then the encoding steps side by side with how they were done before
//! (reproduced here): an audit line (the record cloned, capped, its
//! arguments encoded to measure them, then encoded whole), and the
//! canonical JSON a definition digest and an arguments digest hash (keys
//! sorted and copied one by one).

#[path = "common/mod.rs"]
mod common;
use common::median;
use futures::executor::block_on;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::{Duration, Instant};
use toolcage::audit::{AuditRecord, GrantSummary, RecordedDecision};
use toolcage::call::Engine;
use toolcage::discover::Options;
use toolcage::gate::approval::canonical_json;
use toolcage::gate::{Gate, Gatekeeper, PreApproved, Ran, SessionId, admit};
use toolcage::policy::{Overrides, Sources};

const ROUNDS: usize = 2000;

fn measure(mut f: impl FnMut()) -> Duration {
    for _ in 0..100 {
        f(); // warm up
    }
    median(
        (0..ROUNDS)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed()
            })
            .collect(),
    )
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn main() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let project = scratch.path().join("project");
    let tools = project.join(".agents/tools");
    std::fs::create_dir_all(&tools).expect("mkdir");
    std::fs::create_dir_all(project.join(".git")).expect("mkdir");
    let noop = tools.join("noop");
    std::fs::write(&noop, "#!/bin/sh\n# @description Do nothing.\nexit 0\n").expect("write");
    std::fs::set_permissions(&noop, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    // The gate's state and audit log beside the project, never in it.
    let policy = scratch.path().join("policy.toml");
    let log = scratch.path().join("state/audit.jsonl");
    std::fs::write(&policy, format!("[audit]\npath = \"{}\"\n", log.display())).expect("write");
    let sources = Sources {
        profile: None,
        policy_file: Some(policy),
    };
    let engine =
        Engine::load(&project, &sources, Overrides::default(), Options::default()).expect("engine");
    let root = engine.project_root();
    let gate: Arc<dyn Gatekeeper> =
        Arc::new(Gate::for_server(&engine.gate_setup(&root)).expect("gate"));
    let session = SessionId::new("bench");
    let channel = PreApproved;
    let args = json!({});
    let ran = engine.call("noop", args.clone(), None).expect("noop runs");

    let tool = engine.catalog.get("noop").expect("noop").clone();
    let resolve = measure(|| {
        engine.resolve(&tool).expect("resolves");
    });
    let prepare = measure(|| {
        engine.prepare("noop", args.clone()).expect("prepares");
    });
    let prepared = Arc::new(engine.prepare("noop", args.clone()).expect("prepares"));
    let gated = measure(|| {
        let admitted = block_on(admit(
            &gate,
            prepared.clone(),
            &session,
            &channel,
            Arc::new(|| "gone".into()),
        ));
        let mut admission = admitted.expect("admitted");
        admission.start().expect("started record");
        let finished = Ran::Finished {
            outcome: &ran.outcome,
            is_error: ran.is_error,
            content: None,
        };
        admission.complete(finished, None).expect("final record");
    });
    println!("what a call pays besides its sandbox (in process, {ROUNDS} rounds, medians)");
    println!(
        "  resolve the grant (Engine::resolve)            {:>8.1} µs",
        us(resolve)
    );
    println!(
        "  look up, validate, resolve (Engine::prepare)   {:>8.1} µs",
        us(prepare)
    );
    println!(
        "  gate: admit, started record, final record      {:>8.1} µs",
        us(gated)
    );
    println!(
        "  the gate's own cost per call (prepare + gate)  {:>8.1} µs",
        us(prepare + gated)
    );
    encoding(&prepared);
}

/// The encoding steps of a call, now and as they were.
fn encoding(prepared: &toolcage::call::PreparedCall) {
    let args = json!({"path": "src/main.rs", "pattern": "fn main", "max": 20, "ignore_case": true});
    let record = AuditRecord {
        time: "2026-01-01T00:00:00.000Z".into(),
        phase: None,
        call_id: Some("1-2-3".into()),
        session: "bench".into(),
        tool: prepared.tool.name.clone(),
        format: "octomind".into(),
        source: prepared.tool.source.display().to_string(),
        upstream: None,
        definition_sha256: Some(prepared.definition_sha256.clone()),
        args_sha256: "0".repeat(64),
        args: Some(args.clone()),
        args_cut: None,
        decision: RecordedDecision::Allowed,
        approval_mode: Some("never".into()),
        grant: Some(GrantSummary::of(&prepared.resolved.grant)),
        enforcement: None,
        exit: None,
        content: None,
        exit_status: Some(0),
        is_error: Some(false),
        error: None,
        stopped_by: None,
        duration_ms: Some(3),
        stdout: None,
        stderr: None,
        denials: None,
        change: None,
    };
    let line_now = measure(|| {
        std::hint::black_box(record.to_line().expect("encodes"));
    });
    let line_before = measure(|| {
        let mut s = serde_json::to_string(&record.clone().capped()).expect("encodes");
        s.push('\n');
        std::hint::black_box(s);
    });
    let whole = json!({
        "spec": serde_json::to_value(&prepared.tool).expect("spec"),
        "grant": serde_json::to_value(&prepared.resolved.grant).expect("grant"),
    });
    let digest_now = measure(|| {
        std::hint::black_box(canonical_json(&whole));
    });
    let digest_before = measure(|| {
        std::hint::black_box(sorting_writer(&whole));
    });
    let args_now = measure(|| {
        std::hint::black_box(canonical_json(&args));
    });
    let args_before = measure(|| {
        std::hint::black_box(sorting_writer(&args));
    });
    println!(
        "encoding, now vs before (medians; a call writes two audit lines, hashes its definition once and its arguments three times)"
    );
    let row = |what: &str, now: Duration, before: Duration| {
        println!(
            "  {what:<44} now {:>7.1} µs   before {:>7.1} µs   ({:.2}x)",
            us(now),
            us(before),
            us(before) / us(now)
        );
    };
    row(
        &format!(
            "audit line ({} bytes)",
            record.to_line().map_or(0, |l| l.len())
        ),
        line_now,
        line_before,
    );
    row(
        &format!(
            "definition's canonical JSON ({} bytes)",
            canonical_json(&whole).len()
        ),
        digest_now,
        digest_before,
    );
    row("arguments' canonical JSON", args_now, args_before);
}

/// Canonical JSON as it was written before: keys sorted and copied one
/// by one at every level.
fn sorting_writer(v: &serde_json::Value) -> String {
    fn write(v: &serde_json::Value, out: &mut String) {
        use serde_json::Value;
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(k.clone()).to_string());
                    out.push(':');
                    write(&m[k], out);
                }
                out.push('}');
            }
            Value::Array(a) => {
                out.push('[');
                for (i, e) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(e, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    write(v, &mut out);
    out
}
