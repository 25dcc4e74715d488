//! Escape suite, the operator's own files, through the binary as a user
//! runs it: the `--policy` file inside the writable project, toolcage's
//! state (audit log, rate limits) and runtime directories, host secrets
//! inside the default read roots, agent and editor config that runs
//! commands later, and rlimits lower than the policy's. Each attack has its
//! positive control.

mod common;

use common::Project;
use std::process::{Command, Output};

fn toolcage(project: &Project, envs: &[(&str, &str)], args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolcage"))
        .arg("-C")
        .arg(&project.dir)
        .args(args)
        .current_dir(&project.dir)
        .envs(envs.iter().copied())
        .output()
        .unwrap()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_policy_file_in_the_project_cannot_be_rewritten_by_the_call() {
    let p = Project::new("op-policy");
    let policy = p.write("build.toml", "[limits]\ntimeout = \"20s\"\n");
    let script = "echo '[network]' >> build.toml && echo WROTE || echo REFUSED; \
                  echo x >> notes.txt && echo NOTES";
    let o = toolcage(
        &p,
        &[],
        &["exec", "--policy", "build.toml", "--", "sh", "-c", script],
    );
    // Control: the rest of the project stays writable in the same call.
    assert_eq!(out(&o), "REFUSED\nNOTES", "{}", err(&o));
    assert_eq!(
        std::fs::read_to_string(&policy).unwrap(),
        "[limits]\ntimeout = \"20s\"\n"
    );
    // Without --policy naming it, the same file is just a project file.
    let o = toolcage(&p, &[], &["exec", "--", "sh", "-c", script]);
    assert_eq!(out(&o), "WROTE\nNOTES", "{}", err(&o));
}

#[test]
fn toolcage_state_is_not_visible_even_with_home_granted() {
    let p = Project::new("op-state");
    let home = p.state_dir().with_extension("home");
    let state = home.join(".local/state/toolcage/abc");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(state.join("ratelimit.json"), "{}").unwrap();
    std::fs::write(home.join("visible.txt"), "yes\n").unwrap();
    let home_s = home.to_str().unwrap();
    let envs = [("HOME", home_s)];
    let o = toolcage(
        &p,
        &envs,
        &[
            "exec",
            "--write",
            home_s,
            "--",
            "sh",
            "-c",
            &format!(
                "cat '{home_s}/visible.txt'; chmod 666 '{home_s}/.local/state/toolcage/abc/ratelimit.json' \
                 && echo CHANGED || echo REFUSED"
            ),
        ],
    );
    assert_eq!(out(&o), "yes\nREFUSED", "{}", err(&o));
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(state.join("ratelimit.json"))
            .unwrap()
            .permissions(),
    );
    assert_ne!(mode & 0o777, 0o666);
    let _ = std::fs::remove_dir_all(&home);
}

#[test]
fn an_audit_log_moved_into_a_read_root_is_not_readable_by_calls() {
    let p = Project::new("op-audit");
    let tool = p.write(
        ".agents/tools/keep",
        "#!/bin/sh\n# @description Keep a value\n# @param *value string The value\ntrue\n",
    );
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let logs = p.state_dir().with_extension("logs");
    std::fs::create_dir_all(&logs).unwrap();
    std::fs::write(logs.join("other.txt"), "readable\n").unwrap();
    let log = logs.join("audit.jsonl");
    let policy = p.state_dir().with_extension("policy.toml");
    std::fs::write(&policy, format!("[audit]\npath = \"{}\"\n", log.display())).unwrap();
    let (pol, logs_s) = (policy.to_str().unwrap(), logs.to_str().unwrap());
    let state = p.state_dir();
    let envs = [("XDG_STATE_HOME", state.to_str().unwrap())];
    let o = toolcage(
        &p,
        &envs,
        &["call", "--policy", pol, "keep", "value=the-secret-argument"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("the-secret-argument")
    );
    // A call granted the directory reads the rest of it, not the log.
    let script = format!(
        "cat '{logs_s}/other.txt'; grep -q the-secret-argument '{log}' && echo SEEN || echo HIDDEN",
        log = log.display()
    );
    let o = toolcage(
        &p,
        &envs,
        &[
            "exec", "--policy", pol, "--read", logs_s, "--", "sh", "-c", &script,
        ],
    );
    assert_eq!(out(&o), "readable\nHIDDEN", "{}", err(&o));
    // Control: a policy that keeps the log elsewhere leaves the file an
    // ordinary one the same grant reads.
    let o = toolcage(
        &p,
        &envs,
        &["exec", "--read", logs_s, "--", "sh", "-c", &script],
    );
    assert_eq!(out(&o), "readable\nSEEN", "{}", err(&o));
    let _ = std::fs::remove_dir_all(&logs);
    let _ = std::fs::remove_file(&policy);
}

#[test]
fn host_secrets_in_etc_are_denied_by_default() {
    let p = Project::new("op-secrets");
    let o = toolcage(
        &p,
        &[],
        &[
            "exec",
            "--",
            "sh",
            "-c",
            "head -c 4 /etc/passwd >/dev/null && echo PASSWD; cat /etc/shadow >/dev/null 2>&1 && echo SHADOW; \
             ls /etc/ssh/ 2>/dev/null | grep -c '_key$' | grep -q '^0$' || for k in /etc/ssh/ssh_host_*_key; do cat \"$k\" >/dev/null 2>&1 && echo KEY; done; true",
        ],
    );
    assert_eq!(out(&o), "PASSWD", "{}", err(&o));
}

#[test]
fn agent_and_editor_config_is_read_only() {
    let p = Project::new("op-agentcfg");
    p.write(".claude/settings.json", "{}");
    p.write(".vscode/tasks.json", "{}");
    p.write(".envrc", "export A=1\n");
    p.write("src/main.c", "int main(){}\n");
    let o = toolcage(
        &p,
        &[],
        &[
            "exec",
            "--",
            "sh",
            "-c",
            "for f in .claude/settings.json .vscode/tasks.json .envrc src/main.c; do \
               (echo '#x' >> $f) 2>/dev/null && echo \"W $f\" || echo \"R $f\"; done",
        ],
    );
    assert_eq!(
        out(&o),
        "R .claude/settings.json\nR .vscode/tasks.json\nR .envrc\nW src/main.c",
        "{}",
        err(&o)
    );
}

#[test]
fn a_lower_hard_limit_is_kept_not_an_error() {
    // CI containers often run with `ulimit -n` lower than the policy's 1024.
    let p = Project::new("op-rlimit");
    let exe = env!("CARGO_BIN_EXE_toolcage");
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -Sn 512 && ulimit -Hn 512 && exec {exe} -C . exec --json -- sh -c 'ulimit -n'"
        ))
        .current_dir(&p.dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(out(&o), "512");
    assert!(
        err(&o).contains("lowered to the inherited hard limit 512"),
        "{}",
        err(&o)
    );
    // Control: without the lower limit the policy's value applies.
    let o = toolcage(&p, &[], &["exec", "--", "sh", "-c", "ulimit -n"]);
    assert_eq!(out(&o), "1024", "{}", err(&o));
}

#[test]
fn an_absent_tool_file_stays_absent_after_the_call() {
    let p = Project::new("op-absent");
    let o = toolcage(
        &p,
        &[],
        &[
            "exec",
            "--",
            "sh",
            "-c",
            "echo '{\"mcpServers\":{}}' > .mcp.json && mkdir -p .agents/tools && echo ok > out.txt",
        ],
    );
    assert!(o.status.success(), "{}", err(&o));
    assert!(!p.path(".mcp.json").exists(), ".mcp.json was left behind");
    assert!(!p.path(".agents").exists(), ".agents was left behind");
    assert!(err(&o).contains("moved it aside to"), "{}", err(&o));
    // Control: the ordinary output of the same call is kept.
    assert_eq!(std::fs::read_to_string(p.path("out.txt")).unwrap(), "ok\n");
}
