//! Escape suite, network: TCP/UDP/IPv6 to loopback and outside, DNS, bash
//! `/dev/tcp`, abstract and host unix sockets, raw sockets, TCP port rules
//! and TCP Fast Open. Only loopback and 192.0.2.1 (TEST-NET-1, never
//! routed) are ever targeted.

use crate::common;
use crate::escape_support;

use common::*;
use escape_support::*;
use std::io::Read;
use std::net::{TcpListener, UdpSocket};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::UnixListener;
use toolcage::policy::{Grant, Network};

fn grants(tag: &str) -> (Project, Grant, Grant) {
    let p = Project::new(tag);
    let deny = default_grant(&p.dir);
    let mut allow = deny.clone();
    allow.network = Network::On;
    (p, allow, deny)
}

fn tcp_grant(base: &Grant, connect: Vec<u16>, bind: Vec<u16>) -> Grant {
    let mut g = base.clone();
    g.network = Network::Tcp { connect, bind };
    g
}

/// What reached `listener` (None: no connection was ever made).
fn received(listener: &TcpListener) -> Option<String> {
    listener.set_nonblocking(true).unwrap();
    let (mut conn, _) = listener.accept().ok()?;
    conn.set_nonblocking(false).unwrap();
    conn.set_read_timeout(Some(std::time::Duration::from_secs(2)))
        .unwrap();
    let mut s = String::new();
    let _ = conn.read_to_string(&mut s);
    Some(s)
}

fn tcp_send(host: &str, port: u16) -> String {
    format!(
        "def f():\n    s = socket.create_connection(({host:?}, {port}), timeout=2)\n    s.sendall(b'ping'); s.close()\nt(f)"
    )
}

#[test]
fn tcp_to_loopback() {
    let (_p, allow, deny) = grants("net-tcp");
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let code = tcp_send("127.0.0.1", l.local_addr().unwrap().port());
    let ok = py(&allow, &code);
    assert_ok(&ok, "tcp loopback");
    assert_eq!(received(&l).as_deref(), Some("ping"));
    assert_denied(&py(&deny, &code), &["DENIED:EPERM"], "tcp loopback");
    assert_eq!(received(&l), None, "a connection reached the listener");
}

#[test]
fn tcp_to_outside_address() {
    // 192.0.2.1 is never routed: under the allowing grant the connect is
    // attempted (and times out or is unreachable); under the denying grant
    // the socket is refused before anything leaves.
    let (_p, allow, deny) = grants("net-out");
    let code = "def f():\n    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n    s.settimeout(0.3)\n    try:\n        s.connect(('192.0.2.1', 80))\n    except OSError as e:\n        if e.errno in (errno.EPERM, errno.EACCES): raise\n        return 'attempted'\n    except socket.timeout:\n        return 'attempted'\n    return 'connected'\nt(f)";
    let ok = py(&allow, code);
    assert_ok(&ok, "connect outside");
    assert_denied(&py(&deny, code), &["DENIED:EPERM"], "connect outside");
}

#[test]
fn udp_to_loopback() {
    let (_p, allow, deny) = grants("net-udp");
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    rx.set_nonblocking(true).unwrap();
    let port = rx.local_addr().unwrap().port();
    let code = format!(
        "def f():\n    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n    s.sendto(b'udp-ping', ('127.0.0.1', {port}))\nt(f)"
    );
    assert_ok(&py(&allow, &code), "udp loopback");
    let mut buf = [0u8; 64];
    let (n, _) = rx.recv_from(&mut buf).expect("control datagram");
    assert_eq!(&buf[..n], b"udp-ping");
    assert_denied(&py(&deny, &code), &["DENIED:EPERM"], "udp loopback");
    assert!(rx.recv_from(&mut buf).is_err(), "a datagram got out");
}

#[test]
fn dns_query() {
    // A DNS query to a resolver on loopback (the test plays the resolver),
    // then the stub resolver itself (127.0.0.53) and getaddrinfo.
    let (_p, allow, deny) = grants("net-dns");
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    rx.set_nonblocking(true).unwrap();
    let port = rx.local_addr().unwrap().port();
    let query = "b'\\x12\\x34\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x07example\\x03com\\x00\\x00\\x01\\x00\\x01'";
    let code = format!(
        "def f():\n    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n    s.sendto({query}, ('127.0.0.1', {port}))\nt(f)"
    );
    assert_ok(&py(&allow, &code), "dns query");
    let mut buf = [0u8; 512];
    let (n, _) = rx.recv_from(&mut buf).expect("control query");
    assert_eq!(&buf[..2], b"\x12\x34");
    assert!(n > 12);
    assert_denied(&py(&deny, &code), &["DENIED:EPERM"], "dns query");
    assert!(rx.recv_from(&mut buf).is_err(), "a query got out");
    let stub = "def f():\n    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n    s.sendto(b'\\x00' * 17, ('127.0.0.53', 53))\nt(f)";
    assert_ok(&py(&allow, stub), "dns stub send");
    assert_denied(&py(&deny, stub), &["DENIED:EPERM"], "dns stub send");
    // Names from /etc/hosts still resolve (no network involved)...
    let local = py(
        &deny,
        "t(lambda: socket.getaddrinfo('localhost', 80)[0][4][0])",
    );
    assert_ok(&local, "getaddrinfo localhost");
    // ...anything else fails at once instead of reaching a resolver.
    let remote = py(
        &deny,
        "try:\n    socket.getaddrinfo('toolcage-escape.example', 80)\n    print('RESOLVED')\nexcept socket.gaierror:\n    print('DENIED:gaierror')",
    );
    assert_denied(&remote, &["DENIED:gaierror"], "getaddrinfo remote");
}

#[test]
fn ipv6_to_loopback() {
    let (_p, allow, deny) = grants("net-v6");
    let l = TcpListener::bind("[::1]:0").unwrap();
    let code = tcp_send("::1", l.local_addr().unwrap().port());
    assert_ok(&py(&allow, &code), "tcp6 loopback");
    assert_eq!(received(&l).as_deref(), Some("ping"));
    assert_denied(&py(&deny, &code), &["DENIED:EPERM"], "tcp6 loopback");
    assert_eq!(received(&l), None);
    let udp = "t(lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).sendto(b'x', ('::1', 9)) and None)";
    assert_ok(&py(&allow, udp), "udp6");
    assert_denied(&py(&deny, udp), &["DENIED:EPERM"], "udp6");
}

#[test]
fn bash_dev_tcp_redirection() {
    let (_p, allow, deny) = grants("net-devtcp");
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let script =
        format!("if echo ping >/dev/tcp/127.0.0.1/{port}; then echo OK; else echo DENIED; fi");
    let ok = run_argv(&allow, &["/bin/bash", "-c", &script]);
    assert_ok(&ok, "/dev/tcp");
    assert_eq!(received(&l).as_deref(), Some("ping\n"));
    let bad = run_argv(&deny, &["/bin/bash", "-c", &script]);
    assert_denied(&bad, &["DENIED"], "/dev/tcp");
    assert!(
        bad.stderr.text.contains("Operation not permitted"),
        "{}",
        describe(&bad)
    );
    assert_eq!(received(&l), None);
}

#[test]
fn abstract_unix_socket_of_the_host() {
    // Abstract sockets live in the network namespace, which the sandbox
    // shares with the host. Network off: seccomp refuses connect(); network
    // on: Landlock's abstract-socket scope (ABI 6) refuses sockets created
    // outside the sandbox. Control: the same connect to an abstract socket
    // the tool created itself.
    let (_p, allow, deny) = grants("net-abstract");
    let name = format!("toolcage-escape-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let l = UnixListener::bind_addr(&addr).unwrap();
    l.set_nonblocking(true).unwrap();
    let connect = |n: &str| {
        format!(
            "def f():\n    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n    c.connect('\\0{n}')\n    c.sendall(b'ping')\n"
        )
    };
    let control = format!(
        "srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\nsrv.bind('\\0{name}-inner')\nsrv.listen(1)\n{}t(f)",
        connect(&format!("{name}-inner"))
    );
    assert_ok(&py(&allow, &control), "abstract socket inside");
    let attack = format!("{}t(f)", connect(&name));
    assert_denied(&py(&deny, &attack), &["DENIED:EPERM"], "abstract, net off");
    assert_denied(&py(&allow, &attack), &["DENIED:EPERM"], "abstract, net on");
    assert!(
        l.accept().is_err(),
        "a sandboxed process reached the host socket"
    );
}

#[test]
fn host_unix_socket() {
    // A path socket outside the project (think /run/docker.sock).
    let (_p, allow, deny) = grants("net-hostsock");
    let out = outside_dir("net-hostsock");
    let path = out.path("agent.sock");
    let l = UnixListener::bind(&path).unwrap();
    l.set_nonblocking(true).unwrap();
    let code = format!(
        "def f():\n    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n    c.connect({:?})\nt(f)",
        path.display().to_string()
    );
    // The socket must be inside the grant to exist at all; the control has
    // the network on, the attack the same read grant and the network off.
    let allow = with_read(&allow, &out.dir);
    let deny = with_read(&deny, &out.dir);
    assert_ok(&py(&allow, &code), "host unix socket");
    assert!(l.accept().is_ok());
    assert_denied(&py(&deny, &code), &["DENIED:EPERM"], "host unix socket");
    let tcp_only = tcp_grant(&deny, vec![80], vec![]);
    assert_denied(
        &py(&tcp_only, &code),
        &["DENIED:EPERM"],
        "host unix socket, tcp mode",
    );
    assert!(l.accept().is_err());
    // Connected pairs stay available: they reach nothing.
    let pair = "a, b = socket.socketpair()\nt(lambda: a.send(b'x'))";
    assert_ok(&py(&deny, pair), "socketpair");
}

#[test]
fn raw_and_packet_sockets() {
    // Even with the network on: capabilities are gone, so no CAP_NET_RAW.
    let (_p, allow, deny) = grants("net-raw");
    let _ = deny;
    let stream = "t(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close())";
    assert_ok(&py(&allow, stream), "inet stream socket");
    let raw =
        "t(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP).close())";
    assert_denied(&py(&allow, raw), &["DENIED:EPERM"], "raw socket");
    let raw6 =
        "t(lambda: socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6).close())";
    assert_denied(&py(&allow, raw6), &["DENIED:EPERM"], "raw6 socket");
    let packet = "t(lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0x0300).close())";
    assert_denied(&py(&allow, packet), &["DENIED:EPERM"], "packet socket");
}

#[test]
fn tcp_port_rules() {
    let (_p, _, deny) = grants("net-ports");
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let allow = tcp_grant(&deny, vec![port], vec![]);
    let other = tcp_grant(&deny, vec![port.wrapping_add(1).max(1)], vec![]);
    let code = tcp_send("127.0.0.1", port);
    assert_ok(&py(&allow, &code), "tcp allowed port");
    assert_eq!(received(&l).as_deref(), Some("ping"));
    assert_denied(&py(&other, &code), &["DENIED:EACCES"], "tcp other port");
    assert_eq!(received(&l), None);
    // UDP is not TCP.
    let udp = format!(
        "t(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', {port})) and None)"
    );
    let mut on = deny.clone();
    on.network = Network::On;
    assert_ok(&py(&on, &udp), "udp, network on");
    assert_denied(&py(&allow, &udp), &["DENIED:EPERM"], "udp, tcp mode");
}

#[test]
fn tcp_bind_rules() {
    let (_p, _, deny) = grants("net-bind");
    let port = {
        let probe = TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let code = format!(
        "def f():\n    s = socket.socket()\n    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n    s.bind(('127.0.0.1', {port}))\n    s.listen(1)\nt(f)"
    );
    let allow = tcp_grant(&deny, vec![], vec![port]);
    let other = tcp_grant(&deny, vec![], vec![port.wrapping_add(1).max(1)]);
    assert_ok(&py(&allow, &code), "bind allowed port");
    assert_denied(&py(&other, &code), &["DENIED:EACCES"], "bind other port");
    assert_denied(&py(&deny, &code), &["DENIED:EPERM"], "bind, network off");
}

#[test]
fn tcp_fast_open_cannot_bypass_port_rules() {
    // sendto(MSG_FASTOPEN) connects implicitly, without connect(2), so
    // Landlock's port rules never see it: in TCP mode seccomp refuses
    // MSG_FASTOPEN altogether. Control: the same call with the network on.
    let (_p, allow, deny) = grants("net-tfo");
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let code = format!(
        "def f():\n    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n    s.sendto(b'ping', socket.MSG_FASTOPEN, ('127.0.0.1', {port}))\n    s.close()\nt(f)"
    );
    assert_ok(&py(&allow, &code), "tfo, network on");
    assert_eq!(received(&l).as_deref(), Some("ping"));
    for g in [
        tcp_grant(&deny, vec![port.wrapping_add(1).max(1)], vec![]),
        tcp_grant(&deny, vec![port], vec![]),
    ] {
        let bad = py(&g, &code);
        let got = received(&l);
        assert_eq!(got, None, "TCP Fast Open reached a port: {:?}", g.network);
        assert_denied(&bad, &["DENIED:EPERM"], "tfo, tcp mode");
    }
    // sendmsg carries the same flag.
    let other = tcp_grant(&deny, vec![port.wrapping_add(1).max(1)], vec![]);
    let msg = format!(
        "def f():\n    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n    s.sendmsg([b'ping'], [], socket.MSG_FASTOPEN, ('127.0.0.1', {port}))\nt(f)"
    );
    assert_ok(&py(&allow, &msg), "tfo sendmsg, network on");
    assert_eq!(received(&l).as_deref(), Some("ping"));
    assert_denied(
        &py(&other, &msg),
        &["DENIED:EPERM"],
        "tfo sendmsg, tcp mode",
    );
    assert_eq!(received(&l), None);
}

#[test]
fn network_off_has_its_own_namespace_with_loopback_up() {
    own_namespace_with_loopback_up("net-own-ns");
}

#[test]
fn namespaces_made_ahead_are_the_same() {
    // `serve` keeps one network namespace made ahead for the next call:
    // the calls see what they see without it.
    toolcage::sandbox::keep_network_namespace_ready();
    own_namespace_with_loopback_up("net-own-ns-ahead");
    own_namespace_with_loopback_up("net-own-ns-ahead2");
}

fn own_namespace_with_loopback_up(tag: &str) {
    // Network off: a namespace of its own (not the host's), loopback up.
    // Control: with the network on the call shares the host's namespace.
    let (_p, allow, deny) = grants(tag);
    if namespace_free_run() {
        return; // no namespaces: the report names the gap (mode.rs)
    }
    let host = std::fs::read_link("/proc/self/ns/net").unwrap();
    let code = "import fcntl, struct\n\
        s = socket.socket(socket.AF_UNIX)\n\
        req = struct.pack('16sH14x', b'lo', 0)\n\
        flags = struct.unpack('16sH14x', fcntl.ioctl(s, 0x8913, req))[1]\n\
        print(os.readlink('/proc/self/ns/net'), 'up' if flags & 1 else 'down')";
    let own = py(&deny, code);
    assert!(own.exit.success(), "{}", describe(&own));
    let shared = py(&allow, code);
    assert!(shared.exit.success(), "{}", describe(&shared));
    let words = |o: &toolcage::sandbox::Outcome| -> (String, String) {
        let mut w = o.stdout.text.split_whitespace().map(str::to_string);
        (w.next().unwrap_or_default(), w.next().unwrap_or_default())
    };
    let (own_ns, own_lo) = words(&own);
    let (shared_ns, _) = words(&shared);
    assert_eq!(
        shared_ns,
        host.display().to_string(),
        "network on: the host's"
    );
    assert_ne!(own_ns, shared_ns, "network off: a namespace of its own");
    assert_eq!(own_lo, "up", "{}", describe(&own));
}

#[test]
fn abstract_names_cannot_be_squatted_with_the_network_off() {
    // Namespace-free the host's abstract names are the call's: a tool that
    // binds `@/tmp/.X11-unix/X0` (or any name a host service binds later)
    // keeps that service from starting. seccomp cannot read the address,
    // so bind() is refused there with the network off (a bound socket can
    // neither listen nor connect there anyway). Controls: the same binds
    // with the network on; with a network namespace (the call's own
    // names) also with the network off; connected pairs keep working.
    let (p, allow, deny) = grants("net-squat");
    let name = format!("toolcage-squat-{}", std::process::id());
    let binds = [
        (
            "abstract",
            format!("s = socket.socket(socket.AF_UNIX)\nt(lambda: s.bind('\\0{name}'))"),
        ),
        (
            "autobind",
            "s = socket.socket(socket.AF_UNIX)\nt(lambda: s.bind(''))".to_string(),
        ),
        (
            "socketpair end",
            format!("a, b = socket.socketpair()\nt(lambda: a.bind('\\0{name}-pair'))"),
        ),
        (
            "path in the project",
            format!(
                "s = socket.socket(socket.AF_UNIX)\nt(lambda: s.bind({:?}))",
                p.path("tool.sock").display().to_string()
            ),
        ),
    ];
    for (what, code) in &binds {
        let _ = std::fs::remove_file(p.path("tool.sock"));
        assert_ok(&py(&allow, code), &format!("{what} bind, network on"));
        let _ = std::fs::remove_file(p.path("tool.sock"));
        let off = py(&deny, code);
        if namespace_free_run() {
            assert_denied(
                &off,
                &["DENIED:EPERM"],
                &format!("{what} bind, network off"),
            );
        } else {
            assert_ok(&off, &format!("{what} bind in the call's own namespace"));
        }
    }
    let pair = "a, b = socket.socketpair()\na.send(b'x')\nt(lambda: b.recv(1).decode())";
    assert_eq!(py(&deny, pair).stdout.text.trim(), "OK:x");
    // The name stays the host's to take.
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    UnixListener::bind_addr(&addr).expect("the host binds the name after the calls");
}

#[test]
fn abstract_names_cannot_be_squatted_in_tcp_mode() {
    // Network "tcp" allows AF_UNIX only as connected pairs, but an end of
    // a pair can still bind an abstract name, and tcp mode shares the
    // host's network namespace: the name is the host's. bind is refused
    // without bind ports, and with them allowed only for an address the
    // size of an IPv4 or IPv6 one. Controls: the TCP bind on the granted
    // port works; with the network off and a namespace of its own the
    // pair's name is the call's.
    let (_p, _, deny) = grants("net-squat-tcp");
    let port = {
        let probe = TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let name = format!("toolcage-squat-tcp-{}", std::process::id());
    let pair = format!("a, b = socket.socketpair()\nt(lambda: a.bind('\\0{name}'))");
    let tcp = format!(
        "s = socket.socket()\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
         t(lambda: s.bind(('127.0.0.1', {port})))"
    );
    let server = tcp_grant(&deny, vec![], vec![port]);
    let client = tcp_grant(&deny, vec![port], vec![]);
    assert_ok(&py(&server, &tcp), "tcp bind on the granted port");
    for g in [&server, &client] {
        assert_denied(&py(g, &pair), &["DENIED:EPERM"], "pair bind, tcp mode");
    }
    // Control: the same bind with the network off and a namespace of its
    // own is the call's (namespace-free every bind is refused there).
    if !namespace_free_run() {
        assert_ok(&py(&deny, &pair), "pair bind in the call's own namespace");
    }
    // The name stays the host's to take.
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    UnixListener::bind_addr(&addr).expect("the host binds the name after the calls");
}
