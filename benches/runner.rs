//! Sandbox overhead, measured side by side in one run:
//! `/bin/true` spawned plainly, under toolcage's runner (in process), as a
//! whole `toolcage exec` process, under util-linux `unshare` with the same
//! namespaces, and under `bwrap` building an equivalent root.
//!
//! Run with `cargo bench --bench runner`. Prints medians and ratios; asserts nothing.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use toolcage::policy::{Grant, Network};
use toolcage::sandbox;

const ROUNDS: usize = 300;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

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

fn main() {
    let project = std::env::temp_dir().join(format!("tc-bench-{}", std::process::id()));
    std::fs::create_dir_all(project.join(".git")).unwrap();
    let grant = default_grant(project.canonicalize().unwrap());
    let true_cmd = sandbox::Command {
        argv: vec!["/bin/true".into()],
        ..Default::default()
    };

    let plain = measure(|| {
        quiet(&mut Command::new("/bin/true")).status().unwrap();
    });
    let runner = measure(|| {
        let o = sandbox::run(&grant, &true_cmd, None).unwrap();
        assert!(o.exit.success());
    });
    let exe = env!("CARGO_BIN_EXE_toolcage");
    let whole =
        measure(|| {
            let ok = quiet(Command::new(exe).args(["-C"]).arg(&project).args([
                "exec",
                "--",
                "/bin/true",
            ]))
            .status()
            .unwrap()
            .success();
            assert!(ok);
        });

    println!("sandbox overhead, median of {ROUNDS} runs of /bin/true");
    println!("  plain fork/exec            {:>9.3} ms", ms(plain));
    println!(
        "  toolcage runner (in proc)  {:>9.3} ms   +{:.3} ms over plain ({:.2}x)",
        ms(runner),
        ms(runner) - ms(plain),
        ms(runner) / ms(plain)
    );
    println!("  toolcage exec (process)    {:>9.3} ms", ms(whole));
    // The same kernel work done by C tools: util-linux's unshare with the
    // namespaces toolcage creates, and bubblewrap building an equivalent root.
    let unshare_true = |cmd: &mut Command| {
        let ok = quiet(cmd).status().unwrap().success();
        assert!(ok);
    };
    if which("unshare") {
        let unshare = measure(|| {
            unshare_true(Command::new("unshare").args([
                "-m",
                "-p",
                "-i",
                "-n",
                "-f",
                "--mount-proc",
                "/bin/true",
            ]))
        });
        println!(
            "  unshare -m -p -i -n -f --mount-proc  {:>9.3} ms",
            ms(unshare)
        );
        println!(
            "  ratio toolcage exec / unshare = {:.2} (target <= 1.15)",
            ms(whole) / ms(unshare)
        );
    }
    if which("bwrap") {
        let bwrap = measure(|| {
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
                .arg(&project)
                .arg(&project)
                .args([
                    "--unshare-all",
                    "--die-with-parent",
                    "--new-session",
                    "/bin/true",
                ]);
            unshare_true(&mut cmd)
        });
        println!("  bwrap (equivalent root)    {:>9.3} ms", ms(bwrap));
        println!(
            "  ratio toolcage exec / bwrap = {:.2} (target <= 0.6)",
            ms(whole) / ms(bwrap)
        );
    } else {
        println!("  bwrap not installed: skipped (apt-get install bubblewrap)");
    }
    let version = measure(|| unshare_true(Command::new(exe).arg("--version")));
    println!(
        "  toolcage --version         {:>9.3} ms   start-up: +{:.3} ms over plain",
        ms(version),
        ms(version) - ms(plain)
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
