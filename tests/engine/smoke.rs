use crate::common;
use common::*;

#[test]
fn echo_runs() {
    let p = Project::new("smoke");
    let g = default_grant(&p.dir);
    let o = sh(&g, "echo hello; echo err >&2; pwd; exit 3");
    println!("{o:#?}");
    assert_eq!(o.stdout.text, format!("hello\n{}\n", p.dir.display()));
}

#[test]
fn exit_codes_and_signals_reach_the_caller() {
    let p = Project::new("signals");
    let g = default_grant(&p.dir);
    assert_eq!(sh(&g, "exit 7").exit, toolcage::sandbox::Exit::Code(7));
    // The tool is not the namespace init, so default signal actions apply.
    assert_eq!(
        sh(&g, "kill -TERM $$").exit,
        toolcage::sandbox::Exit::Signal(15)
    );
    let o = sh(&g, "yes | head -c 5");
    assert_eq!(
        o.stdout.text,
        "yyyyy"
            .replace('y', "y\n")
            .chars()
            .take(5)
            .collect::<String>()
    );
}

#[test]
fn timeout_sends_sigterm_first_then_kills_everything() {
    let p = Project::new("timeout");
    let mut g = default_grant(&p.dir);
    g.timeout = std::time::Duration::from_millis(300);
    g.kill_grace = std::time::Duration::from_secs(20);
    let start = std::time::Instant::now();
    let o = sh(
        &g,
        "trap 'echo got-term; exit 0' TERM; setsid sleep 1000 & sleep 1000 & wait",
    );
    assert_eq!(o.exit, toolcage::sandbox::Exit::Timeout);
    assert!(o.stdout.text.contains("got-term"), "{o:?}");
    // The sleepers ended with the forwarded SIGTERM, not the SIGKILL after
    // the grace.
    assert!(start.elapsed() < std::time::Duration::from_secs(15));
}
