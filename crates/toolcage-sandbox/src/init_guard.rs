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
}

impl Drop for InitGuard {
    fn drop(&mut self) {
        if self.reaped {
            return;
        }
        self.kill_all();
        // SAFETY: reaping our own child.
        unsafe {
            let mut status = 0;
            libc::waitpid(self.pid, &mut status, 0);
        }
        self.reaped = true;
    }
}
