//! Escape suite, processes and kernel interfaces: denied syscalls (each
//! with a harmless syscall through the same ctypes path as the control),
//! TIOCSTI, other processes' /proc, signals, the scrubbed environment,
//! setuid, capabilities.

mod common;
mod escape_support;

use common::*;
use escape_support::*;
use std::process::Stdio;

const GETPID: &str = "t(lambda: sc(39))";

/// `call` must fail with `expected` where `getpid` through the same path works.
fn denied_syscall(tag: &str, call: &str, expected: &[&str]) {
    let p = Project::new(tag);
    let g = default_grant(&p.dir);
    assert_ok(&py(&g, GETPID), "getpid control");
    assert_denied(&py(&g, call), expected, tag);
}

#[test]
fn ptrace_is_denied() {
    denied_syscall(
        "sys-ptrace",
        "t(lambda: sc(101, 0, 0, 0, 0))",
        &["DENIED:EPERM"],
    );
    // Attaching to a child of our own, too.
    denied_syscall(
        "sys-ptrace-attach",
        "pid = os.fork()\nif pid == 0:\n    time.sleep(5); os._exit(0)\nt(lambda: sc(101, 16, pid, 0, 0))\nos.kill(pid, 9)",
        &["DENIED:EPERM"],
    );
}

#[test]
fn process_vm_readv_is_denied() {
    denied_syscall(
        "sys-pvm",
        "t(lambda: sc(310, 1, 0, 0, 0, 0, 0))",
        &["DENIED:EPERM"],
    );
}

#[test]
fn io_uring_is_denied() {
    denied_syscall(
        "sys-iouring",
        "buf = ctypes.create_string_buffer(120)\nt(lambda: sc(425, 8, ctypes.addressof(buf)))",
        &["DENIED:EPERM"],
    );
}

#[test]
fn user_namespaces_are_denied() {
    // unshare(CLONE_NEWUSER), clone(CLONE_NEWUSER) and unshare(1).
    denied_syscall(
        "sys-userns",
        "t(lambda: sc(272, 0x10000000))",
        &["DENIED:EPERM"],
    );
    denied_syscall(
        "sys-clone-userns",
        "t(lambda: sc(56, 0x10000000 | 17, 0, 0, 0, 0))",
        &["DENIED:EPERM"],
    );
    let p = Project::new("sys-unshare-cmd");
    let g = default_grant(&p.dir);
    attack_sh(
        &g,
        &g,
        "if [ \"$1\" ]; then :; fi; echo OK",
        &["OK"],
        "shell control",
    );
    let o = run_argv(
        &g,
        &[
            "/bin/sh",
            "-c",
            "unshare -Ur id -u && echo ESCAPED || echo DENIED",
        ],
    );
    assert_denied(&o, &["DENIED"], "unshare -Ur");
}

#[test]
fn fork_works_but_clone3_is_enosys() {
    let p = Project::new("sys-clone3");
    let g = default_grant(&p.dir);
    let fork = "def f():\n    pid = os.fork()\n    if pid == 0: os._exit(7)\n    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])\nt(f)";
    let o = py(&g, fork);
    assert_eq!(o.stdout.text.trim(), "OK:7", "{}", describe(&o));
    let args = ctypes_clone_args();
    assert_denied(&py(&g, &args), &["DENIED:ENOSYS"], "clone3");
}

fn ctypes_clone_args() -> String {
    "args = (ctypes.c_uint64 * 11)()\nargs[4] = 17\nt(lambda: sc(435, ctypes.addressof(args), 88))"
        .into()
}

#[test]
fn mount_is_denied() {
    denied_syscall(
        "sys-mount",
        "t(lambda: libc.mount(b'none', b'/tmp', b'tmpfs', 0, None) == 0 or sc(165, 0, 0, 0, 0, 0))",
        &["DENIED:EPERM"],
    );
    denied_syscall(
        "sys-fsopen",
        "t(lambda: sc(430, ctypes.addressof(ctypes.create_string_buffer(b'tmpfs')), 0))",
        &["DENIED:EPERM"],
    );
    denied_syscall(
        "sys-chroot",
        "t(lambda: os.chroot('/usr'))",
        &["DENIED:EPERM"],
    );
    denied_syscall("sys-pivot", "t(lambda: sc(155, 0, 0))", &["DENIED:EPERM"]);
}

#[test]
fn bpf_is_denied() {
    denied_syscall("sys-bpf", "t(lambda: sc(321, 0, 0, 0))", &["DENIED:EPERM"]);
}

#[test]
fn keyctl_is_denied() {
    // KEYCTL_GET_KEYRING_ID of the session keyring.
    denied_syscall(
        "sys-keyctl",
        "t(lambda: sc(250, 0, -3, 0))",
        &["DENIED:EPERM"],
    );
    denied_syscall(
        "sys-addkey",
        "t(lambda: sc(248, 0, 0, 0, 0, 0))",
        &["DENIED:EPERM"],
    );
}

#[test]
fn perf_event_open_is_denied() {
    let attr = "attr = ctypes.create_string_buffer(128)\nattr[4] = bytes([128])\n";
    denied_syscall(
        "sys-perf",
        &format!("{attr}t(lambda: sc(298, ctypes.addressof(attr), 0, -1, -1, 0))"),
        &["DENIED:EPERM"],
    );
}

#[test]
fn userfaultfd_and_pidfd_getfd_are_denied() {
    denied_syscall("sys-uffd", "t(lambda: sc(323, 0))", &["DENIED:EPERM"]);
    denied_syscall(
        "sys-pidfd-getfd",
        "t(lambda: sc(438, 0, 0, 0))",
        &["DENIED:EPERM"],
    );
}

#[test]
fn x32_syscall_numbers_are_refused() {
    // getpid and ptrace through the x32 ABI (nr | 0x40000000).
    denied_syscall(
        "sys-x32",
        "t(lambda: sc(39 | 0x40000000))",
        &["DENIED:EPERM"],
    );
    denied_syscall(
        "sys-x32-ptrace",
        "t(lambda: sc(521 | 0x40000000, 0, 0, 0, 0))",
        &["DENIED:EPERM"],
    );
}

#[test]
fn ia32_syscalls_kill_the_process() {
    // `int $0x80` enters the 32-bit syscall table, whose numbers a filter
    // keyed on x86_64 numbers would misread: the filter kills the process.
    let p = Project::new("sys-ia32");
    let src = p.write(
        "int80.c",
        "#include <stdio.h>\n#include <string.h>\n#include <unistd.h>\n#include <sys/syscall.h>\nint main(int c, char **v) {\n  long r;\n  if (c > 1 && !strcmp(v[1], \"int80\")) {\n    __asm__ volatile(\"int $0x80\" : \"=a\"(r) : \"a\"(20L) : \"memory\");\n  } else {\n    r = syscall(SYS_getpid);\n  }\n  printf(\"OK:%ld\\n\", r);\n  return 0;\n}\n",
    );
    let bin = p.path("int80");
    let gcc = std::process::Command::new("gcc")
        .arg("-O0")
        .arg("-o")
        .arg(&bin)
        .arg(&src)
        .status();
    if !gcc.is_ok_and(|s| s.success()) {
        eprintln!("gcc unavailable: skipping");
        return;
    }
    let host = std::process::Command::new(&bin)
        .arg("int80")
        .output()
        .unwrap();
    let g = default_grant(&p.dir);
    let bin_s = bin.display().to_string();
    assert_ok(&run_argv(&g, &[&bin_s]), "native getpid");
    if !host.status.success() {
        eprintln!("no ia32 emulation on this kernel: the attack cannot run");
        return;
    }
    let o = run_argv(&g, &[&bin_s, "int80"]);
    assert_eq!(
        o.exit,
        toolcage::sandbox::Exit::Signal(libc::SIGSYS),
        "{}",
        describe(&o)
    );
}

fn pty_grant(p: &Project) -> toolcage::policy::Grant {
    let mut g = default_grant(&p.dir);
    g.write.push("/dev/ptmx".into());
    g.write.push("/dev/pts".into());
    g
}

#[test]
fn tiocsti_is_denied() {
    let p = Project::new("sys-tiocsti");
    let g = pty_grant(&p);
    let pre = "import fcntl, termios, struct\nm, s = os.openpty()\n";
    let winsz = format!("{pre}t(lambda: len(fcntl.ioctl(s, termios.TIOCGWINSZ, b'\\0' * 8)))");
    assert_eq!(py(&g, &winsz).stdout.text.trim(), "OK:8");
    let sti = format!("{pre}t(lambda: fcntl.ioctl(s, termios.TIOCSTI, b'x') and None)");
    assert_denied(&py(&g, &sti), &["DENIED:EPERM"], "TIOCSTI");
    // The kernel reads the request as 32 bits: junk in the upper half must
    // not slip past the filter.
    let high = format!(
        "{pre}libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_char_p]\ndef f():\n    if libc.ioctl(s, (1 << 32) | termios.TIOCSTI, b'x') != 0:\n        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))\nt(f)"
    );
    assert_denied(&py(&g, &high), &["DENIED:EPERM"], "TIOCSTI high bits");
    let linux = format!("{pre}t(lambda: fcntl.ioctl(s, 0x541C, b'\\x06') and None)");
    assert_denied(&py(&g, &linux), &["DENIED:EPERM"], "TIOCLINUX");
}

#[test]
fn proc_environ_of_other_processes() {
    let p = Project::new("proc-environ");
    let g = default_grant(&p.dir);
    let m = marker(1);
    let mut outside = std::process::Command::new("sleep")
        .arg(&m)
        .env("ESCAPE_SECRET", "outside-secret-1")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let pid = outside.id();
    // Control: the environ of a process inside the sandbox is readable.
    let control = "import subprocess\nc = subprocess.Popen(['sleep', '5'], env={'ESCAPE_SECRET': 'inside-secret'})\ndef seen():\n    for _ in range(200):\n        if 'inside-secret' in open(f'/proc/{c.pid}/environ').read(): return 'read'\n        time.sleep(0.01)\n    return 'never exec-ed'\nt(seen)\nc.kill()";
    assert_eq!(py(&g, control).stdout.text.trim(), "OK:read");
    assert_ok(
        &py(&g, "t(lambda: len(open('/proc/self/environ').read()))"),
        "own environ",
    );
    // Attack: the host process by its host pid, and every pid visible.
    let attack = format!(
        "def f():\n    d = open('/proc/{pid}/environ').read()\n    if 'outside-secret-1' in d: return 'LEAK'\n    raise OSError(errno.ENOENT, 'not the host process')\nt(f)\nseen = [x for x in os.listdir('/proc') if x.isdigit()]\nleak = any('outside-secret-1' in open(f'/proc/{{x}}/environ', errors='replace').read() for x in seen if os.path.exists(f'/proc/{{x}}/environ'))\nprint('LEAK' if leak else '')"
    );
    let o = py(&g, &attack);
    outside.kill().unwrap();
    outside.wait().unwrap();
    assert_denied(&o, &["DENIED:ENOENT"], "/proc/<host pid>/environ");
}

#[test]
fn cannot_signal_processes_outside() {
    let p = Project::new("proc-kill");
    let g = default_grant(&p.dir);
    let m = marker(2);
    let mut outside = std::process::Command::new("sleep")
        .arg(&m)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let pid = outside.id();
    let control =
        "sleep 30 & if kill -9 $! && wait $!; [ $? = 137 ]; then echo OK; else echo FAIL; fi";
    let attack =
        format!("kill -9 {pid} 2>/dev/null && echo KILLED || echo DENIED; kill -9 -1; echo DONE");
    let ok = run_argv(&g, &["/bin/sh", "-c", control]);
    assert_ok(&ok, "kill inside");
    let bad = run_argv(&g, &["/bin/sh", "-c", &attack]);
    std::thread::sleep(std::time::Duration::from_millis(100));
    let alive = outside.try_wait().unwrap().is_none();
    outside.kill().ok();
    outside.wait().unwrap();
    assert!(
        alive,
        "the sandbox killed a process outside it\n{}",
        describe(&bad)
    );
    assert!(
        bad.stdout.text.starts_with("DENIED\n"),
        "{}",
        describe(&bad)
    );
}

#[test]
fn environment_is_scrubbed() {
    let p = Project::new("proc-env");
    let deny = default_grant(&p.dir);
    // A variable of the test process that the default allowlist leaves out
    // (cargo always sets CARGO_* for test binaries, and tests/unprivileged.sh
    // sets some; HOME is not a candidate: the sandbox sets its own).
    let (name, value) = std::env::vars()
        .find(|(k, v)| {
            !v.is_empty()
                && (k.starts_with("CARGO_") || k == "RUST_TEST_THREADS")
                && !v.contains('\n')
        })
        .expect("some host variable outside the allowlist");
    let mut allow = deny.clone();
    allow.env_allow.push(name.clone());
    let code = format!("t(lambda: os.environ[{name:?}])");
    let ok = py(&allow, &code);
    assert_eq!(
        ok.stdout.text.trim(),
        format!("OK:{value}"),
        "{}",
        describe(&ok)
    );
    let bad = py(
        &deny,
        &format!("print('DENIED:absent' if {name:?} not in os.environ else 'LEAK')"),
    );
    assert_denied(&bad, &["DENIED:absent"], "host variable");
    // Prefix patterns and per-call variables.
    let mut pattern = deny.clone();
    pattern.env_allow.push("CARGO_*".into());
    let o = py(
        &pattern,
        "t(lambda: sorted(k for k in os.environ if k.startswith('CARGO_')) != [] and 'some')",
    );
    assert_eq!(o.stdout.text.trim(), "OK:some");
    let cmd = toolcage::sandbox::Command {
        argv: vec![PY.into(), "-c".into(), "import os; print(os.environ.get('CALL_VAR'), os.environ.get('HOME') == os.environ.get('TMPDIR'))".into()],
        env: [("CALL_VAR".to_string(), "v".to_string())].into(),
        ..Default::default()
    };
    let o = toolcage::sandbox::run(&deny, &cmd, None).unwrap();
    assert_eq!(o.stdout.text.trim(), "v True");
}

#[test]
fn setuid_binaries_do_not_change_identity() {
    if !is_root() {
        // The control needs a binary owned by another user; as an ordinary
        // user, a setuid-root program of the system stays inert instead.
        let p = Project::new("proc-setuid-user");
        let su = ["/usr/bin/su", "/bin/su", "/usr/bin/passwd"]
            .into_iter()
            .find(|b| {
                std::fs::metadata(b).is_ok_and(|m| {
                    use std::os::unix::fs::MetadataExt;
                    m.uid() == 0 && m.mode() & 0o4000 != 0
                })
            });
        if let Some(bin) = su {
            let o = py(
                &default_grant(&p.dir),
                &format!(
                    "import subprocess\nr = subprocess.run([{bin:?}, '--help'], capture_output=True)\nt(lambda: os.geteuid())"
                ),
            );
            assert_eq!(
                o.stdout.text.trim(),
                format!("OK:{}", nix::unistd::geteuid())
            );
        }
        return;
    }
    let p = Project::new("proc-setuid");
    let bin = p.path("id-nobody");
    std::fs::copy("/usr/bin/id", &bin).unwrap();
    std::os::unix::fs::chown(&bin, Some(65534), Some(65534)).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o4755)).unwrap();
    // Control: outside the sandbox the setuid bit works.
    let host = std::process::Command::new(&bin).arg("-u").output().unwrap();
    assert_eq!(String::from_utf8_lossy(&host.stdout).trim(), "65534");
    // Inside, no_new_privs makes it inert.
    let g = default_grant(&p.dir);
    let o = run_argv(&g, &["./id-nobody", "-u"]);
    assert_eq!(o.stdout.text.trim(), "0", "{}", describe(&o));
    // A setuid-root program gains no capabilities either.
    let rootbin = p.path("py-root");
    std::fs::copy("/usr/bin/python3.11", &rootbin).unwrap();
    std::fs::set_permissions(&rootbin, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let o = run_argv(
        &g,
        &[
            "./py-root",
            "-c",
            "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('CapEff')][0])",
        ],
    );
    assert_eq!(o.stdout.text.trim(), "0000000000000000", "{}", describe(&o));
}

const STATUS: &str = "import sys\nf = dict((k, (v.split() or [''])[0]) for k, v in (l.split(':', 1) for l in open('/proc/self/status') if ':' in l))\nprint(' '.join(f[k] for k in ['CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb', 'NoNewPrivs', 'Seccomp']))";

#[test]
fn capabilities_are_all_dropped() {
    // Control: the same script outside the sandbox sees capabilities: this
    // root test process's own, or, run as an ordinary user, the full set a
    // user namespace gives (which is what toolcage's init starts with).
    let bnd = caps::read(None, caps::CapSet::Bounding).unwrap();
    assert!(!bnd.is_empty());
    let host = if is_root() {
        assert!(
            !caps::read(None, caps::CapSet::Effective)
                .unwrap()
                .is_empty()
        );
        std::process::Command::new(PY)
            .args(["-c", STATUS])
            .output()
            .unwrap()
    } else {
        std::process::Command::new("unshare")
            .args(["-Ur", PY, "-c", STATUS])
            .output()
            .unwrap()
    };
    let host = String::from_utf8_lossy(&host.stdout).to_string();
    assert_ne!(host.split(' ').nth(2), Some("0000000000000000"), "{host}");
    let p = Project::new("proc-caps");
    let o = py(&default_grant(&p.dir), STATUS);
    let z = "0000000000000000";
    let fields: Vec<&str> = o.stdout.text.split_whitespace().collect();
    if namespace_free_run() && !is_root() {
        // No user namespace: the bounding set cannot be changed (that needs
        // CAP_SETPCAP), and the user holds nothing; no_new_privs stops any
        // exec from gaining a capability.
        assert_eq!(
            [
                fields[0], fields[1], fields[2], fields[4], fields[5], fields[6]
            ],
            [z, z, z, z, "1", "2"],
            "{}",
            describe(&o)
        );
        return;
    }
    assert_eq!(
        o.stdout.text.trim(),
        format!("{z} {z} {z} {z} {z} 1 2"),
        "{}",
        describe(&o)
    );
}

#[test]
fn capabilities_cannot_be_regained() {
    // capset with empty sets is allowed (a no-op); asking for CAP_SYS_ADMIN is not.
    let p = Project::new("proc-capset");
    let g = default_grant(&p.dir);
    let code = |eff: u32| {
        format!(
            "hdr = (ctypes.c_uint32 * 2)(0x20080522, 0)\ndata = (ctypes.c_uint32 * 6)({eff}, {eff}, 0, 0, 0, 0)\nt(lambda: sc(126, ctypes.addressof(hdr), ctypes.addressof(data)))"
        )
    };
    assert_eq!(py(&g, &code(0)).stdout.text.trim(), "OK:0");
    assert_denied(
        &py(&g, &code(1 << 21)),
        &["DENIED:EPERM"],
        "capset SYS_ADMIN",
    );
    // And setuid to another user needs CAP_SETUID.
    // (As an ordinary user 65534 is not even mapped in the namespace.)
    assert_denied(
        &py(&g, "t(lambda: os.setuid(65534))"),
        &["DENIED:EPERM", "DENIED:EINVAL"],
        "setuid",
    );
}

#[test]
fn proc_is_private() {
    // The sandbox sees only its own processes: toolcage's init (pid 1) and
    // the tool (pid 2).
    let p = Project::new("proc-private");
    let g = default_grant(&p.dir);
    let o = py(
        &g,
        "t(lambda: (os.getpid(), sorted(int(x) for x in os.listdir('/proc') if x.isdigit())))",
    );
    if lacking_in_namespace_free_run(&o, "proc") {
        // The host's /proc: other processes' environment stays unreadable.
        assert_denied(
            &py(&g, "t(lambda: open('/proc/1/environ').read())"),
            &["DENIED:EACCES", "DENIED:EPERM"],
            "pid 1 environ",
        );
        return;
    }
    assert_eq!(o.stdout.text.trim(), "OK:(2, [1, 2])", "{}", describe(&o));
    // Control: the host's /proc lists far more than two processes.
    let host = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .count();
    assert!(host > 2, "{host}");
    // The init's environment (toolcage's own) is not readable by the tool.
    assert_denied(
        &py(&g, "t(lambda: open('/proc/1/environ').read())"),
        &["DENIED:EACCES", "DENIED:EPERM"],
        "init environ",
    );
}

/// The tool starts with no signal ignored, caught or blocked, although
/// this test process ignores SIGPIPE (Rust's runtime does) and toolcage's
/// init blocks every signal while it sets up.
#[test]
fn signals_start_default_and_unblocked() {
    let p = Project::new("proc-signals");
    let g = default_grant(&p.dir);
    // `cat` sets no handler of its own; ignored signals survive exec.
    let masks = |o: &toolcage::sandbox::Outcome| -> Vec<String> {
        o.stdout
            .text
            .lines()
            .filter(|l| {
                ["SigBlk:", "SigIgn:", "SigCgt:"]
                    .iter()
                    .any(|k| l.starts_with(k))
            })
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect()
    };
    let zero = "0000000000000000";
    let o = sh(&g, "exec cat /proc/self/status");
    assert_eq!(
        masks(&o),
        [
            format!("SigBlk: {zero}"),
            format!("SigIgn: {zero}"),
            format!("SigCgt: {zero}")
        ],
        "{}",
        describe(&o)
    );
    // Control: the same check sees a signal the shell ignores before exec.
    let o = sh(&g, "trap '' PIPE; exec cat /proc/self/status");
    assert!(
        masks(&o).contains(&"SigIgn: 0000000000001000".to_string()),
        "the check must see an ignored SIGPIPE\n{}",
        describe(&o)
    );
}
