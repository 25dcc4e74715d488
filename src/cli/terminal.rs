//! The operator's terminal after `toolcage exec`: the settings of the
//! terminals on stdin, stdout and stderr are saved before the command runs
//! and put back after it, as a shell does after a foreground job. A tool
//! may change them while it runs (`stty -echo`, an editor's raw mode); it
//! may not leave the terminal silent or without echo once toolcage returns.
//! Beyond termios: output stopped (`tcflow(TCOOFF)`, until ^Q, or for good
//! with `-ixon`) is started again, and exclusive mode (`TIOCEXCL`: every
//! later open fails with EBUSY, `sudo`'s prompt too) is cleared if the
//! command set it. The window size is left as it is: the operator may
//! have resized the window during the call, and nothing tells that from a
//! size the command set (a shell does not put it back either).

use crate::sandbox::tty;
use nix::sys::termios::{self, FlowArg, SetArg, Termios};
use std::os::fd::{AsFd, BorrowedFd};

/// The saved settings, put back when dropped (also on a panic).
pub(crate) struct Saved {
    /// (stdin 0, stdout 1 or stderr 2, its settings, whether it was in
    /// exclusive mode) for each that is a terminal.
    saved: Vec<(u8, Termios, bool)>,
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
    pub(crate) fn take() -> Saved {
        let saved = (0..3u8)
            .filter_map(|n| {
                on_std(n, |fd| {
                    let t = termios::tcgetattr(fd).ok()?;
                    // Unknown (a kernel before 3.8, which cannot say after
                    // either): taken as not set.
                    Some((n, t, tty::exclusive(fd).unwrap_or(false)))
                })
            })
            .collect();
        Saved { saved }
    }

    /// Put back each terminal's settings if the command changed them. Only
    /// a changed terminal is set: setting one unchanged from a background
    /// job would stop toolcage with SIGTTOU for nothing.
    fn restore(&self) {
        for (n, before, was_exclusive) in self.saved.iter().rev() {
            // Output first, so that nothing written after waits for a ^Q.
            on_std(*n, start_output);
            if !was_exclusive
                && on_std(*n, |fd| tty::exclusive(fd).is_ok_and(|on| on))
                && let Err(e) = on_std(*n, tty::clear_exclusive)
            {
                super::say(&format!(
                    "cannot take the terminal on descriptor {n} out of exclusive mode ({e}): \
                         opening it again fails with EBUSY until it is closed"
                ));
            }
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

/// Restart output the command may have stopped (`tcflow(TCOOFF)`): nothing
/// tells whether it did, and restarting running output changes nothing.
/// Only when toolcage is in the terminal's foreground: from a background
/// job it would be stopped with SIGTTOU (and its output is not the
/// operator's to restart then).
fn start_output(fd: BorrowedFd<'_>) {
    if nix::unistd::tcgetpgrp(fd).is_ok_and(|fg| fg == nix::unistd::getpgrp()) {
        let _ = termios::tcflow(fd, FlowArg::TCOON);
    }
}

impl Drop for Saved {
    fn drop(&mut self) {
        self.restore();
    }
}
