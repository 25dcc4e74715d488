//! A command's output on stdout. A reader that goes away early
//! (`toolcage check | head -1`) is not toolcage's failure: the rest is
//! dropped and the command keeps its own exit status. Any other write
//! error (a full disk, EIO) is said once, and the command exits 125.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

static READER_GONE: AtomicBool = AtomicBool::new(false);
static FAILED: AtomicBool = AtomicBool::new(false);

/// `println!` for a command's output, through [`text`].
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::cli::out::text(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// Write `s` to stdout as it is (and flush: a command's output is read by
/// agents and scripts as it comes).
pub(crate) fn text(s: &str) {
    bytes(s.as_bytes());
}

/// [`text`] for bytes.
pub(crate) fn bytes(b: &[u8]) {
    if READER_GONE.load(Ordering::Relaxed) || FAILED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    match out.write_all(b).and_then(|()| out.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            READER_GONE.store(true, Ordering::Relaxed);
        }
        Err(e) => {
            FAILED.store(true, Ordering::Relaxed);
            super::say(&format!("cannot write the output: {e}"));
        }
    }
}

/// The command's exit status, or 125 when its output could not be written.
pub(crate) fn status(code: u8) -> u8 {
    if FAILED.load(Ordering::Relaxed) {
        super::status::INTERNAL
    } else {
        code
    }
}

/// `value` as pretty JSON on stdout. `Some(INTERNAL)`, said on stderr,
/// when it cannot be encoded.
pub(crate) fn print_json(value: &impl serde::Serialize) -> Option<u8> {
    match serde_json::to_string_pretty(value) {
        Ok(s) => {
            outln!("{s}");
            None
        }
        Err(e) => {
            super::say(&e);
            Some(super::status::INTERNAL)
        }
    }
}
