//! `tiermux trace sweep`: a sweep file gives the rows `tiermux replay`
//! gives for the same traces, and bad files are refused by name.

use std::path::Path;

use crate::common::cli;
use cli::{ok, tiermux, Scratch};

fn fails(dir: &Path, toml: &str) -> String {
    let file = dir.join("bad.toml");
    std::fs::write(&file, toml).unwrap();
    let out = tiermux(&["trace", "sweep", file.to_str().unwrap()]);
    assert!(!out.status.success(), "accepted: {toml}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs the sweep file `toml` from `dir` on two threads, into `dir/out`;
/// returns its `results.csv`.
fn sweep(dir: &Path, toml: &str) -> String {
    let file = dir.join("sweep.toml");
    std::fs::write(&file, toml).unwrap();
    let out = dir.join("out");
    ok(&[
        "trace",
        "sweep",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--threads",
        "2",
    ]);
    std::fs::read_to_string(out.join("results.csv")).unwrap()
}

const SWEEP: &str = r#"
name = "small"
policies = ["hybrid-lru", "hibachi"]
cache_pages = [64, 512]
dram_share = 0.5

[[trace]]
preset = "wdev_0"
set = { requests = 20000, working_set_bytes = 16777216, read_host_cache_pages = 256 }

[[trace]]
label = "streamy"
preset = "wdev_0"
set = { requests = 20000, working_set_bytes = 16777216, read_host_cache_pages = 256, write_sequential_probability = 0.6 }

[[plot]]
name = "write-hit"
x = "cache_pages"
y = "write_hit_pct"
series = "policy"
panels = "trace"
"#;

/// Each row equals `tiermux replay` on the same trace written to a file.
#[test]
fn a_sweep_gives_what_replay_gives() {
    let dir = Scratch::new("rows");
    let csv = sweep(dir.path(), SWEEP);
    assert!(dir.path().join("out/write-hit.svg").exists());
    let rows: Vec<Vec<&str>> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    assert_eq!(rows.len(), 8, "{csv}");
    // The flushed runs' length histogram: its buckets hold every request.
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    assert_eq!(header[12], "runs_len_1", "{csv}");
    assert_eq!(header.last(), Some(&"runs_len_over_256"), "{csv}");
    for r in &rows {
        let in_buckets: u64 = r[12..].iter().map(|v| v.parse::<u64>().unwrap()).sum();
        assert_eq!(in_buckets.to_string(), r[9], "{r:?}");
    }
    let trace = dir.path().join("streamy.msr");
    ok(&[
        "trace",
        "generate",
        trace.to_str().unwrap(),
        "--preset",
        "wdev_0",
        "--set",
        "requests=20000",
        "--set",
        "working_set_bytes=16777216",
        "--set",
        "read_host_cache_pages=256",
        "--set",
        "write_sequential_probability=0.6",
    ]);
    for policy in ["hybrid-lru", "hibachi"] {
        let text = ok(&[
            "replay",
            trace.to_str().unwrap(),
            "--policy",
            policy,
            "--dram-share",
            "0.5",
            "--cache-pages",
            "64,512",
        ]);
        assert!(text.contains("storage write requests by length (pages):"));
        // Columns: size, hit, read, dram, nvram, write, nvram wr, stored,
        // runs, mean run, RAID-5 MB/s.
        for line in text.lines().skip(2).take(2) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let row = rows
                .iter()
                .find(|r| r[0] == "streamy" && r[1] == policy && r[2] == f[0])
                .unwrap_or_else(|| panic!("no row for {policy} at {}", f[0]));
            let close = |a: &str, b: &str| {
                (a.parse::<f64>().unwrap() - b.parse::<f64>().unwrap()).abs() < 0.006
            };
            assert!(
                close(row[3], f[1]) && close(row[7], f[5]),
                "{row:?} vs {line}"
            );
            assert_eq!(row[8], f[7], "stored pages: {row:?} vs {line}");
            assert!(close(row[11], f[10]), "RAID-5: {row:?} vs {line}");
        }
    }
    // The override changes the trace: more stream writes, longer runs.
    let mean_run = |label: &str| -> f64 {
        rows.iter()
            .filter(|r| r[0] == label && r[1] == "hibachi")
            .map(|r| r[10].parse::<f64>().unwrap())
            .sum()
    };
    assert!(mean_run("streamy") > mean_run("wdev_0"));
}

/// The two largest sizes of `experiments/traces/hibachi-presets.toml`, on
/// its ts_0 preset.
const FIG11_LARGE_SIZES: &str = r#"
name = "fig11"
policies = ["hybrid-lru", "hibachi"]
cache_pages = [32768, 65536]
dram_share = 0.5

[[trace]]
preset = "ts_0"

[[plot]]
name = "raid5"
x = "cache_pages"
y = "raid5_mb_per_s"
series = "policy"
"#;

/// The Hibachi paper's Figure 11 at the two largest cache sizes, on the
/// ts_0 preset as `experiments/traces/hibachi-presets.toml` runs it: with
/// each flush one request, as the authors' simulator logs them, Hibachi's
/// mean flushed run and its modelled RAID-5 write throughput are at least
/// 3x Hybrid-LRU's (the paper reports up to 10x), and Hybrid-LRU's
/// requests are single pages.
#[test]
fn hibachi_flushes_write_the_array_three_times_faster_at_large_sizes() {
    let dir = Scratch::new("fig11");
    let csv = sweep(dir.path(), FIG11_LARGE_SIZES);
    // Columns: trace, policy, cache_pages, ..., mean_run_pages (10),
    // raid5_mb_per_s (11).
    let value = |policy: &str, pages: &str, column: usize| -> f64 {
        let row = csv
            .lines()
            .map(|l| l.split(',').collect::<Vec<_>>())
            .find(|r| r[1] == policy && r[2] == pages)
            .unwrap_or_else(|| panic!("no {policy} row at {pages}: {csv}"));
        row[column].parse().unwrap()
    };
    for pages in ["32768", "65536"] {
        assert_eq!(value("hybrid-lru", pages, 10), 1.0, "{csv}");
        assert!(value("hibachi", pages, 10) >= 3.0, "{csv}");
        let raid5 = value("hibachi", pages, 11) / value("hybrid-lru", pages, 11);
        assert!(raid5 >= 3.0, "RAID-5 {raid5:.2}x at {pages} pages: {csv}");
    }
}

#[test]
fn bad_sweep_files_are_named() {
    let dir = Scratch::new("bad");
    let d = dir.path();
    let base = "name = \"x\"\npolicies = [\"hibachi\"]\ncache_pages = [64]\ndram_share = 0.5\n";
    let err = fails(
        d,
        &format!("{base}colour = 1\n[[trace]]\npreset = \"wdev_0\"\n"),
    );
    assert!(err.contains("unknown field `colour`"), "{err}");
    let err = fails(
        d,
        &format!("{base}[[trace]]\npreset = \"wdev_0\"\npath = \"t.msr\"\n"),
    );
    assert!(
        err.contains("trace 1: give exactly one of 'preset' and 'path'"),
        "{err}"
    );
    let err = fails(
        d,
        "name = \"x\"\npolicies = [\"nope\"]\ncache_pages = [64]\n[[trace]]\npreset = \"wdev_0\"\n",
    );
    assert!(err.contains("policy 'nope'"), "{err}");
    let err = fails(
        d,
        &format!("{base}[[trace]]\npreset = \"wdev_0\"\nset = {{ colour = 2 }}\n"),
    );
    assert!(
        err.contains("trace 'wdev_0'") && err.contains("unknown trace parameter 'colour'"),
        "{err}"
    );
    let err = fails(d, &format!("{base}[[trace]]\npath = \"missing.msr\"\n"));
    assert!(err.contains("missing.msr"), "{err}");
    let err = fails(
        d,
        &format!("{base}[[trace]]\npreset = \"wdev_0\"\n[[plot]]\nname = \"p\"\nx = \"cache_pages\"\ny = \"speed\"\n"),
    );
    assert!(err.contains("speed"), "{err}");
    let err = fails(
        d,
        &format!(
            "{}[[trace]]\npreset = \"wdev_0\"\n",
            base.replace("[64]", "[0]")
        ),
    );
    assert!(
        err.contains("cache_pages: sizes must be at least 1"),
        "{err}"
    );
}

/// Every trace sweep the project ships loads: its keys, policies and
/// plots check out (the traces are generated only when it runs).
#[test]
fn every_shipped_trace_sweep_loads() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/traces");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let out = tiermux(&["trace", "sweep", path.to_str().unwrap(), "--check"]);
            assert!(
                out.status.success(),
                "{}: {}",
                path.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            seen += 1;
        }
    }
    assert!(seen >= 2, "{seen} trace sweeps");
}
