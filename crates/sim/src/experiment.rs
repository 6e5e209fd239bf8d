//! Experiments: a base configuration and a sweep, described in TOML.
//!
//! ```toml
//! name = "fig7"
//! description = "Orthus Figure 7"
//! [base]            # a full run configuration (see SimConfig)
//! devices = ["optane-905p", "flash-970pro"]
//! [sweep]           # dotted paths into [base] and the values to try
//! policy = ["classic", "nhc"]
//! "client.load" = [0.5, 1.0, 1.5, 2.0]
//! ```
//!
//! Every combination of the sweep's values is one run (the cartesian
//! product, in the order the keys are written). See `docs/experiments.md`.

use std::path::Path;

use serde::Serialize;

use tiermux_report::{PaperSpec, PlotData, PlotSpec, Table};

use crate::config::{ConfigError, SimConfig};
use crate::sim::{run_sharing, PrefillShare, RunResult, SimError};

/// A parsed experiment file.
#[derive(Clone, Debug)]
pub struct Experiment {
    /// Short name.
    pub name: String,
    /// What it reproduces.
    pub description: String,
    /// Swept keys, in file order.
    pub keys: Vec<String>,
    /// One configuration per run, with the swept values that made it.
    pub runs: Vec<(Vec<toml::Value>, SimConfig)>,
    /// Figures to draw from the results (`[[plot]]`).
    pub plots: Vec<PlotSpec>,
    /// Published values to put beside ours (`[[paper]]`).
    pub paper: Vec<PaperSpec>,
}

/// An experiment-file problem: file, line and field.
#[derive(Debug, thiserror::Error)]
#[error("{file}{}: {field}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct ExperimentError {
    /// The file.
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// The field.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// Finds the line where `key` (the last part of a dotted path) is set: at
/// the start of a line, or else inside an inline table (`{ ..., key = ...}`).
fn line_of_key(text: &str, path: &str) -> Option<usize> {
    let last = path.rsplit('.').next()?.trim_matches('"');
    let last = last.split('[').next()?;
    let sets =
        |t: &str| t.starts_with(last) && t[last.len()..].trim_start().starts_with(['=', '"']);
    let at_start = |l: &str| sets(l.trim_start().trim_start_matches('"'));
    let inline = |l: &str| {
        l.match_indices(['{', ','])
            .any(|(i, _)| sets(l[i + 1..].trim_start().trim_start_matches('"')))
    };
    text.lines()
        .position(at_start)
        .or_else(|| text.lines().position(inline))
        .map(|i| i + 1)
}

/// A sweep key that only labels runs (a column of its own); it changes no
/// configuration field.
pub const LABEL_KEY: &str = "label";

fn get_path(root: &toml::Value, path: &str) -> Option<toml::Value> {
    let mut cur = root;
    for p in path.split('.') {
        cur = cur.as_table()?.get(p)?;
    }
    Some(cur.clone())
}

fn set_path(root: &mut toml::Value, path: &str, value: toml::Value) -> Result<(), String> {
    let parts: Vec<&str> = path.split('.').collect();
    let mut cur = root;
    for (i, p) in parts.iter().enumerate() {
        let table = cur
            .as_table_mut()
            .ok_or_else(|| format!("'{}' is not a table", parts[..i].join(".")))?;
        if i + 1 == parts.len() {
            table.insert(p.to_string(), value);
            return Ok(());
        }
        cur = table
            .entry(p.to_string())
            .or_insert_with(|| toml::Value::Table(toml::map::Map::new()));
    }
    Ok(())
}

/// An experiment file being parsed: its text and name, for errors.
struct Parser<'a> {
    text: &'a str,
    file: &'a str,
}

/// A sweep group: its name in errors and its table of swept keys.
type Group<'t> = (String, &'t toml::Table);

impl Parser<'_> {
    fn err(&self, line: Option<usize>, field: &str, message: String) -> ExperimentError {
        ExperimentError {
            file: self.file.to_string(),
            line,
            field: field.to_string(),
            message,
        }
    }

    /// `[sweep]` is one group; `[[sweep]]` several, whose runs are joined.
    fn sweep_groups<'t>(
        &self,
        doc: &'t toml::Table,
        none: &'t toml::Table,
    ) -> Result<Vec<Group<'t>>, ExperimentError> {
        let line = line_of_key(self.text, "sweep");
        match doc.get("sweep") {
            None => Ok(vec![("sweep".into(), none)]),
            Some(toml::Value::Table(t)) => Ok(vec![("sweep".into(), t)]),
            Some(toml::Value::Array(a)) => a
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    v.as_table()
                        .map(|t| (format!("sweep[{i}]"), t))
                        .ok_or_else(|| self.err(line, "sweep", "must be tables".into()))
                })
                .collect(),
            Some(_) => Err(self.err(
                line,
                "sweep",
                "must be a table ([sweep]) or tables ([[sweep]])".into(),
            )),
        }
    }

    /// Every run: the value of every key (None when its group leaves the
    /// key at the base value), group after group.
    fn combinations(
        &self,
        groups: &[Group<'_>],
        keys: &[String],
    ) -> Result<Vec<Vec<Option<toml::Value>>>, ExperimentError> {
        let mut combos = Vec::new();
        for (gname, t) in groups {
            let mut group: Vec<Vec<Option<toml::Value>>> = vec![vec![None; keys.len()]];
            for (k, v) in t.iter() {
                let field = format!("{gname}.{k}");
                let line = line_of_key(self.text, k);
                let list = v
                    .as_array()
                    .ok_or_else(|| self.err(line, &field, "must be a list of values".into()))?;
                if list.is_empty() {
                    return Err(self.err(line, &field, "must not be empty".into()));
                }
                let ki = keys.iter().position(|x| x == k).expect("collected");
                group = group
                    .into_iter()
                    .flat_map(|c| {
                        list.iter().map(move |v| {
                            let mut c = c.clone();
                            c[ki] = Some(v.clone());
                            c
                        })
                    })
                    .collect();
            }
            combos.extend(group);
        }
        Ok(combos)
    }

    /// One run: `base` with the combination's values set, checked; returns
    /// the reported values of every key, the configuration and its
    /// controller's variable names.
    #[allow(clippy::type_complexity)]
    fn run(
        &self,
        base: &toml::Value,
        keys: &[String],
        combo: Vec<Option<toml::Value>>,
    ) -> Result<(Vec<toml::Value>, SimConfig, Vec<String>), ExperimentError> {
        let text = self.text;
        let mut cfg_value = base.clone();
        for (k, v) in keys.iter().zip(&combo) {
            if k == LABEL_KEY {
                continue;
            }
            if let Some(v) = v {
                set_path(&mut cfg_value, k, v.clone())
                    .map_err(|m| self.err(line_of_key(text, k), &format!("sweep.{k}"), m))?;
            }
        }
        // Keys a group leaves alone report the base value ("" if unset).
        let combo: Vec<toml::Value> = keys
            .iter()
            .zip(combo)
            .map(|(k, v)| {
                v.or_else(|| get_path(&cfg_value, k))
                    .unwrap_or_else(|| toml::Value::String(String::new()))
            })
            .collect();
        let cfg: SimConfig = serde_path_to_error::deserialize(cfg_value).map_err(
            |e: serde_path_to_error::Error<toml::de::Error>| {
                let msg = e.inner().message().to_string();
                // The path to the table or value at fault; an unknown key
                // is named by the message.
                let path = e.path().to_string();
                let unknown = msg
                    .strip_prefix("unknown field `")
                    .and_then(|m| m.split('`').next());
                let field = match (path.as_str(), unknown) {
                    (".", Some(key)) => format!("base.{key}"),
                    (".", None) => "base".into(),
                    (p, Some(key)) if !p.ends_with(key) => format!("base.{p}.{key}"),
                    (p, _) => format!("base.{p}"),
                };
                let line = line_of_key(text, field.rsplit('.').next().unwrap_or("base"));
                self.err(line, &field, msg)
            },
        )?;
        let mut cfg = cfg;
        // A trace file is named relative to the experiment file.
        if let Some(t) = cfg.trace.as_mut() {
            let dir = Path::new(self.file).parent().unwrap_or(Path::new(""));
            t.path = t.resolved_path(dir);
        }
        let resolved = cfg.resolve().map_err(|e: ConfigError| {
            self.err(line_of_key(text, &e.field), &e.field, e.message.clone())
        })?;
        Ok((combo, cfg, resolved.controller_names))
    }
}

impl Experiment {
    /// Parses an experiment from TOML text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Self, ExperimentError> {
        let p = Parser { text, file };
        let doc: toml::Table = text.parse::<toml::Table>().map_err(|e| {
            p.err(
                e.span().map(|s| line_of(text, s.start)),
                "toml",
                e.message().to_string(),
            )
        })?;
        for k in doc.keys() {
            if !["name", "description", "base", "sweep", "plot", "paper"].contains(&k.as_str()) {
                return Err(p.err(
                    line_of_key(text, k),
                    k,
                    "unknown top-level key (expected name, description, base, sweep, plot, paper)"
                        .into(),
                ));
            }
        }
        let text_of = |key: &str, default: &str| {
            doc.get(key)
                .and_then(|v| v.as_str())
                .unwrap_or(default)
                .to_string()
        };
        let base = doc
            .get("base")
            .cloned()
            .ok_or_else(|| p.err(None, "base", "missing [base] table".into()))?;
        let no_sweep = toml::Table::new();
        let groups = p.sweep_groups(&doc, &no_sweep)?;
        let mut keys: Vec<String> = Vec::new();
        for (_, t) in &groups {
            for k in t.keys() {
                if !keys.contains(k) {
                    keys.push(k.clone());
                }
            }
        }
        let mut runs = Vec::new();
        let mut controller_names: Vec<String> = Vec::new();
        for combo in p.combinations(&groups, &keys)? {
            let (combo, cfg, names) = p.run(&base, &keys, combo)?;
            for c in names {
                if !controller_names.contains(&c) {
                    controller_names.push(c);
                }
            }
            runs.push((combo, cfg));
        }
        let devices = runs.iter().map(|(_, c)| c.devices.len()).max().unwrap_or(2);
        let plots = parse_plots(&doc, text, &keys, &controller_names, devices)
            .map_err(|(line, field, message)| p.err(line, &field, message))?;
        let paper = parse_paper(&doc, text, &run_columns(&keys, devices))
            .map_err(|(line, field, message)| p.err(line, &field, message))?;
        Ok(Experiment {
            name: text_of("name", file),
            description: text_of("description", ""),
            keys,
            runs,
            plots,
            paper,
        })
    }

    /// Reads and parses an experiment file.
    pub fn load(path: &Path) -> Result<Self, ExperimentError> {
        Self::parse(&Self::read_text(path)?, &path.display().to_string())
    }

    /// An experiment file's text, with the error [`Experiment::load`]
    /// gives when it cannot be read.
    pub fn read_text(path: &Path) -> Result<String, ExperimentError> {
        std::fs::read_to_string(path).map_err(|e| ExperimentError {
            file: path.display().to_string(),
            line: None,
            field: "file".into(),
            message: e.to_string(),
        })
    }
}

/// Line of the `n`-th `[[table]]` header.
fn line_of_array_table(text: &str, table: &str, n: usize) -> Option<usize> {
    let header = format!("[[{table}]]");
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.trim_start().starts_with(&header))
        .nth(n)
        .map(|(i, _)| i + 1)
}

type FieldError = (Option<usize>, String, String);

/// Reads and checks the `[[plot]]` tables against the columns the runs
/// will produce.
fn parse_plots(
    doc: &toml::Table,
    text: &str,
    keys: &[String],
    controller: &[String],
    devices: usize,
) -> Result<Vec<PlotSpec>, FieldError> {
    let Some(v) = doc.get("plot") else {
        return Ok(Vec::new());
    };
    let list = v.as_array().ok_or_else(|| {
        (
            line_of_key(text, "plot"),
            "plot".to_string(),
            "must be [[plot]] tables".to_string(),
        )
    })?;
    let mut plots: Vec<PlotSpec> = Vec::new();
    for (i, p) in list.iter().enumerate() {
        let line = line_of_array_table(text, "plot", i);
        let spec: PlotSpec = p
            .clone()
            .try_into()
            .map_err(|e: toml::de::Error| (line, format!("plot[{i}]"), e.message().to_string()))?;
        let columns = match spec.data {
            PlotData::Runs => run_columns(keys, devices),
            PlotData::Timeseries => sample_columns(keys, controller, devices),
        };
        spec.check_columns(&columns)
            .map_err(|e| (line, format!("plot[{i}].{}", e.field), e.message))?;
        if plots.iter().any(|q| q.name == spec.name) {
            return Err((
                line,
                format!("plot[{i}].name"),
                format!("'{}' is used by another plot", spec.name),
            ));
        }
        plots.push(spec);
    }
    Ok(plots)
}

/// Reads and checks the `[[paper]]` tables against the run table's
/// `columns`.
fn parse_paper(
    doc: &toml::Table,
    text: &str,
    columns: &[String],
) -> Result<Vec<PaperSpec>, FieldError> {
    let Some(v) = doc.get("paper") else {
        return Ok(Vec::new());
    };
    let list = v.as_array().ok_or_else(|| {
        (
            line_of_key(text, "paper"),
            "paper".to_string(),
            "must be [[paper]] tables".to_string(),
        )
    })?;
    let mut rows = Vec::new();
    for (i, p) in list.iter().enumerate() {
        let line = line_of_array_table(text, "paper", i);
        let spec: PaperSpec = p
            .clone()
            .try_into()
            .map_err(|e: toml::de::Error| (line, format!("paper[{i}]"), e.message().to_string()))?;
        spec.check_columns(columns)
            .map_err(|e| (line, format!("paper[{i}].{}", e.field), e.message))?;
        if !spec.paper.is_finite() {
            return Err((line, format!("paper[{i}].paper"), "must be a number".into()));
        }
        rows.push(spec);
    }
    Ok(rows)
}

/// One finished run with its swept values.
#[derive(Clone, Debug, Serialize)]
pub struct RunRecord {
    /// Swept key → value.
    pub swept: Vec<(String, String)>,
    /// The measurements.
    pub result: RunResult,
}

impl RunRecord {
    /// The record of a run whose swept `keys` took the values `swept`.
    pub fn new(keys: &[String], swept: &[toml::Value], result: &RunResult) -> Self {
        RunRecord {
            swept: keys.iter().cloned().zip(swept.iter().map(cell)).collect(),
            result: result.clone(),
        }
    }
}

/// "policy=P key=value ...": which run of a sweep `swept` and `cfg` are,
/// for error messages.
pub fn describe(keys: &[String], swept: &[toml::Value], cfg: &SimConfig) -> String {
    let mut s = format!("policy={}", cfg.policy);
    for (k, v) in keys.iter().zip(swept) {
        s += &format!(" {k}={v}");
    }
    s
}

/// The message of a panic's payload.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".into()
    }
}

/// Runs `configs` on up to `threads` threads, calling `progress` after each;
/// a run that panics gives [`SimError::Panicked`] and the others go on.
/// Runs with the same key-value prefill share it (see [`PrefillShare`]),
/// and no more key-value runs go at once than their volumes' bytes fit
/// this machine's memory ([`crate::memory::sweep_fit`]).
pub fn run_all(
    configs: &[SimConfig],
    threads: usize,
    progress: &(dyn Fn(usize) + Sync),
) -> Vec<Result<RunResult, SimError>> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let fit = crate::memory::sweep_fit(configs, threads, crate::memory::machine_memory_bytes());
    let share = if fit.share_prefills {
        PrefillShare::plan(configs)
    } else {
        PrefillShare::none()
    };
    let out: Mutex<Vec<Option<Result<RunResult, SimError>>>> =
        Mutex::new((0..configs.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..fit.threads.min(configs.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= configs.len() {
                    break;
                }
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    run_sharing(&configs[i], Some(&share))
                }))
                .unwrap_or_else(|payload| Err(SimError::Panicked(panic_text(payload.as_ref()))));
                out.lock().expect("results")[i] = Some(r);
                progress(done.fetch_add(1, Ordering::SeqCst) + 1);
            });
        }
    });
    out.into_inner()
        .expect("results")
        .into_iter()
        .map(|r| r.expect("ran"))
        .collect()
}

/// A run of an experiment that failed, named by its swept values.
#[derive(Debug, thiserror::Error)]
#[error("run with {run}: {error}")]
pub struct RunFailed {
    /// The run, as [`describe`] names it.
    pub run: String,
    /// What went wrong.
    pub error: SimError,
}

impl Experiment {
    /// Runs every run on up to `threads` threads (see [`run_all`]) and
    /// returns their results in order, or the first failed run.
    pub fn run_every(
        &self,
        threads: usize,
        progress: &(dyn Fn(usize) + Sync),
    ) -> Result<Vec<RunResult>, RunFailed> {
        let configs: Vec<SimConfig> = self.runs.iter().map(|(_, c)| c.clone()).collect();
        let results = run_all(&configs, threads, progress);
        self.runs
            .iter()
            .zip(results)
            .map(|((swept, cfg), r)| {
                r.map_err(|error| RunFailed {
                    run: describe(&self.keys, swept, cfg),
                    error,
                })
            })
            .collect()
    }
}

/// Swept keys that are also fixed result columns (reported once).
const FIXED_COLUMNS: &[&str] = &["policy"];

/// Result columns of a run after the swept keys.
const RUN_COLUMNS: &[&str] = &[
    "policy",
    "workers",
    "throughput_ops_per_s",
    "throughput_bytes_per_s",
    "mean_latency_us",
    "p50_latency_us",
    "p99_latency_us",
    "p999_latency_us",
    "hit_ratio",
    "dev0_bytes_per_s",
    "dev1_bytes_per_s",
    "dev0_utilization",
    "dev1_utilization",
    "dev0_admitted_bytes",
    "dev0_written_bytes",
    "dev1_written_bytes",
    "dev0_migrated_bytes",
    "dev1_migrated_bytes",
    "dev0_migration_dwpd",
    "dev1_migration_dwpd",
    "dev0_migration_lifetime_years",
    "dev1_migration_lifetime_years",
    "convergence_s",
    "requests",
    "get_mean_latency_us",
    "get_p99_latency_us",
    "kv_refused",
    "kv_prefill_refused",
    "kv_dropped",
    "measured_s",
    "energy_j",
    "read_mean_latency_us",
    "write_mean_latency_us",
    "cwaf",
    "ssd_lifetime_years",
    "lost_blocks",
    "failed_reads",
    "failed_writes",
];

/// Result columns of a time-series sample after the swept keys and policy.
const SAMPLE_COLUMNS: &[&str] = &[
    "t_s",
    "throughput_ops_per_s",
    "mean_latency_us",
    "hit_ratio",
    "load",
    "dev0_bytes_per_s",
    "dev1_bytes_per_s",
];

/// Swept keys as column names (quotes removed, `policy` left to the results).
fn key_columns(keys: &[String]) -> Vec<String> {
    keys.iter()
        .filter(|k| !FIXED_COLUMNS.contains(&k.as_str()))
        .map(|k| k.replace('"', ""))
        .collect()
}

/// A swept value as a table cell: strings bare, lists joined with '+'
/// (`optane-905p+flash-970pro`).
pub fn cell(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Array(a) => a.iter().map(cell).collect::<Vec<_>>().join("+"),
        other => other.to_string(),
    }
}

fn key_cells(keys: &[String], swept: &[toml::Value]) -> Vec<String> {
    keys.iter()
        .zip(swept)
        .filter(|(k, _)| !FIXED_COLUMNS.contains(&k.as_str()))
        .map(|(_, v)| cell(v))
        .collect()
}

fn num(x: f64) -> String {
    if x.is_nan() {
        String::new()
    } else {
        format!("{x:.4}")
    }
}

/// Column names of the per-run table for an experiment with swept `keys`
/// whose runs have up to `devices` devices: the fixed columns (the first
/// two devices), then `dev2_*`, `dev3_*`... for each further device.
pub fn run_columns(keys: &[String], devices: usize) -> Vec<String> {
    let mut cols = key_columns(keys);
    cols.extend(RUN_COLUMNS.iter().map(|c| c.to_string()));
    for i in 2..devices {
        for c in EXTRA_DEVICE_COLUMNS {
            cols.push(format!("dev{i}_{c}"));
        }
    }
    cols
}

/// Per-device result columns of devices after the first two.
const EXTRA_DEVICE_COLUMNS: [&str; 3] = ["bytes_per_s", "utilization", "written_bytes"];

/// The per-run table row for a run whose swept `keys` took `swept`, in a
/// table of runs with up to `devices` devices (cells of devices this run
/// does not have are empty).
pub fn run_cells(
    keys: &[String],
    swept: &[toml::Value],
    r: &RunResult,
    devices: usize,
) -> Vec<String> {
    let mut cols = key_cells(keys, swept);
    let dev = |i: usize| r.devices.get(i);
    cols.push(r.policy.clone());
    cols.push(r.workers.to_string());
    for x in [
        r.throughput_ops_per_s,
        r.throughput_bytes_per_s,
        r.mean_latency_us,
        r.p50_latency_us,
        r.p99_latency_us,
        r.p999_latency_us,
        r.hit_ratio,
        dev(0).map_or(0.0, |d| d.bytes_per_s),
        dev(1).map_or(0.0, |d| d.bytes_per_s),
        dev(0).map_or(0.0, |d| d.utilization),
        dev(1).map_or(0.0, |d| d.utilization),
    ] {
        cols.push(num(x));
    }
    cols.push(dev(0).map_or(0, |d| d.admitted_bytes).to_string());
    cols.push(dev(0).map_or(0, |d| d.written_bytes).to_string());
    cols.push(dev(1).map_or(0, |d| d.written_bytes).to_string());
    cols.push(dev(0).map_or(0, |d| d.migrated_bytes).to_string());
    cols.push(dev(1).map_or(0, |d| d.migrated_bytes).to_string());
    for i in 0..2 {
        cols.push(num(dev(i)
            .and_then(|d| d.migration_dwpd)
            .unwrap_or(f64::NAN)));
    }
    for i in 0..2 {
        cols.push(num(dev(i)
            .and_then(|d| d.migration_lifetime_years)
            .unwrap_or(f64::NAN)));
    }
    cols.push(num(r.convergence_s.unwrap_or(f64::NAN)));
    cols.push(r.requests.to_string());
    let kv = r.kv.as_ref();
    cols.push(num(kv.map_or(f64::NAN, |k| k.get_mean_latency_us)));
    cols.push(num(kv.map_or(f64::NAN, |k| k.get_p99_latency_us)));
    cols.push(kv.map_or(String::new(), |k| k.refused.to_string()));
    cols.push(kv.map_or(String::new(), |k| k.prefill_refused.to_string()));
    cols.push(kv.map_or(String::new(), |k| k.dropped.to_string()));
    cols.push(num(r.measured_s));
    cols.push(num(r.energy_j.unwrap_or(f64::NAN)));
    cols.push(num(r.read_mean_latency_us.unwrap_or(f64::NAN)));
    cols.push(num(r.write_mean_latency_us.unwrap_or(f64::NAN)));
    cols.push(num(r.cwaf.unwrap_or(f64::NAN)));
    cols.push(num(r.ssd_lifetime_years.unwrap_or(f64::NAN)));
    let failure = r.failure.as_ref();
    cols.push(failure.map_or(String::new(), |f| f.lost_blocks.to_string()));
    cols.push(failure.map_or(String::new(), |f| f.failed_reads.to_string()));
    cols.push(failure.map_or(String::new(), |f| f.failed_writes.to_string()));
    for i in 2..devices {
        match dev(i) {
            Some(d) => {
                cols.push(num(d.bytes_per_s));
                cols.push(num(d.utilization));
                cols.push(d.written_bytes.to_string());
            }
            None => cols.extend([String::new(), String::new(), String::new()]),
        }
    }
    cols
}

/// Identifying columns of both tables: the swept keys and the policy.
fn identity(keys: &[String]) -> Vec<String> {
    let mut k = key_columns(keys);
    k.push("policy".into());
    k
}

/// One row per run.
pub fn runs_table(keys: &[String], runs: &[(&[toml::Value], &RunResult)]) -> Table {
    let devices = runs.iter().map(|(_, r)| r.devices.len()).max().unwrap_or(2);
    let mut t = Table::new(run_columns(keys, devices), identity(keys));
    t.rows = runs
        .iter()
        .map(|(s, r)| run_cells(keys, s, r, devices))
        .collect();
    t
}

/// Column names of the time-series table for runs with up to `devices`
/// devices; `controller` names the controller variables to include.
pub fn sample_columns(keys: &[String], controller: &[String], devices: usize) -> Vec<String> {
    let mut cols = key_columns(keys);
    cols.push("policy".into());
    cols.extend(SAMPLE_COLUMNS.iter().map(|c| c.to_string()));
    cols.extend((2..devices).map(|i| format!("dev{i}_bytes_per_s")));
    cols.extend(controller.iter().cloned());
    cols
}

/// One row per time-series sample of every run; controller variables a
/// run does not have are left empty.
pub fn timeseries_table(keys: &[String], runs: &[(&[toml::Value], &RunResult)]) -> Table {
    let mut controller: Vec<String> = Vec::new();
    for (_, r) in runs {
        for s in r.samples.iter().take(1) {
            for (k, _) in &s.controller {
                if !controller.contains(k) {
                    controller.push(k.clone());
                }
            }
        }
    }
    let devices = runs.iter().map(|(_, r)| r.devices.len()).max().unwrap_or(2);
    let mut t = Table::new(sample_columns(keys, &controller, devices), identity(keys));
    for (swept, r) in runs {
        let base = key_cells(keys, swept);
        for s in &r.samples {
            let mut row = base.clone();
            row.push(r.policy.clone());
            row.push(format!("{:.4}", s.t_s));
            for x in [
                s.throughput_ops_per_s,
                s.mean_latency_us,
                s.hit_ratio,
                s.load,
                s.device_bytes_per_s.first().copied().unwrap_or(0.0),
                s.device_bytes_per_s.get(1).copied().unwrap_or(0.0),
            ] {
                row.push(num(x));
            }
            for i in 2..devices {
                row.push(
                    s.device_bytes_per_s
                        .get(i)
                        .map_or(String::new(), |&x| num(x)),
                );
            }
            for c in &controller {
                row.push(
                    s.controller
                        .iter()
                        .find(|(k, _)| k == c)
                        .map_or(String::new(), |(_, v)| num(*v)),
                );
            }
            t.rows.push(row);
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every experiment file the project ships parses, and every run in it
    /// resolves.
    #[test]
    fn every_shipped_experiment_parses() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let e = Experiment::load(&path).unwrap_or_else(|e| panic!("{e}"));
                assert!(!e.runs.is_empty(), "{}", path.display());
                seen += 1;
            }
        }
        assert!(seen >= 7, "{seen} experiment files");
    }

    #[test]
    fn sweep_is_a_cartesian_product() {
        let e = Experiment::parse(
            "name = \"t\"\n[base]\ndevices = [\"fixed:100\", \"fixed:50\"]\npolicy = \"classic\"\n[sweep]\npolicy = [\"classic\", \"split\"]\n\"workload.hit_ratio\" = [0.5, 0.9, 1.0]\n",
            "t.toml",
        )
        .unwrap();
        assert_eq!(e.runs.len(), 6);
        assert_eq!(e.runs[4].1.policy, "split");
        assert_eq!(e.runs[4].1.workload.hit_ratio, Some(0.9));
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let e = Experiment::parse(
            "[base]\ndevices = [\"fixed:100\", \"nope\"]\npolicy = \"classic\"\n",
            "x.toml",
        )
        .unwrap_err();
        assert_eq!(e.field, "devices[1]");
        assert!(
            e.to_string()
                .starts_with("x.toml:2: devices[1]: unknown profile 'nope'"),
            "{e}"
        );
        let e = Experiment::parse("[base]\ndevices = [\"fixed:1\", \"fixed:1\"]\npolicy = \"classic\"\n[base.workload]\nhit_ratio = 1.5\n", "y.toml")
            .unwrap_err();
        assert_eq!(
            (e.field.as_str(), e.line),
            ("workload.hit_ratio", Some(5)),
            "{e}"
        );
        let e = Experiment::parse("[base\n", "z.toml").unwrap_err();
        assert_eq!(e.line, Some(1));
        let e = Experiment::parse("[base]\ndevices = [\"fixed:1\", \"fixed:1\"]\npolicy = \"classic\"\ncache_blokcs = 3\n", "w.toml")
            .unwrap_err();
        assert!(e.to_string().contains("cache_blokcs"), "{e}");
        assert_eq!(e.line, Some(4), "{e}");
        let e = Experiment::parse("[base]\ndevices = [\"fixed:1\", \"fixed:1\"]\npolicy = \"classic\"\nduration_s = -1.0\n", "v.toml")
            .unwrap_err();
        assert_eq!(e.line, Some(4), "{e}");
        // A value of the wrong type, and an unknown key in a nested table
        // and in a tagged one, are named by their whole path.
        let head = "[base]\ndevices = [\"fixed:1\", \"fixed:1\"]\npolicy = \"classic\"\n";
        let field = |tail: &str| {
            Experiment::parse(&format!("{head}{tail}"), "u.toml")
                .unwrap_err()
                .field
        };
        assert_eq!(
            field("[base.client]\nworkers = \"four\"\n"),
            "base.client.workers"
        );
        assert_eq!(field("[base.client]\nwrkers = 4\n"), "base.client.wrkers");
        let e = Experiment::parse(
            &format!("{head}[base.client]\nschedule = {{ kind = \"diurnal\", period_s = 1.0, min = 0.5 }}\n"),
            "u.toml",
        )
        .unwrap_err();
        assert_eq!(
            (e.field.as_str(), e.line),
            ("base.client.schedule.min", Some(5))
        );
    }

    #[test]
    fn sweep_groups_are_joined() {
        let e = Experiment::parse(
            "[base]\ndevices = [\"fixed:100\", \"fixed:50\"]\npolicy = \"classic\"\n[[sweep]]\npolicy = [\"classic\"]\n\"workload.hit_ratio\" = [0.5, 0.9]\n[[sweep]]\npolicy = [\"split\"]\n\"params.split_rate\" = [0.1, 0.2, 0.3]\n",
            "g.toml",
        )
        .unwrap();
        assert_eq!(
            e.keys,
            ["policy", "workload.hit_ratio", "params.split_rate"]
        );
        assert_eq!(e.runs.len(), 5);
        let cells: Vec<String> = e.runs[1].0.iter().map(cell).collect();
        assert_eq!(cells, ["classic", "0.9", ""]);
        let cells: Vec<String> = e.runs[4].0.iter().map(cell).collect();
        assert_eq!(cells, ["split", "", "0.3"]);
        assert_eq!(e.runs[4].1.policy, "split");
    }

    #[test]
    fn plots_are_checked_against_the_result_columns() {
        let base = "[base]\ndevices = [\"fixed:100\", \"fixed:50\"]\npolicy = \"classic\"\n[sweep]\npolicy = [\"classic\", \"nhc\"]\n\"client.workers\" = [1, 2]\n";
        let ok = format!("{base}[[plot]]\nname = \"a\"\nx = \"client.workers\"\ny = \"throughput_ops_per_s\"\nseries = \"policy\"\n[[plot]]\nname = \"b\"\ndata = \"timeseries\"\nx = \"t_s\"\ny = \"load_admit\"\n");
        let e = Experiment::parse(&ok, "p.toml").unwrap();
        assert_eq!(e.plots.len(), 2);
        let bad =
            format!("{base}[[plot]]\nname = \"a\"\nx = \"client.workers\"\ny = \"throughput\"\n");
        let e = Experiment::parse(&bad, "p.toml").unwrap_err();
        assert_eq!((e.field.as_str(), e.line), ("plot[0].y", Some(7)), "{e}");
        let bad =
            format!("{base}[[plot]]\nname = \"a\"\nx = \"t_s\"\ny = \"load_admit\"\ncolour = 1\n");
        let e = Experiment::parse(&bad, "p.toml").unwrap_err();
        assert!(e.to_string().contains("colour"), "{e}");
    }
}
