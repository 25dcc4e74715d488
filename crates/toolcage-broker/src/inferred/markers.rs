//! What a tool's error message says happened to a path ([`MARKERS`]), and
//! where a path lies: shared by the message reader and the classifier.

use std::path::{Path, PathBuf};

/// What the message says happened to the path.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Error {
    /// EACCES / EPERM: the access was refused.
    Refused,
    /// EROFS: a write on a read-only mount.
    ReadOnly,
    /// ENOENT: not there (outside a constructed root, nothing is).
    Missing,
}

pub(super) const MARKERS: [(&str, Error); 6] = [
    ("Permission denied", Error::Refused),
    ("Operation not permitted", Error::Refused),
    ("Read-only file system", Error::ReadOnly),
    ("No such file or directory", Error::Missing),
    // dash's `> /x/y` when /x is not there.
    ("Directory nonexistent", Error::Missing),
    // A shell running a program that is not there.
    (": not found", Error::Missing),
];

/// Places every call has of its own: what they refuse is not the grant's.
pub(super) const OWN: [&str; 4] = ["/tmp", "/proc", "/dev", "/sys"];

pub(super) fn under(p: &Path, roots: &[PathBuf]) -> Option<PathBuf> {
    roots.iter().find(|r| p.starts_with(r)).cloned()
}
