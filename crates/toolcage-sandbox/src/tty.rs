//! Terminal state that termios does not hold, for putting the operator's
//! terminal back after `toolcage exec` (the rest is in the binary's
//! `cli::terminal`): exclusive mode (`TIOCEXCL`), under which every later
//! open of the terminal but root's fails with EBUSY (`sudo`'s prompt, a
//! new `tmux` client). Reading and clearing it are ioctls, hence here.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Whether the terminal on `fd` is in exclusive mode (`TIOCGEXCL`).
pub fn exclusive(fd: BorrowedFd<'_>) -> io::Result<bool> {
    let mut on: libc::c_int = 0;
    // SAFETY: TIOCGEXCL writes one int through the pointer, which points
    // to `on`, alive for the call; `fd` is a descriptor the caller holds.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCGEXCL, &mut on) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(on != 0)
}

/// Take the terminal on `fd` out of exclusive mode (`TIOCNXCL`).
pub fn clear_exclusive(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: TIOCNXCL takes no argument and touches no memory of ours;
    // `fd` is a descriptor the caller holds.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCNXCL) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
