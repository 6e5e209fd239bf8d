//! Orthus Figure 3: the simulator with fixed-rate devices reproduces the
//! paper's analytical model, equations (2), (7), (8) and (9), within 1 %,
//! over the figure's four device ratios, for caching and splitting at
//! concurrency 1 and "many".
//!
//! The model's inputs are the hit rate H and the split rate S; we evaluate
//! the equations at the H and S the run realized (read hit ratio; fraction of
//! requests served by the fast device), so the check isolates the timing.
//! The realized rates are checked against the nominal ones too, within
//! their statistical error, so a routing error cannot hide behind them.

use tiermux_sim::workload::WorkloadSpec;
use tiermux_sim::{run, ClientSpec, SimConfig};

const R_HI: f64 = 100.0;
const R_LO: [f64; 4] = [1.0, 10.0, 50.0, 100.0];
/// "Many": enough workers that the bottleneck device never idles.
const MANY: u32 = 64;

fn cfg(policy: &str, r_lo: f64, workers: u32, expected_ops_per_s: f64) -> SimConfig {
    // Concurrency 1 is exact given the realized mix; "many" needs the
    // queues to settle first (half the run is warm-up).
    let requests = if workers == 1 { 6_000.0 } else { 40_000.0 };
    let duration_s = requests / expected_ops_per_s;
    SimConfig {
        devices: vec![format!("fixed:{R_HI}"), format!("fixed:{r_lo}")],
        policy: policy.into(),
        cache_blocks: 1000,
        client: ClientSpec {
            workers: Some(workers),
            ..ClientSpec::default()
        },
        duration_s,
        warmup_s: duration_s * if workers == 1 { 0.1 } else { 0.5 },
        sample_interval_ms: duration_s * 1e3,
        ..SimConfig::default()
    }
}

fn b_cache_1(h: f64, hi: f64, lo: f64) -> f64 {
    hi * lo / (h * lo + (1.0 - h) * (hi + lo))
}
fn b_cache_many(h: f64, hi: f64, lo: f64) -> f64 {
    1.0 / ((1.0 - h) / lo).max(1.0 / hi)
}
fn b_split_1(s: f64, hi: f64, lo: f64) -> f64 {
    1.0 / ((1.0 - s) / lo + s / hi)
}
fn b_split_many(s: f64, hi: f64, lo: f64) -> f64 {
    1.0 / ((1.0 - s) / lo).max(s / hi)
}

/// Checks that a realized rate is the nominal one within `sigmas` standard
/// errors: `draws` independent choices, each `nominal` likely, of which
/// `pool` distinct items decide (a split hashes each of a fixed set of
/// blocks once, then requests sample those blocks).
fn check_rate(label: &str, realized: f64, nominal: f64, draws: f64, pool: f64) {
    let var = nominal * (1.0 - nominal) * (1.0 / draws + 1.0 / pool);
    let bound = 4.0 * var.sqrt() + 1e-12;
    assert!(
        (realized - nominal).abs() <= bound,
        "{label}: realized rate {realized:.5}, nominal {nominal} (allowed ±{bound:.5}, 4 standard errors)"
    );
}

fn check(label: &str, got: f64, want: f64, worst: &mut f64) {
    let err = (got - want).abs() / want;
    *worst = worst.max(err);
    assert!(
        err < 0.01,
        "{label}: simulated {got:.4} ops/s, model {want:.4} ({:.2} % off)",
        err * 100.0
    );
}

#[test]
fn caching_matches_equations_2_and_7() {
    let mut worst: f64 = 0.0;
    for lo in R_LO {
        for h in [0.2, 0.5, 0.8, 0.9, 0.95, 1.0] {
            for workers in [1, MANY] {
                let want0 = if workers == 1 {
                    b_cache_1(h, R_HI, lo)
                } else {
                    b_cache_many(h, R_HI, lo)
                };
                let mut c = cfg("classic", lo, workers, want0);
                // The model's miss installs the block before completing.
                c.params
                    .insert("fill".into(), toml::Value::String("sync".into()));
                c.workload = WorkloadSpec {
                    hit_ratio: Some(h),
                    ..WorkloadSpec::default()
                };
                let r = run(&c).unwrap();
                let hm = r.hit_ratio;
                // Each read hits with probability H, drawn independently.
                let label = format!("cache 100:{lo} H={h} N={workers}");
                check_rate(&label, hm, h, r.requests as f64, f64::INFINITY);
                let want = if workers == 1 {
                    b_cache_1(hm, R_HI, lo)
                } else {
                    b_cache_many(hm, R_HI, lo)
                };
                check(
                    &format!("cache 100:{lo} H={h} N={workers}"),
                    r.throughput_ops_per_s,
                    want,
                    &mut worst,
                );
            }
        }
    }
    eprintln!("caching: worst error {:.3} %", worst * 100.0);
}

#[test]
fn splitting_matches_equations_8_and_9() {
    let mut worst: f64 = 0.0;
    for lo in R_LO {
        for s in [0.0, 0.2, 0.5, 0.8, 0.9, 1.0] {
            for workers in [1, MANY] {
                let want0 = if workers == 1 {
                    b_split_1(s, R_HI, lo)
                } else {
                    b_split_many(s, R_HI, lo)
                };
                let mut c = cfg("split", lo, workers, want0);
                c.params.insert("split_rate".into(), toml::Value::Float(s));
                c.workload = WorkloadSpec {
                    working_set_blocks: Some(100_000),
                    ..WorkloadSpec::default()
                };
                let r = run(&c).unwrap();
                let sm = r.devices[0].ops_per_s / r.throughput_ops_per_s;
                let label = format!("split 100:{lo} S={s} N={workers}");
                check_rate(&label, sm, s, r.requests as f64, 100_000.0);
                let want = if workers == 1 {
                    b_split_1(sm, R_HI, lo)
                } else {
                    b_split_many(sm, R_HI, lo)
                };
                check(
                    &format!("split 100:{lo} S={s} N={workers}"),
                    r.throughput_ops_per_s,
                    want,
                    &mut worst,
                );
            }
        }
    }
    eprintln!("splitting: worst error {:.3} %", worst * 100.0);
}
