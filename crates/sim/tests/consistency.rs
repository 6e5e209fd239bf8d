//! Every read returns the last acknowledged write: randomized runs over
//! every policy, write mode, replacement and fill mode, with small caches
//! and low dirty watermarks so that evictions, flushes and lock contention
//! are frequent. The simulator's version checker fails a run on any stale
//! read; a deliberately broken policy shows that it does.

use proptest::prelude::*;
use tiermux_core::policy::Ctx;
use tiermux_core::{Access, Op, Outcome, Policy};
use tiermux_sim::run;
use tiermux_sim::sim::{SimError, Simulator};

use crate::common::configs;
use configs::{config, policies};

/// The broken test policy's cache and home devices.
const PERF: u8 = 0;
const CAP: u8 = 1;

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    #[test]
    fn reads_return_last_acknowledged_write(
        policy in prop::sample::select(policies()),
        write_mode in prop::sample::select(vec!["wa", "wt", "wb"]),
        replacement in prop::sample::select(vec!["lru", "arc"]),
        fill in prop::sample::select(vec!["sync", "async"]),
        pat in 0u8..6,
        write_ratio in 0.0f64..0.9,
        write_set in 0.05f64..1.0,
        request_blocks in 1u32..4,
        workers in 1u32..48,
        cache_blocks in 8u64..400,
        seed in 0u64..1_000_000,
    ) {
        let c = config(policy, write_mode, replacement, fill, pat, write_ratio, write_set,
                       request_blocks, workers, cache_blocks, seed);
        let r = run(&c).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(r.reads_checked > 0 || write_ratio > 0.85);
        prop_assert!(r.requests > 0);
    }
}

/// Every combination at least once, with heavy writes and contention.
#[test]
fn every_policy_and_write_mode() {
    for policy in policies() {
        for wm in ["wa", "wt", "wb"] {
            for repl in ["lru", "arc"] {
                for fill in ["sync", "async"] {
                    for seed in 0..3 {
                        let c = config(
                            policy,
                            wm,
                            repl,
                            fill,
                            (seed % 4) as u8,
                            0.5,
                            0.3,
                            2,
                            32,
                            64,
                            seed,
                        );
                        let r = run(&c)
                            .unwrap_or_else(|e| panic!("{policy}/{wm}/{repl}/{fill}/{seed}: {e}"));
                        assert!(r.reads_checked > 1000, "{policy}/{wm}: {}", r.reads_checked);
                    }
                }
            }
        }
    }
}

/// Two stacked caches (DRAM over NVM) over a Flash home device, every write
/// mode and replacement: the checker finds no stale read, and both levels
/// serve hits.
#[test]
fn stacked_caches_over_three_devices() {
    for wm in ["wa", "wt", "wb"] {
        for repl in ["lru", "arc"] {
            for seed in 0..3 {
                let mut c = config(
                    "stacked",
                    wm,
                    repl,
                    "async",
                    (seed % 4) as u8,
                    0.4,
                    0.3,
                    2,
                    32,
                    48,
                    seed,
                );
                c.devices = vec!["dram".into(), "nvm".into(), "flash-970pro".into()];
                c.middle_device_blocks = vec![160];
                let r = run(&c).unwrap_or_else(|e| panic!("stacked/{wm}/{repl}/{seed}: {e}"));
                assert!(r.reads_checked > 1000, "stacked/{wm}: {}", r.reads_checked);
                let ops = |d: usize| r.devices[d].ops_per_s;
                assert!(
                    ops(0) > 0.0 && ops(1) > 0.0 && ops(2) > 0.0,
                    "{:?}",
                    r.devices
                );
                let state = |n: &str| r.controller.iter().find(|(k, _)| k == n).unwrap().1;
                assert!(
                    state("cached_blocks_1") > 0.0,
                    "the middle level holds nothing"
                );
            }
        }
    }
}

/// Write-back that forgets its cached copy is dirty: a later read is sent
/// to the stale home copy. The checker must catch it.
struct ForgetfulWriteBack {
    cached: std::collections::HashSet<u64>,
    vol: u64,
}

impl Policy for ForgetfulWriteBack {
    fn name(&self) -> &str {
        "forgetful"
    }
    fn address_space(&self, _device: usize) -> u64 {
        self.vol
    }
    fn decide(&mut self, a: Access, ctx: &mut Ctx<'_>) -> Outcome {
        match a.op {
            Op::Write => {
                self.cached.insert(a.block);
                ctx.plan.client(PERF, Op::Write, a.block);
                Outcome::Hit(PERF)
            }
            Op::Read => {
                // Bug: serves every other read from home, ignoring dirtiness.
                let dev = if a.block.is_multiple_of(2) { CAP } else { PERF };
                let dev = if self.cached.contains(&a.block) {
                    dev
                } else {
                    CAP
                };
                ctx.plan.client(dev, Op::Read, a.block);
                Outcome::Hit(dev)
            }
        }
    }
}

#[test]
fn checker_catches_stale_reads() {
    let c = config("classic", "wb", "lru", "sync", 0, 0.5, 1.0, 1, 8, 64, 7);
    let r = c.resolve().unwrap();
    let vol = r.volume_blocks;
    let sim = Simulator::with_policy(
        r,
        Box::new(ForgetfulWriteBack {
            cached: Default::default(),
            vol,
        }),
    )
    .unwrap();
    match sim.run() {
        Err(SimError::Consistency(msg)) => assert!(msg.contains("forgetful"), "{msg}"),
        other => panic!(
            "stale reads went unnoticed: {:?}",
            other.map(|r| r.reads_checked)
        ),
    }
}
