//! The guard that owns a call's init process from `clone` until it is
//! reaped: whatever way the parent leaves, nothing the call started lives on.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::mpsc::{self, Sender};
use std::sync::{Mutex, OnceLock};

/// The init of a running call, from `clone` until it is reaped. Dropping it
/// unreaped (an error or a panic on the way) kills the call's whole process
/// tree through the pidfd and reaps the init, so no tool outlives its call.
pub(crate) struct InitGuard {
    pub pid: libc::pid_t,
    pub pidfd: OwnedFd,
    pub reaped: bool,
    /// Namespace-free mode: the tool's process group, which outlives the
    /// init unless it is killed too.
    pub group: Option<libc::pid_t>,
    /// Not our child: the pool's maker process (`maker.rs`) cloned it and
    /// reaps it. Its end is its pidfd turning readable; the PID namespace
    /// is empty by then (its init exits last).
    pub adopted: bool,
    /// PID 1 of the call's own PID namespace: it kills and reaps every
    /// other process of the call before it reports the tool's status.
    pub namespaced: bool,
}

impl InitGuard {
    /// The call is over (its init reported: with namespaces it has killed
    /// and reaped every other process of the call first): kill the init
    /// and leave its reaping, which waits for the kernel's teardown of the
    /// namespaces, to a thread of its own (an adopted init is the maker's
    /// to reap). The guard counts as reaped.
    pub(crate) fn let_go(&mut self) {
        if self.reaped {
            return;
        }
        self.kill_all();
        if !self.adopted && !reap_later(self.pid) {
            self.wait(true);
        }
        self.reaped = true;
    }

    /// SIGKILL everything the call started. Namespace-free, the tool's
    /// group first: while the init is unreaped it has not finished its own
    /// sweep, so the group's ID still names the call's processes.
    pub(crate) fn kill_all(&self) {
        if self.reaped {
            return;
        }
        // SAFETY: kill(2) on the call's own process group, then
        // pidfd_send_signal on a pidfd we own.
        unsafe {
            if let Some(group) = self.group {
                libc::kill(-group, libc::SIGKILL);
            }
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.pidfd.as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0u32,
            );
        }
    }

    /// Wait for the init to end (`block`), or see whether it has: its
    /// wait status, `None` while it runs. An adopted init's status is not
    /// ours to read: it is reported as killed (the tool's own status
    /// comes through the status pipe either way).
    pub(crate) fn wait(&mut self, block: bool) -> Option<libc::c_int> {
        if self.reaped {
            return None;
        }
        if self.adopted {
            let mut pfd = libc::pollfd {
                fd: self.pidfd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            let timeout = if block { -1 } else { 0 };
            loop {
                // SAFETY: poll on one stack struct naming a pidfd we own;
                // POLLIN means the process has exited.
                let n = unsafe { libc::poll(&mut pfd, 1, timeout) };
                if n > 0 {
                    break;
                }
                if n == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                    return None;
                }
            }
            self.reaped = true;
            return Some(libc::SIGKILL);
        }
        let mut status = 0;
        let flags = if block { 0 } else { libc::WNOHANG };
        // SAFETY: waitpid on our own child with a valid status pointer.
        let rc = unsafe { libc::waitpid(self.pid, &mut status, flags) };
        if rc != self.pid {
            return None;
        }
        self.reaped = true;
        Some(status)
    }
}

impl Drop for InitGuard {
    fn drop(&mut self) {
        if self.reaped {
            return;
        }
        self.kill_all();
        self.wait(true);
        self.reaped = true;
    }
}

/// Hand our child `pid`, killed, to the reaper thread (started at the
/// first); `false` if there is none (the caller reaps it then).
fn reap_later(pid: libc::pid_t) -> bool {
    static REAPER: OnceLock<Option<Mutex<Sender<libc::pid_t>>>> = OnceLock::new();
    let reaper = REAPER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<libc::pid_t>();
        let started = std::thread::Builder::new()
            .name("toolcage-reap".into())
            .spawn(move || {
                for pid in rx {
                    // SAFETY: waitpid on a child of ours nobody else waits for.
                    unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
                }
            });
        started.ok().map(|_| Mutex::new(tx))
    });
    reaper.as_ref().is_some_and(|tx| {
        tx.lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(pid)
            .is_ok()
    })
}
