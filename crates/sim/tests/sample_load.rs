//! A time-series sample reports the load offered over its interval, as it
//! reports the throughput of that interval: a load step inside an interval
//! shows as the time-weighted mean of the two loads, and a step on an
//! interval's end belongs to the next sample.

use tiermux_sim::workload::Schedule;
use tiermux_sim::{run, ClientSpec, SimConfig};

#[test]
fn a_sample_reports_the_mean_load_of_its_interval() {
    let cfg = SimConfig {
        devices: vec!["fixed:100".into(), "fixed:10".into()],
        policy: "classic".into(),
        cache_blocks: 1000,
        client: ClientSpec {
            workers: Some(8),
            // 16 workers from 1.5 s, 8 again from 2.0 s (a sample's end),
            // 4 from 3.25 s.
            schedule: Schedule::Steps {
                times_s: vec![1.5, 2.0, 3.25],
                factors: vec![2.0, 1.0, 0.5],
            },
            ..ClientSpec::default()
        },
        duration_s: 4.0,
        warmup_s: 1.0,
        sample_interval_ms: 1000.0,
        ..SimConfig::default()
    };
    let r = run(&cfg).expect("run");
    let loads: Vec<(f64, f64)> = r.samples.iter().map(|s| (s.t_s, s.load)).collect();
    // Per 1 s interval:
    // 8; 0.5 × 8 + 0.5 × 16 = 12; 8; 0.25 × 8 + 0.75 × 4 = 5.
    assert_eq!(loads, vec![(1.0, 8.0), (2.0, 12.0), (3.0, 8.0), (4.0, 5.0)]);
}
