//! MOST Figure 7d (`experiments/most-fig7d-cleaning.toml`): reads with
//! write spikes every 0.1, 1 and 30 s over hot data. Under the scaled
//! migration cap, cleaning every unclean mirrored segment spends the cap
//! on segments the next 0.1 s spike dirties again, so the class ends less
//! clean than with MOST's selective cleaning, which skips segments written
//! about as often as they are read; no cleaning leaves it least clean.
//! Capped, cleaning costs no throughput.
//!
//! The file's capped runs cut short: 100 s, the last 30 measured (the
//! mirrored class is built by then).

mod common;
use common::{get, run_file_with, sampled_mean_after};

const FILE: &str = "most-fig7d-cleaning.toml";

#[test]
fn selective_cleaning_keeps_the_mirror_cleaner_for_the_same_capped_bytes() {
    let runs = run_file_with(
        FILE,
        &|k| get(k, "params.migrate_mb_per_s") == "1.0",
        &|cfg| {
            cfg.duration_s = 100.0;
            cfg.warmup_s = 70.0;
        },
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
