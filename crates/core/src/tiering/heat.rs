//! Per-segment access counters with HeMem-style cooling, shared by the
//! tiering policies (MOST, HeMem, Colloid, BATMAN).
//!
//! Each segment counts its reads and its writes. A segment is **hot** when
//! either count reaches `hot_threshold` (HeMem: 8). When any count passes
//! `cooling_threshold` (HeMem: 18), every segment's counts are halved, so
//! that the counts follow recent accesses. Halving every segment at once
//! would cost a pass over the map; instead a global cooling epoch advances,
//! and a segment applies the halvings it missed when it is next read or
//! counted (HeMem cools lazily the same way). So [`HeatMap::heat`] is exact
//! at any moment: the counts are those of a map halved eagerly.
//!
//! Beside the cooled counts, each segment keeps its reads and writes since
//! it was first accessed, never halved: MOST's `rewriteReadCounter` and
//! `rewriteCounter` (64-bit fields of its Table 3, next to the 8-bit read
//! and write counters), from which its cleaner takes a segment's rewrite
//! distance, the mean number of reads between two writes (§3.2.4;
//! [`HeatMap::rewrite_distance`]). Cooled counts forget a write within a
//! few coolings, so they cannot tell a segment written every 0.1 s from
//! one written every 30 s once it is read often.
//!
//! Memory: 32 bytes of counters per segment that has been accessed, plus
//! the hash table's overhead (about 40 bytes per segment; 36 KiB per GiB
//! of 2 MiB segments).

use crate::map::BlockMap;
use crate::types::Op;

/// Defaults of HeMem (and of MOST, which takes them from HeMem).
pub const DEFAULT_HOT_THRESHOLD: u32 = 8;
/// See [`DEFAULT_HOT_THRESHOLD`].
pub const DEFAULT_COOLING_THRESHOLD: u32 = 18;

/// The counters of one segment, as of `epoch`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counts {
    reads: u32,
    writes: u32,
    epoch: u64,
    /// Reads since the segment was first accessed, never halved.
    reads_ever: u64,
    /// Writes likewise.
    writes_ever: u64,
}

impl Counts {
    /// The counts halved once for every epoch between `self.epoch` and
    /// `now`.
    fn cooled(self, now: u64) -> Counts {
        assert!(self.epoch <= now, "a segment's epoch is ahead of the map's");
        let halvings = (now - self.epoch).min(32) as u32;
        Counts {
            reads: self.reads.checked_shr(halvings).unwrap_or(0),
            writes: self.writes.checked_shr(halvings).unwrap_or(0),
            epoch: now,
            ..self
        }
    }

    /// The counts as a [`Heat`].
    fn heat(self) -> Heat {
        Heat {
            reads: self.reads,
            writes: self.writes,
        }
    }
}

/// A segment's current access counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Heat {
    /// Reads counted since the last coolings, halved by each.
    pub reads: u32,
    /// Writes counted likewise.
    pub writes: u32,
}

impl Heat {
    /// Reads and writes together.
    pub fn total(&self) -> u32 {
        self.reads.saturating_add(self.writes)
    }
}

/// Access counters of every segment that has been accessed.
#[derive(Clone, Debug)]
pub struct HeatMap {
    counts: BlockMap<Counts>,
    epoch: u64,
    hot_threshold: u32,
    cooling_threshold: u32,
    coolings: u64,
}

impl HeatMap {
    /// Changes the thresholds while running (the counts are kept).
    pub fn set_thresholds(&mut self, hot_threshold: u32, cooling_threshold: u32) {
        let fresh = HeatMap::new(hot_threshold, cooling_threshold);
        self.hot_threshold = fresh.hot_threshold;
        self.cooling_threshold = fresh.cooling_threshold;
    }

    /// An empty map: a segment is hot at `hot_threshold` reads or writes,
    /// and all counts halve when one passes `cooling_threshold`.
    pub fn new(hot_threshold: u32, cooling_threshold: u32) -> HeatMap {
        assert!(
            hot_threshold > 0,
            "a hot threshold of 0 makes every segment hot"
        );
        assert!(
            cooling_threshold >= hot_threshold,
            "cooling at {cooling_threshold} would halve counts before they reach {hot_threshold}"
        );
        HeatMap {
            counts: BlockMap::default(),
            epoch: 0,
            hot_threshold,
            cooling_threshold,
            coolings: 0,
        }
    }

    /// Counts `n` accesses of `segment` in direction `op`, cooling every
    /// segment first if this one would pass the cooling threshold.
    pub fn record(&mut self, segment: u64, op: Op, n: u32) {
        let now = self.epoch;
        let c = self.counts.entry(segment).or_insert(Counts {
            epoch: now,
            ..Counts::default()
        });
        *c = c.cooled(now);
        match op {
            Op::Read => {
                c.reads = c.reads.saturating_add(n);
                c.reads_ever += u64::from(n);
            }
            Op::Write => {
                c.writes = c.writes.saturating_add(n);
                c.writes_ever += u64::from(n);
            }
        }
        if c.reads.max(c.writes) > self.cooling_threshold {
            self.epoch += 1;
            self.coolings += 1;
        }
    }

    /// The current counts of `segment` (zero if never accessed).
    pub fn heat(&self, segment: u64) -> Heat {
        self.counts
            .get(&segment)
            .map_or(Heat::default(), |c| c.cooled(self.epoch).heat())
    }

    /// `segment`'s rewrite distance: its reads per write since it was
    /// first accessed (never cooled); `None` before its first write.
    pub fn rewrite_distance(&self, segment: u64) -> Option<f64> {
        let c = self.counts.get(&segment)?;
        (c.writes_ever > 0).then(|| c.reads_ever as f64 / c.writes_ever as f64)
    }

    /// True when `segment`'s reads or writes reach the hot threshold.
    pub fn is_hot(&self, segment: u64) -> bool {
        let h = self.heat(segment);
        h.reads.max(h.writes) >= self.hot_threshold
    }

    /// Every accessed segment with its current counts, in no order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, Heat)> + '_ {
        self.counts
            .iter()
            .map(|(&s, c)| (s, c.cooled(self.epoch).heat()))
    }

    /// The `n` segments with the most accesses among those `keep` accepts,
    /// hottest first (ties: lower segment first, so runs are deterministic).
    pub fn hottest(&self, n: usize, keep: impl Fn(u64) -> bool) -> Vec<(u64, Heat)> {
        let mut v: Vec<(u64, Heat)> = self.iter().filter(|(s, _)| keep(*s)).collect();
        v.sort_by(|a, b| b.1.total().cmp(&a.1.total()).then(a.0.cmp(&b.0)));
        v.truncate(n);
        v
    }

    /// Forgets `segment`'s counts (a segment whose data was trimmed).
    pub fn forget(&mut self, segment: u64) {
        self.counts.remove(&segment);
    }

    /// Segments with counters.
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// True when no segment has counters.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Times every count has been halved.
    pub fn coolings(&self) -> u64 {
        self.coolings
    }
}

impl Default for HeatMap {
    fn default() -> HeatMap {
        HeatMap::new(DEFAULT_HOT_THRESHOLD, DEFAULT_COOLING_THRESHOLD)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;
    use std::collections::HashMap;

    #[test]
    fn a_segment_is_hot_at_eight_reads_or_eight_writes() {
        let mut h = HeatMap::default();
        h.record(1, Op::Read, 7);
        h.record(2, Op::Write, 7);
        assert!(!h.is_hot(1) && !h.is_hot(2));
        h.record(1, Op::Read, 1);
        h.record(2, Op::Read, 7);
        assert!(h.is_hot(1), "8 reads");
        assert!(!h.is_hot(2), "7 reads and 7 writes: neither reaches 8");
        h.record(2, Op::Write, 1);
        assert!(h.is_hot(2));
        assert_eq!(
            h.heat(2),
            Heat {
                reads: 7,
                writes: 8
            }
        );
        assert!(!h.is_hot(3), "never accessed");
    }

    #[test]
    fn passing_the_cooling_threshold_halves_every_segment() {
        let mut h = HeatMap::default();
        h.record(1, Op::Read, 18);
        h.record(2, Op::Write, 10);
        h.record(3, Op::Read, 5);
        assert_eq!(h.coolings(), 0, "18 does not pass 18");
        h.record(1, Op::Read, 1);
        assert_eq!(h.coolings(), 1);
        assert_eq!(h.heat(1).reads, 9);
        assert_eq!(h.heat(2).writes, 5);
        assert_eq!(h.heat(3).reads, 2);
        assert!(!h.is_hot(2), "cooled below the hot threshold");
    }

    /// The lazy map agrees with one that halves every count eagerly, over
    /// random accesses with many coolings.
    #[test]
    fn lazy_cooling_equals_eager_cooling() {
        let mut lazy = HeatMap::new(4, 10);
        let mut eager: HashMap<u64, (u32, u32)> = HashMap::new();
        let mut rng = Rng::new(7);
        for _ in 0..20_000 {
            let seg = rng.next_u64() % 50;
            let op = if rng.next_u64().is_multiple_of(3) {
                Op::Write
            } else {
                Op::Read
            };
            let n = 1 + (rng.next_u64() % 3) as u32;
            lazy.record(seg, op, n);
            let e = eager.entry(seg).or_default();
            match op {
                Op::Read => e.0 += n,
                Op::Write => e.1 += n,
            }
            if e.0.max(e.1) > 10 {
                for v in eager.values_mut() {
                    *v = (v.0 / 2, v.1 / 2);
                }
            }
            let h = lazy.heat(seg);
            let e = eager[&seg];
            assert_eq!((h.reads, h.writes), e, "segment {seg}");
        }
        for (seg, h) in lazy.iter() {
            assert_eq!((h.reads, h.writes), eager[&seg]);
        }
        assert!(lazy.coolings() > 100, "{}", lazy.coolings());
    }

    #[test]
    fn hottest_orders_by_total_and_breaks_ties_by_segment() {
        let mut h = HeatMap::default();
        h.record(5, Op::Read, 3);
        h.record(9, Op::Write, 6);
        h.record(2, Op::Read, 3);
        h.record(7, Op::Read, 1);
        let top: Vec<u64> = h.hottest(3, |_| true).into_iter().map(|x| x.0).collect();
        assert_eq!(top, vec![9, 2, 5]);
        let odd: Vec<u64> = h
            .hottest(10, |s| s % 2 == 1)
            .into_iter()
            .map(|x| x.0)
            .collect();
        assert_eq!(odd, vec![9, 5, 7]);
    }

    #[test]
    fn forget_drops_a_segment_and_its_rewrite_counts() {
        let mut h = HeatMap::default();
        h.record(1, Op::Read, 1);
        h.record(2, Op::Write, 4);
        h.forget(2);
        assert_eq!(h.len(), 1);
        assert_eq!(h.heat(2), Heat::default());
        assert_eq!(h.rewrite_distance(2), None);
    }

    /// The rewrite distance is reads per write since the first access,
    /// whatever the coolings did to the counts: a segment written 4 times
    /// among 1,000 reads is 250 reads per write, where its cooled counts
    /// have long forgotten the writes.
    #[test]
    fn rewrite_distance_survives_cooling() {
        let mut h = HeatMap::default();
        assert_eq!(h.rewrite_distance(1), None, "never accessed");
        h.record(1, Op::Read, 3);
        assert_eq!(h.rewrite_distance(1), None, "never written");
        h.record(1, Op::Write, 1);
        assert_eq!(h.rewrite_distance(1), Some(3.0));
        for i in 0..997 {
            h.record(1, Op::Read, 1);
            if i % 250 == 249 {
                h.record(1, Op::Write, 1);
            }
        }
        assert!(h.coolings() > 50, "{}", h.coolings());
        assert_eq!(h.heat(1).writes, 0, "cooled away");
        assert_eq!(h.rewrite_distance(1), Some(1000.0 / 4.0));
    }

    #[test]
    #[should_panic(expected = "would halve counts")]
    fn a_cooling_threshold_below_the_hot_one_is_refused() {
        HeatMap::new(8, 4);
    }
}
