//! The `tiermux` command.

/// `println!` that ends the process quietly when stdout is closed (for
/// example `tiermux profiles | head`) instead of panicking.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if writeln!(std::io::stdout(), $($arg)*).is_err() {
            std::process::exit(0);
        }
    }};
}

mod bench;
mod figures;
mod kv_bench;
mod kv_cmd;
mod policies_cmd;
mod profiles;
mod report_cmd;
mod serve;
mod trace_cmd;
mod trace_sweep;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use tiermux_core::Op;
use tiermux_device::calibrate::closed_loop_throughput;
use tiermux_device::profile::builtin_profiles;
use tiermux_report::Table;
use tiermux_sim::experiment::{run_all, runs_table, timeseries_table, Experiment, RunRecord};
use tiermux_sim::{RunResult, SimConfig};

#[derive(Parser)]
#[command(
    name = "tiermux",
    version,
    about = "Policies for heterogeneous storage hierarchies: simulate, compare, reproduce"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Classic caching vs NHC vs the best static split on Optane+Flash.
    Demo {
        /// Also write results.csv and results.json here.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Worker threads (default: all cores).
        #[arg(long)]
        threads: Option<usize>,
    },
    /// Run an experiment file (TOML) and write its results.
    Sim {
        /// The experiment file.
        file: PathBuf,
        /// Output directory (default: out/<experiment name>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Worker threads (default: all cores).
        #[arg(long)]
        threads: Option<usize>,
        /// Also write each figure as PNG beside its SVG.
        #[arg(long)]
        png: bool,
        /// Cut every run to at most this many simulated seconds (warm-up
        /// and a device failure's moment cut alike): checks that a file
        /// runs and draws in seconds; the numbers mean little.
        #[arg(long, value_name = "SECONDS")]
        max_duration_s: Option<f64>,
        /// Cut every key-value run's keys to at most this many (with
        /// --max-duration-s, a quick check of a file).
        #[arg(long, value_name = "N")]
        max_keys: Option<u64>,
    },
    /// One self-contained HTML page from result directories of `sim`: each
    /// experiment's rows from the papers beside ours, figures and runs.
    Report {
        /// Result directories, or directories holding them (such as out/).
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// The page to write.
        #[arg(long, default_value = "report.html")]
        out: PathBuf,
        /// The page's title.
        #[arg(long, default_value = "tiermux results")]
        title: String,
    },
    /// Hit ratios of a block trace at several cache sizes, no timing model.
    Replay {
        /// The trace (plain or zstd-compressed).
        trace: PathBuf,
        #[command(flatten)]
        read: trace_cmd::ReadOpts,
        #[command(flatten)]
        replay: trace_cmd::ReplayOpts,
        /// `lru` or `arc` (pure replacement, the fast path), or any policy
        /// of `tiermux policies`, run through the dispatcher over a cache
        /// device and a home device.
        #[arg(long, default_value = "lru")]
        policy: String,
        /// A policy parameter, KEY=VALUE (repeatable), e.g. replacement=arc.
        #[arg(long = "param")]
        params: Vec<String>,
        /// Cache size(s) in pages, comma-separated.
        #[arg(long, value_delimiter = ',', required_unless_present = "mrc")]
        cache_pages: Vec<usize>,
        /// LRU's exact hit ratio at every cache size in one pass (stack
        /// distances): printed at --cache-pages, or at 20 sizes up to the
        /// trace's distinct pages.
        #[arg(long)]
        mrc: bool,
        /// With --mrc: track only this fraction of pages (SHARDS spatial
        /// sampling), for a faster, approximate curve.
        #[arg(long, requires = "mrc")]
        sample_rate: Option<f64>,
    },
    /// Block traces: statistics and conversion between formats.
    Trace {
        #[command(subcommand)]
        cmd: trace_cmd::TraceCmd,
    },
    /// The key-value layer: a cache on a volume behind the Redis protocol.
    Kv {
        #[command(subcommand)]
        cmd: kv_cmd::KvCmd,
    },
    /// Serve a volume (TOML config) over NBD until SIGINT or SIGTERM.
    Serve {
        /// The volume config.
        config: PathBuf,
        /// Listen on this Unix socket instead of the config's listener.
        #[arg(long)]
        socket: Option<PathBuf>,
        /// Directory that relative paths in the config are taken from.
        #[arg(long, default_value = ".")]
        data_dir: PathBuf,
        /// For testing: keep writes not yet synced apart and, on SIGUSR1,
        /// simulate a power cut on the real files (unsynced writes lost,
        /// kept or torn) and exit with status 86. The file (relative to
        /// the data directory) counts the simulated reboots.
        #[arg(long, value_name = "STATE_FILE")]
        simulate_power_loss: Option<PathBuf>,
        /// Serve Prometheus metrics over HTTP at http://ADDR/metrics
        /// (HOST:PORT; port 0 picks a free one and prints it).
        #[arg(long, value_name = "ADDR")]
        metrics: Option<String>,
        /// Take control commands (`tiermux ctl`) on this Unix socket
        /// (relative to the data directory): read and change the policy's
        /// parameters while serving.
        #[arg(long, value_name = "SOCKET")]
        control: Option<PathBuf>,
    },
    /// Talk to a served volume's control socket (`serve --control`):
    /// `get [KEY]` shows the policy's running parameters, `set KEY VALUE
    /// [KEY VALUE]...` changes them (write mode, dirty thresholds,
    /// controller settings; checked as a config file's are), `stats`
    /// prints its metrics.
    Ctl {
        /// The control socket.
        socket: PathBuf,
        /// The command and its arguments.
        #[arg(required = true, num_args = 1.., allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// Policies through NBD on emulated devices, measured with fio at rising
    /// concurrency, beside the physical limit and the simulator's prediction;
    /// and the NBD path against nbdkit. Needs fio and nbdkit.
    Bench {
        /// The bench file (default: experiments/bench/optane-flash.toml,
        /// built in).
        file: Option<PathBuf>,
        /// Output directory for bench.md, bench.csv and bench.json.
        #[arg(long, default_value = "out/bench")]
        out: PathBuf,
        /// Directory for the device files (default: under /dev/shm).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Only 1 request in flight and the acceptance's high load, shorter
        /// runs.
        #[arg(long)]
        quick: bool,
        /// Requests in flight to measure, comma-separated (replaces the
        /// file's levels).
        #[arg(long, value_delimiter = ',')]
        levels: Option<Vec<u32>>,
        /// Measured seconds per run (replaces the file's).
        #[arg(long)]
        runtime_s: Option<f64>,
        /// Unmeasured seconds before each run (replaces the file's, the
        /// policies' own ramps too).
        #[arg(long)]
        ramp_s: Option<f64>,
        /// Skip the comparison against nbdkit.
        #[arg(long)]
        no_reference: bool,
        /// Exit with status 1 when an acceptance bar is not met.
        #[arg(long)]
        check: bool,
    },
    /// List device profiles with their calibration points.
    Profiles {
        /// Print only where each parameter of each profile comes from, as
        /// a markdown table (the one in docs/profiles.md).
        #[arg(long)]
        sources: bool,
        /// Print throughput over concurrency (1 to 256 requests in flight)
        /// at 4, 32 and 64 KiB for these profiles (comma-separated), as the
        /// Orthus paper's Figure 2 measures devices.
        #[arg(long, value_delimiter = ',')]
        curve: Vec<String>,
    },
    /// List policies.
    Policies,
}

fn main() {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Demo { out, threads } => demo(out.as_deref(), threads),
        Cmd::Sim {
            file,
            out,
            threads,
            png,
            max_duration_s,
            max_keys,
        } => sim(
            &file,
            SimOptions {
                out,
                threads,
                png,
                max_duration_s,
                max_keys,
            },
        ),
        Cmd::Report { dirs, out, title } => report_cmd::run(&dirs, &out, &title),
        Cmd::Replay {
            trace,
            read,
            replay,
            policy,
            params,
            cache_pages,
            mrc,
            sample_rate,
        } => {
            if mrc {
                trace_cmd::mrc_cmd(&trace, &read, &policy, &params, &cache_pages, sample_rate)
            } else {
                trace_cmd::replay_cmd(&trace, &read, &replay, &policy, &params, &cache_pages)
            }
        }
        Cmd::Trace { cmd } => trace_cmd::run(cmd),
        Cmd::Kv { cmd } => kv_cmd::run(cmd),
        Cmd::Serve {
            config,
            socket,
            data_dir,
            simulate_power_loss,
            metrics,
            control,
        } => serve::serve(
            &config,
            &data_dir,
            serve::ServeOptions {
                socket: socket.as_deref(),
                power_loss: simulate_power_loss.as_deref(),
                metrics: metrics.as_deref(),
                control: control.as_deref(),
            },
        ),
        Cmd::Ctl { socket, command } => serve::ctl(&socket, &command.join(" ")),
        Cmd::Bench {
            file,
            out,
            data_dir,
            quick,
            levels,
            runtime_s,
            ramp_s,
            no_reference,
            check,
        } => bench_cmd(
            file.as_deref(),
            bench::BenchOptions {
                data_dir,
                out,
                quick,
                levels,
                runtime_s,
                ramp_s,
                no_reference,
            },
            check,
        ),
        Cmd::Profiles { sources, curve } => {
            if sources {
                let table = tiermux_device::profile::sources_markdown(&builtin_profiles());
                outln!("{}", table.trim_end());
                Ok(())
            } else if !curve.is_empty() {
                profiles::curves(&curve)
            } else {
                profiles::table();
                Ok(())
            }
        }
        Cmd::Policies => {
            outln!("{}", policies_cmd::listing().trim_end());
            Ok(())
        }
    };
    if let Err(e) = r {
        eprintln!("error: {e:#}");
        std::process::exit(2);
    }
}

fn bench_cmd(file: Option<&Path>, opts: bench::BenchOptions, check: bool) -> Result<()> {
    let text = match file {
        Some(f) => {
            std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?
        }
        None => bench::DEFAULT_BENCH.to_string(),
    };
    let report = bench::bench(&text, &opts).with_context(|| match file {
        Some(f) => format!("bench {}", f.display()),
        None => "bench (built-in experiments/bench/optane-flash.toml)".into(),
    })?;
    if check && !report.passed {
        bail!("an acceptance bar was not met (see above)");
    }
    Ok(())
}

fn threads(t: Option<usize>) -> usize {
    t.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

fn progress_bar(n: usize) -> ProgressBar {
    let pb = ProgressBar::new(n as u64);
    pb.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} runs {msg}",
        )
        .expect("template"),
    );
    pb
}

/// Writes `results.csv` and `results.json` for finished runs whose swept
/// `keys` took the values paired with each result; returns the run table.
fn write_results(
    dir: &Path,
    name: &str,
    description: &str,
    keys: &[String],
    runs: &[(&[toml::Value], &RunResult)],
) -> Result<Table> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let table = runs_table(keys, runs);
    std::fs::write(dir.join("results.csv"), table.to_csv())?;
    let records: Vec<RunRecord> = runs
        .iter()
        .map(|(s, r)| RunRecord::new(keys, s, r))
        .collect();
    let json = serde_json::json!({
        "experiment": name,
        "description": description,
        "runs": records,
    });
    std::fs::write(
        dir.join("results.json"),
        serde_json::to_string_pretty(&json)?,
    )?;
    Ok(table)
}

/// Says on standard error when the machine's memory runs fewer of an
/// experiment's key-value runs at once than `threads`
/// ([`tiermux_sim::memory::sweep_fit`]).
fn note_memory_threads(exp: &Experiment, threads: usize) {
    let configs: Vec<SimConfig> = exp.runs.iter().map(|(_, c)| c.clone()).collect();
    let memory_bytes = tiermux_sim::memory::machine_memory_bytes();
    let fit = tiermux_sim::memory::sweep_fit(&configs, threads, memory_bytes);
    if fit.threads < threads.min(configs.len()) {
        const GIB: f64 = (1u64 << 30) as f64;
        let copies = if fit.share_prefills {
            "two copies (its own and a shared prefill)"
        } else {
            "a copy (prefills not shared)"
        };
        eprintln!(
            "tiermux sim: key-value runs {} at a time, not {threads}: each may hold {copies} of its {:.1} GiB volume, and this machine has {:.1} GiB of memory",
            fit.threads,
            fit.volume_bytes as f64 / GIB,
            memory_bytes.unwrap_or(0) as f64 / GIB
        );
    }
}

/// What `tiermux sim` adds to an experiment file.
struct SimOptions {
    out: Option<PathBuf>,
    threads: Option<usize>,
    png: bool,
    max_duration_s: Option<f64>,
    max_keys: Option<u64>,
}

fn sim(file: &Path, opts: SimOptions) -> Result<()> {
    let SimOptions {
        out,
        threads: t,
        png,
        max_duration_s,
        max_keys,
    } = opts;
    let mut exp = Experiment::load(file)?;
    if let Some(cap) = max_duration_s {
        anyhow::ensure!(
            cap > 0.0 && cap.is_finite(),
            "--max-duration-s must be a positive number of seconds, got {cap}"
        );
        for (_, cfg) in &mut exp.runs {
            cut_run(cfg, cap);
        }
    }
    if let Some(n) = max_keys {
        anyhow::ensure!(n >= 1, "--max-keys must be at least 1");
        for (_, cfg) in exp.runs.iter_mut().filter(|(_, c)| c.kv.is_some()) {
            let keys = &mut cfg.workload.working_set_blocks;
            *keys = keys.map(|k| k.min(n));
        }
    }
    let out = out.unwrap_or_else(|| PathBuf::from("out").join(&exp.name));
    let pb = progress_bar(exp.runs.len());
    pb.set_message(exp.name.clone());
    note_memory_threads(&exp, threads(t));
    let start = Instant::now();
    let finished = exp.run_every(threads(t), &|n| pb.set_position(n as u64));
    pb.finish_and_clear();
    let finished = finished?;
    let pairs: Vec<(&[toml::Value], &RunResult)> = exp
        .runs
        .iter()
        .zip(&finished)
        .map(|((swept, _), r)| (swept.as_slice(), r))
        .collect();
    let table = write_results(&out, &exp.name, &exp.description, &exp.keys, &pairs)?;
    let series = timeseries_table(&exp.keys, &pairs);
    std::fs::write(out.join("timeseries.csv"), series.to_csv())?;
    let mut figures = Vec::new();
    for plot in &exp.plots {
        let data = match plot.data {
            tiermux_report::PlotData::Runs => &table,
            tiermux_report::PlotData::Timeseries => &series,
        };
        let opts = figures::FigureOptions {
            png,
            cut_short: max_duration_s.is_some() || max_keys.is_some(),
        };
        for path in figures::write_figure(file, &out, plot, data, opts)? {
            figures.push(path.display().to_string());
        }
    }
    outln!(
        "{}: {} runs in {:.1} s -> {}",
        exp.name,
        table.rows.len(),
        start.elapsed().as_secs_f64(),
        out.join("results.csv").display()
    );
    for f in figures {
        outln!("  figure {f}");
    }
    write_paper_rows(file, &exp, &table, &out)
}

/// Cuts a run to at most `cap_s` simulated seconds, its warm-up and a
/// device failure's moment in proportion, sampling at least ten times.
fn cut_run(cfg: &mut SimConfig, cap_s: f64) {
    if cfg.duration_s > cap_s {
        let scale = cap_s / cfg.duration_s;
        cfg.warmup_s *= scale;
        if let Some(f) = cfg.failure.as_mut() {
            f.at_s *= scale;
        }
        cfg.duration_s = cap_s;
    }
    cfg.sample_interval_ms = cfg.sample_interval_ms.min(cfg.duration_s * 100.0);
}

/// Evaluates the experiment's `[[paper]]` rows on its run table, writes
/// them to `paper.csv` and prints them.
fn write_paper_rows(file: &Path, exp: &Experiment, table: &Table, out: &Path) -> Result<()> {
    if exp.paper.is_empty() {
        return Ok(());
    }
    let rows = tiermux_report::evaluate_all(&exp.paper, table)
        .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
    std::fs::write(
        out.join("paper.csv"),
        tiermux_report::paper_table(&rows).to_csv(),
    )?;
    outln!(
        "  the papers' values beside ours ({}):",
        out.join("paper.csv").display()
    );
    for r in &rows {
        outln!(
            "    {}: {}: paper {}, ours {:.3} {}",
            r.spec.source,
            r.spec.what,
            r.spec.paper,
            r.ours,
            r.verdict()
        );
    }
    Ok(())
}

/// The demo's configuration at one load.
fn demo_config(policy: &str, load: f64) -> SimConfig {
    tiermux_sim::presets::orthus_optane_flash(policy, load, 0.95)
}

const SPLIT_RATES: usize = 20;

fn demo(out: Option<&Path>, t: Option<usize>) -> Result<()> {
    let loads = [0.5, 1.0, 2.0];
    let configs: Vec<SimConfig> = loads.iter().flat_map(|&l| demo_configs(l)).collect();
    let pb = progress_bar(configs.len());
    let start = Instant::now();
    let results = run_all(&configs, threads(t), &|n| pb.set_position(n as u64));
    pb.finish_and_clear();
    let results: Vec<RunResult> = results.into_iter().collect::<Result<_, _>>()?;
    let limit_ops = demo_limit_ops();
    outln!("tiermux demo: Optane SSD (905P) + Flash SSD (970 Pro), read-only, uniform, 95 % hits,");
    outln!("64 KiB blocks, 1 GiB cache. Load-1.0 = the smallest concurrency at which reads that");
    outln!("all hit reach the cache device's peak (Orthus §6.1). Simulated 4 s per run, first 3 s");
    outln!("excluded.\n");
    outln!(
        "{:>5} {:>7}  {:<22} {:>12} {:>7} {:>9} {:>9} {:>10}",
        "load",
        "workers",
        "policy",
        "ops/s",
        "GB/s",
        "mean µs",
        "p99 µs",
        "vs classic"
    );
    let per_load = 2 + SPLIT_RATES;
    let mut swept_values = Vec::new();
    for (li, &load) in loads.iter().enumerate() {
        let chunk = &results[li * per_load..(li + 1) * per_load];
        swept_values.extend(demo_rows(load, chunk, limit_ops));
    }
    outln!(
        "\n{} simulated runs in {:.1} s (NHC final state at Load-2.0: {}).",
        results.len(),
        start.elapsed().as_secs_f64(),
        results[2 * per_load + 1]
            .controller
            .iter()
            .filter(|(k, _)| k == "load_admit" || k == "data_admit")
            .map(|(k, v)| format!("{k}={v:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if let Some(dir) = out {
        let keys = vec!["load".to_string(), "configuration".to_string()];
        let pairs: Vec<(&[toml::Value], &RunResult)> = swept_values
            .iter()
            .map(|(s, r)| (s.as_slice(), *r))
            .collect();
        write_results(
            dir,
            "demo",
            "classic caching, NHC and the best static split on Optane+Flash",
            &keys,
            &pairs,
        )?;
        outln!("wrote {}", dir.join("results.csv").display());
    }
    Ok(())
}

/// The demo's runs at one load: classic, NHC, then every split rate.
fn demo_configs(load: f64) -> Vec<SimConfig> {
    let mut configs = vec![demo_config("classic", load), demo_config("nhc", load)];
    for i in 1..=SPLIT_RATES {
        let mut c = demo_config("split", load);
        let rate = toml::Value::Float(i as f64 / SPLIT_RATES as f64);
        c.params.insert("split_rate".into(), rate);
        configs.push(c);
    }
    configs
}

/// The two devices' aggregate read throughput at the demo's block size.
fn demo_limit_ops() -> f64 {
    let base = demo_config("classic", 1.0);
    let bs = base.block_size as u64;
    base.devices
        .iter()
        .map(|d| {
            let m = tiermux_device::lookup_profile(d, &[])
                .expect("builtin")
                .model()
                .expect("model");
            closed_loop_throughput(&m, Op::Read, bs, 256)
        })
        .sum()
}

/// Prints one load's rows (classic, NHC, the best split, the aggregate
/// bandwidth) and returns the swept values and results to save.
fn demo_rows(
    load: f64,
    chunk: &[RunResult],
    limit_ops: f64,
) -> Vec<(Vec<toml::Value>, &RunResult)> {
    let bs = demo_config("classic", 1.0).block_size as u64;
    let (classic, nhc) = (&chunk[0], &chunk[1]);
    let (best_i, best) = chunk[2..]
        .iter()
        .enumerate()
        .max_by(|a, b| {
            a.1.throughput_ops_per_s
                .total_cmp(&b.1.throughput_ops_per_s)
        })
        .expect("splits");
    let best_rate = (best_i + 1) as f64 / SPLIT_RATES as f64;
    let c = classic.throughput_ops_per_s;
    let line = |label: &str, r: &RunResult| {
        outln!(
            "{:>5} {:>7}  {:<22} {:>12.0} {:>7.2} {:>9.1} {:>9.1} {:>9.2}x",
            load,
            r.workers,
            label,
            r.throughput_ops_per_s,
            r.throughput_bytes_per_s / 1e9,
            r.mean_latency_us,
            r.p99_latency_us,
            r.throughput_ops_per_s / c
        );
    };
    line("classic caching", classic);
    line("NHC", nhc);
    line(&format!("best split (S={best_rate:.2})"), best);
    outln!(
        "{:>5} {:>7}  {:<22} {:>12.0} {:>7.2} {:>9} {:>9} {:>9.2}x",
        "",
        "",
        "aggregate bandwidth",
        limit_ops,
        limit_ops * bs as f64 / 1e9,
        "-",
        "-",
        limit_ops / c
    );
    let sw = |extra: &str| vec![toml::Value::Float(load), toml::Value::String(extra.into())];
    vec![
        (sw("classic"), classic),
        (sw("nhc"), nhc),
        (sw(&format!("best split {best_rate:.2}")), best),
    ]
}

/// Parses KEY=VALUE policy parameters: integers, reals and true/false
/// become numbers and booleans, anything else a string.
pub(crate) fn parse_params(items: &[String]) -> Result<tiermux_core::Params> {
    let mut p = tiermux_core::Params::new();
    for item in items {
        let Some((key, value)) = item.split_once('=') else {
            bail!("--param '{item}': expected KEY=VALUE");
        };
        let v = if let Ok(i) = value.parse::<i64>() {
            tiermux_core::ParamValue::Int(i)
        } else if let Ok(x) = value.parse::<f64>() {
            tiermux_core::ParamValue::Float(x)
        } else if let Ok(b) = value.parse::<bool>() {
            tiermux_core::ParamValue::Bool(b)
        } else {
            tiermux_core::ParamValue::Str(value.to_string())
        };
        p.set(key.trim(), v);
    }
    Ok(p)
}
