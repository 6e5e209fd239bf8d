//! Orthus Figure 7's whole grid, from the experiment file users run: five
//! hierarchies, 95 % and 80 % hits, Load 0.5 to 2.0, and the real
//! hierarchies again with the paper's NHC settings. NHC is never more than
//! 3 % below classic caching anywhere in it, and with the paper's settings
//! at Load-0.5 it is within 3 % of classic caching either way ("when load
//! is light (e.g., Load-0.5) ... NHC does not bypass any load and behaves
//! the same as classic caching").

use std::path::Path;

use tiermux_sim::experiment::{cell, run_all, Experiment};

#[test]
fn nhc_is_never_more_than_3_percent_below_classic() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../experiments/orthus-fig7-hierarchies.toml");
    let exp = Experiment::load(&file).unwrap();
    let configs: Vec<_> = exp.runs.iter().map(|(_, c)| c.clone()).collect();
    let results = run_all(&configs, 2, &|_| {});
    let policy_key = exp.keys.iter().position(|k| k == "policy").unwrap();
    // Pair each NHC run with the classic run that differs only in policy.
    let key_of = |swept: &[toml::Value]| -> Vec<String> {
        swept
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != policy_key)
            .map(|(_, v)| cell(v))
            .collect()
    };
    let label_key = exp.keys.iter().position(|k| k == "label").unwrap();
    let load_key = exp.keys.iter().position(|k| k == "client.load").unwrap();
    let mut worst = (f64::INFINITY, String::new());
    let mut light_load = Vec::new();
    let mut pairs = 0;
    for ((swept, cfg), r) in exp.runs.iter().zip(&results) {
        if cfg.policy != "nhc" {
            continue;
        }
        let (_, classic) = exp
            .runs
            .iter()
            .zip(&results)
            .find(|((s, c), _)| c.policy == "classic" && key_of(s) == key_of(swept))
            .map(|((s, _), r)| (s, r.as_ref().unwrap()))
            .expect("a classic run for every NHC run");
        let ratio = r.as_ref().unwrap().throughput_ops_per_s / classic.throughput_ops_per_s;
        pairs += 1;
        if cell(&swept[label_key]) == "paper settings" && cell(&swept[load_key]) == "0.5" {
            light_load.push((ratio, key_of(swept).join(" ")));
        }
        if ratio < worst.0 {
            worst = (ratio, key_of(swept).join(" "));
        }
    }
    eprintln!(
        "Figure 7 grid: {pairs} NHC/classic pairs, worst ratio {:.4} at {}",
        worst.0, worst.1
    );
    assert_eq!(pairs, 64);
    assert!(
        worst.0 >= 0.97,
        "NHC/classic = {:.4} at {}",
        worst.0,
        worst.1
    );
    // Three real hierarchies at two hit ratios.
    assert_eq!(light_load.len(), 6);
    for (ratio, at) in &light_load {
        eprintln!("Load-0.5 with the paper's settings: NHC/classic {ratio:.4} at {at}");
        assert!(
            (ratio - 1.0).abs() <= 0.03,
            "NHC/classic = {ratio:.4} at {at}"
        );
    }
}

/// Every experiment file in the repository parses, with its plots checked
/// against the columns its runs will produce.
#[test]
fn every_experiment_file_parses() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let mut n = 0;
    let files = std::fs::read_dir(&dir)
        .unwrap()
        .chain(std::fs::read_dir(dir.join("kv")).unwrap());
    for entry in files {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let exp = Experiment::load(&path).unwrap_or_else(|e| panic!("{e}"));
            assert!(
                !exp.runs.is_empty() && !exp.plots.is_empty(),
                "{}",
                path.display()
            );
            n += 1;
        }
    }
    assert!(n >= 10, "found {n} experiment files");
}
