//! `tiermux bench`: policies through NBD on emulated devices, measured with
//! fio at rising concurrency, beside the physical limit (each device alone)
//! and the simulator's prediction for the same profiles; and the NBD path
//! alone against `nbdkit file`.
//!
//! The setting is data (`experiments/bench/optane-flash.toml` is the
//! default). Every measurement runs the real server in this process on a
//! background thread and fio as a child process, one after the other, so
//! that the numbers of one run are comparable side by side.

mod config;
mod fio;
mod judge;
mod predict;
mod reference;
mod report;
mod session;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Result};

pub use config::BenchConfig;
pub use report::Report;
use session::fresh_dir;

/// The built-in bench (`experiments/bench/optane-flash.toml`).
pub const DEFAULT_BENCH: &str = include_str!("../../../../experiments/bench/optane-flash.toml");

/// Overrides from the command line.
#[derive(Clone, Debug, Default)]
pub struct BenchOptions {
    /// Where the device files go (default: a directory under /dev/shm).
    pub data_dir: Option<PathBuf>,
    /// Where the report goes.
    pub out: PathBuf,
    /// Levels 1 and the acceptance's high load, shorter runs.
    pub quick: bool,
    /// Replace the file's levels.
    pub levels: Option<Vec<u32>>,
    /// Replace the measured run length, s.
    pub runtime_s: Option<f64>,
    /// Replace the ramp length, s.
    pub ramp_s: Option<f64>,
    /// Skip the comparison against nbdkit.
    pub no_reference: bool,
}

/// Runs the bench and writes `bench.md`, `bench.csv` and `bench.json` to
/// `opts.out`; prints the tables as it goes.
pub fn bench(cfg_text: &str, opts: &BenchOptions) -> Result<Report> {
    let mut cfg = BenchConfig::parse(cfg_text)?;
    if opts.quick {
        cfg.levels = vec![1, cfg.acceptance.high_load_inflight];
        cfg.runtime_s = cfg.runtime_s.min(2.0);
        cfg.ramp_s = cfg.ramp_s.min(2.0);
        for p in &mut cfg.policy {
            p.ramp_s = p.ramp_s.map(|r| r.min(2.0));
        }
        cfg.device_runtime_s = cfg.device_runtime_s.min(1.5);
        if let Some(r) = &mut cfg.reference {
            r.runtime_s = r.runtime_s.min(2.0);
        }
    }
    if let Some(l) = &opts.levels {
        cfg.levels = l.clone();
    }
    if let Some(r) = opts.runtime_s {
        cfg.runtime_s = r;
        cfg.device_runtime_s = r;
        if let Some(rf) = &mut cfg.reference {
            rf.runtime_s = r;
        }
    }
    if let Some(r) = opts.ramp_s {
        cfg.ramp_s = r;
        cfg.device_ramp_s = cfg.device_ramp_s.min(r);
        for p in &mut cfg.policy {
            p.ramp_s = None;
        }
    }
    if opts.no_reference {
        cfg.reference = None;
    }
    cfg.check()?;
    cfg.levels.sort_unstable();
    cfg.levels.dedup();
    check_tools(cfg.reference.is_some())?;
    let data = match &opts.data_dir {
        Some(d) => d.clone(),
        None => {
            let base = if Path::new("/dev/shm").is_dir() {
                PathBuf::from("/dev/shm")
            } else {
                std::env::temp_dir()
            };
            base.join(format!("tiermux-bench-{}", std::process::id()))
        }
    };
    fresh_dir(&data)?;
    let result = session::Session::run(&cfg, &data, opts);
    let _ = std::fs::remove_dir_all(&data);
    result
}

fn check_tools(nbdkit: bool) -> Result<()> {
    let mut tools = vec!["fio"];
    if nbdkit {
        tools.push("nbdkit");
    }
    for t in tools {
        let ok = Command::new(t)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            bail!("`{t}` is not installed: apt install {t} (or bash .ci/run, which installs it); --no-reference skips nbdkit");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::judge::judge;
    use super::report::{Report, Row};
    use super::session::{controller_text, deltas};
    use super::*;
    use tiermux_server::server::LiveStats;

    #[test]
    fn the_default_bench_parses() {
        let cfg = BenchConfig::parse(DEFAULT_BENCH).unwrap();
        assert_eq!(cfg.policy.len(), 2);
        // 65,536 cache blocks / 0.95 = 68,985.3 -> 68,986 blocks.
        assert_eq!(cfg.working_set_bytes(), 68_986 * 4096);
    }

    #[test]
    fn bad_bench_files_name_the_problem() {
        let cases = [
            ("hit_ratio = 0.95", "hit_ratio = 1.5", "hit_ratio"),
            (
                "levels = [1, 2, 4, 8, 16, 32, 64]",
                "levels = [0]",
                "levels",
            ),
            (
                "fast_profile = \"emu-optane\"",
                "fast_profile = \"nope\"",
                "fast_profile",
            ),
            (
                "volume_size = \"1GiB\"",
                "volume_size = \"260MiB\"",
                "volume_size",
            ),
            (
                "baseline = \"classic\"",
                "baseline = \"lru\"",
                "acceptance.baseline",
            ),
            ("read_percent = 95", "read_percent = 150", "read_percent"),
            ("runtime_s = 5.0", "runtime_s = -1", "runtime_s"),
            ("block_size = 4096", "block_size = 1000", "block_size"),
            (
                "cache_size = \"256MiB\"",
                "cache_size = \"lots\"",
                "cache_size",
            ),
            ("ramp_s = 3.0", "ramp_s = 3.0\nbogus = 1", "bogus"),
        ];
        for (from, to, needle) in cases {
            assert!(DEFAULT_BENCH.contains(from), "{from}");
            let text = DEFAULT_BENCH.replacen(from, to, 1);
            let e = BenchConfig::parse(&text)
                .err()
                .unwrap_or_else(|| panic!("{to} accepted"));
            assert!(format!("{e:#}").contains(needle), "{to}: {e:#}");
        }
    }

    #[test]
    fn a_policy_may_ramp_for_its_own_time() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../experiments/bench/tiering.toml"
        ))
        .unwrap();
        let cfg = BenchConfig::parse(&text).unwrap();
        let most = cfg.policy.iter().find(|p| p.label == "MOST").unwrap();
        let nhc = cfg.policy.iter().find(|p| p.label == "NHC").unwrap();
        assert_eq!((most.ramp_s(&cfg), nhc.ramp_s(&cfg)), (120.0, 3.0));
        // Predicted after as long a start, the bench's span measured.
        assert_eq!(
            (most.sim_warmup_s(&cfg), nhc.sim_warmup_s(&cfg)),
            (120.0, 58.0)
        );
        for bad in ["-1.0", "inf", "nan"] {
            let t = text.replacen("ramp_s = 60.0", &format!("ramp_s = {bad}"), 1);
            let e = BenchConfig::parse(&t).expect_err("a bad ramp refused");
            assert!(format!("{e:#}").contains("policy 'HeMem': ramp_s"), "{e:#}");
        }
    }

    fn live(hits: u64, misses: u64, reads: &[u64]) -> LiveStats {
        let mut l = LiveStats::default();
        l.volume.read_hits = hits;
        l.volume.read_misses = misses;
        l.devices = reads
            .iter()
            .map(|&b| tiermux_engine::device::DeviceCounters {
                read_bytes: b,
                ..Default::default()
            })
            .collect();
        l
    }

    #[test]
    fn controller_text_shows_controls_and_dirty_share() {
        let mut l = LiveStats::default();
        assert_eq!(controller_text(&l, &l), "");
        l.controller = vec![
            ("data_admit".into(), 0.0),
            ("load_admit".into(), 0.494),
            ("cached_blocks".into(), 200.0),
            ("dirty_blocks".into(), 25.0),
        ];
        assert_eq!(
            controller_text(&l, &l),
            "data_admit=0.00 load_admit=0.49 dirty=12%"
        );
        l.controller = vec![
            ("offload_ratio".into(), 0.4),
            ("mirrored_segments".into(), 52.0),
            ("latency_perf_us".into(), 851.4),
            ("latency_cap_us".into(), 700.2),
        ];
        assert_eq!(
            controller_text(&l, &l),
            "offload=0.40 mirrored=52 latency=851/700us"
        );
    }

    #[test]
    fn controller_text_shows_what_moved_during_the_run() {
        let mib = (1u64 << 20) as f64;
        let counters = |up: f64, down: f64, mirror: f64| LiveStats {
            controller: vec![
                ("promoted_bytes".into(), up * mib),
                ("demoted_bytes".into(), down * mib),
                ("mirror_bytes".into(), mirror * mib),
            ],
            ..LiveStats::default()
        };
        let start = counters(100.0, 40.0, 6.0);
        assert_eq!(
            controller_text(&start, &counters(112.0, 43.0, 6.0)),
            "moved=12/3MiB"
        );
        assert_eq!(
            controller_text(&start, &counters(100.0, 40.0, 10.0)),
            "moved=0/0MiB mirror_copied=4MiB"
        );
        // A policy that reports no moves shows none.
        assert_eq!(controller_text(&LiveStats::default(), &start), "");
    }

    #[test]
    fn deltas_measure_between_snapshots() {
        let a = live(100, 10, &[1000, 500]);
        let b = live(290, 20, &[4000, 1500]);
        let (hit, share) = deltas(&a, &b);
        assert_eq!(hit, Some(0.95));
        assert_eq!(share, Some(0.25));
        assert_eq!(deltas(&a, &a), (None, None));
    }

    fn row(config: &str, level: u32, ops: f64) -> Row {
        Row {
            section: "policy".into(),
            workload: "read-only".into(),
            config: config.into(),
            inflight: level,
            ops_per_s: ops,
            ..Row::default()
        }
    }

    #[test]
    fn judging_applies_every_bar() {
        let cfg = BenchConfig::parse(DEFAULT_BENCH).unwrap();
        let mut report = Report::default();
        report.limits.insert("read-only".into(), 100.0);
        report.rows = vec![
            row("classic", 1, 10.0),
            row("NHC", 1, 9.6),
            row("classic", 32, 60.0),
            row("NHC", 32, 81.0),
            row("classic", 64, 60.0),
            row("NHC", 64, 85.0),
        ];
        let (lines, ok) = judge(&cfg, &report);
        assert!(ok, "{lines:?}");
        assert_eq!(lines.len(), 3);
        // 1.35x but only 79 % of the limit at 64.
        report.rows[5].ops_per_s = 79.0;
        let (lines, ok) = judge(&cfg, &report);
        assert!(!ok && lines[1].contains("NOT met"), "{lines:?}");
        report.rows[5].ops_per_s = 85.0;
        // 6 % slower at low load.
        report.rows[1].ops_per_s = 9.4;
        assert!(!judge(&cfg, &report).1);
        // 1.25x at 32.
        report.rows[1].ops_per_s = 10.0;
        report.rows[3].ops_per_s = 75.0;
        report.limits.insert("read-only".into(), 90.0);
        assert!(!judge(&cfg, &report).1);
    }
}
