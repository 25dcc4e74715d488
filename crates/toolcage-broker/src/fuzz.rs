//! Entry points for the cargo-fuzz targets in `fuzz/` and for the test
//! that replays their committed corpus (`fuzz/corpus/`): each feeds
//! arbitrary bytes to one reader of bytes a confined tool controls and
//! asserts what must hold whatever the input. Not an API: hidden from the
//! docs, used by `fuzz/` only.

use crate::denial::{Denial, MAX_KINDS};
use crate::proxy::dns::{self, Answer};
use crate::proxy::http::{self, HeadRead, MAX_HEAD, Request};
use std::collections::BTreeSet;
use std::io::Read;
use std::net::Ipv4Addr;
use std::path::{Component, Path};
use toolcage_policy::hostname::{parse_authority, target};
use toolcage_policy::{Grant, Network};

/// A client that sends `data` in reads of `sizes` bytes (cycled).
struct Chunked<'a> {
    data: &'a [u8],
    sizes: &'a [usize],
    turn: usize,
}

impl Read for Chunked<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let size = self.sizes[self.turn % self.sizes.len()];
        self.turn += 1;
        let n = size.min(out.len()).min(self.data.len());
        out[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// The domain proxy's request reader and parser (`proxy/http.rs`), as
/// `proxy/conn.rs` uses them: the head is read in reads of any size, never
/// past the cap, and what the parser accepts is a single well-formed head
/// for the host and port it names.
pub fn proxy_request(data: &[u8]) {
    let small = 1 + data.len() / 2;
    let mut heads = Vec::new();
    for cap in [MAX_HEAD, small] {
        for sizes in [&[4096][..], &[1, 3, 2, 7], &[5, 4096, 1]] {
            let reader = Chunked {
                data,
                sizes,
                turn: 0,
            };
            let got = http::read_head_capped(reader, || true, cap);
            let within = &data[..data.len().min(cap)];
            match (&got, http::end_of_head(within)) {
                (HeadRead::Complete { buf, end }, Some(model)) => {
                    assert_eq!(*end, model, "the first blank line ends the head");
                    assert!(*end <= cap, "a head past the cap");
                    assert!(data.starts_with(buf), "bytes the client did not send");
                    heads.push(&data[..*end]);
                }
                (HeadRead::TooLarge, None) => assert!(data.len() >= cap),
                (HeadRead::Closed, None) => assert!(data.len() < cap),
                (got, model) => panic!("read {got:?}, the head ends at {model:?}"),
            }
        }
    }
    if let Some(head) = heads.first() {
        request(head);
    }
}

/// What [`http::parse`] accepts.
fn request(head: &[u8]) {
    match http::parse(head) {
        Err(e) => assert_eq!(e.status, 400),
        Ok(Request::Connect { host, port }) => {
            let again = format!("CONNECT {} HTTP/1.1\r\n\r\n", target(&host, Some(port)));
            assert_eq!(
                http::parse(again.as_bytes()),
                Ok(Request::Connect { host, port }),
                "CONNECT does not round-trip"
            );
        }
        Ok(Request::Forward { host, port, head }) => forwarded(&head, &host, port),
    }
}

/// A rewritten plain-HTTP head: one head (nothing after its blank line,
/// every line ended by CRLF, no bare CR or LF a server could split on), an
/// origin-form target, no hop-by-hop header but our `Connection: close`,
/// and a Host header (required in HTTP/1.1) naming the decided host and
/// port. Put back in absolute form, it parses to itself.
fn forwarded(head: &[u8], host: &toolcage_policy::Host, port: u16) {
    let text = std::str::from_utf8(head).expect("a forwarded head is UTF-8");
    assert_eq!(http::end_of_head(head), Some(head.len()), "{text:?}");
    let body = text
        .strip_suffix("Connection: close\r\n\r\n")
        .expect("Connection: close ends the head");
    let lines: Vec<&str> = body.split("\r\n").collect();
    assert!(
        lines.iter().all(|l| !l.contains(['\r', '\n'])),
        "a bare CR or LF in a forwarded head: {text:?}"
    );
    let [method, path, version] = lines[0].split(' ').collect::<Vec<_>>()[..] else {
        panic!("request line {:?}", lines[0]);
    };
    assert!(path.starts_with('/'), "{path:?}");
    assert!(
        path.bytes().all(|b| b > b' ' && b != 0x7f),
        "a control byte in the forwarded target: {path:?}"
    );
    let headers: Vec<(&str, &str)> = lines[1..lines.len() - 1]
        .iter()
        .map(|l| l.split_once(": ").expect("name: value"))
        .collect();
    for (name, _) in &headers {
        let lower = name.to_ascii_lowercase();
        assert!(
            !["connection", "proxy-connection", "proxy-authorization"].contains(&lower.as_str()),
            "hop-by-hop header {name} forwarded"
        );
    }
    let hosts: Vec<&str> = headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("host"))
        .map(|(_, v)| *v)
        .collect();
    assert!(hosts.len() <= 1, "{text:?}");
    assert!(
        version == "HTTP/1.0" || hosts.len() == 1,
        "no Host in {text:?}"
    );
    if let Some(h) = hosts.first() {
        let (h, p) = parse_authority(h).expect("the Host header parses");
        assert_eq!((&h, p.unwrap_or(80)), (host, port), "{text:?}");
    }
    let absolute = format!(
        "{method} http://{}{path} {version}\r\n{}\r\n",
        target(host, Some(port)),
        lines[1..].join("\r\n")
    );
    assert_eq!(
        http::parse(absolute.as_bytes()),
        Ok(Request::Forward {
            host: host.clone(),
            port,
            head: head.to_vec()
        }),
        "the forwarded head does not round-trip: {text:?}"
    );
}

/// The DNS stub's query reader (`proxy/dns.rs`): a reply is never much
/// bigger than the query (no amplification), keeps its id and opcode,
/// and echoes exactly the question the lookup was asked about; a name
/// handed to the lookup is printable labels that encode back to the
/// question's bytes.
pub fn dns_query(data: &[u8]) {
    let answer = match data.len() % 4 {
        0 => Answer::A(Ipv4Addr::new(127, 1, 0, 1)),
        1 => Answer::NoData,
        2 => Answer::NxDomain,
        _ => Answer::ServFail,
    };
    let mut asked = None;
    let reply = dns::reply(data, |name, qtype| {
        asked = Some((name.map(str::to_string), qtype));
        answer
    });
    let Some(r) = reply else {
        assert!(asked.is_none());
        assert!(
            data.len() < 12 || data[2] & 0x80 != 0,
            "a query left unanswered"
        );
        return;
    };
    let u16_at = |b: &[u8], i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
    assert!(
        r.len() >= 12 && r.len() <= data.len() + 16,
        "{} bytes for {}",
        r.len(),
        data.len()
    );
    assert_eq!(r[..2], data[..2], "the id");
    assert_eq!(u16_at(&r, 2) & 0xf800, 0x8000 | (u16_at(data, 2) & 0x7800));
    let rcode = u16_at(&r, 2) & 0xf;
    let Some((name, qtype)) = asked else {
        assert_eq!(r.len(), 12, "no question, no echo");
        assert!([1, 4, 5].contains(&rcode), "rcode {rcode}");
        return;
    };
    assert_eq!(u16_at(&r, 4), 1, "one question");
    let question_len = match answer {
        Answer::A(ip) => {
            assert_eq!((rcode, u16_at(&r, 6)), (0, 1));
            assert_eq!(r[r.len() - 4..], ip.octets());
            r.len() - 12 - 16
        }
        _ => {
            assert_eq!(u16_at(&r, 6), 0);
            r.len() - 12
        }
    };
    assert_eq!(r[12..12 + question_len], data[12..12 + question_len]);
    if let Some(name) = name {
        let mut encoded = Vec::new();
        for label in name.split('.') {
            assert!(!label.is_empty() && label.len() <= 63, "label {label:?}");
            assert!(label.bytes().all(|b| b.is_ascii_graphic()), "{name:?}");
            encoded.push(label.len() as u8);
            encoded.extend_from_slice(label.as_bytes());
        }
        encoded.push(0);
        encoded.extend_from_slice(&qtype.to_be_bytes());
        encoded.extend_from_slice(&1u16.to_be_bytes());
        assert_eq!(r[12..12 + question_len], encoded[..], "{name:?}");
    }
}

/// The grant the output readers are fuzzed under (as the unit tests').
fn grant(network: Network) -> Grant {
    let mut g = Grant::closed("/work/p".into());
    g.read = vec!["/usr".into(), "/etc".into()];
    g.write = vec!["/work/p".into()];
    g.protected = vec!["/work/p/.git".into()];
    g.denied = vec!["/etc/shadow".into(), "/etc/app".into()];
    g.network = network;
    g
}

fn normalised(p: &str) -> bool {
    p.starts_with('/')
        && !p.contains("//")
        && Path::new(p)
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
}

/// Denial inference over a tool's output (`inferred/`): under each
/// network mode, namespaced and namespace-free, bounded, every denial marked inferred, a file denial
/// names a normal absolute path and never one the grant lets the call
/// write (git's missing identity aside: it names the two ways to give
/// one), a dropped variable is one the grant does not pass with its
/// `--env` fix, and a network denial comes only from the mode it explains.
pub fn inferred_denials(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let tcp = Network::Tcp {
        connect: vec![443],
        bind: vec![],
    };
    let modes = [Network::Off, tcp, Network::On];
    for (network, namespace_free) in modes.iter().flat_map(|n| [(n, false), (n, true)]) {
        let network = network.clone();
        let g = grant(network.clone());
        let _ = crate::inferred::cpu_limit(&g, None, &text);
        let found =
            crate::inferred::from_output(&g, namespace_free, Path::new("/work/p/sub"), &text);
        assert!(found.len() <= MAX_KINDS);
        for d in &found {
            assert!(d.inferred && d.count >= 1, "{d:?}");
            match (d.layer, d.op) {
                // Hints that name no path: git's identity is a file the
                // call cannot see, a dropped variable is named with its flag.
                ("filesystem", "read") if d.target == crate::inferred::GIT_IDENTITY => {
                    assert!(
                        d.fix
                            .as_deref()
                            .is_some_and(|f| f.contains("--env GIT_AUTHOR_NAME="))
                    );
                }
                ("environment", "read") => dropped_variable(&g, d),
                ("network", "connect") => assert!(matches!(network, Network::Domains(_))),
                ("filesystem", _) => file_denial(&g, d),
                ("seccomp", "resolve") => assert!(matches!(network, Network::Tcp { .. })),
                ("seccomp", "connect") => assert_eq!(network, Network::Off),
                ("seccomp", _) => assert!(d.fix.is_none(), "{d:?}"),
                _ => panic!("{d:?}"),
            }
        }
    }
}

/// A variable the command read and did not get: `$NAME`, a name the grant
/// does not pass, fixed with `--env NAME`.
fn dropped_variable(g: &Grant, d: &Denial) {
    let name = d.target.strip_prefix('$').expect("a $NAME target");
    assert!(
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
        "{d:?}"
    );
    assert!(!g.passes(name), "{d:?}");
    assert_eq!(
        d.fix.as_deref(),
        Some(format!("--env {name}").as_str()),
        "{d:?}"
    );
}

fn file_denial(g: &Grant, d: &Denial) {
    assert!(normalised(&d.target), "{d:?}");
    let p = Path::new(&d.target);
    let writable = g.write.iter().any(|w| p.starts_with(w))
        && !g.protected.iter().any(|w| p.starts_with(w))
        && !g.denied.iter().any(|w| p.starts_with(w))
        && toolcage_policy::built_in_secret(p).is_none();
    assert!(!writable, "a writable path reported: {d:?}");
}

/// The pid whose Landlock domains count in [`landlock_audit`].
const TOOL_PID: i32 = 4242;

/// The Landlock audit reader (`landlock_log.rs`): raw netlink bytes never
/// yield more records than fit; lines as the kernel prints them
/// (`audit: type=1423 audit(...): domain=... blockers=...`), framed as
/// netlink messages the way the kernel sends them, are read back exactly;
/// and only a domain the tool's process allocated yields denials, each
/// exact (not inferred) and bounded.
pub fn landlock_audit(data: &[u8]) {
    let raw = crate::landlock_log::parse_messages(data);
    assert!(raw.len() <= data.len() / 16);
    let text = String::from_utf8_lossy(data);
    let mut framed = Vec::new();
    let mut expected = Vec::new();
    for line in text.lines() {
        let Some((kind, payload)) = record_line(line) else {
            continue;
        };
        framed.extend(netlink(kind, payload.as_bytes()));
        let shown = payload.trim_end_matches('\0').trim().to_string();
        expected.push((kind, shown));
    }
    let records = crate::landlock_log::parse_messages(&framed);
    assert_eq!(records, expected, "framing does not round-trip");
    for records in [&raw, &records] {
        let pids = BTreeSet::from([TOOL_PID]);
        let found = crate::landlock_log::denials(&grant(Network::Off), records, &pids);
        assert!(found.len() <= MAX_KINDS);
        let allocated = records
            .iter()
            .any(|(k, t)| *k == 1424 && t.contains("status=allocated"));
        assert!(allocated || found.is_empty(), "{found:?}");
        for d in &found {
            assert!(
                d.layer == "landlock" && !d.inferred && d.count >= 1,
                "{d:?}"
            );
        }
    }
}

/// `type=NNNN TEXT` anywhere in a line: the record's type and text.
fn record_line(line: &str) -> Option<(u16, &str)> {
    let (_, rest) = line.split_once("type=")?;
    let (kind, payload) = rest.split_once(' ')?;
    // auditd's log writes an unnamed type as `UNKNOWN[1423]`.
    let kind = kind
        .strip_prefix("UNKNOWN[")
        .and_then(|k| k.strip_suffix(']'))
        .unwrap_or(kind);
    Some((kind.parse().ok()?, payload))
}

/// One netlink message as the kernel frames an audit record: length, type,
/// flags, sequence, port id, the text, padding to four bytes.
fn netlink(kind: u16, payload: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(20 + payload.len());
    m.extend(((16 + payload.len()) as u32).to_ne_bytes());
    m.extend(kind.to_ne_bytes());
    m.extend([0u8; 10]);
    m.extend_from_slice(payload);
    m.resize(m.len().next_multiple_of(4), 0);
    m
}

#[cfg(test)]
mod tests {
    /// Every committed corpus input of the four targets, through the same
    /// entry points (stable `cargo test` replays what the fuzzer found).
    #[test]
    fn committed_fuzz_corpus_holds() {
        let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
        type Entry = (&'static str, fn(&[u8]));
        let targets: [Entry; 4] = [
            ("proxy_request", super::proxy_request),
            ("dns_query", super::dns_query),
            ("inferred_denials", super::inferred_denials),
            ("landlock_audit", super::landlock_audit),
        ];
        for (name, run) in targets {
            let dir = corpus.join(name);
            let mut n = 0;
            for entry in
                std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            {
                let path = entry.unwrap().path();
                let data = std::fs::read(&path).unwrap();
                let run = std::panic::AssertUnwindSafe(|| run(&data));
                if std::panic::catch_unwind(run).is_err() {
                    panic!("{name}: {} fails", path.display());
                }
                n += 1;
            }
            assert!(n > 0, "{name}: no corpus");
        }
    }
}
