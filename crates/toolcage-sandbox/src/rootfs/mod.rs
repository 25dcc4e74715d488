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
//! * `/tmp` (`TMPDIR` and `HOME`) and `/dev/shm` are directories of one
//!   private tmpfs of `[limits] tmp` bytes, so together they hold no more
//!   of the host's memory than that;
//! * every mount is nosuid and nodev (device nodes: nosuid).
//!
//! A path outside the grant does not exist inside, so the metadata calls
//! Landlock does not hook (chmod, chown, utimes, xattrs) cannot reach it.
//! Everything is computed here, before `clone`; the child only executes
//! [`Step`]s.

use super::error::SandboxError;
use super::steps::{
    MOUNT_ATTR_NODEV, MOUNT_ATTR_NOSUID, MOUNT_ATTR_RDONLY, Step, has_mount_setattr,
};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use toolcage_policy::{Grant, within};

mod build;
mod collect;

use build::{Builder, mount_entry};
use collect::{Inputs, collect, pins};

const OLD: &str = "/oldroot";
const NEW: &str = "/newroot";
/// Device nodes every call gets (Landlock grants them read and write).
pub(crate) const STANDARD_DEVICES: &[&str] = &[
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
/// The call's scratch tmpfs in the staging root (detached with it; the
/// binds of its directories keep it alive as long as the call).
const SCRATCH: &str = "/.scratch";
/// Its directory that is the call's `/tmp`, and the one that is `/dev/shm`.
const SCRATCH_TMP: &str = "tmp";
const SCRATCH_SHM: &str = "shm";

/// A Landlock rule the tool adds itself, for a filesystem that exists only
/// inside the call (its inode is unknown to the parent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FreshAccess {
    Read,
    All,
}

/// A path whose identity is checked again after the call.
#[derive(Debug, Clone)]
pub(crate) struct Watched {
    pub path: PathBuf,
    pub dev_ino: (u64, u64),
}

pub(crate) struct RootPlan {
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
    /// A directory of the call's scratch tmpfs (`/tmp`, `/dev/shm`), bound.
    Scratch {
        sub: &'static str,
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
    /// A file toolcage made (domain mode's `resolv.conf`), bound read-only.
    Generated {
        source: PathBuf,
    },
}

impl Kind {
    /// Order at one path: content first, then what overlays it.
    fn layer(&self) -> u8 {
        match self {
            Kind::Bind { .. } | Kind::Device | Kind::Symlink { .. } => 0,
            Kind::Tmpfs { .. } | Kind::Scratch { .. } | Kind::Proc | Kind::Devpts => 1,
            Kind::Pin => 2,
            Kind::Protect | Kind::MaskDir | Kind::MaskFile | Kind::Generated { .. } => 3,
        }
    }
    /// The host's content is visible beneath this entry.
    fn host_content(&self) -> bool {
        matches!(self, Kind::Bind { .. } | Kind::Pin | Kind::Protect)
    }
    /// An empty filesystem we may create mount points in.
    fn fresh(&self) -> bool {
        matches!(self, Kind::Tmpfs { .. } | Kind::Scratch { .. })
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

/// Plan the root for `grant`. `base` is an empty directory toolcage owns
/// (the mount point of the staging tmpfs); `hidden` are toolcage's own
/// directories, covered wherever a root would show them; `files` are
/// (path inside, file on the host) pairs bound read-only over whatever is
/// at that path.
///
/// The steps: collect the entries, stage a tmpfs to build in, place each
/// entry (its directories, then its mount), finish (read-only, detach the
/// host, pivot into the new root).
pub(crate) fn plan(
    grant: &Grant,
    extra_read: &[PathBuf],
    base: &Path,
    hidden: &[PathBuf],
    files: &[(PathBuf, PathBuf)],
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
        files,
    };
    let entries = sorted_entries(&inputs, &mut plan);
    let fresh_dev = entries
        .iter()
        .any(|e| e.path == Path::new("/dev") && e.kind.fresh());
    let mut b = Builder {
        steps: Vec::new(),
        what: Vec::new(),
        // The fallback remount is not recursive: without mount_setattr
        // every device gets its own.
        dev_nosuid_at_end: fresh_dev && has_mount_setattr(),
        bases: grant.link_bases(),
    };
    stage(&mut b, base)?;
    scratch(&mut b, grant.limits.tmp)?;
    let mut created: Vec<PathBuf> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        if place(&mut b, &entries[..i], e, &mut created)? {
            mount_entry(&mut b, e, &mut plan)?;
        }
    }
    finish(&mut b, &entries)?;
    plan.steps = b.steps;
    plan.what = b.what;
    Ok(plan)
}

/// The entries with the pins that guard them, parents before children
/// and, at one path, lower layers first.
fn sorted_entries(inputs: &Inputs, plan: &mut RootPlan) -> Vec<Entry> {
    let mut entries = collect(inputs, plan);
    let pinned = pins(&entries);
    entries.extend(pinned);
    entries.sort_by(|a, b| {
        a.path
            .cmp(&b.path)
            .then(a.kind.layer().cmp(&b.kind.layer()))
    });
    entries
}

/// A private mount namespace, the staging tmpfs at `base` with the new
/// root's tmpfs and the read-only mask file in it, pivoted into.
fn stage(b: &mut Builder, base: &Path) -> Result<(), SandboxError> {
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
    // Read-only once here: every bind of it that covers a denied file
    // inherits the flags.
    b.mount(
        Some(lit(".mask")),
        Path::new(".mask"),
        None,
        libc::MS_BIND,
        None,
        "binding the mask file onto itself".into(),
    )?;
    b.push(
        Step::SetAttr {
            path: lit(".mask"),
            set: MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
            recursive: false,
            remount_flags: (!has_mount_setattr())
                .then_some(libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV),
        },
        "making the mask file read-only".into(),
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
    Ok(())
}

/// Make what `e` needs inside the new root (its missing parents, and
/// itself where no earlier entry provides it); true when it is then
/// mounted. `earlier` are the entries placed before it.
fn place(
    b: &mut Builder,
    earlier: &[Entry],
    e: &Entry,
    created: &mut Vec<PathBuf>,
) -> Result<bool, SandboxError> {
    // The nearest earlier entry that contains this one.
    let container = earlier
        .iter()
        .rev()
        .filter(|c| within(&e.path, &c.path))
        .find(|c| c.dir || c.path == e.path);
    let needs_create = match container {
        None => true,
        Some(c) if c.path == e.path => false,
        Some(c) if c.kind.host_content() => false,
        Some(c) if c.kind.fresh() => true,
        Some(_) => return Ok(false), // beneath /proc or a mask: nothing to add
    };
    let is_guard = matches!(e.kind, Kind::Protect | Kind::MaskDir | Kind::MaskFile);
    if needs_create && is_guard {
        return Ok(false); // beneath a fresh filesystem the host path is not there
    }
    if needs_create {
        let start = container.map_or(PathBuf::from("/"), |c| c.path.clone());
        make_parents(b, &e.path, &start, created)?;
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
                return Ok(false);
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
        return Ok(false); // host content already has whatever is there
    }
    Ok(true)
}

/// The directories between `start` (what contains `path`) and `path`
/// not yet made.
fn make_parents(
    b: &mut Builder,
    path: &Path,
    start: &Path,
    created: &mut Vec<PathBuf>,
) -> Result<(), SandboxError> {
    let mut parts: Vec<&Path> = path.ancestors().skip(1).collect();
    parts.reverse();
    for d in parts {
        if within(d, start) && d != start && !created.iter().any(|c| c == d) {
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
    Ok(())
}

/// Finish: read-only root and /dev, detach the host, pivot again.
fn finish(b: &mut Builder, entries: &[Entry]) -> Result<(), SandboxError> {
    if let Some(dev) = entries
        .iter()
        .find(|e| e.path == Path::new("/dev") && e.kind.fresh())
    {
        let target = under(NEW, &dev.path);
        if b.dev_nosuid_at_end {
            b.set_attr(&target, &dev.path, MOUNT_ATTR_NOSUID, true)?;
        }
        b.set_attr(&target, &dev.path, MOUNT_ATTR_RDONLY, false)?;
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
    Ok(())
}

/// Bytes of the tmp bound per file the scratch tmpfs may hold. The kernel
/// keeps about 1 KiB per file (inode and name) that the size does not
/// count: without a count, empty files alone pinned a kernel-default
/// half of RAM's pages in inodes (300,000 of them were 300 MiB of slab).
/// One file per 16 KiB keeps that under 1/16 of the bound.
const TMP_BYTES_PER_FILE: u64 = 16 << 10;

/// Files (and directories, symlinks) the scratch tmpfs of `size` bytes
/// may hold: one per [`TMP_BYTES_PER_FILE`], and at least 4096 (4 MiB of
/// inodes) for the smallest bounds.
pub(crate) fn tmp_files(size: u64) -> u64 {
    (size / TMP_BYTES_PER_FILE).max(4096)
}

/// The call's scratch tmpfs, `size` bytes and [`tmp_files`] files, with its
/// `/tmp` and `/dev/shm` directories: one instance, so the two together
/// hold at most `size` bytes of the host's memory (a tmpfs each would hold
/// twice that), and no more than 1/16 of it again in the kernel's inodes.
fn scratch(b: &mut Builder, size: u64) -> Result<(), SandboxError> {
    b.push(
        Step::Mkdir {
            path: lit(SCRATCH),
            mode: 0o700,
        },
        "creating the scratch tmpfs's mount point".into(),
    );
    b.mount(
        Some(lit("tmpfs")),
        Path::new(SCRATCH),
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some(format!(
            "mode=0700,size={size},nr_inodes={}",
            tmp_files(size)
        )),
        format!(
            "mounting the private /tmp and /dev/shm (one tmpfs of {size} bytes, {} files)",
            tmp_files(size)
        ),
    )?;
    for sub in [SCRATCH_TMP, SCRATCH_SHM] {
        let path = cstr(Path::new(SCRATCH).join(sub))?;
        b.push(
            Step::Mkdir {
                path: path.clone(),
                mode: 0o700,
            },
            format!("creating the scratch directory {sub}"),
        );
        // After mkdir: its mode is masked by the umask, and sticky like /tmp.
        b.push(
            Step::Chmod { path, mode: 0o1777 },
            format!("opening the scratch directory {sub} to every user (sticky)"),
        );
    }
    Ok(())
}

/// Paths in `watched` whose device or inode changed (or that vanished).
pub(crate) fn replaced(watched: &[Watched]) -> Vec<PathBuf> {
    watched
        .iter()
        .filter(|w| dev_ino(&w.path) != Some(w.dev_ino))
        .map(|w| w.path.clone())
        .collect()
}
