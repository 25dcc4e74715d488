//! Helpers for `tests/escape/domains.rs`: local servers pinned as
//! `allowed.test` and `denied.test`, domain grants, and runs that expect
//! domain mode to be refused namespace-free.
#![allow(dead_code)]

use crate::common::*;
use crate::escape_support::{self, PY, describe};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use toolcage::policy::{DomainPolicy, Grant, Network};
use toolcage::sandbox::{self, Command, Outcome, SandboxError};

/// A tiny HTTP server on the host's loopback: records the first bytes of
/// every connection and answers `GET /path` with `hello /path`.
pub struct Server {
    pub port: u16,
    seen: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Server {
    pub fn start() -> Server {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let seen: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let s = seen.clone();
        std::thread::spawn(move || {
            for c in l.incoming().flatten() {
                let s = s.clone();
                std::thread::spawn(move || serve(c, &s));
            }
        });
        Server { port, seen }
    }

    /// The request heads (or first bytes) received so far.
    pub fn seen(&self) -> Vec<String> {
        let seen = self.seen.lock().unwrap();
        seen.iter()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .collect()
    }

    pub fn untouched(&self, what: &str) {
        assert!(
            self.seen.lock().unwrap().is_empty(),
            "ESCAPE ({what}): the canary server was reached: {:?}",
            self.seen()
        );
    }
}

pub fn serve(mut c: TcpStream, seen: &Mutex<Vec<Vec<u8>>>) {
    c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 2048];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 8192 {
        match c.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    if buf.is_empty() {
        return;
    }
    seen.lock().unwrap().push(buf.clone());
    let text = String::from_utf8_lossy(&buf);
    if let Some(path) = text.strip_prefix("GET ").and_then(|r| r.split(' ').next()) {
        let body = format!("hello {path}\n");
        let _ = write!(
            c,
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
    }
}

pub struct Setup {
    pub _p: Project,
    pub base: Grant,
    pub ok: Server,
    pub canary: Server,
}

pub fn setup(tag: &str) -> Setup {
    let p = Project::new(tag);
    let base = default_grant(&p.dir);
    Setup {
        _p: p,
        base,
        ok: Server::start(),
        canary: Server::start(),
    }
}

impl Setup {
    /// A domain grant: `allow` patterns, both test names pinned to the
    /// host's loopback.
    pub fn grant(&self, allow: &[&str]) -> Grant {
        let mut g = self.base.clone();
        let pins = [("allowed.test", "127.0.0.1"), ("denied.test", "127.0.0.1")];
        g.network = Network::Domains(DomainPolicy::new(allow, &[], &pins).unwrap());
        g
    }
}

/// Run `argv` under `grant`; `None` in a namespace-free run, where domain
/// mode must be refused (never run on the host's network) with the reason.
pub fn run(grant: &Grant, argv: &[&str]) -> Option<Outcome> {
    let cmd = Command {
        argv: argv.iter().map(|a| (*a).into()).collect(),
        ..Default::default()
    };
    namespace_free_if_asked();
    match sandbox::run(grant, &cmd, None) {
        Err(SandboxError::Refused(m)) if namespace_free_run() => {
            assert!(
                m.contains("needs the call's own network namespace")
                    && m.contains("never falls back to the host's network"),
                "{m}"
            );
            None
        }
        Err(e) => panic!("sandbox run: {e}"),
        Ok(o) => {
            assert!(!namespace_free_run(), "domain mode ran namespace-free");
            Some(o)
        }
    }
}

pub fn sh(grant: &Grant, script: &str) -> Option<Outcome> {
    run(grant, &["/bin/sh", "-c", script])
}

pub fn py(grant: &Grant, code: &str) -> Option<Outcome> {
    let full = format!("{}\n{code}", escape_support::PRELUDE);
    run(grant, &[PY, "-c", &full])
}

/// Every line of `expected` is a line of the output.
pub fn lines(o: &Outcome, expected: &[&str], what: &str) {
    let out: Vec<&str> = o.stdout.text.lines().collect();
    for e in expected {
        assert!(
            out.contains(e),
            "{what}: expected the line {e:?}\n{}",
            describe(o)
        );
    }
}

pub fn denied(o: &Outcome, target: &str) -> bool {
    o.denials.iter().any(|d| d.target == target)
}

/// A Python snippet that sends `raw` to the proxy and prints the status
/// line it gets back (or `CLOSED`).
pub fn raw_request(label: &str, raw: &str) -> String {
    format!(
        "s = socket.create_connection(('127.0.0.1', 3128), timeout=5)\n\
         s.sendall({raw:?}.encode('latin-1'))\n\
         r = b''\n\
         while b'\\r\\n' not in r:\n    d = s.recv(4096)\n    if not d: break\n    r += d\n\
         print({label:?} + ': ' + (r.split(b'\\r\\n')[0].decode() if r else 'CLOSED'), flush=True)\n"
    )
}
