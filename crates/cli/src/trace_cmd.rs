//! `tiermux replay` and `tiermux trace`: block traces in any supported
//! format, their statistics, conversion between formats, and hit ratios
//! by cache size.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Subcommand;
use tiermux_core::replacement::ReplacementKind;
use tiermux_trace::arrivals::Arrivals;
use tiermux_trace::info::TraceInfo;
use tiermux_trace::replay::{replay_accesses_with, TraceVolume, RUN_LENGTH_BUCKETS};
use tiermux_trace::synth::SynthSpec;
use tiermux_trace::{formats, BlockTrace, Format, PageTrace};

/// `tiermux trace` subcommands.
#[derive(Subcommand)]
pub enum TraceCmd {
    /// Requests, pages, distinct pages, the read/write split, request
    /// sizes, sequentiality and footprint of a trace.
    Info {
        /// The trace (plain or zstd-compressed).
        trace: PathBuf,
        #[command(flatten)]
        read: ReadOpts,
    },
    /// Translate a trace between formats (zstd-compressed when OUTPUT ends
    /// in .zst). Prints what the output format cannot keep.
    Convert {
        /// The trace to read.
        input: PathBuf,
        /// The trace to write.
        output: PathBuf,
        #[command(flatten)]
        read: ReadOpts,
        /// The output format (default: from OUTPUT's name).
        #[arg(long)]
        to: Option<String>,
    },
    /// Write a synthetic MSR-like trace from a preset (rsrch_0, wdev_0,
    /// stg_0, ts_0) and parameter overrides.
    Generate {
        /// The trace to write (format from its name, else MSR CSV).
        output: PathBuf,
        /// The preset.
        #[arg(long, default_value = "rsrch_0")]
        preset: String,
        /// A parameter override, KEY=VALUE (repeatable), e.g. requests=100000.
        #[arg(long = "set")]
        sets: Vec<String>,
        /// The output format (default: from OUTPUT's name, else msr).
        #[arg(long)]
        to: Option<String>,
    },
    /// Replay every trace, policy and cache size of a sweep file (TOML;
    /// see docs/traces.md) and write results.csv and its figures.
    Sweep {
        /// The sweep file.
        file: PathBuf,
        /// Output directory (default: out/NAME).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Replays run at once (default: the machine's cores).
        #[arg(long)]
        threads: Option<usize>,
        /// Only check the file (keys, policies, plots) and exit.
        #[arg(long)]
        check: bool,
        /// Also write each figure as PNG beside its SVG.
        #[arg(long)]
        png: bool,
        /// Replay only each trace's first N requests (checks that a file
        /// runs and draws; the numbers mean little).
        #[arg(long, value_name = "N")]
        max_requests: Option<usize>,
    },
}

/// How to read a trace.
#[derive(clap::Args)]
pub struct ReadOpts {
    /// The trace format (default: from the file name): arc, msr, alibaba,
    /// tencent, blkparse[:ACTION], oracle-general[:ID_UNIT],
    /// oracle-general-opns[:ID_UNIT], vscsi, csv:SPEC (libCacheSim's
    /// column spec, e.g. 'csv:time-col=1,obj-id-col=2,obj-size-col=3,op-col=4').
    #[arg(long)]
    pub format: Option<String>,
    /// Page size in bytes that requests are split into (default 4096;
    /// 512 for the ARC format, its block).
    #[arg(long)]
    pub page_size: Option<u64>,
}

impl ReadOpts {
    /// The format and page size for `path`.
    fn resolve(&self, path: &Path) -> Result<(Format, u64)> {
        let format = Format::resolve(self.format.as_deref(), path)?;
        let page_bytes = match self.page_size {
            Some(0) => bail!("--page-size must be at least 1 byte"),
            Some(b) => b,
            None if format == Format::Arc => 512,
            None => 4096,
        };
        Ok((format, page_bytes))
    }

    /// Reads `path`, returning the trace, its format and the page size.
    pub fn read(&self, path: &Path) -> Result<(BlockTrace, Format, u64)> {
        let (format, page_bytes) = self.resolve(path)?;
        let trace = formats::read(path, &format)?;
        Ok((trace, format, page_bytes))
    }

    /// Reads `path` as runs of pages (compact, for replay), with the
    /// page size.
    pub fn read_pages(&self, path: &Path) -> Result<(PageTrace, u64)> {
        let (format, page_bytes) = self.resolve(path)?;
        Ok((formats::read_pages(path, &format, page_bytes)?, page_bytes))
    }
}

/// Runs a `tiermux trace` subcommand.
pub fn run(cmd: TraceCmd) -> Result<()> {
    match cmd {
        TraceCmd::Sweep {
            file,
            out,
            threads,
            check,
            png,
            max_requests,
        } => {
            if check {
                crate::trace_sweep::check(&file)?
            } else {
                let opts = crate::trace_sweep::RunOptions {
                    threads: crate::threads(threads),
                    png,
                    max_requests,
                };
                crate::trace_sweep::run(&file, out, &opts)?
            }
        }
        TraceCmd::Info { trace, read } => {
            let (t, format, page_bytes) = read.read(&trace)?;
            outln!("{} ({format:?})", trace.display());
            outln!("{}", TraceInfo::of(&t, page_bytes).report().trim_end());
            let arrivals = Arrivals::of(&t).report();
            if !arrivals.is_empty() {
                outln!("{}", arrivals.trim_end());
            }
        }
        TraceCmd::Convert {
            input,
            output,
            read,
            to,
        } => {
            let (t, _, page_bytes) = read.read(&input)?;
            let format = Format::resolve(to.as_deref(), &output)?;
            let notes = formats::write(&t, &output, &format, page_bytes)?;
            outln!(
                "{}: {} requests written as {format:?}",
                output.display(),
                t.requests.len()
            );
            for n in notes {
                outln!("note: {n}");
            }
        }
        TraceCmd::Generate {
            output,
            preset,
            sets,
            to,
        } => {
            let mut spec = SynthSpec::preset(&preset)?;
            for kv in &sets {
                let Some((k, v)) = kv.split_once('=') else {
                    bail!("--set '{kv}': expected KEY=VALUE");
                };
                spec.set(k.trim(), v.trim())?;
            }
            let format = match to {
                Some(f) => f.parse()?,
                None => Format::from_file_name(&output).unwrap_or(Format::Msr),
            };
            let t = spec.generate()?;
            let notes = formats::write(&t, &output, &format, spec.page_bytes)?;
            outln!(
                "{}: {} requests ({preset}) written as {format:?}",
                output.display(),
                t.requests.len()
            );
            for n in notes {
                outln!("note: {n}");
            }
        }
    }
    Ok(())
}

/// How `tiermux replay` lays out the caches and what it writes besides.
#[derive(clap::Args)]
pub struct ReplayOpts {
    /// Replay on two cache devices: this share of each cache size in a
    /// first (DRAM) device, the rest in a second (NVRAM), over home
    /// (0.5 for the Hibachi paper's setup). For TICA, which runs on a DRAM
    /// and two SSDs of the cache size each: the DRAM's size as a share of
    /// one SSD (0.1 if not given, the paper's 1 % over 10 %).
    #[arg(long)]
    pub dram_share: Option<f64>,
    /// Write the storage writes of each size as a fio iolog (version 2)
    /// to PATH.SIZE, for `fio --read_iolog=... --replay_redirect=DEVICE`.
    #[arg(long)]
    pub flush_log: Option<PathBuf>,
}

/// `tiermux replay`: hit ratios of `policy` at each cache size.
pub fn replay_cmd(
    trace: &Path,
    read: &ReadOpts,
    opts: &ReplayOpts,
    policy: &str,
    params: &[String],
    sizes: &[usize],
) -> Result<()> {
    if sizes.contains(&0) {
        bail!("--cache-pages: sizes must be at least 1");
    }
    if let Some(s) = opts.dram_share {
        if !(s > 0.0 && s < 1.0) {
            bail!("--dram-share must be in (0, 1), got {s}");
        }
    }
    let fast: Option<ReplacementKind> = policy.parse().ok();
    let params = crate::parse_params(params)?;
    if fast.is_some()
        && (params.iter().next().is_some() || opts.dram_share.is_some() || opts.flush_log.is_some())
    {
        bail!("pure replacement ({policy}) takes no --param, --dram-share or --flush-log; use --policy classic --param replacement={policy}, or a registered policy");
    }
    // Check the policy and its parameters, and find the cache shape it
    // builds on, before reading the trace (`Err`: pure replacement,
    // which needs none).
    let shape = match fast {
        Some(kind) => Err(kind),
        None => Ok(TraceVolume::fitting(policy, &params, 4, opts.dram_share)?),
    };
    let t0 = Instant::now();
    let (t, page_bytes) = read.read_pages(trace)?;
    let load_s = t0.elapsed().as_secs_f64();
    outln!(
        "{}: {} requests, {} references to {page_bytes}-byte pages, policy {policy}",
        trace.display(),
        t.requests,
        t.page_count(),
    );
    match shape {
        Err(kind) => {
            replay_replacement(&t, kind, sizes);
            outln!("(trace read in {load_s:.2} s)");
        }
        Ok(shape) => {
            let run = PolicyReplay {
                policy,
                params: &params,
                shape,
                page_bytes,
                flush_log: opts.flush_log.as_deref(),
            };
            run.print_table(&t, sizes)?;
            outln!("(trace read in {load_s:.2} s; read % and write % are hit ratios of reads and writes, DEVICE % of reads served by a device, DEVICE wr pages written to a device; stored pages are the writes reaching home, as the requests the policy hands out (runs: a flush of consecutive pages is one); RAID-5 MB/s is their modelled write throughput on six 7,200 rpm disks, one request at a time)");
        }
    }
    Ok(())
}

/// Hit ratio of a pure replacement algorithm at each size, one line each.
fn replay_replacement(t: &PageTrace, kind: ReplacementKind, sizes: &[usize]) {
    outln!("{:>12} {:>10} {:>14}", "cache pages", "hit %", "refs/s");
    for &n in sizes {
        let s = Instant::now();
        let h = tiermux_trace::replay::hit_ratio(t.pages(), kind, n);
        let secs = s.elapsed().as_secs_f64();
        outln!(
            "{n:>12} {:>10.2} {:>14.0}",
            h * 100.0,
            t.page_count() as f64 / secs
        );
    }
}

/// A registered policy replayed at several cache sizes of one shape.
struct PolicyReplay<'a> {
    policy: &'a str,
    params: &'a tiermux_core::Params,
    shape: TraceVolume,
    page_bytes: u64,
    flush_log: Option<&'a Path>,
}

impl PolicyReplay<'_> {
    fn volume(&self, cache_pages: u64) -> TraceVolume {
        TraceVolume {
            cache_pages,
            ..self.shape
        }
    }

    /// Replays every size and prints one line each: hits on every cache
    /// device, pages written to each after the first (NVRAM, the SSDs:
    /// the devices whose endurance counts), named as the shape names
    /// them, and the writes reaching home.
    fn print_table(&self, t: &PageTrace, sizes: &[usize]) -> Result<()> {
        let devices = self.volume(1).spec(1).devices;
        let caches: Vec<usize> = (0..devices.len() - 1).collect();
        let mut head = vec!["hit %".to_string(), "read %".to_string()];
        head.extend(caches.iter().map(|&d| format!("{} %", devices[d].name)));
        head.push("write %".into());
        head.extend(
            caches[1..]
                .iter()
                .map(|&d| format!("{} wr", devices[d].name)),
        );
        let widths: Vec<usize> = head.iter().map(|h| h.len().max(7)).collect();
        outln!(
            "{:>12}{} {:>12} {:>9} {:>8} {:>11} {:>12}",
            "cache pages",
            aligned(&head, &widths),
            "stored pages",
            "runs",
            "mean run",
            "RAID-5 MB/s",
            "refs/s"
        );
        let mut histograms = Vec::with_capacity(sizes.len());
        for &n in sizes {
            let s = Instant::now();
            let mut array = ArrayWrites::new(self.page_bytes);
            let r = replay_accesses_with(
                self.policy,
                self.params,
                t.page_accesses(),
                self.volume(n as u64),
                self.flush_log.is_some(),
                &mut |start, pages| array.write(start, pages),
            )?;
            let secs = s.elapsed().as_secs_f64();
            let stored = r.storage_blocks;
            let mut cells = vec![
                format!("{:.2}", r.hit_ratio() * 100.0),
                format!("{:.2}", r.read_hit_ratio() * 100.0),
            ];
            cells.extend(
                caches
                    .iter()
                    .map(|&d| format!("{:.2}", r.read_hit_ratio_on(d) * 100.0)),
            );
            cells.push(format!("{:.2}", r.write_hit_ratio() * 100.0));
            cells.extend(caches[1..].iter().map(|&d| r.blocks_written(d).to_string()));
            outln!(
                "{n:>12}{} {stored:>12} {:>9} {:>8.2} {:>11.2} {:>12.0}",
                aligned(&cells, &widths),
                r.storage_runs(),
                stored as f64 / r.storage_runs().max(1) as f64,
                array.mb_per_s(),
                t.page_count() as f64 / secs
            );
            if let (Some(path), Some(runs)) = (self.flush_log, &r.storage_log) {
                let file = PathBuf::from(format!("{}.{n}", path.display()));
                write_iolog(&file, runs, self.page_bytes)?;
            }
            histograms.push((n, r.run_length_histogram()));
        }
        print_run_lengths(&histograms);
        Ok(())
    }
}

/// The storage write requests of each cache size by length, in pages.
fn print_run_lengths(histograms: &[(usize, [u64; RUN_LENGTH_BUCKETS.len()])]) {
    outln!("storage write requests by length (pages):");
    let widths: Vec<usize> = RUN_LENGTH_BUCKETS.iter().map(|b| b.len().max(8)).collect();
    let head: Vec<String> = RUN_LENGTH_BUCKETS.iter().map(|b| b.to_string()).collect();
    outln!("{:>12}{}", "cache pages", aligned(&head, &widths));
    for (n, counts) in histograms {
        let cells: Vec<String> = counts.iter().map(u64::to_string).collect();
        outln!("{n:>12}{}", aligned(&cells, &widths));
    }
}

/// Cells right-aligned to their widths, each after a space.
fn aligned(cells: &[String], widths: &[usize]) -> String {
    let mut line = String::new();
    for (c, w) in cells.iter().zip(widths) {
        line += &format!(" {c:>w$}");
    }
    line
}

/// The Hibachi paper's RAID-5 array (six 7,200 rpm disks), written by a
/// replay's storage write requests as the replay makes them, one at a
/// time (fio's `ioengine=sync`), so that no log of them is kept.
pub(crate) struct ArrayWrites {
    array: tiermux_device::disk::Raid5,
    page_bytes: u64,
}

impl ArrayWrites {
    /// An idle array for requests counted in pages of `page_bytes`.
    pub(crate) fn new(page_bytes: u64) -> ArrayWrites {
        ArrayWrites {
            array: tiermux_device::disk::Raid5::hibachi_paper(),
            page_bytes,
        }
    }

    /// Serves a write of `pages` pages from page `start`.
    pub(crate) fn write(&mut self, start: u64, pages: u64) {
        self.array
            .write(start * self.page_bytes, pages * self.page_bytes);
    }

    /// Write throughput so far, MB/s.
    pub(crate) fn mb_per_s(&self) -> f64 {
        self.array.write_bytes_per_s() / 1e6
    }
}

/// Writes storage-write runs as a fio iolog (version 2) on a file named
/// `array` (replay it with `--replay_redirect`).
fn write_iolog(path: &Path, runs: &[(u64, u64)], page_bytes: u64) -> Result<()> {
    use std::io::Write as _;
    let f = std::fs::File::create(path)
        .with_context(|| format!("{}: cannot create", path.display()))?;
    let mut out = std::io::BufWriter::new(f);
    writeln!(out, "fio version 2 iolog\narray add\narray open")?;
    for &(start, len) in runs {
        writeln!(
            out,
            "array write {} {}",
            start * page_bytes,
            len * page_bytes
        )?;
    }
    writeln!(out, "array close")?;
    out.flush()
        .with_context(|| format!("{}: cannot write", path.display()))?;
    Ok(())
}

/// `tiermux replay --mrc`: LRU's hit ratio at many cache sizes in one pass.
pub fn mrc_cmd(
    trace: &Path,
    read: &ReadOpts,
    policy: &str,
    params: &[String],
    sizes: &[usize],
    sample_rate: Option<f64>,
) -> Result<()> {
    if policy != "lru" || !params.is_empty() {
        bail!("--mrc computes LRU's curve: use --policy lru and no --param");
    }
    if sizes.contains(&0) {
        bail!("--cache-pages: sizes must be at least 1");
    }
    if let Some(r) = sample_rate {
        if !(r > 0.0 && r <= 1.0) {
            bail!("--sample-rate must be in (0, 1], got {r}");
        }
    }
    let (t, _) = read.read_pages(trace)?;
    if let Some(rate) = sample_rate {
        return sampled_mrc(&t, trace, sizes, rate);
    }
    let start = Instant::now();
    let m = tiermux_trace::MissRatioCurve::of(t.pages(), t.page_count() as usize);
    let secs = start.elapsed().as_secs_f64();
    outln!(
        "{}: {} page references, {} distinct pages; LRU's curve in one pass ({:.2} s, {:.0} refs/s)",
        trace.display(),
        m.references(),
        m.distinct_pages(),
        secs,
        m.references() as f64 / secs.max(1e-9)
    );
    outln!("{:>12} {:>10}", "cache pages", "hit %");
    let points: Vec<(usize, f64)> = if sizes.is_empty() {
        m.curve(20)
    } else {
        sizes.iter().map(|&n| (n, m.hit_ratio(n))).collect()
    };
    for (n, h) in points {
        outln!("{n:>12} {:>10.2}", h * 100.0);
    }
    Ok(())
}

/// `tiermux replay --mrc --sample-rate R`: LRU's curve estimated from a
/// spatial sample of the pages.
fn sampled_mrc(t: &PageTrace, trace: &Path, sizes: &[usize], rate: f64) -> Result<()> {
    let start = Instant::now();
    let m = tiermux_trace::SampledCurve::of(t.pages(), rate);
    let secs = start.elapsed().as_secs_f64();
    outln!(
        "{}: {} page references, {} sampled at rate {rate}; LRU's curve estimated in {:.2} s",
        trace.display(),
        t.page_count(),
        m.sampled_references(),
        secs
    );
    outln!("{:>12} {:>10}", "cache pages", "hit %");
    let sizes: Vec<usize> = if sizes.is_empty() {
        (1..=20).map(|i| i * 10_000).collect()
    } else {
        sizes.to_vec()
    };
    for n in sizes {
        outln!("{n:>12} {:>10.2}", m.hit_ratio(n) * 100.0);
    }
    Ok(())
}
