//! Helpers shared by the tests that run the experiment files users run.

use std::collections::BTreeMap;
use std::path::Path;

use tiermux_sim::experiment::{cell, run_all, Experiment};
use tiermux_sim::RunResult;

/// The runs of experiment `file` whose swept values satisfy `keep`, with
/// their results, keyed by the swept values (`key=value` pairs).
pub fn run_file(
    file: &str,
    keep: &dyn Fn(&BTreeMap<String, String>) -> bool,
) -> Vec<(BTreeMap<String, String>, RunResult)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../experiments")
        .join(file);
    let exp = Experiment::load(&path).unwrap();
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
            selected.push((key, cfg.clone()));
        }
    }
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
