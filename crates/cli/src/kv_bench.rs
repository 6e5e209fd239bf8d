//! `tiermux kv bench`: a named key-value workload (YCSB, CacheBench's
//! mixes, Meta's production mixes, bursts, a hot-spot shift) on the
//! key-value cache or store over a simulated hierarchy, for one or more
//! policies side by side, in virtual time.

use std::collections::BTreeMap;

use anyhow::{bail, Result};
use clap::Args;
use tiermux_sim::experiment::run_all;
use tiermux_sim::kvconfig::KvSpec;
use tiermux_sim::kvworkloads::{apply_kv_workload, KvKnobs, KV_WORKLOADS};
use tiermux_sim::{ClientSpec, RunResult, SimConfig};

/// The options of `tiermux kv bench`.
#[derive(Args, Debug)]
pub struct KvBenchArgs {
    /// The workload (`--list` names them).
    #[arg(long, default_value = "ycsb-c")]
    workload: String,
    /// List the workloads and stop.
    #[arg(long)]
    list: bool,
    /// "cache" (CacheLib's shape, over the volume as a flash cache) or
    /// "store" (Orthus-KV's: every key in a log on the volume, whose
    /// block cache on the first device the policy runs, in write-around).
    #[arg(long, default_value = "cache")]
    mode: String,
    /// Policies to compare, comma-separated; ratios are to the first.
    #[arg(long, default_value = "classic,nhc", value_delimiter = ',')]
    policy: Vec<String>,
    /// Device profiles, fastest first, comma-separated.
    #[arg(
        long,
        default_value = "optane-905p,flash-970pro",
        value_delimiter = ','
    )]
    devices: Vec<String>,
    /// Concurrent clients.
    #[arg(long, default_value_t = 32)]
    threads: u32,
    /// Keys in the workload.
    #[arg(long, default_value_t = KvKnobs::default().keys)]
    keys: u64,
    /// Zipfian skew.
    #[arg(long, default_value_t = KvKnobs::default().theta)]
    theta: f64,
    /// Value size, bytes (workloads with their own sizes ignore it).
    #[arg(long, default_value_t = KvKnobs::default().value_bytes)]
    value_bytes: u32,
    /// The first device's capacity, MiB.
    #[arg(long, default_value_t = 256)]
    perf_mib: u64,
    /// The volume (the flash cache), MiB.
    #[arg(long, default_value_t = 1024)]
    volume_mib: u64,
    /// The DRAM cache, MiB.
    #[arg(long, default_value_t = 4.0)]
    dram_mib: f64,
    /// The backing store's latency for a lookaside miss, µs.
    #[arg(long, default_value_t = 1500.0)]
    backing_us: f64,
    /// Simulated seconds.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Leading seconds left out of the figures.
    #[arg(long, default_value_t = 6.0)]
    warmup: f64,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A parameter for one policy, `POLICY.KEY=VALUE` (repeatable), e.g.
    /// `nhc.step=0.01`; VALUE is read as a TOML value (a number, `true`,
    /// a quoted string) or else taken as a string.
    #[arg(long = "param", value_name = "POLICY.KEY=VALUE")]
    params: Vec<String>,
}

/// Files one `POLICY.KEY=VALUE` setting under its policy's table.
fn add_param(params: &mut BTreeMap<String, toml::Value>, setting: &str) -> Result<()> {
    let shape =
        || anyhow::anyhow!("--param {setting}: expected POLICY.KEY=VALUE, e.g. nhc.step=0.01");
    let (name, value) = setting.split_once('=').ok_or_else(shape)?;
    let (policy, key) = name.split_once('.').ok_or_else(shape)?;
    if policy.is_empty() || key.is_empty() || value.is_empty() {
        return Err(shape());
    }
    let value = toml::from_str::<toml::Table>(&format!("v = {value}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(value.to_string()));
    let table = params
        .entry(policy.to_string())
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    let toml::Value::Table(table) = table else {
        unreachable!("only policy tables are filed here");
    };
    table.insert(key.to_string(), value);
    Ok(())
}

impl KvBenchArgs {
    fn config(&self, policy: &str) -> Result<SimConfig> {
        let mib_blocks = (1 << 20) / tiermux_kv::BLOCK_BYTES;
        let mut cfg = SimConfig {
            devices: self.devices.clone(),
            policy: policy.to_string(),
            cache_blocks: self.perf_mib * mib_blocks,
            volume_blocks: Some(self.volume_mib * mib_blocks),
            duration_s: self.duration,
            warmup_s: self.warmup,
            seed: self.seed,
            sample_interval_ms: 500.0,
            client: ClientSpec {
                workers: Some(self.threads),
                ..ClientSpec::default()
            },
            kv: Some(KvSpec {
                mode: self.mode.clone(),
                dram_bytes: (self.dram_mib * (1 << 20) as f64) as u64,
                backing_latency_us: self.backing_us,
                ..KvSpec::default()
            }),
            ..SimConfig::default()
        };
        for setting in &self.params {
            add_param(&mut cfg.params, setting)?;
        }
        let knobs = KvKnobs {
            keys: self.keys,
            theta: self.theta,
            value_bytes: self.value_bytes,
        };
        apply_kv_workload(&self.workload, &knobs, &mut cfg)
            .map_err(|e| anyhow::anyhow!("--workload: {e}"))?;
        let kv = cfg.kv.as_ref().expect("a key-value run");
        kv.check_store_room(self.keys, self.volume_mib << 20)
            .map_err(|e| match e.field.as_str() {
                "volume_blocks" => anyhow::anyhow!("--volume-mib: {}", e.message),
                _ => anyhow::anyhow!("{e}"),
            })?;
        cfg.resolve()?;
        Ok(cfg)
    }
}

/// Runs `tiermux kv bench`.
pub fn run(args: KvBenchArgs) -> Result<()> {
    if args.list {
        for w in KV_WORKLOADS {
            println!("{:<16} {}", w.name, w.about);
        }
        return Ok(());
    }
    if args.policy.is_empty() {
        bail!("--policy: name at least one policy");
    }
    let configs = args
        .policy
        .iter()
        .map(|p| args.config(p))
        .collect::<Result<Vec<_>>>()?;
    println!(
        "tiermux kv bench: {} on a {} over {}, {} clients, {} keys, {:.0} s simulated ({:.0} s warm-up)",
        args.workload,
        args.mode,
        args.devices.join("+"),
        args.threads,
        args.keys,
        args.duration,
        args.warmup
    );
    if !args.params.is_empty() {
        println!("parameters: {}", args.params.join(", "));
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let results = run_all(&configs, threads, &|_| {});
    let mut rows: Vec<RunResult> = Vec::new();
    for (p, r) in args.policy.iter().zip(results) {
        rows.push(r.map_err(|e| anyhow::anyhow!("{p}: {e}"))?);
    }
    print_table(&rows, args.mode == "store");
    for r in &rows {
        let refused = r.kv.as_ref().map_or(0, |kv| kv.refused);
        if refused > 0 {
            println!(
                "note: {}: {refused} SETs were refused (the store is full); a larger --volume-mib leaves it room",
                r.policy
            );
        }
        let unset = r.kv.as_ref().map_or(0, |kv| kv.prefill_refused);
        if unset > 0 {
            println!(
                "note: {}: the store refused {unset} of the prefill's SETs (full), so those keys start unset; a larger --volume-mib leaves them room",
                r.policy
            );
        }
    }
    Ok(())
}

/// One line per run. A store's GETs find their key or not (it has no
/// misses), so its column says "found"; a run without GETs prints "-".
fn print_table(rows: &[RunResult], store: bool) {
    let hits = if store { "found" } else { "hits" };
    println!(
        "{:<10} {:>12} {:>7} {:>10} {:>10} {:>8} {:>10} {:>10}",
        "policy", "ops/s", "ratio", "get µs", "get p99", hits, "dev0 MB/s", "dev1 MB/s"
    );
    let shown = |x: f64, digits: usize| {
        if x.is_finite() {
            format!("{x:.digits$}")
        } else {
            "-".to_string()
        }
    };
    let first = rows[0].throughput_ops_per_s;
    for r in rows {
        let kv = r.kv.as_ref().expect("a key-value run");
        let mb = |i: usize| r.devices.get(i).map_or(0.0, |d| d.bytes_per_s / 1e6);
        let get = |x: f64| if kv.gets == 0 { f64::NAN } else { x };
        println!(
            "{:<10} {:>12.0} {:>7.3} {:>10} {:>10} {:>8} {:>10.0} {:>10.0}",
            r.policy,
            r.throughput_ops_per_s,
            r.throughput_ops_per_s / first,
            shown(get(kv.get_mean_latency_us), 1),
            shown(get(kv.get_p99_latency_us), 1),
            shown(r.hit_ratio, 4),
            mb(0),
            mb(1)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_are_filed_under_their_policy_with_toml_types() {
        let mut params = BTreeMap::new();
        for s in [
            "nhc.step=0.01",
            "nhc.noise_aware=true",
            "nhc.target=client_throughput",
            "most.theta=0.1",
        ] {
            add_param(&mut params, s).unwrap();
        }
        let nhc = params["nhc"].as_table().unwrap();
        assert_eq!(nhc["step"], toml::Value::Float(0.01));
        assert_eq!(nhc["noise_aware"], toml::Value::Boolean(true));
        assert_eq!(
            nhc["target"],
            toml::Value::String("client_throughput".into())
        );
        assert_eq!(
            params["most"].as_table().unwrap()["theta"],
            toml::Value::Float(0.1)
        );
    }

    #[test]
    fn a_malformed_param_is_refused_by_name() {
        for bad in ["step=0.01", "nhc.step", "nhc.=1", ".step=1", "nhc.step="] {
            let e = add_param(&mut BTreeMap::new(), bad)
                .unwrap_err()
                .to_string();
            assert!(e.contains(bad) && e.contains("POLICY.KEY=VALUE"), "{e}");
        }
    }
}
