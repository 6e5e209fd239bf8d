//! Simulation configuration (one run) and its validation.
//!
//! A [`SimConfig`] is plain data, read from TOML (see `docs/experiments.md`).
//! [`SimConfig::resolve`] checks it and turns profile names, the working-set
//! rule and the load level into concrete numbers, with errors that name the
//! offending field.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tiermux_core::{DeviceRole, Params};

use crate::workload::{volume_blocks_needed, Pattern, Schedule, WorkloadSpec};
use tiermux_device::DeviceModel;
use tiermux_device::{lookup_profile, ProfileSpec};

use crate::energy::DevicePower;
use crate::failure::FailureSpec;
use crate::kvconfig::KvSpec;
use crate::trace_run::LoadedTrace;
use tiermux_trace::TraceSource;

mod checks;
pub use checks::{MAX_DURATION_S, MAX_RATE_OPS_PER_S, MAX_WORKERS};

/// How clients generate load.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientSpec {
    /// Closed loop: this many concurrent workers.
    #[serde(default)]
    pub workers: Option<u32>,
    /// Closed loop: this multiple of Load-1.0, the Orthus paper's "minimum
    /// read load to achieve the maximum read bandwidth of the cache
    /// device": the smallest concurrency at which reads that all hit reach
    /// 99 % of the cache device's maximum throughput, with the workers'
    /// `think_time_us`.
    #[serde(default)]
    pub load: Option<f64>,
    /// Open loop: Poisson arrivals at this rate.
    #[serde(default)]
    pub rate_ops_per_s: Option<f64>,
    /// Load over time (multiplies workers or rate).
    #[serde(default)]
    pub schedule: Schedule,
    /// Pause of a closed-loop worker between requests, µs.
    #[serde(default)]
    pub think_time_us: f64,
    /// Issue a trace's requests at their recorded times, this many times
    /// faster (open loop; a run with a `trace` only). Without it, the
    /// clients take the trace's requests in order as they are ready.
    #[serde(default)]
    pub replay_speedup: Option<f64>,
}

impl Default for ClientSpec {
    fn default() -> Self {
        ClientSpec {
            workers: Some(16),
            load: None,
            rate_ops_per_s: None,
            schedule: Schedule::Constant,
            think_time_us: 0.0,
            replay_speedup: None,
        }
    }
}

/// One simulation run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimConfig {
    /// Device profile names, fastest first (built-in, `fixed:R`, or defined
    /// in `profiles`).
    pub devices: Vec<String>,
    /// Extra profiles defined inline.
    #[serde(default)]
    pub profiles: Vec<ProfileSpec>,
    /// Policy registry name.
    pub policy: String,
    /// Policy parameters. A table named after a policy holds parameters
    /// for that policy only (`params.nhc.min_window_ops`), so that one
    /// sweep can run several policies; they override the shared ones.
    #[serde(default)]
    pub params: BTreeMap<String, toml::Value>,
    /// Block size, bytes.
    #[serde(default = "default_block_size")]
    pub block_size: u32,
    /// Blocks of the first device the policy may use (the cache size).
    #[serde(default = "default_cache_blocks")]
    pub cache_blocks: u64,
    /// What each device is for (cache, tier, home), fastest first; default:
    /// every device caches the next and the last is home (as in the
    /// engine's volume configs).
    #[serde(default)]
    pub roles: Vec<DeviceRole>,
    /// Blocks each device after the first offers, for hierarchies of three
    /// or more devices (one number per device but the first and the last;
    /// default: the whole volume).
    #[serde(default)]
    pub middle_device_blocks: Vec<u64>,
    /// Size of the volume, blocks (default: what the workload needs).
    #[serde(default)]
    pub volume_blocks: Option<u64>,
    /// The cache size as a share of the working set (instead of
    /// `cache_blocks`; needs a trace or `workload.working_set_blocks`).
    #[serde(default)]
    pub cache_share: Option<f64>,
    /// The middle devices' sizes as shares of the working set (instead of
    /// `middle_device_blocks`).
    #[serde(default)]
    pub middle_device_shares: Vec<f64>,
    /// The workload.
    #[serde(default)]
    pub workload: WorkloadSpec,
    /// Replay this block trace instead of the synthetic workload: its
    /// distinct pages are the working set, renumbered in order onto the
    /// volume ([`tiermux_trace::TimedTrace`]). The run ends when its last
    /// request is done, or at `duration_s`.
    #[serde(default)]
    pub trace: Option<TraceSource>,
    /// The clients.
    #[serde(default)]
    pub client: ClientSpec,
    /// Simulated time, s.
    #[serde(default = "default_duration")]
    pub duration_s: f64,
    /// Leading part of the run left out of steady-state figures, s.
    #[serde(default = "default_warmup")]
    pub warmup_s: f64,
    /// Random seed.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Start with the hottest items already cached (in a key-value run,
    /// `kv.prefill` decides instead).
    #[serde(default = "default_true")]
    pub prefill: bool,
    /// How many of the hottest items the prefill places (default
    /// `cache_blocks`, the first device's size; more fill the devices
    /// below it, in hierarchies whose policy places warm data there).
    #[serde(default)]
    pub prefill_blocks: Option<u64>,
    /// Time-series sample interval, ms.
    #[serde(default = "default_sample_ms")]
    pub sample_interval_ms: f64,
    /// Run the key-value cache over the volume: clients send it commands,
    /// and the workload chooses keys instead of blocks.
    #[serde(default)]
    pub kv: Option<KvSpec>,
    /// A device that fails during the run ([`crate::failure`]).
    #[serde(default)]
    pub failure: Option<FailureSpec>,
}

fn default_block_size() -> u32 {
    4096
}
fn default_cache_blocks() -> u64 {
    16384
}
fn default_duration() -> f64 {
    1.0
}
fn default_warmup() -> f64 {
    0.2
}
fn default_seed() -> u64 {
    1
}
fn default_true() -> bool {
    true
}
fn default_sample_ms() -> f64 {
    10.0
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            devices: vec!["optane-905p".into(), "flash-970pro".into()],
            profiles: Vec::new(),
            policy: "classic".into(),
            params: BTreeMap::new(),
            block_size: default_block_size(),
            cache_blocks: default_cache_blocks(),
            roles: Vec::new(),
            middle_device_blocks: Vec::new(),
            volume_blocks: None,
            cache_share: None,
            middle_device_shares: Vec::new(),
            workload: WorkloadSpec::default(),
            trace: None,
            client: ClientSpec::default(),
            duration_s: default_duration(),
            warmup_s: default_warmup(),
            seed: default_seed(),
            prefill: true,
            prefill_blocks: None,
            sample_interval_ms: default_sample_ms(),
            kv: None,
            failure: None,
        }
    }
}

/// A configuration problem, naming the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ConfigError {
    /// Dotted path of the field.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl ConfigError {
    /// A new error about `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Clients after resolution.
#[derive(Clone, Debug, PartialEq)]
pub enum ClientMode {
    /// N workers in a closed loop.
    Closed {
        /// Base number of workers.
        workers: u32,
    },
    /// A multiple of Load-1.0, resolved by the simulator (see
    /// [`ClientSpec::load`]).
    Load {
        /// The multiple.
        load: f64,
    },
    /// Poisson arrivals.
    Open {
        /// Base rate, ops/s.
        rate_ops_per_s: f64,
    },
    /// A trace's requests at their recorded times, sped up.
    Recorded {
        /// Recorded time over simulated time.
        speedup: f64,
    },
}

/// A checked configuration with everything computed.
#[derive(Clone, Debug)]
pub struct Resolved {
    /// The original configuration.
    pub cfg: SimConfig,
    /// Device names and models, fastest first.
    pub devices: Vec<(String, DeviceModel)>,
    /// Working-set size, blocks.
    pub working_set: u64,
    /// Volume size, blocks.
    pub volume_blocks: u64,
    /// Policy parameters.
    pub params: Params,
    /// The policy's controller variables (time-series columns).
    pub controller_names: Vec<String>,
    /// Clients.
    pub client: ClientMode,
    /// The trace replayed, in a trace run.
    pub trace: Option<LoadedTrace>,
    /// Each device's power, where its profile gives one.
    pub power: Vec<Option<DevicePower>>,
    /// Each device's endurance, where its profile gives one.
    pub endurance: Vec<Option<crate::wear::Endurance>>,
}

/// A device named `array:NAME` is the disk array NAME
/// ([`tiermux_device::array::ARRAYS`], or a RAID-5 named by its shape,
/// [`tiermux_device::array::RAID5_SHAPE`]), timed by its queues.
pub const ARRAY_PREFIX: &str = "array:";

/// The model kept for an array device (`devices[i]` = `array:NAME`): the
/// `hdd` profile's, for what reads a model; the array's queues time its
/// operations ([`tiermux_device::array::ArrayTiming`]).
fn array_model(i: usize, name: &str) -> Result<DeviceModel, ConfigError> {
    tiermux_device::array::parse_array(name)
        .map_err(|e| ConfigError::new(format!("devices[{i}]"), e))?;
    let hdd = tiermux_device::find_builtin("hdd").expect("a built-in hdd profile");
    Ok(hdd.model().expect("the hdd profile derives"))
}

fn check(field: &str, ok: bool, message: impl FnOnce() -> String) -> Result<(), ConfigError> {
    if ok {
        Ok(())
    } else {
        Err(ConfigError::new(field, message()))
    }
}

/// Converts a TOML table of policy parameters; the error names the key.
pub fn params_from_toml(table: &BTreeMap<String, toml::Value>) -> Result<Params, ConfigError> {
    let table: toml::Table = table.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    serde::Deserialize::deserialize(toml::Value::Table(table))
        .map_err(|e: toml::de::Error| ConfigError::new("params", e.message()))
}

impl SimConfig {
    /// The parameters the run's policy gets: the shared ones, then those in
    /// the table named after it; tables named after other policies are
    /// left out, and a table named after no policy is an error.
    pub fn policy_params(&self) -> Result<BTreeMap<String, toml::Value>, ConfigError> {
        let mut out = BTreeMap::new();
        let mut own = None;
        for (k, v) in &self.params {
            match v {
                toml::Value::Table(t) => {
                    if !tiermux_core::REGISTRY.iter().any(|r| r.name == k) {
                        let known: Vec<&str> =
                            tiermux_core::REGISTRY.iter().map(|r| r.name).collect();
                        return Err(ConfigError::new(
                            format!("params.{k}"),
                            format!(
                                "a table of parameters is named after the policy it is for, and '{k}' is none (known: {})",
                                known.join(", ")
                            ),
                        ));
                    }
                    if *k == self.policy {
                        own = Some(t);
                    }
                }
                _ => {
                    out.insert(k.clone(), v.clone());
                }
            }
        }
        for (k, v) in own.into_iter().flatten() {
            out.insert(k.clone(), v.clone());
        }
        Ok(out)
    }

    /// Validates the configuration and computes the derived quantities.
    pub fn resolve(&self) -> Result<Resolved, ConfigError> {
        let devices = self.resolve_devices()?;
        let trace = self.resolve_trace()?;
        let sized = self.sized_by_shares(trace.as_ref().map(|t| t.0.distinct_blocks))?;
        sized.check_sizes_and_times()?;
        sized.check_workload()?;
        if let Some(f) = &sized.failure {
            f.check(&sized)?;
        }
        let (working_set, volume_blocks) = match &trace {
            Some(t) => sized.resolve_trace_volume(t.0.distinct_blocks)?,
            None => sized.resolve_volume()?,
        };
        let client = sized.resolve_client()?;
        let params = params_from_toml(&sized.policy_params()?)?;
        let volume = volume_spec(&sized, &devices, volume_blocks);
        crate::memory::check_fits(
            &volume,
            sized.kv.is_some(),
            crate::memory::machine_memory_bytes(),
        )
        .map_err(|e| ConfigError::new("volume_blocks", e))?;
        let controller_names = sized.check_policy(&params, &volume)?;
        Ok(Resolved {
            controller_names,
            cfg: sized,
            devices,
            working_set,
            volume_blocks,
            params,
            client,
            trace,
            power: crate::energy::device_powers(self),
            endurance: crate::wear::device_endurance(self),
        })
    }

    /// The trace of a trace run, read (once per process); checks that
    /// nothing else chooses the requests.
    fn resolve_trace(&self) -> Result<Option<LoadedTrace>, ConfigError> {
        let Some(source) = &self.trace else {
            check(
                "client.replay_speedup",
                self.client.replay_speedup.is_none(),
                || "replays a trace's times; the run has no trace".into(),
            )?;
            return Ok(None);
        };
        check("trace", self.kv.is_none(), || {
            "a key-value run chooses keys, not a trace's blocks; leave out [trace] or [kv]".into()
        })?;
        check("workload", self.workload == WorkloadSpec::default(), || {
            "a trace run takes its requests from the trace; leave out [workload]".into()
        })?;
        crate::trace_run::load(source, self.block_size).map(Some)
    }

    /// A trace run's working set and volume: the trace's distinct blocks.
    fn resolve_trace_volume(&self, distinct_blocks: u64) -> Result<(u64, u64), ConfigError> {
        let volume_blocks = self.volume_blocks.unwrap_or(distinct_blocks);
        check("volume_blocks", volume_blocks >= distinct_blocks, || {
            format!("must hold the trace's {distinct_blocks} distinct blocks, got {volume_blocks}")
        })?;
        Ok((distinct_blocks, volume_blocks))
    }

    /// This configuration with `cache_share` and `middle_device_shares`
    /// turned into blocks of the working set (the trace's, or the
    /// workload's `working_set_blocks`).
    fn sized_by_shares(&self, trace_blocks: Option<u64>) -> Result<SimConfig, ConfigError> {
        let mut c = self.clone();
        if self.cache_share.is_none() && self.middle_device_shares.is_empty() {
            return Ok(c);
        }
        let field = if self.cache_share.is_some() {
            "cache_share"
        } else {
            "middle_device_shares"
        };
        let working_set = trace_blocks
            .or(self.workload.working_set_blocks)
            .ok_or_else(|| {
                ConfigError::new(
                    field,
                    "a share of the working set needs a trace or workload.working_set_blocks",
                )
            })?;
        let blocks = |field: &str, share: f64| {
            check(field, share.is_finite() && share > 0.0, || {
                format!("must be a positive share, got {share}")
            })?;
            Ok::<u64, ConfigError>(((working_set as f64 * share).round() as u64).max(1))
        };
        if let Some(share) = self.cache_share {
            c.cache_blocks = blocks("cache_share", share)?;
        }
        if !self.middle_device_shares.is_empty() {
            check(
                "middle_device_shares",
                self.middle_device_blocks.is_empty(),
                || "give middle_device_blocks or middle_device_shares, not both".into(),
            )?;
            c.middle_device_blocks = self
                .middle_device_shares
                .iter()
                .map(|&s| blocks("middle_device_shares", s))
                .collect::<Result<_, _>>()?;
        }
        Ok(c)
    }

    /// The devices' models, from built-in or inline profiles.
    fn resolve_devices(&self) -> Result<Vec<(String, DeviceModel)>, ConfigError> {
        let c = self;
        check("devices", c.devices.len() >= 2, || {
            format!(
                "a hierarchy needs at least 2 devices, got {}",
                c.devices.len()
            )
        })?;
        tiermux_core::policy::check_device_count(c.devices.len())
            .map_err(|e| ConfigError::new("devices", e))?;
        let mut devices = Vec::new();
        for (i, name) in c.devices.iter().enumerate() {
            if let Some(array) = name.strip_prefix(ARRAY_PREFIX) {
                devices.push((name.clone(), array_model(i, array)?));
                continue;
            }
            let spec = lookup_profile(name, &c.profiles).ok_or_else(|| {
                ConfigError::new(
                    format!("devices[{i}]"),
                    format!("unknown profile '{name}' (see `tiermux profiles`, or define it under [[profiles]])"),
                )
            })?;
            let model = spec.model().map_err(|e| {
                ConfigError::new(format!("profiles.{}.{}", e.profile, e.field), e.message)
            })?;
            devices.push((name.clone(), model));
        }
        Ok(devices)
    }

    /// The working set and the volume, blocks.
    fn resolve_volume(&self) -> Result<(u64, u64), ConfigError> {
        let c = self;
        let w = &c.workload;
        if let Some(kv) = &c.kv {
            return c.resolve_kv_volume(kv);
        }
        let working_set = match (w.working_set_blocks, w.hit_ratio) {
            (Some(ws), _) => ws,
            (None, Some(h)) => (c.cache_blocks as f64 / h).round() as u64,
            (None, None) => c.cache_blocks * 2,
        };
        check("workload.working_set_blocks", working_set >= 1, || {
            "must be at least 1".into()
        })?;
        let needed = volume_blocks_needed(w, working_set);
        let volume_blocks = c.volume_blocks.unwrap_or(needed);
        check("volume_blocks", volume_blocks >= working_set, || {
            format!("must hold the working set ({working_set} blocks), got {volume_blocks}")
        })?;
        if let (Some(chunk), Pattern::Sequential { streams }) = (w.discard_chunk_blocks, &w.pattern)
        {
            let region = working_set / (*streams as u64).max(1);
            check(
                "workload.discard_chunk_blocks",
                region >= chunk && region.is_multiple_of(chunk),
                || {
                    format!("each of the {streams} streams' regions ({region} blocks) must be a whole number of chunks of {chunk} blocks")
                },
            )?;
        }
        if let (Some(chunk), Pattern::Latest { .. } | Pattern::Recent { .. }) =
            (w.discard_chunk_blocks, &w.pattern)
        {
            check(
                "volume_blocks",
                volume_blocks >= needed && volume_blocks.is_multiple_of(chunk),
                || {
                    format!("a log that discards chunks of {chunk} blocks needs a whole number of chunks and at least {needed} blocks (the working set, one chunk and a request), got {volume_blocks}")
                },
            )?;
        }
        Ok((working_set, volume_blocks))
    }

    /// A key-value run: the workload's items are keys, and the volume's
    /// size is given.
    fn resolve_kv_volume(&self, kv: &KvSpec) -> Result<(u64, u64), ConfigError> {
        let c = self;
        let keys = c.workload.working_set_blocks.ok_or_else(|| {
            ConfigError::new(
                "workload.working_set_blocks",
                "a key-value run needs the number of keys",
            )
        })?;
        check("workload.working_set_blocks", keys >= 1, || {
            "must be at least 1".into()
        })?;
        check(
            "block_size",
            c.block_size as u64 == tiermux_kv::BLOCK_BYTES,
            || {
                format!(
                    "a key-value run uses {}-byte blocks, got {}",
                    tiermux_kv::BLOCK_BYTES,
                    c.block_size
                )
            },
        )?;
        let volume_blocks = c.volume_blocks.ok_or_else(|| {
            ConfigError::new("volume_blocks", "a key-value run needs the volume's size")
        })?;
        kv.validate(volume_blocks * c.block_size as u64)?;
        kv.check_store_room(keys, volume_blocks * c.block_size as u64)?;
        Ok((keys, volume_blocks))
    }

    /// Builds the policy once so that unknown names and bad parameters
    /// surface here, with the field named; returns its controller's
    /// variable names.
    fn check_policy(
        &self,
        params: &Params,
        volume: &tiermux_core::VolumeSpec,
    ) -> Result<Vec<String>, ConfigError> {
        match tiermux_core::build_policy(&self.policy, params, volume, self.seed) {
            Ok(p) => Ok(p
                .controller_state()
                .into_iter()
                .map(|(k, _)| k.to_string())
                .collect()),
            Err(e) => {
                let field = match &e {
                    tiermux_core::PolicyError::Param { error, .. } => {
                        format!("params.{}", error.field)
                    }
                    _ => "policy".to_string(),
                };
                Err(ConfigError::new(field, e.to_string()))
            }
        }
    }
}

/// The volume a configuration describes: the first device offers
/// `cache_blocks`, the middle ones `middle_device_blocks` (default: the
/// whole volume), the last the whole volume; roles as `roles` says (by
/// default every device caches the next and the last is home).
pub fn volume_spec(
    c: &SimConfig,
    devices: &[(String, DeviceModel)],
    volume_blocks: u64,
) -> tiermux_core::VolumeSpec {
    tiermux_core::VolumeSpec {
        num_blocks: volume_blocks,
        block_size: c.block_size,
        devices: devices
            .iter()
            .enumerate()
            .zip(if c.roles.is_empty() {
                DeviceRole::defaults(devices.len())
            } else {
                c.roles.clone()
            })
            .map(|((i, (name, _)), role)| tiermux_core::policy::DeviceSpec {
                name: name.clone(),
                capacity_blocks: if i == 0 {
                    c.cache_blocks
                } else {
                    c.middle_device_blocks
                        .get(i - 1)
                        .copied()
                        .unwrap_or(volume_blocks)
                },
                role,
            })
            .collect(),
    }
}

/// Parameters of the caching building block, which classic caching
/// accepts; used to probe Load-1.0 with the experiment's cache settings.
pub const CACHE_PARAMS: &[&str] = &[
    "cache_blocks",
    "replacement",
    "write_mode",
    "fill",
    "wa_write_hit",
    "dirty_high_ratio",
    "dirty_low_ratio",
    "flush_max_inflight",
];

/// Workers for Load-`load` given Load-1.0 = `unit` workers: the nearest
/// integer, ties toward fewer workers, at least one.
pub fn workers_for_load(load: f64, unit: u32) -> u32 {
    ((load * unit as f64 - 0.5).ceil() as u32).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn impossible_parameters_name_the_field() {
        let bad = |f: &dyn Fn(&mut SimConfig)| {
            let mut c = SimConfig::default();
            f(&mut c);
            c.resolve().unwrap_err().field
        };
        assert_eq!(
            bad(&|c| c.workload.hit_ratio = Some(1.5)),
            "workload.hit_ratio"
        );
        assert_eq!(bad(&|c| c.client.rate_ops_per_s = Some(-5.0)), "client");
        assert_eq!(
            bad(&|c| {
                c.client.workers = None;
                c.client.rate_ops_per_s = Some(-5.0)
            }),
            "client.rate_ops_per_s"
        );
        assert_eq!(
            bad(&|c| c.devices = vec!["optane-905p".into(), "warp-drive".into()]),
            "devices[1]"
        );
        assert_eq!(
            bad(&|c| c.workload.write_ratio = 2.0),
            "workload.write_ratio"
        );
        assert_eq!(bad(&|c| c.block_size = 1000), "block_size");
        assert_eq!(
            bad(&|c| {
                c.workload.working_set_blocks = Some(100);
                c.workload.write_spikes = vec![crate::spikes::WriteSpike {
                    period_s: f64::NAN,
                    items: 10,
                }];
            }),
            "workload.write_spikes[0].period_s"
        );
        assert_eq!(bad(&|c| c.cache_blocks = 1 << 32), "cache_blocks");
        // Limits of the simulated clock, the event queue and memory: each a
        // named error, where the run would overflow, hang or abort.
        assert_eq!(bad(&|c| c.duration_s = 1e300), "duration_s");
        assert_eq!(
            bad(&|c| c.sample_interval_ms = 1e-300),
            "sample_interval_ms"
        );
        assert_eq!(
            bad(&|c| c.client.workers = Some(4_000_000_000)),
            "client.workers"
        );
        assert_eq!(
            bad(&|c| {
                c.client.workers = None;
                c.client.rate_ops_per_s = Some(1e300)
            }),
            "client.rate_ops_per_s"
        );
        assert_eq!(
            bad(&|c| c.volume_blocks = Some(u64::MAX / 2)),
            "volume_blocks"
        );
        assert_eq!(bad(&|c| c.warmup_s = 5.0), "warmup_s");
        assert_eq!(bad(&|c| c.policy = "lfu-magic".into()), "policy");
        assert_eq!(
            bad(&|c| {
                c.params
                    .insert("split_rate".into(), toml::Value::Float(2.0));
                c.policy = "split".into();
            }),
            "params.split_rate"
        );
        assert_eq!(
            bad(&|c| {
                c.params.insert("stepp".into(), toml::Value::Float(0.1));
                c.policy = "nhc".into();
            }),
            "params.stepp"
        );
        assert_eq!(
            bad(&|c| {
                let t: toml::Table = toml::from_str("min_window_ops = 5").unwrap();
                c.params.insert("nhcc".into(), toml::Value::Table(t));
            }),
            "params.nhcc"
        );
        assert_eq!(bad(&|c| c.roles = vec![DeviceRole::Home]), "roles");
        // Two home devices: the policy refuses the volume.
        assert_eq!(
            bad(&|c| c.roles = vec![DeviceRole::Home, DeviceRole::Home]),
            "policy"
        );
    }

    /// A table named after a policy holds parameters for it alone.
    #[test]
    fn policy_tables_reach_their_policy_only() {
        let t: toml::Table = toml::from_str("min_window_ops = 5\nwindow_ms = 2.0").unwrap();
        let mut c = SimConfig {
            policy: "classic".into(),
            ..SimConfig::default()
        };
        c.params.insert("nhc".into(), toml::Value::Table(t));
        assert!(c.policy_params().unwrap().is_empty());
        c.resolve().expect("classic ignores the nhc table");
        c.policy = "nhc".into();
        c.params
            .insert("min_window_ops".into(), toml::Value::Integer(7));
        let p = c.policy_params().unwrap();
        assert_eq!(
            p["min_window_ops"],
            toml::Value::Integer(5),
            "the table overrides"
        );
        assert_eq!(p["window_ms"], toml::Value::Float(2.0));
        c.resolve().unwrap();
    }

    #[test]
    fn roles_name_the_home_device() {
        let mut c = SimConfig {
            policy: "passthrough".into(),
            ..SimConfig::default()
        };
        c.roles = vec![DeviceRole::Home, DeviceRole::Cache];
        let r = c.resolve().unwrap();
        let v = volume_spec(&c, &r.devices, r.volume_blocks);
        assert_eq!(v.home(), Some(0));
        let res = crate::run(&c).unwrap();
        // Pass-through serves everything from the home device, here the
        // first one.
        assert!(res.devices[0].ops_per_s > 0.0 && res.devices[1].ops_per_s == 0.0);
    }
}
