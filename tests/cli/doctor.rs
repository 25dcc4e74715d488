//! `toolcage doctor` on this machine (the positive control: namespaces and
//! a recent Landlock, exit 0) and in a simulated container whose seccomp
//! profile refuses namespaces (exit 1, the cause named), as root and as an
//! unprivileged user.

use crate::common;

use common::Project;
use common::without_namespaces;
use serde_json::Value;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output};

/// The Landlock ABI from which `default` and `ci` lack nothing
/// uncompensated (truncate, ABI 3, is the last gap with no other layer).
const NEEDED_ABI: i32 = 3;

/// The unprivileged user `tests/unprivileged.sh` creates.
const TEST_USER: &str = "toolcage-test";

fn doctor(project: &Project, json: bool, setup: impl FnOnce(&mut Command)) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolcage"));
    cmd.arg("-C").arg(&project.dir).arg("doctor");
    if json {
        cmd.arg("--json");
    }
    cmd.current_dir(&project.dir);
    setup(&mut cmd);
    cmd.output().unwrap()
}

fn parse(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "doctor --json printed no JSON ({e}):\n{}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

fn profile<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no profile {name} in {report:#}"))
}

/// Run as [`TEST_USER`] when root (created as `tests/unprivileged.sh`
/// does, if missing); as ourselves when not root (already unprivileged).
/// `None` when the user cannot be had.
fn as_unprivileged() -> Option<impl Fn(&mut Command)> {
    let me = nix::unistd::geteuid();
    let ids = if me.is_root() {
        let lookup = || nix::unistd::User::from_name(TEST_USER).ok().flatten();
        if lookup().is_none() {
            let _ = Command::new("useradd")
                .args(["--no-create-home", "--shell", "/bin/sh", TEST_USER])
                .status();
        }
        let user = lookup()?;
        Some((user.uid.as_raw(), user.gid.as_raw()))
    } else {
        None
    };
    Some(move |cmd: &mut Command| {
        if let Some((uid, gid)) = ids {
            cmd.uid(uid).gid(gid);
        }
    })
}

/// A project the unprivileged user can enter.
fn open_project(tag: &str) -> Project {
    use std::os::unix::fs::PermissionsExt;
    let p = Project::new(tag);
    std::fs::set_permissions(&p.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn assert_runs_fully_here(o: &Output, o_json: &Output, who: &str) {
    let text = String::from_utf8_lossy(&o.stdout);
    let report = parse(o_json);
    assert_eq!(report["namespaces"]["available"], true, "{who}: {report:#}");
    assert!(report["namespaces"]["blocked"].is_null(), "{who}");
    assert!(text.contains("namespaces  available"), "{who}: {text}");
    let abi = report["landlock"]["abi"].as_i64().unwrap() as i32;
    assert_eq!(abi, toolcage::sandbox::kernel_abi());
    for name in ["default", "untrusted", "ci", "network"] {
        assert_eq!(profile(&report, name)["mode"], "namespaces", "{who} {name}");
    }
    if abi >= NEEDED_ABI {
        assert_eq!(o.status.code(), Some(0), "{who}: {text}");
        assert_eq!(o_json.status.code(), Some(0), "{who}");
        assert_eq!(report["runs_fully"], true, "{who}");
        for name in ["default", "ci"] {
            let p = profile(&report, name);
            assert_eq!(p["status"], "runs_fully", "{who}: {p:#}");
            assert_eq!(p["landlock"], "fully_enforced", "{who}: {p:#}");
        }
        assert!(text.contains("default and ci run fully here"), "{text}");
        assert_shared_once(&text, &report);
    } else {
        assert_eq!(o.status.code(), Some(1), "{who}: ABI {abi} lacks truncate");
    }
}

fn assert_container_blocks(o: &Output, o_json: &Output, who: &str) {
    let text = String::from_utf8_lossy(&o.stdout);
    let report = parse(o_json);
    assert_eq!(o.status.code(), Some(1), "{who}: {text}");
    assert_eq!(o_json.status.code(), Some(1), "{who}");
    assert_eq!(report["seccomp"]["filtered"], true, "{who}: {report:#}");
    assert_eq!(report["seccomp"]["no_new_privs"], true, "{who}");
    let ns = &report["namespaces"];
    assert_eq!(ns["available"], false, "{who}: {ns:#}");
    assert_eq!(ns["blocked"]["cause"], "container_seccomp", "{who}: {ns:#}");
    assert_eq!(ns["blocked"]["errno"], libc::EPERM, "{who}: {ns:#}");
    let message = ns["blocked"]["message"].as_str().unwrap();
    assert!(message.contains("--security-opt seccomp="), "{message}");
    assert!(!message.contains('\n'), "{message}");
    assert_eq!(report["runs_fully"], false, "{who}");
    for name in ["default", "ci"] {
        let p = profile(&report, name);
        assert_eq!(p["mode"], "namespace-free", "{who}: {p:#}");
        assert_eq!(p["runs_fully"], false, "{who}: {p:#}");
    }
    assert!(text.contains("namespaces  blocked"), "{who}: {text}");
    assert!(
        text.contains("seccomp profile refuses namespaces"),
        "{text}"
    );
    assert!(text.contains("does not run fully here"), "{text}");
    // ci accepts its two gaps (constructed root, private /proc): said so,
    // not shown as if they broke it.
    let ci_block: String = text
        .lines()
        .skip_while(|l| !l.starts_with("profile ci"))
        .skip(1)
        .take_while(|l| l.starts_with(' '))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(ci_block.contains("this profile accepts it"), "{text}");
    assert_shared_once(&text, &report);
    // The namespace-free report fits a screen.
    assert!(
        text.lines().count() <= 26,
        "{} lines: {text}",
        text.lines().count()
    );
}

/// A gap every profile has, compensated the same way, is said once, after
/// the profiles; the JSON (the control) still lists it under each of them.
fn assert_shared_once(text: &str, report: &Value) {
    let profiles = report["profiles"].as_array().unwrap();
    let gaps = |p: &Value| -> Vec<(String, Value)> {
        p["lacking"]
            .as_array()
            .map(|l| {
                l.iter()
                    .map(|x| {
                        (
                            x["part"].as_str().unwrap().to_string(),
                            x["compensated_by"].clone(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let Some(first) = profiles.first() else {
        return;
    };
    for (part, by) in gaps(first) {
        if by.is_null()
            || !profiles
                .iter()
                .all(|p| gaps(p).contains(&(part.clone(), by.clone())))
        {
            continue;
        }
        let name = part.split(" (").next().unwrap();
        assert_eq!(text.matches(name).count(), 1, "{name}: {text}");
        assert!(text.contains("every profile lacks"), "{text}");
    }
}

#[test]
fn runs_fully_on_this_machine() {
    let p = open_project("doctor-here");
    let o = doctor(&p, false, |_| {});
    let j = doctor(&p, true, |_| {});
    assert_runs_fully_here(&o, &j, "this user");
}

#[test]
fn names_a_containers_seccomp_profile_and_exits_1() {
    let p = open_project("doctor-container");
    let o = doctor(&p, false, without_namespaces);
    let j = doctor(&p, true, without_namespaces);
    assert_container_blocks(&o, &j, "this user");
}

#[test]
fn unprivileged_user_here_and_in_a_container() {
    let Some(user) = as_unprivileged() else {
        eprintln!("skipped: no user {TEST_USER} and useradd failed");
        return;
    };
    let p = open_project("doctor-user");
    let o = doctor(&p, false, &user);
    let j = doctor(&p, true, &user);
    assert_runs_fully_here(&o, &j, TEST_USER);
    assert_eq!(parse(&j)["root"], false);
    assert!(
        parse(&j)["namespaces"]["kinds"]
            .as_array()
            .unwrap()
            .contains(&"user".into())
    );
    let in_container = |cmd: &mut Command| {
        user(cmd);
        without_namespaces(cmd);
    };
    let o = doctor(&p, false, in_container);
    let j = doctor(&p, true, in_container);
    assert_container_blocks(&o, &j, TEST_USER);
}

/// The failure a call sees in such a container names the same cause
/// (unless the call ran namespace-free: then it must succeed).
#[test]
fn exec_in_a_container_names_the_cause() {
    let p = open_project("doctor-exec");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolcage"));
    cmd.arg("-C").arg(&p.dir).args(["exec", "--", "true"]);
    cmd.current_dir(&p.dir);
    without_namespaces(&mut cmd);
    let o = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    match o.status.code() {
        Some(0) => {}
        Some(125) => {
            assert!(
                err.contains("seccomp profile refuses namespaces") && err.lines().count() == 1,
                "the error names the cause in one line: {err}"
            );
            assert!(!err.contains("os error"), "{err}");
        }
        other => panic!("exit {other:?}: {err}"),
    }
}
