//! Runs that share a key-value prefill (a sweep over policies and
//! hierarchies) give exactly the results each gives alone, in the cache
//! and in the store, and the share lets go of each front after its last
//! run.

use tiermux_sim::experiment::run_all;
use tiermux_sim::kvconfig::KvSpec;
use tiermux_sim::sim::{run_sharing, PrefillShare};
use tiermux_sim::{run, SimConfig};

use crate::common::configs;
use configs::{kv_config, policies};

fn cache_spec() -> KvSpec {
    KvSpec {
        dram_bytes: 64 << 10,
        soc_share: 0.3,
        region_bytes: 64 << 10,
        value_bytes_min: 16,
        value_bytes_max: 6000,
        lone_get: 0.05,
        del: 0.02,
        ..KvSpec::default()
    }
}

fn store_spec() -> KvSpec {
    KvSpec {
        mode: "store".into(),
        index_bytes: 1 << 20,
        max_write_bytes: 64 << 10,
        value_bytes_min: 16,
        value_bytes_max: 1000,
        del: 0.02,
        scan: 0.01,
        ..KvSpec::default()
    }
}

/// 32 MiB: room for the store's log of [`KEYS`] keys.
const VOLUME_BLOCKS: u64 = 8192;

/// Keys enough that copying a front costs less than prefilling one (the
/// prefill writes at most the 32 MiB volume, less than 4 KiB a key).
const KEYS: u64 = 20_000;

/// Runs of `keys` keys over policies, each also on another hierarchy
/// (where the policy's configuration has two devices) with fewer
/// clients, all sharing one prefill; and one of another seed that shares
/// none.
fn sweep(kv: KvSpec, policies: &[&str], keys: u64) -> Vec<SimConfig> {
    let run = |policy: &str, seed: u64| {
        let mut c = kv_config(policy, 1, 0.3, 16, 400, kv.clone(), keys, seed);
        c.volume_blocks = Some(VOLUME_BLOCKS);
        c
    };
    let mut out = Vec::new();
    for policy in policies {
        let c = run(policy, 7);
        let mut other = c.clone();
        if other.devices.len() == 2 {
            other.devices = vec!["nvme-pcie3".into(), "sata-870".into()];
        }
        other.client.workers = Some(4);
        out.extend([c, other]);
    }
    out.push(run(policies[0], 8));
    out
}

fn as_json(r: &tiermux_sim::RunResult) -> String {
    serde_json::to_string(r).expect("results serialize")
}

/// Runs `configs` alone, through one share in turn, and two at a time as
/// a sweep does, and checks that all three give the same results; returns
/// the copies the share made.
fn same_alone_and_shared(configs: &[SimConfig]) -> u64 {
    assert!(configs
        .iter()
        .all(|c| c.kv.as_ref().is_some_and(|k| k.prefill)));
    let share = PrefillShare::plan(configs);
    let swept = run_all(configs, 2, &|_| {});
    for (cfg, swept) in configs.iter().zip(swept) {
        let alone = as_json(&run(cfg).expect("the run alone"));
        let shared = run_sharing(cfg, Some(&share)).expect("the run from the share");
        assert!(shared.kv.as_ref().is_some_and(|k| k.gets > 0));
        let what = format!("{} on {:?}", cfg.policy, cfg.devices);
        assert_eq!(alone, as_json(&shared), "{what}, shared");
        assert_eq!(
            alone,
            as_json(&swept.expect("the run in the sweep")),
            "{what}, swept"
        );
    }
    assert_eq!(share.pending(), 0, "every front was taken");
    share.copies()
}

#[test]
fn cache_runs_give_the_same_results_from_a_shared_prefill() {
    let policies = policies();
    let configs = sweep(cache_spec(), &policies, KEYS);
    // Every policy on two hierarchies shares a front: all but the last
    // run take a copy.
    let shared_runs = 2 * policies.len() as u64;
    assert_eq!(same_alone_and_shared(&configs), shared_runs - 1);
}

#[test]
fn store_runs_give_the_same_results_from_a_shared_prefill() {
    let policies = ["classic", "nhc", "most"];
    assert_eq!(
        same_alone_and_shared(&sweep(store_spec(), &policies, KEYS)),
        5
    );
}

#[test]
fn a_front_dearer_to_copy_than_to_prefill_is_prefilled_by_each_run() {
    // 500 keys spread over the volume's 2 MiB stretches: more than 4 KiB
    // a key to copy.
    let configs = sweep(cache_spec(), &["classic", "most"], 500);
    assert_eq!(same_alone_and_shared(&configs), 0);
}

#[test]
fn the_share_keeps_a_front_until_its_last_run() {
    let configs = sweep(cache_spec(), &["classic", "nhc"], KEYS);
    let share = PrefillShare::plan(&configs);
    // The four runs of seed 7 share one front; the run of seed 8 has its own.
    assert_eq!(share.pending(), 1);
    for (i, cfg) in configs.iter().enumerate() {
        run_sharing(cfg, Some(&share)).expect("a run");
        let left = if i < 3 { 1 } else { 0 };
        assert_eq!(share.pending(), left, "after run {i}");
    }
    assert_eq!(share.copies(), 3);
}
