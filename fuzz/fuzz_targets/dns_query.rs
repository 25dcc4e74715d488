//! The DNS stub's query reader (packets from a confined tool).
//! Run by `bash fuzz/run.sh` (CI); by hand: `cargo fuzz run dns_query`.
//! What must hold is asserted in `toolcage_broker::fuzz::dns_query`,
//! which `cargo test` also runs over `fuzz/corpus/dns_query/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    toolcage_broker::fuzz::dns_query(data);
});
