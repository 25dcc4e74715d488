//! cargo fuzz run jsonrpc_input  (nightly; not run in CI: the same entry
//! point is exercised by `nasty_client_input_never_panics` in `cargo test`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    toolcage::mcp::stdio::fuzz_input(data);
});
