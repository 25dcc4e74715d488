//! The guard that owns a call's init process from `clone` until it is
//! reaped: whatever way the parent leaves, nothing the call started lives on.

use std::os::fd::{AsRawFd, OwnedFd};

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
}

impl InitGuard {
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
