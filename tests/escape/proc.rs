//! Escape suite, processes and kernel interfaces: denied syscalls (each
//! with a harmless syscall through the same ctypes path as the control),
//! TIOCSTI, other processes' /proc, signals, the scrubbed environment,
//! setuid, capabilities.

use crate::common;
use crate::escape_support;

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

/// `toolcage -C <project> exec ARGS` as a user runs it, namespace-free when
/// the suite is (a container-like filter on toolcage).
fn toolcage_exec(p: &Project, args: &[&str]) -> std::process::Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_toolcage"));
    cmd.arg("-C")
        .arg(&p.dir)
        .arg("exec")
        .args(args)
        .current_dir(&p.dir)
        .env("XDG_STATE_HOME", p.state_dir())
        .stdin(Stdio::null());
    if namespace_free_run() {
        without_namespaces(&mut cmd);
    }
    cmd.output().unwrap()
}

fn text(o: &std::process::Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}--- stderr\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A process of the same user outside the sandbox, killed when dropped.
struct Sibling(std::process::Child);

impl Sibling {
    fn start(n: u32) -> Sibling {
        Sibling(
            std::process::Command::new("sleep")
                .arg(marker(n))
                .spawn()
                .unwrap(),
        )
    }
    fn pid(&self) -> String {
        self.0.id().to_string()
    }
    /// What the tool could have changed: limits, niceness, scheduling
    /// policy (fields 19 and 41 of stat), CPU affinity, I/O priority.
    fn state(&self) -> String {
        let pid = self.0.id();
        let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let after_name = &stat[stat.rfind(')').unwrap() + 2..];
        let fields: Vec<&str> = after_name.split(' ').collect();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let cpus = status
            .lines()
            .find(|l| l.starts_with("Cpus_allowed_list"))
            .unwrap_or_default()
            .to_string();
        let ionice = std::process::Command::new("ionice")
            .args(["-p", &pid.to_string()])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        format!(
            "{limits}nice {} policy {}\n{cpus}\n{ionice}",
            fields[16], fields[38]
        )
    }
}

impl Drop for Sibling {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What a refused change of another process printed: EPERM namespace-free
/// (seccomp), ESRCH with a PID namespace (the process is not there).
fn refused_marker() -> &'static str {
    if namespace_free_run() {
        "EPERM"
    } else {
        "ESRCH"
    }
}

/// Shell: run "$@" and print CHANGED, EPERM, ESRCH or what it said.
const VERDICT: &str = r#"verdict() { if out=$("$@" 2>&1); then echo CHANGED; else case $out in *"not permitted"*) echo EPERM;; *"No such process"*) echo ESRCH;; *) echo "OTHER:$out";; esac; fi; }"#;

#[test]
fn limits_of_other_processes_cannot_be_changed() {
    // Namespace-free the host's pids are visible and prlimit64 on a process
    // of the same user is allowed by the kernel (Landlock does not hook
    // it): a tool lowering RLIMIT_FSIZE of `toolcage serve` kills it with
    // SIGXFSZ. Targets: a sibling process, and toolcage itself (the init's
    // parent, set to the limits it already has). Control: a tool lowers its
    // own limits, by prlimit on its command and by `ulimit`.
    let p = Project::new("proc-prlimit");
    let sib = Sibling::start(21);
    let before = sib.state();
    let script = format!(
        "{VERDICT}\n\
         verdict prlimit --pid {sib} --nofile=16:16 --fsize=1\n\
         tc=$(awk '/^PPid/ {{print $2}}' /proc/$PPID/status)\n\
         if [ \"${{tc:-0}}\" -gt 0 ]; then\n\
           lim=$(prlimit --pid $tc --nofile --raw --noheadings -o SOFT,HARD | tr -s ' ' ':' | sed 's/^://')\n\
           echo TOOLCAGE $(verdict prlimit --pid $tc --nofile=$lim)\n\
         fi\n\
         prlimit --nofile=64:64 sh -c 'ulimit -n'\n\
         ulimit -n 32 && ulimit -n",
        sib = sib.pid()
    );
    let o = toolcage_exec(&p, &["--", "sh", "-c", &script]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let want = if namespace_free_run() {
        "EPERM\nTOOLCAGE EPERM\n64\n32\n"
    } else {
        // In the PID namespace the init's parent is not there.
        "ESRCH\n64\n32\n"
    };
    assert_eq!(out, want, "{}", text(&o));
    assert_eq!(sib.state(), before, "the sibling's limits changed");
}

#[test]
fn priorities_of_other_processes_cannot_be_changed() {
    // renice, taskset and ionice on another process (and renice of every
    // process of the user) are refused; the same programs on the tool's
    // own command work (nice, taskset -c, ionice -c run a command).
    let p = Project::new("proc-prio");
    let sib = Sibling::start(22);
    let before = sib.state();
    let script = format!(
        "{VERDICT}\n\
         verdict renice -n 7 -p {sib}\n\
         verdict taskset -p -c 0 {sib}\n\
         verdict ionice -c 3 -p {sib}\n\
         nice -n 7 nice\n\
         taskset -c 0 sh -c 'taskset -p $$' | sed 's/.*: //'\n\
         ionice -c 3 sh -c ionice\n\
         verdict renice -n 7 -u $(id -u)",
        sib = sib.pid()
    );
    let o = toolcage_exec(&p, &["--", "sh", "-c", &script]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let r = refused_marker();
    let (each, user) = out
        .rsplit_once('\n')
        .unwrap_or_default()
        .0
        .rsplit_once('\n')
        .unwrap();
    assert_eq!(each, format!("{r}\n{r}\n{r}\n7\n1\nidle"), "{}", text(&o));
    // renice -u: namespace-free it would reach every process of the user;
    // in a PID namespace the kernel applies it to the call's own only (and
    // refuses the init's: EPERM).
    if namespace_free_run() {
        assert_eq!(user, "EPERM", "{}", text(&o));
    }
    assert_eq!(sib.state(), before, "the sibling's priorities changed");
}

#[test]
fn raw_syscalls_on_other_processes_are_refused() {
    // Each syscall that names a process: on a sibling outside the sandbox
    // it fails (EPERM namespace-free: seccomp, or Landlock's ptrace and
    // signal scopes for kcmp and pidfd_send_signal; ESRCH with a PID
    // namespace); the same call on the caller itself (pid 0, or its own
    // pid or child where 0 does not mean self) succeeds.
    let p = Project::new("proc-rawpid");
    let g = default_grant(&p.dir);
    let sib = Sibling::start(23);
    let before = sib.state();
    let calls: &[(&str, &str)] = &[
        (
            "sched_setscheduler",
            "lambda pid: os.sched_setscheduler(pid, os.SCHED_BATCH, os.sched_param(0))",
        ),
        (
            "sched_setparam",
            "lambda pid: os.sched_setparam(pid, os.sched_param(0))",
        ),
        (
            "sched_setaffinity",
            "lambda pid: os.sched_setaffinity(pid, {0})",
        ),
        // struct sched_attr, first version (48 bytes): SCHED_BATCH.
        (
            "sched_setattr",
            "lambda pid: sc(314, pid, ctypes.addressof(attr), 0) and None",
        ),
        (
            "prlimit64",
            "lambda pid: resource.prlimit(pid, resource.RLIMIT_NOFILE, resource.getrlimit(resource.RLIMIT_NOFILE)) and None",
        ),
        (
            "setpriority",
            "lambda pid: os.setpriority(os.PRIO_PROCESS, pid, 5)",
        ),
        (
            "ioprio_set",
            "lambda pid: sc(251, 1, pid, (3 << 13)) and None",
        ),
        (
            "get_robust_list",
            "lambda pid: sc(274, pid, ctypes.addressof(head), ctypes.addressof(size)) and None",
        ),
        (
            "migrate_pages",
            "lambda pid: sc(256, pid, 64, ctypes.addressof(mask), ctypes.addressof(mask)) and None",
        ),
        (
            "move_pages",
            "lambda pid: sc(279, pid, 0, 0, 0, 0, 0) and None",
        ),
    ];
    let pre = "import resource\nattr = (ctypes.c_uint32 * 12)(48, 3)\nhead = ctypes.c_void_p()\nsize = ctypes.c_size_t()\nmask = ctypes.c_ulong(1)\n";
    let r = format!("DENIED:{}", refused_marker());
    for (name, call) in calls {
        let own = py(&g, &format!("{pre}t(lambda: ({call})(0))"));
        assert_ok(&own, &format!("{name} on the caller"));
        let other = py(&g, &format!("{pre}t(lambda: ({call})({}))", sib.pid()));
        assert_denied(&other, &[&r], &format!("{name} on another process"));
    }
    // kcmp: 0 is no process; the caller names itself by its pid.
    let kcmp = |target: &str| format!("t(lambda: sc(312, os.getpid(), {target}, 1, 0, 0))");
    assert_eq!(py(&g, &kcmp("os.getpid()")).stdout.text.trim(), "OK:0");
    assert_denied(&py(&g, &kcmp(&sib.pid())), &[&r], "kcmp");
    // A pidfd: signalling its own child works, a sibling is not reached.
    let signal = |target: &str| {
        format!(
            "import signal\ndef f():\n    fd = os.pidfd_open({target})\n    signal.pidfd_send_signal(fd, 0)\nt(f)"
        )
    };
    let child = "c = os.fork()\nif c == 0:\n    time.sleep(5); os._exit(0)\n";
    assert_ok(
        &py(&g, &format!("{child}{}", signal("c"))),
        "pidfd, own child",
    );
    assert_denied(&py(&g, &signal(&sib.pid())), &[&r], "pidfd_send_signal");
    assert_eq!(sib.state(), before, "the sibling changed");
}

#[test]
fn process_madvise_and_process_mrelease_are_denied() {
    // On a pidfd whose owner the filter cannot see: refused even for the
    // caller's own (on main: process_madvise of itself returned the byte
    // count, process_mrelease of a live child EINVAL).
    let pidfd = "fd = os.pidfd_open(os.getpid())\nbuf = ctypes.create_string_buffer(4096)\niov = (ctypes.c_uint64 * 2)(ctypes.addressof(buf), 4096)\n";
    denied_syscall(
        "sys-pmadvise",
        &format!("{pidfd}t(lambda: sc(440, fd, ctypes.addressof(iov), 1, 20, 0))"),
        &["DENIED:EPERM"],
    );
    denied_syscall(
        "sys-pmrelease",
        "c = os.fork()\nif c == 0:\n    time.sleep(5); os._exit(0)\nfd = os.pidfd_open(c)\nt(lambda: sc(448, fd, 0))\nos.kill(c, 9)",
        &["DENIED:EPERM"],
    );
}

#[test]
fn tiocsetd_is_denied() {
    // A tool could leave the operator's terminal on another line
    // discipline (silent) after the call. Control: reading it (TIOCGETD).
    let p = Project::new("sys-tiocsetd");
    let g = pty_grant(&p);
    let pre = "import fcntl, termios, struct\nm, s = os.openpty()\n";
    let get = format!(
        "{pre}t(lambda: struct.unpack('i', fcntl.ioctl(s, termios.TIOCGETD, b'\\0' * 4))[0])"
    );
    assert_eq!(py(&g, &get).stdout.text.trim(), "OK:0");
    let set =
        format!("{pre}t(lambda: fcntl.ioctl(s, termios.TIOCSETD, struct.pack('i', 0)) and None)");
    assert_denied(&py(&g, &set), &["DENIED:EPERM"], "TIOCSETD");
}

/// Runs `script` under `sh` on a fresh pseudo-terminal (Python's `pty`),
/// namespace-free when the suite is; returns what the terminal showed.
fn on_a_terminal(p: &Project, script: &str) -> String {
    let driver = r#"
import os, pty, sys, select
pid, fd = pty.fork()
if pid == 0:
    os.execv('/bin/sh', ['sh', '-c', sys.argv[1]])
out = b''
while True:
    try:
        r, _, _ = select.select([fd], [], [], 60)
    except InterruptedError:
        continue
    if not r:
        break
    try:
        d = os.read(fd, 4096)
    except OSError:
        break
    if not d:
        break
    out += d
os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors='replace').replace('\r', ''))
"#;
    let mut cmd = std::process::Command::new(PY);
    cmd.args(["-c", driver, script])
        .current_dir(&p.dir)
        .env("XDG_STATE_HOME", p.state_dir())
        .env("TC", env!("CARGO_BIN_EXE_toolcage"))
        .stdin(Stdio::null());
    if namespace_free_run() {
        without_namespaces(&mut cmd);
    }
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn the_terminal_is_put_back_after_exec() {
    // A tool on the operator's terminal turns echo and canonical mode off
    // (stty -echo -icanon, as an editor does while it runs: it must keep
    // working inside) and tries another line discipline (TIOCSETD,
    // refused). After `toolcage exec` returns the terminal is as it was:
    // when the command exits, when it times out, and when toolcage is
    // stopped by SIGTERM. Control: the change is seen inside the call.
    let p = Project::new("proc-terminal");
    p.write(
        "flags.sh",
        "stty -a | tr ' ;' '\\n\\n' | grep -x -e '-*echo' -e '-*icanon' | tr '\\n' ' '\n",
    );
    p.write(
        "setd.py",
        "import errno, fcntl, struct, termios\n\
         try:\n    fcntl.ioctl(0, termios.TIOCSETD, struct.pack('i', 0))\n    print('SETD:CHANGED')\n\
         except OSError as e:\n    print('SETD:' + errno.errorcode[e.errno])\n",
    );
    let script = format!(
        "stty echo icanon\n\
         \"$TC\" -q -C . exec -- sh -c 'stty -echo -icanon; echo INSIDE: $(sh flags.sh); {PY} setd.py'\n\
         echo EXIT:$? AFTER: $(sh flags.sh)\n\
         \"$TC\" -q -C . exec --timeout 1s -- sh -c 'stty -echo -icanon; sleep 30'\n\
         echo EXIT:$? AFTER: $(sh flags.sh)\n\
         \"$TC\" -q -C . exec -- sh -c 'stty -echo -icanon <&1; touch ready; sleep 30' &\n\
         i=0; while [ ! -e ready ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done\n\
         kill -TERM $!; wait $!\n\
         echo EXIT:$? AFTER: $(sh flags.sh)"
    );
    let shown = on_a_terminal(&p, &script);
    let lines: Vec<&str> = shown
        .lines()
        .filter(|l| {
            ["INSIDE:", "SETD:", "EXIT:"]
                .iter()
                .any(|m| l.starts_with(m))
        })
        .collect();
    assert_eq!(
        lines,
        [
            "INSIDE: -icanon -echo",
            "SETD:EPERM",
            "EXIT:0 AFTER: icanon echo",
            "EXIT:124 AFTER: icanon echo",
            "EXIT:143 AFTER: icanon echo",
        ],
        "{shown}"
    );
}

#[test]
fn stopped_output_and_exclusive_mode_are_put_back_after_exec() {
    // A tool on the operator's terminal stops its output (tcflow TCOOFF:
    // nothing shows until ^Q, for good with -ixon) and puts it in
    // exclusive mode (TIOCEXCL: every later open but root's fails with
    // EBUSY, sudo's prompt too). After `toolcage exec` returns, output
    // runs and the mode is cleared: when the command exits and when it
    // times out. Controls: the same ioctls outside toolcage stay in force
    // until undone (the probes see them), and exclusive mode is seen
    // inside the call.
    let p = Project::new("proc-terminal-flow");
    p.write(
        "term.py",
        "import fcntl, os, struct, sys, termios\n\
         what = sys.argv[1]\n\
         if what == 'stop': termios.tcflow(1, termios.TCOOFF)\n\
         elif what == 'start': termios.tcflow(1, termios.TCOON)\n\
         elif what == 'excl': fcntl.ioctl(1, termios.TIOCEXCL)\n\
         elif what == 'nxcl': fcntl.ioctl(1, termios.TIOCNXCL)\n\
         elif what == 'exclusive':\n\
         \x20   on = fcntl.ioctl(1, 0x80045440, struct.pack('i', 0))\n\
         \x20   sys.exit(struct.unpack('i', on)[0])\n\
         elif what == 'stopped':\n\
         \x20   # A write to a stopped terminal would block: O_NONBLOCK says EAGAIN.\n\
         \x20   flags = fcntl.fcntl(1, fcntl.F_GETFL)\n\
         \x20   fcntl.fcntl(1, fcntl.F_SETFL, flags | os.O_NONBLOCK)\n\
         \x20   try:\n\
         \x20       os.write(1, b'\\n')\n\
         \x20       code = 0\n\
         \x20   except BlockingIOError:\n\
         \x20       code = 1\n\
         \x20   fcntl.fcntl(1, fcntl.F_SETFL, flags)\n\
         \x20   sys.exit(code)\n",
    );
    // After each: probe, then undo whatever is left so the driver still
    // reads the rest, then print what the probes saw.
    let probe = format!(
        "{PY} term.py stopped; s=$?; {PY} term.py start; \
         {PY} term.py exclusive; x=$?; {PY} term.py nxcl"
    );
    let script = format!(
        "{PY} term.py stop; {probe}; echo CONTROL: stopped=$s exclusive=$x\n\
         {PY} term.py excl; {probe}; echo CONTROL: stopped=$s exclusive=$x\n\
         \"$TC\" -q -C . exec -- sh -c '{PY} term.py excl; {PY} term.py exclusive; echo INSIDE: exclusive=$?; {PY} term.py stop'\n\
         e=$?; {probe}; echo EXIT:$e AFTER: stopped=$s exclusive=$x\n\
         \"$TC\" -q -C . exec --timeout 1s -- sh -c '{PY} term.py excl; {PY} term.py stop; sleep 30'\n\
         e=$?; {probe}; echo EXIT:$e AFTER: stopped=$s exclusive=$x"
    );
    let shown = on_a_terminal(&p, &script);
    let lines: Vec<&str> = shown
        .lines()
        .filter(|l| {
            ["CONTROL:", "INSIDE:", "EXIT:"]
                .iter()
                .any(|m| l.starts_with(m))
        })
        .collect();
    assert_eq!(
        lines,
        [
            "CONTROL: stopped=1 exclusive=0",
            "CONTROL: stopped=0 exclusive=1",
            "INSIDE: exclusive=1",
            "EXIT:0 AFTER: stopped=0 exclusive=0",
            "EXIT:124 AFTER: stopped=0 exclusive=0",
        ],
        "{shown}"
    );
}
