//! The stdio MCP server's capped line reader (bytes from a client).
//! Run by `bash fuzz/run.sh` (CI); by hand: `cargo fuzz run jsonrpc_framer`.
//! What must hold is asserted in `toolcage::mcp::stdio::fuzz_framer`,
//! which `cargo test` also runs over `fuzz/corpus/jsonrpc_framer/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    toolcage::mcp::stdio::fuzz_framer(data);
});
