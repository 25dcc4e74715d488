//! The private mount namespace: protected paths become read-only bind
//! mounts, denied paths are covered by an inaccessible mask, and `/proc`
//! is a fresh instance that shows only the sandbox's own processes.
//!
//! Landlock rules are additive, so "read-only inside a write root" and "no
//! access inside a read root" cannot be expressed with Landlock alone.

use super::child::MountCall;
use crate::policy::Grant;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

pub struct MountPlan {
    pub calls: Vec<MountCall>,
    /// Protected paths that do not exist now; checked again after the call.
    pub missing_protected: Vec<PathBuf>,
    /// Protected paths that are symlinks, with their current target; the
    /// link itself sits in a writable directory, so it is checked again
    /// after the call.
    pub protected_links: Vec<(PathBuf, PathBuf)>,
}

fn cstr(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).expect("paths from the OS have no NUL")
}

fn lit(s: &str) -> Option<CString> {
    Some(CString::new(s).expect("literal has no NUL"))
}

/// Mount flags a read-only remount must keep (they are locked in a user
/// namespace, and dropping them elsewhere would loosen the mount).
fn locked_flags(path: &Path) -> libc::c_ulong {
    let Ok(st) = nix::sys::statvfs::statvfs(path) else {
        return 0;
    };
    use nix::sys::statvfs::FsFlags;
    let f = st.flags();
    let mut flags = 0;
    for (fs, ms) in [
        (FsFlags::ST_NOSUID, libc::MS_NOSUID),
        (FsFlags::ST_NODEV, libc::MS_NODEV),
        (FsFlags::ST_NOEXEC, libc::MS_NOEXEC),
        (FsFlags::ST_NOATIME, libc::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, libc::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if f.contains(fs) {
            flags |= ms;
        }
    }
    flags
}

fn inside_any(path: &Path, roots: &[PathBuf]) -> bool {
    roots.iter().any(|r| path.starts_with(r))
}

fn read_only_bind(source: &Path, target: &Path, calls: &mut Vec<MountCall>) {
    calls.push(MountCall {
        source: Some(cstr(source)),
        target: cstr(target),
        fstype: None,
        flags: libc::MS_BIND | libc::MS_REC,
        data: None,
        optional: false,
    });
    calls.push(MountCall {
        source: None,
        target: cstr(target),
        fstype: None,
        flags: libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | locked_flags(source),
        data: None,
        optional: false,
    });
}

/// Whether `/proc` is granted (read or write): it is then a fresh instance
/// that shows only the sandbox's processes, never the host's.
pub fn fresh_proc(grant: &Grant) -> bool {
    let proc = Path::new("/proc");
    grant.read.iter().chain(&grant.write).any(|p| p == proc)
}

/// Whether `grant` needs a mount namespace at all.
pub fn needed(grant: &Grant) -> bool {
    grant.private_tmp
        || fresh_proc(grant)
        || grant.protected.iter().any(|p| inside_any(p, &grant.write))
        || !grant.denied.is_empty()
}

/// Plan the mounts for `grant`. `mask_file` is an empty mode-000 file that
/// the sandbox cannot reach, used to cover denied files; `private_tmp` gets
/// a fresh tmpfs.
pub fn plan(grant: &Grant, mask_file: &Path, private_tmp: Option<&Path>) -> MountPlan {
    let mut calls = vec![MountCall {
        source: None,
        target: lit("/").unwrap(),
        fstype: None,
        flags: libc::MS_REC | libc::MS_PRIVATE,
        data: None,
        optional: false,
    }];
    if let Some(tmp) = private_tmp {
        let size = grant.limits.file_size.unwrap_or(1 << 30);
        calls.push(MountCall {
            source: lit("tmpfs"),
            target: cstr(tmp),
            fstype: lit("tmpfs"),
            flags: libc::MS_NOSUID | libc::MS_NODEV,
            data: lit(&format!("mode=0700,size={size}")),
            optional: false,
        });
    }
    let mut missing_protected = Vec::new();
    let mut protected_links = Vec::new();
    let roots: Vec<PathBuf> = grant.read.iter().chain(&grant.write).cloned().collect();
    for p in &grant.protected {
        if !inside_any(p, &grant.write) {
            continue; // outside every write root Landlock already forbids writes
        }
        match p.symlink_metadata() {
            Ok(m) if m.file_type().is_symlink() => {
                // A symlink cannot be a mount point: protect what it names
                // (writes through the link reach the target), and remember
                // the link so that replacing it is reported.
                match (p.canonicalize(), std::fs::read_link(p)) {
                    (Ok(target), Ok(link)) => {
                        if inside_any(&target, &grant.write) {
                            read_only_bind(&target, &target, &mut calls);
                        }
                        protected_links.push((p.clone(), link));
                    }
                    _ => missing_protected.push(p.clone()), // dangling
                }
            }
            Ok(_) => read_only_bind(p, p, &mut calls),
            Err(_) => missing_protected.push(p.clone()),
        }
    }
    for p in &grant.denied {
        if !inside_any(p, &roots) {
            continue; // never granted in the first place
        }
        match p.metadata() {
            Ok(m) if m.is_dir() => calls.push(MountCall {
                source: lit("tmpfs"),
                target: cstr(p),
                fstype: lit("tmpfs"),
                flags: libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                data: lit("mode=000,size=4k"),
                optional: false,
            }),
            Ok(_) => read_only_bind(mask_file, p, &mut calls),
            Err(_) => {}
        }
    }
    if fresh_proc(grant) {
        calls.push(MountCall {
            source: lit("proc"),
            target: lit("/proc").unwrap(),
            fstype: lit("proc"),
            flags: libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            data: None,
            optional: false,
        });
    }
    MountPlan {
        calls,
        missing_protected,
        protected_links,
    }
}
