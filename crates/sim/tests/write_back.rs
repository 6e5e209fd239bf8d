//! A write-back cache keeps its dirty data between the watermarks: once
//! dirty blocks pass the high watermark it flushes the coldest until they
//! are down to the low one, and then lets them grow again.

use tiermux_sim::workload::{Pattern, WorkloadSpec};
use tiermux_sim::{run, ClientSpec, SimConfig};

const CACHE_BLOCKS: u64 = 4_000;
const HIGH: f64 = 0.5;
const LOW: f64 = 0.3;
const FLUSH_MAX_INFLIGHT: i64 = 8;

#[test]
fn write_back_flushes_between_its_watermarks() {
    let mut cfg = SimConfig {
        devices: vec!["optane-905p".into(), "flash-970pro".into()],
        policy: "classic".into(),
        cache_blocks: CACHE_BLOCKS,
        workload: WorkloadSpec {
            pattern: Pattern::Uniform,
            working_set_blocks: Some(CACHE_BLOCKS * 9 / 10),
            write_ratio: 0.3,
            ..WorkloadSpec::default()
        },
        client: ClientSpec {
            workers: Some(4),
            ..ClientSpec::default()
        },
        duration_s: 2.0,
        warmup_s: 0.2,
        sample_interval_ms: 20.0,
        ..SimConfig::default()
    };
    for (key, value) in [
        ("write_mode", toml::Value::String("wb".into())),
        ("dirty_high_ratio", toml::Value::Float(HIGH)),
        ("dirty_low_ratio", toml::Value::Float(LOW)),
        (
            "flush_max_inflight",
            toml::Value::Integer(FLUSH_MAX_INFLIGHT),
        ),
    ] {
        cfg.params.insert(key.into(), value);
    }
    let r = run(&cfg).unwrap();
    let dirty: Vec<f64> = r
        .samples
        .iter()
        .filter(|s| {
            eprintln!("t {:.2} {:?}", s.t_s, s.controller);
            s.t_s > 0.5
        })
        .map(|s| {
            let (_, v) = s
                .controller
                .iter()
                .find(|(k, _)| k == "dirty_blocks")
                .expect("classic caching reports its dirty blocks");
            *v
        })
        .collect();
    let (min, max) = dirty
        .iter()
        .fold((f64::MAX, 0.0f64), |(lo, hi), &d| (lo.min(d), hi.max(d)));
    println!(
        "{} samples, dirty blocks {min}..{max}, flushed {} bytes",
        dirty.len(),
        r.devices[1].flushed_bytes
    );
    assert!(dirty.len() > 50, "{} samples", dirty.len());
    let cap = CACHE_BLOCKS as f64;
    // Flushes in flight are counted clean as they start; writes in
    // flight may dirty a few more than the watermark.
    let slack = (FLUSH_MAX_INFLIGHT + 4) as f64;
    assert!(max <= HIGH * cap + slack, "dirty up to {max}");
    assert!(min >= LOW * cap - slack, "dirty down to {min}");
    assert!(
        max >= HIGH * cap - slack,
        "dirty never reached the high watermark: {max}"
    );
    // Flushing ran, in many rounds (each takes the dirty data from the
    // high watermark to the low one: 800 blocks).
    let block_bytes = 4096.0;
    let rounds = r.devices[1].flushed_bytes as f64 / block_bytes / ((HIGH - LOW) * cap);
    assert!(rounds > 3.0, "{rounds} rounds of flushing");
}
