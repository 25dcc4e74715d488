//! Escape suite, process tree and resources: daemons, double forks and fork
//! bombs must not outlive the call; memory, CPU, output and stdin floods are
//! bounded. Each attack has its control: the same action outside the
//! sandbox survives (so the survivor scan can see it), or the same action
//! within the limit succeeds.

use crate::common;
use crate::escape_support;

use common::*;
use escape_support::*;
use std::time::{Duration, Instant};
use toolcage::sandbox::{self, Command, Exit};

/// Control for the survivor scan: the same detached `sleep` started outside
/// the sandbox is alive after its parent exits.
fn outside_survives(script: &str, m: &str) {
    let st = std::process::Command::new("/bin/sh")
        .args(["-c", script])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let mut alive = alive_with(m);
    for _ in 0..100 {
        if !alive.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        alive = alive_with(m);
    }
    assert!(
        !alive.is_empty(),
        "control: the unsandboxed daemon must survive"
    );
    for pid in alive {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
}

#[test]
fn setsid_daemon_dies_with_the_call() {
    let m = marker(11);
    let script = format!("setsid sleep {m} </dev/null >/dev/null 2>&1 &");
    outside_survives(&script, &m);
    let p = Project::new("tree-setsid");
    let o = sh(&default_grant(&p.dir), &script);
    assert!(o.exit.success(), "{}", describe(&o));
    assert_eq!(survivors(&m), Vec::<i32>::new());
}

#[test]
fn double_fork_dies_with_the_call() {
    let m = marker(12);
    let script = format!("(sh -c 'sleep {m} </dev/null >/dev/null 2>&1 &' &)");
    outside_survives(&script, &m);
    let p = Project::new("tree-double");
    let start = Instant::now();
    let o = sh(&default_grant(&p.dir), &script);
    assert!(o.exit.success(), "{}", describe(&o));
    // The detached sleeper lives 300 s: a call that waited for it would
    // take that long. (A tight bound would only measure the machine.)
    assert!(start.elapsed() < Duration::from_secs(60));
    assert_eq!(survivors(&m), Vec::<i32>::new());
}

#[test]
fn fork_bombs_end_with_the_timeout() {
    let m = marker(13);
    let p = Project::new("tree-bomb");
    let mut g = default_grant(&p.dir);
    g.timeout = Duration::from_millis(800);
    g.kill_grace = Duration::from_millis(100);
    g.limits.processes = Some(256);
    // Linear: an endless stream of detached sleepers.
    let start = Instant::now();
    let o = sh(&g, &format!("while :; do setsid sleep {m} & done"));
    if is_root() {
        // RLIMIT_NPROC does not apply to root: only the timeout stops it.
        assert_eq!(o.exit, Exit::Timeout);
    } else {
        // An ordinary user's fork fails at the process limit first.
        assert!(matches!(o.exit, Exit::Timeout | Exit::Code(_)), "{o:?}");
    }
    assert_eq!(survivors(&m), Vec::<i32>::new());
    // Exponential: every process forks two more.
    let o = sh(&g, &format!("f() {{ sleep {m} & f | f & }}; f; wait"));
    assert!(matches!(o.exit, Exit::Timeout | Exit::Code(_)), "{o:?}");
    assert_eq!(survivors(&m), Vec::<i32>::new());
    // The sleepers live 313 s: calls that waited for them would take that
    // long. Not tighter: as root no process limit applies, so the bomb's
    // size, and the kernel's teardown of it, grow with the machine's cores
    // and load (CI once took over 20 s).
    assert!(start.elapsed() < Duration::from_secs(150));
    // Control: the same loop, bounded, runs to completion.
    let o = sh(
        &g,
        "i=0; while [ $i -lt 20 ]; do (true) & i=$((i+1)); done; wait; echo done",
    );
    assert_eq!(o.stdout.text.trim(), "done", "{}", describe(&o));
}

#[test]
fn memory_bomb_hits_the_address_space_limit() {
    let p = Project::new("tree-mem");
    let mut g = default_grant(&p.dir);
    let code = "t(lambda: len(bytearray(1 << 30)))";
    g.limits.address_space = Some(4 << 30);
    assert_ok(&py(&g, code), "1 GiB under a 4 GiB limit");
    g.limits.address_space = Some(512 << 20);
    let o = py(&g, code);
    assert!(
        !o.stdout.text.contains("OK") && o.stderr.text.contains("MemoryError"),
        "{}",
        describe(&o)
    );
}

#[test]
fn cpu_spin_is_stopped_by_the_cpu_limit() {
    let p = Project::new("tree-cpu");
    let mut g = default_grant(&p.dir);
    g.limits.cpu_seconds = Some(1);
    g.timeout = Duration::from_secs(15);
    // Control: a short spin finishes within the limit.
    let o = py(
        &g,
        "e = time.process_time() + 0.2\nwhile time.process_time() < e: pass\nt(lambda: None)",
    );
    assert_ok(&o, "short spin");
    let o = py(&g, "while True: pass");
    // SIGXCPU at the limit (SIGKILL only after a grace), and the result
    // says what ended it.
    assert_eq!(o.exit, Exit::Signal(libc::SIGXCPU), "{}", describe(&o));
    assert!(
        o.denials
            .iter()
            .any(|d| d.layer == "limits" && d.op == "cpu"),
        "{:?}",
        o.denials
    );
}

#[test]
fn output_flood_is_capped_and_counted() {
    let p = Project::new("tree-flood");
    let g = default_grant(&p.dir);
    let o = sh(&g, "echo small; echo small-err >&2");
    assert_eq!(
        (o.stdout.text.as_str(), o.stdout.bytes_omitted),
        ("small\n", 0)
    );
    let o = sh(
        &g,
        "head -c 50000000 /dev/zero; head -c 3000000 /dev/zero >&2",
    );
    assert!(o.exit.success(), "{o:?}");
    assert_eq!(o.stdout.bytes_kept, 64 * 1024);
    assert_eq!(o.stdout.bytes_omitted, 50_000_000 - 64 * 1024);
    assert_eq!(o.stderr.bytes_kept, 16 * 1024);
    assert_eq!(o.stderr.bytes_omitted, 3_000_000 - 16 * 1024);
    assert!(o.stdout.with_marker().trim_end().ends_with(&format!(
        "[OUTPUT TRUNCATED: {} bytes omitted]",
        50_000_000 - 64 * 1024
    )));
}

#[test]
fn stdin_flood_neither_blocks_nor_is_lost() {
    let p = Project::new("tree-stdin");
    let g = default_grant(&p.dir);
    let input = vec![b'x'; 10 << 20];
    let run = |script: &str| {
        let cmd = Command {
            argv: vec!["/bin/sh".into(), "-c".into(), script.into()],
            stdin: input.clone(),
            ..Default::default()
        };
        sandbox::run(&g, &cmd, None).unwrap()
    };
    // A reader gets every byte, even while it floods stdout at the same time.
    let o = run("{ tee /dev/fd/3 | wc -c >&2; } 3>&1");
    assert_eq!(o.stderr.text.trim(), (10u64 << 20).to_string(), "{o:?}");
    assert_eq!(o.stdout.bytes_kept + o.stdout.bytes_omitted, 10 << 20);
    // A tool that never reads stdin still returns at once.
    let start = Instant::now();
    let o = run("echo ignored");
    assert_eq!(o.stdout.text, "ignored\n");
    // Blocked on the unread stdin, it would end only at its timeout.
    assert!(
        o.exit.success(),
        "{} after {:?}",
        describe(&o),
        start.elapsed()
    );
}
