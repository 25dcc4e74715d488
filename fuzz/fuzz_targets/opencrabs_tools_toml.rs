//! Run by `bash fuzz/run.sh` (CI, over `fuzz/corpus/opencrabs_tools_toml/`); by hand:
//! `cargo fuzz run opencrabs_tools_toml`. `cargo test` runs the same entry point over
//! its nasty-input cases.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    toolcage::discover::fuzz::opencrabs_tools_toml(data);
});
