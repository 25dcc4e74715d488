//! The operator's terminal after `toolcage exec`: the settings of the
//! terminals on stdin, stdout and stderr are saved before the command runs
//! and put back after it, as a shell does after a foreground job. A tool
//! may change them while it runs (`stty -echo`, an editor's raw mode); it
//! may not leave the terminal silent or without echo once toolcage returns.

use nix::sys::termios::{self, SetArg, Termios};
use std::os::fd::{AsFd, BorrowedFd};

/// The saved settings, put back when dropped (also on a panic).
pub struct Saved {
    /// (stdin 0, stdout 1 or stderr 2, its settings) for each that is a
    /// terminal.
    saved: Vec<(u8, Termios)>,
}

/// Runs `f` on standard descriptor `n`.
fn on_std<R>(n: u8, f: impl FnOnce(BorrowedFd<'_>) -> R) -> R {
    match n {
        0 => f(std::io::stdin().as_fd()),
        1 => f(std::io::stdout().as_fd()),
        _ => f(std::io::stderr().as_fd()),
    }
}

impl Saved {
    /// The settings of every standard descriptor that is a terminal now.
    pub fn take() -> Saved {
        let saved = (0..3u8)
            .filter_map(|n| on_std(n, |fd| termios::tcgetattr(fd).ok()).map(|t| (n, t)))
            .collect();
        Saved { saved }
    }

    /// Put back each terminal's settings if the command changed them. Only
    /// a changed terminal is set: setting one unchanged from a background
    /// job would stop toolcage with SIGTTOU for nothing.
    fn restore(&self) {
        for (n, before) in self.saved.iter().rev() {
            let put_back = on_std(*n, |fd| match termios::tcgetattr(fd) {
                Ok(now) if now != *before => termios::tcsetattr(fd, SetArg::TCSANOW, before),
                // Unchanged, or gone (hung up): nothing to put back.
                _ => Ok(()),
            });
            if let Err(e) = put_back {
                super::say(&format!(
                    "cannot restore the terminal's settings on descriptor {n} ({e}): run `stty sane`"
                ));
            }
        }
    }
}

impl Drop for Saved {
    fn drop(&mut self) {
        self.restore();
    }
}
