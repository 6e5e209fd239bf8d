//! The simulator merges the device operations it is handed together, as
//! the engine does (`tiermux_core::dispatch::merge`): a request of
//! consecutive blocks on one device is one request to the device model,
//! timed at its size, while the version checker still sees every block;
//! operations that merge with nothing are timed as before.

use tiermux_sim::failure::FailureSpec;
use tiermux_sim::workload::{Pattern, WorkloadSpec};
use tiermux_sim::{run, ClientSpec, RunResult, SimConfig};

/// Closed-loop clients issuing requests of `request_blocks` blocks over
/// `devices` under `policy`.
fn config(policy: &str, devices: &[&str], request_blocks: u32, write_ratio: f64) -> SimConfig {
    SimConfig {
        devices: devices.iter().map(|d| d.to_string()).collect(),
        policy: policy.into(),
        cache_blocks: 2048,
        workload: WorkloadSpec {
            pattern: Pattern::Uniform,
            working_set_blocks: Some(16_384),
            write_ratio,
            request_blocks,
            ..WorkloadSpec::default()
        },
        client: ClientSpec {
            workers: Some(8),
            ..ClientSpec::default()
        },
        duration_s: 0.2,
        warmup_s: 0.0,
        seed: 7,
        prefill: false,
        ..SimConfig::default()
    }
}

fn checked_run(cfg: &SimConfig) -> RunResult {
    run(cfg).unwrap_or_else(|e| panic!("{} {}: {e}", cfg.policy, cfg.workload.request_blocks))
}

/// Bytes per operation the device `d` served.
fn bytes_per_op(r: &RunResult, d: usize) -> f64 {
    r.devices[d].bytes_per_s / r.devices[d].ops_per_s
}

/// Pass-through to the home device: every 16-block request is one device
/// request of 64 KiB,
/// and a Flash SSD serves those faster than sixteen 4 KiB requests each
/// (its large-transfer bandwidth, not its 4 KiB IOPS, bounds them).
#[test]
fn a_request_of_consecutive_blocks_is_one_device_request() {
    let devices = ["optane-905p", "flash-970pro"];
    let one = checked_run(&config("passthrough", &devices, 1, 0.0));
    let sixteen = checked_run(&config("passthrough", &devices, 16, 0.0));
    assert_eq!(one.merged_device_requests, 0, "single blocks never merge");
    assert_eq!(bytes_per_op(&one, 1), 4096.0);
    assert_eq!(bytes_per_op(&sixteen, 1), 16.0 * 4096.0);
    assert!(sixteen.reads_checked >= 16 * sixteen.requests);
    assert!(
        sixteen.merged_blocks >= 16 * sixteen.requests,
        "{} blocks merged for {} requests",
        sixteen.merged_blocks,
        sixteen.requests
    );
    let ratio = sixteen.throughput_bytes_per_s / one.throughput_bytes_per_s;
    assert!(ratio > 1.2, "64 KiB requests moved {ratio:.2}x the bytes");
}

/// Caching and tiering policies with multi-block reads and writes, under
/// the version checker: every policy's plans still complete block by
/// block inside merged requests (fills, flushes, mirrored writes,
/// migrations), and merged requests do happen.
#[test]
fn merged_requests_keep_every_policy_consistent() {
    let two = ["optane-p4800x", "nvme-pcie3"];
    let tica = ["dram", "ro-ssd", "wo-ssd", "sata-870"];
    let cases: [(&str, &[&str]); 6] = [
        ("classic", &two),
        ("nhc", &two),
        ("most", &two),
        ("hemem", &two),
        ("stripe", &two),
        ("tica-wed", &tica),
    ];
    for (policy, devices) in cases {
        let mut cfg = config(policy, devices, 8, 0.3);
        if devices.len() > 2 {
            cfg.middle_device_blocks = vec![2048; devices.len() - 2];
        }
        let r = checked_run(&cfg);
        assert!(
            r.reads_checked > 1_000,
            "{policy}: {} reads",
            r.reads_checked
        );
        assert!(r.merged_device_requests > 100, "{policy}: nothing merged");
        assert!(r.merged_blocks >= 2 * r.merged_device_requests);
    }
}

/// A cache device failing under multi-block requests: the blocks of a
/// merged request on the dead device fail one by one, and TICA still
/// loses no acknowledged write.
#[test]
fn a_merged_request_on_a_failed_device_fails_its_blocks() {
    let devices = ["dram", "ro-ssd", "wo-ssd", "sata-870"];
    for device in 0..3 {
        let mut cfg = config("tica-ef", &devices, 8, 0.5);
        cfg.middle_device_blocks = vec![2048; 2];
        cfg.failure = Some(FailureSpec { device, at_s: 0.1 });
        let r = checked_run(&cfg);
        let f = r.failure.clone().expect("the failure happened");
        assert_eq!(f.lost_blocks, 0, "device {device}: {f:?}");
        assert!(r.merged_device_requests > 0, "device {device}");
    }
}
