//! Named configurations shared by the demo and the tests.

use crate::config::{ClientSpec, SimConfig};
use crate::workload::WorkloadSpec;

/// Orthus Figure 7's setting on Optane SSD + Flash SSD: read-only, uniform,
/// 64 KiB blocks, a 1 GiB cache (§6.1) and a working set sized for
/// `hit_ratio`, at Load-`load`; 4 s simulated, the first 3 s (NHC's
/// convergence) excluded. NHC runs with the two options the experiment
/// files use (`noise_aware`, `rounds_at_one = 1`; see
/// `experiments/orthus-nhc-settings.toml`).
pub fn orthus_optane_flash(policy: &str, load: f64, hit_ratio: f64) -> SimConfig {
    SimConfig {
        devices: vec!["optane-905p".into(), "flash-970pro".into()],
        policy: policy.into(),
        block_size: 65536,
        cache_blocks: 16384,
        workload: WorkloadSpec {
            hit_ratio: Some(hit_ratio),
            ..WorkloadSpec::default()
        },
        client: ClientSpec {
            workers: None,
            load: Some(load),
            ..ClientSpec::default()
        },
        params: nhc_options(),
        duration_s: 4.0,
        warmup_s: 3.0,
        ..SimConfig::default()
    }
}

/// NHC's options in the Orthus experiments, as a `params.nhc` table: the
/// stability test widened to the sampling noise, and one more round when
/// tuning settles at 1.0 (the authors' code).
pub fn nhc_options() -> std::collections::BTreeMap<String, toml::Value> {
    let mut nhc = toml::Table::new();
    nhc.insert("noise_aware".into(), toml::Value::Boolean(true));
    nhc.insert("rounds_at_one".into(), toml::Value::Integer(1));
    std::collections::BTreeMap::from([("nhc".to_string(), toml::Value::Table(nhc))])
}
