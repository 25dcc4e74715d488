//! The Landlock audit record reader (netlink bytes and record lines).
//! Run by `bash fuzz/run.sh` (CI); by hand: `cargo fuzz run landlock_audit`.
//! What must hold is asserted in `toolcage_broker::fuzz::landlock_audit`,
//! which `cargo test` also runs over `fuzz/corpus/landlock_audit/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    toolcage_broker::fuzz::landlock_audit(data);
});
