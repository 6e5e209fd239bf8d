//! Logs that free space (`workload.discard_chunk_blocks`): bad settings are
//! refused by name, and a discarding log runs every tiering policy with
//! the version checker watching.

use tiermux_sim::experiment::Experiment;
use tiermux_sim::run;

fn experiment(workload: &str, extra: &str) -> String {
    format!(
        "name = \"x\"\n[base]\ndevices = [\"optane-p4800x\", \"nvme-pcie3\"]\npolicy = \"most\"\ncache_blocks = 4096\nduration_s = 0.5\n{extra}\n[base.workload]\nworking_set_blocks = 8192\n{workload}\n"
    )
}

fn refusal(workload: &str, extra: &str) -> String {
    Experiment::parse(&experiment(workload, extra), "log.toml")
        .unwrap_err()
        .to_string()
}

#[test]
fn bad_discard_settings_are_refused_by_name() {
    let hotset = "write_ratio = 1.0\npattern = { kind = \"hotset\", hot_fraction = 0.2, hot_access_fraction = 0.9 }\ndiscard_chunk_blocks = 512";
    let e = refusal(hotset, "");
    assert!(
        e.contains("workload.discard_chunk_blocks") && e.contains("log patterns"),
        "{e}"
    );
    let scrambled = "write_ratio = 1.0\npattern = { kind = \"sequential\" }\nscramble = true\ndiscard_chunk_blocks = 512";
    let e = refusal(scrambled, "");
    assert!(e.contains("workload.scramble"), "{e}");
    let uneven = "write_ratio = 1.0\npattern = { kind = \"sequential\", streams = 3 }\ndiscard_chunk_blocks = 512";
    let e = refusal(uneven, "");
    assert!(
        e.contains("workload.discard_chunk_blocks") && e.contains("3 streams"),
        "{e}"
    );
    let recent = "write_ratio = 0.5\npattern = { kind = \"recent\", hot_fraction = 0.2, hot_access_fraction = 0.9 }\ndiscard_chunk_blocks = 512";
    let e = refusal(recent, "volume_blocks = 8704");
    assert!(
        e.contains("volume_blocks:") && e.contains("whole number of chunks"),
        "{e}"
    );
}

/// Every tiering policy, writing sequential logs and reading the newest
/// data while the logs discard whole segments: the version checker sees
/// every read, and the policies keep running (a discarded segment is a
/// new allocation on its next write).
#[test]
fn discarding_logs_run_every_tiering_policy_checked() {
    for workload in [
        "write_ratio = 1.0\npattern = { kind = \"sequential\", streams = 4 }\ndiscard_chunk_blocks = 512",
        "pattern = { kind = \"recent\", hot_fraction = 0.2, hot_access_fraction = 0.9 }\nwrite_ratio = 0.5\ndiscard_chunk_blocks = 512",
    ] {
        let text = experiment(workload, "prefill = true");
        let text = format!(
            "{text}[[sweep]]\npolicy = [\"hemem\", \"most\", \"batman\", \"colloid+\", \"stripe\"]\n\"client.load\" = [4.0]\n"
        );
        let e = Experiment::parse(&text, "log.toml").unwrap_or_else(|e| panic!("{e}"));
        for (keys, cfg) in &e.runs {
            let r = run(cfg).unwrap_or_else(|e| panic!("{keys:?}: {e}"));
            assert!(r.requests > 10_000, "{keys:?}: {} requests", r.requests);
            if workload.contains("recent") {
                assert!(r.reads_checked > 1_000, "{keys:?}: {} reads", r.reads_checked);
            }
        }
    }
}
