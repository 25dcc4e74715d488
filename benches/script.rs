//! A3S `kind: script` calls: a trivial script end to end, and the memory
//! of the script runner child. Targets (issue 15): at most 10 ms median
//! per call, runner under 32 MiB.
//!
//! Run with `cargo bench --bench script`. Prints medians and the peak RSS;
//! asserts nothing (the machine may be busy).
//!
//! - engine: `Engine::call` in process, as `toolcage serve` runs a call
//!   (the sandboxed runner child, QuickJS set-up, the script);
//! - engine + ctx.tool: the same with one nested call of a shell tool;
//! - baseline: that shell tool called directly (the sandbox's own cost);
//! - cli: a whole `toolcage call` process (start, discovery, the call);
//! - runner RSS: `toolcage __script-runner` on the trivial script, its
//!   peak resident set from the kernel (`ru_maxrss` of the waited child).

#[path = "common/mod.rs"]
mod common;
use common::median;
use nix::sys::resource::{UsageWho, getrusage};
use serde_json::json;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use toolcage::call::Engine;
use toolcage::discover::Options;
use toolcage::policy::{Overrides, Sources};

const ROUNDS: usize = 100;
const EXE: &str = env!("CARGO_BIN_EXE_toolcage");

fn measure(rounds: usize, mut f: impl FnMut()) -> Duration {
    for _ in 0..5 {
        f(); // warm up
    }
    median(
        (0..rounds)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed()
            })
            .collect(),
    )
}

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

fn script_tool(root: &Path, name: &str, body: &str) {
    write(
        root,
        &format!("tools/{name}.md"),
        &format!(
            "---\nkind: script\nname: {name}\npath: scripts/{name}.js\nallowed_tools: [hello]\n---\nBench {name}.\n"
        ),
    );
    write(root, &format!("scripts/{name}.js"), body);
}

fn build(root: &Path) {
    script_tool(
        root,
        "trivial",
        "async function run(ctx, inputs) { return 'hello ' + inputs.who; }\n",
    );
    script_tool(
        root,
        "nested",
        "async function run(ctx, inputs) { return await ctx.tool('hello', {}); }\n",
    );
    write(
        root,
        "tools.toml",
        "[[tools]]\nname = \"hello\"\ndescription = \"hello\"\nexecutor = \"shell\"\ncommand = \"echo hello\"\n",
    );
}

/// Peak RSS (KiB) of a runner running the trivial script, outside the
/// sandbox (the sandbox adds no memory to the runner itself).
fn runner_rss_kib(root: &Path) -> i64 {
    let before = getrusage(UsageWho::RUSAGE_CHILDREN)
        .expect("getrusage")
        .max_rss();
    let script = root.join("scripts/trivial.js");
    let mut child = Command::new(EXE)
        .args(["__script-runner"])
        .arg(&script)
        .args([
            (64u64 << 20).to_string(),
            (512u64 << 10).to_string(),
            "10000".into(),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn runner");
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin, "{}", json!({"inputs": {"who": "bench"}})).expect("write");
    let mut out = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("read");
    assert!(child.wait().expect("wait").success(), "runner: {out}");
    assert!(out.contains("hello bench"), "runner: {out}");
    let after = getrusage(UsageWho::RUSAGE_CHILDREN)
        .expect("getrusage")
        .max_rss();
    // ru_maxrss of children is the largest child so far: the first child
    // measured here is the runner.
    assert!(after >= before);
    after
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    build(root);
    // Measured first: RUSAGE_CHILDREN's peak is the largest child so far.
    let rss = runner_rss_kib(root);

    toolcage::call::script::set_child_binary(EXE.into());
    let engine = Engine::load(
        root,
        &Sources::default(),
        Overrides::default(),
        Options::default(),
    )
    .expect("engine");
    let call = |name: &str, expect: &str| {
        let args = match name {
            "hello" => json!({}),
            _ => json!({"inputs": {"who": "bench"}}),
        };
        let r = engine.call(name, args, None).expect("call");
        assert!(!r.is_error && r.text.contains(expect), "{name}: {}", r.text);
    };
    let trivial = measure(ROUNDS, || call("trivial", "hello bench"));
    let nested = measure(ROUNDS, || call("nested", "hello"));
    let baseline = measure(ROUNDS, || call("hello", "hello"));
    let cli = measure(ROUNDS / 2, || {
        let o = Command::new(EXE)
            .args(["-q", "-C"])
            .arg(root)
            .args(["call", "trivial", "--args", r#"{"inputs":{"who":"bench"}}"#])
            .stdin(Stdio::null())
            .output()
            .expect("toolcage call");
        assert!(o.status.success(), "{o:?}");
    });
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("script tool call, median of {ROUNDS} (target <= 10 ms):");
    println!("  engine (as serve runs it)    {:7.2} ms", ms(trivial));
    println!("  engine + one ctx.tool call   {:7.2} ms", ms(nested));
    println!("  baseline: the shell tool     {:7.2} ms", ms(baseline));
    println!("  cli: a whole `toolcage call` {:7.2} ms", ms(cli));
    println!(
        "script runner peak RSS: {:.1} MiB (target < 32 MiB)",
        rss as f64 / 1024.0
    );
}
