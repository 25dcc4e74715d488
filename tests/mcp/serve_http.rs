//! What the HTTP tests of this family share: the headers every MCP request
//! carries, the operator's token file, and the wait for the address that
//! `toolcage serve --http` prints on stderr.

use crate::common::Project;
use std::io::Write;
use std::net::SocketAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const ACCEPT: (&str, &str) = ("Accept", "application/json, text/event-stream");
pub const JSON: (&str, &str) = ("Content-Type", "application/json");

/// `token` in a 0600 file beside the project (for `--token-file`).
pub fn token_file(p: &Project, token: &str) -> PathBuf {
    let path = p.dir.with_extension("token");
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .unwrap()
        .write_all(token.as_bytes())
        .unwrap();
    path
}

/// `toolcage serve --no-watch --http 127.0.0.1:0 --token-file TOKEN EXTRA...`
/// on the project, its state beside it, stdin and stdout closed.
pub fn serve_command(p: &Project, token: &Path, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_toolcage"));
    c.arg("-C")
        .arg(&p.dir)
        .args([
            "serve",
            "--no-watch",
            "--http",
            "127.0.0.1:0",
            "--token-file",
        ])
        .arg(token)
        .args(extra)
        .current_dir(&p.dir)
        .env("XDG_STATE_HOME", p.state_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    c
}

/// The address in `log` right after `marker` (up to the next `/`).
pub fn address_after(log: &str, marker: &str) -> Option<SocketAddr> {
    let rest = &log[log.find(marker)? + marker.len()..];
    rest[..rest.find('/')?].parse().ok()
}

/// Read the server's stderr, written to `log`, until `found` says it has
/// started; at most 30 s, and the server must not exit meanwhile.
pub fn wait_for<T>(child: &mut Child, log: &Path, mut found: impl FnMut(&str) -> Option<T>) -> T {
    let t = Instant::now();
    loop {
        let s = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(v) = found(&s) {
            return v;
        }
        if t.elapsed() > Duration::from_secs(30) || child.try_wait().unwrap().is_some() {
            panic!("the server did not start: {s}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A runtime on the test's thread for the raw HTTP client.
pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}
