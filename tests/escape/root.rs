//! Escape suite, the constructed root: what Landlock alone does not stop.
//! Metadata changes outside every root (chmod, chown, utimes, xattrs),
//! setuid planting, host SysV IPC, abstract sockets in the host's network
//! namespace, the host's /proc through a parent grant, renaming the parent
//! of a protected path, toolcage's own directories, and the everyday work
//! (temp files, compilers, git) that a sandbox must not break.

use crate::common;
use crate::escape_support;

use common::*;
use escape_support::*;
use std::path::Path;
use std::time::{Duration, Instant};
use toolcage::policy::Network;
use toolcage::sandbox::Exit;

fn q(p: &Path) -> String {
    format!("{:?}", p.display().to_string())
}

#[test]
fn metadata_changes_outside_every_root_cannot_reach_the_host() {
    let p = Project::new("root-meta");
    let out = outside_dir("root-meta");
    let f = out.write("f", "host file");
    std::fs::set_permissions(&f, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let deny = default_grant(&p.dir);
    let allow = with_write(&deny, &out.dir);
    if namespace_free_run() {
        // No constructed root: Landlock does not hook chmod; the report says so.
        let o = py(&deny, &format!("t(lambda: os.chmod({}, 0o600))", q(&f)));
        assert!(lacking_in_namespace_free_run(&o, "metadata"));
        return;
    }
    for (what, code) in [
        ("chmod", format!("t(lambda: os.chmod({}, 0o777))", q(&f))),
        (
            "chown",
            format!("t(lambda: os.chown({}, os.getuid(), os.getgid()))", q(&f)),
        ),
        ("utime", format!("t(lambda: os.utime({}, (1, 1)))", q(&f))),
        (
            "setxattr",
            format!("t(lambda: os.setxattr({}, 'user.tc', b'1'))", q(&f)),
        ),
    ] {
        attack(&allow, &deny, &code, &["DENIED:ENOENT"], what);
    }
    // The host file kept its mode through the denied runs... (the allowed
    // chmod ran first, so reset and try the denied one alone).
    std::fs::set_permissions(&f, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    py(&deny, &format!("t(lambda: os.chmod({}, 0o4777))", q(&f)));
    let mode = std::os::unix::fs::PermissionsExt::mode(&f.metadata().unwrap().permissions());
    assert_eq!(mode & 0o7777, 0o600, "host file mode changed");
}

#[test]
fn paths_outside_the_grant_do_not_exist_inside() {
    let p = Project::new("root-absent");
    let out = outside_dir("root-absent");
    out.write("secret", "s");
    let deny = default_grant(&p.dir);
    let allow = with_read(&deny, &out.dir);
    let code = format!("t(lambda: os.stat({}).st_size)", q(&out.path("secret")));
    if namespace_free_run() {
        // The host's tree: stat works, opening does not.
        assert!(lacking_in_namespace_free_run(&py(&deny, &code), "metadata"));
        let read = format!("t(lambda: open({}).read())", q(&out.path("secret")));
        assert_denied(&py(&deny, &read), &["DENIED:EACCES"], "read outside");
        return;
    }
    let (ok, _) = attack(&allow, &deny, &code, &["DENIED:ENOENT"], "stat outside");
    assert_eq!(ok.stdout.text.trim(), "OK:1");
    // Home and /root are not there at all; the granted /usr is.
    for absent in ["/root", "/home", "/srv", "/var", "/run"] {
        let o = py(&deny, &format!("t(lambda: os.lstat({absent:?}))"));
        assert_denied(&o, &["DENIED:ENOENT"], absent);
    }
    let o = py(&deny, "t(lambda: os.path.isdir('/usr/bin') or None)");
    assert_ok(&o, "/usr/bin exists");
}

#[test]
fn setuid_and_setgid_bits_are_refused() {
    let p = Project::new("root-setuid");
    let g = default_grant(&p.dir);
    let f = p.write("x", "#!/bin/sh\n");
    for (what, bad, good) in [
        ("chmod", "os.chmod('x', 0o4755)", "os.chmod('x', 0o755)"),
        (
            "chmod setgid",
            "os.chmod('x', 0o2755)",
            "os.chmod('x', 0o700)",
        ),
        (
            "fchmod",
            "os.fchmod(os.open('x', os.O_RDONLY), 0o4755)",
            "os.fchmod(os.open('x', os.O_RDONLY), 0o755)",
        ),
        (
            "open O_CREAT",
            "os.open('y', os.O_CREAT | os.O_WRONLY, 0o4755)",
            "os.open('z', os.O_CREAT | os.O_WRONLY, 0o755)",
        ),
        (
            "mkdir setgid",
            "os.mkdir('d1', 0o2755)",
            "os.mkdir('d2', 0o755)",
        ),
        (
            "mknod fifo setuid",
            "os.mkfifo('f1', 0o4644)",
            "os.mkfifo('f2', 0o644)",
        ),
    ] {
        let ok = py(&g, &format!("t(lambda: {good} and None)"));
        assert_ok(&ok, what);
        let o = py(&g, &format!("t(lambda: {bad} and None)"));
        assert_denied(&o, &["DENIED:EPERM"], what);
    }
    let mode = std::os::unix::fs::PermissionsExt::mode(&f.metadata().unwrap().permissions());
    assert_eq!(mode & 0o6000, 0, "a setuid/setgid bit was set: {mode:o}");
    // openat2 is ENOSYS (its mode cannot be inspected): libc falls back.
    let o = py(&g, "t(lambda: sc(437, -100, 0, 0, 0))");
    assert_denied(&o, &["DENIED:ENOSYS"], "openat2");
    // A setuid shell cannot be planted the way an attacker would.
    let o = sh(&g, "cp /bin/sh ./sh2 && chmod 4755 ./sh2; echo rc=$?");
    assert!(o.stdout.text.contains("rc=1"), "{}", describe(&o));
    let planted = p.path("sh2").metadata().unwrap();
    let mode = std::os::unix::fs::PermissionsExt::mode(&planted.permissions());
    assert_eq!(mode & 0o6000, 0, "setuid shell planted");
}

#[test]
fn chmod_plus_x_on_a_build_output_works() {
    let p = Project::new("root-chmodx");
    let g = default_grant(&p.dir);
    let o = sh(
        &g,
        "printf '#!/bin/sh\\necho built\\n' > out && chmod +x out && ./out",
    );
    assert_eq!(o.stdout.text.trim(), "built", "{}", describe(&o));
}

#[test]
fn untrusted_project_cannot_chmod_a_dormant_tool() {
    let p = Project::new("root-untrusted-chmod");
    let tool = p.write(".agents/tools/dormant", "#!/bin/sh\n# @description x\n");
    let mut g = default_grant(&p.dir);
    g.write.retain(|w| w != &p.dir);
    g.read.push(p.dir.clone());
    let allow = default_grant(&p.dir);
    let code = format!("t(lambda: os.chmod({}, 0o755))", q(&p.path("notatool")));
    p.write("notatool", "x");
    assert_ok(&py(&allow, &code), "chmod in a writable project");
    let code = format!("t(lambda: os.chmod({}, 0o755))", q(&tool));
    let o = py(&g, &code);
    if lacking_in_namespace_free_run(&o, "metadata") {
        return; // and the untrusted profile refuses namespace-free mode
    }
    assert_denied(&o, &["DENIED:EROFS"], "chmod +x a dormant tool");
}

#[test]
fn host_sysv_ipc_is_invisible_and_nothing_is_left_behind() {
    let p = Project::new("root-ipc");
    let g = default_grant(&p.dir);
    let key: i32 = 0x7c00_0000 | (std::process::id() as i32 & 0xffff);
    // SAFETY: shmget/shmctl on a key of our own.
    let id = unsafe { libc::shmget(key, 4096, libc::IPC_CREAT | 0o600) };
    assert!(id >= 0, "host shmget failed");
    let code = format!(
        "def shm(k):\n    r = libc.shmget(k, 0, 0)\n    if r < 0: raise OSError(ctypes.get_errno(), 'shmget')\n    return 'found'\nt(lambda: shm({key}))"
    );
    // Control: outside the sandbox the same lookup finds the segment.
    let host = std::process::Command::new(PY)
        .arg("-c")
        .arg(format!("{PRELUDE}\n{code}"))
        .output()
        .unwrap();
    let host_out = String::from_utf8_lossy(&host.stdout);
    assert!(host_out.trim().starts_with("OK:"), "control: {host_out}");
    // Namespace-free, seccomp refuses SysV IPC altogether.
    let expected: &[&str] = if namespace_free_run() {
        &["DENIED:EPERM"]
    } else {
        &["DENIED:ENOENT"]
    };
    assert_denied(&py(&g, &code), expected, "host shm segment");
    if namespace_free_run() {
        // SAFETY: removing our own segment.
        unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) };
        let o = py(&g, &format!("t(lambda: libc.msgget({key}, 0o1600))"));
        assert!(o.stdout.text.contains("-1"), "{}", describe(&o));
        return;
    }
    // SAFETY: removing our own segment.
    unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) };

    // A segment and a queue created inside do not outlive the call.
    let key2 = key ^ 0x55;
    let o = py(
        &g,
        &format!("t(lambda: (libc.shmget({key2}, 4096, 0o1600), libc.msgget({key2}, 0o1600)))"),
    );
    assert!(o.stdout.text.starts_with("OK:("), "{}", describe(&o));
    assert!(!o.stdout.text.contains("-1"), "{}", describe(&o));
    // SAFETY: lookups of keys only.
    let (shm, msg) = unsafe { (libc::shmget(key2, 0, 0), libc::msgget(key2, 0)) };
    assert!(shm < 0 && msg < 0, "IPC objects left behind: {shm} {msg}");
}

fn connect_abstract(name: &str) -> std::io::Result<()> {
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
    std::os::unix::net::UnixStream::connect_addr(&addr).map(|_| ())
}

/// The tool listens on an abstract socket for a while; the host tries it.
fn abstract_listen_reachable(g: &toolcage::policy::Grant, name: &str) -> bool {
    let code = format!(
        "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\ns.bind('\\0{name}')\ns.listen(1)\nprint('LISTENING', flush=True)\ntime.sleep(2)"
    );
    let g = g.clone();
    let t = std::thread::spawn(move || py(&g, &code));
    let mut reachable = false;
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(1500) {
        if connect_abstract(name).is_ok() {
            reachable = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = t.join().unwrap();
    assert!(o.stdout.text.contains("LISTENING"), "{}", describe(&o));
    reachable
}

#[test]
fn abstract_sockets_are_private_with_the_network_off() {
    let p = Project::new("root-abstract");
    let off = default_grant(&p.dir);
    let mut on = off.clone();
    on.network = Network::On;
    let name = format!("tc-test-abstract-{}", std::process::id());
    if namespace_free_run() {
        // The host's network namespace: seccomp refuses bind() and
        // listen() instead.
        let code = format!(
            "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\nt(lambda: s.bind('\\0{name}') or s.listen(1))"
        );
        let o = py(&off, &code);
        assert_denied(&o, &["DENIED:EPERM"], "abstract listen, namespace-free");
        let net = o.enforcement.lacking.iter().find(|l| l.id == "network");
        assert!(net.is_some_and(|l| l.compensated_by.is_some()), "{o:?}");
        return;
    }
    // Control: in the host's network namespace (network on) the host
    // reaches the tool's listener.
    assert!(abstract_listen_reachable(&on, &name), "control failed");
    assert!(
        !abstract_listen_reachable(&off, &format!("{name}-off")),
        "host reached a network-off tool's abstract socket"
    );
    // And inside, loopback is up and alone.
    let o = py(
        &off,
        "t(lambda: sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]))",
    );
    assert_eq!(o.stdout.text.trim(), "OK:['lo']", "{}", describe(&o));
}

#[test]
fn tcp_mode_without_bind_ports_refuses_listen() {
    let p = Project::new("root-listen");
    let mut deny = default_grant(&p.dir);
    deny.network = Network::Tcp {
        connect: vec![443],
        bind: vec![],
    };
    let mut allow = deny.clone();
    allow.network = Network::Tcp {
        connect: vec![443],
        bind: vec![18080],
    };
    let code = "s = socket.socket()\nt(lambda: s.listen(1))";
    attack(&allow, &deny, code, &["DENIED:EPERM"], "listen auto-bind");
}

#[test]
fn proc_is_fresh_even_when_a_parent_is_granted() {
    let p = Project::new("root-proc");
    let mut g = default_grant(&p.dir);
    g.read = vec!["/".into()];
    let o = py(
        &g,
        "t(lambda: sorted(int(x) for x in os.listdir('/proc') if x.isdigit()))",
    );
    if lacking_in_namespace_free_run(&o, "proc") {
        return;
    }
    assert_eq!(o.stdout.text.trim(), "OK:[1, 2]", "{}", describe(&o));
    // Control: the granted / is really there (the host's /usr and /etc).
    assert_ok(
        &py(&g, "t(lambda: os.path.exists('/etc/passwd') or None)"),
        "/ granted",
    );
}

#[test]
fn renaming_the_parent_of_a_protected_path_fails() {
    let p = Project::new("root-rename");
    p.write("conf/settings.toml", "safe = true\n");
    p.write("other/file", "x");
    p.write("secret/key", "k");
    let mut g = default_grant(&p.dir);
    g.protected.push(p.path("conf/settings.toml"));
    g.denied.push(p.path("secret/key"));
    // Control: an unprotected directory renames fine.
    let o = sh(&g, "mv other other.old && echo OK");
    assert_eq!(o.stdout.text.trim(), "OK", "{}", describe(&o));
    let o = sh(
        &g,
        "mv conf conf.old; mkdir -p conf; echo 'safe = false' > conf/settings.toml; \
         mv secret secret.old; mkdir -p secret; echo planted > secret/key; \
         cat conf/settings.toml",
    );
    // Namespace-free, the rename works during the call and the protected
    // and denied files are restored after it.
    if !namespace_free_run() {
        assert_eq!(o.stdout.text.trim(), "safe = true", "{}", describe(&o));
    }
    assert_eq!(
        std::fs::read_to_string(p.path("conf/settings.toml")).unwrap(),
        "safe = true\n"
    );
    assert_eq!(std::fs::read_to_string(p.path("secret/key")).unwrap(), "k");
    if !namespace_free_run() {
        assert!(o.created_protected.is_empty(), "{:?}", o.created_protected);
    }
}

#[test]
fn toolcage_runtime_dir_is_never_visible() {
    let p = Project::new("root-runtime");
    let mut g = default_grant(&p.dir);
    g.read = vec!["/".into()];
    g.private_tmp = false;
    let uid = nix::unistd::geteuid();
    let base = std::env::temp_dir().join(format!(".toolcage-{uid}"));
    // Make sure it exists (any earlier call created it).
    sh(&default_grant(&p.dir), "true");
    assert!(base.is_dir());
    let o = py(&g, &format!("t(lambda: os.listdir({}))", q(&base)));
    assert_denied(&o, &["DENIED:EACCES"], "runtime dir listing");
    // Control: the rest of /tmp is visible with / granted and no private tmp.
    let o = py(
        &g,
        &format!("t(lambda: os.path.isdir({}) or None)", q(&p.dir)),
    );
    assert_ok(&o, "project under /tmp visible");
}

#[test]
fn toolcage_runtime_dir_in_a_write_root_is_never_reachable() {
    let p = Project::new("root-runtime-write");
    let uid = nix::unistd::geteuid();
    let tmp = std::env::temp_dir().canonicalize().unwrap();
    let base = tmp.join(format!(".toolcage-{uid}"));
    // The call's own TMPDIR works (namespace-free it is a directory in the
    // runtime dir), and creates the runtime dir.
    let own = default_grant(&p.dir);
    let o = sh(&own, "echo mine > \"$TMPDIR/own\" && cat \"$TMPDIR/own\"");
    assert_eq!(o.stdout.text.trim(), "mine", "{}", describe(&o));
    assert!(base.is_dir());
    // /tmp granted: the host's /tmp, which holds the runtime dir.
    let granted = if tmp.starts_with("/tmp") {
        Path::new("/tmp").to_path_buf()
    } else {
        tmp.clone()
    };
    let mut g = default_grant(&p.dir);
    g.private_tmp = false;
    g.write.push(granted.clone());
    let planted = base.join("planted-by-call");
    let _ = std::fs::remove_file(&planted); // a run before the fix left one
    let code = format!(
        "{PRELUDE}\nt(lambda: os.listdir({b}))\nt(lambda: open({f}, 'w').write('x') and None)",
        b = q(&base),
        f = q(&planted)
    );
    let cmd = toolcage::sandbox::Command {
        argv: vec![PY.into(), "-c".into(), code.into()],
        ..Default::default()
    };
    namespace_free_if_asked();
    match toolcage::sandbox::run(&g, &cmd, None) {
        Ok(o) => {
            // The constructed root covers it, writable parent or not.
            assert!(
                !namespace_free_run(),
                "ran namespace-free: {}",
                describe(&o)
            );
            let lines: Vec<&str> = o.stdout.text.lines().collect();
            assert_eq!(lines.first(), Some(&"DENIED:EACCES"), "{}", describe(&o));
            assert!(
                matches!(lines.get(1), Some(&"DENIED:EACCES" | &"DENIED:EROFS")),
                "{}",
                describe(&o)
            );
        }
        Err(e) => {
            // Namespace-free: refused before anything runs, naming the fix.
            assert!(namespace_free_run(), "refused with namespaces: {e}");
            let msg = e.to_string();
            assert!(
                msg.contains(&base.display().to_string()) && msg.contains("TMPDIR"),
                "{msg}"
            );
            assert_eq!(
                e.kind(),
                toolcage::sandbox::SandboxErrorKind::Setup,
                "{msg}"
            );
        }
    }
    assert!(
        !planted.exists(),
        "a call wrote into toolcage's runtime dir"
    );
    // Control: a directory beneath /tmp that does not hold the runtime dir
    // is an ordinary write root, in both modes.
    let mut g = default_grant(&p.dir);
    g.private_tmp = false;
    let beside = outside_dir("root-runtime-beside");
    g.write.push(beside.dir.clone());
    let o = sh(
        &g,
        &format!("echo x > {f} && cat {f}", f = q(&beside.path("f"))),
    );
    assert_eq!(o.stdout.text.trim(), "x", "{}", describe(&o));
}

// ---- everyday work: what real programs do must keep working ----

#[test]
fn tmpdir_home_cache_and_mktemp_are_writable() {
    let p = Project::new("root-tmp");
    let g = default_grant(&p.dir);
    let o = sh(
        &g,
        "echo x > \"$TMPDIR/a\" && cat \"$TMPDIR/a\" && f=$(mktemp) && echo y > \"$f\" && \
         d=$(mktemp -d) && touch \"$d/z\" && mkdir -p \"$HOME/.cache/tool\" && \
         echo c > \"$HOME/.cache/tool/x\" && echo [ $TMPDIR ] && echo DONE",
    );
    assert!(o.stdout.text.contains("DONE"), "{}", describe(&o));
    let tmp = if namespace_free_run() {
        // A host directory in toolcage's runtime dir, removed afterwards.
        let uid = nix::unistd::geteuid();
        std::env::temp_dir()
            .join(format!(".toolcage-{uid}/tmp-"))
            .display()
            .to_string()
    } else {
        "/tmp ]".to_string()
    };
    assert!(
        o.stdout.text.contains(&format!("[ {tmp}")),
        "{}",
        describe(&o)
    );
    // Python's tempfile uses TMPDIR, not the project.
    let o = py(
        &g,
        "import tempfile\nfd, path = tempfile.mkstemp()\nos.write(fd, b'x')\nt(lambda: os.path.dirname(path))",
    );
    if !namespace_free_run() {
        assert_eq!(o.stdout.text.trim(), "OK:/tmp", "{}", describe(&o));
    } else {
        assert!(o.stdout.text.contains(".toolcage-"), "{}", describe(&o));
    }
    assert_eq!(std::fs::read_dir(&p.dir).unwrap().count(), 0);
    // Every call gets a fresh one: nothing from the call before.
    sh(&g, "echo left > \"$TMPDIR/leftover\"");
    let o = sh(
        &g,
        "test -e \"$TMPDIR/leftover\" && echo KEPT || echo FRESH",
    );
    assert_eq!(o.stdout.text.trim(), "FRESH", "{}", describe(&o));
}

#[test]
fn gcc_compiles_and_links_in_the_sandbox() {
    if !Path::new("/usr/bin/gcc").exists() {
        eprintln!("no gcc: skipped");
        return;
    }
    let p = Project::new("root-gcc");
    p.write(
        "m.c",
        "#include <stdio.h>\nint main(void){puts(\"compiled\");return 0;}\n",
    );
    let g = default_grant(&p.dir);
    let o = sh(&g, "gcc -O1 -o m m.c && ./m");
    assert_eq!(o.stdout.text.trim(), "compiled", "{}", describe(&o));
}

/// A C program that uses glibc's `tmpfile()` (which ignores TMPDIR and
/// opens /tmp), then reads the host file named by its argument.
const TMPFILE_C: &str = r#"#include <stdio.h>
int main(int argc, char **argv) {
    char b[64] = {0};
    FILE *f = tmpfile();
    if (!f) {
        perror("tmpfile");
    } else {
        fputs("kept", f);
        rewind(f);
        if (fread(b, 1, 4, f) == 4) printf("TMPFILE %s\n", b);
    }
    FILE *h = argc > 1 ? fopen(argv[1], "r") : NULL;
    if (h && fgets(b, sizeof b, h)) printf("HOST %s\n", b);
    else printf("HOST hidden\n");
    return f ? 0 : 1;
}
"#;

#[test]
fn tmpfile_works_or_is_denied_with_the_fix_and_the_host_tmp_stays_hidden() {
    if !Path::new("/usr/bin/gcc").exists() {
        eprintln!("no gcc: skipped");
        return;
    }
    let p = Project::new("root-tmpfile");
    p.write("t.c", TMPFILE_C);
    let built = std::process::Command::new("/usr/bin/gcc")
        .args(["-o", "t", "t.c"])
        .current_dir(&p.dir)
        .status()
        .unwrap();
    assert!(built.success());
    // A file of the host's /tmp the call must not see.
    let planted = Path::new("/tmp").join(format!(
        "tc-planted-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::write(&planted, "host-secret\n").unwrap();
    let g = default_grant(&p.dir);
    let prog = p.path("t");
    let o = run_argv(&g, &[prog.to_str().unwrap(), planted.to_str().unwrap()]);
    let _ = std::fs::remove_file(&planted);
    assert!(o.stdout.text.contains("HOST hidden"), "{}", describe(&o));
    if !namespace_free_run() {
        // The private /tmp: tmpfile() works there.
        assert!(o.stdout.text.contains("TMPFILE kept"), "{}", describe(&o));
        assert!(o.denials.is_empty(), "{:?}", o.denials);
        return;
    }
    // Namespace-free /tmp is the host's: tmpfile() fails, and the call's
    // result says why and what would change it.
    assert!(!o.exit.success(), "{}", describe(&o));
    let d = o
        .denials
        .iter()
        .find(|d| d.target == "/tmp")
        .unwrap_or_else(|| panic!("no /tmp denial: {:?}\n{}", o.denials, describe(&o)));
    assert!(d.reason.contains("tmpfile()"), "{d:?}");
    assert!(
        d.fix
            .as_deref()
            .is_some_and(|f| f.contains("private_tmp = false") && f.contains("add_write")),
        "{d:?}"
    );
    // Control: programs that honour TMPDIR, in the same call's grant, work.
    let o = sh(&g, "f=$(mktemp) && echo kept > \"$f\" && cat \"$f\"");
    assert_eq!(o.stdout.text.trim(), "kept", "{}", describe(&o));
    assert!(o.denials.is_empty(), "{:?}", o.denials);
}

#[test]
fn git_init_add_commit_log_works() {
    let p = Project::new("root-git");
    p.write("README", "hello\n");
    let mut g = default_grant(&p.dir);
    // A scratch project: .git is created by the call, so not protected here.
    g.protected.clear();
    let o = sh(
        &g,
        "git init -q . && git add README && \
         git -c user.name=t -c user.email=t@e commit -qm first && git log --oneline | wc -l",
    );
    assert_eq!(o.stdout.text.trim(), "1", "{}", describe(&o));
}

#[test]
fn a_huge_timeout_does_not_overflow() {
    let p = Project::new("root-huge-timeout");
    let mut g = default_grant(&p.dir);
    g.timeout = Duration::from_secs(u64::MAX);
    g.kill_grace = Duration::from_secs(u64::MAX);
    let o = sh(&g, "echo fine");
    assert_eq!(o.stdout.text.trim(), "fine", "{}", describe(&o));
}

#[test]
fn timeout_holds_after_the_tool_hands_its_stdout_away() {
    // The tool passes its stdout to a host process over a unix socket in
    // the project and exits; the call must not wait for that process.
    let p = Project::new("root-handoff");
    let sock = p.path("s.sock");
    let holder_code = format!(
        "import socket, time\ns = socket.socket(socket.AF_UNIX)\ns.bind({})\ns.listen(1)\nprint('READY', flush=True)\nc, _ = s.accept()\nmsg, fds, _, _ = socket.recv_fds(c, 1, 1)\ntime.sleep(6)",
        q(&sock)
    );
    let mut holder = std::process::Command::new(PY)
        .arg("-c")
        .arg(holder_code)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = [0u8; 6];
    std::io::Read::read_exact(holder.stdout.as_mut().unwrap(), &mut ready).unwrap();
    let mut g = default_grant(&p.dir);
    g.network = Network::On; // connect() to a unix socket
    g.timeout = Duration::from_secs(3);
    let code = format!(
        "s = socket.socket(socket.AF_UNIX)\ns.connect({})\nsocket.send_fds(s, [b'x'], [1])\nprint('HANDED', flush=True)",
        q(&sock)
    );
    let start = Instant::now();
    let o = py(&g, &code);
    let took = start.elapsed();
    let _ = holder.kill();
    let _ = holder.wait();
    assert!(o.stdout.text.contains("HANDED"), "{}", describe(&o));
    // Waiting on the holder's copy of stdout, the call would run into its
    // timeout instead of ending with the tool.
    assert_ne!(o.exit, Exit::Timeout, "call took {took:?}");
}
