//! The NBD handshake on arbitrary client bytes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tiermux_server::fuzzing::handshake_bytes(data);
});
