//! The commands a key-value machine takes and the replies it gives, the
//! same for the cache and the store, so that the drivers (the Redis front,
//! the simulator, the tests) run either.

use bytes::Bytes;

/// A client command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// The value of `key`, if cached.
    Get {
        /// The key.
        key: Bytes,
    },
    /// Cache `value` under `key` until `expires_at_ms` (0: no expiry).
    Set {
        /// The key.
        key: Bytes,
        /// The value.
        value: Bytes,
        /// Milliseconds since the epoch when the item expires; 0 never.
        expires_at_ms: u64,
    },
    /// Remove `key`; answers 1 if it was cached, else 0.
    Del {
        /// The key.
        key: Bytes,
    },
    /// Answers 1 if `key` is cached, else 0.
    Exists {
        /// The key.
        key: Bytes,
    },
    /// Up to `count` keys from `start` (inclusive) in key order, with their
    /// values when `with_values`. Only a store keeps keys in order; the
    /// cache refuses it.
    Scan {
        /// The first key to consider.
        start: Bytes,
        /// The most entries to answer.
        count: u32,
        /// Whether to read each key's value too.
        with_values: bool,
    },
}

/// The answer to a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// A lookup's value, or none.
    Value(Option<Bytes>),
    /// A set was done.
    Stored,
    /// A count (DEL, EXISTS).
    Count(u64),
    /// A scan's entries in key order (values empty unless asked for).
    Entries(Vec<(Bytes, Bytes)>),
    /// The command was refused; the text says why.
    Error(String),
}
