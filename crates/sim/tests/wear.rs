//! What a run reports for the TICA paper's questions, against numbers
//! derived by hand: the cache write amplification (equation 1), SSD
//! lifetimes, and response times by operation (its Fig. 6).

use tiermux_sim::workload::{Pattern, WorkloadSpec};
use tiermux_sim::{run, ClientSpec, RunResult, SimConfig};

const BLOCK_BYTES: u64 = 4096;
const SSD_BLOCKS: u64 = 4000;

fn writes_only(policy: &str, devices: [&str; 4], write_ratio: f64) -> RunResult {
    let cfg = SimConfig {
        devices: devices.iter().map(|d| d.to_string()).collect(),
        policy: policy.into(),
        cache_blocks: 100,
        middle_device_blocks: vec![SSD_BLOCKS; 2],
        workload: WorkloadSpec {
            pattern: Pattern::Uniform,
            working_set_blocks: Some(2000),
            write_ratio,
            ..WorkloadSpec::default()
        },
        client: ClientSpec {
            workers: Some(4),
            ..ClientSpec::default()
        },
        duration_s: 0.2,
        warmup_s: 0.05,
        prefill: false,
        ..SimConfig::default()
    };
    run(&cfg).unwrap()
}

/// uCache writes every client write to both SSDs of its mirror and
/// nothing else when nothing is read: CWAF is exactly 2 (equation 1 by
/// hand). Each SSD's lifetime is Table 1's endurance times the capacity
/// the run gives it over the bytes written to it a year.
#[test]
fn a_mirrored_write_only_cache_amplifies_writes_twice() {
    let r = writes_only("ucache", ["dram", "wo-ssd", "wo-ssd", "hdd"], 1.0);
    assert!(r.requests > 1000, "{}", r.requests);
    assert_eq!(r.cwaf, Some(2.0), "{:?}", r.cwaf);
    let year_s = 8760.0 * 3600.0;
    let capacity_gb = (SSD_BLOCKS * BLOCK_BYTES) as f64 / 1e9;
    for d in &r.devices[1..3] {
        let per_year_gb = d.written_bytes as f64 / 1e9 * year_s / r.measured_s;
        let by_hand = 6416.0 * capacity_gb / per_year_gb;
        let ours = d.lifetime_years.expect("a WO-SSD has an endurance");
        assert!((ours / by_hand - 1.0).abs() < 1e-12, "{ours} vs {by_hand}");
    }
    assert_eq!(r.devices[0].lifetime_years, None, "DRAM does not wear out");
    assert_eq!(r.devices[3].lifetime_years, None, "no endurance given");
    let shortest = r.devices[1..3]
        .iter()
        .filter_map(|d| d.lifetime_years)
        .fold(f64::INFINITY, f64::min);
    assert_eq!(r.ssd_lifetime_years, Some(shortest));
}

/// Reads add no SSD writes under TICA-EF (DRAM victims are dropped): each
/// client write reaches WO once and RO at most once (a page rewritten in
/// DRAM before it moves is copied to RO once), so CWAF is at most 2.
#[test]
fn tica_ef_adds_no_ssd_writes_for_reads() {
    let r = writes_only("tica-ef", ["dram", "ro-ssd", "wo-ssd", "hdd"], 0.3);
    let cwaf = r.cwaf.expect("SSDs and client writes");
    assert!(cwaf > 1.0 && cwaf <= 2.0, "{cwaf}");
    let (ro, wo) = (&r.devices[1], &r.devices[2]);
    assert!(ro.written_bytes <= wo.written_bytes);
    assert!(ro.lifetime_years.is_some() && wo.lifetime_years.is_some());
}

/// Response times by operation: one client over a single write-back SSD
/// cache holding the whole working set, so each read is one SSD read and
/// each write one SSD write, at the QD1 latencies MOST Table 1 gives the
/// SATA SSD (104 µs read; 40 µs write, assumed in the profile). The
/// prefill places `prefill_blocks` items, not only the first device's.
#[test]
fn response_times_are_reported_by_operation() {
    let single = SimConfig {
        devices: vec!["wo-ssd".into(), "hdd".into()],
        policy: "classic".into(),
        cache_blocks: 20_000,
        params: [("write_mode".to_string(), toml::Value::from("wb"))].into(),
        workload: WorkloadSpec {
            working_set_blocks: Some(15_000),
            write_ratio: 0.5,
            ..WorkloadSpec::default()
        },
        duration_s: 0.5,
        warmup_s: 0.0,
        ..SimConfig::default()
    };
    let mut one = single;
    one.client.workers = Some(1);
    let r = run(&one).unwrap();
    assert_eq!(r.hit_ratio, 1.0);
    let read_us = r.read_mean_latency_us.expect("reads");
    let write_us = r.write_mean_latency_us.expect("writes");
    assert!((read_us - 104.0).abs() < 1e-6, "{read_us}");
    assert!((write_us - 40.0).abs() < 1e-6, "{write_us}");

    let mirrored = |prefill_blocks| SimConfig {
        devices: vec![
            "dram".into(),
            "wo-ssd".into(),
            "wo-ssd".into(),
            "hdd".into(),
        ],
        policy: "raid1".into(),
        cache_blocks: 1000,
        middle_device_blocks: vec![20_000; 2],
        params: Default::default(),
        prefill_blocks,
        ..one.clone()
    };
    let cold = run(&mirrored(None)).unwrap();
    let warm = run(&mirrored(Some(15_000))).unwrap();
    assert!(cold.hit_ratio < 0.5, "{}", cold.hit_ratio);
    assert_eq!(warm.hit_ratio, 1.0);
    assert!((warm.write_mean_latency_us.expect("writes") - 40.0).abs() < 1e-6);
}

/// MOST §4.2's lifetime under migration, per device: with Colloid moving
/// the hot set between the P4800X (30 DWPD over 5 years) and the 960
/// (0.37 over 3), each device's lifetime is its endurance over its rated
/// plus its migration drive writes per day, by hand from the run's
/// migrated bytes; and both devices did take migration writes. (The
/// capacities are whole 2 MiB segments, which tiering keeps.)
#[test]
fn migration_lifetimes_follow_the_ratings_and_the_migrated_bytes() {
    let cfg = SimConfig {
        devices: vec!["optane-p4800x".into(), "nvme-pcie3".into()],
        policy: "colloid".into(),
        cache_blocks: 2048,
        volume_blocks: Some(4096),
        workload: WorkloadSpec {
            pattern: Pattern::Hotset {
                hot_fraction: 0.2,
                hot_access_fraction: 0.9,
            },
            working_set_blocks: Some(4096),
            ..WorkloadSpec::default()
        },
        client: ClientSpec {
            workers: Some(64),
            ..ClientSpec::default()
        },
        duration_s: 3.0,
        warmup_s: 0.0,
        ..SimConfig::default()
    };
    let r = run(&cfg).unwrap();
    for (d, (dwpd_rated, years)) in r.devices.iter().zip([(30.0, 5.0), (0.37, 3.0)]) {
        assert!(d.migrated_bytes > 0, "{}: nothing migrated", d.name);
        let capacity_bytes = if d.name == "optane-p4800x" {
            cfg.cache_blocks
        } else {
            4096
        } * BLOCK_BYTES;
        let dwpd = d.migrated_bytes as f64 * 86_400.0 / r.measured_s / capacity_bytes as f64;
        assert!(
            (d.migration_dwpd.unwrap() / dwpd - 1.0).abs() < 1e-9,
            "{}: {:?} vs {dwpd}",
            d.name,
            d.migration_dwpd
        );
        let by_hand = years * dwpd_rated / (dwpd_rated + dwpd);
        let ours = d.migration_lifetime_years.unwrap();
        assert!(
            (ours / by_hand - 1.0).abs() < 1e-9,
            "{}: {ours} vs {by_hand}",
            d.name
        );
        assert!(ours < years, "{}", d.name);
    }
}
