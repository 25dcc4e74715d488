//! The proxy's listening sockets: created by the call's init inside the
//! call's network namespace (so nothing listens on the host) and handed to
//! toolcage with `SCM_RIGHTS` over a socketpair made before `clone`.
//!
//! Why not have toolcage create them itself after `setns` into the call's
//! namespace: `setns` changes one thread of a multi-threaded process and
//! needs the namespace's file and rights over its user namespace; the init
//! is already there, holds every right in it, and sending descriptors is
//! one `sendmsg`. The init makes raw syscalls only (no allocation): the
//! addresses are prepared here, before `clone`.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// At most this many listeners (proxy, DNS over UDP and TCP, and the
/// capture ports): one `SCM_RIGHTS` message carries them all.
pub const MAX_LISTENERS: usize = 40;

/// One socket the init creates, binds (and for TCP, listens on).
#[derive(Clone, Copy)]
pub struct ListenSpec {
    pub addr: libc::sockaddr_in,
    /// `SOCK_STREAM` or `SOCK_DGRAM`.
    pub kind: libc::c_int,
}

impl ListenSpec {
    pub fn new(ip: std::net::Ipv4Addr, port: u16, kind: libc::c_int) -> ListenSpec {
        ListenSpec {
            addr: libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: port.to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(ip).to_be(),
                },
                sin_zero: [0; 8],
            },
            kind,
        }
    }
}

/// What the init does: create `specs`, send them on `channel`.
pub struct ListenPlan {
    pub specs: Vec<ListenSpec>,
    /// The init's end of the socketpair (`SOCK_SEQPACKET`).
    pub channel: RawFd,
}

#[repr(C, align(8))]
struct ControlBuf([u8; 512]);

/// In the init (raw syscalls only): create every listener, send them all
/// in one message, close them. False on any failure (errno is set).
///
/// # Safety
/// Async-signal-safe: no allocation, only syscalls on stack memory and on
/// `plan`, which the caller keeps alive.
pub unsafe fn open_and_send(plan: &ListenPlan) -> bool {
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
pub fn receive(channel: &OwnedFd) -> std::io::Result<Vec<OwnedFd>> {
    use std::os::fd::AsRawFd;
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
pub fn channel() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [-1; 2];
    // SAFETY: socketpair writes two descriptors into our array; each is
    // then owned exactly once.
    unsafe {
        if libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        Ok((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])))
    }
}
