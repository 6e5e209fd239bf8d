//! MOST Figure 7d (`experiments/most-fig7d-cleaning.toml`): reads with
//! write spikes every 0.1, 1 and 30 s over hot data. Under the scaled
//! migration cap, cleaning every unclean mirrored segment spends the cap
//! on segments the next 0.1 s spike dirties again, so the class ends less
//! clean than with MOST's selective cleaning, which skips segments written
//! about as often as they are read; no cleaning leaves it least clean.
//! Capped, cleaning costs no throughput.
//!
//! Unscaled, selective cleaning copies a fraction of what cleaning every
//! segment copies, and leaves the class only a few points less clean (the
//! paper: "only a 5% increase in the clean block percentage" for cleaning
//! everything); it does so because a segment's rewrite distance comes from
//! counters that are never cooled (MOST Table 3). From HeMem's cooled
//! counts, the 0.1 s group's writes are forgotten within a few coolings and
//! selective cleaning copies nearly as much as cleaning everything.
//!
//! The file's runs cut short: 100 s, the last 30 measured (the mirrored
//! class is built by then).

use crate::common;
use common::{get, run_file_with, run_selected, sampled, sampled_mean_after, select_runs};
use tiermux_sim::{RunResult, SimConfig};

const FILE: &str = "most-fig7d-cleaning.toml";

/// The file's run cut to 100 s, the last 30 s measured.
fn shortened(cfg: &mut SimConfig) {
    cfg.duration_s = 100.0;
    cfg.warmup_s = 70.0;
}

/// Bytes cleaning copied in the measured 30 s.
fn cleaned_after_70_s(r: &RunResult) -> f64 {
    let at = |t_s: f64| {
        let s = r.samples.iter().rfind(|s| s.t_s <= t_s).unwrap();
        sampled(s, "cleaned_bytes")
    };
    at(100.0) - at(70.0)
}

#[test]
fn selective_cleaning_keeps_the_mirror_cleaner_for_the_same_capped_bytes() {
    let runs = run_file_with(
        FILE,
        &|k| get(k, "params.migrate_mb_per_s") == "1.0",
        &shortened,
    );
    assert_eq!(runs.len(), 3);
    let measured = |cleaning: &str| {
        let (_, r) = runs
            .iter()
            .find(|(k, _)| get(k, "params.cleaning") == cleaning)
            .unwrap_or_else(|| panic!("no run with cleaning = {cleaning}"));
        let clean = sampled_mean_after(r, "mirrored_clean_share", 70.0);
        (clean, r.throughput_ops_per_s)
    };
    let (selective, all, off) = (measured("selective"), measured("all"), measured("off"));
    assert!(
        selective.0 > all.0 && all.0 > off.0,
        "clean shares: selective {:.3}, all {:.3}, off {:.3}",
        selective.0,
        all.0,
        off.0
    );
    // The spikes leave part of the class unclean whatever the cleaning.
    assert!(selective.0 < 0.95, "selective {:.3}", selective.0);
    for (name, (_, tput)) in [("all", all), ("off", off)] {
        let ratio = tput / selective.1;
        assert!(
            (ratio - 1.0).abs() < 0.01,
            "{name}: {ratio:.4} of selective cleaning's throughput"
        );
    }
}

#[test]
fn unscaled_selective_cleaning_skips_the_often_written_segments() {
    let unscaled = |k: &std::collections::BTreeMap<String, String>| {
        get(k, "params.migrate_mb_per_s") == "1000.0" && get(k, "params.cleaning") != "off"
    };
    // The three runs share the test's two threads.
    let mut selected = select_runs(FILE, &unscaled, &shortened);
    let lifetime_runs = selected.len();
    selected.extend(select_runs(
        FILE,
        &|k| unscaled(k) && get(k, "params.cleaning") == "selective",
        &|cfg| {
            shortened(cfg);
            cfg.params.insert(
                "rewrite_counters".into(),
                toml::Value::String("cooled".into()),
            );
        },
    ));
    let mut lifetime = run_selected(selected);
    let cooled = lifetime.split_off(lifetime_runs);
    assert_eq!((lifetime.len(), cooled.len()), (2, 1));
    let run = |cleaning: &str| {
        &lifetime
            .iter()
            .find(|(k, _)| get(k, "params.cleaning") == cleaning)
            .unwrap()
            .1
    };
    let (selective, all) = (run("selective"), run("all"));
    let (copied_selective, copied_all) = (cleaned_after_70_s(selective), cleaned_after_70_s(all));
    let copied_cooled = cleaned_after_70_s(&cooled[0].1);
    assert!(
        copied_selective < 0.25 * copied_all,
        "selective copied {copied_selective:.3e} bytes, all {copied_all:.3e}"
    );
    assert!(
        copied_cooled > 0.75 * copied_all,
        "from cooled counts selective copied {copied_cooled:.3e} bytes, all {copied_all:.3e}"
    );
    let clean = |r: &RunResult| sampled_mean_after(r, "mirrored_clean_share", 70.0);
    let gain = clean(all) - clean(selective);
    assert!(
        (0.0..0.1).contains(&gain),
        "cleaning everything: {:.3} clean against selective's {:.3}",
        clean(all),
        clean(selective)
    );
}
