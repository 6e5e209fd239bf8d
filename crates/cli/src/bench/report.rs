//! What a bench run reports: its rows, limits and verdicts, written as
//! `bench.md`, `bench.csv` and `bench.json`.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

/// One measured (or predicted) point.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Row {
    /// "device", "policy" or "reference".
    pub section: String,
    /// Workload name.
    pub workload: String,
    /// Policy label, device name or server.
    pub config: String,
    /// Requests in flight.
    pub inflight: u32,
    /// Requests per second (reads and writes).
    pub ops_per_s: f64,
    /// Mean read latency, µs.
    pub read_mean_us: f64,
    /// 99th percentile read latency, µs.
    pub read_p99_us: f64,
    /// Read hit ratio over the measured run (policies only).
    pub hit_ratio: Option<f64>,
    /// Share of device read bytes that the capacity device served.
    pub slow_read_share: Option<f64>,
    /// Controller variables at the end of the run.
    pub controller: String,
    /// The simulator's prediction, requests per second.
    pub sim_ops_per_s: Option<f64>,
    /// The simulator's mean latency, µs.
    pub sim_mean_us: Option<f64>,
}

/// The whole report of a run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    /// Every point.
    pub rows: Vec<Row>,
    /// Physical limit per workload (sum of the devices' peaks), ops/s.
    pub limits: BTreeMap<String, f64>,
    /// The simulator's physical limit per workload, ops/s.
    pub sim_limits: BTreeMap<String, f64>,
    /// Acceptance verdict lines.
    pub verdicts: Vec<String>,
    /// Whether every bar was met.
    pub passed: bool,
}

pub(super) fn write_report(out: &Path, md: &str, report: &Report) -> Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    std::fs::write(out.join("bench.md"), md)?;
    let mut t = tiermux_report::Table::new(
        [
            "section",
            "workload",
            "config",
            "inflight",
            "ops_per_s",
            "read_mean_us",
            "read_p99_us",
            "hit_ratio",
            "slow_read_share",
            "controller",
            "sim_ops_per_s",
            "sim_mean_us",
        ]
        .map(String::from)
        .to_vec(),
        ["section", "workload", "config", "inflight"]
            .map(String::from)
            .to_vec(),
    );
    let o = |x: Option<f64>| x.map(|v| format!("{v}")).unwrap_or_default();
    for r in &report.rows {
        t.rows.push(vec![
            r.section.clone(),
            r.workload.clone(),
            r.config.clone(),
            r.inflight.to_string(),
            format!("{}", r.ops_per_s),
            format!("{}", r.read_mean_us),
            format!("{}", r.read_p99_us),
            o(r.hit_ratio),
            o(r.slow_read_share),
            r.controller.clone(),
            o(r.sim_ops_per_s),
            o(r.sim_mean_us),
        ]);
    }
    std::fs::write(out.join("bench.csv"), t.to_csv())?;
    std::fs::write(
        out.join("bench.json"),
        serde_json::to_string_pretty(report)?,
    )?;
    Ok(())
}
