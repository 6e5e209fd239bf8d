//! Named configurations shared by the demo and the tests.

use crate::config::{ClientSpec, SimConfig};
use crate::workload::WorkloadSpec;

/// Orthus Figure 7's setting on Optane SSD + Flash SSD: read-only, uniform,
/// 64 KiB blocks, a 256 MiB cache sized for `hit_ratio`, at Load-`load`;
/// 4 s simulated, the first 3 s (NHC's convergence) excluded.
pub fn orthus_optane_flash(policy: &str, load: f64, hit_ratio: f64) -> SimConfig {
    SimConfig {
        devices: vec!["optane-905p".into(), "flash-970pro".into()],
        policy: policy.into(),
        block_size: 65536,
        cache_blocks: 4096,
        workload: WorkloadSpec {
            hit_ratio: Some(hit_ratio),
            ..WorkloadSpec::default()
        },
        client: ClientSpec {
            workers: None,
            load: Some(load),
            ..ClientSpec::default()
        },
        duration_s: 4.0,
        warmup_s: 3.0,
        ..SimConfig::default()
    }
}
