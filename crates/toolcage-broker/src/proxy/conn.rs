//! One accepted connection, on its own thread: the HTTP proxy (CONNECT or
//! plain HTTP), a transparent capture (a program that ignored the proxy
//! variables connected to a name's synthetic address), or DNS over TCP.
//! Then bytes are relayed both ways until either side is done or the
//! connection idles out.

use super::dns;
use super::http::{self, BadRequest, HeadRead, Request};
use super::listen::Role;
use super::shared::Shared;
use super::upstream::{self, OpenError};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};
use toolcage_policy::hostname::target;
use toolcage_policy::{DomainRefusal, Host, RefusalKind};

/// Time to send a request head (or a DNS query over TCP).
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// A tunnel or request with no byte either way for this long is closed.
pub(super) const IDLE_TIMEOUT: Duration = Duration::from_secs(300);

pub(super) fn serve(shared: &Shared, role: Role, client: TcpStream) {
    let _ = client.set_read_timeout(Some(HEAD_TIMEOUT));
    match role {
        Role::Http => http_proxy(shared, client),
        Role::Capture => capture(shared, client),
        Role::DnsTcp => dns_tcp(shared, client),
    }
}

fn refuse(client: &mut TcpStream, status: u16, kind: Option<&str>, body: &str) {
    let _ = client.write_all(&http::response(status, kind, body));
}

fn http_proxy(shared: &Shared, mut client: TcpStream) {
    // One deadline for the whole head, not per read: a byte now and then
    // does not keep a connection slot forever.
    let deadline = Instant::now() + HEAD_TIMEOUT;
    let more = || {
        let left = deadline.saturating_duration_since(Instant::now());
        !left.is_zero() && client.set_read_timeout(Some(left)).is_ok()
    };
    let (buf, end) = match http::read_head(&client, more) {
        HeadRead::Complete { buf, end } => (buf, end),
        HeadRead::TooLarge => {
            let why = format!("request head over {} bytes", http::MAX_HEAD);
            refuse(&mut client, 431, None, &format!("toolcage: {why}\n"));
            return;
        }
        HeadRead::Closed => return,
    };
    let (request, op) = match http::parse(&buf[..end]) {
        Ok(r @ Request::Connect { .. }) => (r, "connect"),
        Ok(r) => (r, "http"),
        Err(BadRequest { status, reason }) => {
            let refusal = DomainRefusal {
                kind: RefusalKind::BadHost,
                rule: None,
                reason: reason.clone(),
            };
            shared.deny("proxy", "http", "request".into(), &refusal);
            refuse(&mut client, status, None, &format!("toolcage: {reason}\n"));
            return;
        }
    };
    let (host, port) = match &request {
        Request::Connect { host, port } | Request::Forward { host, port, .. } => {
            (host.clone(), *port)
        }
    };
    let shown = target(&host, Some(port));
    let mut server = match upstream::open(shared, host, port, op) {
        Ok(s) => s,
        Err(OpenError::Refused(r)) => {
            let body = format!("toolcage: blocked: {shown} ({})\n", r.reason);
            refuse(&mut client, 403, Some(r.kind.header()), &body);
            return;
        }
        Err(OpenError::Failed(e)) => {
            let body = format!("toolcage: cannot reach {shown}: {e}\n");
            refuse(&mut client, 502, None, &body);
            return;
        }
    };
    let sent = match &request {
        Request::Connect { .. } => client.write_all(&http::response(200, None, "")),
        Request::Forward { head, .. } => server.write_all(head),
    };
    if sent.is_err() || server.write_all(&buf[end..]).is_err() {
        return;
    }
    relay(shared, client, server);
}

/// A connection to a synthetic address: the name it stands for, on the
/// port the program chose.
fn capture(shared: &Shared, client: TcpStream) {
    let Ok(local) = client.local_addr() else {
        return;
    };
    let host = upstream::unsynthesize(shared, Host::Ip(local.ip()));
    if let Host::Ip(ip) = host {
        let refusal = DomainRefusal {
            kind: RefusalKind::BadHost,
            rule: None,
            reason: format!(
                "{ip} is not an address the call's DNS gave out; only names are forwarded"
            ),
        };
        let shown = target(&Host::Ip(ip), Some(local.port()));
        shared.deny("proxy", "tcp", shown, &refusal);
        return;
    }
    if let Ok(server) = upstream::open(shared, host, local.port(), "tcp") {
        relay(shared, client, server);
    }
}

fn dns_tcp(shared: &Shared, mut client: TcpStream) {
    let _ = client.set_read_timeout(Some(Duration::from_secs(10)));
    loop {
        let mut len = [0u8; 2];
        if client.read_exact(&mut len).is_err() {
            return;
        }
        let mut query = vec![0u8; u16::from_be_bytes(len) as usize];
        if query.len() > 4096 || client.read_exact(&mut query).is_err() {
            return;
        }
        let Some(reply) = answer_dns(shared, &query) else {
            return;
        };
        let mut out = (reply.len() as u16).to_be_bytes().to_vec();
        out.extend_from_slice(&reply);
        if client.write_all(&out).is_err() {
            return;
        }
    }
}

/// The stub's answer to one query: decide on the name, never resolve it.
pub(super) fn answer_dns(shared: &Shared, query: &[u8]) -> Option<Vec<u8>> {
    dns::reply(query, |name, qtype| {
        let deny = |target: String, r: &DomainRefusal| shared.deny("dns", "dns", target, r);
        let Some(name) = name else {
            let r = DomainRefusal {
                kind: RefusalKind::BadHost,
                rule: None,
                reason: "a name with bytes no host name has (NUL, a dot inside a label)".into(),
            };
            deny("(unprintable name)".into(), &r);
            return dns::Answer::NxDomain;
        };
        let host = match Host::parse(name) {
            Ok(h @ Host::Name(_)) => h,
            Ok(Host::Ip(_)) => return dns::Answer::NxDomain,
            Err(m) => {
                let r = DomainRefusal {
                    kind: RefusalKind::BadHost,
                    rule: None,
                    reason: m,
                };
                deny(toolcage_policy::hostname::shown(name), &r);
                return dns::Answer::NxDomain;
            }
        };
        match shared.policy.decide(&host, None) {
            Err(r) => {
                deny(host.to_string(), &r);
                dns::Answer::NxDomain
            }
            Ok(_) if dns::is_a(qtype) => {
                let name = host.name().unwrap_or_default();
                match shared.synth.lock().unwrap().address(name) {
                    Some(a) => dns::Answer::A(a),
                    None => dns::Answer::ServFail,
                }
            }
            Ok(_) => dns::Answer::NoData,
        }
    })
}

/// Copy bytes both ways until both directions are done (each side's EOF
/// is passed on as a half-close), either side fails, the call ends, or
/// nothing moves for [`IDLE_TIMEOUT`].
fn relay(shared: &Shared, a: TcpStream, b: TcpStream) {
    let Some(id) = shared.register(&a, &b) else {
        return; // the call is over
    };
    for s in [&a, &b] {
        let _ = s.set_nonblocking(true);
    }
    let mut dirs = [Pipe::new(), Pipe::new()]; // a -> b, b -> a
    let mut last = Instant::now();
    while !dirs.iter().all(|d| d.done) {
        let mut events = [PollFlags::empty(); 2];
        for (i, d) in dirs.iter().enumerate() {
            let (src, dst) = (i, 1 - i);
            if d.done {
                continue;
            }
            if d.pending() {
                events[dst] |= PollFlags::POLLOUT;
            } else if !d.eof {
                events[src] |= PollFlags::POLLIN;
            }
        }
        let left = IDLE_TIMEOUT.saturating_sub(last.elapsed());
        if left.is_zero() {
            break;
        }
        let mut fds = [
            PollFd::new(a.as_fd(), events[0]),
            PollFd::new(b.as_fd(), events[1]),
        ];
        let wait = PollTimeout::from(left.as_millis().min(60_000) as u16 + 1);
        match poll(&mut fds, wait) {
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => break,
            Ok(_) => {}
        }
        let streams = [&a, &b];
        let mut failed = false;
        for (i, d) in dirs.iter_mut().enumerate() {
            match d.step(streams[i], streams[1 - i]) {
                Ok(true) => last = Instant::now(),
                Ok(false) => {}
                Err(_) => failed = true,
            }
        }
        if failed || shared.stopping() {
            break;
        }
    }
    shared.unregister(id);
}

/// One direction of a relay: bytes read from the source and not yet
/// written to the destination.
struct Pipe {
    buf: Box<[u8; 16 * 1024]>,
    start: usize,
    end: usize,
    eof: bool,
    done: bool,
}

impl Pipe {
    fn new() -> Pipe {
        Pipe {
            buf: Box::new([0; 16 * 1024]),
            start: 0,
            end: 0,
            eof: false,
            done: false,
        }
    }

    fn pending(&self) -> bool {
        self.start < self.end
    }

    /// Move what can move without blocking; true when bytes moved.
    fn step(&mut self, mut src: &TcpStream, mut dst: &TcpStream) -> std::io::Result<bool> {
        if self.done {
            return Ok(false);
        }
        let mut moved = false;
        if !self.pending() && !self.eof {
            match src.read(&mut self.buf[..]) {
                Ok(0) => self.eof = true,
                Ok(n) => {
                    (self.start, self.end) = (0, n);
                    moved = true;
                }
                Err(e) if would_block(&e) => {}
                Err(e) => return Err(e),
            }
        }
        while self.pending() {
            match dst.write(&self.buf[self.start..self.end]) {
                Ok(n) => {
                    self.start += n;
                    moved = true;
                }
                Err(e) if would_block(&e) => break,
                Err(e) => return Err(e),
            }
        }
        if self.eof && !self.pending() {
            let _ = dst.shutdown(std::net::Shutdown::Write);
            self.done = true;
        }
        Ok(moved)
    }
}

fn would_block(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted)
}
