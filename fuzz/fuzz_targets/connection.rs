//! One connection's bytes against a real server on a small write-back
//! volume, shared by every input of the run. The first byte chooses
//! whether a valid handshake comes first (so most inputs reach the
//! transmission phase), the rest is sent as is.
#![no_main]

use std::sync::OnceLock;

use tiermux_server::fuzzing::Target;

static TARGET: OnceLock<Target> = OnceLock::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let target = TARGET.get_or_init(Target::start);
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    target.connection(mode % 8 != 0, rest);
});
