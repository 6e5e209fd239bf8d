//! Orthus acceptance figures on the Optane SSD + Flash SSD hierarchy
//! (Figure 7's setting: read-only, uniform, 64 KiB, 95 % hits), plus
//! determinism and golden numbers.

use tiermux_sim::presets::orthus_optane_flash;
use tiermux_sim::{run, RunResult, SimConfig};

fn cfg(policy: &str, load: f64, hit: f64) -> SimConfig {
    orthus_optane_flash(policy, load, hit)
}

fn best_split(load: f64, hit: f64) -> RunResult {
    (1..=20)
        .map(|i| {
            let mut c = cfg("split", load, hit);
            c.params
                .insert("split_rate".into(), toml::Value::Float(i as f64 / 20.0));
            run(&c).unwrap()
        })
        .max_by(|a, b| a.throughput_ops_per_s.total_cmp(&b.throughput_ops_per_s))
        .unwrap()
}

#[test]
fn nhc_beats_classic_at_load_2_and_approaches_best_split() {
    let classic = run(&cfg("classic", 2.0, 0.95)).unwrap();
    let nhc = run(&cfg("nhc", 2.0, 0.95)).unwrap();
    let split = best_split(2.0, 0.95);
    let speedup = nhc.throughput_ops_per_s / classic.throughput_ops_per_s;
    let of_split = nhc.throughput_ops_per_s / split.throughput_ops_per_s;
    eprintln!("Load-2.0: NHC/classic {speedup:.3}, NHC/best split {of_split:.3}");
    // The paper reports +54 %; the best static split is +50 % on our
    // Flash SSD, whose 64 KiB random reads no source gives
    // (docs/reproduction.md, Figure 7).
    // Within 25 % of the paper's gain: 1 + 0.54 x 0.75.
    assert!(speedup >= 1.405, "NHC/classic = {speedup}");
    assert!(of_split >= 0.9, "NHC/best split = {of_split}");
    assert!(nhc.mean_latency_us < classic.mean_latency_us);
}

#[test]
fn nhc_matches_classic_at_load_half() {
    let classic = run(&cfg("classic", 0.5, 0.95)).unwrap();
    let nhc = run(&cfg("nhc", 0.5, 0.95)).unwrap();
    let ratio = nhc.throughput_ops_per_s / classic.throughput_ops_per_s;
    eprintln!("Load-0.5, 95 % hits: NHC/classic {ratio:.4}");
    assert!((ratio - 1.0).abs() <= 0.03, "NHC/classic = {ratio}");
    // At 80 % hits Load-0.5 is already 2 workers, where classic caching's
    // fills contend with hits; NHC may be faster but never 3 % slower.
    let classic = run(&cfg("classic", 0.5, 0.8)).unwrap();
    let nhc = run(&cfg("nhc", 0.5, 0.8)).unwrap();
    let ratio = nhc.throughput_ops_per_s / classic.throughput_ops_per_s;
    eprintln!("Load-0.5, 80 % hits: NHC/classic {ratio:.4}");
    assert!(ratio >= 0.97, "NHC/classic = {ratio}");
}

#[test]
fn nhc_improves_at_80_percent_hits() {
    let classic = run(&cfg("classic", 2.0, 0.8)).unwrap();
    let nhc = run(&cfg("nhc", 2.0, 0.8)).unwrap();
    let ratio = nhc.throughput_ops_per_s / classic.throughput_ops_per_s;
    eprintln!("Load-2.0, 80 % hits: NHC/classic {ratio:.3}");
    assert!(ratio > 1.1, "{ratio}");
}

#[test]
fn runs_are_deterministic_with_golden_numbers() {
    let a = run(&cfg("nhc", 1.0, 0.95)).unwrap();
    let b = run(&cfg("nhc", 1.0, 0.95)).unwrap();
    assert_eq!(a, b);
    let classic = run(&cfg("classic", 1.0, 0.95)).unwrap();
    // Golden numbers copied from our own output: they show only that
    // nothing changed, and change only with a deliberate model change.
    assert_eq!((classic.workers, classic.requests), (3, 35_823));
    assert_eq!(a.workers, 3);
    let mut other_seed = cfg("nhc", 1.0, 0.95);
    other_seed.seed = 2;
    assert_ne!(run(&other_seed).unwrap().requests, a.requests);
}
