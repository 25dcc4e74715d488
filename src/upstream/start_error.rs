//! Why a server did not start or answer, in words a person can act on:
//! its exit, its stderr's tail ([`Tail`], kept as it writes), our HTTP client's error, and the grant's
//! fix when the server's program or its `#!` interpreter exists on this
//! machine but the server's grant cannot read it.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How much of a server's stderr is kept.
const STDERR_TAIL: usize = 16 * 1024;

/// The last bytes a server wrote to stderr.
#[derive(Debug, Default)]
pub(crate) struct Tail {
    bytes: Mutex<Vec<u8>>,
    /// A reader has not yet seen the end of the server's stderr.
    pub(super) reading: AtomicBool,
}

impl Tail {
    pub(super) fn push(&self, chunk: &[u8]) {
        let mut b = self.bytes.lock().unwrap_or_else(|p| p.into_inner());
        b.extend_from_slice(chunk);
        if b.len() > STDERR_TAIL {
            let cut = b.len() - STDERR_TAIL;
            b.drain(..cut);
        }
    }

    /// The tail as text, its last `lines` lines.
    pub(crate) fn text(&self, lines: usize) -> String {
        let b = self.bytes.lock().unwrap_or_else(|p| p.into_inner());
        let s = String::from_utf8_lossy(&b);
        let all: Vec<&str> = s.lines().collect();
        let from = all.len().saturating_sub(lines);
        crate::text::multi_line(&all[from..].join("\n"))
    }

    /// Wait, at most `limit`, for the reader to reach the end of stderr: a
    /// server that wrote why and exited can be seen gone (its stdout
    /// closed) before its last words are read from the pipe.
    pub(super) async fn settled(&self, limit: Duration) {
        let until = Instant::now() + limit;
        while self.reading.load(Ordering::Acquire) && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// `why`, and the end of what the server wrote to stderr.
pub(super) fn with_stderr(why: String, stderr: &Tail) -> String {
    let tail = stderr.text(20);
    match tail.trim().is_empty() {
        true => why,
        false => format!("{why}; its stderr ends with:\n{tail}"),
    }
}

pub(super) fn exit_text(exit: crate::sandbox::Exit) -> String {
    match exit {
        crate::sandbox::Exit::Code(c) => format!("exit status {c}"),
        crate::sandbox::Exit::Signal(s) => format!("killed by signal {s}"),
        crate::sandbox::Exit::Timeout => "timed out".into(),
        crate::sandbox::Exit::Cancelled => "stopped by toolcage".into(),
    }
}

/// rmcp wraps a transport's error in its worker's type names: keep what
/// our HTTP client said, when it said something.
pub(super) fn client_error(e: &str) -> String {
    match e.split_once("Client error: ") {
        Some((_, rest)) => rest
            .rsplit_once(", when ")
            .map_or(rest, |(msg, _)| msg)
            .to_string(),
        None => e.to_string(),
    }
}

/// When `script`'s `#!` interpreter (an absolute path) exists on this
/// machine, the server's grant is what cannot read it (a venv's `python`
/// under `~/.pyenv`): the interpreter and the `[upstreams.NAME]` line that
/// grants it, a toolchain preset when one covers it. Reading the script's
/// own directory would change nothing.
fn interpreter_fix(script: &std::path::Path, server: &str) -> Option<String> {
    use crate::policy::presets::{self, HostEnv, Operator};
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(script).ok()?.read(&mut head).ok()?;
    let line = head[..n].split(|&b| b == b'\n').next()?;
    let line = std::str::from_utf8(line.strip_prefix(b"#!")?).ok()?;
    let interpreter = std::path::PathBuf::from(line.split([' ', '\t']).find(|w| !w.is_empty())?);
    if !interpreter.is_absolute() {
        return None;
    }
    // A venv's `python` is a link into the toolchain that made it.
    let real = interpreter.canonicalize().ok()?;
    let env = HostEnv::capture();
    let home = std::path::PathBuf::from(env.get("HOME").unwrap_or("/"));
    let host = Operator {
        home: &home,
        env: &env,
    };
    let fix = match presets::covering(&real, &host) {
        Some(p) => format!("with = [\"{}\"] in [upstreams.{server}]", p.name()),
        None => format!(
            "add_read = [\"{}\"] in [upstreams.{server}.fs]",
            presets::prefix_of(&real, &host).display()
        ),
    };
    Some(format!(
        "the #! line's interpreter {} exists on this machine, but the server's grant cannot \
         read it (fix: {fix})",
        interpreter.display()
    ))
}

/// A server program that exists on this machine but that the server's
/// grant cannot see: named with the `[upstreams.NAME.fs]` line that
/// grants it (a `--read` flag does not reach a server's grant).
pub(super) fn unreachable_program(
    e: &crate::sandbox::SandboxError,
    server: &str,
) -> Option<String> {
    use crate::sandbox::SandboxError;
    let (program, dir) = match e {
        SandboxError::OutsideGrant {
            program, resolved, ..
        } => (program.clone(), resolved.parent()?.to_path_buf()),
        // Namespace-free, Landlock refuses the interpreter with EACCES.
        SandboxError::CannotExecute { program, .. } if program.contains('/') => {
            let fix = interpreter_fix(std::path::Path::new(program), server)?;
            return Some(format!("{program}: cannot start: {fix}"));
        }
        SandboxError::NotFound(program) if program.contains('/') => {
            let path = std::path::Path::new(program);
            if !path.exists() {
                return None;
            }
            if let Some(fix) = interpreter_fix(path, server) {
                return Some(format!("{program}: cannot start: {fix}"));
            }
            (
                program.clone(),
                path.canonicalize().ok()?.parent()?.to_path_buf(),
            )
        }
        _ => return None,
    };
    Some(format!(
        "{program}: exists on this machine, but the server's grant cannot read it (fix: \
         add_read = [\"{}\"] in [upstreams.{server}.fs])",
        dir.display()
    ))
}
