//! Run by `bash fuzz/run.sh` (CI, over `fuzz/corpus/clawd_tool_json/`); by hand:
//! `cargo fuzz run clawd_tool_json`. `cargo test` runs the same entry point over
//! its nasty-input cases.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    toolcage::discover::fuzz::clawd_tool_json(data);
});
