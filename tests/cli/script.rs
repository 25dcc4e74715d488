//! A3S `kind: script` tools through the binary: the seed's example, the
//! result and error conventions, and escapes from JavaScript, each failing
//! by construction (no eval, no module loader, frozen ctx, limits) next to
//! a control that works. Also: `serve` outlives a crashed runner.

use crate::common;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_toolcage");

/// A project with two shell tools: `echo` (appends to calls.log, then
/// says hi) and `grep` (the seed's example calls it), and the seed's
/// `search-auth` script tool.
fn project() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("tc-script-")
        .tempdir()
        .unwrap();
    let w = |rel: &str, text: &str| {
        let p = dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    w(
        "tools.toml",
        r#"
[[tools]]
name = "echo"
description = "Say hi to word"
executor = "shell"
command = "echo call >> calls.log; echo hi {{word}}"
requires_approval = false
[[tools.params]]
name = "word"
type = "string"
required = false

[[tools]]
name = "grep"
description = "Files matching pattern"
executor = "shell"
command = "grep -rl {{pattern}} src"
requires_approval = false
[[tools.params]]
name = "pattern"
type = "string"
required = true

[[tools]]
name = "guarded"
description = "Asks for approval (OpenCrabs' default)"
executor = "shell"
command = "echo ran >> guarded.log; echo guarded"
"#,
    );
    w("src/login.rs", "fn check_auth() {}\n");
    w("src/main.rs", "fn main() {}\n");
    w(
        "tools/search-auth.md",
        "---\nkind: script\nname: search-auth\npath: scripts/search-auth.js\nallowed_tools: [grep, glob, read]\nlimits:\n  timeoutMs: 30000\n  maxToolCalls: 30\n  maxOutputBytes: 65536\n---\nFind authentication-related files and return an evidence list.\n",
    );
    w(
        "scripts/search-auth.js",
        "async function run(ctx, inputs) {\n  const hits = await ctx.tool(\"grep\", { pattern: inputs.term ?? \"auth\" });\n  return { evidence: hits.trim().split(\"\\n\") };\n}\n",
    );
    dir
}

/// A script tool `name` allowed to call `echo`, with `limits` lines.
fn script(dir: &Path, name: &str, limits: &str, body: &str) {
    let md = format!(
        "---\nkind: script\nname: {name}\npath: scripts/{name}.js\nallowed_tools: [echo]\nlimits:\n{limits}---\nTest {name}.\n"
    );
    std::fs::write(dir.join(format!("tools/{name}.md")), md).unwrap();
    std::fs::write(dir.join(format!("scripts/{name}.js")), body).unwrap();
}

fn quick(dir: &Path, name: &str, body: &str) {
    script(dir, name, "  timeoutMs: 5000\n  maxToolCalls: 2\n", body);
}

fn call(dir: &Path, name: &str, inputs: Value) -> Output {
    Command::new(EXE)
        .arg("-q")
        .arg("-C")
        .arg(dir)
        .args(["call", name, "--args"])
        .arg(json!({ "inputs": inputs }).to_string())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// (exit status, stdout and stderr together).
fn run(dir: &Path, name: &str) -> (i32, String) {
    let o = call(dir, name, json!({}));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.code().unwrap_or(-1), text)
}

fn ok(dir: &Path, name: &str) -> String {
    let (code, text) = run(dir, name);
    assert_eq!(code, 0, "{name}: {text}");
    text
}

fn fails(dir: &Path, name: &str, code: i32, why: &str) {
    let (got, text) = run(dir, name);
    assert_eq!(got, code, "{name}: {text}");
    assert!(text.contains(why), "{name}: {text}");
}

#[test]
fn the_seed_example_calls_an_allowed_tool_and_returns_json() {
    let p = project();
    let o = call(p.path(), "search-auth", json!({"term": "auth"}));
    assert!(o.status.success(), "{o:?}");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v, json!({"evidence": ["src/login.rs"]}));
    // `check` no longer says script calls are refused.
    let check = Command::new(EXE)
        .arg("-C")
        .arg(p.path())
        .arg("check")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&check.stdout);
    assert!(!text.contains("calls are refused"), "{text}");
}

#[test]
fn a_string_is_the_result_as_is_and_a_throw_is_an_error_result() {
    let p = project();
    quick(
        p.path(),
        "text",
        "async function run(ctx, inputs) { return 'plain ' + inputs.n; }",
    );
    let o = call(p.path(), "text", json!({"n": 7}));
    assert!(o.status.success(), "{o:?}");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "plain 7");
    quick(
        p.path(),
        "throws",
        "async function run(ctx, inputs) { throw new Error('boom'); }",
    );
    fails(p.path(), "throws", 1, "Error: boom");
    // A plain (non-async) run works too.
    quick(
        p.path(),
        "sync",
        "function run(ctx, inputs) { return [1, 2]; }",
    );
    assert_eq!(ok(p.path(), "sync"), "[1,2]");
}

#[test]
fn the_result_is_cut_at_max_output_bytes() {
    let p = project();
    let body = "async function run(ctx, inputs) { return 'x'.repeat(inputs.n); }";
    script(p.path(), "long", "  maxOutputBytes: 10\n", body);
    let o = call(p.path(), "long", json!({"n": 10}));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "xxxxxxxxxx");
    let o = call(p.path(), "long", json!({"n": 100}));
    assert!(o.status.success(), "{o:?}");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "xxxxxxxxxx\n[OUTPUT TRUNCATED: 90 bytes omitted]"
    );
}

#[test]
fn every_string_to_code_path_fails_by_construction() {
    let p = project();
    quick(
        p.path(),
        "control",
        "async function run(ctx, inputs) { return [1, 2].map(x => x + 1).join(','); }",
    );
    assert_eq!(ok(p.path(), "control"), "2,3");
    let escapes = [
        ("direct", "eval('1+1')"),
        ("indirect", "(0, eval)('1+1')"),
        ("computed", "globalThis['ev' + 'al']('1+1')"),
        ("function", "new Function('return 1')()"),
        ("function-call", "Function ('return 1')()"),
        (
            "async",
            "await (async function () {}).constructor('return 1')()",
        ),
        ("arrow", "await (async () => {}).constructor('return 1')()"),
        (
            "generator",
            "(function* () {}).constructor('yield 1')().next().value",
        ),
        (
            "async-generator",
            "(async function* () {}).constructor('yield 1')",
        ),
        ("this", "({}).constructor.constructor('return this')()"),
        ("via-ctx", "ctx.tool.constructor('return 1')()"),
        ("via-run", "run.constructor('return 1')()"),
    ];
    for (name, expr) in escapes {
        quick(
            p.path(),
            name,
            &format!("async function run(ctx, inputs) {{ return {expr}; }}"),
        );
        fails(p.path(), name, 1, "eval is not supported");
    }
}

#[test]
fn imports_fail_without_a_module_loader() {
    let p = project();
    quick(
        p.path(),
        "control",
        "async function run(ctx, inputs) { return 'no import'; }",
    );
    ok(p.path(), "control");
    quick(
        p.path(),
        "dynamic",
        "async function run(ctx, inputs) { await import('./control.js'); return 'imported'; }",
    );
    fails(p.path(), "dynamic", 1, "could not load module");
    quick(
        p.path(),
        "static",
        "import x from './control.js';\nasync function run(ctx, inputs) { return 'imported'; }",
    );
    fails(p.path(), "static", 1, "could not load module");
}

#[test]
fn ctx_is_frozen_and_prototype_pollution_reaches_nothing() {
    let p = project();
    quick(
        p.path(),
        "pollute",
        r#"async function run(ctx, inputs) {
  let replaced = "no";
  try { ctx.tool = async () => "fake"; replaced = "yes"; } catch (e) { replaced = e.name; }
  Object.prototype.allowed_tools = ["grep"];
  Object.prototype.maxToolCalls = 1000;
  Array.prototype.includes = () => true;
  const outside = await ctx.tool("grep", { pattern: "auth" }).catch(e => e.message);
  const hi = await ctx.tool("echo", { word: "there" });
  return { replaced, frozen: Object.isFrozen(ctx), outside, hi };
}"#,
    );
    let v: Value = serde_json::from_str(&ok(p.path(), "pollute")).unwrap();
    assert_eq!(v["replaced"], "TypeError", "{v}");
    assert_eq!(v["frozen"], true, "{v}");
    assert_eq!(v["hi"], "hi there\n", "{v}");
    let outside = v["outside"].as_str().unwrap();
    assert!(
        outside.contains("not in this script's allowed_tools (echo)"),
        "{v}"
    );
}

#[test]
fn an_infinite_loop_is_stopped_at_the_timeout() {
    let p = project();
    let limits = "  timeoutMs: 1500\n";
    script(
        p.path(),
        "finite",
        limits,
        "async function run(ctx, inputs) { let i = 0; while (i < 1e5) i++; return i; }",
    );
    assert_eq!(ok(p.path(), "finite"), "100000");
    script(
        p.path(),
        "loop",
        limits,
        "async function run(ctx, inputs) { while (true) {} }",
    );
    let t = Instant::now();
    fails(p.path(), "loop", 124, "timed out");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}

#[test]
fn a_memory_bomb_hits_the_heap_limit() {
    let p = project();
    quick(
        p.path(),
        "small",
        "async function run(ctx, inputs) { return 'x'.repeat(1 << 20).length; }",
    );
    assert_eq!(ok(p.path(), "small"), "1048576");
    quick(
        p.path(),
        "bomb",
        "async function run(ctx, inputs) { const a = []; while (true) a.push('x'.repeat(1 << 20) + a.length); }",
    );
    fails(p.path(), "bomb", 1, "ran out of memory (heap limit 64 MiB)");
    quick(
        p.path(),
        "array",
        "async function run(ctx, inputs) { return new Array(1e9).fill(0).length; }",
    );
    fails(p.path(), "array", 1, "out of memory");
}

#[test]
fn deep_recursion_hits_the_stack_limit() {
    let p = project();
    quick(
        p.path(),
        "shallow",
        "async function run(ctx, inputs) { function f(n) { return n ? f(n - 1) + 1 : 0; } return f(100); }",
    );
    assert_eq!(ok(p.path(), "shallow"), "100");
    quick(
        p.path(),
        "deep",
        "async function run(ctx, inputs) { function f(n) { return f(n + 1) + 1; } return f(0); }",
    );
    fails(p.path(), "deep", 1, "overflowed its stack (limit 512 KiB)");
}

#[test]
fn a_tool_outside_allowed_tools_is_refused() {
    let p = project();
    quick(
        p.path(),
        "allowed",
        "async function run(ctx, inputs) { return await ctx.tool('echo', { word: 'a' }); }",
    );
    assert_eq!(ok(p.path(), "allowed"), "hi a\n");
    quick(
        p.path(),
        "outside",
        "async function run(ctx, inputs) { return await ctx.tool('grep', { pattern: 'auth' }); }",
    );
    fails(
        p.path(),
        "outside",
        1,
        "ctx.tool('grep'): not in this script's allowed_tools (echo)",
    );
    quick(
        p.path(),
        "itself",
        "async function run(ctx, inputs) { return await ctx.tool('itself', {}); }",
    );
    fails(p.path(), "itself", 1, "a script cannot call itself");
    // The inner call is validated like any call.
    quick(
        p.path(),
        "badargs",
        "async function run(ctx, inputs) { return await ctx.tool('echo', { word: 5 }); }",
    );
    fails(p.path(), "badargs", 1, "invalid arguments for echo");
}

#[test]
fn more_calls_than_max_tool_calls_are_refused() {
    let p = project();
    let body = |n: u32| {
        format!(
            "async function run(ctx, inputs) {{ const r = []; for (let i = 0; i < {n}; i++) r.push(await ctx.tool('echo', {{ word: String(i) }})); return r.length; }}"
        )
    };
    quick(p.path(), "two", &body(2));
    assert_eq!(ok(p.path(), "two"), "2");
    let log = p.path().join("calls.log");
    assert_eq!(std::fs::read_to_string(&log).unwrap().lines().count(), 2);
    std::fs::remove_file(&log).unwrap();
    quick(p.path(), "three", &body(3));
    fails(
        p.path(),
        "three",
        1,
        "ctx.tool('echo'): over this script's maxToolCalls (2)",
    );
    // The refused call never ran.
    assert_eq!(std::fs::read_to_string(&log).unwrap().lines().count(), 2);
}

/// The host PIDs of running script runners started under `ancestor`
/// (other tests run runners of their own at the same time).
fn runners(ancestor: u32) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.windows(15).any(|w| w == b"__script-runner"))
        })
        .filter(|pid| descends_from(*pid, ancestor as i32))
        .collect()
}

/// Whether `pid`'s chain of parents reaches `ancestor`.
fn descends_from(mut pid: i32, ancestor: i32) -> bool {
    for _ in 0..64 {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return false;
        };
        // The parent follows the command name, which ends at the last ')'.
        let Some(ppid) = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<i32>().ok())
        else {
            return false;
        };
        if ppid == ancestor {
            return true;
        }
        if ppid <= 1 {
            return false;
        }
        pid = ppid;
    }
    false
}

#[test]
fn serve_survives_a_crashed_runner() {
    let p = project();
    script(
        p.path(),
        "spin",
        "  timeoutMs: 60000\n",
        "async function run(ctx, inputs) { while (true) {} }",
    );
    quick(
        p.path(),
        "fine",
        "async function run(ctx, inputs) { return 'still here'; }",
    );
    let state = tempfile::tempdir().unwrap();
    let mut child = Command::new(EXE)
        .arg("-C")
        .arg(p.path())
        .args(["-q", "serve"])
        .env("XDG_STATE_HOME", state.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut send = |v: Value| writeln!(stdin, "{v}").unwrap();
    let mut answer = |id: i64| -> Value {
        let mut line = String::new();
        loop {
            line.clear();
            assert!(out.read_line(&mut line).unwrap() > 0, "serve ended");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    };
    send(
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}),
    );
    answer(1);
    send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    let before = runners(child.id());
    send(
        json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"spin","arguments":{"inputs":{}}}}),
    );
    let t = Instant::now();
    let pid = loop {
        if let Some(pid) = runners(child.id())
            .into_iter()
            .find(|p| !before.contains(p))
        {
            break pid;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "no runner started");
        std::thread::sleep(Duration::from_millis(20));
    };
    // The runner put its own filter on top of the sandbox's.
    let filters = |status: &str| -> u32 {
        let line = status.lines().find(|l| l.starts_with("Seccomp_filters:"));
        line.unwrap()
            .split_whitespace()
            .nth(1)
            .unwrap()
            .parse()
            .unwrap()
    };
    let sandboxed = Command::new(EXE)
        .arg("-C")
        .arg(p.path())
        .args(["-q", "exec", "--", "cat", "/proc/self/status"])
        .output()
        .unwrap();
    let want = filters(&String::from_utf8_lossy(&sandboxed.stdout)) + 1;
    // It adds the filter once its script is compiled: wait for that.
    let t = Instant::now();
    loop {
        let runner = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        if filters(&runner) == want {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "{runner}");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Its address space is bounded below the default profile's 16 GiB.
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits.lines().find(|l| l.starts_with("Max address space"));
    assert!(line.unwrap().contains(" 1073741824 "), "{limits}");
    // What an engine abort looks like from outside.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGABRT,
    )
    .unwrap();
    let crashed = answer(2);
    assert_eq!(crashed["result"]["isError"], true, "{crashed}");
    let text = crashed["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("killed by signal 6"), "{text}");
    send(
        json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"fine","arguments":{"inputs":{}}}}),
    );
    let fine = answer(3);
    assert_eq!(fine["result"]["content"][0]["text"], "still here", "{fine}");
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

#[test]
fn inner_calls_pass_the_gate_and_leave_their_own_records() {
    let p = project();
    let state = tempfile::tempdir().unwrap();
    let audit = |state: &Path| {
        let o = Command::new(EXE)
            .arg("-C")
            .arg(p.path())
            .args(["audit", "--json", "--all"])
            .env("XDG_STATE_HOME", state)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let body =
        "async function run(ctx, inputs) { await ctx.tool('echo', { word: 'a' }); return 'ok'; }";
    quick(p.path(), "once", body);
    let o = Command::new(EXE)
        .args(["-q", "-C"])
        .arg(p.path())
        .args(["call", "once", "--args", r#"{"inputs":{}}"#])
        .env("XDG_STATE_HOME", state.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let log = audit(state.path());
    // The inner call has its own record, in the outer call's session
    // marked with the script that made it.
    assert!(log.contains("\"tool\":\"echo\""), "{log}");
    assert!(log.contains(">once\""), "{log}");
    assert!(log.contains("\"tool\":\"once\""), "{log}");
    // An inner tool that needs approval asks where the outer call asked:
    // here nobody can be asked, so it is refused, recorded, and never runs.
    std::fs::write(
        p.path().join("tools/g.md"),
        "---\nkind: script\nname: g\npath: scripts/g.js\nallowed_tools: [guarded]\n---\nCalls guarded.\n",
    )
    .unwrap();
    std::fs::write(
        p.path().join("scripts/g.js"),
        "async function run(ctx, inputs) { return await ctx.tool('guarded', {}); }",
    )
    .unwrap();
    let o = Command::new(EXE)
        .args(["-q", "-C"])
        .arg(p.path())
        .args(["call", "g", "--args", r#"{"inputs":{}}"#])
        .env("XDG_STATE_HOME", state.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!o.status.success(), "{text}");
    assert!(
        text.contains("ctx.tool('guarded')") && text.contains("approv"),
        "{text}"
    );
    assert!(
        !p.path().join("guarded.log").exists(),
        "the refused inner call ran"
    );
    let log = audit(state.path());
    assert!(log.contains("\"tool\":\"guarded\""), "{log}");
}

// Scripts calling scripts. The depth travels with the call (each inner
// call runs on a thread of its own), so a cycle of scripts stops at 4
// nested scripts whichever surface serves it; inner calls run one at a
// time in the outer call's slot.

/// Two shell tools for the nesting tests: `mark` appends its `n` to
/// marks.log (one line per script that got to run), `live` counts the
/// calls of it running at once into census.log (it waits, at most 10 s,
/// until `want` of them are running).
/// Under `TOOLCAGE_TEST_NAMESPACE_FREE=1` the binaries this thread starts
/// run namespace-free.
fn nesting_project() -> tempfile::TempDir {
    common::namespace_free_if_asked();
    let p = project();
    let mut tools = std::fs::read_to_string(p.path().join("tools.toml")).unwrap();
    tools.push_str(
        r#"
[[tools]]
name = "mark"
description = "Mark level n"
executor = "shell"
command = "echo {{n}} >> marks.log; echo marked {{n}}"
requires_approval = false
[[tools.params]]
name = "n"
type = "string"
required = true

[[tools]]
name = "live"
description = "Count the calls of live running at once"
executor = "shell"
command = "mkdir -p live; f=$(mktemp live/XXXXXX); i=0; while [ $(ls live | wc -l) -lt {{want}} ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; ls live | wc -l >> census.log; rm -f $f; echo ok"
requires_approval = false
[[tools.params]]
name = "want"
type = "string"
required = true
"#,
    );
    std::fs::write(p.path().join("tools.toml"), tools).unwrap();
    p
}

/// A script tool `name` allowed to call `allowed`.
fn script_calling(dir: &Path, name: &str, allowed: &[&str], max_calls: u32, body: &str) {
    let md = format!(
        "---\nkind: script\nname: {name}\npath: scripts/{name}.js\nallowed_tools: [{}]\nlimits:\n  timeoutMs: 60000\n  maxToolCalls: {max_calls}\n---\nTest {name}.\n",
        allowed.join(", ")
    );
    std::fs::write(dir.join(format!("tools/{name}.md")), md).unwrap();
    std::fs::write(dir.join(format!("scripts/{name}.js")), body).unwrap();
}

/// A script that marks its level, then calls `next` one level deeper; it
/// stops by itself at level 10 (where an unbounded chain would end).
fn recursing(dir: &Path, name: &str, next: &str) {
    let body = format!(
        "async function run(ctx, inputs) {{\n  const n = (inputs.n ?? 0) + 1;\n  await ctx.tool('mark', {{ n: '{name}' + n }});\n  if (n >= 10) return 'bottom at ' + n;\n  return await ctx.tool('{next}', {{ inputs: {{ n }} }});\n}}\n"
    );
    script_calling(dir, name, &[next, "mark"], 2, &body);
}

/// The scripts that got to run, in order.
fn marks(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("marks.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Scripts `s1`→`s2`→`s3`→`s4`→`echo`, each returning what it got with
/// its name in front.
fn chain(dir: &Path) {
    for (name, next) in [("s1", "s2"), ("s2", "s3"), ("s3", "s4")] {
        let body = format!(
            "async function run(ctx, inputs) {{ return '{name}:' + await ctx.tool('{next}', {{ inputs: {{}} }}); }}"
        );
        script_calling(dir, name, &[next], 1, &body);
    }
    script_calling(
        dir,
        "s4",
        &["echo"],
        1,
        "async function run(ctx, inputs) { return 's4:' + await ctx.tool('echo', { word: 'deep' }); }",
    );
}

const REFUSED_AT_5: &str =
    "a → b → a → b → a: refused, scripts calling scripts nest at most 4 deep";

#[test]
fn scripts_calling_each_other_stop_at_depth_4() {
    let p = nesting_project();
    recursing(p.path(), "a", "b");
    recursing(p.path(), "b", "a");
    let (code, text) = run(p.path(), "a");
    assert_eq!(code, 1, "{text}");
    assert!(text.contains(REFUSED_AT_5), "{text}");
    // Four scripts ran (each alive while the next ran, the last one's
    // `mark` call the one other sandbox); the fifth never started.
    assert_eq!(marks(p.path()), ["a1", "b2", "a3", "b4"], "{text}");
    // A script calling itself is refused at once.
    recursing(p.path(), "self", "self");
    std::fs::remove_file(p.path().join("marks.log")).unwrap();
    let (code, text) = run(p.path(), "self");
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("a script cannot call itself"), "{text}");
    assert_eq!(marks(p.path()), ["self1"], "{text}");
}

#[test]
fn a_chain_of_scripts_within_the_limit_runs() {
    let p = nesting_project();
    chain(p.path());
    // Three scripts deep, then four (the limit), each down to `echo`.
    assert_eq!(ok(p.path(), "s2"), "s2:s3:s4:hi deep\n");
    assert_eq!(ok(p.path(), "s1"), "s1:s2:s3:s4:hi deep\n");
    let log = std::fs::read_to_string(p.path().join("calls.log")).unwrap();
    assert_eq!(log.lines().count(), 2, "{log}");
}

/// A `toolcage serve` session over stdio, initialized.
struct Served {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    out: BufReader<std::process::ChildStdout>,
    next: i64,
}

impl Served {
    fn start(dir: &Path, state: &Path) -> Served {
        let mut child = Command::new(EXE)
            .arg("-C")
            .arg(dir)
            .args(["-q", "serve"])
            .env("XDG_STATE_HOME", state)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let mut s = Served {
            child,
            stdin,
            out,
            next: 1,
        };
        s.request(
            "initialize",
            json!({"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}),
        );
        writeln!(
            s.stdin,
            "{}",
            json!({"jsonrpc":"2.0","method":"notifications/initialized"})
        )
        .unwrap();
        s
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        let req = json!({"jsonrpc":"2.0","id":id,"method":method,"params":params});
        writeln!(self.stdin, "{req}").unwrap();
        let mut line = String::new();
        loop {
            line.clear();
            assert!(self.out.read_line(&mut line).unwrap() > 0, "serve ended");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    }

    /// (isError, the text) of a `tools/call` of script `name`.
    fn call(&mut self, name: &str, inputs: Value) -> (bool, String) {
        let v = self.request(
            "tools/call",
            json!({"name": name, "arguments": {"inputs": inputs}}),
        );
        let text = v["result"]["content"][0]["text"].as_str().unwrap_or("");
        (v["result"]["isError"] == true, format!("{text}{v}"))
    }

    fn stop(self) {
        let Served {
            mut child, stdin, ..
        } = self;
        drop(stdin);
        assert!(child.wait().unwrap().success());
    }
}

#[test]
fn serve_stops_scripts_calling_each_other_at_depth_4() {
    let p = nesting_project();
    recursing(p.path(), "a", "b");
    recursing(p.path(), "b", "a");
    recursing(p.path(), "self", "self");
    chain(p.path());
    let state = tempfile::tempdir().unwrap();
    let mut serve = Served::start(p.path(), state.path());
    let (is_error, text) = serve.call("a", json!({}));
    assert!(is_error, "{text}");
    assert!(text.contains(REFUSED_AT_5), "{text}");
    assert_eq!(marks(p.path()), ["a1", "b2", "a3", "b4"], "{text}");
    // Again: nothing of the first tree is left counting.
    std::fs::remove_file(p.path().join("marks.log")).unwrap();
    let (is_error, text) = serve.call("b", json!({}));
    assert!(is_error, "{text}");
    assert!(
        text.contains("b → a → b → a → b: refused, scripts calling scripts nest at most 4 deep"),
        "{text}"
    );
    assert_eq!(marks(p.path()), ["b1", "a2", "b3", "a4"], "{text}");
    std::fs::remove_file(p.path().join("marks.log")).unwrap();
    let (is_error, text) = serve.call("self", json!({}));
    assert!(is_error, "{text}");
    assert!(text.contains("a script cannot call itself"), "{text}");
    assert_eq!(marks(p.path()), ["self1"], "{text}");
    // The control: a chain within the limit answers.
    let (is_error, text) = serve.call("s2", json!({}));
    assert!(!is_error, "{text}");
    assert!(text.starts_with("s2:s3:s4:hi deep\n"), "{text}");
    let (is_error, text) = serve.call("s1", json!({}));
    assert!(!is_error, "{text}");
    assert!(text.starts_with("s1:s2:s3:s4:hi deep\n"), "{text}");
    // The mode the suite asked for is the one the calls ran in.
    let mode = match common::namespace_free_run() {
        true => "\"mode\":\"namespace-free\"",
        false => "\"mode\":\"namespaces\"",
    };
    assert!(text.contains(mode), "{text}");
    serve.stop();
    // The refused call has its own record.
    let o = Command::new(EXE)
        .arg("-C")
        .arg(p.path())
        .args(["audit", "--json", "--all"])
        .env("XDG_STATE_HOME", state.path())
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&o.stdout);
    assert!(log.contains("nest at most 4 deep"), "{log}");
}

/// The census of `live` calls running at once, one line per call.
fn census(dir: &Path) -> Vec<u32> {
    std::fs::read_to_string(dir.join("census.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect()
}

#[test]
fn a_script_fanning_out_runs_one_inner_call_at_a_time() {
    let p = nesting_project();
    // The census sees calls that overlap: two calls made apart, each
    // waiting for the other, count 2.
    let calls: Vec<_> = (0..2)
        .map(|_| {
            Command::new(EXE)
                .arg("-q")
                .arg("-C")
                .arg(p.path())
                .args(["call", "live", "--args", r#"{"want":"2"}"#])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in calls {
        assert!(c.wait().unwrap().success());
    }
    assert!(census(p.path()).contains(&2), "{:?}", census(p.path()));
    std::fs::remove_file(p.path().join("census.log")).unwrap();
    // Fifty calls started at once from a script all run, one at a time.
    script_calling(
        p.path(),
        "fan",
        &["live"],
        50,
        "async function run(ctx, inputs) {\n  const all = await Promise.all(Array.from({ length: 50 }, () => ctx.tool('live', { want: '1' })));\n  return all.length;\n}\n",
    );
    let state = tempfile::tempdir().unwrap();
    let mut serve = Served::start(p.path(), state.path());
    let (is_error, text) = serve.call("fan", json!({}));
    assert!(!is_error, "{text}");
    assert!(text.starts_with("50"), "{text}");
    serve.stop();
    let seen = census(p.path());
    assert_eq!(seen.len(), 50, "{seen:?}");
    assert!(seen.iter().all(|&n| n == 1), "{seen:?}");
}

#[test]
fn an_engine_used_directly_stops_scripts_at_depth_4_too() {
    // No pipeline: the engine runs the inner calls itself, and the chain
    // travels in the prepared call.
    let p = nesting_project();
    recursing(p.path(), "a", "b");
    recursing(p.path(), "b", "a");
    chain(p.path());
    toolcage::call::script::set_child_binary(EXE.into());
    let engine = toolcage::call::Engine::load(
        p.path(),
        &toolcage::policy::Sources::default(),
        toolcage::policy::Overrides::default(),
        toolcage::discover::Options::default(),
    )
    .unwrap();
    let r = engine.call("s1", json!({"inputs": {}}), None).unwrap();
    assert_eq!(
        (r.is_error, r.text.as_str()),
        (false, "s1:s2:s3:s4:hi deep\n")
    );
    let r = engine.call("a", json!({"inputs": {}}), None).unwrap();
    assert!(r.is_error && r.text.contains(REFUSED_AT_5), "{}", r.text);
    assert_eq!(marks(p.path()), ["a1", "b2", "a3", "b4"], "{}", r.text);
}
