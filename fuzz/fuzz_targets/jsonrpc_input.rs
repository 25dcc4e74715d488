//! Run by `bash fuzz/run.sh` (CI, over `fuzz/corpus/jsonrpc_input/`); by hand:
//! `cargo fuzz run jsonrpc_input`. `cargo test` runs the same entry point over
//! its nasty-input cases.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    toolcage::mcp::stdio::fuzz_input(data);
});
