//! Escape suite, domain mode: every bypass class the research lists
//! (resolving before deciding, split decision paths, NUL in host names,
//! a Host header that differs from the target, IP literals of private
//! addresses, DNS answers that rebind to loopback, IPv6 literals,
//! user information in absolute-form URLs, NO_PROXY, raw connects and UDP
//! to outside), each next to its positive control: an allowed host
//! reached the way real programs reach it (curl through the proxy and
//! through CONNECT, getaddrinfo, a program that ignores the proxy
//! variables).
//!
//! No internet: two servers on the host's loopback, started by the test,
//! pinned in the policy as `allowed.test` (allowed) and `denied.test` (a
//! canary that must never see a byte). Runs as root and as an ordinary
//! user (`tests/unprivileged.sh`); namespace-free, the mode is refused.

use crate::common;
use crate::domains_support;
use crate::escape_support;

use common::namespace_free_run;
use domains_support::*;
use escape_support::{PY, describe};
use std::net::{ToSocketAddrs, UdpSocket};

#[test]
fn plain_http_by_name() {
    let s = setup("dom-http");
    let g = s.grant(&["allowed.test"]);
    let script = format!(
        "curl -sS -f http://allowed.test:{a}/ok || echo CURL-FAILED\n\
         curl -sS -f http://denied.test:{c}/x >/dev/null 2>&1 || echo DENIED:$?",
        a = s.ok.port,
        c = s.canary.port
    );
    let Some(o) = sh(&g, &script) else { return };
    lines(&o, &["hello /ok", "DENIED:22"], "plain HTTP");
    s.canary.untouched("plain HTTP to a denied name");
    let d = o.denials.iter().find(|d| d.op == "http").expect("recorded");
    assert_eq!(
        d.line(),
        format!(
            "blocked: denied.test:{} (not in the allow list)",
            s.canary.port
        )
    );
    assert_eq!(s.ok.seen().len(), 1);
    assert!(s.ok.seen()[0].starts_with("GET /ok HTTP/1.1\r\n"));
    assert!(s.ok.seen()[0].contains("Connection: close\r\n"));
}

#[test]
fn connect_tunnels() {
    let s = setup("dom-connect");
    let g = s.grant(&["allowed.test"]);
    let (a, c) = (s.ok.port, s.canary.port);
    let script = format!(
        "curl -sS -f -p http://allowed.test:{a}/tunnel || echo CURL-FAILED\n\
         curl -sS https://allowed.test:{a}/ >/dev/null 2>&1; echo TLS:$?\n\
         curl -sS -p http://denied.test:{c}/ >/dev/null 2>&1 || echo DENIED:$?"
    );
    let Some(o) = sh(&g, &script) else { return };
    lines(&o, &["hello /tunnel", "DENIED:56"], "CONNECT");
    // The https request reached the allowed server through the tunnel: its
    // first bytes are a TLS handshake record (the server speaks no TLS).
    assert!(
        s.ok.seen()
            .iter()
            .any(|r| r.as_bytes().starts_with(&[0x16, 0x03])),
        "no TLS ClientHello arrived: {:?}\n{}",
        s.ok.seen(),
        describe(&o)
    );
    s.canary.untouched("CONNECT to a denied name");
    assert!(denied(&o, &format!("denied.test:{c}")));
}

#[test]
fn dns_answers_allowed_names_only() {
    let s = setup("dom-dns");
    let g = s.grant(&["allowed.test"]);
    let host_resolver = std::fs::read_to_string("/etc/resolv.conf")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("nameserver ").map(|s| s.trim().to_string()))
        })
        .filter(|ns| ns.parse::<std::net::Ipv4Addr>().is_ok())
        .unwrap_or_else(|| "192.0.2.53".into());
    let code = format!(
        "def ga(n):\n    return socket.getaddrinfo(n, 80, proto=socket.IPPROTO_TCP)[0][4][0]\n\
         t(lambda: ga('allowed.test'))\n\
         t(lambda: ga('ALLOWED.test.'))\n\
         t(lambda: ga('denied.test'))\n\
         t(lambda: ga('other.test'))\n\
         q = b'\\x12\\x34\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x05other\\x04test\\x00\\x00\\x01\\x00\\x01'\n\
         u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         u.settimeout(5)\n\
         u.sendto(q, ('127.0.0.1', 53))\n\
         print('RCODE:%d' % (u.recv(512)[3] & 15))\n\
         t(lambda: u.sendto(q, ({host_resolver:?}, 53)) and None)\n"
    );
    let Some(o) = py(&g, &code) else { return };
    let out: Vec<&str> = o.stdout.text.lines().collect();
    assert!(
        out.len() == 6 && out[0].starts_with("OK:127.1.") && out[1] == out[0],
        "allowed names resolve to a synthetic address\n{}",
        describe(&o)
    );
    assert_eq!(out[2], "DENIED:-2", "a pinned name that is not allowed");
    assert_eq!(out[3], "DENIED:-2", "a name outside the allow list");
    assert_eq!(out[4], "RCODE:3", "NXDOMAIN from the stub");
    assert_eq!(out[5], "DENIED:ENETUNREACH", "no resolver is reachable");
    assert!(
        o.denials
            .iter()
            .any(|d| d.op == "dns" && d.target == "other.test")
    );
}

#[test]
fn deciding_comes_before_resolving() {
    // `denied.invalid` resolves nowhere: a proxy that resolved first would
    // answer 502 (cannot resolve) and leak the lookup; toolcage says 403.
    let s = setup("dom-order");
    let g = s.grant(&["allowed.test"]);
    let code = format!(
        "{}{}",
        raw_request("denied", "CONNECT denied.invalid:443 HTTP/1.1\r\n\r\n"),
        raw_request(
            "allowed",
            &format!("CONNECT allowed.test:{} HTTP/1.1\r\n\r\n", s.ok.port)
        )
    );
    let Some(o) = py(&g, &code) else { return };
    lines(
        &o,
        &[
            "denied: HTTP/1.1 403 Forbidden",
            "allowed: HTTP/1.1 200 Connection established",
        ],
        "decide first",
    );
    let d = o.denials.iter().find(|d| d.target == "denied.invalid:443");
    assert_eq!(
        d.map(|d| d.reason.as_str()),
        Some("not in the allow list"),
        "{:?}",
        o.denials
    );
}

#[test]
fn every_path_shares_one_decision() {
    // The same denied name through plain HTTP, CONNECT, DNS, a raw connect
    // to a synthetic address, and a relay inside the sandbox that forwards
    // to the proxy (claude-code#87381): all refused; the allowed name works
    // through the same relay.
    let s = setup("dom-paths");
    let g = s.grant(&["allowed.test"]);
    let (a, c) = (s.ok.port, s.canary.port);
    let relay = "import socket, threading\n\
         srv = socket.socket(); srv.bind(('127.0.0.1', 9000)); srv.listen(8)\n\
         def pipe(x, y):\n    while True:\n        d = x.recv(65536)\n        if not d: break\n        y.sendall(d)\n    y.shutdown(socket.SHUT_WR)\n\
         while True:\n    c, _ = srv.accept()\n    u = socket.create_connection(('127.0.0.1', 3128))\n    threading.Thread(target=pipe, args=(c, u)).start()\n    threading.Thread(target=pipe, args=(u, c)).start()\n";
    let script = format!(
        "{PY} -c \"$RELAY\" & sleep 0.5\n\
         curl -sS -f -x http://127.0.0.1:9000 http://allowed.test:{a}/relayed || echo RELAY-FAILED\n\
         curl -sS -f -x http://127.0.0.1:9000 http://denied.test:{c}/ >/dev/null 2>&1 || echo RELAY-DENIED:$?\n\
         curl -sS -f http://denied.test:{c}/ >/dev/null 2>&1 || echo HTTP-DENIED:$?\n\
         curl -sS -p http://denied.test:{c}/ >/dev/null 2>&1 || echo CONNECT-DENIED:$?\n\
         curl -sS -f --noproxy '*' http://denied.test:{c}/ >/dev/null 2>&1 || echo DNS-DENIED:$?\n\
         curl -sS -f --noproxy '*' http://127.1.0.77:443/ >/dev/null 2>&1 || echo RAW-DENIED:$?"
    );
    let mut g = g;
    g.env_set.insert("RELAY".into(), relay.into());
    let Some(o) = sh(&g, &script) else { return };
    lines(
        &o,
        &[
            "hello /relayed",
            "RELAY-DENIED:22",
            "HTTP-DENIED:22",
            "CONNECT-DENIED:56",
            "DNS-DENIED:6",
        ],
        "one decision",
    );
    assert!(
        o.stdout.text.contains("RAW-DENIED:"),
        "a synthetic address no name has: {}",
        describe(&o)
    );
    s.canary.untouched("split decision paths");
}

#[test]
fn nul_and_odd_host_names() {
    let s = setup("dom-nul");
    let g = s.grant(&["allowed.test"]);
    let a = s.ok.port;
    let code = [
        raw_request(
            "nul-suffix",
            &format!("CONNECT allowed.test\0.evil.test:{a} HTTP/1.1\r\n\r\n"),
        ),
        raw_request(
            "nul-prefix",
            &format!("CONNECT evil.test\0allowed.test:{a} HTTP/1.1\r\n\r\n"),
        ),
        raw_request(
            "percent",
            &format!("GET http://allowed.test%00.evil:{a}/ HTTP/1.1\r\nHost: allowed.test%00.evil:{a}\r\n\r\n"),
        ),
        raw_request(
            "space",
            &format!("CONNECT allowed.test :{a} HTTP/1.1\r\n\r\n"),
        ),
        raw_request(
            "numeric",
            &format!("CONNECT 2130706433:{a} HTTP/1.1\r\n\r\n"),
        ),
        raw_request(
            "normalised",
            &format!("CONNECT ALLOWED.TEST.:{a} HTTP/1.1\r\n\r\n"),
        ),
    ]
    .concat();
    let dns = "q = b'\\x00\\x01\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x08allowed\\x00\\x04test\\x00\\x00\\x01\\x00\\x01'\n\
         u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(5)\n\
         u.sendto(q, ('127.0.0.1', 53)); print('dns-nul: RCODE:%d' % (u.recv(512)[3] & 15))\n";
    let Some(o) = py(&g, &format!("{code}{dns}")) else {
        return;
    };
    lines(
        &o,
        &[
            "nul-suffix: HTTP/1.1 400 Bad Request",
            "nul-prefix: HTTP/1.1 400 Bad Request",
            "percent: HTTP/1.1 400 Bad Request",
            "space: HTTP/1.1 400 Bad Request",
            "numeric: HTTP/1.1 400 Bad Request",
            "normalised: HTTP/1.1 200 Connection established",
            "dns-nul: RCODE:3",
        ],
        "odd host names",
    );
}

#[test]
fn host_header_must_match_the_target() {
    let s = setup("dom-hosthdr");
    let g = s.grant(&["allowed.test"]);
    let (a, c) = (s.ok.port, s.canary.port);
    let code = [
        raw_request(
            "mismatch",
            &format!("GET http://allowed.test:{a}/m HTTP/1.1\r\nHost: denied.test:{c}\r\n\r\n"),
        ),
        raw_request(
            "two-hosts",
            &format!("GET http://allowed.test:{a}/t HTTP/1.1\r\nHost: allowed.test:{a}\r\nHost: denied.test:{c}\r\n\r\n"),
        ),
        raw_request(
            "match",
            &format!("GET http://allowed.test:{a}/ok HTTP/1.1\r\nHost: allowed.test:{a}\r\n\r\n"),
        ),
    ]
    .concat();
    let Some(o) = py(&g, &code) else { return };
    lines(
        &o,
        &[
            "mismatch: HTTP/1.1 400 Bad Request",
            "two-hosts: HTTP/1.1 400 Bad Request",
            "match: HTTP/1.1 200 OK",
        ],
        "Host header",
    );
    assert_eq!(s.ok.seen().len(), 1, "{:?}", s.ok.seen());
    assert!(!s.ok.seen()[0].contains("denied.test"));
}

#[test]
fn ip_literals_of_private_addresses() {
    let s = setup("dom-ip");
    let a = s.ok.port;
    let requests = [
        raw_request("v4", &format!("CONNECT 127.0.0.1:{a} HTTP/1.1\r\n\r\n")),
        raw_request("v6", &format!("CONNECT [::1]:{a} HTTP/1.1\r\n\r\n")),
        raw_request(
            "mapped",
            &format!("CONNECT [::ffff:127.0.0.1]:{a} HTTP/1.1\r\n\r\n"),
        ),
        raw_request("bare-v6", &format!("CONNECT ::1:{a} HTTP/1.1\r\n\r\n")),
        raw_request(
            "plain",
            &format!("GET http://127.0.0.1:{a}/p HTTP/1.1\r\nHost: 127.0.0.1:{a}\r\n\r\n"),
        ),
    ]
    .concat();
    // A name-only allow list (even `*`) never matches an address.
    let Some(o) = py(&s.grant(&["*"]), &requests) else {
        return;
    };
    lines(
        &o,
        &[
            "v4: HTTP/1.1 403 Forbidden",
            "v6: HTTP/1.1 403 Forbidden",
            "mapped: HTTP/1.1 403 Forbidden",
            "bare-v6: HTTP/1.1 400 Bad Request",
            "plain: HTTP/1.1 403 Forbidden",
        ],
        "IP literals",
    );
    assert!(s.ok.seen().is_empty(), "{:?}", s.ok.seen());
    // Control: the address allowed explicitly, with its port.
    let allow = format!("127.0.0.1:{a}");
    let Some(o) = py(&s.grant(&[&allow]), &requests) else {
        return;
    };
    lines(
        &o,
        &[
            "v4: HTTP/1.1 200 Connection established",
            "mapped: HTTP/1.1 200 Connection established",
            "plain: HTTP/1.1 200 OK",
        ],
        "an allowed address",
    );
}

#[test]
fn a_name_that_resolves_to_loopback_is_refused() {
    // DNS rebinding: an allowed name whose real answer is 127.0.0.1 (here
    // `localhost`, resolved by toolcage through the host's /etc/hosts).
    let s = setup("dom-rebind");
    let resolves_to_loopback = ("localhost", 80)
        .to_socket_addrs()
        .is_ok_and(|mut a| a.any(|a| a.ip().is_loopback()));
    if !resolves_to_loopback {
        eprintln!("skipped: localhost does not resolve to loopback here");
        return;
    }
    let a = s.ok.port;
    let script = format!(
        "curl -sS -i --noproxy '' -x http://127.0.0.1:3128 http://localhost:{a}/r | head -2 | tr -d '\\r'"
    );
    let Some(o) = sh(&s.grant(&["localhost"]), &script) else {
        return;
    };
    lines(
        &o,
        &[
            "HTTP/1.1 403 Forbidden",
            "X-Proxy-Error: blocked-private-address",
        ],
        "rebinding",
    );
    assert!(s.ok.seen().is_empty(), "{:?}", s.ok.seen());
    // Control: the same name, once its address is allowed explicitly.
    let allow = format!("127.0.0.1:{a}");
    let Some(o) = sh(&s.grant(&["localhost", &allow]), &script) else {
        return;
    };
    lines(&o, &["HTTP/1.1 200 OK"], "an explicitly allowed address");
}

#[test]
fn user_information_in_absolute_urls() {
    let s = setup("dom-userinfo");
    let g = s.grant(&["allowed.test"]);
    let (a, c) = (s.ok.port, s.canary.port);
    let code = [
        raw_request(
            "userinfo",
            &format!("GET http://allowed.test:{a}@denied.test:{c}/ HTTP/1.1\r\nHost: denied.test:{c}\r\n\r\n"),
        ),
        raw_request(
            "fragment",
            &format!("GET http://denied.test:{c}#@allowed.test:{a}/ HTTP/1.1\r\nHost: allowed.test:{a}\r\n\r\n"),
        ),
        raw_request(
            "control",
            &format!("GET http://allowed.test:{a}/u HTTP/1.1\r\nHost: allowed.test:{a}\r\n\r\n"),
        ),
    ]
    .concat();
    let curl = format!(
        "import subprocess\nr = subprocess.run(['curl', '-sS', '-f', 'http://allowed.test:{a}@denied.test:{c}/'], capture_output=True)\nprint('curl-userinfo: exit %d' % r.returncode)\n"
    );
    let Some(o) = py(&g, &format!("{code}{curl}")) else {
        return;
    };
    lines(
        &o,
        &[
            "userinfo: HTTP/1.1 400 Bad Request",
            "fragment: HTTP/1.1 400 Bad Request",
            "control: HTTP/1.1 200 OK",
            "curl-userinfo: exit 22",
        ],
        "user information",
    );
    s.canary.untouched("user information");
}

#[test]
fn no_proxy_reaches_nothing_but_allowed_names() {
    // NO_PROXY names only the call's own loopback; a program that skips the
    // proxy (NO_PROXY=*, --noproxy) reaches an allowed name through its
    // synthetic address, and nothing on the host.
    let s = setup("dom-noproxy");
    let (a, c) = (s.ok.port, s.canary.port);
    let g = s.grant(&[&format!("allowed.test:{a}")]);
    let script = format!(
        "echo NO_PROXY=$NO_PROXY\n\
         export NO_PROXY='*' no_proxy='*'\n\
         curl -sS -f http://allowed.test:{a}/direct || echo DIRECT-FAILED\n\
         curl -sS -f http://denied.test:{c}/ >/dev/null 2>&1 || echo NAME-DENIED:$?\n\
         curl -sS -f --noproxy '*' http://127.0.0.1:{c}/ >/dev/null 2>&1 || echo LOOPBACK-DENIED:$?\n\
         curl -sS -f --noproxy '*' http://127.0.0.1:{a}/ >/dev/null 2>&1 || echo CAPTURED-DENIED:$?"
    );
    let Some(o) = sh(&g, &script) else { return };
    lines(
        &o,
        &[
            "NO_PROXY=localhost,127.0.0.1,::1",
            "hello /direct",
            "NAME-DENIED:6",
            "LOOPBACK-DENIED:7",
        ],
        "NO_PROXY",
    );
    assert!(
        o.stdout.text.contains("CAPTURED-DENIED:"),
        "{}",
        describe(&o)
    );
    assert_eq!(s.ok.seen().len(), 1, "{:?}", s.ok.seen());
    // Straight from curl, not rewritten by the proxy.
    assert!(
        !s.ok.seen()[0].contains("Connection: close"),
        "{:?}",
        s.ok.seen()
    );
    s.canary.untouched("NO_PROXY");
}

#[test]
fn raw_sockets_reach_nothing_outside() {
    let s = setup("dom-raw");
    let (a, c) = (s.ok.port, s.canary.port);
    let g = s.grant(&[&format!("allowed.test:{a}")]);
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let u = udp.local_addr().unwrap().port();
    let code = format!(
        "def conn(h, p):\n    s = socket.create_connection((h, p), timeout=3)\n    s.sendall(b'GET /raw HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n    return s.recv(64).split(b'\\r\\n')[0].decode()\n\
         t(lambda: conn('allowed.test', {a}))\n\
         t(lambda: conn('192.0.2.1', 80))\n\
         t(lambda: conn('127.0.0.1', {c}))\n\
         t(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('192.0.2.1', 53)) and None)\n\
         t(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'udp-escape', ('127.0.0.1', {u})) and None)\n\
         t(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))\n\
         t(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))\n"
    );
    let Some(o) = py(&g, &code) else { return };
    let out: Vec<&str> = o.stdout.text.lines().collect();
    assert_eq!(
        out,
        [
            "OK:HTTP/1.1 200 OK",
            "DENIED:ENETUNREACH",
            "DENIED:ECONNREFUSED",
            "DENIED:ENETUNREACH",
            "OK",
            "DENIED:EPERM",
            "DENIED:EPERM",
        ],
        "raw sockets\n{}",
        describe(&o)
    );
    let mut buf = [0u8; 64];
    assert!(
        udp.recv_from(&mut buf).is_err(),
        "a datagram reached the host"
    );
    s.canary.untouched("raw connect");
}

#[test]
fn exec_allow_domain_from_the_command_line() {
    // The CLI path end to end: `--allow-domain` with pins from a policy file.
    let s = setup("dom-cli");
    let a = s.ok.port;
    let policy = s._p.write(
        "pins.toml",
        "[network]\nmode = \"domains\"\nhosts = { \"allowed.test\" = \"127.0.0.1\", \"denied.test\" = \"127.0.0.1\" }\n",
    );
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_toolcage"));
    cmd.current_dir(&s._p.dir).args([
        "exec",
        "--policy",
        policy.to_str().unwrap(),
        "--allow-domain",
        &format!("allowed.test:{a}"),
        "--",
        "sh",
        "-c",
        &format!(
            "curl -sS -f http://allowed.test:{a}/cli; curl -sS -f http://denied.test:{a}/ >/dev/null 2>&1 || echo DENIED:$?"
        ),
    ]);
    if namespace_free_run() {
        common::without_namespaces(&mut cmd);
    }
    let out = cmd.output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    if namespace_free_run() {
        assert_eq!(out.status.code(), Some(125), "{stdout}{stderr}");
        assert!(
            stderr.contains("needs the call's own network namespace"),
            "{stderr}"
        );
        return;
    }
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_eq!(stdout, "hello /cli\nDENIED:22\n", "{stderr}");
    assert!(
        stderr.contains(&format!(
            "toolcage: blocked: denied.test:{a} (not in the allow list)"
        )),
        "{stderr}"
    );
}

#[test]
fn a_calls_denials_reach_its_result_and_the_audit_log() {
    // `toolcage call` of an Octomind tool that fetches two names: the
    // agent's text says which host was blocked and why; `--json` and the
    // audit record carry the denial.
    let s = setup("dom-call");
    let (a, c) = (s.ok.port, s.canary.port);
    let dir = &s._p;
    let tool = dir.write(
        ".agents/tools/fetch",
        &format!(
            "#!/bin/sh\n# @description Fetch two pages.\ncurl -sS http://allowed.test:{a}/tool\ncurl -sS -f http://denied.test:{c}/ >/dev/null 2>&1 || echo refused\n"
        ),
    );
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let policy = dir.write(
        "../dom-call-policy.toml",
        &format!(
            "[network]\nmode = \"domains\"\nallow = [\"allowed.test:{a}\"]\nhosts = {{ \"allowed.test\" = \"127.0.0.1\", \"denied.test\" = \"127.0.0.1\" }}\n[audit]\npath = \"{}\"\n",
            dir.state_dir().join("audit.jsonl").display()
        ),
    );
    let toolcage = |args: &[&str]| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_toolcage"));
        cmd.arg("-C").arg(&dir.dir).args(args);
        if namespace_free_run() {
            common::without_namespaces(&mut cmd);
        }
        cmd.output().unwrap()
    };
    let policy = policy.to_str().unwrap();
    let out = toolcage(&["call", "fetch", "--policy", policy, "--json"]);
    let _ = std::fs::remove_file(policy);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if namespace_free_run() {
        assert!(
            text.contains("needs the call's own network namespace"),
            "{text}"
        );
        return;
    }
    let v: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let shown = v["text"].as_str().unwrap();
    assert!(shown.starts_with("hello /tool\nrefused\n"), "{shown}");
    assert!(
        shown.contains(&format!(
            "[toolcage: blocked: denied.test:{c} (not in the allow list); to allow it: add it to [network] allow"
        )),
        "{shown}"
    );
    assert_eq!(
        v["outcome"]["denials"][0]["target"],
        format!("denied.test:{c}")
    );
    let log = std::fs::read_to_string(dir.state_dir().join("audit.jsonl")).unwrap();
    let last: serde_json::Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
    assert_eq!(last["denials"][0]["op"], "http", "{last}");
    s.canary.untouched("a tool's call");
}

#[test]
fn a_hundred_tunnels_at_once() {
    // The load target: 100 proxied connections open together, each
    // then used, all answered (toolcage caps them at 256 per call).
    let s = setup("dom-hundred");
    let g = s.grant(&["allowed.test"]);
    let a = s.ok.port;
    let code = format!(
        "socks = []\n\
         for i in range(100):\n    c = socket.create_connection(('127.0.0.1', 3128), timeout=10)\n    c.sendall(b'CONNECT allowed.test:{a} HTTP/1.1\\r\\n\\r\\n')\n    r = b''\n    while b'\\r\\n\\r\\n' not in r:\n        r += c.recv(4096)\n    assert r.startswith(b'HTTP/1.1 200'), r\n    socks.append(c)\n\
         for i, c in enumerate(socks):\n    c.sendall(b'GET /n%d HTTP/1.0\\r\\n\\r\\n' % i)\n\
         ok = 0\n\
         for i, c in enumerate(socks):\n    d = b''\n    while True:\n        x = c.recv(65536)\n        if not x: break\n        d += x\n    ok += (b'hello /n%d' % i) in d\n\
         print('OK:%d' % ok)\n"
    );
    let Some(o) = py(&g, &code) else { return };
    lines(&o, &["OK:100"], "100 tunnels");
    assert_eq!(s.ok.seen().len(), 100);
}
