//! The pool's maker (`pool.rs`): a process forked from toolcage when
//! `serve` starts, while toolcage is still one thread and small, that
//! makes the pool's sandboxes and hands each one over, ready.
//!
//! Why a process of its own: a waiting init is a copy-on-write copy of the
//! process that cloned it. Cloned from the server itself (its heap, its
//! threads running on every CPU), every page the server wrote while inits
//! waited was copied, and each copy flushed the other CPUs' TLBs by
//! interrupt: measured on a VM, a pooled call cost twice the CPU of a cold
//! one (`docs/sandbox.md`). The maker is one thread that writes little,
//! and the server shares no working memory with the inits.
//!
//! - **Protocol**: a `SOCK_SEQPACKET` pair, one message each way. The
//!   server sends an order: the grant (with its session-only fields) and
//!   the call's readable paths, as JSON. The maker answers with the ready
//!   sandbox (`ready::About` as JSON, and the init's pidfd, the setup
//!   report and status pipes and the call socket as `SCM_RIGHTS`), or why
//!   it could not make one.
//! - **Fail closed**: a grant that does not come back from its own JSON
//!   equal is never sent (its calls start cold); a maker that is gone or
//!   answers out of protocol turns the pool off (every call starts cold,
//!   as with `--pool 0`).
//! - **Lifetime**: the maker dies with the server (`PR_SET_PDEATHSIG`),
//!   and the inits it made die with it; it reaps them as they end.

use super::error::SandboxError;
use super::spawn::ready::{self, About, HandedOver, Ready};
use super::spawn::start::RunError;
use nix::sys::socket::{
    AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType, recvmsg,
    sendmsg, socketpair,
};
use serde::{Deserialize, Serialize};
use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use toolcage_policy::Grant;

/// The largest order or answer (a grant's paths are the bulk).
const MESSAGE_BYTES: usize = 1 << 20;

/// The server's end of the maker.
pub(crate) struct Maker {
    channel: OwnedFd,
    /// Scratch for answers (one order at a time: the pool's one filler).
    buf: Vec<u8>,
}

#[derive(Serialize, Deserialize)]
struct Order {
    grant: Grant,
    /// The grant's fields its JSON leaves out (`Grant::homes`,
    /// `Grant::session_writes`).
    homes: Vec<PathBuf>,
    session_writes: Vec<PathBuf>,
    extra_read: Vec<PathBuf>,
}

#[derive(Serialize, Deserialize)]
enum Answer {
    /// (Boxed: it is most of the answer's size.)
    Ready { pid: i32, about: Box<About> },
    /// Namespaces refused (errno): nothing can be prepared.
    Unavailable(i32),
    /// This grant cannot be prepared; its calls start cold.
    Failed(String),
}

/// Fork the maker. `None` when toolcage already runs more than one thread
/// (a fork would copy locks other threads hold): no pool then.
pub(crate) fn start() -> std::io::Result<Option<Maker>> {
    if threads() != Some(1) {
        return Ok(None);
    }
    let (ours, theirs) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )?;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: toolcage is one thread here (checked above), so the child
    // inherits no lock another thread holds; it runs `serve_orders`, which
    // never returns (it ends in `_exit`).
    match unsafe { nix::unistd::fork() }? {
        nix::unistd::ForkResult::Child => {
            drop(ours);
            become_maker(parent);
            serve_orders(theirs)
        }
        nix::unistd::ForkResult::Parent { .. } => Ok(Some(Maker {
            channel: ours,
            buf: vec![0u8; MESSAGE_BYTES],
        })),
    }
}

fn threads() -> Option<usize> {
    Some(std::fs::read_dir("/proc/self/task").ok()?.count())
}

impl Maker {
    /// A sandbox for `grant` and `extra_read`, made by the maker.
    /// `Unavailable`: the maker is gone or cannot make any (pool off).
    pub(crate) fn make(
        &mut self,
        grant: &Grant,
        extra_read: &[PathBuf],
    ) -> Result<Ready, RunError> {
        let order = encode(grant, extra_read).map_err(|e| RunError::Failed(prepare(e)))?;
        let sent = sendmsg::<()>(
            self.channel.as_raw_fd(),
            &[IoSlice::new(&order)],
            &[],
            MsgFlags::MSG_NOSIGNAL,
            None,
        );
        if let Err(e) = sent {
            return Err(match e {
                nix::errno::Errno::EMSGSIZE => RunError::Failed(prepare("the grant is too big")),
                e => RunError::Unavailable(e as i32),
            });
        }
        let (n, fds) =
            receive(&self.channel, &mut self.buf).map_err(|e| RunError::Unavailable(e as i32))?;
        match serde_json::from_slice::<Answer>(&self.buf[..n]) {
            Ok(Answer::Ready { pid, about }) => {
                let fds: [OwnedFd; 4] = fds
                    .try_into()
                    .map_err(|_| RunError::Unavailable(libc::EPROTO))?;
                Ok(Ready::adopt(HandedOver {
                    pid,
                    fds,
                    about: *about,
                }))
            }
            Ok(Answer::Unavailable(errno)) => Err(RunError::Unavailable(errno)),
            Ok(Answer::Failed(why)) => Err(RunError::Failed(prepare(why))),
            Err(_) => Err(RunError::Unavailable(libc::EPROTO)),
        }
    }
}

fn prepare(why: impl std::fmt::Display) -> SandboxError {
    SandboxError::Prepare(format!("the pool's maker: {why}"))
}

/// The order as JSON, if the grant survives the trip unchanged.
fn encode(grant: &Grant, extra_read: &[PathBuf]) -> Result<Vec<u8>, String> {
    let order = Order {
        grant: grant.clone(),
        homes: grant.homes.clone(),
        session_writes: grant.session_writes.clone(),
        extra_read: extra_read.to_vec(),
    };
    let bytes = serde_json::to_vec(&order).map_err(|e| e.to_string())?;
    let back = decode(&bytes).map_err(|e| e.to_string())?;
    if back.grant != *grant || back.extra_read != extra_read {
        return Err("the grant does not survive its encoding".into());
    }
    Ok(bytes)
}

fn decode(bytes: &[u8]) -> serde_json::Result<Order> {
    let mut order: Order = serde_json::from_slice(bytes)?;
    order.grant.homes = std::mem::take(&mut order.homes);
    order.grant.session_writes = std::mem::take(&mut order.session_writes);
    Ok(order)
}

/// One message and the descriptors that came with it.
fn receive(channel: &OwnedFd, buf: &mut [u8]) -> nix::Result<(usize, Vec<OwnedFd>)> {
    let mut space = nix::cmsg_space!([RawFd; 4]);
    let mut iov = [IoSliceMut::new(buf)];
    let msg = loop {
        match recvmsg::<()>(
            channel.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Err(nix::errno::Errno::EINTR) => continue,
            other => break other?,
        }
    };
    let mut fds = Vec::new();
    for c in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(raw) = c {
            // SAFETY: the kernel installed these descriptors for us.
            fds.extend(
                raw.into_iter()
                    .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
            );
        }
    }
    let truncated = msg
        .flags
        .intersects(MsgFlags::MSG_TRUNC | MsgFlags::MSG_CTRUNC);
    let n = msg.bytes;
    if n == 0 {
        return Err(nix::errno::Errno::EPIPE); // the other end is gone
    }
    if truncated {
        return Err(nix::errno::Errno::EMSGSIZE);
    }
    Ok((n, fds))
}

/// In the child, first: die with the server, let go of its stdio, and be
/// named for `ps`.
fn become_maker(parent: libc::pid_t) {
    // SAFETY: prctl and getppid take plain integers; `_exit` ends this
    // process without running toolcage's exit handlers.
    unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        );
        if libc::getppid() != parent {
            libc::_exit(0); // the server died before the line above
        }
        libc::prctl(
            libc::PR_SET_NAME,
            c"toolcage-pool".as_ptr() as libc::c_ulong,
            0,
            0,
            0,
        );
    }
    // The server's stdio (an MCP client's pipes) is not the maker's to hold.
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        for fd in [0, 1] {
            // SAFETY: dup2 onto the standard descriptors, from one we own.
            unsafe { libc::dup2(null.as_raw_fd(), fd) };
        }
    }
}

/// The maker's loop: one order, one answer, until the server is gone.
fn serve_orders(channel: OwnedFd) -> ! {
    let mut buf = vec![0u8; MESSAGE_BYTES];
    // Each init's plan and stacks, kept until it is reaped.
    let mut kept: Vec<(i32, Box<dyn std::any::Any>)> = Vec::new();
    loop {
        reap(&mut kept);
        if !wait_readable(&channel) {
            continue;
        }
        let n = match receive(&channel, &mut buf) {
            Ok((n, _)) => n,
            Err(nix::errno::Errno::EMSGSIZE) => {
                let _ = answer(
                    &channel,
                    &Answer::Failed("the order is too big".into()),
                    &[],
                );
                continue;
            }
            Err(_) => break,
        };
        let made = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fill(&buf[..n])));
        let sent = match made {
            Ok(Ok((handed, keep))) => {
                let fds: Vec<RawFd> = handed.fds.iter().map(|f| f.as_raw_fd()).collect();
                let a = Answer::Ready {
                    pid: handed.pid,
                    about: Box::new(handed.about),
                };
                kept.push((handed.pid, keep));
                answer(&channel, &a, &fds)
                // `handed.fds` (our copies) are closed here.
            }
            Ok(Err(a)) => answer(&channel, &a, &[]),
            Err(_) => answer(&channel, &Answer::Failed("the maker panicked".into()), &[]),
        };
        if sent.is_err() {
            break;
        }
    }
    // SAFETY: ending the maker without toolcage's exit handlers; the inits
    // it made die with it (their parent-death signal).
    unsafe { libc::_exit(0) }
}

type Made = (HandedOver, Box<dyn std::any::Any>);

/// One order: decode it, make the sandbox, hand it over.
fn fill(order: &[u8]) -> Result<Made, Answer> {
    let order = decode(order).map_err(|e| Answer::Failed(format!("a bad order: {e}")))?;
    let ready = ready::make(&order.grant, &order.extra_read).map_err(|e| match e {
        RunError::Unavailable(errno) => Answer::Unavailable(errno),
        RunError::Failed(e) => Answer::Failed(e.to_string()),
    })?;
    let (handed, keep) = ready
        .hand_over()
        .map_err(|e| Answer::Failed(e.to_string()))?;
    Ok((handed, Box::new(keep)))
}

fn answer(channel: &OwnedFd, a: &Answer, fds: &[RawFd]) -> nix::Result<usize> {
    let bytes = serde_json::to_vec(a).unwrap_or_default();
    let rights = [ControlMessage::ScmRights(fds)];
    let cmsgs: &[ControlMessage] = if fds.is_empty() { &[] } else { &rights };
    sendmsg::<()>(
        channel.as_raw_fd(),
        &[IoSlice::new(&bytes)],
        cmsgs,
        MsgFlags::MSG_NOSIGNAL,
        None,
    )
}

/// Wait up to a second for an order (then reap what ended meanwhile).
fn wait_readable(channel: &OwnedFd) -> bool {
    let mut pfd = libc::pollfd {
        fd: channel.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll on one stack struct naming a descriptor we own.
    unsafe { libc::poll(&mut pfd, 1, 1000) > 0 }
}

/// Reap the inits that ended; free what each kept.
fn reap(kept: &mut Vec<(i32, Box<dyn std::any::Any>)>) {
    loop {
        // SAFETY: waitpid with WNOHANG on our own children.
        let pid = unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) };
        if pid <= 0 {
            return;
        }
        kept.retain(|(p, _)| *p != pid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_survives_its_order() {
        let mut g = Grant::closed(PathBuf::from("/tmp/p"));
        g.read = vec![PathBuf::from("/usr")];
        g.homes = vec![PathBuf::from("/root")];
        g.session_writes = vec![PathBuf::from("/tmp/w")];
        g.timeout = std::time::Duration::from_millis(1500);
        let bytes = encode(&g, &[PathBuf::from("/opt/x")]).unwrap();
        let back = decode(&bytes).unwrap();
        assert_eq!(back.grant, g);
        assert_eq!(back.extra_read, vec![PathBuf::from("/opt/x")]);
        // Control: without the session-only fields it would not be equal.
        let bare: Order = serde_json::from_slice(&bytes).unwrap();
        assert_ne!(bare.grant, g);
    }

    #[test]
    fn a_domain_grant_is_never_sent() {
        let mut g = Grant::closed(PathBuf::from("/tmp/p"));
        g.network = toolcage_policy::Network::Domains(
            toolcage_policy::DomainPolicy::new(&["example.com"], &[], &[]).unwrap(),
        );
        assert!(encode(&g, &[]).is_err());
    }
}
