//! Run by `bash fuzz/run.sh` (CI, over `fuzz/corpus/agentdir_front_matter/`); by hand:
//! `cargo fuzz run agentdir_front_matter`. `cargo test` runs the same entry point over
//! its nasty-input cases.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    toolcage::discover::fuzz::agentdir_front_matter(data);
});
