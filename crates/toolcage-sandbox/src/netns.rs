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
use std::thread::JoinHandle;

/// A network namespace on its way.
pub struct Early(JoinHandle<Option<OwnedFd>>);

/// One made before the grant was known ([`ahead`]).
static AHEAD: Mutex<Option<Early>> = Mutex::new(None);

/// Start making the network namespace of this process's next call now,
/// before its policy is resolved (`toolcage exec`): as root, and with a
/// second CPU to make it on. A call that needs none (network on) leaves it.
pub fn ahead() {
    let cpus = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).map_or(1, |set| {
        (0..64).filter(|&i| set.is_set(i).unwrap_or(false)).count()
    });
    if nix::unistd::geteuid().is_root() && cpus > 1 {
        let early = start();
        *AHEAD.lock().unwrap_or_else(|e| e.into_inner()) = early;
    }
}

/// The namespace [`ahead`] started, or a new one.
pub fn ahead_or_start() -> Option<Early> {
    let early = AHEAD.lock().unwrap_or_else(|e| e.into_inner()).take();
    early.or_else(start)
}

/// Start making a network namespace, with `lo` up.
pub fn start() -> Option<Early> {
    std::thread::Builder::new()
        .name("toolcage-netns".into())
        .stack_size(64 * 1024)
        .spawn(|| make(&super::spawn::loopback_request()))
        .ok()
        .map(Early)
}

impl Early {
    /// The namespace's descriptor, `None` if it could not be made.
    pub fn finish(self) -> Option<OwnedFd> {
        self.0.join().ok().flatten()
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
