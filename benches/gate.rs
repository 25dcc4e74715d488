//! What a call pays besides its sandbox, in process, as `toolcage serve`
//! pays it: look up, validate and resolve the grant (`Engine::prepare`),
//! then the gate (`gate::admit`: concurrency, rate limits, approval) and the
//! two audit records (`started`, then the final one), with the real state
//! directory (its rate-limit file, its audit log) of a scratch project.
//!
//! Run with `cargo bench --bench gate`. Prints medians per step; asserts
//! nothing. The tool runs once, for an outcome the final record describes:
//! nothing is sandboxed in the timed steps.

use futures::executor::block_on;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::{Duration, Instant};
use toolcage::call::Engine;
use toolcage::discover::Options;
use toolcage::gate::{Gate, Gatekeeper, PreApproved, Ran, SessionId, admit};
use toolcage::policy::{Overrides, Sources};

const ROUNDS: usize = 2000;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

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
}
