//! Domain mode's network: the call runs in its own network namespace with
//! only loopback, where its init creates toolcage's listeners (the
//! [`Plan`] here; the sandbox crate's init makes them and hands them over);
//! toolcage accepts on them from its own namespace, on threads
//! that live as long as the call:
//!
//! * `127.0.0.1:3128`, the HTTP proxy (`HTTP_PROXY`, `HTTPS_PROXY`,
//!   `ALL_PROXY`): CONNECT and absolute-form plain HTTP;
//! * `127.0.0.1:53`, UDP and TCP, the DNS stub ([`dns`]): allowed names get
//!   a synthetic 127.1.x.y address, every other name NXDOMAIN;
//! * `0.0.0.0:PORT` for each capture port (80, 443 and the ports the allow
//!   patterns name): a program that ignores the proxy variables and
//!   connects to a synthetic address reaches the name it stands for.
//!
//! Every path goes through [`upstream::open`]: decide, resolve, refuse
//! private addresses, connect to the checked address. Nothing listens on
//! the host. Connections per call, request head size and idle time are
//! bounded; every refusal is recorded as a [`Denial`].

mod conn;
pub(crate) mod dns;
pub(crate) mod http;
mod listen;
mod shared;
mod upstream;

pub use listen::{Kind, Listener, MAX_LISTENERS, PROXY_PORT, Plan};
pub use upstream::{OpenError, connect};

use crate::denial::Denial;
use listen::Role;
use shared::Shared;
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use toolcage_policy::{DomainPolicy, DomainRefusal, RefusalKind};

/// Connections open at once per call (through the proxy, captured, DNS
/// over TCP); more are closed at once and recorded.
pub(crate) const MAX_CONNECTIONS: usize = 256;
/// A stack for each connection's thread: relaying needs little.
const THREAD_STACK: usize = 256 * 1024;

/// The running proxy of one call. Dropping it stops it.
pub struct Proxy {
    shared: Arc<Shared>,
    stop: OwnedFd,
    acceptor: Option<JoinHandle<()>>,
}

impl Proxy {
    /// Serve `fds` (the listeners the init made, in `plan`'s order) under
    /// `policy`.
    pub fn start(policy: DomainPolicy, plan: &Plan, fds: Vec<OwnedFd>) -> std::io::Result<Proxy> {
        Self::start_with(policy, plan, fds, upstream::system_resolver)
    }

    fn start_with(
        policy: DomainPolicy,
        plan: &Plan,
        fds: Vec<OwnedFd>,
        resolve: shared::Resolver,
    ) -> std::io::Result<Proxy> {
        let shared = Arc::new(Shared::new(policy, resolve));
        let stop: OwnedFd = nix::sys::eventfd::EventFd::from_flags(
            nix::sys::eventfd::EfdFlags::EFD_CLOEXEC | nix::sys::eventfd::EfdFlags::EFD_NONBLOCK,
        )?
        .into();
        let mut tcp = Vec::new();
        let mut udp = None;
        for (fd, role) in fds.into_iter().zip(&plan.roles) {
            match role {
                Some(role) => tcp.push((*role, TcpListener::from(fd))),
                None => udp = Some(UdpSocket::from(fd)),
            }
        }
        let stop_fd = stop.try_clone()?;
        let s = shared.clone();
        let acceptor = std::thread::Builder::new()
            .name("toolcage-proxy".into())
            .spawn(move || accept_loop(&s, &stop_fd, &tcp, udp.as_ref()))?;
        Ok(Proxy {
            shared,
            stop,
            acceptor: Some(acceptor),
        })
    }

    /// Stop accepting, cut every open connection, and return the denials.
    pub fn finish(mut self) -> Vec<Denial> {
        self.stop_now();
        let mut log = self.shared.denials.lock().unwrap();
        let mut out = std::mem::take(&mut log.kept);
        if log.dropped > 0 {
            out.push(Denial {
                layer: "proxy",
                op: "connect",
                target: "(more)".into(),
                rule: None,
                reason: format!("{} more refusals of other kinds, not listed", log.dropped),
                fix: None,
                count: 1,
                inferred: false,
            });
        }
        out
    }

    fn stop_now(&mut self) {
        self.shared.stopping.store(true, Ordering::Relaxed);
        let one = 1u64.to_ne_bytes();
        let _ = nix::unistd::write(self.stop.as_fd(), &one);
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
        for [a, b] in self.shared.active.lock().unwrap().values() {
            let _ = a.shutdown(std::net::Shutdown::Both);
            let _ = b.shutdown(std::net::Shutdown::Both);
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if self.acceptor.is_some() {
            self.stop_now();
        }
    }
}

/// Accept on every listener and answer DNS over UDP until `stop` fires.
/// The listeners (which keep the call's network namespace alive) are
/// closed when this returns.
fn accept_loop(
    shared: &Arc<Shared>,
    stop: &OwnedFd,
    tcp: &[(Role, TcpListener)],
    udp: Option<&UdpSocket>,
) {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut fds: Vec<PollFd> = std::iter::once(stop.as_fd())
        .chain(udp.map(|u| u.as_fd()))
        .chain(tcp.iter().map(|(_, l)| l.as_fd()))
        .map(|fd| PollFd::new(fd, PollFlags::POLLIN))
        .collect();
    let first_tcp = 1 + usize::from(udp.is_some());
    let ready = |fd: &PollFd| fd.revents().is_some_and(|r| !r.is_empty());
    let mut buf = [0u8; 4096];
    loop {
        if poll(&mut fds, PollTimeout::NONE).is_err() {
            continue; // EINTR
        }
        if ready(&fds[0]) || shared.stopping() {
            return;
        }
        if let Some(u) = udp.filter(|_| ready(&fds[1])) {
            while let Ok((n, from)) = u.recv_from(&mut buf) {
                if let Some(reply) = conn::answer_dns(shared, &buf[..n]) {
                    let _ = u.send_to(&reply, from);
                }
            }
        }
        for (i, (role, listener)) in tcp.iter().enumerate() {
            if !ready(&fds[first_tcp + i]) {
                continue;
            }
            while let Ok((stream, _)) = listener.accept() {
                spawn_connection(shared, *role, stream);
            }
        }
    }
}

fn spawn_connection(shared: &Arc<Shared>, role: Role, stream: TcpStream) {
    if shared.connections.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
        shared.connections.fetch_sub(1, Ordering::SeqCst);
        let r = DomainRefusal {
            kind: RefusalKind::BadHost,
            rule: None,
            reason: format!("more than {MAX_CONNECTIONS} connections at once"),
        };
        shared.deny("proxy", "connect", "(connection limit)".into(), &r);
        return;
    }
    let s = shared.clone();
    let spawned = std::thread::Builder::new()
        .name("toolcage-proxy-conn".into())
        .stack_size(THREAD_STACK)
        .spawn(move || {
            conn::serve(&s, role, stream);
            s.connections.fetch_sub(1, Ordering::SeqCst);
        });
    if spawned.is_err() {
        shared.connections.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Domain mode's `resolv.conf` (the call's DNS stub, `source`), bound where
/// `/etc/resolv.conf` leads: (path inside, file on the host). Without any,
/// resolvers ask 127.0.0.1 anyway.
pub fn resolv_conf(source: &std::path::Path) -> Vec<(std::path::PathBuf, std::path::PathBuf)> {
    match std::path::Path::new("/etc/resolv.conf").canonicalize() {
        Ok(real) => vec![(real, source.to_path_buf())],
        Err(_) => Vec::new(),
    }
}
