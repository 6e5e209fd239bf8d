//! The native half of the `tiermux` Python package: experiments, trace
//! replay and statistics, profiles and policies, returning their tables as
//! CSV text (the columns of `results.csv`), which the Python half turns into
//! pandas DataFrames, and a trace's statistics as JSON. Errors carry the
//! messages the `tiermux` command prints.

use std::path::Path;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use tiermux_core::replacement::ReplacementKind;
use tiermux_report::{paper_table, Table};
use tiermux_sim::experiment::{describe, runs_table, timeseries_table, Experiment};
use tiermux_sim::RunResult;
use tiermux_trace::replay::{replay_accesses, TraceVolume};
use tiermux_trace::Format;

pyo3::create_exception!(
    _native,
    TiermuxError,
    pyo3::exceptions::PyException,
    "An error tiermux reports: a bad experiment, trace or parameter."
);

fn err(message: impl std::fmt::Display) -> PyErr {
    TiermuxError::new_err(message.to_string())
}

/// An experiment file's text as TOML, from a JSON object (a Python dict
/// passed through `json.dumps`).
#[pyfunction]
fn experiment_toml_from_json(json: &str) -> PyResult<String> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| err(format!("experiment: {e}")))?;
    let t = toml::Value::try_from(v).map_err(|e| err(format!("experiment: {e}")))?;
    toml::to_string(&t).map_err(|e| err(format!("experiment: {e}")))
}

fn parse(text: Option<&str>, path: Option<&str>, source: &str) -> PyResult<Experiment> {
    match (text, path) {
        (Some(t), None) => Experiment::parse(t, source),
        (None, Some(p)) => Experiment::load(Path::new(p)),
        _ => return Err(err("give an experiment's text or its path, not both")),
    }
    .map_err(err)
}

/// Runs an experiment given as TOML text (`source` names it in errors) or,
/// with `path`, read from that file. Returns a dict: name, description,
/// runs (CSV), timeseries (CSV) and paper (CSV, or None without
/// `[[paper]]` rows).
#[pyfunction]
#[pyo3(signature = (text=None, path=None, source="experiment", threads=None))]
fn run_experiment<'py>(
    py: Python<'py>,
    text: Option<&str>,
    path: Option<&str>,
    source: &str,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyDict>> {
    let exp = parse(text, path, source)?;
    let threads = threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let finished = py
        .allow_threads(|| exp.run_every(threads, &|_| {}))
        .map_err(|e| err(e.to_string()))?;
    tables(py, &exp, &finished)
}

/// An experiment file's text, with the command's error when it cannot be
/// read.
#[pyfunction]
fn read_experiment(path: &str) -> PyResult<String> {
    Experiment::read_text(Path::new(path)).map_err(err)
}

/// How many runs the experiment (TOML text) has.
#[pyfunction]
fn run_count(text: &str, source: &str) -> PyResult<usize> {
    Ok(Experiment::parse(text, source).map_err(err)?.runs.len())
}

/// Runs run `index` of the experiment (TOML text) alone and returns its
/// result as bytes for [`assemble`]: a sweep's runs can go to other
/// processes or machines (Ray tasks) and come back to the same tables.
#[pyfunction]
fn run_one<'py>(
    py: Python<'py>,
    text: &str,
    source: &str,
    index: usize,
) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
    let exp = Experiment::parse(text, source).map_err(err)?;
    let (swept, cfg) = exp.runs.get(index).ok_or_else(|| {
        err(format!(
            "run {index}: the experiment has {} runs",
            exp.runs.len()
        ))
    })?;
    let r = py
        .allow_threads(|| tiermux_sim::run(cfg))
        .map_err(|e| err(format!("run with {}: {e}", describe(&exp.keys, swept, cfg))))?;
    let bytes = bincode::serialize(&r).map_err(err)?;
    Ok(pyo3::types::PyBytes::new(py, &bytes))
}

/// The experiment's tables (as [`run_experiment`] returns them) from the
/// results of [`run_one`] for every run, in order.
#[pyfunction]
fn assemble<'py>(
    py: Python<'py>,
    text: &str,
    source: &str,
    results: Vec<Vec<u8>>,
) -> PyResult<Bound<'py, PyDict>> {
    let exp = Experiment::parse(text, source).map_err(err)?;
    if results.len() != exp.runs.len() {
        return Err(err(format!(
            "{} results for an experiment of {} runs",
            results.len(),
            exp.runs.len()
        )));
    }
    let finished: Vec<RunResult> = results
        .iter()
        .enumerate()
        .map(|(i, b)| bincode::deserialize(b).map_err(|e| err(format!("result of run {i}: {e}"))))
        .collect::<PyResult<_>>()?;
    tables(py, &exp, &finished)
}

/// The run table, time series and paper rows of finished runs (in the
/// experiment's order) as a dict of CSV texts.
fn tables<'py>(
    py: Python<'py>,
    exp: &Experiment,
    finished: &[RunResult],
) -> PyResult<Bound<'py, PyDict>> {
    let pairs: Vec<(&[toml::Value], &RunResult)> = exp
        .runs
        .iter()
        .zip(finished)
        .map(|((s, _), r)| (s.as_slice(), r))
        .collect();
    let runs = runs_table(&exp.keys, &pairs);
    let out = PyDict::new(py);
    out.set_item("name", &exp.name)?;
    out.set_item("description", &exp.description)?;
    out.set_item("runs", runs.to_csv())?;
    out.set_item("timeseries", timeseries_table(&exp.keys, &pairs).to_csv())?;
    out.set_item("paper", paper_csv(exp, &runs)?)?;
    Ok(out)
}

/// The experiment's `[[paper]]` rows evaluated on its runs, as CSV.
fn paper_csv(exp: &Experiment, runs: &Table) -> PyResult<Option<String>> {
    if exp.paper.is_empty() {
        return Ok(None);
    }
    let rows = tiermux_report::evaluate_all(&exp.paper, runs).map_err(|e| err(e.to_string()))?;
    Ok(Some(paper_table(&rows).to_csv()))
}

/// Hit ratios of a block trace at each of `cache_pages`, without a
/// timing model, as `tiermux replay` computes them: pure LRU or ARC, or a
/// registered policy (parameters as JSON) over a cache and a home device.
/// Returns CSV: cache_pages, hit_ratio, and for a registered policy
/// read_hit_ratio and write_hit_ratio.
#[pyfunction]
#[pyo3(signature = (path, cache_pages, policy="lru", format=None, page_size=None, params_json=None))]
fn replay(
    py: Python<'_>,
    path: &str,
    cache_pages: Vec<usize>,
    policy: &str,
    format: Option<&str>,
    page_size: Option<u64>,
    params_json: Option<&str>,
) -> PyResult<String> {
    if cache_pages.is_empty() || cache_pages.contains(&0) {
        return Err(err("cache_pages: give sizes of at least 1 page"));
    }
    let path = Path::new(path);
    let (format, page_bytes) = trace_format(path, format, page_size)?;
    let params: tiermux_core::Params = match params_json {
        Some(j) => serde_json::from_str(j).map_err(|e| err(format!("params: {e}")))?,
        None => tiermux_core::Params::new(),
    };
    let fast: Option<ReplacementKind> = policy.parse().ok();
    if fast.is_some() && params.iter().next().is_some() {
        return Err(err(format!(
            "pure replacement ({policy}) takes no parameters; use policy='classic' with replacement='{policy}', or a registered policy"
        )));
    }
    let shape = match fast {
        Some(_) => None,
        None => Some(TraceVolume::fitting(policy, &params, 4, None).map_err(err)?),
    };
    let trace = tiermux_trace::read_pages(path, &format, page_bytes).map_err(err)?;
    py.allow_threads(move || {
        let mut t = Table::new(
            [
                "cache_pages",
                "hit_ratio",
                "read_hit_ratio",
                "write_hit_ratio",
            ]
            .map(String::from)
            .to_vec(),
            vec!["cache_pages".into()],
        );
        for &n in &cache_pages {
            let row = match (fast, shape) {
                (Some(kind), _) => {
                    let h = tiermux_trace::replay::hit_ratio(trace.pages(), kind, n);
                    vec![n.to_string(), h.to_string(), String::new(), String::new()]
                }
                (None, Some(shape)) => {
                    let volume = TraceVolume {
                        cache_pages: n as u64,
                        ..shape
                    };
                    let r = replay_accesses(policy, &params, trace.page_accesses(), volume, false)
                        .map_err(err)?;
                    vec![
                        n.to_string(),
                        r.hit_ratio().to_string(),
                        r.read_hit_ratio().to_string(),
                        r.write_hit_ratio().to_string(),
                    ]
                }
                (None, None) => unreachable!("a registered policy has a shape"),
            };
            t.rows.push(row);
        }
        Ok(t.to_csv())
    })
}

/// The format of the trace at `path` (named, or from the file name) and
/// the page size (given, else 512 bytes for ARC traces and 4096 for the
/// others, as `tiermux replay` takes them).
fn trace_format(
    path: &Path,
    format: Option<&str>,
    page_size: Option<u64>,
) -> PyResult<(Format, u64)> {
    let format = Format::resolve(format, path).map_err(err)?;
    let page_bytes = match page_size {
        Some(0) => return Err(err("page_size must be at least 1 byte")),
        Some(b) => b,
        None if format == Format::Arc => 512,
        None => 4096,
    };
    Ok((format, page_bytes))
}

/// What `tiermux trace info` prints of a block trace, as a JSON object:
/// requests, reads and writes, pages, footprint, mean request size, time
/// span, and the arrivals (mean gap, its coefficient of variation, the
/// idle share and, when the trace has bursts, the generator's settings
/// that match them).
#[pyfunction]
#[pyo3(signature = (path, format=None, page_size=None))]
fn trace_info(path: &str, format: Option<&str>, page_size: Option<u64>) -> PyResult<String> {
    let path = Path::new(path);
    let (format, page_bytes) = trace_format(path, format, page_size)?;
    let trace = tiermux_trace::read(path, &format).map_err(err)?;
    let i = tiermux_trace::info::TraceInfo::of(&trace, page_bytes);
    let a = tiermux_trace::arrivals::Arrivals::of(&trace);
    let ops = |c: &tiermux_trace::info::OpCounts| {
        serde_json::json!({
            "requests": c.requests, "bytes": c.bytes, "pages": c.pages,
            "unique_pages": c.unique_pages, "sequential_requests": c.sequential_requests,
        })
    };
    let fit = a.burst_fit().map(|f| {
        serde_json::json!({
            "mean_interarrival_us": f.mean_interarrival_us,
            "burst_mean_requests": f.burst_mean_requests,
            "burst_idle_us": f.burst_idle_us,
        })
    });
    let v = serde_json::json!({
        "format": format!("{format:?}"), "page_bytes": page_bytes,
        "requests": i.requests(), "volumes": i.volumes,
        "reads": ops(&i.reads), "writes": ops(&i.writes),
        "unique_pages": i.unique_pages, "footprint_bytes": i.footprint_bytes(),
        "mean_request_bytes": i.mean_request_bytes(),
        "time_span_s": (i.time_span_ns.1 - i.time_span_ns.0) as f64 / 1e9,
        "mean_gap_us": a.mean_gap_us(), "gap_cv": a.gap_cv(),
        "idle_gaps": a.idle_gaps, "idle_share": a.idle_share(), "bursts": fit,
    });
    Ok(v.to_string())
}

/// The built-in device profiles: name, description and source, as CSV.
#[pyfunction]
fn profiles() -> String {
    let mut t = Table::new(
        ["name", "description", "source"].map(String::from).to_vec(),
        vec!["name".into()],
    );
    for p in tiermux_device::profile::builtin_profiles() {
        t.rows.push(vec![p.name, p.description, p.source]);
    }
    t.to_csv()
}

/// The registered policies: (name, summary).
#[pyfunction]
fn policies() -> Vec<(String, String)> {
    tiermux_core::REGISTRY
        .iter()
        .map(|p| (p.name.to_string(), p.summary.to_string()))
        .collect()
}

/// The module `tiermux._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("TiermuxError", m.py().get_type::<TiermuxError>())?;
    m.add_function(wrap_pyfunction!(experiment_toml_from_json, m)?)?;
    m.add_function(wrap_pyfunction!(run_experiment, m)?)?;
    m.add_function(wrap_pyfunction!(read_experiment, m)?)?;
    m.add_function(wrap_pyfunction!(run_count, m)?)?;
    m.add_function(wrap_pyfunction!(run_one, m)?)?;
    m.add_function(wrap_pyfunction!(assemble, m)?)?;
    m.add_function(wrap_pyfunction!(replay, m)?)?;
    m.add_function(wrap_pyfunction!(trace_info, m)?)?;
    m.add_function(wrap_pyfunction!(profiles, m)?)?;
    m.add_function(wrap_pyfunction!(policies, m)?)?;
    Ok(())
}
