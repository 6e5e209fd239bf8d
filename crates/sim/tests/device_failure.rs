//! A device failing during a simulated run (`[failure]`): TICA and its
//! mirrored baselines lose no acknowledged write whichever cache device
//! fails and whenever, every read after the failure is still checked by
//! the version checker, and caches that keep dirty data in one place
//! report what they lost.

use tiermux_core::rng::Rng;
use tiermux_sim::failure::{FailureResult, FailureSpec};
use tiermux_sim::workload::{Pattern, WorkloadSpec};
use tiermux_sim::{run, ClientSpec, RunResult, SimConfig};

const DURATION_S: f64 = 0.05;

/// A write-heavy skewed workload over `devices`, with `device` failing at
/// `at_s`.
fn config(policy: &str, devices: &[&str], device: usize, at_s: f64, seed: u64) -> SimConfig {
    let middle = devices.len().saturating_sub(2);
    SimConfig {
        devices: devices.iter().map(|d| d.to_string()).collect(),
        policy: policy.into(),
        cache_blocks: 64,
        middle_device_blocks: vec![600; middle],
        workload: WorkloadSpec {
            pattern: Pattern::Zipf { theta: 0.9 },
            working_set_blocks: Some(4000),
            write_ratio: 0.5,
            ..WorkloadSpec::default()
        },
        client: ClientSpec {
            workers: Some(8),
            ..ClientSpec::default()
        },
        duration_s: DURATION_S,
        warmup_s: 0.0,
        seed,
        prefill: false,
        sample_interval_ms: 50.0,
        failure: Some(FailureSpec { device, at_s }),
        ..SimConfig::default()
    }
}

fn failed_run(cfg: &SimConfig) -> (RunResult, FailureResult) {
    let r = run(cfg).unwrap_or_else(|e| panic!("{} {:?}: {e}", cfg.policy, cfg.failure));
    let f = r.failure.clone().expect("the failure happened");
    (r, f)
}

const TICA_DEVICES: [&str; 4] = ["dram", "ro-ssd", "wo-ssd", "sata-870"];
const MIRRORED_DEVICES: [&str; 4] = ["dram", "wo-ssd", "wo-ssd", "sata-870"];

/// 1,008 failure points over TICA's three policies: each cache device in
/// turn, at a random moment of a seeded run. Nothing acknowledged is lost,
/// every read is served (a failed one is tried again elsewhere), and only
/// writes in flight on the device when it fails can fail.
#[test]
fn tica_loses_no_acknowledged_write_when_a_cache_device_fails() {
    let mut points = 0;
    let mut retries = 0;
    for policy in ["tica-ef", "tica-wed", "tica-a"] {
        for device in 0..3 {
            for seed in 0..112u64 {
                let mut rng = Rng::new(seed * 7 + device as u64);
                let at_s = DURATION_S * (0.1 + 0.8 * rng.next_f64());
                let cfg = config(policy, &TICA_DEVICES, device, at_s, seed);
                let (r, f) = failed_run(&cfg);
                let what = format!("{policy}, device {device} at {at_s:.4} s, seed {seed}");
                assert!(f.out_of_service, "{what}: kept in service");
                assert_eq!(f.lost_blocks, 0, "{what}: lost");
                assert_eq!(f.failed_reads, 0, "{what}: reads failed");
                assert!(
                    f.failed_writes <= 8,
                    "{what}: {} writes failed",
                    f.failed_writes
                );
                assert!(r.reads_checked > 100, "{what}: {} reads", r.reads_checked);
                points += 1;
                retries += f.read_retries;
            }
        }
    }
    assert_eq!(points, 1008);
    println!("{points} failure points, {retries} reads tried again");
}

/// uCache, S-RAC and the plain RAID-1 cache as the TICA paper sets them
/// up (a mirrored SSD pair, DRAM holding clean pages) lose nothing either.
#[test]
fn the_mirrored_baselines_lose_nothing() {
    for policy in ["ucache", "s-rac", "raid1"] {
        for device in 0..3 {
            for seed in 0..10u64 {
                let cfg = config(policy, &MIRRORED_DEVICES, device, 0.02, seed);
                let (_, f) = failed_run(&cfg);
                let what = format!("{policy}, device {device}, seed {seed}");
                assert_eq!((f.lost_blocks, f.failed_reads), (0, 0), "{what}");
            }
        }
    }
}

/// Caches whose dirty data has one copy lose it with that copy's device:
/// the run reports the count, and the reads of those blocks fail rather
/// than return older data (the version checker would stop the run).
#[test]
fn single_copy_caches_report_what_they_lose() {
    let hibachi = config("hibachi", &["dram", "optane-905p", "sata-870"], 1, 0.03, 1);
    let mut classic = config("classic", &["optane-905p", "sata-870"], 0, 0.03, 1);
    classic.params.insert("write_mode".into(), "wb".into());
    for cfg in [hibachi, classic] {
        let (r, f) = failed_run(&cfg);
        println!("{}: {f:?}, {} reads checked", cfg.policy, r.reads_checked);
        assert!(f.lost_blocks > 20, "{}: {f:?}", cfg.policy);
        assert!(f.failed_reads > 0, "{}: {f:?}", cfg.policy);
    }
    // Hibachi's DRAM holds clean pages only: losing it loses nothing.
    let dram = config("hibachi", &["dram", "optane-905p", "sata-870"], 0, 0.03, 1);
    let (_, f) = failed_run(&dram);
    assert_eq!((f.lost_blocks, f.failed_reads), (0, 0), "{f:?}");
}

/// The home device failing: what was only there is lost, and the policy
/// cannot take it out of service.
#[test]
fn a_failed_home_device_stays_in_service_and_fails_what_needs_it() {
    let cfg = config("tica-a", &TICA_DEVICES, 3, 0.03, 2);
    let (_, f) = failed_run(&cfg);
    assert!(!f.out_of_service, "{f:?}");
    assert!(f.failed_reads > 0, "{f:?}");
}

#[test]
fn bad_failures_are_named() {
    let base = config("tica-a", &TICA_DEVICES, 0, 0.01, 1);
    let mut far = base.clone();
    far.failure = Some(FailureSpec {
        device: 4,
        at_s: 0.01,
    });
    let e = far.resolve().unwrap_err().to_string();
    assert!(
        e.contains("failure.device") && e.contains("4 devices"),
        "{e}"
    );
    for at_s in [-1.0, DURATION_S, f64::NAN] {
        let mut late = base.clone();
        late.failure = Some(FailureSpec { device: 0, at_s });
        let e = late.resolve().unwrap_err().to_string();
        assert!(e.contains("failure.at_s"), "{e}");
    }
    let toml = "devices = [\"dram\", \"hdd\"]\npolicy = \"classic\"\nfailure = { device = 0, when_s = 1 }\n";
    let e = toml::from_str::<SimConfig>(toml).unwrap_err().to_string();
    assert!(e.contains("when_s"), "{e}");
}
