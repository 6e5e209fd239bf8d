//! The memory the NBD server holds for all its connections together: the
//! data of requests in flight (write payloads, read buffers, read aheads),
//! replies not yet sent, and receive buffers grown for clients that stream
//! requests. Each connection is held to
//! [`super::MAX_HELD_BYTES_PER_CONN`]; this bounds their sum, so that many
//! clients that send large requests and read their replies slowly cannot
//! take the machine's memory.

use tiermux_engine::volume::MAX_REQUEST_BYTES;

/// Default of the server's request memory (`request_memory` in a volume
/// config): a thousand 1 MiB requests in flight, or sixteen connections at
/// their own limit.
pub const DEFAULT_REQUEST_MEMORY_BYTES: u64 = 1 << 30;

/// The bytes the server's connections hold together, against a limit.
#[derive(Debug)]
pub(super) struct RequestMemory {
    /// Summed over the connections before the loop waits, plus what the
    /// requests and write payloads taken since then hold.
    pub held_bytes: u64,
    /// Past this, new requests wait (see [`RequestMemory::admits`]).
    pub limit_bytes: u64,
}

impl RequestMemory {
    /// Whether a connection that holds `conn_held_bytes` may take a request
    /// that holds `request_bytes` (at most [`MAX_REQUEST_BYTES`]). Below
    /// the limit any request is taken. At or past it, only a connection
    /// that holds nothing may take one, and only while the total stays
    /// within the limit plus one largest request. So the total never
    /// passes `limit_bytes + MAX_REQUEST_BYTES`, and a client that reads
    /// its replies goes on, one request at a time, however much other
    /// clients hold.
    pub fn admits(&self, conn_held_bytes: u64, request_bytes: u64) -> bool {
        debug_assert!(request_bytes <= MAX_REQUEST_BYTES as u64);
        self.held_bytes < self.limit_bytes
            || (conn_held_bytes == 0
                && self.held_bytes + request_bytes <= self.limit_bytes + MAX_REQUEST_BYTES as u64)
    }

    /// Whether `bytes` more stay within the limit: for memory a connection
    /// may do without (a larger receive buffer), unlike a request.
    pub fn has_room(&self, bytes: u64) -> bool {
        self.held_bytes + bytes <= self.limit_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: u64 = MAX_REQUEST_BYTES as u64;

    fn memory(held_bytes: u64) -> RequestMemory {
        RequestMemory {
            held_bytes,
            limit_bytes: 100 << 20,
        }
    }

    #[test]
    fn below_the_limit_every_request_is_taken() {
        assert!(memory((100 << 20) - 1).admits(60 << 20, MAX));
        assert!(memory(0).admits(0, MAX));
    }

    #[test]
    fn at_the_limit_only_a_connection_that_holds_nothing_goes_on() {
        let m = memory(100 << 20);
        assert!(!m.admits(4096, 4096));
        assert!(!m.admits(1, 0));
        assert!(m.admits(0, MAX));
        // Within one largest request past the limit, and no further.
        let m = memory((100 << 20) + MAX - 4096);
        assert!(m.admits(0, 4096));
        assert!(!m.admits(0, 8192));
    }

    /// Requests taken in any order by connections holding any amount
    /// never take the total past the limit plus one largest request.
    #[test]
    fn the_total_stays_within_the_limit_and_one_request() {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let mut m = memory(0);
        let mut held_by = [0u64; 8];
        for _ in 0..100_000 {
            let conn = next(8) as usize;
            if next(3) == 0 {
                // The connection's replies go out.
                m.held_bytes -= held_by[conn];
                held_by[conn] = 0;
                continue;
            }
            let bytes = next(MAX + 1);
            if m.admits(held_by[conn], bytes) {
                m.held_bytes += bytes;
                held_by[conn] += bytes;
            }
            assert!(m.held_bytes <= m.limit_bytes + MAX);
        }
    }
}
