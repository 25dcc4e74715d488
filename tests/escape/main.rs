//! The escape suite: every attack on the sandbox, through its API (and the
//! binary where a test says so), each with its positive control. It runs as
//! root and as an ordinary user, with namespaces and namespace-free
//! (`TOOLCAGE_TEST_NAMESPACE_FREE=1`): see `tests/unprivileged.sh`.

#[path = "../common/mod.rs"]
mod common;
#[path = "../domains_support/mod.rs"]
mod domains_support;
#[path = "../escape_support/mod.rs"]
mod escape_support;

mod domains;
mod fs;
mod home;
mod net;
mod operator;
mod proc;
mod root;
mod tree;
