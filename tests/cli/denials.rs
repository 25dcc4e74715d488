//! Denials in results: what the sandbox refused a tool, classified against
//! its grant with the flag that would grant it, in `call --json`, in the
//! result text, and on stderr with `--explain`. Each class with its
//! control: the same tool with the grant succeeds and reports no denial.

use crate::common;

use common::{Project, toolcage};
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

/// A host directory outside every default root (and outside /tmp, which
/// every call has privately).
struct Outside(PathBuf);

impl Outside {
    fn new(tag: &str) -> Outside {
        let d = PathBuf::from(format!("/var/tmp/tc-denials-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("data"), "secret-data\n").unwrap();
        Outside(d)
    }
    fn s(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tool(p: &Project, script: &str) {
    let f = p.write(
        ".agents/tools/t",
        &format!("#!/bin/sh\n# @description Denial test.\n{script}\n"),
    );
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn denials(p: &Project, extra: &[&str]) -> (Value, Vec<Value>) {
    let mut args = vec!["call", "t", "--json"];
    args.extend(extra);
    let o = toolcage(p, &args);
    let v: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    let d = v["outcome"]["denials"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    (v, d)
}

fn fix_of(d: &[Value]) -> Vec<String> {
    d.iter()
        .map(|d| d["fix"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn reading_outside_the_grant_names_the_read_flag() {
    let p = Project::new("deny-read");
    let out = Outside::new("read");
    tool(&p, &format!("cat {}/data", out.s()));
    let (v, d) = denials(&p, &[]);
    assert_eq!(fix_of(&d), [format!("--read {}/data", out.s())], "{v}");
    assert_eq!(d[0]["inferred"], true);
    assert!(v["text"].as_str().unwrap().contains("blocked: "), "{v}");
    // Control: with the flag, it reads and nothing is refused.
    let (v, d) = denials(&p, &["--read", out.s()]);
    assert!(v["text"].as_str().unwrap().contains("secret-data"), "{v}");
    assert!(d.is_empty(), "{d:?}");
}

#[test]
fn writing_a_read_root_names_the_write_flag() {
    let p = Project::new("deny-write");
    let out = Outside::new("write");
    tool(&p, &format!("echo x > {}/new && echo WROTE", out.s()));
    let (v, d) = denials(&p, &["--read", out.s()]);
    assert_eq!(fix_of(&d), [format!("--write {}", out.s())], "{v}");
    let (v, d) = denials(&p, &["--write", out.s()]);
    assert!(v["text"].as_str().unwrap().contains("WROTE"), "{v}");
    assert!(d.is_empty(), "{d:?}");
}

#[test]
fn executing_a_program_outside_the_grant_names_the_read_flag() {
    let p = Project::new("deny-exec");
    let out = Outside::new("exec");
    let prog = out.0.join("prog");
    std::fs::write(&prog, "#!/bin/sh\necho RAN\n").unwrap();
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
    tool(&p, &prog.display().to_string());
    let (v, d) = denials(&p, &[]);
    assert_eq!(fix_of(&d), [format!("--read {}", prog.display())], "{v}");
    let (v, d) = denials(&p, &["--read", out.s()]);
    assert!(v["text"].as_str().unwrap().contains("RAN"), "{v}");
    assert!(d.is_empty(), "{d:?}");
}

#[test]
fn network_off_names_allow_net() {
    let p = Project::new("deny-net");
    tool(
        &p,
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', 9))\" 2>&1 | tail -1",
    );
    let (v, d) = denials(&p, &[]);
    assert!(fix_of(&d).iter().any(|f| f.contains("--allow-net")), "{v}");
    // Control: with the network on the connection is refused by nobody
    // but the port (nothing listens): no denial of the sandbox's.
    let (v, d) = denials(&p, &["--allow-net"]);
    assert!(d.is_empty(), "{v}");
}

#[test]
fn explain_prints_the_denials_with_the_fix() {
    let p = Project::new("deny-explain");
    let out = Outside::new("explain");
    tool(&p, &format!("cat {}/data", out.s()));
    let o = toolcage(&p, &["call", "t", "--explain"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("to allow it: --read {}/data", out.s())),
        "{err}"
    );
    // exec sees no output of the command, and says so.
    let o = toolcage(&p, &["exec", "--explain", "--", "true"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no denials seen"), "{err}");
}

#[test]
fn a_blocked_system_call_is_named_with_its_layer() {
    let p = Project::new("deny-syscall");
    tool(&p, "unshare -U true");
    let (v, d) = denials(&p, &[]);
    let hit = d
        .iter()
        .find(|d| d["op"] == "unshare")
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(hit["layer"], "seccomp", "{v}");
    assert_eq!(hit["inferred"], true, "{v}");
    assert!(v["text"].as_str().unwrap_or("").contains("unshare"), "{v}");
    // Control: an ordinary command, allowed, reports nothing.
    tool(&p, "true");
    let (v, d) = denials(&p, &[]);
    assert!(d.is_empty(), "{v}");
}

#[test]
fn exec_explain_reads_the_commands_stderr_for_denials() {
    let p = Project::new("exec-explain");
    let out = Outside::new("exec-explain");
    let cmd = format!("cat {}/data", out.s());
    let o = toolcage(&p, &["exec", "--explain", "--", "sh", "-c", &cmd]);
    let err = String::from_utf8_lossy(&o.stderr);
    // The command's own message still reaches the terminal, then the denial.
    assert!(err.contains("No such file or directory"), "{err}");
    assert!(err.contains(&format!("--read {}", out.s())), "{err}");
    // Control: granted, it works and nothing is refused.
    let o = toolcage(
        &p,
        &[
            "exec",
            "--explain",
            "--read",
            out.s(),
            "--",
            "sh",
            "-c",
            &cmd,
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "secret-data\n");
    assert!(err.contains("no denials seen"), "{err}");
}
