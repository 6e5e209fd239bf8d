//! The migration bandwidth cap shared by tiering policies, and the bytes
//! they migrate, per direction.
//!
//! A token bucket: the budget grows at `bytes_per_s` of the driver's time
//! (passed in; the core reads no clock) up to one refill window's worth, and
//! a migration of `n` bytes may start only when `n` bytes are in it. The
//! window (default 200 ms, MOST's and HeMem's tuning interval for storage)
//! bounds the burst after an idle spell: a policy that migrated nothing for
//! a minute may not then move a minute's worth at once. A migration larger
//! than the window's worth (a 2 MiB segment under a cap below 10 MB/s)
//! still starts once the bucket is full, so that it is never starved.

/// Where migrated bytes went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// From the capacity device to the performance device.
    Promote,
    /// From the performance device to the capacity device.
    Demote,
    /// A second copy made (a segment joining a mirrored class).
    Mirror,
    /// Out-of-date subpages of a copy rewritten from the valid one.
    Clean,
}

impl Direction {
    /// Number of directions (for per-direction arrays).
    pub const COUNT: usize = 4;

    /// Dense index of the direction.
    pub fn index(self) -> usize {
        match self {
            Direction::Promote => 0,
            Direction::Demote => 1,
            Direction::Mirror => 2,
            Direction::Clean => 3,
        }
    }
}

/// Default refill window, ns.
pub const DEFAULT_WINDOW_NS: u64 = 200_000_000;

/// A migration bandwidth cap and the bytes migrated under it.
#[derive(Clone, Debug)]
pub struct MigrationBudget {
    bytes_per_s: f64,
    capacity_bytes: f64,
    tokens_bytes: f64,
    last_ns: Option<u64>,
    migrated_bytes: [u64; Direction::COUNT],
    refused: u64,
}

impl MigrationBudget {
    /// A cap of `bytes_per_s` whose bucket holds `window_ns` worth of it;
    /// starts full.
    pub fn new(bytes_per_s: f64, window_ns: u64) -> MigrationBudget {
        assert!(
            bytes_per_s.is_finite() && bytes_per_s > 0.0,
            "a migration cap must be a positive rate, got {bytes_per_s}"
        );
        assert!(window_ns > 0, "a refill window must be positive");
        let capacity_bytes = bytes_per_s * window_ns as f64 / 1e9;
        MigrationBudget {
            bytes_per_s,
            capacity_bytes,
            tokens_bytes: capacity_bytes,
            last_ns: None,
            migrated_bytes: [0; Direction::COUNT],
            refused: 0,
        }
    }

    /// Changes the cap and its window while running; the bytes migrated
    /// so far are kept, and the bucket holds no more than the new window.
    pub fn set_rate(&mut self, bytes_per_s: f64, window_ns: u64) {
        let counted = (self.migrated_bytes, self.refused, self.last_ns);
        let tokens = self.tokens_bytes;
        *self = MigrationBudget::new(bytes_per_s, window_ns);
        (self.migrated_bytes, self.refused, self.last_ns) = counted;
        self.tokens_bytes = tokens.min(self.capacity_bytes);
    }

    /// A cap of `mb_per_s` (10^6 bytes per second) with the default window.
    pub fn mb_per_s(mb_per_s: f64) -> MigrationBudget {
        MigrationBudget::new(mb_per_s * 1e6, DEFAULT_WINDOW_NS)
    }

    /// Adds the budget earned since the last refill; `now_ns` never goes
    /// back.
    pub fn refill(&mut self, now_ns: u64) {
        if let Some(last) = self.last_ns {
            assert!(now_ns >= last, "time went back: {now_ns} < {last}");
            let earned = self.bytes_per_s * (now_ns - last) as f64 / 1e9;
            self.tokens_bytes = (self.tokens_bytes + earned).min(self.capacity_bytes);
        }
        self.last_ns = Some(now_ns);
    }

    /// Starts a migration of `bytes` in `direction` at `now_ns` if the
    /// budget allows it (counting its bytes), or refuses it.
    pub fn try_start(&mut self, now_ns: u64, bytes: u64, direction: Direction) -> bool {
        self.refill(now_ns);
        let need = (bytes as f64).min(self.capacity_bytes);
        if self.tokens_bytes + 1e-9 < need {
            self.refused += 1;
            return false;
        }
        self.tokens_bytes -= bytes as f64;
        self.migrated_bytes[direction.index()] += bytes;
        true
    }

    /// Bytes migrated in `direction` so far.
    pub fn migrated_bytes(&self, direction: Direction) -> u64 {
        self.migrated_bytes[direction.index()]
    }

    /// Bytes migrated in every direction so far.
    pub fn total_migrated_bytes(&self) -> u64 {
        self.migrated_bytes.iter().sum()
    }

    /// Migrations refused for want of budget.
    pub fn refused(&self) -> u64 {
        self.refused
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn the_cap_holds_over_a_long_run() {
        // 100 MB/s, 1 MiB migrations offered every millisecond for 10 s.
        let mut b = MigrationBudget::mb_per_s(100.0);
        let mut started = 0u64;
        for t in 0..10_000u64 {
            if b.try_start(t * MS, 1 << 20, Direction::Promote) {
                started += 1;
            }
        }
        let moved = started * (1 << 20);
        assert_eq!(moved, b.migrated_bytes(Direction::Promote));
        // At most the initial bucket (20 MB) plus 10 s at 100 MB/s.
        assert!(moved as f64 <= 20e6 + 100e6 * 9.999, "{moved}");
        assert!(moved as f64 >= 100e6 * 9.999 - (1 << 20) as f64, "{moved}");
        assert!(b.refused() > 0);
    }

    #[test]
    fn a_new_rate_applies_from_now_and_keeps_the_counts() {
        let mut b = MigrationBudget::new(1e6, 200 * MS);
        assert!(b.try_start(0, 200_000, Direction::Promote));
        b.set_rate(10e6, 200 * MS);
        // 100 ms at the new rate: 1 MB earned.
        assert!(b.try_start(100 * MS, 1_000_000, Direction::Promote));
        assert!(!b.try_start(100 * MS, 1_000, Direction::Promote));
        assert_eq!(b.migrated_bytes(Direction::Promote), 1_200_000);
        assert_eq!(b.refused(), 1);
        // A lower rate: the bucket holds its new window (200 bytes) at
        // most, however long it was idle.
        b.set_rate(1e3, 200 * MS);
        assert!(b.try_start(10_000 * MS, 150, Direction::Promote));
        assert!(!b.try_start(10_000 * MS, 51, Direction::Promote));
    }

    #[test]
    fn an_idle_spell_earns_one_window_at_most() {
        let mut b = MigrationBudget::new(1e6, 200 * MS);
        assert!(b.try_start(0, 200_000, Direction::Demote), "starts full");
        assert!(!b.try_start(0, 1, Direction::Demote));
        // A minute idle: still only 200 KB of budget.
        assert!(b.try_start(60_000 * MS, 200_000, Direction::Demote));
        assert!(!b.try_start(60_000 * MS, 1_000, Direction::Demote));
        assert_eq!(b.migrated_bytes(Direction::Demote), 400_000);
        assert_eq!(b.refused(), 2);
    }

    #[test]
    fn a_migration_larger_than_the_window_starts_when_the_bucket_is_full() {
        // 1 MB/s with a 200 ms window: 200 KB; a 2 MiB segment.
        let mut b = MigrationBudget::new(1e6, 200 * MS);
        assert!(b.try_start(0, 2 << 20, Direction::Mirror));
        assert!(
            !b.try_start(100 * MS, 2 << 20, Direction::Mirror),
            "bucket in debt"
        );
        // The debt (2 MiB - 200 KB) and a full bucket take about 2.1 s.
        assert!(!b.try_start(2_000 * MS, 2 << 20, Direction::Mirror));
        assert!(b.try_start(2_300 * MS, 2 << 20, Direction::Mirror));
        assert_eq!(b.total_migrated_bytes(), 2 * (2 << 20));
    }

    #[test]
    #[should_panic(expected = "time went back")]
    fn time_going_back_is_a_bug() {
        let mut b = MigrationBudget::mb_per_s(10.0);
        b.refill(5);
        b.refill(4);
    }
}
