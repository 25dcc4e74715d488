//! The proxy's listening sockets, planned here: which addresses, of which
//! kind, serving which role. The call's init creates them inside the
//! call's network namespace (so nothing listens on the host) and hands them
//! to toolcage with `SCM_RIGHTS` over a socketpair made before `clone`;
//! that mechanism is the sandbox crate's (`proxy.rs` there).
//!
//! Why not have toolcage create them itself after `setns` into the call's
//! namespace: `setns` changes one thread of a multi-threaded process and
//! needs the namespace's file and rights over its user namespace; the init
//! is already there, holds every right in it, and sending descriptors is
//! one `sendmsg`.

use std::net::{Ipv4Addr, SocketAddrV4};
use toolcage_policy::DomainPolicy;

/// The HTTP proxy's port on the call's loopback.
pub const PROXY_PORT: u16 = 3128;
/// The DNS stub's port (what `/etc/resolv.conf` names inside).
pub(crate) const DNS_PORT: u16 = 53;

/// What an accepted connection is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Http,
    DnsTcp,
    Capture,
}

/// At most this many listeners (proxy, DNS over UDP and TCP, and the
/// capture ports): one `SCM_RIGHTS` message carries them all.
pub const MAX_LISTENERS: usize = 40;

/// A stream (TCP) or datagram (UDP) socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Stream,
    Datagram,
}

/// One socket the init creates, binds (and for TCP, listens on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listener {
    pub addr: SocketAddrV4,
    pub kind: Kind,
}

/// The listeners a call's init creates, in the order it sends them.
pub struct Plan {
    pub listeners: Vec<Listener>,
    pub(super) roles: Vec<Option<Role>>, // None: the UDP DNS socket
}

impl Plan {
    pub fn new(policy: &DomainPolicy) -> Plan {
        let lo = Ipv4Addr::LOCALHOST;
        let at = |ip, port, kind| Listener {
            addr: SocketAddrV4::new(ip, port),
            kind,
        };
        let mut listeners = vec![
            at(lo, PROXY_PORT, Kind::Stream),
            at(lo, DNS_PORT, Kind::Datagram),
            at(lo, DNS_PORT, Kind::Stream),
        ];
        let mut roles = vec![Some(Role::Http), None, Some(Role::DnsTcp)];
        let ports = policy
            .capture_ports()
            .into_iter()
            .filter(|p| *p != PROXY_PORT && *p != DNS_PORT)
            .take(MAX_LISTENERS - listeners.len());
        for port in ports {
            listeners.push(at(Ipv4Addr::UNSPECIFIED, port, Kind::Stream));
            roles.push(Some(Role::Capture));
        }
        Plan { listeners, roles }
    }
}
