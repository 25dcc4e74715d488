//! The library's engine through its API (the sandbox's smoke tests and its
//! namespace-free simulation, the call engine, the gate and its audit
//! records), and the gate's state through the binary: approvals bound to
//! what was approved, and the shared Redis store (`store_redis`, which
//! `tests/unprivileged.sh` runs as an ordinary user too).

#[path = "../common/mod.rs"]
mod common;
#[path = "../escape_support/mod.rs"]
mod escape_support;
#[path = "../gate_support/mod.rs"]
mod gate_support;
#[path = "../gateway_support/mod.rs"]
mod gateway_support;
#[path = "../stdio_client/mod.rs"]
mod stdio_client;
#[path = "../store_support/mod.rs"]
mod store_support;

mod approval_binding;
mod call;
mod gate;
mod gate_audit;
mod smoke;
mod store_redis;
mod without_namespaces;
