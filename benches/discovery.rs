//! Discovery time for a project of 1,000 tools, 250 in each format
//! (Octomind scripts, clawd tool.json, OpenCrabs tools.toml entries, A3S
//! tools/*.md). Target: under 50 ms for the whole project.
//!
//! Run with `cargo bench --bench discovery`. Prints the median and the time
//! per tool; asserts nothing (the machine may be busy).

use std::fmt::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};
use toolcage::discover::{Options, discover};

const PER_FORMAT: usize = 250;
const ROUNDS: usize = 20;
const TARGET: Duration = Duration::from_millis(50);

fn write(path: &Path, text: &str, mode: u32) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn build(root: &Path) {
    let mut toml = String::new();
    for i in 0..PER_FORMAT {
        write(
            &root.join(format!(".agents/tools/oct{i}")),
            &format!(
                "#!/bin/sh\n# @description Octomind tool {i}, a header\n# with a continuation line.\n# @param *path string Path to operate on\n# @param force bool Overwrite\n# @param count int Iterations\nexec true\n"
            ),
            0o755,
        );
        let dir = root.join(format!(".clawd/tools/claw{i}"));
        write(
            &dir.join("tool.json"),
            &format!(
                r#"{{"name": "claw{i}", "description": "clawd tool {i}", "parameters": {{"path": {{"type": "string", "description": "Path"}}, "format": {{"type": "string", "enum": ["json", "text"]}}}}, "required": ["path"], "entrypoint": "run.sh", "timeout": 15}}"#
            ),
            0o644,
        );
        write(&dir.join("run.sh"), "cat\n", 0o644);
        write!(
            toml,
            "[[tools]]\nname = \"crab{i}\"\ndescription = \"OpenCrabs tool {i}\"\nexecutor = \"shell\"\ntimeout_secs = 30\ncommand = \"grep -rn {{{{#ci}}}}-i{{{{/ci}}}} -- {{{{pattern}}}} \\\"$OPENCRABS_PARAMS\\\"\"\n\n[[tools.params]]\nname = \"pattern\"\ntype = \"string\"\nrequired = true\n\n[[tools.params]]\nname = \"ci\"\ntype = \"boolean\"\ndefault = \"false\"\n\n"
        )
        .expect("fmt");
        write(
            &root.join(format!("tools/a3s{i}.md")),
            &format!(
                "---\nkind: script\nname: a3s{i}\npath: scripts/s.js\nallowed_tools: [grep, glob]\nlimits:\n  timeoutMs: 30000\n  maxToolCalls: 30\n---\nA3S script tool {i}.\n"
            ),
            0o644,
        );
    }
    write(&root.join("tools.toml"), &toml, 0o644);
    write(
        &root.join("scripts/s.js"),
        "async function run(ctx, inputs) {}\n",
        0o644,
    );
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    build(&root);
    let options = Options::default();
    let first = discover(&root, &options);
    let tools = first.tools.len();
    assert_eq!(tools, 4 * PER_FORMAT, "{:#?}", first.diagnostics.first());
    let mut times: Vec<Duration> = (0..ROUNDS)
        .map(|_| {
            let t = Instant::now();
            let c = discover(&root, &options);
            let e = t.elapsed();
            std::hint::black_box(c);
            e
        })
        .collect();
    times.sort();
    let median = times[times.len() / 2];
    let per_tool = median.as_secs_f64() * 1e6 / tools as f64;
    println!(
        "discovery: {tools} tools ({PER_FORMAT} per format), median of {ROUNDS}: {:.2} ms total, {per_tool:.1} µs per tool (min {:.2} ms, max {:.2} ms)",
        median.as_secs_f64() * 1e3,
        times[0].as_secs_f64() * 1e3,
        times[times.len() - 1].as_secs_f64() * 1e3,
    );
    println!(
        "target {} ms: {}",
        TARGET.as_millis(),
        if median < TARGET { "met" } else { "NOT met" }
    );
}
