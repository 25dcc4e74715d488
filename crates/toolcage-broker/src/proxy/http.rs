//! The HTTP proxy's request head: `CONNECT host:port` and absolute-form
//! `GET http://host[:port]/path`, parsed strictly. Both give the host the
//! one decision is made on; for plain HTTP the `Host` header must name the
//! same host and port, or the request is refused (a server would otherwise
//! route on a host nobody checked). Origin-form requests, `https://`
//! targets (use CONNECT), user information, fragments, NUL bytes and
//! folded headers are refused.

use std::io::Read;
use toolcage_policy::Host;
use toolcage_policy::hostname::{parse_authority, shown};

/// The most a request head may take, request line and headers together.
pub(crate) const MAX_HEAD: usize = 32 * 1024;

/// A request the proxy serves.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Request {
    /// A tunnel: after `200`, bytes flow both ways unseen.
    Connect { host: Host, port: u16 },
    /// Plain HTTP: `head` is the request rewritten for the server
    /// (origin-form, hop-by-hop headers dropped, `Connection: close`).
    Forward {
        host: Host,
        port: u16,
        head: Vec<u8>,
    },
}

/// Why a request is refused before any decision: the status and a reason.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct BadRequest {
    pub status: u16,
    pub reason: String,
}

fn bad(reason: impl Into<String>) -> BadRequest {
    BadRequest {
        status: 400,
        reason: reason.into(),
    }
}

/// Where the head ends (just past the blank line), if it has.
pub(crate) fn end_of_head(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// How reading a request head ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum HeadRead {
    /// `buf[..end]` is the head: at most the cap, ending in the first blank
    /// line. What follows in `buf` came with it (the start of a body).
    Complete { buf: Vec<u8>, end: usize },
    /// The cap's worth of bytes came without a blank line.
    TooLarge,
    /// The client closed, failed, or `more` said stop, before either.
    Closed,
}

/// Read a request head from `r`, at most [`MAX_HEAD`] bytes of it.
/// `more` is asked before each read (the connection's deadline).
pub(crate) fn read_head(r: impl Read, more: impl FnMut() -> bool) -> HeadRead {
    read_head_capped(r, more, MAX_HEAD)
}

/// [`read_head`] with any cap (the fuzz target uses small ones). Each read
/// scans only the new bytes (and the three before them, where a blank line
/// may start), so a client sending a byte at a time costs linear time.
pub(crate) fn read_head_capped(
    mut r: impl Read,
    mut more: impl FnMut() -> bool,
    cap: usize,
) -> HeadRead {
    let mut buf = Vec::with_capacity(cap.min(4096));
    let mut chunk = [0u8; 4096];
    let mut scanned: usize = 0;
    loop {
        let from = scanned.saturating_sub(3);
        let limit = buf.len().min(cap);
        if let Some(end) = end_of_head(&buf[from.min(limit)..limit]) {
            let end = from + end;
            return HeadRead::Complete { buf, end };
        }
        if buf.len() >= cap {
            return HeadRead::TooLarge;
        }
        scanned = limit;
        if !more() {
            return HeadRead::Closed;
        }
        match r.read(&mut chunk) {
            Ok(0) | Err(_) => return HeadRead::Closed,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Headers that belong to one connection, not to the request.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
];

/// Parse a complete head (ending in the blank line): the request line,
/// the headers, at most one Host; then a CONNECT or a plain request to
/// forward.
pub(crate) fn parse(head: &[u8]) -> Result<Request, BadRequest> {
    if head.contains(&0) {
        return Err(bad("a NUL byte in the request"));
    }
    let text = std::str::from_utf8(head).map_err(|_| bad("the request head is not UTF-8"))?;
    let body = text
        .strip_suffix("\r\n\r\n")
        .ok_or_else(|| bad("the request head does not end in a blank line"))?;
    let mut lines = body.split("\r\n");
    let (method, target, version) = request_line(lines.next().unwrap_or_default())?;
    let headers = header_lines(lines)?;
    let hosts: Vec<&str> = headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("host"))
        .map(|(_, v)| *v)
        .collect();
    if hosts.len() > 1 {
        return Err(bad("more than one Host header"));
    }
    let host_header = hosts.first().copied();
    if method == "CONNECT" {
        let (host, port) = parse_authority(target).map_err(bad)?;
        let port =
            port.ok_or_else(|| bad(format!("CONNECT {}: a port is required", shown(target))))?;
        if let Some(h) = host_header {
            same_authority(h, &host, port, None)?;
        }
        return Ok(Request::Connect { host, port });
    }
    forward(method, target, version, &headers, host_header)
}

/// `METHOD TARGET VERSION`, strictly.
fn request_line(line: &str) -> Result<(&str, &str, &str), BadRequest> {
    let parts: Vec<&str> = line.split(' ').collect();
    let [method, target, version] = parts[..] else {
        return Err(bad(format!("malformed request line {}", shown(line))));
    };
    if !is_token(method) || !(version == "HTTP/1.1" || version == "HTTP/1.0") {
        return Err(bad(format!("malformed request line {}", shown(line))));
    }
    // A bare LF or CR here would end the request line for a lenient
    // server, and what follows would be headers nobody checked (a Host
    // naming another site on the allowed server's address).
    if target.bytes().any(|b| b.is_ascii_control()) {
        return Err(bad("a control character in the request target"));
    }
    Ok((method, target, version))
}

/// `Name: value` lines, none folded, no control character in a value.
fn header_lines<'h>(
    lines: impl Iterator<Item = &'h str>,
) -> Result<Vec<(&'h str, &'h str)>, BadRequest> {
    let mut headers = Vec::new();
    for l in lines {
        if l.starts_with([' ', '\t']) {
            return Err(bad("folded header lines are not accepted"));
        }
        let (name, value) = l
            .split_once(':')
            .ok_or_else(|| bad(format!("malformed header {}", shown(l))))?;
        if !is_token(name) || value.chars().any(|c| c.is_ascii_control() && c != '\t') {
            return Err(bad(format!("malformed header {}", shown(l))));
        }
        headers.push((name, value.trim_matches([' ', '\t'])));
    }
    Ok(headers)
}

/// A plain-HTTP request in absolute form, rewritten to origin form for
/// the server it names.
fn forward(
    method: &str,
    target: &str,
    version: &str,
    headers: &[(&str, &str)],
    host_header: Option<&str>,
) -> Result<Request, BadRequest> {
    let lower = target
        .get(..8)
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    if lower.starts_with("https://") {
        return Err(bad(
            "https:// through the proxy: use CONNECT (set HTTPS_PROXY)",
        ));
    }
    if !lower.starts_with("http://") {
        return Err(bad(format!(
            "{}: this is a proxy; send an absolute URL (http://host/path) or CONNECT",
            shown(target)
        )));
    }
    let rest = &target[7..];
    if rest.contains('#') {
        return Err(bad("a fragment (#) in the request target"));
    }
    let split = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(split);
    let (host, port) = parse_authority(authority).map_err(bad)?;
    let port = port.unwrap_or(80);
    match host_header {
        Some(h) => same_authority(h, &host, port, Some(80))?,
        None if version == "HTTP/1.1" => return Err(bad("no Host header")),
        None => {}
    }
    let path = match path {
        "" => "/".to_string(),
        p if p.starts_with('?') => format!("/{p}"),
        p => p.to_string(),
    };
    Ok(Request::Forward {
        host,
        port,
        head: forwarded_head(method, &path, version, headers),
    })
}

/// The head sent on: the origin-form request line, the client's headers
/// but the hop-by-hop ones, and `Connection: close`.
fn forwarded_head(method: &str, path: &str, version: &str, headers: &[(&str, &str)]) -> Vec<u8> {
    // Headers the client's Connection header names are hop-by-hop too,
    // except Host: it was checked against the decided authority above, and
    // `Connection: host` must not send the request on without it (found by
    // the fuzzer: the server would then pick the site itself).
    let named: Vec<String> = headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("connection"))
        .flat_map(|(_, v)| v.split(','))
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| s != "host")
        .collect();
    let mut out = format!("{method} {path} {version}\r\n");
    for (n, v) in headers {
        let lower = n.to_ascii_lowercase();
        if HOP_BY_HOP.contains(&lower.as_str()) || named.contains(&lower) {
            continue;
        }
        out.push_str(&format!("{n}: {v}\r\n"));
    }
    out.push_str("Connection: close\r\n\r\n");
    out.into_bytes()
}

/// The `Host` header must name `host` and `port` (`default` when omitted).
fn same_authority(
    header: &str,
    host: &Host,
    port: u16,
    default: Option<u16>,
) -> Result<(), BadRequest> {
    let (h, p) = parse_authority(header).map_err(|m| bad(format!("Host header: {m}")))?;
    if &h != host || p.or(default).unwrap_or(port) != port {
        return Err(bad(format!(
            "the Host header {} does not match the request target {host}:{port}",
            shown(header)
        )));
    }
    Ok(())
}

/// A complete response from the proxy itself, closing the connection.
pub(crate) fn response(status: u16, proxy_error: Option<&str>, body: &str) -> Vec<u8> {
    let reason = match status {
        200 => "Connection established",
        400 => "Bad Request",
        403 => "Forbidden",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Error",
    };
    if status == 200 {
        return format!("HTTP/1.1 200 {reason}\r\n\r\n").into_bytes();
    }
    let extra = proxy_error.map_or(String::new(), |e| format!("X-Proxy-Error: {e}\r\n"));
    format!(
        "HTTP/1.1 {status} {reason}\r\n{extra}Content-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Request, BadRequest> {
        parse(s.as_bytes())
    }

    fn name(s: &str) -> Host {
        Host::Name(s.into())
    }

    #[test]
    fn connect() {
        assert_eq!(
            p("CONNECT Allowed.Test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n"),
            Ok(Request::Connect {
                host: name("allowed.test"),
                port: 443
            })
        );
        assert_eq!(
            p("CONNECT [::1]:8080 HTTP/1.1\r\n\r\n"),
            Ok(Request::Connect {
                host: Host::Ip("::1".parse().unwrap()),
                port: 8080
            })
        );
        for bad in [
            "CONNECT allowed.test HTTP/1.1\r\n\r\n",
            "CONNECT ::1:80 HTTP/1.1\r\n\r\n",
            "CONNECT a.test:443 HTTP/1.1\r\nHost: b.test:443\r\n\r\n",
            "CONNECT evil.test\0.allowed.test:443 HTTP/1.1\r\n\r\n",
            "CONNECT allowed.test@evil.test:443 HTTP/1.1\r\n\r\n",
            "CONNECT  a.test:443 HTTP/1.1\r\n\r\n",
        ] {
            assert!(p(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn connection_cannot_name_the_host_header_away() {
        // Found by the fuzzer (fuzz/corpus/proxy_request/connection-names-host).
        let r = p("GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\
                   Connection: keep-alive, host, X-Secret\r\nX-Secret: 1\r\n\r\n")
        .unwrap();
        let Request::Forward { head, .. } = r else {
            panic!("not forwarded")
        };
        // The Host the proxy checked goes on; the other named header does
        // not (control: Connection still names hop-by-hop headers).
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "GET / HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn absolute_form_is_rewritten() {
        let r = p("GET http://allowed.test:8080/a?b=1 HTTP/1.1\r\nHost: allowed.test:8080\r\n\
                   User-Agent: t\r\nProxy-Connection: keep-alive\r\nConnection: keep-alive, X-Secret\r\n\
                   X-Secret: 1\r\n\r\n")
        .unwrap();
        let Request::Forward { host, port, head } = r else {
            panic!("not forwarded")
        };
        assert_eq!((host, port), (name("allowed.test"), 8080));
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "GET /a?b=1 HTTP/1.1\r\nHost: allowed.test:8080\r\nUser-Agent: t\r\nConnection: close\r\n\r\n"
        );
        let Ok(Request::Forward { port, head, .. }) =
            p("GET http://a.test?x HTTP/1.1\r\nHost: A.test:80\r\n\r\n")
        else {
            panic!()
        };
        assert_eq!(port, 80);
        assert!(head.starts_with(b"GET /?x HTTP/1.1\r\n"));
        // Control: a tab in a header value and bytes past ASCII in the
        // target are forwarded as sent.
        let r = p("GET http://a.test/caf\u{e9} HTTP/1.1\r\nHost: a.test\r\nX: a\tb\r\n\r\n");
        let Ok(Request::Forward { head, .. }) = r else {
            panic!("{r:?}")
        };
        assert!(
            head.starts_with("GET /caf\u{e9} HTTP/1.1\r\nHost: a.test\r\nX: a\tb\r\n".as_bytes())
        );
    }

    #[test]
    fn host_must_match_the_target() {
        for bad in [
            "GET http://allowed.test/ HTTP/1.1\r\nHost: denied.test\r\n\r\n",
            "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test:81\r\n\r\n",
            "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nHost: denied.test\r\n\r\n",
            "GET http://allowed.test/ HTTP/1.1\r\n\r\n",
        ] {
            assert_eq!(p(bad).unwrap_err().status, 400, "{bad:?}");
        }
        assert!(
            p("GET http://allowed.test/ HTTP/1.0\r\n\r\n").is_ok(),
            "1.0 may omit Host"
        );
    }

    #[test]
    fn odd_requests_are_refused() {
        for bad in [
            "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n",
            "GET https://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n",
            "GET ftp://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n",
            "GET http://allowed.test@denied.test/ HTTP/1.1\r\nHost: denied.test\r\n\r\n",
            "GET http://denied.test#@allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
            "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n folded\r\n\r\n",
            "GET http://a.test/ HTTP/2\r\nHost: a.test\r\n\r\n",
            "GET http://a.test/ HTTP/1.1\r\nBad Header: x\r\nHost: a.test\r\n\r\n",
            "GET http://a\0.test/ HTTP/1.1\r\nHost: a\0.test\r\n\r\n",
            "GET http://[::1/ HTTP/1.1\r\n\r\n",
            // A bare LF (or CR) in the target would split the forwarded
            // request line at a lenient server: Host: evil.test unchecked.
            "GET http://allowed.test/\nHost:evil.test\nX: HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
            "GET http://allowed.test/\rHost:evil.test HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
            "GET http://allowed.test/\x0b HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
            "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nX: a\rb\r\n\r\n",
        ] {
            assert_eq!(p(bad).map_err(|e| e.status), Err(400), "{bad:?}");
        }
    }

    /// A client that sends `data` a few bytes per read.
    struct Drip<'a>(&'a [u8]);

    impl Read for Drip<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = self.0.len().min(out.len()).min(3);
            out[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn the_head_is_read_up_to_the_cap_and_no_further() {
        // The blank line split across reads is found; reading stops there
        // (what came with it is kept for the server).
        let req = b"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\nbody";
        let HeadRead::Complete { buf, end } = read_head(Drip(req), || true) else {
            panic!("not read")
        };
        assert_eq!(&buf[..end], &req[..req.len() - 4]);
        assert!(req.starts_with(&buf));
        let whole = read_head(&req[..], || true);
        assert!(matches!(whole, HeadRead::Complete { buf, end } if buf[end..] == *b"body"));
        // A head that ends just past MAX_HEAD is refused, not read
        // (the cap was checked only before each read, so up to a read's
        // worth more got through).
        let mut long = b"GET http://a.test/ HTTP/1.1\r\nX: ".to_vec();
        long.resize(MAX_HEAD + 10, b'x');
        long.extend_from_slice(b"\r\n\r\n");
        assert_eq!(read_head(long.as_slice(), || true), HeadRead::TooLarge);
        // Control: the same head one read under the cap is read whole.
        long.drain(40..60);
        assert!(
            matches!(read_head(long.as_slice(), || true), HeadRead::Complete { end, .. } if end == long.len())
        );
        assert_eq!(
            read_head(&b"GET http://a.test/"[..], || true),
            HeadRead::Closed
        );
        assert_eq!(read_head(req.as_slice(), || false), HeadRead::Closed);
    }

    #[test]
    fn responses() {
        let r = String::from_utf8(response(403, Some("blocked-by-allowlist"), "no\n")).unwrap();
        assert!(r.starts_with("HTTP/1.1 403 Forbidden\r\nX-Proxy-Error: blocked-by-allowlist\r\n"));
        assert!(r.ends_with("Content-Length: 3\r\nConnection: close\r\n\r\nno\n"));
        assert_eq!(end_of_head(b"GET x\r\n\r\nbody"), Some(9));
    }
}
