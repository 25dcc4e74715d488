//! The parent side of a running call: feed stdin, drain stdout and stderr
//! under their caps, enforce the timeout and cancellation, reap the child.

use super::init_guard::InitGuard;
use super::outcome::Exit;
use super::output::{CappedBuffer, Captured};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
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

pub(crate) struct Running<'a> {
    /// The call's init (PID 1 of its namespace): killing it kills
    /// everything the call started.
    pub init: &'a mut InitGuard,
    /// Our ends of the stdin, stdout and stderr pipes; `None` when the
    /// child inherited toolcage's own descriptors.
    pub stdio: Option<[OwnedFd; 3]>,
    /// Read end of the pipe where the init writes the tool's wait status.
    pub status: &'a OwnedFd,
}

pub(crate) struct Finished {
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
fn wait_status(init: &mut InitGuard, block: bool, status_pipe: &OwnedFd) -> Option<Exit> {
    let mut status = match reported_early(init, status_pipe) {
        Some(status) => status,
        None => init.wait(block)?,
    };
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

/// The init's report, if it is there, with namespaces: the init reports
/// only once no other process of the call is left (`child/init.rs`,
/// `wait_for_tool`), so that is the call's end; the init's own exit (the
/// kernel's teardown of the namespaces, ~0.2 ms) is not waited for: it is
/// killed and reaped apart ([`InitGuard::let_go`]). For an init of our
/// own, only in a process that asked ([`answer_calls_on_report`]); else,
/// and namespace-free, the init's exit is the end (the report stays in
/// the pipe for the caller to read either way).
fn reported_early(init: &mut InitGuard, status_pipe: &OwnedFd) -> Option<libc::c_int> {
    if !reports_last(init) {
        return None;
    }
    let mut available: libc::c_int = 0;
    // SAFETY: FIONREAD writes the pipe's byte count into an int we own.
    let sized =
        unsafe { libc::ioctl(status_pipe.as_raw_fd(), libc::FIONREAD, &mut available) } == 0;
    if !(sized && available >= 4) {
        return None;
    }
    init.let_go();
    Some(libc::SIGKILL)
}

/// Whether the init's report is the end of the call: PID 1 of the call's
/// namespace, not yet reaped, the pool's maker's or this process asked.
fn reports_last(init: &InitGuard) -> bool {
    !init.reaped && init.namespaced && (init.adopted || ANSWER_ON_REPORT.load(Ordering::Relaxed))
}

static ANSWER_ON_REPORT: AtomicBool = AtomicBool::new(false);

/// From now on this process's calls with namespaces answer when their init
/// reports, without waiting for the init's own exit, which a reaper thread
/// waits for instead (`serve`: a long-lived server). A one-shot process
/// (`exec`, `call`) does not ask: it waits, so that when it exits its init
/// is gone too (the init is a copy of toolcage and its command line).
pub fn answer_calls_on_report() {
    ANSWER_ON_REPORT.store(true, Ordering::Relaxed);
}

/// How long to keep draining pipes after the tool's tree is gone: only a
/// process outside the sandbox that was handed the pipe can still hold it.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(500);

/// Supervise `child` until it and its output are done. The deadline and
/// the cancel token hold until this returns, also after the init exited.
///
/// Each turn: act on the clocks (timeout, grace, drain), wait for
/// something to happen, move output and input, act on a cancellation,
/// reap the init when it ends.
pub(crate) fn supervise(
    child: Running,
    stdin_data: &[u8],
    caps: toolcage_policy::OutputCaps,
    timeout: Duration,
    grace: Duration,
    cancel: Option<&CancelToken>,
) -> Finished {
    let mut s = Supervision::new(child, stdin_data, caps, timeout, grace);
    loop {
        let now = Instant::now();
        if s.clocks(now) {
            break;
        }
        let Some(ready) = s.wait(now, cancel) else {
            continue; // EINTR
        };
        s.pump(&ready);
        if ready[CANCEL] && s.killed.is_none() {
            if s.exit.is_some() {
                break;
            }
            s.killed = Some(Exit::Cancelled);
            kill_tree(s.init, libc::SIGKILL);
        }
        s.reap(ready[INIT] || ready[REPORT]);
    }
    s.finish()
}

/// What [`Supervision::wait`] watches, by slot.
const STDOUT: usize = 0;
const STDERR: usize = 1;
const STDIN: usize = 2;
const INIT: usize = 3;
const CANCEL: usize = 4;
/// The init's status pipe, with namespaces ([`reported_early`]).
const REPORT: usize = 5;
const SLOTS: usize = 6;

/// One call under supervision: its descriptors, its output so far, and
/// where it stands (ended, killed and why, the clocks).
struct Supervision<'a, 'd> {
    init: &'a mut InitGuard,
    status: &'a OwnedFd,
    stdin_data: &'d [u8],
    written: usize,
    stdin: Option<OwnedFd>,
    stdout: Option<OwnedFd>,
    stderr: Option<OwnedFd>,
    out: CappedBuffer,
    err: CappedBuffer,
    buf: Vec<u8>,
    deadline: Option<Instant>,
    grace: Duration,
    exit: Option<Exit>,
    /// Why we killed it.
    killed: Option<Exit>,
    kill_at: Option<Instant>,
    drain_until: Option<Instant>,
}

impl<'a, 'd> Supervision<'a, 'd> {
    fn new(
        child: Running<'a>,
        stdin_data: &'d [u8],
        caps: toolcage_policy::OutputCaps,
        timeout: Duration,
        grace: Duration,
    ) -> Self {
        // A timeout too large to add is no timeout at all.
        let deadline = Instant::now().checked_add(timeout);
        let (mut stdin, stdout, stderr) = match child.stdio {
            Some([i, o, e]) => (Some(i), Some(o), Some(e)),
            None => (None, None, None),
        };
        for fd in [&stdin, &stdout, &stderr].into_iter().flatten() {
            set_nonblocking(fd.as_raw_fd());
        }
        if stdin_data.is_empty() {
            stdin = None;
        }
        // Only with pipes to read: a fresh buffer after clone is pages to copy.
        let buf = if stdout.is_some() || stderr.is_some() {
            vec![0u8; 64 * 1024]
        } else {
            Vec::new()
        };
        Supervision {
            init: child.init,
            status: child.status,
            stdin_data,
            written: 0,
            stdin,
            stdout,
            stderr,
            out: CappedBuffer::new(caps.stdout),
            err: CappedBuffer::new(caps.stderr),
            buf,
            deadline,
            grace,
            exit: None,
            killed: None,
            kill_at: None,
            drain_until: None,
        }
    }

    /// Act on the clocks at `now`; true when supervision is over.
    fn clocks(&mut self, now: Instant) -> bool {
        if self.exit.is_some() && self.stdout.is_none() && self.stderr.is_none() {
            return true;
        }
        if self.exit.is_some() && self.drain_until.is_some_and(|t| now >= t) {
            return true; // someone outside holds the pipes: stop waiting for EOF
        }
        if self.killed.is_none() && self.deadline.is_some_and(|d| now >= d) {
            if self.exit.is_some() {
                return true; // the tool ended in time; stop waiting for its output
            }
            self.killed = Some(Exit::Timeout);
            // The init forwards it to every process in the namespace.
            kill_tree(self.init, libc::SIGTERM);
            self.kill_at = now.checked_add(self.grace);
        }
        if self.exit.is_none() && self.kill_at.is_some_and(|t| now >= t) {
            kill_tree(self.init, libc::SIGKILL);
            self.kill_at = None;
        }
        false
    }

    /// Poll what is open until something is ready or the next clock
    /// runs out: which slots are ready, `None` on EINTR.
    fn wait(&self, now: Instant, cancel: Option<&CancelToken>) -> Option<[bool; SLOTS]> {
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(SLOTS);
        let mut slots = [usize::MAX; SLOTS];
        let mut push = |slot: usize, fd: RawFd, events: libc::c_short| {
            slots[slot] = fds.len();
            fds.push(libc::pollfd {
                fd,
                events,
                revents: 0,
            });
        };
        if let Some(fd) = &self.stdout {
            push(STDOUT, fd.as_raw_fd(), libc::POLLIN);
        }
        if let Some(fd) = &self.stderr {
            push(STDERR, fd.as_raw_fd(), libc::POLLIN);
        }
        if let Some(fd) = &self.stdin {
            push(STDIN, fd.as_raw_fd(), libc::POLLOUT);
        }
        if self.exit.is_none() {
            push(INIT, self.init.pidfd.as_raw_fd(), libc::POLLIN);
            if reports_last(self.init) {
                push(REPORT, self.status.as_raw_fd(), libc::POLLIN);
            }
        }
        if let Some(c) = cancel.filter(|_| self.killed.is_none()) {
            push(CANCEL, c.raw(), libc::POLLIN);
        }
        let wake = [
            self.deadline.filter(|_| self.killed.is_none()),
            self.kill_at,
            self.drain_until,
        ]
        .into_iter()
        .flatten()
        .min();
        let timeout_ms = wake.map_or(-1, |t| {
            t.saturating_duration_since(now).as_millis().min(60_000) as i32 + 1
        });
        // SAFETY: poll on descriptors we own, with a correctly sized array.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
        if n < 0 {
            return None;
        }
        Some(std::array::from_fn(|slot| {
            slots[slot] != usize::MAX && fds[slots[slot]].revents != 0
        }))
    }

    /// Capture what the tool wrote, and feed it what is left of its stdin.
    fn pump(&mut self, ready: &[bool; SLOTS]) {
        for (slot, stream, capture) in [
            (STDOUT, &mut self.stdout, &mut self.out),
            (STDERR, &mut self.stderr, &mut self.err),
        ] {
            if ready[slot] && drain(stream, capture, &mut self.buf) {
                *stream = None;
            }
        }
        if ready[STDIN] {
            if let Some(fd) = &self.stdin {
                match nix::unistd::write(fd, &self.stdin_data[self.written..]) {
                    Ok(n) => self.written += n,
                    Err(nix::errno::Errno::EAGAIN) | Err(nix::errno::Errno::EINTR) => {}
                    // EPIPE: the child stopped reading
                    Err(_) => self.written = self.stdin_data.len(),
                }
            }
            if self.written >= self.stdin_data.len() {
                self.stdin = None; // closes it: EOF for the child
            }
        }
    }

    /// Reap the init once its pidfd says it ended (or once it was killed
    /// for good), and give the pipes a short while to drain.
    fn reap(&mut self, init_ready: bool) {
        if self.exit.is_none()
            && (init_ready || (self.kill_at.is_none() && self.killed.is_some()))
            && let Some(status) = wait_status(self.init, false, self.status)
        {
            self.exit = Some(self.killed.unwrap_or(status));
            self.stdin = None;
            // The namespace is gone; whatever still holds the pipes lives
            // outside it. Drain a little longer, never past the deadline.
            let bound = Instant::now() + DRAIN_AFTER_EXIT;
            self.drain_until = Some(self.deadline.map_or(bound, |d| d.min(bound)));
        }
    }

    /// Kill and reap what is still running; the outcome.
    fn finish(mut self) -> Finished {
        if self.exit.is_none() {
            kill_tree(self.init, libc::SIGKILL);
            self.exit = wait_status(self.init, true, self.status);
        }
        Finished {
            exit: self
                .exit
                .or(self.killed)
                .unwrap_or(Exit::Signal(libc::SIGKILL)),
            stdout: self.out.finish(),
            stderr: self.err.finish(),
        }
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
