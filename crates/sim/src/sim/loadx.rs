//! Running a configuration, and Load-x: the concurrency that defines a
//! configuration's load unit (Orthus §6.1).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use super::{PrefillShare, RunResult, SimError, Simulator};
use crate::config::{workers_for_load, ClientMode, ClientSpec, SimConfig, CACHE_PARAMS};

/// Validates `cfg` and runs it.
pub fn run(cfg: &SimConfig) -> Result<RunResult, SimError> {
    run_sharing(cfg, None)
}

/// Validates `cfg` and runs it, a key-value run starting from `share`'s
/// prefill where it holds one for the run (see [`PrefillShare`]).
pub fn run_sharing(cfg: &SimConfig, share: Option<&PrefillShare>) -> Result<RunResult, SimError> {
    let mut r = cfg.resolve()?;
    if let ClientMode::Load { load } = r.client {
        let unit = load_unit_workers(cfg)?;
        r.client = ClientMode::Closed {
            workers: workers_for_load(load, unit),
        };
    }
    Simulator::new(r)?.run_sharing(share)
}

/// The largest concurrency the Load-1.0 probe tries: enough for a pause
/// of about 400 µs per request in front of a device that completes 4 KiB
/// reads at 550k per second.
const MAX_PROBE_WORKERS: u32 = 256;

fn load_memo() -> &'static Mutex<HashMap<String, u32>> {
    static MEMO: OnceLock<Mutex<HashMap<String, u32>>> = OnceLock::new();
    MEMO.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Load-1.0 of a configuration, in workers: the Orthus paper's "minimum
/// read load to achieve the maximum read bandwidth of the cache device"
/// (§6.1), measured as the smallest closed-loop concurrency at which
/// classic caching, with the configuration's cache settings and request
/// pattern but only reads and (given a hit ratio) only hits, reaches 99 %
/// of its maximum throughput. So one hierarchy has one Load-1.0 whatever
/// the workload's hit ratio. The workers keep the configuration's pause
/// between requests (`client.think_time_us`, time spent outside the
/// devices), so that host time per request raises Load-1.0 as it does on
/// a real machine. Memoized per hierarchy, workload, cache settings and
/// pause.
pub fn load_unit_workers(cfg: &SimConfig) -> Result<u32, SimError> {
    let mut probe = cfg.clone();
    probe.policy = "classic".into();
    probe
        .params
        .retain(|k, _| CACHE_PARAMS.contains(&k.as_str()));
    probe.client = ClientSpec {
        think_time_us: cfg.client.think_time_us,
        ..ClientSpec::default()
    };
    probe.duration_s = cfg.duration_s.min(0.3);
    probe.warmup_s = probe.duration_s / 3.0;
    probe.workload.shift_at_s = None;
    probe.workload.write_ratio_period_s = None;
    probe.workload.write_spikes.clear();
    // The cache device's own maximum read bandwidth: every request a read
    // hit (a uniform working set the size of the cache).
    if probe.workload.hit_ratio.is_some() {
        probe.workload.hit_ratio = Some(1.0);
    }
    probe.workload.write_ratio = 0.0;
    let key = serde_json::to_string(&probe).expect("config serializes");
    if let Some(&n) = load_memo().lock().expect("memo").get(&key) {
        return Ok(n);
    }
    let mut curve: Vec<f64> = Vec::new();
    let mut flat = 0;
    for n in 1..=MAX_PROBE_WORKERS {
        probe.client.workers = Some(n);
        let x = Simulator::new(probe.resolve()?)?
            .run()?
            .throughput_ops_per_s;
        flat = match curve.last() {
            Some(&prev) if x < prev * 1.005 => flat + 1,
            _ => 0,
        };
        curve.push(x);
        if flat >= 2 {
            break;
        }
    }
    let max = curve.iter().cloned().fold(0.0, f64::max);
    let unit = curve.iter().position(|&x| x >= 0.99 * max).unwrap_or(0) as u32 + 1;
    load_memo().lock().expect("memo").insert(key, unit);
    Ok(unit)
}
