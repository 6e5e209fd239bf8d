//! A bench run, phase by phase: each device alone (the physical limit),
//! the simulator's prediction, every policy at every level, the acceptance
//! verdicts and the NBD path against nbdkit. Tables are printed as they are
//! measured and collected for `bench.md`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tiermux_engine::VolumeConfig;
use tiermux_server::server::LiveStats;

use super::config::{BenchConfig, BenchPolicy, BenchWorkload};
use super::fio::{fio, random_args, Seeds};
use super::judge::judge;
use super::predict::predict;
use super::reference::reference;
use super::report::{write_report, Report, Row};
use super::BenchOptions;
use crate::serve::Background;

/// The simulator's (ops/s, mean µs) per (workload, policy label, level).
type Predictions = BTreeMap<(String, String, u32), (f64, f64)>;

/// A run in progress.
pub(super) struct Session<'a> {
    cfg: &'a BenchConfig,
    data: &'a Path,
    report: Report,
    md: String,
    seeds: Seeds,
}

impl<'a> Session<'a> {
    /// Runs every phase and writes the report to `opts.out`.
    pub(super) fn run(cfg: &'a BenchConfig, data: &'a Path, opts: &BenchOptions) -> Result<Report> {
        let started = Instant::now();
        let mut s = Session {
            cfg,
            data,
            report: Report::default(),
            md: String::new(),
            seeds: Seeds(0),
        };
        s.intro();
        s.devices_alone()?;
        let (predictions, sim_limits) = predict(cfg)?;
        s.report.sim_limits = sim_limits;
        for w in &cfg.workload {
            s.policies(w, &predictions)?;
        }
        s.acceptance();
        if let Some(r) = &cfg.reference {
            let md = &mut s.md;
            let rows = reference(cfg, r, data, &mut |line| say_to(md, line))?;
            s.report.rows.extend(rows);
        }
        let verdict = if s.report.passed {
            "Every acceptance bar met"
        } else {
            "NOT every acceptance bar met"
        };
        s.say(format!(
            "\n{verdict} in {:.0} s.",
            started.elapsed().as_secs_f64()
        ));
        write_report(&opts.out, &s.md, &s.report)?;
        outln!("wrote {}", opts.out.join("bench.md").display());
        Ok(s.report)
    }

    fn say(&mut self, line: String) {
        say_to(&mut self.md, line);
    }

    fn intro(&mut self) {
        let cfg = self.cfg;
        self.say(format!(
            "# tiermux bench\n\n{}\n\nFast device `{}` ({} MiB, the cache), slow device `{}` ({} MiB); {}-byte random requests over a {:.1} MiB working set (cache / {}), one NBD connection; {} s measured per level after a {} s ramp{}.\n",
            cfg.description,
            cfg.fast_profile,
            (cfg.cache_blocks() * cfg.block_size as u64) >> 20,
            cfg.slow_profile,
            cfg.volume_bytes() >> 20,
            cfg.block_size,
            cfg.working_set_bytes() as f64 / (1 << 20) as f64,
            cfg.hit_ratio,
            cfg.runtime_s,
            cfg.ramp_s,
            own_ramps(cfg)
        ));
    }

    /// Each device alone through a pass-through volume: the physical limit
    /// of each workload is the sum of the devices' peaks.
    fn devices_alone(&mut self) -> Result<()> {
        let cfg = self.cfg;
        self.say("## Each device alone (pass-through, fio through NBD), ops/s\n".into());
        let levels: String = cfg.levels.iter().map(|l| format!(" {l} |")).collect();
        let rules: String = cfg.levels.iter().map(|_| "---|").collect();
        self.say(format!("| workload | device |{levels} peak |"));
        self.say(format!("|---|---|{rules}---|"));
        let cache = cfg.cache_blocks() * cfg.block_size as u64;
        let devices = [
            ("fast", &cfg.fast_profile, cache),
            ("slow", &cfg.slow_profile, cfg.volume_bytes()),
        ];
        for w in &cfg.workload {
            let mut limit = 0.0;
            for (name, profile, size) in devices {
                limit += self.device_alone(w, name, profile, size)?;
            }
            self.report.limits.insert(w.name.clone(), limit);
        }
        let limits: Vec<String> = self
            .report
            .limits
            .iter()
            .map(|(w, l)| format!("{w} {l:.0} ops/s"))
            .collect();
        self.say(format!(
            "\nPhysical limit (sum of the two peaks): {}.\n",
            limits.join(", ")
        ));
        Ok(())
    }

    /// One device at every level; returns its peak ops/s.
    fn device_alone(
        &mut self,
        w: &BenchWorkload,
        name: &str,
        profile: &str,
        size: u64,
    ) -> Result<f64> {
        let cfg = self.cfg;
        let dir = self.data.join(format!("alone-{name}"));
        fresh_dir(&dir)?;
        let devices = [(name, None, Some(profile))];
        let vc = volume_config(cfg, &dir, size, &devices, "passthrough", &BTreeMap::new())?;
        let server = Background::start(vc)?;
        let mut line = format!("| {} | {name} ({profile}) |", w.name);
        let mut peak: f64 = 0.0;
        for &level in &cfg.levels {
            let secs = cfg.device_ramp_s + cfg.device_runtime_s;
            let ws = cfg.working_set_bytes().min(size);
            let mut args = random_args(
                &server.uri,
                w,
                cfg.block_size,
                level,
                ws,
                secs,
                self.seeds.next(),
            );
            if cfg.device_ramp_s > 0.0 {
                let ms = (cfg.device_ramp_s * 1000.0).round() as u64;
                args.push(format!("--ramp_time={ms}ms"));
            }
            let f = fio(&dir, &args)?;
            peak = peak.max(f.ops_per_s);
            line.push_str(&format!(" {:.0} |", f.ops_per_s));
            self.report.rows.push(Row {
                section: "device".into(),
                workload: w.name.clone(),
                config: name.to_string(),
                inflight: level,
                ops_per_s: f.ops_per_s,
                read_mean_us: f.read_mean_us,
                read_p99_us: f.read_p99_us,
                ..Row::default()
            });
        }
        server.stop()?;
        line.push_str(&format!(" {peak:.0} |"));
        self.say(line);
        Ok(peak)
    }

    /// Every policy on workload `w` at every level, as one table.
    fn policies(&mut self, w: &BenchWorkload, predictions: &Predictions) -> Result<()> {
        let cfg = self.cfg;
        let limit = self.report.limits[&w.name];
        let sim_limit = self
            .report
            .sim_limits
            .get(&w.name)
            .copied()
            .unwrap_or(f64::NAN);
        self.say(format!(
            "## {}: {} % reads (limit {:.0} ops/s measured, {:.0} simulated)\n",
            w.name, w.read_percent, limit, sim_limit
        ));
        self.say("| in flight | policy | ops/s | read mean µs | read p99 µs | hits % | slow reads % | vs classic | vs limit | sim ops/s | sim mean µs | sim vs limit | controller |".into());
        self.say("|---|---|---|---|---|---|---|---|---|---|---|---|---|".into());
        let mut by_policy: Vec<Vec<Row>> = Vec::new();
        for p in &cfg.policy {
            by_policy.push(self.measure_policy(w, p, predictions)?);
        }
        let base = cfg
            .policy
            .iter()
            .position(|p| p.label == cfg.acceptance.baseline)
            .unwrap_or(0);
        for li in 0..cfg.levels.len() {
            for rows in &by_policy {
                let line = policy_line(&rows[li], by_policy[base][li].ops_per_s, limit, sim_limit);
                self.say(line);
            }
        }
        self.say(String::new());
        self.report.rows.extend(by_policy.into_iter().flatten());
        Ok(())
    }

    /// One policy on a fresh volume whose fast device one sequential pass
    /// filled (reads or writes, as the policy's entry says), at every
    /// level: a ramp, then the measured run.
    fn measure_policy(
        &mut self,
        w: &BenchWorkload,
        p: &BenchPolicy,
        predictions: &Predictions,
    ) -> Result<Vec<Row>> {
        let cfg = self.cfg;
        let (bs, ws) = (cfg.block_size, cfg.working_set_bytes());
        let dir = self.data.join(format!("policy-{}", p.name));
        fresh_dir(&dir)?;
        let cache = cfg.cache_blocks() * bs as u64;
        let devices = [
            ("fast", Some(cache), Some(cfg.fast_profile.as_str())),
            ("slow", None, Some(cfg.slow_profile.as_str())),
        ];
        let vc = volume_config(cfg, &dir, cfg.volume_bytes(), &devices, &p.name, &p.params)?;
        let server = Background::start(vc)?;
        let warm = [
            "--name=warm".into(),
            "--ioengine=nbd".into(),
            format!("--uri={}", server.uri),
            format!("--rw={}", p.warm.fio_rw()),
            "--bs=256k".into(),
            "--iodepth=8".into(),
            format!("--size={ws}"),
        ];
        fio(&dir, &warm)?;
        let mut rows = Vec::new();
        for &level in &cfg.levels {
            let ramp_s = p.ramp_s(cfg);
            if ramp_s > 0.0 {
                let args = random_args(&server.uri, w, bs, level, ws, ramp_s, self.seeds.next());
                fio(&dir, &args)?;
            }
            let before = server.live();
            let args = random_args(
                &server.uri,
                w,
                bs,
                level,
                ws,
                cfg.runtime_s,
                self.seeds.next(),
            );
            let f = fio(&dir, &args)?;
            // The loop publishes its counters every 20 ms.
            std::thread::sleep(Duration::from_millis(50));
            let after = server.live();
            let (hit, share) = deltas(&before, &after);
            let sim = predictions.get(&(w.name.clone(), p.label.clone(), level));
            rows.push(Row {
                section: "policy".into(),
                workload: w.name.clone(),
                config: p.label.clone(),
                inflight: level,
                ops_per_s: f.ops_per_s,
                read_mean_us: f.read_mean_us,
                read_p99_us: f.read_p99_us,
                hit_ratio: hit,
                slow_read_share: share,
                controller: controller_text(&before, &after),
                sim_ops_per_s: sim.map(|s| s.0),
                sim_mean_us: sim.map(|s| s.1),
            });
        }
        server.stop()?;
        Ok(rows)
    }

    fn acceptance(&mut self) {
        let (verdicts, passed) = judge(self.cfg, &self.report);
        self.say("## Acceptance\n".into());
        for v in &verdicts {
            self.say(format!("- {v}"));
        }
        self.say(String::new());
        self.report.verdicts = verdicts;
        self.report.passed = passed;
    }
}

/// Prints `line` and adds it to the report's text.
fn say_to(md: &mut String, line: String) {
    outln!("{line}");
    md.push_str(&line);
    md.push('\n');
}

/// A policy table line: `r` beside the baseline's ops/s, the measured
/// limit and the simulated one.
fn policy_line(r: &Row, baseline_ops_per_s: f64, limit: f64, sim_limit: f64) -> String {
    let pct = |x: Option<f64>| x.map(|v| format!("{:.1}", v * 100.0)).unwrap_or("-".into());
    let opt = |x: Option<f64>, prec: usize| x.map(|v| format!("{v:.prec$}")).unwrap_or("-".into());
    format!(
        "| {} | {} | {:.0} | {:.1} | {:.1} | {} | {} | {:.2}x | {:.2} | {} | {} | {} | {} |",
        r.inflight,
        r.config,
        r.ops_per_s,
        r.read_mean_us,
        r.read_p99_us,
        pct(r.hit_ratio),
        pct(r.slow_read_share),
        r.ops_per_s / baseline_ops_per_s,
        r.ops_per_s / limit,
        opt(r.sim_ops_per_s, 0),
        opt(r.sim_mean_us, 1),
        opt(r.sim_ops_per_s.map(|s| s / sim_limit), 2),
        if r.controller.is_empty() {
            "-"
        } else {
            &r.controller
        },
    )
}

/// A fresh, empty directory.
pub(super) fn fresh_dir(d: &Path) -> Result<()> {
    if d.exists() {
        std::fs::remove_dir_all(d).with_context(|| format!("cannot clear {}", d.display()))?;
    }
    std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))
}

/// The volume config of a bench run.
pub(super) fn volume_config(
    cfg: &BenchConfig,
    dir: &Path,
    size: u64,
    devices: &[(&str, Option<u64>, Option<&str>)],
    policy: &str,
    params: &BTreeMap<String, toml::Value>,
) -> Result<VolumeConfig> {
    use toml::Value;
    let mut t = toml::Table::new();
    t.insert("size".into(), Value::Integer(size as i64));
    t.insert("block_size".into(), Value::Integer(cfg.block_size as i64));
    t.insert("listen".into(), Value::String("unix:bench.sock".into()));
    // The warm pass reads the working set sequentially: reading ahead
    // would also read (and a cache admit) the range after its end, which
    // the random runs never touch, so the cache would hold less of the
    // working set than the bench sizes it for.
    t.insert("read_ahead".into(), Value::Boolean(false));
    let devs = devices
        .iter()
        .map(|(name, size, profile)| {
            let mut d = toml::Table::new();
            d.insert("name".into(), Value::String(name.to_string()));
            d.insert("path".into(), Value::String(format!("{name}.img")));
            if let Some(s) = size {
                d.insert("size".into(), Value::Integer(*s as i64));
            }
            if let Some(p) = profile {
                d.insert("profile".into(), Value::String(p.to_string()));
            }
            Value::Table(d)
        })
        .collect();
    t.insert("device".into(), Value::Array(devs));
    let mut p = toml::Table::new();
    p.insert("name".into(), Value::String(policy.into()));
    for (k, v) in params {
        p.insert(k.clone(), v.clone());
    }
    t.insert("policy".into(), Value::Table(p));
    let profiles = cfg
        .profile
        .iter()
        .map(Value::try_from)
        .collect::<Result<Vec<_>, _>>()?;
    t.insert("profile".into(), Value::Array(profiles));
    Ok(VolumeConfig::parse(&toml::to_string(&t)?, dir)?)
}

/// Counters between two snapshots: (hit ratio, slow device's share of
/// device read bytes).
pub(super) fn deltas(a: &LiveStats, b: &LiveStats) -> (Option<f64>, Option<f64>) {
    let hits = b.volume.read_hits - a.volume.read_hits;
    let misses = b.volume.read_misses - a.volume.read_misses;
    let hit = (hits + misses > 0).then(|| hits as f64 / (hits + misses) as f64);
    let read: Vec<u64> = b
        .devices
        .iter()
        .zip(&a.devices)
        .map(|(y, x)| y.read_bytes - x.read_bytes)
        .collect();
    let total: u64 = read.iter().sum();
    let share = (total > 0 && read.len() > 1).then(|| *read.last().unwrap() as f64 / total as f64);
    (hit, share)
}

/// NHC's controls and the cache's dirty share, as "data_admit=0.00
/// load_admit=0.49 dirty=12%" (dirty cached blocks can only be read from the
/// cache, which limits what NHC can offload); MOST's offload ratio, its
/// mirrored segments and the two latencies it balances, as "offload=0.40
/// mirrored=52 latency=851/700us"; all read at the end of a measured run
/// (`l`). What a tiering policy moved during the run (since `start`, the
/// snapshot at its beginning), MiB promoted and demoted and, when any,
/// copied into the mirrored class: "moved=12/3MiB mirror_copied=4MiB".
pub(super) fn controller_text(start: &LiveStats, l: &LiveStats) -> String {
    let get = |name: &str| l.controller.iter().find(|(k, _)| k == name).map(|x| x.1);
    let moved_mib = |name: &str| {
        let before = start.controller.iter().find(|(k, _)| k == name)?.1;
        Some((get(name)? - before) / (1u64 << 20) as f64)
    };
    let mut parts: Vec<String> = ["data_admit", "load_admit"]
        .iter()
        .filter_map(|k| get(k).map(|v| format!("{k}={v:.2}")))
        .collect();
    if let Some(ratio) = get("offload_ratio") {
        parts.push(format!("offload={ratio:.2}"));
    }
    if let Some(m) = get("mirrored_segments") {
        parts.push(format!("mirrored={m:.0}"));
    }
    if let (Some(p), Some(c)) = (get("latency_perf_us"), get("latency_cap_us")) {
        parts.push(format!("latency={p:.0}/{c:.0}us"));
    }
    if let (Some(up), Some(down)) = (moved_mib("promoted_bytes"), moved_mib("demoted_bytes")) {
        parts.push(format!("moved={up:.0}/{down:.0}MiB"));
    }
    if let Some(m) = moved_mib("mirror_bytes").filter(|&m| m > 0.0) {
        parts.push(format!("mirror_copied={m:.0}MiB"));
    }
    if let (Some(dirty), Some(cached)) = (get("dirty_blocks"), get("cached_blocks")) {
        if cached > 0.0 {
            parts.push(format!("dirty={:.0}%", 100.0 * dirty / cached));
        }
    }
    parts.join(" ")
}

/// The policies whose ramp is their own, as " (HeMem 60 s, MOST 60 s)".
fn own_ramps(cfg: &BenchConfig) -> String {
    let own: Vec<String> = cfg
        .policy
        .iter()
        .filter_map(|p| p.ramp_s.map(|r| format!("{} {r} s", p.label)))
        .collect();
    if own.is_empty() {
        String::new()
    } else {
        format!(" ({})", own.join(", "))
    }
}
