//! OpenCrabs `executor = "http"` tools, called with `toolcage call`: the
//! request goes through the same decision as a sandboxed call's proxy.
//! Local servers only: `allowed.test` and `denied.test` are pinned to the
//! host's loopback, where the test runs an HTTP server (allowed) and a
//! canary (which must never see a request).

use crate::common;

use common::Project;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Output;
use std::sync::{Arc, Mutex};
use std::time::Duration;

struct Server {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// Routes: `/big` 100 KiB, `/missing` 404, `/to/PATH` a 302 to PATH
    /// (absolute when it starts with `http`), anything else `hello PATH`.
    fn start() -> Server {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let s = seen.clone();
        std::thread::spawn(move || {
            for c in l.incoming().flatten() {
                let s = s.clone();
                std::thread::spawn(move || serve(c, &s));
            }
        });
        Server { port, seen }
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

fn serve(mut c: TcpStream, seen: &Mutex<Vec<String>>) {
    c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match c.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let req = String::from_utf8_lossy(&buf).into_owned();
    // A body announced by Content-Length: read it too (the POST test).
    let len = req
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .and_then(|n| n.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let head_end = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(buf.len(), |i| i + 4);
    while buf.len() < head_end + len {
        match c.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    seen.lock()
        .unwrap()
        .push(String::from_utf8_lossy(&buf).into_owned());
    let path = req.split(' ').nth(1).unwrap_or("/").to_string();
    let route = path.split('?').next().unwrap_or_default();
    let (status, extra, body) = if route == "/big" {
        ("200 OK", String::new(), "x".repeat(100 * 1024))
    } else if route == "/missing" {
        ("404 Not Found", String::new(), "no such page".to_string())
    } else if let Some(to) = path.strip_prefix("/to/") {
        let to = if to.starts_with("http") {
            to.to_string()
        } else {
            format!("/{to}")
        };
        ("302 Found", format!("Location: {to}\r\n"), String::new())
    } else {
        ("200 OK", String::new(), format!("hello {path}"))
    };
    let _ = write!(
        c,
        "HTTP/1.1 {status}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

struct Setup {
    p: Project,
    ok: Server,
    canary: Server,
    policy: std::path::PathBuf,
}

fn setup(tag: &str) -> Setup {
    let p = Project::new(tag);
    let ok = Server::start();
    let canary = Server::start();
    let (a, c) = (ok.port, canary.port);
    p.write(
        "tools.toml",
        &format!(
            r#"
[[tools]]
name = "fetch"
description = "Fetch a page"
executor = "http"
requires_approval = false
method = "GET"
url = "http://allowed.test:{a}/{{{{path}}}}?q={{{{q}}}}"

[[tools.params]]
name = "path"
[[tools.params]]
name = "q"
required = false
default = ""

[[tools]]
name = "token"
description = "Send a header"
executor = "http"
requires_approval = false
method = "GET"
url = "http://allowed.test:{a}/ok"
[[tools.params]]
name = "token"
[tools.headers]
X-Token = "{{{{token}}}}"

[[tools]]
name = "post"
description = "Post the arguments"
executor = "http"
requires_approval = false
method = "POST"
url = "http://allowed.test:{a}/submit"
[[tools.params]]
name = "message"

[[tools]]
name = "hop"
description = "Follow a redirect on the same host"
executor = "http"
requires_approval = false
method = "GET"
url = "http://allowed.test:{a}/to/landed"

[[tools]]
name = "hop_away"
description = "Follow a redirect to another host"
executor = "http"
requires_approval = false
method = "GET"
url = "http://allowed.test:{a}/to/http://denied.test:{c}/x"

[[tools]]
name = "elsewhere"
description = "A host the operator did not allow"
executor = "http"
requires_approval = false
method = "GET"
url = "http://denied.test:{c}/"
"#
        ),
    );
    let policy = p.state_dir().with_extension("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "{}\n[limits]\nstdout = \"1KiB\"\n[audit]\npath = \"{}\"\n",
            domains(a),
            p.state_dir().join("audit.jsonl").display()
        ),
    )
    .unwrap();
    Setup {
        p,
        ok,
        canary,
        policy,
    }
}

fn domains(a: u16) -> String {
    format!(
        "[network]\nmode = \"domains\"\nallow = [\"allowed.test:{a}\"]\nhosts = {{ \"allowed.test\" = \"127.0.0.1\", \"denied.test\" = \"127.0.0.1\" }}"
    )
}

impl Setup {
    fn call(&self, args: &[&str]) -> (Output, serde_json::Value) {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolcage"))
            .arg("-C")
            .arg(&self.p.dir)
            .arg("call")
            .args(args)
            .args(["--json", "--policy", self.policy.to_str().unwrap()])
            .output()
            .unwrap();
        let v = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
        (out, v)
    }

    fn canary_untouched(&self) {
        assert!(
            self.canary.seen().is_empty(),
            "ESCAPE: {:?}",
            self.canary.seen()
        );
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.policy);
    }
}

fn text(v: &serde_json::Value) -> &str {
    v["text"].as_str().unwrap_or_default()
}

#[test]
fn an_allowed_host_is_fetched_and_values_cannot_move_the_request() {
    let s = setup("http-ok");
    let (o, v) = s.call(&["fetch", "path=ok"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(text(&v), "hello /ok?q=");
    assert_eq!(v["outcome"]["enforcement"]["mode"], "in-process");
    // Injection: a value full of URL syntax stays one path segment and
    // one query value on the same host.
    let (o, v) = s.call(&["fetch", "path=../../admin?x=1#f", "q=a&b=c@denied.test/"]);
    assert_eq!(o.status.code(), Some(0), "{v}");
    let last = s.ok.seen().last().cloned().unwrap();
    assert!(
        last.starts_with(
            "GET /..%2F..%2Fadmin%3Fx%3D1%23f?q=a%26b%3Dc%40denied.test%2F HTTP/1.1\r\n"
        ),
        "{last}"
    );
    assert!(
        last.contains(&format!("Host: allowed.test:{}\r\n", s.ok.port)),
        "{last}"
    );
    s.canary_untouched();
    // The body is capped like stdout (1 KiB here), the rest counted.
    let (_, v) = s.call(&["fetch", "path=big"]);
    assert_eq!(v["outcome"]["stdout"]["bytes_kept"], 1024, "{v}");
    assert_eq!(v["outcome"]["stdout"]["bytes_omitted"], 100 * 1024 - 1024);
    // A non-2xx answer is an error with OpenCrabs' text.
    let (o, v) = s.call(&["fetch", "path=missing"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(text(&v), "HTTP 404 Not Found: no such page");
}

#[test]
fn headers_cannot_be_injected_and_posts_carry_json() {
    let s = setup("http-hdr");
    let (o, v) = s.call(&["token", "token=abc"]);
    assert_eq!(o.status.code(), Some(0), "{v}");
    assert!(s.ok.seen().last().unwrap().contains("\r\nX-Token: abc\r\n"));
    let (o, _) = s.call(&["token", "token=abc\r\nHost: denied.test"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("control character"), "{err}");
    assert_eq!(s.ok.seen().len(), 1, "the injected request was not sent");
    let (o, v) = s.call(&["post", "message=hi \"there\""]);
    assert_eq!(o.status.code(), Some(0), "{v}");
    let req = s.ok.seen().last().cloned().unwrap();
    assert!(req.starts_with("POST /submit HTTP/1.1\r\n"), "{req}");
    assert!(req.contains("Content-Type: application/json\r\n"), "{req}");
    assert!(
        req.ends_with("\r\n\r\n{\"message\":\"hi \\\"there\\\"\"}"),
        "{req}"
    );
}

#[test]
fn redirects_are_decided_again() {
    let s = setup("http-redirect");
    // Control: a redirect on the same host is followed.
    let (o, v) = s.call(&["hop"]);
    assert_eq!(o.status.code(), Some(0), "{v}");
    assert_eq!(text(&v), "hello /landed");
    // A redirect to a host the policy does not allow is refused and shown.
    let seen_before = s.ok.seen().len();
    let (o, v) = s.call(&["hop_away"]);
    assert_eq!(o.status.code(), Some(1), "{v}");
    assert_eq!(
        text(&v),
        format!(
            "toolcage: blocked: denied.test:{} (not in the allow list)",
            s.canary.port
        )
    );
    assert_eq!(
        v["outcome"]["denials"][0]["target"],
        format!("denied.test:{}", s.canary.port)
    );
    assert_eq!(s.ok.seen().len(), seen_before + 1);
    s.canary_untouched();
}

#[test]
fn only_hosts_the_operator_allows() {
    let s = setup("http-policy");
    // The tool's url host is not in the operator's list: nothing is reached.
    let (o, v) = s.call(&["elsewhere"]);
    assert_eq!(o.status.code(), Some(1), "{v}");
    assert!(
        text(&v).starts_with("toolcage: blocked: denied.test:"),
        "{v}"
    );
    s.canary_untouched();
    // `toolcage policy` shows the grant narrowed to the url's host.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolcage"))
        .arg("-C")
        .arg(&s.p.dir)
        .args(["policy", "fetch", "--policy", s.policy.to_str().unwrap()])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains(&format!("network.allow  allowed.test:{}", s.ok.port))
            || shown
                .lines()
                .any(|l| l.trim_start().starts_with("network.allow")
                    && l.contains(&format!("allowed.test:{}", s.ok.port))),
        "{shown}"
    );
    // Network off (the default profile): refused before anything is sent.
    std::fs::write(&s.policy, "").unwrap();
    let (o, _) = s.call(&["fetch", "path=ok"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("its grant has no network"), "{err}");
    assert!(s.ok.seen().is_empty(), "{:?}", s.ok.seen());
}
