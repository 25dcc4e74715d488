//! The sandbox: the only module with `unsafe` and raw syscalls.
