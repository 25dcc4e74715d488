//! Run by `bash fuzz/run.sh` (CI, over `fuzz/corpus/octomind_header/`); by hand:
//! `cargo fuzz run octomind_header`. `cargo test` runs the same entry point over
//! its nasty-input cases.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    toolcage::discover::fuzz::octomind_header(data);
});
