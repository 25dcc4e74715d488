//! Planning the call's constructed root (the bubblewrap model).
//!
//! In the call's mount namespace the init mounts a tmpfs, pivots into it
//! (the host's root is then `/oldroot`), builds `/newroot` from what the
//! grant names, detaches the host's root and pivots into `/newroot`:
//!
//! * read roots are bound read-only, write roots read-write;
//! * protected paths inside write roots are re-bound read-only, denied
//!   paths inside roots are covered (an empty mode-000 tmpfs or file);
//! * every directory between a write root and a protected or denied path
//!   is pinned (bound onto itself), so renaming a parent fails with EBUSY;
//! * `/dev` is a tmpfs with null, zero, full, random, urandom, the device
//!   nodes the grant names, `/dev/fd` links and a private `/dev/shm`;
//! * `/proc` is always a fresh instance (never the host's);
//! * `/tmp` is a private tmpfs (`TMPDIR` and `HOME`);
//! * every mount is nosuid and nodev (device nodes: nosuid).
//!
//! A path outside the grant does not exist inside, so the metadata calls
//! Landlock does not hook (chmod, chown, utimes, xattrs) cannot reach it.
//! Everything is computed here, before `clone`; the child only executes
//! [`Step`]s.

use super::SandboxError;
use super::steps::{MOUNT_ATTR_NODEV, MOUNT_ATTR_NOSUID, MOUNT_ATTR_RDONLY, Step};
use crate::policy::Grant;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

const OLD: &str = "/oldroot";
const NEW: &str = "/newroot";
/// Device nodes every call gets (Landlock grants them read and write).
pub const STANDARD_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];
/// Parts of the fresh `/proc` that are bound read-only onto themselves.
const PROC_READ_ONLY: &[&str] = &["sys", "sysrq-trigger", "irq", "bus"];
/// Bytes for `/dev` and the root tmpfs: they hold only mount points.
const SMALL_TMPFS: &str = "size=64k,nr_inodes=4096";

/// A Landlock rule the tool adds itself, for a filesystem that exists only
/// inside the call (its inode is unknown to the parent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FreshAccess {
    Read,
    All,
}

/// A path whose identity is checked again after the call.
#[derive(Debug, Clone)]
pub struct Watched {
    pub path: PathBuf,
    pub dev_ino: (u64, u64),
}

pub struct RootPlan {
    pub steps: Vec<Step>,
    /// What each step does, for error messages (same length as `steps`).
    pub what: Vec<String>,
    /// Landlock rules the tool adds for fresh mounts (path in the new root).
    pub fresh_rules: Vec<(CString, FreshAccess)>,
    /// Protected paths that do not exist now; checked again after the call.
    pub missing_protected: Vec<PathBuf>,
    /// Protected paths that are symlinks, with their current target.
    pub protected_links: Vec<(PathBuf, PathBuf)>,
    /// Protected, denied and pinned paths with their device and inode.
    pub watched: Vec<Watched>,
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    /// Host content, bound recursively.
    Bind {
        writable: bool,
    },
    /// A host device node (no nodev).
    Device,
    /// A fresh tmpfs.
    Tmpfs {
        mode: u32,
        size: u64,
    },
    Proc,
    /// A private devpts instance (ptys granted).
    Devpts,
    /// A directory bound onto itself so it cannot be renamed.
    Pin,
    /// Host content re-bound read-only.
    Protect,
    MaskDir,
    MaskFile,
    Symlink {
        target: PathBuf,
    },
}

impl Kind {
    /// Order at one path: content first, then what overlays it.
    fn layer(&self) -> u8 {
        match self {
            Kind::Bind { .. } | Kind::Device | Kind::Symlink { .. } => 0,
            Kind::Tmpfs { .. } | Kind::Proc | Kind::Devpts => 1,
            Kind::Pin => 2,
            Kind::Protect | Kind::MaskDir | Kind::MaskFile => 3,
        }
    }
    /// The host's content is visible beneath this entry.
    fn host_content(&self) -> bool {
        matches!(self, Kind::Bind { .. } | Kind::Pin | Kind::Protect)
    }
    /// An empty filesystem we may create mount points in.
    fn fresh(&self) -> bool {
        matches!(self, Kind::Tmpfs { .. })
    }
}

struct Entry {
    path: PathBuf,
    kind: Kind,
    /// The mount point is a directory (else a file).
    dir: bool,
}

fn cstr(p: impl AsRef<std::ffi::OsStr>) -> Result<CString, SandboxError> {
    CString::new(p.as_ref().as_bytes()).map_err(|_| {
        SandboxError::Prepare(format!(
            "{}: contains a NUL byte",
            p.as_ref().to_string_lossy()
        ))
    })
}

/// `prefix` + absolute `p` (`/` maps to `prefix` itself).
fn under(prefix: &str, p: &Path) -> PathBuf {
    let rel = p.strip_prefix("/").unwrap_or(p);
    if rel.as_os_str().is_empty() {
        PathBuf::from(prefix)
    } else {
        Path::new(prefix).join(rel)
    }
}

fn lit(s: &str) -> CString {
    CString::new(s).expect("literal without NUL")
}

/// Mount flags of `path`'s mount that a remount must keep (they are locked
/// in a user namespace); only used where `mount_setattr` is missing.
fn locked_flags(path: &Path) -> libc::c_ulong {
    use nix::sys::statvfs::FsFlags;
    let Ok(st) = nix::sys::statvfs::statvfs(path) else {
        return 0;
    };
    let mut flags = 0;
    for (fs, ms) in [
        (FsFlags::ST_NOSUID, libc::MS_NOSUID),
        (FsFlags::ST_NODEV, libc::MS_NODEV),
        (FsFlags::ST_NOEXEC, libc::MS_NOEXEC),
        (FsFlags::ST_NOATIME, libc::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, libc::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if st.flags().contains(fs) {
            flags |= ms;
        }
    }
    flags
}

fn dev_ino(p: &Path) -> Option<(u64, u64)> {
    p.symlink_metadata().ok().map(|m| (m.dev(), m.ino()))
}

/// What a call under `grant` sees, before ordering.
struct Inputs<'a> {
    grant: &'a Grant,
    extra_read: &'a [PathBuf],
    hidden: &'a [PathBuf],
}

fn beneath(p: &Path, roots: &[PathBuf]) -> bool {
    roots.iter().any(|r| p.starts_with(r))
}

fn collect(inp: &Inputs, plan: &mut RootPlan) -> Vec<Entry> {
    let g = inp.grant;
    let proc_ = Path::new("/proc");
    let dev = Path::new("/dev");
    // Ptys come from a private devpts instance, never the host's.
    let ptmx = Path::new("/dev/ptmx");
    let pts = Path::new("/dev/pts");
    let wants_pty = g.write.iter().any(|w| w == ptmx || w == pts);
    let usable = |p: &&PathBuf| {
        !p.starts_with(proc_) && p != &ptmx && !p.starts_with(pts) && p.symlink_metadata().is_ok()
    };
    let writes: Vec<PathBuf> = g.write.iter().filter(usable).cloned().collect();
    let reads: Vec<PathBuf> = g
        .read
        .iter()
        .chain(inp.extra_read)
        .filter(usable)
        .cloned()
        .collect();
    let mut entries = Vec::new();
    let root_entry = |p: &PathBuf, writable: bool, entries: &mut Vec<Entry>| {
        let meta = match p.metadata() {
            Ok(m) => m,
            Err(_) => return,
        };
        // Beneath /dev: device nodes and their directories (/dev/pts), bound
        // without nodev.
        let kind = if p.starts_with(dev) && p != dev {
            Kind::Device
        } else {
            Kind::Bind { writable }
        };
        entries.push(Entry {
            path: p.clone(),
            kind,
            dir: meta.is_dir(),
        });
    };
    for (i, w) in writes.iter().enumerate() {
        // A write root inside another write root adds nothing.
        let covered = writes
            .iter()
            .enumerate()
            .any(|(j, o)| j != i && w.starts_with(o) && (w != o || j < i));
        if !covered {
            root_entry(w, true, &mut entries);
        }
    }
    for (i, r) in reads.iter().enumerate() {
        // Landlock's rights are a union: beneath a write root, or beneath
        // another read root, a read root adds nothing.
        let covered = beneath(r, &writes)
            || reads
                .iter()
                .enumerate()
                .any(|(j, o)| j != i && r.starts_with(o) && (r != o || j < i));
        if !covered {
            root_entry(r, false, &mut entries);
        }
    }
    let all_roots: Vec<PathBuf> = writes.iter().chain(&reads).cloned().collect();
    let root_is_bound = all_roots.iter().any(|r| r == Path::new("/"));
    let tmp_size = g.limits.file_size.unwrap_or(1 << 30);
    if !all_roots.iter().any(|r| r == dev) {
        entries.push(Entry {
            path: dev.into(),
            kind: Kind::Tmpfs {
                mode: 0o755,
                size: 0,
            },
            dir: true,
        });
        for d in STANDARD_DEVICES {
            let p = Path::new(d);
            let is_dev = p
                .metadata()
                .map(|m| m.file_type().is_char_device())
                .unwrap_or(false);
            if is_dev && !entries.iter().any(|e| e.path == p) {
                entries.push(Entry {
                    path: p.into(),
                    kind: Kind::Device,
                    dir: false,
                });
            }
        }
        for (name, target) in [
            ("fd", "/proc/self/fd"),
            ("stdin", "/proc/self/fd/0"),
            ("stdout", "/proc/self/fd/1"),
            ("stderr", "/proc/self/fd/2"),
        ] {
            entries.push(Entry {
                path: dev.join(name),
                kind: Kind::Symlink {
                    target: target.into(),
                },
                dir: false,
            });
        }
    }
    if wants_pty {
        entries.push(Entry {
            path: pts.into(),
            kind: Kind::Devpts,
            dir: true,
        });
        entries.push(Entry {
            path: ptmx.into(),
            kind: Kind::Symlink {
                target: "pts/ptmx".into(),
            },
            dir: false,
        });
        plan.fresh_rules.push((lit("/dev/pts"), FreshAccess::All));
    }
    entries.push(Entry {
        path: "/dev/shm".into(),
        kind: Kind::Tmpfs {
            mode: 0o1777,
            size: tmp_size,
        },
        dir: true,
    });
    plan.fresh_rules.push((lit("/dev/shm"), FreshAccess::All));
    entries.push(Entry {
        path: proc_.into(),
        kind: Kind::Proc,
        dir: true,
    });
    let proc_access = if g.write.iter().any(|w| w == proc_) {
        FreshAccess::All
    } else {
        FreshAccess::Read
    };
    plan.fresh_rules.push((lit("/proc"), proc_access));
    if g.private_tmp {
        entries.push(Entry {
            path: "/tmp".into(),
            kind: Kind::Tmpfs {
                mode: 0o1777,
                size: tmp_size,
            },
            dir: true,
        });
        plan.fresh_rules.push((lit("/tmp"), FreshAccess::All));
    }
    // Merged-/usr systems: /bin -> usr/bin and friends, where the target is
    // granted (roots are canonical, so the grant names /usr/bin).
    if !root_is_bound && let Ok(top) = std::fs::read_dir("/") {
        for e in top.flatten() {
            // The directory entry's type costs no syscall; readlink only links.
            if !e.file_type().is_ok_and(|t| t.is_symlink()) {
                continue;
            }
            let p = e.path();
            let Ok(target) = std::fs::read_link(&p) else {
                continue;
            };
            let granted = p
                .canonicalize()
                .is_ok_and(|real| beneath(&real, &all_roots));
            if granted && !entries.iter().any(|x| x.path == p) {
                entries.push(Entry {
                    path: p,
                    kind: Kind::Symlink { target },
                    dir: false,
                });
            }
        }
    }
    // Protected paths: read-only where they lie inside a write root.
    for p in &g.protected {
        if !beneath(p, &writes) {
            continue; // outside every write root nothing can write it anyway
        }
        match p.symlink_metadata() {
            Ok(m) if m.file_type().is_symlink() => {
                // A symlink cannot be a mount point: protect what it names,
                // and remember the link so that replacing it is reported.
                match (p.canonicalize(), std::fs::read_link(p)) {
                    (Ok(target), Ok(link)) => {
                        if beneath(&target, &writes) {
                            let dir = target.is_dir();
                            entries.push(Entry {
                                path: target,
                                kind: Kind::Protect,
                                dir,
                            });
                        }
                        plan.protected_links.push((p.clone(), link));
                    }
                    _ => plan.missing_protected.push(p.clone()),
                }
            }
            Ok(m) => entries.push(Entry {
                path: p.clone(),
                kind: Kind::Protect,
                dir: m.is_dir(),
            }),
            Err(_) => plan.missing_protected.push(p.clone()),
        }
    }
    for p in g.denied.iter().chain(inp.hidden) {
        if !beneath(p, &all_roots) {
            continue; // never granted in the first place
        }
        match p.metadata() {
            Ok(m) if m.is_dir() => entries.push(Entry {
                path: p.clone(),
                kind: Kind::MaskDir,
                dir: true,
            }),
            Ok(_) => entries.push(Entry {
                path: p.clone(),
                kind: Kind::MaskFile,
                dir: false,
            }),
            Err(_) => {}
        }
    }
    entries
}

/// Directories strictly between the nearest writable ancestor of each
/// guard (protected or denied path) and the guard itself.
fn pins(entries: &[Entry]) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    for e in entries {
        if !matches!(e.kind, Kind::Protect | Kind::MaskDir | Kind::MaskFile) {
            continue;
        }
        let Some(base) = entries
            .iter()
            .filter(|w| matches!(w.kind, Kind::Bind { writable: true }))
            .filter(|w| e.path.starts_with(&w.path) && e.path != w.path)
            .map(|w| &w.path)
            .max_by_key(|p| p.components().count())
        else {
            continue;
        };
        let mut dir = e.path.parent();
        while let Some(d) = dir {
            if d == base.as_path() || !d.starts_with(base) {
                break;
            }
            let taken = entries.iter().any(|x| x.path == d) || out.iter().any(|x| x.path == d);
            if !taken {
                out.push(Entry {
                    path: d.to_path_buf(),
                    kind: Kind::Pin,
                    dir: true,
                });
            }
            dir = d.parent();
        }
    }
    out
}

struct Builder {
    steps: Vec<Step>,
    what: Vec<String>,
}

impl Builder {
    fn push(&mut self, step: Step, what: String) {
        self.steps.push(step);
        self.what.push(what);
    }

    fn mount(
        &mut self,
        source: Option<CString>,
        target: &Path,
        fstype: Option<&str>,
        flags: libc::c_ulong,
        data: Option<String>,
        what: String,
    ) -> Result<(), SandboxError> {
        let step = Step::Mount {
            source,
            target: cstr(target)?,
            fstype: fstype.map(lit),
            flags,
            data: data.map(|d| lit(&d)),
        };
        self.push(step, what);
        Ok(())
    }

    fn set_attr(
        &mut self,
        target: &Path,
        host: &Path,
        set: u64,
        recursive: bool,
    ) -> Result<(), SandboxError> {
        let mut remount_flags = locked_flags(host);
        for (attr, ms) in [
            (MOUNT_ATTR_RDONLY, libc::MS_RDONLY),
            (MOUNT_ATTR_NOSUID, libc::MS_NOSUID),
            (MOUNT_ATTR_NODEV, libc::MS_NODEV),
        ] {
            if set & attr != 0 {
                remount_flags |= ms;
            }
        }
        let step = Step::SetAttr {
            path: cstr(target)?,
            set,
            recursive,
            remount_flags,
        };
        self.push(step, format!("restricting the mount at {}", host.display()));
        Ok(())
    }
}

/// Plan the root for `grant`. `base` is an empty directory toolcage owns
/// (the mount point of the staging tmpfs); `hidden` are toolcage's own
/// directories, covered wherever a root would show them.
pub fn plan(
    grant: &Grant,
    extra_read: &[PathBuf],
    base: &Path,
    hidden: &[PathBuf],
) -> Result<RootPlan, SandboxError> {
    let mut plan = RootPlan {
        steps: Vec::new(),
        what: Vec::new(),
        fresh_rules: Vec::new(),
        missing_protected: Vec::new(),
        protected_links: Vec::new(),
        watched: Vec::new(),
    };
    let inputs = Inputs {
        grant,
        extra_read,
        hidden,
    };
    let mut entries = collect(&inputs, &mut plan);
    let pinned = pins(&entries);
    entries.extend(pinned);
    entries.sort_by(|a, b| {
        a.path
            .cmp(&b.path)
            .then(a.kind.layer().cmp(&b.kind.layer()))
    });

    let mut b = Builder {
        steps: Vec::new(),
        what: Vec::new(),
    };
    let base_c = cstr(base)?;
    b.mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
        "making the mount namespace private".into(),
    )?;
    b.push(
        Step::Mount {
            source: Some(lit("tmpfs")),
            target: base_c.clone(),
            fstype: Some(lit("tmpfs")),
            flags: libc::MS_NOSUID | libc::MS_NODEV,
            data: Some(lit(&format!("mode=0755,{SMALL_TMPFS}"))),
        },
        format!("mounting the staging tmpfs at {}", base.display()),
    );
    b.push(
        Step::Chdir { path: base_c },
        "entering the staging tmpfs".into(),
    );
    b.push(
        Step::Mkdir {
            path: lit("newroot"),
            mode: 0o755,
        },
        "creating the new root".into(),
    );
    b.mount(
        Some(lit("tmpfs")),
        Path::new("newroot"),
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some(format!("mode=0755,{SMALL_TMPFS}")),
        "mounting the new root's tmpfs".into(),
    )?;
    b.push(
        Step::Mkdir {
            path: lit("oldroot"),
            mode: 0o755,
        },
        "creating the old root's mount point".into(),
    );
    b.push(
        Step::Touch {
            path: lit(".mask"),
            mode: 0,
        },
        "creating the mask file".into(),
    );
    b.push(
        Step::PivotRoot {
            new_root: lit("."),
            put_old: lit("oldroot"),
        },
        "pivoting into the staging tmpfs".into(),
    );
    b.push(
        Step::Chdir { path: lit("/") },
        "entering the new root".into(),
    );

    let mut created: Vec<PathBuf> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        // The nearest earlier entry that contains this one.
        let container = entries[..i]
            .iter()
            .rev()
            .filter(|c| e.path.starts_with(&c.path))
            .find(|c| c.dir || c.path == e.path);
        let needs_create = match container {
            None => true,
            Some(c) if c.path == e.path => false,
            Some(c) if c.kind.host_content() => false,
            Some(c) if c.kind.fresh() => true,
            Some(_) => continue, // beneath /proc or a mask: nothing to add
        };
        let is_guard = matches!(e.kind, Kind::Protect | Kind::MaskDir | Kind::MaskFile);
        if needs_create && is_guard {
            continue; // beneath a fresh filesystem the host path is not there
        }
        if needs_create {
            let start = container.map_or(PathBuf::from("/"), |c| c.path.clone());
            let mut parts: Vec<&Path> = e.path.ancestors().skip(1).collect();
            parts.reverse();
            for d in parts {
                if d.starts_with(&start) && d != start && !created.iter().any(|c| c == d) {
                    b.push(
                        Step::Mkdir {
                            path: cstr(under(NEW, d))?,
                            mode: 0o755,
                        },
                        format!("creating {}", d.display()),
                    );
                    created.push(d.to_path_buf());
                }
            }
            let target = cstr(under(NEW, &e.path))?;
            match (&e.kind, e.dir) {
                (Kind::Symlink { target: link }, _) => {
                    b.push(
                        Step::Symlink {
                            target: cstr(link)?,
                            path: target,
                        },
                        format!("creating the symlink {}", e.path.display()),
                    );
                    continue;
                }
                (_, true) => b.push(
                    Step::Mkdir {
                        path: target,
                        mode: 0o755,
                    },
                    format!("creating {}", e.path.display()),
                ),
                (_, false) => b.push(
                    Step::Touch {
                        path: target,
                        mode: 0o644,
                    },
                    format!("creating {}", e.path.display()),
                ),
            }
            created.push(e.path.clone());
        } else if matches!(e.kind, Kind::Symlink { .. }) {
            continue; // host content already has whatever is there
        }
        mount_entry(&mut b, e, &mut plan)?;
    }

    // Finish: read-only root and /dev, detach the host, pivot again.
    if let Some(dev) = entries
        .iter()
        .find(|e| e.path == Path::new("/dev") && e.kind.fresh())
    {
        b.set_attr(&under(NEW, &dev.path), &dev.path, MOUNT_ATTR_RDONLY, false)?;
    }
    let new = PathBuf::from(NEW);
    if !entries.iter().any(|e| e.path == Path::new("/")) {
        b.set_attr(
            &new,
            Path::new("/"),
            MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
            false,
        )?;
    }
    b.push(
        Step::Detach { path: lit(OLD) },
        "detaching the host's root".into(),
    );
    b.push(Step::Chdir { path: lit(NEW) }, "entering /newroot".into());
    b.push(
        Step::PivotRoot {
            new_root: lit("."),
            put_old: lit("."),
        },
        "pivoting into the constructed root".into(),
    );
    b.push(
        Step::Detach { path: lit(".") },
        "detaching the staging tmpfs".into(),
    );
    b.push(Step::Chdir { path: lit("/") }, "entering the root".into());
    plan.steps = b.steps;
    plan.what = b.what;
    Ok(plan)
}

fn mount_entry(b: &mut Builder, e: &Entry, plan: &mut RootPlan) -> Result<(), SandboxError> {
    let target = under(NEW, &e.path);
    let source = || cstr(under(OLD, &e.path));
    let shown = e.path.display();
    let bind = libc::MS_BIND | libc::MS_REC;
    match &e.kind {
        Kind::Bind { writable } => {
            b.mount(
                Some(source()?),
                &target,
                None,
                bind,
                None,
                format!("binding {shown}"),
            )?;
            let ro = if *writable { 0 } else { MOUNT_ATTR_RDONLY };
            b.set_attr(
                &target,
                &e.path,
                ro | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                true,
            )?;
        }
        Kind::Device => {
            b.mount(
                Some(source()?),
                &target,
                None,
                bind,
                None,
                format!("binding the device {shown}"),
            )?;
            b.set_attr(&target, &e.path, MOUNT_ATTR_NOSUID, true)?;
        }
        Kind::Pin | Kind::Protect => {
            b.mount(
                Some(source()?),
                &target,
                None,
                bind,
                None,
                format!("binding {shown} onto itself"),
            )?;
            let ro = if e.kind == Kind::Protect {
                MOUNT_ATTR_RDONLY
            } else {
                0
            };
            b.set_attr(
                &target,
                &e.path,
                ro | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                true,
            )?;
            if let Some(id) = dev_ino(&e.path) {
                plan.watched.push(Watched {
                    path: e.path.clone(),
                    dev_ino: id,
                });
            }
        }
        Kind::Tmpfs { mode, size } => {
            let size = if *size == 0 {
                SMALL_TMPFS.to_string()
            } else {
                format!("size={size}")
            };
            b.mount(
                Some(lit("tmpfs")),
                &target,
                Some("tmpfs"),
                libc::MS_NOSUID | libc::MS_NODEV,
                Some(format!("mode={mode:o},{size}")),
                format!("mounting a private tmpfs at {shown}"),
            )?;
        }
        Kind::Proc => {
            b.mount(
                Some(lit("proc")),
                &target,
                Some("proc"),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                None,
                "mounting a fresh /proc".into(),
            )?;
            // The kernel's knobs stay read-only whatever the grant says
            // (a root tool without capabilities still passes the sysctl
            // owner check), as in bubblewrap.
            for sub in PROC_READ_ONLY {
                let host = Path::new("/proc").join(sub);
                if host.symlink_metadata().is_err() {
                    continue;
                }
                let inner = target.join(sub);
                b.mount(
                    Some(cstr(&inner)?),
                    &inner,
                    None,
                    bind,
                    None,
                    format!("making {} read-only", host.display()),
                )?;
                b.set_attr(
                    &inner,
                    &host,
                    MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                    true,
                )?;
            }
        }
        Kind::Devpts => {
            b.mount(
                Some(lit("devpts")),
                &target,
                Some("devpts"),
                libc::MS_NOSUID | libc::MS_NOEXEC,
                Some("newinstance,ptmxmode=0666,mode=0620".into()),
                "mounting a private /dev/pts".into(),
            )?;
        }
        Kind::MaskDir => {
            b.mount(
                Some(lit("tmpfs")),
                &target,
                Some("tmpfs"),
                libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                Some("mode=000,size=4k".into()),
                format!("covering the denied directory {shown}"),
            )?;
            if let Some(id) = dev_ino(&e.path) {
                plan.watched.push(Watched {
                    path: e.path.clone(),
                    dev_ino: id,
                });
            }
        }
        Kind::MaskFile => {
            b.mount(
                Some(lit("/.mask")),
                &target,
                None,
                libc::MS_BIND,
                None,
                format!("covering the denied file {shown}"),
            )?;
            b.set_attr(
                &target,
                &e.path,
                MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                false,
            )?;
            if let Some(id) = dev_ino(&e.path) {
                plan.watched.push(Watched {
                    path: e.path.clone(),
                    dev_ino: id,
                });
            }
        }
        Kind::Symlink { .. } => {}
    }
    Ok(())
}

/// Paths in `watched` whose device or inode changed (or that vanished).
pub fn replaced(watched: &[Watched]) -> Vec<PathBuf> {
    watched
        .iter()
        .filter(|w| dev_ino(&w.path) != Some(w.dev_ino))
        .map(|w| w.path.clone())
        .collect()
}
