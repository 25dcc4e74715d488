//! `toolcage serve --http` admits only its client: a bearer token is
//! required by default (generated at start into a 0600 file in the state
//! directory), `--token-file` takes the operator's own (not group/world
//! readable), and `--no-auth` is refused off loopback. Through the binary;
//! every refusal has its positive control.

use crate::common;
use crate::mcp_support::http;
use crate::serve_http::{ACCEPT, JSON, rt, wait_for};

use common::Project;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

struct Server {
    child: Child,
    addr: SocketAddr,
    /// What the server printed on stderr up to the "token file" line.
    log: String,
    log_path: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log_path);
    }
}

fn command(p: &Project, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_toolcage"));
    c.arg("-C")
        .arg(&p.dir)
        .args(["serve", "--no-watch"])
        .args(extra)
        .current_dir(&p.dir)
        .env("XDG_STATE_HOME", p.state_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    c
}

/// Start the server; wait for its address and its auth line ("token file"
/// or "--no-auth").
fn spawn(p: &Project, extra: &[&str]) -> Server {
    let log_path = p.dir.with_extension("serve.log");
    let child = command(p, extra)
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap();
    let mut server = Server {
        child,
        addr: "127.0.0.1:1".parse().unwrap(),
        log: String::new(),
        log_path,
    };
    let (addr, log) = wait_for(&mut server.child, &server.log_path, |s| {
        let addr = s.find("http://").map(|i| {
            let rest = &s[i + "http://".len()..];
            rest[..rest.find('/').unwrap()].parse().unwrap()
        });
        addr.filter(|_| s.contains("token file ") || s.contains("--no-auth"))
            .map(|a: SocketAddr| (a, s.to_string()))
    });
    server.addr = addr;
    server.log = log;
    server
}

/// The token file the server named on stderr.
fn token_path(log: &str) -> PathBuf {
    let line = log
        .lines()
        .find(|l| l.contains("token file "))
        .unwrap_or_else(|| panic!("no token file line in {log}"));
    let rest = &line[line.find("token file ").unwrap() + "token file ".len()..];
    PathBuf::from(rest.split(" ; ").next().unwrap())
}

fn init_body() -> Vec<u8> {
    serde_json::to_vec(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "auth-test", "version": "0"}}}),
    )
    .unwrap()
}

/// initialize with these extra headers.
fn initialize(addr: SocketAddr, auth: Option<&str>) -> http::Reply {
    let header = auth.map(|a| ("Authorization", a));
    let mut headers = vec![ACCEPT, JSON];
    headers.extend(header);
    rt().block_on(http::post(addr, &headers, &init_body()))
}

fn assert_401(r: &http::Reply, what: &str) {
    assert_eq!(r.status, 401, "{what}: {} {}", r.status, r.body);
    assert!(
        r.header("www-authenticate")
            .is_some_and(|v| v.starts_with("Bearer")),
        "{what}: {:?}",
        r.headers
    );
    let v: Value =
        serde_json::from_str(&r.body).unwrap_or_else(|e| panic!("{what}: {e}: {}", r.body));
    assert_eq!(v["jsonrpc"], "2.0", "{v}");
    assert!(v["id"].is_null(), "{v}");
    assert_eq!(v["error"]["code"], -32001, "{v}");
    assert!(
        r.header("mcp-session-id").is_none(),
        "{what}: a session opened"
    );
}

fn assert_initialized(r: &http::Reply, what: &str) {
    assert_eq!(r.status, 200, "{what}: {}", r.body);
    assert!(r.header("mcp-session-id").is_some(), "{what}");
    assert!(
        r.messages()
            .iter()
            .any(|m| m["id"] == 1 && m["result"].is_object()),
        "{what}: {}",
        r.body
    );
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn a_generated_token_is_required_and_lives_in_a_private_file() {
    let p = Project::new("http-auth-default");
    let s = spawn(&p, &["--http", "127.0.0.1:0"]);
    let path = token_path(&s.log);
    assert!(
        path.starts_with(p.state_dir()) && path.ends_with("http-token"),
        "{}",
        path.display()
    );
    assert!(s.log.contains("Authorization: Bearer $(cat "), "{}", s.log);
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(path.parent().unwrap()), 0o700);
    let token = std::fs::read_to_string(&path).unwrap().trim().to_string();
    assert_eq!(token.len(), 64, "32 random bytes in hex");
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));

    // No header, a wrong token, another scheme: 401.
    assert_401(&initialize(s.addr, None), "no header");
    assert_401(&initialize(s.addr, Some("Bearer wrong")), "wrong token");
    assert_401(
        &initialize(s.addr, Some(&format!("Bearer {token}0"))),
        "longer token",
    );
    assert_401(
        &initialize(s.addr, Some(&format!("Basic {token}"))),
        "Basic scheme",
    );
    // GET and DELETE too.
    for method in ["GET", "DELETE"] {
        let r = rt().block_on(http::request(s.addr, method, &[ACCEPT], b""));
        assert_401(&r, method);
    }
    // Control: the right token opens a session, and its requests work.
    let good = format!("Bearer {token}");
    let r = initialize(s.addr, Some(&good));
    assert_initialized(&r, "right token");
    let sid = r.header("mcp-session-id").unwrap().to_string();
    let list = rt().block_on(http::post(
        s.addr,
        &[
            ACCEPT,
            JSON,
            ("Authorization", &good),
            ("Mcp-Session-Id", &sid),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        br#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    ));
    assert_eq!(list.status, 200, "{}", list.body);
    // The session id alone is not enough.
    let stolen = rt().block_on(http::post(
        s.addr,
        &[
            ACCEPT,
            JSON,
            ("Mcp-Session-Id", &sid),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        br#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#,
    ));
    assert_401(&stolen, "session id without token");

    // A restart makes a new token; the old one no longer works.
    drop(s);
    let s = spawn(&p, &["--http", "127.0.0.1:0"]);
    let fresh = std::fs::read_to_string(token_path(&s.log)).unwrap();
    assert_ne!(fresh.trim(), token);
    assert_401(&initialize(s.addr, Some(&good)), "old token after restart");
    assert_initialized(
        &initialize(s.addr, Some(&format!("Bearer {}", fresh.trim()))),
        "new token",
    );
}

#[test]
fn token_file_must_be_private() {
    let p = Project::new("http-auth-file");
    let file = p.dir.with_extension("tok");
    std::fs::write(&file, "  operator-chosen-token-123\n").unwrap();
    let arg = file.to_str().unwrap();

    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out: Output = command(&p, &["--http", "127.0.0.1:0", "--token-file", arg])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(arg) && err.contains("chmod 600") && err.lines().count() == 1,
        "{err}"
    );

    std::fs::write(&file, "\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = command(&p, &["--http", "127.0.0.1:0", "--token-file", arg])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("empty"),
        "{out:?}"
    );

    // Control: the same file at 0600 with a token; whitespace trimmed.
    std::fs::write(&file, "  operator-chosen-token-123\n").unwrap();
    let s = spawn(&p, &["--http", "127.0.0.1:0", "--token-file", arg]);
    assert_eq!(token_path(&s.log), file);
    assert_401(&initialize(s.addr, None), "no header");
    assert_401(
        &initialize(s.addr, Some("Bearer operator-chosen-token-12")),
        "prefix",
    );
    assert_initialized(
        &initialize(s.addr, Some("Bearer operator-chosen-token-123")),
        "operator token",
    );
    // The generated-token file was not written.
    assert!(
        !walk_has(&p.state_dir(), "http-token"),
        "a token file was generated although --token-file was given"
    );
    let _ = std::fs::remove_file(&file);
}

fn walk_has(dir: &Path, name: &str) -> bool {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| {
            let p = e.path();
            p.file_name().is_some_and(|n| n == name) || (p.is_dir() && walk_has(&p, name))
        })
}

#[test]
fn no_auth_is_loopback_only() {
    let p = Project::new("http-auth-none");
    for addr in ["0.0.0.0:0", "[::]:0"] {
        let out = command(&p, &["--http", addr, "--no-auth"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(125), "{addr}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--no-auth") && err.contains("loopback"),
            "{err}"
        );
    }
    // --no-auth and --token-file together, or without --http: usage errors.
    let out = command(
        &p,
        &["--http", "127.0.0.1:0", "--no-auth", "--token-file", "x"],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    let out = command(&p, &["--no-auth"]).output().unwrap();
    assert_eq!(out.status.code(), Some(125), "{out:?}");

    // Control: on loopback it serves without a header, as before.
    let s = spawn(&p, &["--http", "127.0.0.1:0", "--no-auth"]);
    assert_initialized(&initialize(s.addr, None), "--no-auth on loopback");
    assert!(!walk_has(&p.state_dir(), "http-token"));
    // And without --no-auth the same address requires the token.
    drop(s);
    let s = spawn(&p, &["--http", "127.0.0.1:0"]);
    assert_401(&initialize(s.addr, None), "default");
}
