//! Run by `bash fuzz/run.sh` (CI, over `fuzz/corpus/template/`); by hand:
//! `cargo fuzz run template`. `cargo test` runs the same entry point over
//! its nasty-input cases.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    toolcage::discover::fuzz::template(data);
});
