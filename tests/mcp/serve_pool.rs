//! `toolcage serve`'s pool of sandboxes prepared ahead (`--pool N`), over
//! MCP stdio: two calls never share a sandbox (their mount and PID
//! namespaces differ, a file one writes in its `/tmp` is absent in the
//! next; within one call it is there), and a pooled call is as confined
//! as a cold one (the project readable, a sibling directory not; only
//! its own processes in `/proc`). Each test also shows the pool was on:
//! the server holds ready inits between calls (none with `--pool 0`).
//! Namespace-free (`TOOLCAGE_TEST_NAMESPACE_FREE=1`) the pool is off and
//! the calls still share nothing.

use crate::{common, stdio_client};

use common::Project;
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::time::{Duration, Instant};
use stdio_client::Serve;

/// Prints its namespaces, whether the mark of an earlier call is in its
/// tmp, then writes the mark and checks it can read it back (the control).
/// With `me` and `peer`: first meets the peer call (each leaves a file in
/// the project and waits for the other's), so both are alive while they
/// read their namespaces (a namespace's inode number is unique only among
/// live ones: the kernel reuses a freed one).
const PROBE: &str = r#"#!/bin/sh
# @description Namespaces and tmp of this call.
# @param me string This call's name
# @param peer string The call to meet
if [ -n "$OCTOMIND_PARAM_ME" ]; then
  touch "./meet-$OCTOMIND_PARAM_ME"; n=0
  while [ ! -e "./meet-$OCTOMIND_PARAM_PEER" ] && [ $n -lt 300 ]; do sleep 0.1; n=$((n+1)); done
  [ -e "./meet-$OCTOMIND_PARAM_PEER" ] && echo "met=yes" || echo "met=no"
  sleep 0.5
fi
echo "mnt=$(readlink /proc/self/ns/mnt) pid=$(readlink /proc/self/ns/pid)"
t="${TMPDIR:-/tmp}"
if [ -e "$t/tc-pool-mark" ] || [ -e /tmp/tc-pool-mark ]; then echo "earlier=seen"; else echo "earlier=absent"; fi
f=$(mktemp "$t/tc-pool-XXXXXX") && echo "$$" > "$f" && mv "$f" "$t/tc-pool-mark"
echo "$$" > /tmp/tc-pool-mark 2>/dev/null
if [ -s "$t/tc-pool-mark" ]; then echo "own=visible"; else echo "own=missing"; fi
"#;

/// Reads a project file (the control), then `SECRET`, a file in a sibling
/// directory the grant does not name, then counts the processes it sees.
const ESCAPE: &str = r#"#!/bin/sh
# @description Try to leave the sandbox.
cat ./inside.txt
cat SECRET 2>/dev/null && echo "outside=read" || echo "outside=refused"
echo "procs=$(ls /proc | grep -c '^[0-9]')"
"#;

/// A project with `probe` and `escape` (reading `secret`).
fn project(tag: &str, secret: &std::path::Path) -> Project {
    common::namespace_free_if_asked();
    let p = Project::new(tag);
    let escape = ESCAPE.replace("SECRET", &format!("'{}'", secret.display()));
    for (name, body) in [("probe", PROBE), ("escape", escape.as_str())] {
        let f = p.write(&format!(".agents/tools/{name}"), body);
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    p.write("inside.txt", "inside\n");
    p
}

fn serve(p: &Project, pool: &str) -> Serve {
    let mut c = Command::new(env!("CARGO_BIN_EXE_toolcage"));
    c.arg("-C")
        .arg(&p.dir)
        .args(["serve", "--no-watch", "--pool", pool])
        .env("XDG_STATE_HOME", p.state_dir());
    Serve::spawn(c, None)
}

fn text(r: &Value) -> String {
    assert_eq!(r["result"]["isError"], false, "{r}");
    r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn field<'a>(out: &'a str, key: &str) -> &'a str {
    out.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in {out}"))
}

/// `/proc/<pid>/stat`'s parent and command name.
fn stat(pid: &str) -> Option<(String, String)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (open, close) = (s.find('(')?, s.rfind(')')?);
    let comm = s[open + 1..close].to_string();
    let ppid = s[close + 2..].split_whitespace().nth(1)?.to_string();
    Some((ppid, comm))
}

fn pids() -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        .collect()
}

/// The server serving `p` (our child, named by its `-C` argument).
fn server_pid(p: &Project) -> String {
    let me = std::process::id().to_string();
    let dir = p.dir.to_string_lossy().into_owned();
    pids()
        .into_iter()
        .find(|pid| {
            stat(pid).is_some_and(|(ppid, _)| ppid == me)
                && std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&dir))
        })
        .expect("the server process")
}

/// The pool's maker: the server's child named `toolcage-pool`.
fn makers(server: &str) -> Vec<String> {
    pids()
        .into_iter()
        .filter(|pid| {
            stat(pid).is_some_and(|(ppid, comm)| ppid == server && comm == "toolcage-pool")
        })
        .collect()
}

/// The ready sandboxes' inits: the maker's children, carrying its name
/// until their tool execs.
fn ready_inits(server: &str) -> usize {
    let makers = makers(server);
    pids()
        .iter()
        .filter(|pid| {
            stat(pid).is_some_and(|(ppid, comm)| makers.contains(&ppid) && comm == "toolcage-pool")
        })
        .count()
}

/// Wait (up to 20 s) until the server holds a ready init; whether it did.
fn wait_ready(server: &str) -> bool {
    wait_until(|| ready_inits(server) > 0)
}

/// Wait (up to 20 s) until `f` holds; whether it did.
fn wait_until(mut f: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(20) {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn two_pooled_calls_never_share_a_sandbox() {
    let p = project("pool-share", std::path::Path::new("/nonexistent"));
    let mut s = serve(&p, "2");
    let server = server_pid(&p);
    let ours = std::fs::read_link("/proc/self/ns/mnt").unwrap();
    for i in 0..4 {
        // The pool is on (it learns the grant from the first call); off
        // namespace-free, where nothing is prepared ahead.
        if i == 0 || common::namespace_free_run() {
            std::thread::sleep(Duration::from_millis(300));
            assert_eq!(ready_inits(&server), 0, "ready inits before call {i}");
        } else {
            assert!(wait_ready(&server), "no ready sandbox before call {i}");
        }
        let out = text(&s.request("tools/call", json!({"name": "probe", "arguments": {}})));
        // The control: within one call its own file is there.
        assert_eq!(field(&out, "own"), "visible", "{out}");
        // Across calls: never the earlier call's.
        assert_eq!(field(&out, "earlier"), "absent", "call {i}: {out}");
        if !common::namespace_free_run() {
            assert_ne!(field(&out, "mnt"), ours.to_string_lossy(), "{out}");
        }
    }
    if common::namespace_free_run() {
        return;
    }
    // Two calls alive at once, each in a ready sandbox: their namespaces.
    assert!(
        wait_until(|| ready_inits(&server) == 2),
        "the pool did not refill"
    );
    let a = s.start_call("probe", json!({"me": "a", "peer": "b"}));
    let b = s.start_call("probe", json!({"me": "b", "peer": "a"}));
    let a = text(&s.response(a));
    // An answer that came first was kept aside while waiting for `a`.
    let b = match s.notifications.iter().find(|v| v["id"] == json!(b)) {
        Some(v) => text(v),
        None => text(&s.response(b)),
    };
    for out in [&a, &b] {
        assert_eq!(field(out, "met"), "yes", "{out}");
        assert_eq!(field(out, "earlier"), "absent", "{out}");
    }
    assert_ne!(field(&a, "mnt"), field(&b, "mnt"), "{a}\n{b}");
    assert_ne!(field(&a, "pid"), field(&b, "pid"), "{a}\n{b}");
}

#[test]
fn the_pools_sandboxes_are_made_by_a_process_that_dies_with_the_server() {
    if common::namespace_free_run() {
        return; // nothing is prepared ahead namespace-free
    }
    let p = project("pool-maker", std::path::Path::new("/nonexistent"));
    let mut s = serve(&p, "2");
    let server = server_pid(&p);
    let out = text(&s.request("tools/call", json!({"name": "probe", "arguments": {}})));
    assert_eq!(field(&out, "earlier"), "absent", "{out}");
    assert!(wait_ready(&server), "no ready sandbox");
    // One maker, and the inits are its children, not the server's: the
    // server shares no memory with a waiting init.
    let makers = makers(&server);
    assert_eq!(makers.len(), 1, "{makers:?}");
    let inits: Vec<String> = pids()
        .into_iter()
        .filter(|pid| stat(pid).is_some_and(|(ppid, _)| ppid == makers[0]))
        .collect();
    assert!(!inits.is_empty());
    // A pooled call still works (the control for what follows).
    let out = text(&s.request("tools/call", json!({"name": "probe", "arguments": {}})));
    assert_eq!(field(&out, "own"), "visible", "{out}");
    // The server killed outright: the maker and every waiting init go too.
    let pid = nix::unistd::Pid::from_raw(server.parse().unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
    let alive = |p: &String| {
        std::fs::read_to_string(format!("/proc/{p}/stat"))
            .is_ok_and(|st| !st.contains(") Z ") && !st.contains(") X "))
    };
    let gone = wait_until(|| !alive(&makers[0]) && inits.iter().all(|i| !alive(i)));
    assert!(gone, "the maker or a ready init outlived the server");
    drop(s);
}

#[test]
fn a_pooled_call_answers_only_once_nothing_it_started_lives() {
    // The pooled call's answer comes as soon as the init reports, without
    // waiting for the namespaces' teardown: the init kills and reaps the
    // rest of the call before it reports. Both ways, with the pool and
    // without: a daemon the tool left is gone when the answer arrives.
    // (Were the init to report first, the kernel would still kill the
    // daemons a moment later: a regression shows as failures now and then,
    // not every run.)
    let p = project("pool-daemon", std::path::Path::new("/nonexistent"));
    let marker = format!("317.{:03}", std::process::id() % 1000);
    let f = p.write(
        ".agents/tools/daemon",
        &format!(
            "#!/bin/sh\n# @description Leave daemons behind.\n\
             for i in 1 2 3; do setsid sleep {marker} & done\n\
             kill -0 $! && echo alive\n"
        ),
    );
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
    for pool in ["2", "0"] {
        let mut s = serve(&p, pool);
        let server = server_pid(&p);
        for i in 0..4 {
            if pool != "0" && i > 0 && !common::namespace_free_run() {
                assert!(wait_ready(&server), "no ready sandbox before call {i}");
            }
            let out = text(&s.request("tools/call", json!({"name": "daemon", "arguments": {}})));
            // At once, no retry: the answer means they are gone.
            let alive = common::processes_naming(&marker);
            // The control: the daemons did start.
            assert_eq!(out.trim(), "alive", "pool {pool}, call {i}: {out}");
            assert_eq!(alive, Vec::<String>::new(), "pool {pool}, call {i}");
        }
    }
}

#[test]
fn without_the_pool_no_init_waits() {
    let p = project("pool-off", std::path::Path::new("/nonexistent"));
    let mut s = serve(&p, "0");
    let server = server_pid(&p);
    let out = text(&s.request("tools/call", json!({"name": "probe", "arguments": {}})));
    assert_eq!(field(&out, "earlier"), "absent", "{out}");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(ready_inits(&server), 0);
}

#[test]
fn a_pooled_call_is_confined_like_a_cold_one() {
    // Beside the project: outside every root of the default policy.
    let outside = std::env::temp_dir().join(format!("tc-pool-outside-{}", std::process::id()));
    std::fs::create_dir_all(&outside).unwrap();
    let secret = outside.join("secret.txt");
    std::fs::write(&secret, "secret\n").unwrap();
    // The control: the file is readable outside the sandbox.
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "secret\n");
    let host_procs = pids().len();
    let p = project("pool-escape", &secret);
    let mut s = serve(&p, "2");
    let server = server_pid(&p);
    let args = json!({"name": "escape", "arguments": {}});
    for i in 0..3 {
        if i > 0 && !common::namespace_free_run() {
            assert!(wait_ready(&server), "no ready sandbox before call {i}");
        }
        let out = text(&s.request("tools/call", args.clone()));
        assert!(out.starts_with("inside\n"), "{out}");
        assert_eq!(field(&out, "outside"), "refused", "{out}");
        let procs: usize = field(&out, "procs").parse().unwrap();
        if !common::namespace_free_run() {
            // Its own init, shell and ls (and a pipe's grep): not the
            // host's processes, not the other ready sandboxes'.
            assert!(procs <= 5 && procs < host_procs, "{out}");
        }
    }
    let _ = std::fs::remove_dir_all(&outside);
}

#[test]
fn a_call_never_takes_a_sandbox_prepared_for_another_grant() {
    common::namespace_free_if_asked();
    let p = Project::new("pool-key");
    // Outside the project: writable only where the policy adds it.
    let out = std::env::temp_dir().join(format!("tc-pool-key-out-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    for name in ["wide", "narrow"] {
        let f = p.write(
            &format!(".agents/tools/{name}"),
            &format!(
                "#!/bin/sh\n# @description Write outside the project.\n\
                 echo x > '{}/{name}.txt' 2>/dev/null && echo WROTE || echo REFUSED\n",
                out.display()
            ),
        );
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    p.write(
        "tc.toml",
        &format!("[tools.wide.fs]\nadd_write = [{out:?}]\n"),
    );
    let mut c = Command::new(env!("CARGO_BIN_EXE_toolcage"));
    c.arg("-C")
        .arg(&p.dir)
        .args(["serve", "--no-watch", "--pool", "2", "--policy"])
        .arg(p.path("tc.toml"))
        .env("XDG_STATE_HOME", p.state_dir());
    let mut s = Serve::spawn(c, None);
    let server = server_pid(&p);
    for i in 0..6 {
        if i >= 2 && !common::namespace_free_run() {
            // Both grants have sandboxes ready (or being made).
            assert!(wait_until(|| ready_inits(&server) == 2), "call {i}");
        }
        let (name, want) = match i % 2 {
            0 => ("wide", "WROTE"), // the control: its grant adds the dir
            _ => ("narrow", "REFUSED"),
        };
        let _ = std::fs::remove_file(out.join(format!("{name}.txt")));
        let r = text(&s.request("tools/call", json!({"name": name, "arguments": {}})));
        assert_eq!(r.lines().next(), Some(want), "call {i} of {name}: {r}");
        assert_eq!(out.join(format!("{name}.txt")).exists(), want == "WROTE");
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// The parent of `pid`, up to `levels` generations: whether `ancestor`
/// is among them.
fn descends_from(pid: &str, ancestor: &str, levels: usize) -> bool {
    let mut cur = pid.to_string();
    for _ in 0..levels {
        match stat(&cur) {
            Some((ppid, _)) if ppid == ancestor => return true,
            Some((ppid, _)) => cur = ppid,
            None => return false,
        }
    }
    false
}

#[test]
fn concurrent_calls_wait_for_the_maker_rather_than_start_in_the_server() {
    // More calls at once than sandboxes ready: the extra calls get theirs
    // from the maker too (made for them, waited for), none is started
    // from the server's own process. The control: with the pool off the
    // same calls do start from the server, and the test sees it.
    if common::namespace_free_run() {
        return; // nothing is prepared ahead namespace-free
    }
    let p = project("pool-wait", std::path::Path::new("/nonexistent"));
    let marker = format!("4.{:07}", std::process::id());
    let f = p.write(
        ".agents/tools/nap",
        "#!/bin/sh\n# @description Sleep a while.\n# @param secs string How long\n\
         sleep \"${OCTOMIND_PARAM_SECS:-0}\"\necho rested\n",
    );
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
    const CALLS: usize = 4;
    for (pool, from_maker) in [("1", CALLS), ("0", 0)] {
        let mut s = serve(&p, pool);
        let server = server_pid(&p);
        // A first call makes its grant wanted: one sandbox is then ready.
        let out = text(&s.request("tools/call", json!({"name": "nap", "arguments": {}})));
        assert_eq!(out.trim(), "rested");
        if pool != "0" {
            assert!(wait_ready(&server), "no ready sandbox");
        }
        let maker = makers(&server).pop().unwrap_or_default();
        let ids: Vec<u64> = (0..CALLS)
            .map(|_| s.start_call("nap", json!({"secs": marker})))
            .collect();
        // The calls' sleeps, once all are running: how many descend from
        // the maker (the rest from the server itself).
        let mut seen = None;
        let all_running = wait_until(|| {
            let naps = common::processes_naming(&marker);
            let under_maker = naps
                .iter()
                .filter(|n| !maker.is_empty() && descends_from(n, &maker, 4))
                .count();
            if naps.len() == CALLS {
                seen = Some(under_maker);
            }
            naps.len() == CALLS
        });
        assert!(
            all_running,
            "pool {pool}: the {CALLS} calls never ran at once"
        );
        assert_eq!(
            seen,
            Some(from_maker),
            "pool {pool}: calls in the maker's sandboxes"
        );
        for id in ids {
            let out = text(&s.response(id));
            assert_eq!(out.trim(), "rested", "pool {pool}: {out}");
        }
    }
}

#[test]
fn a_pooled_call_gets_the_path_a_cold_one_gets() {
    // The pool filters PATH when it builds a sandbox's root; the call in
    // it gets what a cold call gets: the readable entries, the others
    // dropped (here a directory outside every root of the policy).
    let outside = std::env::temp_dir().join(format!("tc-pool-path-{}", std::process::id()));
    std::fs::create_dir_all(&outside).unwrap();
    let p = project("pool-path", std::path::Path::new("/nonexistent"));
    let f = p.write(
        ".agents/tools/showpath",
        "#!/bin/sh\n# @description Print PATH.\necho \"$PATH\"\n",
    );
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
    let host_path = format!("/usr/bin:/bin:{}", outside.display());
    let args = json!({"name": "showpath", "arguments": {}});
    let mut answers = Vec::new();
    for pool in ["0", "2"] {
        let mut c = Command::new(env!("CARGO_BIN_EXE_toolcage"));
        c.arg("-C")
            .arg(&p.dir)
            .args(["serve", "--no-watch", "--pool", pool])
            .env("XDG_STATE_HOME", p.state_dir())
            .env("PATH", &host_path);
        let mut s = Serve::spawn(c, None);
        let server = server_pid(&p);
        answers.push(text(&s.request("tools/call", args.clone())));
        if pool != "0" && !common::namespace_free_run() {
            assert!(wait_ready(&server), "no ready sandbox");
        }
        answers.push(text(&s.request("tools/call", args.clone())));
    }
    let cold = &answers[0];
    assert_eq!(cold.trim(), "/usr/bin:/bin", "{host_path}");
    assert!(answers.iter().all(|a| a == cold), "{answers:?}");
    let _ = std::fs::remove_dir_all(&outside);
}

#[test]
fn a_cold_calls_init_is_reaped_after_its_answer() {
    // A cold call answers once the init reports (every other process of
    // the call gone), without waiting for the init's own exit; the init is
    // reaped apart. None is left behind as a zombie of the server.
    let p = project("pool-reap", std::path::Path::new("/nonexistent"));
    let mut s = serve(&p, "0");
    let server = server_pid(&p);
    for _ in 0..5 {
        let out = text(&s.request("tools/call", json!({"name": "probe", "arguments": {}})));
        assert_eq!(field(&out, "own"), "visible", "{out}");
    }
    let zombies = || {
        pids()
            .into_iter()
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|st| {
                    st.contains(") Z ") && stat(pid).is_some_and(|(ppid, _)| ppid == server)
                })
            })
            .count()
    };
    assert!(
        wait_until(|| zombies() == 0),
        "{} zombie(s) of the server",
        zombies()
    );
}
