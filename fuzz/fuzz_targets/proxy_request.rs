//! The domain proxy's request head reader and parser (bytes from a confined tool).
//! Run by `bash fuzz/run.sh` (CI); by hand: `cargo fuzz run proxy_request`.
//! What must hold is asserted in `toolcage_broker::fuzz::proxy_request`,
//! which `cargo test` also runs over `fuzz/corpus/proxy_request/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    toolcage_broker::fuzz::proxy_request(data);
});
