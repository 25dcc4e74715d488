//! Turning ordered entries into [`Step`]s: the mounts and the flags each
//! kind of entry gets.

use super::*;
use crate::root_open::identity;

pub(super) struct Builder {
    pub steps: Vec<Step>,
    pub what: Vec<String>,
    /// Device nodes in the fresh `/dev` get nosuid from one recursive
    /// `mount_setattr` on `/dev` at the end, not one call each.
    pub dev_nosuid_at_end: bool,
    /// [`Grant::link_bases`](toolcage_policy::Grant::link_bases): a root bound from the host is
    /// opened by [`open_root_stat`] beneath them, and the bind checked against
    /// what it opened.
    pub bases: Vec<PathBuf>,
}

impl Builder {
    pub(super) fn push(&mut self, step: Step, what: String) {
        self.steps.push(step);
        self.what.push(what);
    }

    pub(super) fn mount(
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

    pub(super) fn set_attr(
        &mut self,
        target: &Path,
        host: &Path,
        set: u64,
        recursive: bool,
    ) -> Result<(), SandboxError> {
        let remount_flags = (!has_mount_setattr()).then(|| {
            let mut flags = locked_flags(host);
            for (attr, ms) in [
                (MOUNT_ATTR_RDONLY, libc::MS_RDONLY),
                (MOUNT_ATTR_NOSUID, libc::MS_NOSUID),
                (MOUNT_ATTR_NODEV, libc::MS_NODEV),
            ] {
                if set & attr != 0 {
                    flags |= ms;
                }
            }
            flags
        });
        let step = Step::SetAttr {
            path: cstr(target)?,
            set,
            recursive,
            remount_flags,
        };
        self.push(step, format!("restricting the mount at {}", host.display()));
        Ok(())
    }

    /// Bind the host's `host` (under the old root) at `target`, with every
    /// mount beneath it, then add `attrs` to all of them.
    pub(super) fn bind(
        &mut self,
        host: &Path,
        target: &Path,
        attrs: u64,
        what: String,
    ) -> Result<(), SandboxError> {
        let source = cstr(under(OLD, host))?;
        let flags = libc::MS_BIND | libc::MS_REC;
        self.mount(Some(source), target, None, flags, None, what)?;
        self.set_attr(target, host, attrs, true)
    }
}

/// Remember `path`'s identity, checked again after the call.
fn watch(plan: &mut RootPlan, path: &Path) {
    if let Some(id) = dev_ino(path) {
        plan.watched.push(Watched {
            path: path.to_path_buf(),
            dev_ino: id,
        });
    }
}

/// The mount (or mounts) of one entry, by its kind; a guard's identity is
/// remembered to be checked after the call.
pub(super) fn mount_entry(
    b: &mut Builder,
    e: &Entry,
    plan: &mut RootPlan,
) -> Result<(), SandboxError> {
    let target = under(NEW, &e.path);
    let shown = e.path.display();
    match &e.kind {
        Kind::Bind { writable } => bind_root(b, &e.path, &target, *writable)?,
        Kind::Device => bind_device(b, &e.path, &target)?,
        Kind::Pin | Kind::Protect => {
            let ro = if e.kind == Kind::Protect {
                MOUNT_ATTR_RDONLY
            } else {
                0
            };
            let attrs = ro | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
            b.bind(
                &e.path,
                &target,
                attrs,
                format!("binding {shown} onto itself"),
            )?;
            watch(plan, &e.path);
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
        Kind::Scratch { sub } => {
            // A bind takes the flags of its source: nosuid, nodev.
            let source = cstr(Path::new(SCRATCH).join(sub))?;
            b.mount(
                Some(source),
                &target,
                None,
                libc::MS_BIND,
                None,
                format!("binding the private {shown} (the call's scratch tmpfs)"),
            )?;
        }
        Kind::Proc => mount_proc(b, &target)?,
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
        Kind::MaskDir | Kind::MaskFile => {
            mask(b, e, &target)?;
            watch(plan, &e.path);
        }
        Kind::Generated { source } => {
            let what = format!("binding toolcage's {shown}");
            let attrs = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
            b.bind(source, &target, attrs, what)?;
        }
        Kind::Symlink { .. } => {}
    }
    Ok(())
}

/// A granted root, bound from the host and checked to be what was opened.
fn bind_root(
    b: &mut Builder,
    path: &Path,
    target: &Path,
    writable: bool,
) -> Result<(), SandboxError> {
    let shown = path.display();
    let ro = if writable { 0 } else { MOUNT_ATTR_RDONLY };
    let attrs = ro | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    // The mount resolves its source again in the child: it must
    // land on what is opened here, no link planted in between.
    let (dev, ino) =
        identity(path, &b.bases).map_err(|err| SandboxError::Prepare(err.describe(path)))?;
    b.bind(path, target, attrs, format!("binding {shown}"))?;
    b.push(
        Step::Expect {
            path: cstr(target)?,
            dev,
            ino,
        },
        format!(
            "checking that the bind of {shown} is what the grant named \
             (it was replaced while the call started; run it again)"
        ),
    );
    Ok(())
}

/// Device nodes (and /dev/pts-like directories): no nodev.
fn bind_device(b: &mut Builder, path: &Path, target: &Path) -> Result<(), SandboxError> {
    let what = format!("binding the device {}", path.display());
    if b.dev_nosuid_at_end && within(path, Path::new("/dev")) {
        let source = cstr(under(OLD, path))?;
        b.mount(
            Some(source),
            target,
            None,
            libc::MS_BIND | libc::MS_REC,
            None,
            what,
        )
    } else {
        b.bind(path, target, MOUNT_ATTR_NOSUID, what)
    }
}

/// A fresh `/proc` whose kernel knobs stay read-only whatever the grant
/// says (a root tool without capabilities still passes the sysctl owner
/// check), as in bubblewrap.
fn mount_proc(b: &mut Builder, target: &Path) -> Result<(), SandboxError> {
    b.mount(
        Some(lit("proc")),
        target,
        Some("proc"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        None,
        "mounting a fresh /proc".into(),
    )?;
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
            libc::MS_BIND | libc::MS_REC,
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
    Ok(())
}

/// A denied directory under an empty read-only tmpfs, a denied file under
/// the mask file.
fn mask(b: &mut Builder, e: &Entry, target: &Path) -> Result<(), SandboxError> {
    let shown = e.path.display();
    if e.kind == Kind::MaskDir {
        return b.mount(
            Some(lit("tmpfs")),
            target,
            Some("tmpfs"),
            libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            Some("mode=000,size=4k".into()),
            format!("covering the denied directory {shown}"),
        );
    }
    // A bind takes the flags of its source: `/.mask` is read-only,
    // nosuid and nodev already (see `plan`).
    b.mount(
        Some(lit("/.mask")),
        target,
        None,
        libc::MS_BIND,
        None,
        format!("covering the denied file {shown}"),
    )
}
