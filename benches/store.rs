//! The shared store's cost (issue 26 target: Redis adds at most 1 ms to a
//! limited call's latency), side by side in one run against a real
//! `redis-server` on loopback:
//!
//! 1. a limited `tools/call` through `toolcage serve` (stdio), one server
//!    on the state directory's files and one with `--store redis://…`,
//!    interleaved: medians, their difference and ratio;
//! 2. the gate's rate check alone, in process: `FileRates` (lock, read,
//!    rename, fsync) against `RedisStore` (one `EVALSHA`).
//!
//! Needs `redis-server` (apt-get install redis-server); says so and exits
//! otherwise. Run with `cargo bench --bench store`. Prints numbers;
//! asserts nothing.

#[path = "../tests/store_support/mod.rs"]
mod store_support;

#[path = "common/mod.rs"]
mod common;
// The client's `pid` is not needed here.
#[allow(dead_code)]
#[path = "common/stdio.rs"]
mod stdio;
use common::median;
use serde_json::json;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use stdio::StdioClient;
use toolcage::gate::persist::{FileRates, RateCheck};
use toolcage::gate::store::redis::RedisStore;
use toolcage::policy::RateLimit;

const ROUNDS: usize = 200;
const CHECKS: usize = 2000;

/// `toolcage serve` over stdio for `project` with `policy`, its state in
/// `state`, and `extra` arguments.
fn serve(project: &Path, policy: &Path, state: &Path, extra: &[&str]) -> StdioClient {
    let mut c = Command::new(env!("CARGO_BIN_EXE_toolcage"));
    c.arg("-C")
        .arg(project)
        .args(["serve", "--no-watch", "--policy"])
        .arg(policy)
        .args(extra)
        .env("XDG_STATE_HOME", state);
    StdioClient::spawn(c)
}

/// One call of `limited`; its latency.
fn call(s: &mut StdioClient) -> Duration {
    let t = Instant::now();
    let r = s.request("tools/call", json!({"name": "limited", "arguments": {}}));
    let d = t.elapsed();
    assert_eq!(r["result"]["isError"], json!(false), "{r}");
    d
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let Some(redis) = store_support::start("store bench") else {
        return;
    };
    let url = redis.url();
    let project = tempfile::tempdir().unwrap();
    std::fs::write(
        project.path().join("tools.toml"),
        "[[tools]]\nname = \"limited\"\ndescription = \"limited\"\nexecutor = \"shell\"\n\
         requires_approval = false\ncommand = \"true\"\n",
    )
    .unwrap();
    let outside = tempfile::tempdir().unwrap();
    let policy = outside.path().join("policy.toml");
    // A limit that is counted at every call but never reached.
    std::fs::write(
        &policy,
        "[tools.limited.rate_limit]\nrequests = 1000000\nwindow = \"1h\"\n",
    )
    .unwrap();
    let (fs_state, redis_state) = (outside.path().join("a"), outside.path().join("b"));
    let mut file = serve(project.path(), &policy, &fs_state, &[]);
    let mut shared = serve(project.path(), &policy, &redis_state, &["--store", &url]);
    // Warm up: connections, the script cached, page cache.
    for _ in 0..10 {
        call(&mut file);
        call(&mut shared);
    }
    let (mut f, mut r) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        f.push(call(&mut file));
        r.push(call(&mut shared));
    }
    let (fm, rm) = (median(f), median(r));
    println!("store bench ({ROUNDS} interleaved limited calls through serve, medians):");
    println!("  file store (state directory)  {:8.3} ms", ms(fm));
    println!("  redis store ({url})  {:8.3} ms", ms(rm));
    println!(
        "  redis - file                  {:+8.3} ms   ratio redis/file {:.3}",
        ms(rm) - ms(fm),
        rm.as_secs_f64() / fm.as_secs_f64()
    );

    // The rate check alone.
    let limits = vec![(
        "tool:bench".to_string(),
        RateLimit {
            requests: u32::MAX,
            window: Duration::from_secs(3600),
        },
    )];
    let dir = tempfile::tempdir().unwrap();
    let files = FileRates::new(dir.path());
    let store = RedisStore::new(&url, None).unwrap();
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
    };
    let (mut f, mut r) = (Vec::new(), Vec::new());
    for _ in 0..CHECKS / 10 {
        // Each side keeps its window short enough to stay comparable: the
        // file store rewrites every entry at every check.
        let _ = std::fs::remove_file(files.path());
        for _ in 0..10 {
            let t = Instant::now();
            files.check(&limits, now()).unwrap();
            f.push(t.elapsed());
            let t = Instant::now();
            store.check(&limits, now()).unwrap();
            r.push(t.elapsed());
        }
    }
    let (fm, rm) = (median(f), median(r));
    println!("rate check alone ({CHECKS} interleaved, medians):");
    println!("  FileRates   {:8.3} ms", ms(fm));
    println!("  RedisStore  {:8.3} ms", ms(rm));
    println!(
        "  ratio redis/file {:.3}",
        rm.as_secs_f64() / fm.as_secs_f64()
    );
}
