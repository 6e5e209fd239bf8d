//! Pseudo-random permutations of a page range, so that a synthetic
//! trace's popular pages land at unrelated places on the volume.

use tiermux_core::rng::splitmix64;

/// A pseudo-random permutation of `0..pages`: a four-round Feistel
/// network over the smallest square power of two at least `pages`, walked
/// until it lands inside (at most a few steps on average). Popular ranks
/// land at unrelated places, with no lattice that would line them up.
pub struct Scatter {
    pages: u64,
    half_bits: u32,
    keys: [u64; 4],
}

impl Scatter {
    /// The permutation of `0..pages` that `seed` names.
    pub fn new(pages: u64, seed: u64) -> Scatter {
        assert!(pages > 0, "a permutation of no pages");
        let bits = 64 - (pages - 1).leading_zeros();
        let half_bits = bits.div_ceil(2).max(1);
        let mut k = seed;
        let keys = std::array::from_fn(|_| {
            k = splitmix64(k);
            k
        });
        Scatter {
            pages,
            half_bits,
            keys,
        }
    }

    fn feistel(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half_bits) - 1;
        let (mut left, mut right) = (x >> self.half_bits, x & mask);
        for key in self.keys {
            let f = splitmix64(right ^ key) & mask;
            (left, right) = (right, left ^ f);
        }
        (left << self.half_bits) | right
    }

    /// Where `rank` (below `pages`) goes.
    pub fn apply(&self, rank: u64) -> u64 {
        assert!(
            rank < self.pages,
            "rank {rank} outside {} pages",
            self.pages
        );
        let mut x = self.feistel(rank);
        while x >= self.pages {
            x = self.feistel(x);
        }
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every page is hit once, for sizes around powers of two.
    #[test]
    fn a_scatter_is_a_permutation() {
        for pages in [1, 2, 3, 7, 64, 1000, 4097, 65_536] {
            let s = Scatter::new(pages, 42);
            let mut seen = vec![false; pages as usize];
            for r in 0..pages {
                let p = s.apply(r) as usize;
                assert!(!seen[p], "{pages} pages: {p} twice");
                seen[p] = true;
            }
        }
    }

    /// Consecutive ranks land far apart and evenly spread: the gaps
    /// between the images of the first 4,096 ranks in a 2^18-page volume
    /// are not a lattice (an affine map gives at most three distinct
    /// gaps), and no tenth of the volume holds more than twice its share.
    #[test]
    fn popular_ranks_are_scattered() {
        let pages = 1u64 << 18;
        let s = Scatter::new(pages, 7);
        let mut images: Vec<u64> = (0..4096).map(|r| s.apply(r)).collect();
        images.sort_unstable();
        let gaps: std::collections::HashSet<u64> = images.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.len() > 100, "{} distinct gaps", gaps.len());
        let mut tenths = [0u32; 10];
        for p in images {
            tenths[(p * 10 / pages) as usize] += 1;
        }
        assert!(tenths.iter().all(|&n| n < 2 * 410), "{tenths:?}");
        assert_ne!(Scatter::new(pages, 8).apply(0), s.apply(0));
    }
}
