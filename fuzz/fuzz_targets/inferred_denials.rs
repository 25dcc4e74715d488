//! Denial inference over a tool's own output.
//! Run by `bash fuzz/run.sh` (CI); by hand: `cargo fuzz run inferred_denials`.
//! What must hold is asserted in `toolcage_broker::fuzz::inferred_denials`,
//! which `cargo test` also runs over `fuzz/corpus/inferred_denials/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    toolcage_broker::fuzz::inferred_denials(data);
});
