//! cargo fuzz run clawd_tool_json  (nightly; not run in CI: the same entry point is
//! exercised by the nasty-input corpus in `cargo test`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    toolcage::discover::fuzz::clawd_tool_json(data);
});
