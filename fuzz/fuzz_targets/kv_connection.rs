//! One connection's bytes against a real key-value server (cache or
//! store mode) on a small volume, one server of each mode shared by every
//! input of the run. The first byte chooses the mode and whether the rest
//! is sent as it is or decoded into a session of commands whose replies are
//! checked against a model of its keys (`KvTarget::session`).
#![no_main]

use std::sync::OnceLock;

use tiermux_server::kv_fuzzing::{KvMode, KvTarget};

static CACHE: OnceLock<KvTarget> = OnceLock::new();
static STORE: OnceLock<KvTarget> = OnceLock::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let target = if mode % 2 == 0 {
        CACHE.get_or_init(|| KvTarget::start(KvMode::Cache))
    } else {
        STORE.get_or_init(|| KvTarget::start(KvMode::Store))
    };
    if mode & 2 == 0 {
        target.session(rest);
    } else {
        target.connection(rest);
    }
});
