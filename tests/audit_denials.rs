//! Exact Landlock denials from the kernel's audit log: as root, with audit
//! enabled (this test enables it and puts it back; toolcage itself never
//! does), `exec --explain` and `call --explain` report what Landlock
//! refused from its records, not inferred. Control: with audit off, the same refusal is only
//! inferred (or not seen). Skips, saying so, when not root.
//!
//! Its own test binary, on purpose: turning the kernel's audit on changes
//! what every concurrent call's denials look like (exact instead of
//! inferred), so no other test may run while it does (`cargo test` runs
//! binaries one after another).

use std::process::Command;

const AUDIT_CTL: &str = r#"
import socket, struct, sys
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 9)
s.bind((0, 0))
s.settimeout(2)
def send(t, payload=b''):
    s.send(struct.pack('=IHHII', 16 + len(payload), t, 1 | 4, 1, 0) + payload)
if sys.argv[1] == 'get':
    send(1000)
    while True:
        r = s.recv(8192)
        if struct.unpack('=H', r[4:6])[0] == 1000:
            print(struct.unpack('=2I', r[16:24])[1]); break
else:
    send(1001, struct.pack('=11I', 1, int(sys.argv[2]), 0, 0, 0, 0, 0, 0, 0, 0, 0))
    s.recv(8192)
"#;

fn audit(args: &[&str]) -> Option<String> {
    let o = Command::new("python3")
        .arg("-c")
        .arg(AUDIT_CTL)
        .args(args)
        .output()
        .ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// Puts the audit state back however the test ends.
struct Restore(String);

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = audit(&["set", &self.0]);
    }
}

/// `ls /` under `--explain`, as `exec` and as a tool through `call`: the
/// stderr of each.
fn explain_ls_root(dir: &std::path::Path, state: &std::path::Path) -> [String; 2] {
    let run = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_toolcage"))
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("XDG_STATE_HOME", state)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    [
        run(&["exec", "--explain", "--", "ls", "/"]),
        run(&["call", "--explain", "lsroot"]),
    ]
}

#[test]
fn with_audit_enabled_landlock_refusals_are_exact() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: reading the audit log needs root");
        return;
    }
    let Some(before) = audit(&["get"]) else {
        eprintln!("skipped: no audit subsystem here");
        return;
    };
    let _restore = Restore(before);
    let dir = tempfile::tempdir().unwrap();
    let tool = dir.path().join(".agents/tools/lsroot");
    std::fs::create_dir_all(tool.parent().unwrap()).unwrap();
    std::fs::write(&tool, "#!/bin/sh\n# @description List /\nexec ls /\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let state = tempfile::tempdir().unwrap();
    // `ls /` lists the constructed root, which Landlock does not let it
    // read; `--read /` is never offered to the agent reading this.
    let exact = "blocked: / (outside every read root: not in the sandbox; the root directory: \
                 no fix is offered)";
    // Control first: audit off, the refusal is not exact.
    audit(&["set", "0"]).unwrap();
    for off in explain_ls_root(dir.path(), state.path()) {
        assert!(!off.contains(exact), "{off}");
    }
    audit(&["set", "1"]).unwrap();
    for on in explain_ls_root(dir.path(), state.path()) {
        assert!(on.contains(exact), "{on}");
    }
}
