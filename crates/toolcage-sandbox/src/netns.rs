//! The call's network namespace, made on a helper thread while the parent
//! prepares the rest of the call (Landlock, seccomp, the root's plan).
//!
//! A network namespace costs ~0.45 ms to create and ~0.13 ms to bring its
//! loopback up; in `clone(2)` that time lies on the path of every call. A
//! thread can make one for itself (network namespaces belong to a task, not
//! to a process) and keep it by a descriptor; the init joins it with
//! `setns(2)` instead of `CLONE_NEWNET`. The namespace is the same: new,
//! owned by the initial user namespace, loopback only and up.
//!
//! Only as root: without privilege the call's network namespace must belong
//! to the user namespace the init creates, which no thread can make ahead.
//! Whatever fails here falls back to `CLONE_NEWNET`, with its errors.

use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

/// A network namespace on its way.
pub(crate) struct Early(JoinHandle<Option<OwnedFd>>);

/// One made before the grant was known ([`ahead`], [`keep_ready`]).
static AHEAD: Mutex<Option<Early>> = Mutex::new(None);

/// Whether taking the namespace made ahead starts the next one
/// ([`keep_ready`]).
static KEEP_READY: AtomicBool = AtomicBool::new(false);

/// Making one ahead pays as root (see the module), and with a second CPU
/// to make it on.
fn worth_it() -> bool {
    let cpus = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).map_or(1, |set| {
        (0..64).filter(|&i| set.is_set(i).unwrap_or(false)).count()
    });
    nix::unistd::geteuid().is_root() && cpus > 1
}

fn slot() -> std::sync::MutexGuard<'static, Option<Early>> {
    AHEAD.lock().unwrap_or_else(|e| e.into_inner())
}

/// Start making the network namespace of this process's next call now,
/// before its policy is resolved (`toolcage exec`). A call that needs none
/// (network on) leaves it.
pub fn ahead() {
    if worth_it() {
        *slot() = start();
    }
}

/// For a process that runs many calls (`serve`): always have one made
/// ahead, so that a network-off call takes a finished namespace and the
/// next one is made while it runs. Each namespace still serves one call.
pub fn keep_ready() {
    if worth_it() {
        KEEP_READY.store(true, Ordering::Relaxed);
        *slot() = start();
    }
}

/// The namespace made ahead, or a new one; with [`keep_ready`], the next
/// one is started.
pub(crate) fn ahead_or_start() -> Option<Early> {
    let mut slot = slot();
    let early = slot.take().or_else(start);
    if KEEP_READY.load(Ordering::Relaxed) {
        *slot = start();
    }
    early
}

/// Start making a network namespace, with `lo` up.
pub(crate) fn start() -> Option<Early> {
    std::thread::Builder::new()
        .name("toolcage-netns".into())
        .stack_size(64 * 1024)
        .spawn(|| make(&super::child::loopback_request()))
        .ok()
        .map(Early)
}

impl Early {
    /// The namespace's descriptor, `None` if it could not be made.
    pub(crate) fn finish(self) -> Option<OwnedFd> {
        let fd = self.0.join().ok().flatten();
        if fd.is_none() {
            // Refused here (a container without the privilege): stop
            // making them for calls that would only fall back.
            KEEP_READY.store(false, Ordering::Relaxed);
        }
        fd
    }
}

fn make(req: &libc::ifreq) -> Option<OwnedFd> {
    // SAFETY: unshare moves this thread alone (nothing else runs on it)
    // into a new network namespace; open returns a descriptor we own.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNET) != 0 {
            return None;
        }
        let fd = libc::open(
            c"/proc/thread-self/ns/net".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return None;
        }
        let fd = OwnedFd::from_raw_fd(fd);
        // A socket made on this thread lives in the new namespace.
        super::child::loopback_up(req).then_some(fd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn inode(fd: &OwnedFd) -> u64 {
        nix::sys::stat::fstat(fd.as_fd()).unwrap().st_ino
    }

    #[test]
    fn kept_ready_each_take_is_a_new_namespace() {
        if !worth_it() {
            eprintln!("skipped: making namespaces ahead needs root and two CPUs");
            return;
        }
        use std::os::unix::fs::MetadataExt;
        let host = std::fs::metadata("/proc/thread-self/ns/net").unwrap().ino();
        keep_ready();
        // Both held at once: equal inodes would be one namespace.
        let first = ahead_or_start().and_then(Early::finish).unwrap();
        let second = ahead_or_start().and_then(Early::finish).unwrap();
        assert_ne!(inode(&first), inode(&second));
        assert_ne!(inode(&first), host);
        assert_ne!(inode(&second), host);
        // The next one is already on its way.
        assert!(slot().is_some());
        KEEP_READY.store(false, Ordering::Relaxed);
        slot().take();
    }
}
