//! Sandbox overhead, measured side by side in one run:
//! `/bin/true` spawned plainly, under toolcage's runner (in process), as a
//! whole `toolcage exec` process, under util-linux `unshare` with the same
//! namespaces, and under `bwrap` building an equivalent root.
//!
//! Run with `cargo bench --bench runner`. Prints the fastest and the median
//! run and the ratios of both; asserts nothing. The commands run in rounds
//! (each once per round), so load on the machine reaches them alike.

#[path = "common/mod.rs"]
mod common;
use common::median;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use toolcage::policy::{self, Grant, Network};
use toolcage::sandbox;

const ROUNDS: usize = 300;

fn measure(mut f: impl FnMut()) -> Duration {
    for _ in 0..20 {
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

fn default_grant(project: PathBuf) -> Grant {
    let mut g = Grant::closed(project.clone());
    g.read = [
        "/usr",
        "/bin",
        "/lib",
        "/lib64",
        "/etc",
        "/proc",
        "/dev/urandom",
        "/dev/zero",
    ]
    .iter()
    .map(PathBuf::from)
    .filter(|p| p.exists())
    .collect();
    g.write = vec![project.clone(), "/dev/null".into()];
    g.protected = [
        ".agents",
        ".clawd",
        "tools",
        "tools.toml",
        ".mcp.json",
        ".git",
    ]
    .iter()
    .map(|p| project.join(p))
    .collect();
    g.env_allow = vec!["PATH".into(), "LANG".into(), "LC_*".into(), "TERM".into()];
    g.network = Network::Off;
    g
}

fn quiet(cmd: &mut Command) -> &mut Command {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
}

/// Fastest and median of a set of runs.
#[derive(Clone, Copy)]
struct Stats {
    min: Duration,
    median: Duration,
}

fn stats(mut v: Vec<Duration>) -> Stats {
    v.sort();
    Stats {
        min: v[0],
        median: v[v.len() / 2],
    }
}

/// Run each command once per round, in an order that rotates, so that the
/// machine's load reaches them all alike: the ratios are what counts.
fn interleaved(cmds: &mut [(&str, Command)]) -> Vec<Stats> {
    let mut times = vec![Vec::with_capacity(ROUNDS); cmds.len()];
    for round in 0..20 + ROUNDS {
        for k in 0..cmds.len() {
            let i = (round + k) % cmds.len();
            let (name, cmd) = &mut cmds[i];
            let t = Instant::now();
            let ok = quiet(cmd).status().unwrap().success();
            let took = t.elapsed();
            assert!(ok, "{name} failed");
            if round >= 20 {
                times[i].push(took); // after 20 rounds of warm-up
            }
        }
    }
    times.into_iter().map(stats).collect()
}

fn bwrap_command(project: &std::path::Path) -> Command {
    let mut cmd = Command::new("bwrap");
    for dir in ["/usr", "/etc"] {
        cmd.args(["--ro-bind", dir, dir]);
    }
    for (link, target) in [
        ("/bin", "usr/bin"),
        ("/sbin", "usr/sbin"),
        ("/lib", "usr/lib"),
        ("/lib64", "usr/lib64"),
    ] {
        cmd.args(["--symlink", target, link]);
    }
    cmd.args(["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"])
        .arg("--bind")
        .arg(project)
        .arg(project)
        .args([
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            "/bin/true",
        ]);
    cmd
}

fn main() {
    let project = std::env::temp_dir().join(format!("tc-bench-{}", std::process::id()));
    std::fs::create_dir_all(project.join(".git")).unwrap();
    let grant = default_grant(project.canonicalize().unwrap());
    let true_cmd = sandbox::Command {
        argv: vec!["/bin/true".into()],
        ..Default::default()
    };

    let run_true = || {
        let o = sandbox::run(&grant, &true_cmd, None).unwrap();
        assert!(o.exit.success());
    };
    let runner = measure(run_true);
    // As under `serve`: each call takes a network namespace made ahead.
    sandbox::keep_network_namespace_ready();
    let runner_ready = measure(run_true);
    // What `toolcage exec` resolves before it runs anything: the default
    // profile for the project (warm: a fresh process also pays for first
    // touching this code).
    let policy = measure(|| {
        let ctx = policy::Context::detect(&project, toolcage::discover::agentdir::holds_a3s_tools)
            .unwrap();
        let sources = policy::Sources {
            profile: None,
            policy_file: None,
        };
        policy::load_and_resolve(&sources, &ctx, &policy::Overrides::default()).unwrap();
    });
    let exe = env!("CARGO_BIN_EXE_toolcage");
    let mut exec = Command::new(exe);
    exec.arg("-C")
        .arg(&project)
        .args(["exec", "--", "/bin/true"]);
    let mut version = Command::new(exe);
    version.arg("--version");
    // The same kernel work done by C tools: util-linux's unshare with the
    // namespaces toolcage creates, and bubblewrap building an equivalent root.
    let mut unshare = Command::new("unshare");
    unshare.args(["-m", "-p", "-i", "-n", "-f", "--mount-proc", "/bin/true"]);
    let mut cmds: Vec<(&str, Command)> = vec![
        ("/bin/true", Command::new("/bin/true")),
        ("toolcage exec -- /bin/true", exec),
        ("toolcage --version", version),
    ];
    let has_unshare = which("unshare");
    if has_unshare {
        cmds.push(("unshare -m -p -i -n -f --mount-proc", unshare));
    }
    let has_bwrap = which("bwrap");
    if has_bwrap {
        cmds.push(("bwrap (equivalent root)", bwrap_command(&project)));
    }
    let s = interleaved(&mut cmds);

    println!("sandbox overhead: {ROUNDS} rounds of each command, interleaved; fastest and median");
    for ((name, _), st) in cmds.iter().zip(&s) {
        println!(
            "  {name:<38} min {:>7.3} ms   median {:>7.3} ms",
            ms(st.min),
            ms(st.median)
        );
    }
    println!(
        "  toolcage runner (in process)           median {:>7.3} ms",
        ms(runner)
    );
    println!(
        "  the same, namespace made ahead (serve) median {:>7.3} ms",
        ms(runner_ready)
    );
    let ratio = |a: Stats, b: Stats| (ms(a.min) / ms(b.min), ms(a.median) / ms(b.median));
    if has_unshare {
        let (lo, mid) = ratio(s[1], s[3]);
        println!(
            "  ratio toolcage exec / unshare = {mid:.2} median, {lo:.2} fastest (no target: unshare builds no root)"
        );
    }
    if has_bwrap {
        let (lo, mid) = ratio(s[1], s[s.len() - 1]);
        println!(
            "  ratio toolcage exec / bwrap   = {mid:.2} median, {lo:.2} fastest (target <= 1.0)"
        );
    } else {
        println!("  bwrap not installed: skipped (apt-get install bubblewrap)");
    }
    let startup = ms(s[2].median) - ms(s[0].median);
    println!("  start-up: toolcage --version is +{startup:.3} ms over /bin/true (median)");
    // exec = a process started and reaped (/bin/true) + start-up + the
    // CLI, policy and exit + the runner (whose own /bin/true is inside it).
    println!(
        "  where exec's median goes: process {:.3}, start-up {startup:.3}, runner {:.3}, CLI+policy+exit {:.3} (policy alone, warm, {:.3})",
        ms(s[0].median),
        ms(runner),
        ms(s[1].median) - ms(s[0].median) - startup - ms(runner),
        ms(policy)
    );
    call_vs_exec(&project);
    flood(&grant);
    let _ = std::fs::remove_dir_all(&project);
}

fn max_rss_kib() -> i64 {
    use nix::sys::resource::{UsageWho, getrusage};
    getrusage(UsageWho::RUSAGE_SELF).map_or(0, |u| u.max_rss())
}

/// A tool writing 1 GiB to stdout: what is kept, what is counted, and how
/// much toolcage's own memory grew.
fn flood(grant: &Grant) {
    let cmd = sandbox::Command {
        argv: vec![
            "/bin/sh".into(),
            "-c".into(),
            "head -c 1073741824 /dev/zero".into(),
        ],
        ..Default::default()
    };
    let before = max_rss_kib();
    let t = Instant::now();
    let o = sandbox::run(grant, &cmd, None).unwrap();
    let took = t.elapsed();
    let growth = max_rss_kib() - before;
    println!("output flood: 1 GiB to stdout");
    println!(
        "  kept {} bytes, omitted {} (expected {}), took {:.2} s, toolcage max RSS growth {} KiB (target < 20480)",
        o.stdout.bytes_kept,
        o.stdout.bytes_omitted,
        (1u64 << 30) - o.stdout.bytes_kept,
        took.as_secs_f64(),
        growth
    );
}

/// `toolcage call` of a trivial Octomind tool against `toolcage exec` of the
/// same script: what discovery, validation and encoding add per call.
fn call_vs_exec(project: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    let tools = project.join(".agents/tools");
    std::fs::create_dir_all(&tools).unwrap();
    let script = tools.join("noop");
    std::fs::write(&script, "#!/bin/sh\n# @description Do nothing.\nexit 0\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let exe = env!("CARGO_BIN_EXE_toolcage");
    let run = |args: &[&str]| {
        let ok = quiet(Command::new(exe).arg("-C").arg(project).args(args))
            .status()
            .unwrap()
            .success();
        assert!(ok, "toolcage {args:?} failed");
    };
    let exec = measure(|| run(&["exec", "--", ".agents/tools/noop"]));
    let call = measure(|| run(&["call", "noop"]));
    println!("toolcage call vs exec of the same trivial script (whole process)");
    println!("  toolcage exec -- ./noop      {:>9.3} ms", ms(exec));
    println!(
        "  toolcage call noop           {:>9.3} ms   +{:.3} ms (target <= +2 ms)",
        ms(call),
        ms(call) - ms(exec)
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn which(name: &str) -> bool {
    std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .any(|d| std::path::Path::new(d).join(name).is_file())
}
