//! The domain proxy's mechanism half: the listeners the call's init
//! creates inside the call's network namespace (so nothing listens on the
//! host) and hands to toolcage with `SCM_RIGHTS` over a socketpair made
//! before `clone`. The proxy that serves them, and the plan of which
//! sockets to make, are the broker crate's (`toolcage_broker::proxy`); the
//! init makes raw syscalls only (no allocation), so the addresses are
//! prepared here, before `clone`.

pub(crate) use toolcage_broker::proxy::{PROXY_PORT, Proxy, resolv_conf};

use super::error::SandboxError;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use toolcage_broker::proxy::{Kind, Listener, MAX_LISTENERS, Plan};
use toolcage_policy::DomainPolicy;

/// One socket the init creates, binds (and for TCP, listens on), as the
/// init's syscalls take it.
#[derive(Clone, Copy)]
pub(crate) struct ListenSpec {
    addr: libc::sockaddr_in,
    /// `SOCK_STREAM` or `SOCK_DGRAM`.
    kind: libc::c_int,
}

impl From<&Listener> for ListenSpec {
    fn from(l: &Listener) -> ListenSpec {
        ListenSpec {
            addr: libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: l.addr.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*l.addr.ip()).to_be(),
                },
                sin_zero: [0; 8],
            },
            kind: match l.kind {
                Kind::Stream => libc::SOCK_STREAM,
                Kind::Datagram => libc::SOCK_DGRAM,
            },
        }
    }
}

/// What the init does: create `specs`, send them on `channel`.
pub(crate) struct ListenPlan {
    specs: Vec<ListenSpec>,
    /// The init's end of the socketpair (`SOCK_SEQPACKET`).
    channel: RawFd,
}

/// A call's proxy from before `clone` until it serves: the listener plan
/// and the channel the init sends them on.
pub(crate) struct Setup {
    policy: DomainPolicy,
    plan: Plan,
    ours: OwnedFd,
    /// The init's end; toolcage closes its copy once the init is cloned.
    theirs: Option<OwnedFd>,
}

impl Setup {
    pub(crate) fn new(policy: &DomainPolicy) -> Result<Setup, SandboxError> {
        let (ours, theirs) =
            channel().map_err(|e| SandboxError::Prepare(format!("socketpair: {e}")))?;
        Ok(Setup {
            policy: policy.clone(),
            plan: Plan::new(policy),
            ours,
            theirs: Some(theirs),
        })
    }

    /// The descriptor the init must keep.
    pub(crate) fn child_fd(&self) -> Option<RawFd> {
        self.theirs.as_ref().map(|t| t.as_raw_fd())
    }

    /// What the init does (see [`open_and_send`]).
    pub(crate) fn listen_plan(&self) -> Option<ListenPlan> {
        Some(ListenPlan {
            specs: self.plan.listeners.iter().map(ListenSpec::from).collect(),
            channel: self.child_fd()?,
        })
    }

    /// After `clone`: close our copy of the init's end, receive the
    /// listeners and serve them. `None` when the init failed before sending
    /// them (its report says why).
    pub(crate) fn start(mut self) -> Result<Option<Proxy>, SandboxError> {
        drop(self.theirs.take());
        let setup = |stage: &'static str| move |source| SandboxError::Setup { stage, source };
        let fds = receive(&self.ours).map_err(setup("receiving the proxy's listeners"))?;
        if fds.len() != self.plan.listeners.len() {
            return Ok(None);
        }
        let proxy =
            Proxy::start(self.policy, &self.plan, fds).map_err(setup("starting the proxy"))?;
        Ok(Some(proxy))
    }
}

#[repr(C, align(8))]
struct ControlBuf([u8; 512]);

/// In the init (raw syscalls only): create every listener, send them all
/// in one message, close them. False on any failure (errno is set).
///
/// # Safety
/// Async-signal-safe: no allocation, only syscalls on stack memory and on
/// `plan`, which the caller keeps alive.
pub(crate) unsafe fn open_and_send(plan: &ListenPlan) -> bool {
    let mut fds: [RawFd; MAX_LISTENERS] = [-1; MAX_LISTENERS];
    let n = plan.specs.len().min(MAX_LISTENERS);
    let mut ok = true;
    // SAFETY: socket/setsockopt/bind/listen/sendmsg/close with pointers to
    // our stack and to `plan`; the control buffer is sized and aligned for
    // MAX_LISTENERS descriptors.
    unsafe {
        for (i, spec) in plan.specs[..n].iter().enumerate() {
            let s = libc::socket(
                libc::AF_INET,
                spec.kind | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                0,
            );
            if s < 0 {
                ok = false;
                break;
            }
            fds[i] = s;
            let one: libc::c_int = 1;
            libc::setsockopt(
                s,
                libc::SOL_SOCKET,
                libc::SO_REUSEADDR,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
            if libc::bind(
                s,
                (&spec.addr as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            ) != 0
                || (spec.kind == libc::SOCK_STREAM && libc::listen(s, 128) != 0)
            {
                ok = false;
                break;
            }
        }
        if ok {
            let mut byte = [0u8; 1];
            let mut iov = libc::iovec {
                iov_base: byte.as_mut_ptr().cast(),
                iov_len: 1,
            };
            let mut control = ControlBuf([0; 512]);
            let payload = (n * std::mem::size_of::<RawFd>()) as libc::c_uint;
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.0.as_mut_ptr().cast();
            msg.msg_controllen = libc::CMSG_SPACE(payload) as _;
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(payload) as _;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr().cast::<u8>(),
                libc::CMSG_DATA(cmsg),
                payload as usize,
            );
            ok = libc::sendmsg(plan.channel, &msg, libc::MSG_NOSIGNAL) == 1;
        }
        for fd in fds.iter().filter(|fd| **fd >= 0) {
            libc::close(*fd);
        }
        libc::close(plan.channel);
    }
    ok
}

/// In toolcage: receive the listeners (close-on-exec). Empty when the
/// init failed before sending them (its report says why).
fn receive(channel: &OwnedFd) -> std::io::Result<Vec<OwnedFd>> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = ControlBuf([0; 512]);
    // SAFETY: an all-zero msghdr is valid; recvmsg writes into our buffers,
    // whose sizes we pass; every descriptor the kernel installed is taken
    // into an OwnedFd exactly once.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.0.as_mut_ptr().cast();
        msg.msg_controllen = control.0.len() as _;
        let n = loop {
            let n = libc::recvmsg(channel.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC);
            if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            break n;
        };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut out = Vec::new();
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg);
                let len = (*cmsg).cmsg_len as usize - (data as usize - cmsg as usize);
                for i in 0..len / std::mem::size_of::<RawFd>() {
                    let fd = std::ptr::read_unaligned(data.cast::<RawFd>().add(i));
                    out.push(OwnedFd::from_raw_fd(fd));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
        Ok(out)
    }
}

/// The socketpair the listeners travel on: (toolcage's end, the init's end).
fn channel() -> std::io::Result<(OwnedFd, OwnedFd)> {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
    socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(std::io::Error::from)
}
