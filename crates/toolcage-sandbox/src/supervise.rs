//! The parent side of a running call: feed stdin, drain stdout and stderr
//! under their caps, enforce the timeout and cancellation, reap the child.

use super::Exit;
use super::init_guard::InitGuard;
use super::output::{CappedBuffer, Captured};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Cancels a running call from another thread: the call's process tree is
/// killed and the outcome is `Exit::Cancelled`.
#[derive(Debug, Clone)]
pub struct CancelToken {
    fd: Arc<OwnedFd>,
}

impl CancelToken {
    pub fn new() -> std::io::Result<Self> {
        let fd = nix::sys::eventfd::EventFd::from_flags(
            nix::sys::eventfd::EfdFlags::EFD_CLOEXEC | nix::sys::eventfd::EfdFlags::EFD_NONBLOCK,
        )?;
        Ok(CancelToken {
            fd: Arc::new(fd.into()),
        })
    }

    pub fn cancel(&self) {
        let one = 1u64.to_ne_bytes();
        let _ = nix::unistd::write(self.fd.as_fd(), &one);
    }

    pub fn is_cancelled(&self) -> bool {
        let mut pfd = [libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        // SAFETY: poll on one valid descriptor with a zero timeout.
        unsafe { libc::poll(pfd.as_mut_ptr(), 1, 0) > 0 }
    }

    /// The same for every clone of this token: a key to attach things to
    /// one call by.
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.fd) as usize
    }

    fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Readable once cancelled: poll it beside other descriptors.
impl AsFd for CancelToken {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

pub struct Running<'a> {
    /// The call's init (PID 1 of its namespace): killing it kills
    /// everything the call started.
    pub init: &'a mut InitGuard,
    /// Our ends of the stdin, stdout and stderr pipes; `None` when the
    /// child inherited toolcage's own descriptors.
    pub stdio: Option<[OwnedFd; 3]>,
    /// Read end of the pipe where the init writes the tool's wait status.
    pub status: &'a OwnedFd,
}

pub struct Finished {
    pub exit: Exit,
    pub stdout: Captured,
    pub stderr: Captured,
}

fn set_nonblocking(fd: RawFd) {
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
}

/// Signal the call's init through its pidfd: SIGTERM is forwarded to every
/// process of the call; SIGKILL kills them all (with no PID namespace, the
/// guard kills the tool's process group as well).
fn kill_tree(init: &InitGuard, sig: libc::c_int) {
    if init.reaped {
        return;
    }
    if sig == libc::SIGKILL {
        init.kill_all();
        return;
    }
    // SAFETY: pidfd_send_signal on a pidfd we own.
    unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            init.pidfd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0u32,
        );
    }
}

/// Reap the init; the tool's status is what the init reported, if it got
/// that far (it is killed, not exited, on timeout and cancellation).
fn wait_status(init: &mut InitGuard, flags: libc::c_int, status_pipe: &OwnedFd) -> Option<Exit> {
    let mut status = 0;
    // SAFETY: waitpid on our own child with a valid status pointer.
    let rc = unsafe { libc::waitpid(init.pid, &mut status, flags) };
    if rc != init.pid {
        return None;
    }
    init.reaped = true;
    let mut reported = [0u8; 4];
    if nix::unistd::read(status_pipe, &mut reported) == Ok(4) {
        status = i32::from_ne_bytes(reported);
    }
    if libc::WIFEXITED(status) {
        Some(Exit::Code(libc::WEXITSTATUS(status)))
    } else if libc::WIFSIGNALED(status) {
        Some(Exit::Signal(libc::WTERMSIG(status)))
    } else {
        None
    }
}

/// How long to keep draining pipes after the tool's tree is gone: only a
/// process outside the sandbox that was handed the pipe can still hold it.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(500);

/// Supervise `child` until it and its output are done. The deadline and
/// the cancel token hold until this returns, also after the init exited.
pub fn supervise(
    child: Running,
    stdin_data: &[u8],
    caps: toolcage_policy::OutputCaps,
    timeout: Duration,
    grace: Duration,
    cancel: Option<&CancelToken>,
) -> Finished {
    let start = Instant::now();
    // A timeout too large to add is no timeout at all.
    let deadline = start.checked_add(timeout);
    let mut out = CappedBuffer::new(caps.stdout);
    let mut err = CappedBuffer::new(caps.stderr);
    let (mut stdin, mut stdout, mut stderr) = match child.stdio {
        Some([i, o, e]) => (Some(i), Some(o), Some(e)),
        None => (None, None, None),
    };
    for fd in [&stdin, &stdout, &stderr].into_iter().flatten() {
        set_nonblocking(fd.as_raw_fd());
    }
    if stdin_data.is_empty() {
        stdin = None;
    }
    let init = child.init;
    let mut written = 0usize;
    let mut exit: Option<Exit> = None;
    let mut killed: Option<Exit> = None; // why we killed it
    let mut kill_at: Option<Instant> = None;
    let mut drain_until: Option<Instant> = None;
    // Only with pipes to read: a fresh buffer after clone is pages to copy.
    let mut buf = if stdout.is_some() || stderr.is_some() {
        vec![0u8; 64 * 1024]
    } else {
        Vec::new()
    };

    loop {
        if exit.is_some() && stdout.is_none() && stderr.is_none() {
            break;
        }
        let now = Instant::now();
        if exit.is_some() && drain_until.is_some_and(|t| now >= t) {
            break; // someone outside holds the pipes: stop waiting for EOF
        }
        if killed.is_none() && deadline.is_some_and(|d| now >= d) {
            if exit.is_some() {
                break; // the tool ended in time; stop waiting for its output
            }
            killed = Some(Exit::Timeout);
            // The init forwards it to every process in the namespace.
            kill_tree(init, libc::SIGTERM);
            kill_at = now.checked_add(grace);
        }
        if exit.is_none() && kill_at.is_some_and(|t| now >= t) {
            kill_tree(init, libc::SIGKILL);
            kill_at = None;
        }
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(5);
        let mut slots = [usize::MAX; 5];
        let mut push = |slot: usize, fd: RawFd, events: libc::c_short| {
            slots[slot] = fds.len();
            fds.push(libc::pollfd {
                fd,
                events,
                revents: 0,
            });
        };
        if let Some(fd) = &stdout {
            push(0, fd.as_raw_fd(), libc::POLLIN);
        }
        if let Some(fd) = &stderr {
            push(1, fd.as_raw_fd(), libc::POLLIN);
        }
        if let Some(fd) = &stdin {
            push(2, fd.as_raw_fd(), libc::POLLOUT);
        }
        if exit.is_none() {
            push(3, init.pidfd.as_raw_fd(), libc::POLLIN);
        }
        if let Some(c) = cancel.filter(|_| killed.is_none()) {
            push(4, c.raw(), libc::POLLIN);
        }
        let wake = [deadline.filter(|_| killed.is_none()), kill_at, drain_until]
            .into_iter()
            .flatten()
            .min();
        let timeout_ms = wake.map_or(-1, |t| {
            t.saturating_duration_since(now).as_millis().min(60_000) as i32 + 1
        });
        // SAFETY: poll on descriptors we own, with a correctly sized array.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
        if n < 0 {
            continue; // EINTR
        }
        let ready = |slot: usize| slots[slot] != usize::MAX && fds[slots[slot]].revents != 0;
        for (slot, stream) in [(0, &mut stdout), (1, &mut stderr)] {
            if ready(slot) {
                let capture = if slot == 0 { &mut out } else { &mut err };
                if drain(stream, capture, &mut buf) {
                    *stream = None;
                }
            }
        }
        if ready(2) {
            if let Some(fd) = &stdin {
                match nix::unistd::write(fd, &stdin_data[written..]) {
                    Ok(n) => written += n,
                    Err(nix::errno::Errno::EAGAIN) | Err(nix::errno::Errno::EINTR) => {}
                    Err(_) => written = stdin_data.len(), // EPIPE: the child stopped reading
                }
            }
            if written >= stdin_data.len() {
                stdin = None; // closes it: EOF for the child
            }
        }
        if ready(4) && killed.is_none() {
            if exit.is_some() {
                break;
            }
            killed = Some(Exit::Cancelled);
            kill_tree(init, libc::SIGKILL);
        }
        if exit.is_none()
            && (ready(3) || (kill_at.is_none() && killed.is_some()))
            && let Some(status) = wait_status(init, libc::WNOHANG, child.status)
        {
            exit = Some(killed.unwrap_or(status));
            stdin = None;
            // The namespace is gone; whatever still holds the pipes lives
            // outside it. Drain a little longer, never past the deadline.
            let bound = Instant::now() + DRAIN_AFTER_EXIT;
            drain_until = Some(deadline.map_or(bound, |d| d.min(bound)));
        }
    }
    if exit.is_none() {
        kill_tree(init, libc::SIGKILL);
        exit = wait_status(init, 0, child.status);
    }
    Finished {
        exit: exit.or(killed).unwrap_or(Exit::Signal(libc::SIGKILL)),
        stdout: out.finish(),
        stderr: err.finish(),
    }
}

/// Read what is available; true at EOF or on error.
fn drain(stream: &Option<OwnedFd>, capture: &mut CappedBuffer, buf: &mut [u8]) -> bool {
    let Some(fd) = stream else { return true };
    loop {
        match nix::unistd::read(fd, buf) {
            Ok(0) => return true,
            Ok(n) => capture.push(&buf[..n]),
            Err(nix::errno::Errno::EAGAIN) => return false,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return true,
        }
    }
}
