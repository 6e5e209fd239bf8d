//! What the replay tests share: a skewed workload and a replay of it.

pub mod two_ssds;

use tiermux_core::rng::Rng;
use tiermux_core::{Op, Params};
use tiermux_trace::replay::{replay_accesses, ReplayStats, TraceVolume};

/// Replays `accesses` with `policy` and `params` over `volume`, keeping
/// the log of storage writes.
pub fn run(
    policy: &str,
    params: &Params,
    accesses: &[(u64, Op)],
    volume: TraceVolume,
) -> ReplayStats {
    replay_accesses(policy, params, accesses.iter().copied(), volume, true).unwrap()
}

/// `n` accesses to `pages` pages, low pages likelier (the lower of two
/// uniform draws), `write_share` percent of them writes.
pub fn skewed(n: usize, pages: u64, write_share: u64, seed: u64) -> Vec<(u64, Op)> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|_| {
            let p = rng.below(pages).min(rng.below(pages));
            let op = if rng.below(100) < write_share {
                Op::Write
            } else {
                Op::Read
            };
            (p, op)
        })
        .collect()
}
