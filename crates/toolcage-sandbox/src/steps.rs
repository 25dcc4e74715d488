//! The filesystem steps the namespace init performs to build the call's
//! root, prepared by the parent (every path a C string, every flag
//! computed) and executed in the child with raw syscalls only.

use std::ffi::CString;
use std::ptr;
use std::sync::OnceLock;

/// One filesystem operation in the child. Paths are absolute in the
/// child's view at the time the step runs.
pub(crate) enum Step {
    /// `mkdir(path, mode)`; an existing directory is fine.
    Mkdir {
        path: CString,
        mode: libc::mode_t,
    },
    /// Create an empty file (a mount point for a file bind); an existing
    /// file is fine.
    Touch {
        path: CString,
        mode: libc::mode_t,
    },
    /// `chmod(path, mode)` (mkdir's mode is masked by the umask).
    Chmod {
        path: CString,
        mode: libc::mode_t,
    },
    /// `symlink(target, path)`.
    Symlink {
        target: CString,
        path: CString,
    },
    /// `mount(2)`.
    Mount {
        source: Option<CString>,
        target: CString,
        fstype: Option<CString>,
        flags: libc::c_ulong,
        data: Option<CString>,
    },
    /// `mount_setattr(2)`: add `set` attributes (read-only, nosuid, nodev)
    /// to the mount at `path`, and to every mount beneath it when
    /// `recursive`. Falls back to a bind remount on kernels without it.
    SetAttr {
        path: CString,
        set: u64,
        recursive: bool,
        /// Flags for the fallback `MS_REMOUNT | MS_BIND` (the locked flags of
        /// the source plus what `set` asks for); `None` where the parent
        /// found `mount_setattr` ([`has_mount_setattr`]).
        remount_flags: Option<libc::c_ulong>,
    },
    Chdir {
        path: CString,
    },
    /// `pivot_root(new_root, put_old)`.
    PivotRoot {
        new_root: CString,
        put_old: CString,
    },
    /// `umount2(path, MNT_DETACH)`.
    Detach {
        path: CString,
    },
    /// `lstat(path)` must find this device and inode (what the parent
    /// opened for a root): else the step fails with `ESTALE`.
    Expect {
        path: CString,
        dev: u64,
        ino: u64,
    },
}

pub(crate) const MOUNT_ATTR_RDONLY: u64 = 0x1;
pub(crate) const MOUNT_ATTR_NOSUID: u64 = 0x2;
pub(crate) const MOUNT_ATTR_NODEV: u64 = 0x4;
const AT_RECURSIVE: u32 = 0x8000;

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// Whether `mount_setattr(2)` exists here (kernel 5.12, and no filter of
/// a container runtime answering ENOSYS). Asked once: where it exists the
/// parent need not read every source's mount flags for the fallback.
pub(crate) fn has_mount_setattr() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| {
        // SAFETY: a bad descriptor, an empty path and no attribute: the
        // kernel refuses the call (EINVAL) before it looks at anything.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_mount_setattr,
                -1,
                c"".as_ptr(),
                0u32,
                ptr::null::<MountAttr>(),
                0usize,
            )
        };
        !(rc < 0 && errno() == libc::ENOSYS)
    })
}

fn errno() -> i32 {
    // SAFETY: reads this thread's errno; the child runs in its own copy of
    // the parent's memory (no CLONE_VM), so this is its own errno.
    unsafe { *libc::__errno_location() }
}

fn opt_ptr(s: &Option<CString>) -> *const libc::c_char {
    s.as_ref().map_or(ptr::null(), |c| c.as_ptr())
}

/// Perform `step`; `Err(errno)` on failure.
///
/// # Safety
/// Only raw syscalls on memory owned by `step`: safe to call in a child of a
/// multi-threaded process before exec.
pub(crate) unsafe fn execute(step: &Step) -> Result<(), i32> {
    // SAFETY: every call below is a raw syscall (or its libc wrapper) taking
    // pointers into `step`, which outlives the call.
    let rc = unsafe {
        match step {
            Step::Mkdir { path, mode } => {
                if libc::mkdir(path.as_ptr(), *mode) != 0 && errno() != libc::EEXIST {
                    return Err(errno());
                }
                0
            }
            // One mknod for the usual new file; an existing name (a file
            // is fine, a symlink or a directory is not) takes the open.
            Step::Touch { path, mode }
                if libc::mknod(path.as_ptr(), libc::S_IFREG | *mode, 0) == 0 =>
            {
                0
            }
            Step::Touch { path, mode } => {
                if errno() != libc::EEXIST {
                    return Err(errno());
                }
                let fd = libc::open(
                    path.as_ptr(),
                    libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC | libc::O_NOFOLLOW,
                    *mode as libc::c_uint,
                );
                if fd < 0 {
                    return Err(errno());
                }
                libc::close(fd);
                0
            }
            Step::Chmod { path, mode } => libc::chmod(path.as_ptr(), *mode),
            Step::Symlink { target, path } => {
                if libc::symlink(target.as_ptr(), path.as_ptr()) != 0 && errno() != libc::EEXIST {
                    return Err(errno());
                }
                0
            }
            Step::Mount {
                source,
                target,
                fstype,
                flags,
                data,
            } => libc::mount(
                opt_ptr(source),
                target.as_ptr(),
                opt_ptr(fstype),
                *flags,
                opt_ptr(data).cast(),
            ),
            Step::SetAttr {
                path,
                set,
                recursive,
                remount_flags,
            } => {
                let attr = MountAttr {
                    attr_set: *set,
                    attr_clr: 0,
                    propagation: 0,
                    userns_fd: 0,
                };
                let flags = if *recursive { AT_RECURSIVE } else { 0 };
                let rc = libc::syscall(
                    libc::SYS_mount_setattr,
                    libc::AT_FDCWD,
                    path.as_ptr(),
                    flags,
                    &attr as *const MountAttr,
                    std::mem::size_of::<MountAttr>(),
                );
                match remount_flags {
                    Some(flags) if rc != 0 && errno() == libc::ENOSYS => libc::mount(
                        ptr::null(),
                        path.as_ptr(),
                        ptr::null(),
                        libc::MS_REMOUNT | libc::MS_BIND | *flags,
                        ptr::null(),
                    ),
                    _ => rc as libc::c_int,
                }
            }
            Step::Chdir { path } => libc::chdir(path.as_ptr()),
            Step::PivotRoot { new_root, put_old } => {
                libc::syscall(libc::SYS_pivot_root, new_root.as_ptr(), put_old.as_ptr())
                    as libc::c_int
            }
            Step::Detach { path } => libc::umount2(path.as_ptr(), libc::MNT_DETACH),
            Step::Expect { path, dev, ino } => {
                let mut st: libc::stat = std::mem::zeroed();
                if libc::lstat(path.as_ptr(), &mut st) != 0 {
                    return Err(errno());
                }
                if st.st_dev != *dev || st.st_ino != *ino {
                    return Err(libc::ESTALE);
                }
                0
            }
        }
    };
    if rc != 0 { Err(errno()) } else { Ok(()) }
}
