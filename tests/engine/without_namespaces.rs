//! The namespace-free simulation of `common::without_namespaces`
//! (and `integration/nons.c`, the same filter): under it, creating any
//! namespace fails as in a container with the default seccomp profile,
//! while ordinary programs, and `unshare` of what is not a namespace,
//! still work. Controls: the same commands without it.

use crate::common;

use crate::escape_support::{PY, is_root};
use common::without_namespaces;
use std::process::Command;

/// Exit status and stderr of `argv`, with or without the filter.
fn run(argv: &[&str], nons: bool) -> (bool, String) {
    let mut cmd = Command::new(argv[0]);
    cmd.args(&argv[1..]);
    if nons {
        without_namespaces(&mut cmd);
    }
    let out = cmd.output().expect("spawn");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Where this user can create a user namespace at all (as root always).
fn userns_available() -> bool {
    run(&["unshare", "-U", "true"], false).0
}

#[test]
fn ordinary_programs_run() {
    let (ok, err) = run(&["/bin/sh", "-c", "true | cat && exec true"], true);
    assert!(ok, "a plain program must run under the filter: {err}");
}

#[test]
fn user_namespace_is_refused() {
    if !userns_available() {
        eprintln!("skipped: user namespaces are off for this user even without the filter");
        return;
    }
    let (ok, err) = run(&["unshare", "-U", "true"], true);
    assert!(!ok, "unshare -U must fail under the filter");
    assert!(err.contains("Operation not permitted"), "{err}");
}

#[test]
fn mount_and_network_namespaces_are_refused() {
    for flag in ["-m", "-n", "-i", "-u", "-p"] {
        // Control: as root these work without the filter; as a user
        // they need a user namespace, which the filter refuses too.
        if is_root() {
            assert!(
                run(&["unshare", flag, "true"], false).0,
                "control: unshare {flag}"
            );
        }
        let (ok, err) = run(&["unshare", flag, "true"], true);
        assert!(!ok, "unshare {flag} must fail under the filter: {err}");
    }
}

#[test]
fn clone_with_namespace_flags_and_clone3_fail_and_unshare_is_refused() {
    // A raw clone(CLONE_NEWUSER|SIGCHLD): EPERM under the filter, a child
    // without it (where user namespaces are on); clone3 is ENOSYS; and
    // unshare(CLONE_FS), which makes no namespace, still succeeds.
    let code = format!(
        r#"
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(nr, *a):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(x) for x in a])
    return "ok" if r >= 0 else errno.errorcode[ctypes.get_errno()]
pid = libc.syscall(ctypes.c_long({clone}), ctypes.c_long(0x10000000 | 17), 0, 0, 0, 0)
if pid == 0:
    os._exit(0)
print("clone_newuser", "ok" if pid > 0 else errno.errorcode[ctypes.get_errno()])
if pid > 0:
    os.waitpid(pid, 0)
print("clone3", sc({clone3}, 0, 0))
print("unshare_fs", sc({unshare}, 0x200))
"#,
        clone = libc::SYS_clone,
        clone3 = libc::SYS_clone3,
        unshare = libc::SYS_unshare,
    );
    let out = |nons| {
        let mut cmd = Command::new(PY);
        cmd.args(["-c", &code]);
        if nons {
            without_namespaces(&mut cmd);
        }
        let o = cmd.output().expect("spawn python");
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
    };
    let filtered = out(true);
    assert!(filtered.contains("clone_newuser EPERM"), "{filtered}");
    assert!(filtered.contains("clone3 ENOSYS"), "{filtered}");
    // Docker's default profile refuses unshare(2) altogether, whatever the
    // flags (it needs CAP_SYS_ADMIN there); so does the simulation.
    assert!(filtered.contains("unshare_fs EPERM"), "{filtered}");
    let plain = out(false);
    assert!(plain.contains("unshare_fs ok"), "control: {plain}");
    assert!(
        !plain.contains("clone3 ENOSYS"),
        "control: clone3 exists here: {plain}"
    );
    if userns_available() {
        assert!(plain.contains("clone_newuser ok"), "control: {plain}");
    }
}

#[test]
fn a_read_root_split_around_a_denied_path_needs_few_descriptors() {
    // Namespace-free, a read root that holds a denied path becomes one
    // Landlock rule per entry. With a descriptor limit far below the
    // number of entries the call must still run (one descriptor open at a
    // time), read every entry, and still not reach the denied path.
    // Control: the same call with namespaces (a constructed root).
    let p = common::Project::new("split-fds");
    let work = common::Project::new("split-fds-work");
    let many = p.dir.join("many");
    std::fs::create_dir_all(&many).unwrap();
    for i in 0..400 {
        std::fs::write(many.join(format!("f{i}")), "x").unwrap();
        std::fs::create_dir(p.dir.join(format!("d{i}"))).unwrap();
    }
    let home = p.dir.join("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::write(home.join("secret"), "s").unwrap();
    let policy = p.dir.join("policy.toml");
    std::fs::write(
        &policy,
        format!("[fs]\nadd_denied = [{:?}]\n", home.display().to_string()),
    )
    .unwrap();
    let script = "ulimit -n 64 && exec \"$TC\" exec --allow-degraded --policy \"$ROOT/policy.toml\" --read \"$ROOT\" -- \
        sh -c 'ls \"$1/many\" | wc -l; cat \"$1/home/secret\" && echo LEAK' sh \"$ROOT\"";
    for nons in [false, true] {
        let mut cmd = Command::new("/bin/sh");
        cmd.args(["-c", script])
            .env("HOME", &home)
            .env("TC", env!("CARGO_BIN_EXE_toolcage"))
            .env("ROOT", &p.dir)
            .current_dir(&work.dir);
        if nons {
            without_namespaces(&mut cmd);
        }
        let out = cmd.output().expect("spawn");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stdout.lines().next() == Some("400"),
            "namespace-free {nons}: every entry readable: {stdout} {stderr}"
        );
        assert!(
            !stdout.contains("LEAK"),
            "namespace-free {nons}: home readable: {stdout}"
        );
    }
}

/// `toolcage exec --explain [--policy FILE] -- PROG PLANTED` namespace-free
/// (under the filter), with toolcage's TMPDIR set to `tmpdir`.
fn exec_tmpfile(
    p: &common::Project,
    policy: Option<&std::path::Path>,
    tmpdir: &std::path::Path,
    planted: &std::path::Path,
) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolcage"));
    cmd.arg("-C").arg(&p.dir).args(["exec", "--explain"]);
    if let Some(f) = policy {
        cmd.arg("--policy").arg(f);
    }
    cmd.arg("--")
        .arg(p.path("t"))
        .arg(planted)
        .current_dir(&p.dir)
        .env("XDG_STATE_HOME", p.state_dir())
        .env("TMPDIR", tmpdir)
        .stdin(std::process::Stdio::null());
    without_namespaces(&mut cmd);
    cmd.output().expect("spawn")
}

#[test]
fn tmpfile_namespace_free_is_denied_with_the_fix_and_works_where_tmp_is_granted() {
    if !std::path::Path::new("/usr/bin/gcc").exists() {
        eprintln!("no gcc: skipped");
        return;
    }
    let p = common::Project::new("nons-tmpfile");
    p.write(
        "t.c",
        "#include <stdio.h>\nint main(int c, char **v) {\n  FILE *f = tmpfile();\n  \
         if (!f) { perror(\"tmpfile\"); return 1; }\n  fputs(\"kept\", f); rewind(f);\n  \
         char b[64] = {0}; if (fread(b, 1, 4, f) == 4) printf(\"TMPFILE %s\\n\", b);\n  \
         FILE *h = fopen(v[1], \"r\");\n  \
         if (h && fgets(b, sizeof b, h)) printf(\"HOST %s\", b); else puts(\"HOST hidden\");\n  \
         return 0;\n}\n",
    );
    let built = Command::new("/usr/bin/gcc")
        .args(["-o", "t", "t.c"])
        .current_dir(&p.dir)
        .status()
        .unwrap();
    assert!(built.success());
    let planted = std::path::Path::new("/tmp").join(format!(
        "tc-nons-planted-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::write(&planted, "host-file\n").unwrap();
    let tmp = std::env::temp_dir().canonicalize().unwrap();

    // The default policy: tmpfile() fails, and toolcage says why and how.
    let o = exec_tmpfile(&p, None, &tmp, &planted);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    assert!(!o.status.success(), "{out}{err}");
    assert!(!out.contains("host-file"), "{out}");
    assert!(
        err.contains("blocked: /tmp") && err.contains("tmpfile()") && err.contains("add_write"),
        "{err}"
    );

    // /tmp granted on purpose, toolcage's runtime dir outside it: tmpfile()
    // works (and the call sees the host's /tmp: the cost the fix names).
    let grant_tmp = p.write(
        "grant-tmp.toml",
        "[fs]\nprivate_tmp = false\nadd_write = [\"/tmp\"]\n",
    );
    let outside = ["/dev/shm", "/var/tmp"]
        .iter()
        .map(std::path::Path::new)
        .find(|d| d.is_dir() && !d.starts_with("/tmp"))
        .map(|d| d.join(format!("tc-nons-rt-{}", std::process::id())));
    if let Some(rt) = &outside {
        std::fs::create_dir_all(rt).unwrap();
        let o = exec_tmpfile(&p, Some(&grant_tmp), rt, &planted);
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        let _ = std::fs::remove_dir_all(rt);
        assert!(
            out.contains("TMPFILE kept") && out.contains("HOST host-file"),
            "{out}{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // The same grant with the runtime dir in /tmp: refused, naming the fix.
    if tmp.starts_with("/tmp") {
        let o = exec_tmpfile(&p, Some(&grant_tmp), &tmp, &planted);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(125), "{err}");
        assert!(
            err.contains("runtime directory") && err.contains("TMPDIR"),
            "{err}"
        );
    }
    let _ = std::fs::remove_file(&planted);
}
