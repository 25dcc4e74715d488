//! toolcage's own messages on stderr: errors ([`say`]), warnings and notes
//! that `--quiet` silences ([`notice`]), and log lines; each neutralised
//! ([`crate::text`]): they quote names, paths and text from projects and
//! clients.

use std::sync::atomic::{AtomicBool, Ordering};

/// Print `toolcage: <message>` on stderr, neutralised ([`crate::text`]):
/// errors quote tool names, arguments and paths from the project or client.
pub(crate) fn say(message: &dyn std::fmt::Display) {
    eprintln!(
        "toolcage: {}",
        crate::text::multi_line(&message.to_string())
    );
}

pub(super) static QUIET: AtomicBool = AtomicBool::new(false);

/// `--quiet`: toolcage's own warnings, notes, hints and tips stay unsaid.
pub(crate) fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// [`say`] a warning, note, hint or tip: nothing under `--quiet`.
pub(crate) fn notice(message: &dyn std::fmt::Display) {
    if !quiet() {
        say(message);
    }
}

/// The log at `level` (`TOOLCAGE_LOG` overrides it), on stderr.
pub(super) fn init_logging(level: &str) {
    // rmcp's own lines (a worker that quit, a response error) repeat what
    // toolcage reports itself: shown from `--log debug` on.
    let directives = match level {
        "debug" | "trace" => level.to_string(),
        _ => format!("{level},rmcp=off"),
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("TOOLCAGE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(directives));
    // Log lines quote tool names, file names and diagnostics from clients
    // and projects: each line is neutralised (no colours of our own, so no
    // escape sequence is ours to keep).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| NeutralStderr)
        .with_ansi(false)
        .with_target(false)
        .try_init();
}

/// stderr for log lines: each write is one formatted event; its text is
/// shown through [`crate::text::one_line`] (a `\r` or `\n` inside a
/// message cannot start a forged line) and its final newline kept.
struct NeutralStderr;

impl std::io::Write for NeutralStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let (body, end) = match text.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (text.as_ref(), ""),
        };
        let line = format!("{}{end}", crate::text::one_line(body));
        std::io::stderr().lock().write_all(line.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().lock().flush()
    }
}
