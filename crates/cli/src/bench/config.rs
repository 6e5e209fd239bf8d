//! The bench file: devices, policies, workloads, concurrency levels,
//! acceptance bars and the reference comparison, checked when read.

use serde::Deserialize;
use tiermux_device::lookup_profile;
use tiermux_device::profile::ProfileSpec;
use tiermux_engine::config::SizeValue;

use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;

/// A bench file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchConfig {
    /// What the bench measures.
    #[serde(default)]
    pub description: String,
    /// Profile of the performance (cache) device.
    pub fast_profile: String,
    /// Profile of the capacity device.
    pub slow_profile: String,
    /// Size of the fast device: the cache.
    pub cache_size: SizeValue,
    /// Size of the volume, held by the slow device.
    pub volume_size: SizeValue,
    /// Block size, bytes (the fio request size too).
    #[serde(default = "default_block_size")]
    pub block_size: u32,
    /// Target read hit ratio: the working set is `cache / hit_ratio`.
    pub hit_ratio: f64,
    /// Requests in flight to measure, rising.
    pub levels: Vec<u32>,
    /// Unmeasured run before each measured one, s.
    pub ramp_s: f64,
    /// Measured run per level, s.
    pub runtime_s: f64,
    /// Unmeasured start of a device-alone run, s.
    pub device_ramp_s: f64,
    /// Measured part of a device-alone run, s.
    pub device_runtime_s: f64,
    /// Simulated time of a prediction, s.
    pub sim_duration_s: f64,
    /// Unmeasured start of a prediction, s.
    pub sim_warmup_s: f64,
    /// The policies compared.
    pub policy: Vec<BenchPolicy>,
    /// The workloads.
    pub workload: Vec<BenchWorkload>,
    /// The bars the run is judged by.
    pub acceptance: Acceptance,
    /// The NBD-path comparison against nbdkit (optional).
    #[serde(default)]
    pub reference: Option<Reference>,
    /// Device profiles used by name above.
    #[serde(default)]
    pub profile: Vec<ProfileSpec>,
}

fn default_block_size() -> u32 {
    4096
}

/// A policy of the comparison.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchPolicy {
    /// Label in tables.
    pub label: String,
    /// Registry name.
    pub name: String,
    /// Its parameters.
    #[serde(default)]
    pub params: BTreeMap<String, toml::Value>,
    /// How the working set is placed before the runs: one sequential pass
    /// of reads (a cache admits what it reads) or of writes (tiering
    /// allocates new data on the fast device).
    #[serde(default)]
    pub warm: WarmPass,
    /// This policy's unmeasured run before each measured one, s (the
    /// bench's `ramp_s` when absent): a tiering policy settles more slowly
    /// than a cache, since it moves whole segments under a bandwidth cap.
    #[serde(default)]
    pub ramp_s: Option<f64>,
}

impl BenchPolicy {
    /// The ramp before each of this policy's measured runs, s.
    pub fn ramp_s(&self, cfg: &BenchConfig) -> f64 {
        self.ramp_s.unwrap_or(cfg.ramp_s)
    }

    /// The unmeasured start of this policy's predictions, s: the bench's
    /// `sim_warmup_s`, or the policy's own ramp when that is longer, so
    /// that the simulator predicts the state the engine is measured in.
    pub fn sim_warmup_s(&self, cfg: &BenchConfig) -> f64 {
        cfg.sim_warmup_s.max(self.ramp_s.unwrap_or(0.0))
    }
}

/// The sequential pass over the working set before a policy's runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WarmPass {
    /// Read every block once.
    #[default]
    Read,
    /// Write every block once.
    Write,
}

impl WarmPass {
    /// fio's `--rw` value for the pass.
    pub fn fio_rw(self) -> &'static str {
        match self {
            WarmPass::Read => "read",
            WarmPass::Write => "write",
        }
    }
}

/// A workload: uniform random requests over the working set.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchWorkload {
    /// Label in tables.
    pub name: String,
    /// Percentage of requests that read (the rest write).
    pub read_percent: u32,
}

/// The acceptance bars of a bench.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Acceptance {
    /// The workload they apply to.
    pub workload: String,
    /// The baseline policy's label.
    pub baseline: String,
    /// The candidate policy's label.
    pub candidate: String,
    /// High load: requests in flight (this level and above are judged).
    pub high_load_inflight: u32,
    /// Candidate over baseline throughput at high load, at least.
    pub min_speedup: f64,
    /// Candidate over the physical limit at high load, at least.
    pub min_limit_fraction: f64,
    /// Low load: requests in flight.
    pub low_load_inflight: u32,
    /// Largest relative throughput difference at low load.
    pub low_load_tolerance: f64,
}

/// The NBD path alone: pass-through over one file against `nbdkit file`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reference {
    /// Size of the file.
    pub size: SizeValue,
    /// Requests in flight to measure.
    pub levels: Vec<u32>,
    /// Measured run per level and server, s.
    pub runtime_s: f64,
}

impl BenchConfig {
    /// Parses and checks a bench file; errors name the field.
    pub fn parse(text: &str) -> Result<BenchConfig> {
        let cfg: BenchConfig = toml::from_str(text).map_err(|e| anyhow::anyhow!("{e}"))?;
        cfg.check()?;
        Ok(cfg)
    }

    pub(super) fn check(&self) -> Result<()> {
        for (field, name) in [
            ("fast_profile", &self.fast_profile),
            ("slow_profile", &self.slow_profile),
        ] {
            let p = lookup_profile(name, &self.profile).with_context(|| {
                format!("{field}: no profile '{name}' (define it in [[profile]] or see `tiermux profiles`)")
            })?;
            p.model()?;
        }
        let bs = self.block_size as u64;
        if bs == 0 || !bs.is_multiple_of(4096) {
            bail!("block_size: {bs} is not a positive multiple of 4096");
        }
        if !(self.hit_ratio > 0.0 && self.hit_ratio <= 1.0) {
            bail!("hit_ratio: {} is not in (0, 1]", self.hit_ratio);
        }
        let cache = self.cache_size.bytes("cache_size")?;
        let volume = self.volume_size.bytes("volume_size")?;
        if cache < bs || !cache.is_multiple_of(bs) || !volume.is_multiple_of(bs) {
            bail!("cache_size and volume_size must be whole, non-zero numbers of blocks");
        }
        if self.working_set_bytes() > volume {
            bail!(
                "volume_size: {volume} bytes cannot hold the working set of {} bytes (cache_size / hit_ratio)",
                self.working_set_bytes()
            );
        }
        if self.levels.is_empty() || self.levels.contains(&0) {
            bail!("levels: need at least one level, each at least 1");
        }
        self.check_durations()?;
        self.check_runs()?;
        Ok(())
    }

    /// Ramps and warm-ups are zero or positive, runs positive.
    fn check_durations(&self) -> Result<()> {
        for (f, v) in [
            ("ramp_s", self.ramp_s),
            ("device_ramp_s", self.device_ramp_s),
            ("sim_warmup_s", self.sim_warmup_s),
        ] {
            if !(v >= 0.0 && v.is_finite()) {
                bail!("{f}: {v} is not a duration");
            }
        }
        for (f, v) in [
            ("runtime_s", self.runtime_s),
            ("device_runtime_s", self.device_runtime_s),
            ("sim_duration_s", self.sim_duration_s),
        ] {
            if !(v > 0.0 && v.is_finite()) {
                bail!("{f}: {v} is not a positive duration");
            }
        }
        for p in &self.policy {
            if let Some(v) = p.ramp_s {
                if !(v >= 0.0 && v.is_finite()) {
                    bail!("policy '{}': ramp_s: {v} is not a duration", p.label);
                }
            }
        }
        if self.sim_warmup_s >= self.sim_duration_s {
            bail!("sim_warmup_s must be shorter than sim_duration_s");
        }
        Ok(())
    }

    /// Policies, workloads, the acceptance bars and the reference name
    /// things that exist.
    fn check_runs(&self) -> Result<()> {
        if self.policy.is_empty() || self.workload.is_empty() {
            bail!("need at least one [[policy]] and one [[workload]]");
        }
        for w in &self.workload {
            if w.read_percent > 100 {
                bail!(
                    "workload '{}': read_percent {} > 100",
                    w.name,
                    w.read_percent
                );
            }
        }
        let a = &self.acceptance;
        if !self.workload.iter().any(|w| w.name == a.workload) {
            bail!("acceptance.workload: no workload '{}'", a.workload);
        }
        for (f, l) in [("baseline", &a.baseline), ("candidate", &a.candidate)] {
            if !self.policy.iter().any(|p| &p.label == l) {
                bail!("acceptance.{f}: no policy labelled '{l}'");
            }
        }
        if let Some(r) = &self.reference {
            r.size.bytes("reference.size")?;
            if r.levels.is_empty() || r.levels.contains(&0) {
                bail!("reference.levels: need at least one level, each at least 1");
            }
            if !(r.runtime_s > 0.0 && r.runtime_s.is_finite()) {
                bail!(
                    "reference.runtime_s: {} is not a positive duration",
                    r.runtime_s
                );
            }
        }
        Ok(())
    }

    pub(super) fn cache_blocks(&self) -> u64 {
        self.cache_size.bytes("cache_size").unwrap_or(0) / self.block_size as u64
    }

    pub(super) fn working_set_bytes(&self) -> u64 {
        let blocks = (self.cache_blocks() as f64 / self.hit_ratio).ceil() as u64;
        blocks * self.block_size as u64
    }

    pub(super) fn volume_bytes(&self) -> u64 {
        self.volume_size.bytes("volume_size").unwrap_or(0)
    }
}
