//! Change tracking and restore, the two things a driver that persists the
//! placement map relies on. A tiny driver runs every registered policy with
//! operations completing in random order, keeps a version per device
//! location, and checks:
//! - every read returns the last acknowledged write;
//! - a decision adds copies only of its own block (other blocks only lose
//!   copies), the contract the engine's journal ordering depends on;
//! - a policy rebuilt from the map of an idle volume (a restart) carries on
//!   with the same cached and dirty blocks, and reads stay correct.
//!
//! With failures injected (an operation fails instead of completing; a
//! failed write reaches its location or not), reads return the last
//! acknowledged write, or, after a failed write to the block, some version
//! written to that block; and the policy's own counts stay equal to those
//! of a policy rebuilt from its map, so its repairs keep it in step.

use crate::tracking_world;

use tiermux_core::{build_policy, Dispatcher, Params};
use tracking_world::*;

#[test]
fn tracking_contract_and_restart_for_every_policy() {
    for reg in tiermux_core::REGISTRY {
        for wm in ["wa", "wt", "wb"] {
            for seed in 0..6u64 {
                let (most, _) = exercise(reg.name, wm, seed, &volume_for(reg.name), 0);
                // Colloid moves every hot segment off the fast device,
                // which looks ten times slower here.
                let offloads_all = reg.name.starts_with("colloid");
                if matches!(reg.name, "classic" | "nhc")
                    || (wm == "wb"
                        && !offloads_all
                        && !matches!(reg.name, "split" | "stripe" | "passthrough"))
                {
                    assert!(most.0 > 0.0, "{}: nothing cached at a restart", reg.name);
                    // Tiering keeps single copies on the fast device only
                    // where it has room; MOST, seeing that device
                    // overloaded here, allocates on the other.
                    if wm == "wb" && !matches!(reg.name, "sib+" | "most") {
                        assert!(most.1 > 0.0, "{} wb: nothing dirty at a restart", reg.name);
                    }
                }
            }
        }
    }
}

/// The tiering policies move segments in these runs: HeMem promotes; with
/// the fast device looking overloaded, MOST offloads and mirrors, and
/// BATMAN (its target share 0.5 below what the fast device serves) and
/// Colloid demote.
#[test]
fn tiering_policies_move_segments() {
    for policy in ["hemem", "most", "batman", "colloid+", "colloid++"] {
        for wm in ["wa", "wb"] {
            let (_, state) = exercise(policy, wm, 7, &volume(), 0);
            let get = |n: &str| state.iter().find(|(k, _)| k == n).unwrap().1;
            match policy {
                "hemem" => assert!(get("promoted_bytes") > 0.0, "hemem: nothing promoted"),
                "most" => {
                    // The fast device is slower here: MOST migrates only
                    // toward the other one, and mirrors.
                    assert!(get("mirrored_segments") > 0.0, "most: nothing mirrored");
                    assert!(get("cleaned_bytes") > 0.0, "most: nothing cleaned");
                    assert!(get("offload_ratio") > 0.0, "most: no offload");
                }
                // Load moves off the fast device: demotions.
                _ => assert!(get("demoted_bytes") > 0.0, "{policy}: nothing demoted"),
            }
        }
    }
}

/// Two stacked caches over a home device: the version checker, the
/// tracking contract and restarts hold, and both cache levels are used.
#[test]
fn stacked_caches_over_three_devices() {
    for wm in ["wa", "wt", "wb"] {
        for seed in 0..6u64 {
            let (most, state) = exercise("stacked", wm, seed, &volume3(), 0);
            let get = |n: &str| state.iter().find(|(k, _)| k == n).unwrap().1;
            assert!(
                most.0 > 0.0,
                "stacked {wm}: nothing cached on the top level"
            );
            assert!(
                get("cached_blocks_1") > 0.0,
                "stacked {wm}: the middle level is unused"
            );
            if wm == "wb" {
                assert!(most.1 > 0.0, "stacked wb: nothing dirty at a restart");
            }
        }
    }
}

#[test]
fn a_policy_without_placement_refuses_a_saved_map() {
    let vol = volume();
    let mut map = tiermux_core::PlacementMap::new(1);
    map.entry_mut(3).present |= 1;
    let policy = build_policy("split", &Params::new(), &vol, 1).unwrap();
    let err = Dispatcher::with_map(policy, map)
        .err()
        .expect("must refuse");
    assert!(err.contains("split") && err.contains("places 1"), "{err}");
}

#[test]
fn restore_rejects_corrupt_slots() {
    let vol = volume();
    let mut map = tiermux_core::PlacementMap::new(1);
    for (b, slot) in [(5u64, 3u32), (6, 3)] {
        let e = map.entry_mut(b);
        e.present |= 1;
        e.set_loc(0, slot);
    }
    let policy = build_policy("classic", &Params::new(), &vol, 1).unwrap();
    let err = Dispatcher::with_map(policy, map)
        .err()
        .expect("must refuse");
    assert!(err.contains("slot 3 holds two blocks"), "{err}");
    let mut map = tiermux_core::PlacementMap::new(1);
    let e = map.entry_mut(9);
    e.present |= 1;
    e.set_loc(0, 1000);
    let policy = build_policy("classic", &Params::new(), &vol, 1).unwrap();
    let err = Dispatcher::with_map(policy, map)
        .err()
        .expect("must refuse");
    assert!(err.contains("beyond the cache's 24 slots"), "{err}");
}

/// Failed operations (3 %) and trims over every policy, two and three
/// devices: reads
/// never return a version not written to their block, and the restarts'
/// comparison of the policy's counts with those rebuilt from its map holds.
#[test]
fn failed_operations_leave_every_policy_consistent() {
    for reg in tiermux_core::REGISTRY {
        for wm in ["wa", "wt", "wb"] {
            for seed in 0..4u64 {
                exercise(reg.name, wm, 100 + seed, &volume_for(reg.name), 30);
            }
        }
    }
    for wm in ["wa", "wt", "wb"] {
        for seed in 0..4u64 {
            exercise("stacked", wm, 200 + seed, &volume3(), 30);
        }
    }
    for policy in ["hibachi", "hybrid-lru", "hybrid-arc"] {
        for seed in 0..6u64 {
            exercise(policy, "wb", 300 + seed, &volume3(), 30);
        }
    }
}

/// The hybrid caches over DRAM, NVRAM and home: data is safe across
/// restarts, both cache devices are used, and dirty pages are on NVRAM.
#[test]
fn hybrid_caches_over_three_devices() {
    for policy in ["hibachi", "hybrid-lru", "hybrid-arc"] {
        for seed in 0..6u64 {
            let get = exercise_flushing(policy, seed, &volume3());
            // Dirty pages have one copy, on NVRAM: its failure loses
            // them; DRAM holds clean pages only.
            assert_eq!(get("most_lost_without_device_0"), 0.0, "{policy}");
            let lost = get("most_lost_without_device_1");
            assert!(lost > 0.0, "{policy}: NVRAM held no dirty page");
            println!("{policy} seed {seed}: losing NVRAM would lose up to {lost} blocks");
        }
    }
}

/// A hybrid cache's DRAM or NVRAM dies: it is taken out of service, and
/// from then on, through restarts, every read returns the last
/// acknowledged write or fails. Only reads of blocks whose newest data was
/// on the dead NVRAM alone may fail (DRAM holds clean pages only); writes
/// then go home, and the cache keeps no dirty page.
#[test]
fn hybrid_caches_lose_only_nvram_dirty_data_when_a_cache_device_dies() {
    for policy in ["hibachi", "hybrid-lru", "hybrid-arc"] {
        for dev in 0..2u8 {
            for seed in 0..3u64 {
                let (most, state) =
                    exercise_full(policy, "wb", 600 + seed, &volume3(), 0, Some(dev), false);
                let get = |n: &str| state.iter().find(|(k, _)| k == n).map(|x| x.1).unwrap();
                let what = format!("{policy} seed {seed} without device {dev}");
                assert!(most.0 > 0.0, "{what}: nothing cached");
                if dev == 0 {
                    assert_eq!(get("at_risk_failed_reads"), 0.0, "{what}");
                    assert!(get("dirty_blocks") > 0.0, "{what}: no write cached");
                } else {
                    assert!(get("at_risk_failed_reads") > 0.0, "{what}: none at risk");
                    assert_eq!(get("dirty_blocks"), 0.0, "{what}");
                }
            }
        }
    }
}

/// TICA over DRAM, RO-SSD, WO-SSD and home: data is safe across restarts
/// and failures, every job kind runs, and the modes differ as they
/// should (EF drops DRAM victims, WED copies them to the WO-SSD).
#[test]
fn tica_over_four_devices() {
    for policy in ["tica-ef", "tica-wed", "tica-a"] {
        for seed in 0..6u64 {
            let get = exercise_flushing(policy, seed, &volume4());
            assert!(get("moves") > 0.0, "{policy}: nothing moved to RO");
            // No single cache device's failure, at any of the points
            // checked, would lose an acknowledged write.
            assert!(get("failure_points") >= 1000.0);
            for dev in 0..3 {
                let lost = get(&format!("most_lost_without_device_{dev}"));
                assert_eq!(lost, 0.0, "{policy} seed {seed}: device {dev}");
            }
            match policy {
                "tica-ef" => assert!(get("demotions") == 0.0 && get("drops") > 0.0),
                "tica-wed" => assert!(get("demotions") > 0.0, "wed: nothing demoted"),
                _ => {}
            }
        }
        for seed in 0..6u64 {
            exercise(policy, "wb", 400 + seed, &volume4(), 30);
        }
    }
}

/// The TICA paper's baselines over DRAM, an SSD, its mirror and home:
/// data is safe across restarts and failures (a dirty page is always on
/// both SSDs), and each baseline's own rules act (uCache admits DRAM
/// victims read again; S-RAC re-adds SSD victims read there).
#[test]
fn tica_baselines_over_four_devices() {
    for policy in ["ucache", "s-rac"] {
        for seed in 0..6u64 {
            let get = exercise_flushing(policy, seed, &volume4());
            assert_eq!(get("moves"), 0.0, "{policy}: no DRAM write partition");
            assert_eq!(get("dram_dirty_blocks"), 0.0, "{policy}");
            assert!(get("failure_points") >= 1000.0);
            for dev in 0..3 {
                let lost = get(&format!("most_lost_without_device_{dev}"));
                assert_eq!(lost, 0.0, "{policy} seed {seed}: device {dev}");
            }
            // Both SSDs hold the same pages.
            assert_eq!(get("ro_blocks"), get("wo_blocks"), "{policy}");
            match policy {
                "ucache" => assert!(get("admitted_victims") > 0.0 && get("demotions") > 0.0),
                _ => assert!(get("readds") > 0.0, "s-rac: nothing re-added"),
            }
        }
        for seed in 0..6u64 {
            exercise(policy, "wb", 400 + seed, &volume4(), 30);
        }
    }
}

/// Any one of TICA's cache devices dies: it is taken out of service, and
/// from then on, through restarts, no read fails and every read returns
/// the last acknowledged write (the harness checks each one); the dirty
/// data drains home and nothing stays dirty on the dead device.
#[test]
fn tica_survives_the_death_of_any_cache_device() {
    for policy in ["tica-ef", "tica-wed", "tica-a", "ucache", "s-rac"] {
        for dev in 0..3u8 {
            for seed in 0..3u64 {
                let (_, state) =
                    exercise_full(policy, "wb", 500 + seed, &volume4(), 0, Some(dev), false);
                let get = |n: &str| state.iter().find(|(k, _)| k == n).map(|x| x.1).unwrap();
                // After the first round, writes go home: the dirty data
                // left is what the flushes have not reached yet.
                assert!(get("home_writes") > 0.0, "{policy} without {dev}");
            }
        }
    }
}

/// Every policy that can change parameters while running does so at
/// random moments (write mode, dirty thresholds, controller settings),
/// with and without failed operations: reads stay correct, the contract
/// holds, a restart keeps the cache, and a cache left in a mode other than
/// write-back drains its dirty blocks.
#[test]
fn live_parameter_changes_keep_every_read_correct() {
    let mut changed = 0;
    for reg in tiermux_core::REGISTRY {
        let vol = volume_for(reg.name);
        let probe = build_policy(reg.name, &params(reg.name, "wb"), &vol, 0).unwrap();
        if probe.live_params().is_empty() {
            continue;
        }
        for seed in 0..4u64 {
            let fail = if seed % 2 == 0 { 0 } else { 30 };
            let (_, state) = exercise_full(reg.name, "wb", 700 + seed, &vol, fail, None, true);
            let get = |n: &str| state.iter().find(|(k, _)| k == n).unwrap().1;
            assert!(get("live_changes") > 5.0, "{}: {state:?}", reg.name);
            changed += 1;
        }
    }
    // The cache family (classic, nhc, sib+, sib++, lbica) and the tiering
    // family (hemem, most, batman, colloid, colloid+, colloid++).
    assert!(changed >= 11 * 4, "{changed}");
}
