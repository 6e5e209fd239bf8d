//! `tiermux trace sweep FILE`: an experiment over block traces, as data.
//!
//! The file names traces (synthetic presets with parameter overrides, or
//! trace files), policies, cache sizes and figures. Every (trace, policy,
//! cache size) is replayed in zero time as `tiermux replay` does; the rows
//! go to `results.csv` and the figures to SVG files, as for `tiermux sim`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use tiermux_report::{PlotSpec, Table};
use tiermux_trace::replay::{replay_accesses_with, ReplayStats, TraceVolume, RUN_LENGTH_BUCKETS};
use tiermux_trace::spec::value_text;
use tiermux_trace::TraceSource;

use crate::trace_cmd::ArrayWrites;

/// A trace sweep file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceSweep {
    /// Names the output directory (`out/NAME` by default).
    pub name: String,
    /// What the sweep shows.
    #[serde(default)]
    pub description: String,
    /// Registered policies to replay.
    pub policies: Vec<String>,
    /// Cache sizes, in pages (all cache devices together).
    pub cache_pages: Vec<u64>,
    /// The DRAM's share of each cache size (two cache devices), as
    /// `tiermux replay --dram-share`.
    #[serde(default)]
    pub dram_share: Option<f64>,
    /// Policy parameters, by policy name.
    #[serde(default)]
    pub params: BTreeMap<String, toml::Table>,
    /// The traces.
    #[serde(rename = "trace")]
    pub traces: Vec<TraceSource>,
    /// Figures drawn from `results.csv`.
    #[serde(default, rename = "plot")]
    pub plots: Vec<PlotSpec>,
}

impl TraceSweep {
    /// Reads and checks a sweep file.
    pub fn load(file: &Path) -> Result<TraceSweep> {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("{}: cannot read", file.display()))?;
        let sweep: TraceSweep = toml::from_str(&text)
            .with_context(|| format!("{}: not a trace sweep", file.display()))?;
        sweep
            .check()
            .with_context(|| format!("{}", file.display()))?;
        Ok(sweep)
    }

    fn check(&self) -> Result<()> {
        if self.policies.is_empty() || self.cache_pages.is_empty() || self.traces.is_empty() {
            bail!("policies, cache_pages and [[trace]] must each name at least one");
        }
        if self.cache_pages.contains(&0) {
            bail!("cache_pages: sizes must be at least 1");
        }
        if let Some(s) = self.dram_share {
            if !(s > 0.0 && s < 1.0) {
                bail!("dram_share must be in (0, 1), got {s}");
            }
        }
        for (i, t) in self.traces.iter().enumerate() {
            // A trace is named by its label once it names one trace.
            let name = if t.preset.is_some() == t.path.is_some() {
                format!("trace {}", i + 1)
            } else {
                format!("trace '{}'", t.label())
            };
            t.check().with_context(|| name)?;
        }
        let columns = Self::columns();
        for plot in &self.plots {
            plot.check_columns(&columns)?;
        }
        for policy in &self.policies {
            TraceVolume::fitting(policy, &self.policy_params(policy)?, 4, self.dram_share)
                .with_context(|| format!("policy '{policy}'"))?;
        }
        Ok(())
    }

    fn policy_params(&self, policy: &str) -> Result<tiermux_core::Params> {
        let items: Vec<String> = self
            .params
            .get(policy)
            .into_iter()
            .flatten()
            .map(|(k, v)| format!("{k}={}", value_text(v)))
            .collect();
        crate::parse_params(&items)
    }

    /// The columns of `results.csv`.
    pub fn columns() -> Vec<String> {
        [
            "trace",
            "policy",
            "cache_pages",
            "hit_pct",
            "read_hit_pct",
            "read_hit_dev0_pct",
            "read_hit_dev1_pct",
            "write_hit_pct",
            "stored_pages",
            "storage_runs",
            "mean_run_pages",
            "raid5_mb_per_s",
        ]
        .map(String::from)
        .into_iter()
        .chain(RUN_LENGTH_BUCKETS.iter().map(|b| run_length_column(b)))
        .collect()
    }
}

/// One replay's row of `results.csv`; `raid5_mb_per_s` is its storage
/// writes' throughput on the modelled array.
fn row(trace: &str, policy: &str, pages: u64, r: &ReplayStats, raid5_mb_per_s: f64) -> Vec<String> {
    let runs = r.storage_runs();
    vec![
        trace.to_string(),
        policy.to_string(),
        pages.to_string(),
        format!("{:.4}", r.hit_ratio() * 100.0),
        format!("{:.4}", r.read_hit_ratio() * 100.0),
        format!("{:.4}", r.read_hit_ratio_on(0) * 100.0),
        format!("{:.4}", r.read_hit_ratio_on(1) * 100.0),
        format!("{:.4}", r.write_hit_ratio() * 100.0),
        r.storage_blocks.to_string(),
        runs.to_string(),
        format!("{:.4}", r.storage_blocks as f64 / runs.max(1) as f64),
        format!("{raid5_mb_per_s:.4}"),
    ]
    .into_iter()
    .chain(r.run_length_histogram().iter().map(u64::to_string))
    .collect()
}

/// The `results.csv` column of the storage write requests whose length
/// falls in `bucket` (`runs_len_3_4` for "3-4", `runs_len_over_256`).
fn run_length_column(bucket: &str) -> String {
    match bucket.strip_prefix('>') {
        Some(over) => format!("runs_len_over_{over}"),
        None => format!("runs_len_{}", bucket.replace('-', "_")),
    }
}

/// Checks a sweep file without replaying it (`--check`).
pub fn check(file: &Path) -> Result<()> {
    let sweep = TraceSweep::load(file)?;
    outln!(
        "{}: {} traces x {} policies x {} cache sizes, ok",
        file.display(),
        sweep.traces.len(),
        sweep.policies.len(),
        sweep.cache_pages.len()
    );
    Ok(())
}

/// How to run a sweep file.
pub struct RunOptions {
    /// Replays at once.
    pub threads: usize,
    /// Write PNG copies of the figures.
    pub png: bool,
    /// Replay only each trace's first requests (a quick check of a file).
    pub max_requests: Option<usize>,
}

/// Runs a sweep file, writing `results.csv` and its figures under `out`.
pub fn run(file: &Path, out: Option<PathBuf>, opts: &RunOptions) -> Result<()> {
    let RunOptions {
        threads,
        png,
        max_requests,
    } = *opts;
    let sweep = TraceSweep::load(file)?;
    let out = out.unwrap_or_else(|| PathBuf::from("out").join(&sweep.name));
    std::fs::create_dir_all(&out).with_context(|| format!("{}: cannot create", out.display()))?;
    let base = file.parent().unwrap_or(Path::new("."));
    let start = Instant::now();
    let mut table = Table::new(
        TraceSweep::columns(),
        ["trace", "policy", "cache_pages"]
            .map(String::from)
            .to_vec(),
    );
    for entry in &sweep.traces {
        let label = entry.label();
        let (mut trace, page_bytes) = entry
            .load(base)
            .with_context(|| format!("{}: trace '{label}'", file.display()))?;
        if let Some(n) = max_requests {
            trace.requests.truncate(n);
        }
        let rows = replay_all(&sweep, &trace, page_bytes, &label, threads)?;
        table.rows.extend(rows);
    }
    std::fs::write(out.join("results.csv"), table.to_csv())?;
    outln!(
        "{} ({}): {} replays in {:.1} s -> {}",
        sweep.name,
        sweep.description,
        table.rows.len(),
        start.elapsed().as_secs_f64(),
        out.join("results.csv").display()
    );
    for plot in &sweep.plots {
        let opts = crate::figures::FigureOptions {
            png,
            cut_short: max_requests.is_some(),
        };
        for path in crate::figures::write_figure(file, &out, plot, &table, opts)? {
            outln!("  figure {}", path.display());
        }
    }
    Ok(())
}

/// Every policy of the sweep at every cache size on one trace, replayed on
/// `threads` threads; the rows in the sweep's order.
fn replay_all(
    sweep: &TraceSweep,
    trace: &tiermux_trace::BlockTrace,
    page_bytes: u64,
    label: &str,
    threads: usize,
) -> Result<Vec<Vec<String>>> {
    let jobs: Vec<(&str, u64)> = sweep
        .policies
        .iter()
        .flat_map(|p| sweep.cache_pages.iter().map(move |&n| (p.as_str(), n)))
        .collect();
    let rows = Mutex::new(vec![None; jobs.len()]);
    let next = AtomicUsize::new(0);
    let work = || -> Result<()> {
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(&(policy, pages)) = jobs.get(i) else {
                return Ok(());
            };
            let params = sweep.policy_params(policy)?;
            let shape = TraceVolume::fitting(policy, &params, pages, sweep.dram_share)?;
            let mut array = ArrayWrites::new(page_bytes);
            let r = replay_accesses_with(
                policy,
                &params,
                trace.page_accesses(page_bytes),
                shape,
                false,
                &mut |start, pages| array.write(start, pages),
            )
            .with_context(|| format!("trace '{label}', {policy} at {pages} pages"))?;
            rows.lock().expect("no panics hold it")[i] =
                Some(row(label, policy, pages, &r, array.mb_per_s()));
        }
    };
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads.max(1)).map(|_| s.spawn(work)).collect();
        handles
            .into_iter()
            .try_for_each(|h| h.join().expect("a replay thread panicked"))
    })?;
    let rows = rows.into_inner().expect("no panics hold it");
    Ok(rows
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect())
}
