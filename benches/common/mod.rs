//! What every bench shares (each bench is its own binary and declares this
//! module with `#[path]`).

use std::time::Duration;

/// The middle of `v` once sorted: the figure each bench prints.
pub fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}
