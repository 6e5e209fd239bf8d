//! Helpers shared by the tests that run the experiment files users run.

pub mod configs;

use std::collections::BTreeMap;
use std::path::Path;

use tiermux_core::Op;
use tiermux_device::calibrate::closed_loop_throughput;
use tiermux_device::lookup_profile;
use tiermux_sim::experiment::{cell, run_all, Experiment};
use tiermux_sim::sim::Sample;
use tiermux_sim::{RunResult, SimConfig};

/// Experiment `file` of `experiments/`, loaded.
fn experiment(file: &str) -> Experiment {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../experiments")
        .join(file);
    Experiment::load(&path).unwrap()
}

/// The runs of experiment `file` whose swept values satisfy `keep`, with
/// their results, keyed by the swept values (`key=value` pairs).
pub fn run_file(
    file: &str,
    keep: &dyn Fn(&BTreeMap<String, String>) -> bool,
) -> Vec<(BTreeMap<String, String>, RunResult)> {
    run_file_with(file, keep, &|_| {})
}

/// As [`run_file`], each kept run's configuration first changed by
/// `adjust` (a shorter run, say).
pub fn run_file_with(
    file: &str,
    keep: &dyn Fn(&BTreeMap<String, String>) -> bool,
    adjust: &dyn Fn(&mut SimConfig),
) -> Vec<(BTreeMap<String, String>, RunResult)> {
    run_selected(select_runs(file, keep, adjust))
}

/// The configurations of the runs [`run_file_with`] would run, keyed the
/// same way, to be run together with others by [`run_selected`].
pub fn select_runs(
    file: &str,
    keep: &dyn Fn(&BTreeMap<String, String>) -> bool,
    adjust: &dyn Fn(&mut SimConfig),
) -> Vec<(BTreeMap<String, String>, SimConfig)> {
    let exp = experiment(file);
    let mut selected = Vec::new();
    for (swept, cfg) in &exp.runs {
        let mut key: BTreeMap<String, String> = exp
            .keys
            .iter()
            .map(|k| k.replace('"', ""))
            .zip(swept.iter().map(cell))
            .collect();
        key.insert("policy".into(), cfg.policy.clone());
        if keep(&key) {
            let mut cfg = cfg.clone();
            adjust(&mut cfg);
            selected.push((key, cfg));
        }
    }
    selected
}

/// Runs `selected` on two threads; each result beside its key, in order.
pub fn run_selected(
    selected: Vec<(BTreeMap<String, String>, SimConfig)>,
) -> Vec<(BTreeMap<String, String>, RunResult)> {
    let configs: Vec<_> = selected.iter().map(|(_, c)| c.clone()).collect();
    let results = run_all(&configs, 2, &|_| {});
    selected
        .into_iter()
        .zip(results)
        .map(|((k, _), r)| (k, r.unwrap()))
        .collect()
}

/// The swept value `name` of a run's key ("" when not swept).
pub fn get<'a>(k: &'a BTreeMap<String, String>, name: &str) -> &'a str {
    k.get(name).map_or("", |s| s.as_str())
}

/// Each device of experiment `file`'s first run, in its order: its
/// closed-loop 4 KiB throughput at `in_flight` requests, requests per
/// second, reads and writes mixed at `read_share` (time per request adds
/// up), as `tiermux bench` computes its simulated limit.
pub fn device_ops_per_s(file: &str, read_share: f64, in_flight: u32) -> Vec<f64> {
    let exp = experiment(file);
    let cfg = &exp.runs[0].1;
    cfg.devices
        .iter()
        .map(|name| {
            let m = lookup_profile(name, &cfg.profiles)
                .unwrap()
                .model()
                .unwrap();
            let reads = closed_loop_throughput(&m, Op::Read, 4096, in_flight);
            if read_share >= 1.0 {
                return reads;
            }
            let writes = closed_loop_throughput(&m, Op::Write, 4096, in_flight);
            1.0 / (read_share / reads + (1.0 - read_share) / writes)
        })
        .collect()
}

/// The controller value `name` in sample `s`.
pub fn sampled(s: &Sample, name: &str) -> f64 {
    s.controller
        .iter()
        .find(|(k, _)| k == name)
        .unwrap_or_else(|| panic!("no {name} in the samples"))
        .1
}

/// The mean of the controller value `name` over the samples that end
/// after `after_s` (at least 10 of them).
pub fn sampled_mean_after(r: &RunResult, name: &str, after_s: f64) -> f64 {
    let values: Vec<f64> = r
        .samples
        .iter()
        .filter(|s| s.t_s > after_s)
        .map(|s| sampled(s, name))
        .collect();
    assert!(
        values.len() >= 10,
        "{} samples after {after_s} s",
        values.len()
    );
    values.iter().sum::<f64>() / values.len() as f64
}
