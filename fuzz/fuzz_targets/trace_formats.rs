//! The block-trace readers on arbitrary bytes (the first picks the format).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tiermux_trace::fuzzing::trace_bytes(data);
});
