//! Escape suite, the operator's own files, through the binary as a user
//! runs it: the `--policy` file inside the writable project, toolcage's
//! state (audit log, rate limits) and runtime directories, host secrets
//! inside the default read roots, agent and editor config that runs
//! commands later, rlimits lower than the policy's, and what toolcage does
//! about protected paths after a call (the quarantine, namespace-free
//! restoring, who is blamed). Each attack has its positive control.

use crate::common;
use crate::common::{stderr as err, stdout_trimmed as out};

use common::{Project, namespace_free_run};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

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

/// `toolcage -C <project> ARGS` with its state beside the project, stdin
/// closed; namespace-free (a container-like filter refuses namespaces) when
/// the suite runs so.
fn toolcage_cmd(p: &Project, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolcage"));
    cmd.arg("-C")
        .arg(&p.dir)
        .args(args)
        .current_dir(&p.dir)
        .env("XDG_STATE_HOME", p.state_dir())
        .stdin(Stdio::null());
    if namespace_free_run() {
        common::without_namespaces(&mut cmd);
    }
    cmd
}

fn exec_sh(p: &Project, script: &str) -> Output {
    toolcage_cmd(p, &["exec", "--", "sh", "-c", script])
        .output()
        .unwrap()
}

/// `git status` in `dir` as a person would run it, outside any sandbox;
/// never looks above `dir`'s parent for a repository.
fn git_status(dir: &Path) -> Output {
    Command::new("git")
        .arg("status")
        .current_dir(dir)
        .env("GIT_CEILING_DIRECTORIES", dir.parent().unwrap())
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .output()
        .unwrap()
}

/// The quarantine directories toolcage made in `dir`.
fn quarantines(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".toolcage-quarantine-")
        })
        .map(|e| e.path())
        .collect();
    found.sort();
    found
}

#[test]
fn a_created_git_cannot_stay_by_taking_every_quarantine_name() {
    // The call makes a repository where the project has none, with a
    // core.fsmonitor that the next `git status` would run outside the
    // sandbox, and first takes every name toolcage used to move such a path
    // aside to (`.git.quarantined-by-toolcage-<secs>[-N]`, 100 per second).
    let p = Project::new("op-qnames");
    let mark = p.dir.with_extension("fsmonitor-ran");
    let _ = std::fs::remove_file(&mark);
    let script = format!(
        "now=$(date +%s); names=''; s=$((now-2)); \
         while [ $s -le $((now+15)) ]; do \
           names=\"$names .git.quarantined-by-toolcage-$s\"; n=1; \
           while [ $n -le 99 ]; do names=\"$names .git.quarantined-by-toolcage-$s-$n\"; n=$((n+1)); done; \
           s=$((s+1)); \
         done; \
         mkdir $names && git init -q . && git config core.fsmonitor 'touch \"{mark}\"; false' \
         && echo made > work.txt && echo PLANTED",
        mark = mark.display()
    );
    let o = exec_sh(&p, &script);
    assert_eq!(out(&o), "PLANTED", "{}", err(&o));
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(
        p.path(".git").symlink_metadata().is_err(),
        "the planted .git stayed in the project: {}",
        err(&o)
    );
    let q = quarantines(&p.dir);
    assert_eq!(q.len(), 1, "{q:?}");
    assert!(
        err(&o).contains(&format!(
            "moved it aside to {}",
            q[0].join(".git").display()
        )),
        "the person is told where it went: {}",
        err(&o)
    );
    // git finds no repository in the project: nothing runs.
    let st = git_status(&p.dir);
    assert!(
        !st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stdout)
    );
    assert!(!mark.exists(), "git ran the planted fsmonitor");
    // Control: the planted repository is live where toolcage put it (git
    // used there runs the hook), and the call's ordinary output stayed.
    git_status(&q[0]);
    assert!(mark.exists(), "control: the planted fsmonitor runs");
    assert_eq!(
        std::fs::read_to_string(p.path("work.txt")).unwrap(),
        "made\n"
    );
    let _ = std::fs::remove_file(&mark);
}

#[test]
fn namespace_free_git_config_is_restored_whatever_else_git_holds() {
    // More than namespace-free mode's copy budget in files sorted before
    // `config`: the person's own, and more the first call leaves there.
    let p = Project::new("op-budget");
    let mark = p.dir.with_extension("fsmonitor-ran");
    let _ = std::fs::remove_file(&mark);
    let init = Command::new("git")
        .args(["init", "-q", "."])
        .current_dir(&p.dir)
        .status()
        .unwrap();
    assert!(init.success());
    let config = std::fs::read_to_string(p.path(".git/config")).unwrap();
    // 32 MiB and 4 MiB more: eight files of 4 MiB, then one of each power
    // of two below, so that copying in path order spends the budget to the
    // last byte whatever `.git/HEAD` took.
    let mut sizes = vec![4usize << 20; 8];
    sizes.extend((0..22).rev().map(|b| 1usize << b));
    std::fs::create_dir(p.path(".git/aaa")).unwrap();
    for (n, size) in sizes.into_iter().enumerate() {
        std::fs::write(p.path(&format!(".git/aaa/{n:02}")), vec![b'x'; size]).unwrap();
    }
    let listing = |dir: &Path| {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let before = listing(&p.path(".git"));
    let o = exec_sh(
        &p,
        "mkdir -p .git/aab; for n in 0 1 2 3 4 5 6 7 8; do \
           head -c 4194304 /dev/zero > .git/aab/$n 2>/dev/null; done; echo kept > work.txt",
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    if namespace_free_run() {
        assert!(err(&o).contains("namespace-free"), "{}", err(&o));
    }
    assert_eq!(
        listing(&p.path(".git")),
        before,
        "what the call left in .git stays for the next call to hide behind"
    );
    let o = exec_sh(
        &p,
        &format!(
            "git config core.fsmonitor 'touch \"{}\"; false' 2>/dev/null; echo ok >> work.txt",
            mark.display()
        ),
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert_eq!(
        std::fs::read_to_string(p.path(".git/config")).unwrap(),
        config,
        "{}",
        err(&o)
    );
    git_status(&p.dir);
    assert!(!mark.exists(), "git ran the planted fsmonitor");
    // Control: writes outside protected paths persist, and git in this
    // repository does run an fsmonitor that is configured.
    assert_eq!(
        std::fs::read_to_string(p.path("work.txt")).unwrap(),
        "kept\nok\n"
    );
    let st = Command::new("git")
        .arg("-c")
        .arg(format!(
            "core.fsmonitor=touch \"{}\"; false",
            mark.display()
        ))
        .arg("status")
        .current_dir(&p.dir)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    assert!(mark.exists(), "control: git runs a configured fsmonitor");
    let _ = std::fs::remove_file(&mark);
}

#[test]
fn a_host_change_during_the_call_is_not_blamed_on_it() {
    // A denied file in a read root, replaced on the host while the call
    // runs (as `useradd` replaces /etc/shadow): the call cannot reach it.
    let p = Project::new("op-hostchange");
    let host = p.dir.with_extension("host");
    std::fs::create_dir_all(&host).unwrap();
    let secret = host.join("secret");
    std::fs::write(&secret, "old").unwrap();
    let policy = p.dir.with_extension("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[fs]\nadd_read = [\"{h}\"]\nadd_denied = [\"{h}/secret\"]\n",
            h = host.display()
        ),
    )
    .unwrap();
    // Control in the same call: a protected path the call creates itself.
    let script = "touch started; while [ ! -e go ]; do sleep 0.1; done; echo x > .envrc; echo DONE";
    let child = toolcage_cmd(
        &p,
        &[
            "exec",
            "--policy",
            policy.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            script,
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut waited = 0;
    while !p.path("started").exists() {
        assert!(waited < 3000, "the call never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
        waited += 1;
    }
    std::fs::write(host.join("secret.new"), "new").unwrap();
    std::fs::rename(host.join("secret.new"), &secret).unwrap();
    std::fs::write(p.path("go"), "").unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(out(&o), "DONE", "{}", err(&o));
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(
        !err(&o).contains(&secret.display().to_string()),
        "a change the call could not make is blamed on it: {}",
        err(&o)
    );
    assert!(
        err(&o).contains(&format!(
            "the command created protected path {}",
            p.path(".envrc").display()
        )),
        "control: what the call itself did is reported: {}",
        err(&o)
    );
    let _ = std::fs::remove_dir_all(&host);
    let _ = std::fs::remove_file(&policy);
}

#[test]
fn a_change_toolcage_cannot_undo_fails_the_call() {
    // A pack file over namespace-free mode's 4 MiB copy limit: a change to
    // it cannot be put back, so the call fails (125) saying which file.
    let p = Project::new("op-notundone");
    p.write(".git/config", "[core]\n");
    let pack = p.path(".git/objects/pack/big.pack");
    std::fs::create_dir_all(pack.parent().unwrap()).unwrap();
    std::fs::write(&pack, vec![b'p'; 5 << 20]).unwrap();
    let o = exec_sh(
        &p,
        "(echo x >> .git/objects/pack/big.pack) 2>/dev/null; echo ran",
    );
    assert_eq!(out(&o), "ran", "{}", err(&o));
    if namespace_free_run() {
        assert_eq!(o.status.code(), Some(125), "{}", err(&o));
        assert!(
            err(&o).contains(&format!(
                "the call changed protected path {} and toolcage could not undo it",
                pack.display()
            )),
            "{}",
            err(&o)
        );
    } else {
        // With namespaces the write itself is refused.
        assert_eq!(o.status.code(), Some(0), "{}", err(&o));
        assert_eq!(std::fs::metadata(&pack).unwrap().len(), 5 << 20);
    }
    // Control: a change toolcage can undo (a small file it copied) is
    // undone and the call succeeds.
    let o = exec_sh(&p, "(echo '[alias]' >> .git/config) 2>/dev/null; echo ran");
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert_eq!(
        std::fs::read_to_string(p.path(".git/config")).unwrap(),
        "[core]\n"
    );
}
