//! What a run measures: steady-state figures per device and for the
//! clients, time-series samples, and the [`RunResult`] a run returns.

use serde::{Deserialize, Serialize};

use tiermux_core::Purpose;

use super::{Ev, Simulator, Window};
use crate::config::ClientMode;
use crate::workload::Schedule;

/// Steady-state figures of one device.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct DeviceResult {
    /// Profile name.
    pub name: String,
    /// Operations per second.
    pub ops_per_s: f64,
    /// Bytes per second, both directions.
    pub bytes_per_s: f64,
    /// Bytes read per second.
    pub read_bytes_per_s: f64,
    /// Bytes written per second.
    pub write_bytes_per_s: f64,
    /// Fraction of time the device's pipe was busy.
    pub utilization: f64,
    /// Bytes written to admit data (cache fills).
    pub admitted_bytes: u64,
    /// Bytes written by flushes.
    pub flushed_bytes: u64,
    /// Bytes written by migrations.
    pub migrated_bytes: u64,
    /// The migrations' writes as drive writes per day of the device's
    /// capacity in the run (MOST §4.2's DWPD of migration writes; `None`
    /// without a measured interval).
    pub migration_dwpd: Option<f64>,
    /// MOST §4.2's lifetime under migration, years: the device written at
    /// its rated drive writes per day plus `migration_dwpd` (`None` when
    /// its profile gives no warranted endurance).
    #[serde(default)]
    pub migration_lifetime_years: Option<f64>,
    /// Bytes written in total.
    pub written_bytes: u64,
    /// Energy over the measured time, J (the TICA paper's equation 2;
    /// `None` when the device's profile gives no power).
    pub energy_j: Option<f64>,
    /// Years until writes at the measured rate use up the device's
    /// endurance over the capacity the run gives it (`None` when its
    /// profile gives no endurance, or the run did not write it).
    #[serde(default)]
    pub lifetime_years: Option<f64>,
}

/// One time-series sample.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Sample {
    /// End of the sample interval, s.
    pub t_s: f64,
    /// Completed client requests per second.
    pub throughput_ops_per_s: f64,
    /// Mean client latency, µs.
    pub mean_latency_us: f64,
    /// Read hit ratio of the interval (NaN without classified reads).
    pub hit_ratio: f64,
    /// Bytes per second per device.
    pub device_bytes_per_s: Vec<f64>,
    /// Active closed-loop workers (or the open-loop rate multiplier, or a
    /// recorded trace's speed-up), averaged over the sample interval as
    /// the throughput is.
    pub load: f64,
    /// Controller variables.
    pub controller: Vec<(String, f64)>,
}

/// Everything one run measured.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RunResult {
    /// Policy name.
    pub policy: String,
    /// Steady-state client requests per second.
    pub throughput_ops_per_s: f64,
    /// Steady-state client bytes per second.
    pub throughput_bytes_per_s: f64,
    /// Mean latency, µs.
    pub mean_latency_us: f64,
    /// Median latency, µs.
    pub p50_latency_us: f64,
    /// 99th percentile latency, µs.
    pub p99_latency_us: f64,
    /// 99.9th percentile latency, µs.
    pub p999_latency_us: f64,
    /// Mean latency of read requests, µs (`None` without reads).
    #[serde(default)]
    pub read_mean_latency_us: Option<f64>,
    /// Mean latency of write requests, µs (`None` without writes).
    #[serde(default)]
    pub write_mean_latency_us: Option<f64>,
    /// Read hit ratio (NaN when the policy does not classify reads).
    pub hit_ratio: f64,
    /// Requests completed in the steady state.
    pub requests: u64,
    /// Closed-loop workers (0 for open loop).
    pub workers: u32,
    /// Working-set size, blocks.
    pub working_set_blocks: u64,
    /// Per-device figures.
    pub devices: Vec<DeviceResult>,
    /// Controller variables at the end.
    pub controller: Vec<(String, f64)>,
    /// Time series.
    pub samples: Vec<Sample>,
    /// Reads checked by the version checker.
    pub reads_checked: u64,
    /// Open-loop arrivals dropped because too many requests were queued.
    pub dropped_requests: u64,
    /// Simulated events processed.
    pub events: u64,
    /// Device requests that merged several blocks' operations on
    /// consecutive addresses, as the engine merges them, over the whole
    /// run (warm-up included).
    #[serde(default)]
    pub merged_device_requests: u64,
    /// Blocks' operations carried by those requests.
    #[serde(default)]
    pub merged_blocks: u64,
    /// Seconds from the schedule's last load step until the throughput
    /// settles ([`super::converge`]); `None` without a step or when the
    /// phase is too short to tell.
    pub convergence_s: Option<f64>,
    /// The key-value cache's figures, in a key-value run.
    pub kv: Option<KvResult>,
    /// Length of the measured time, s (a trace run's ends with its last
    /// request).
    pub measured_s: f64,
    /// Energy of the devices whose profile gives power, over the measured
    /// time, J (`None` when none does).
    pub energy_j: Option<f64>,
    /// The TICA paper's cache write amplification factor (equation 1):
    /// bytes written to the devices with an endurance (the SSDs) over
    /// bytes the clients wrote, in the measured time (`None` without such
    /// devices or without client writes).
    #[serde(default)]
    pub cwaf: Option<f64>,
    /// The shortest device lifetime of the run, years.
    #[serde(default)]
    pub ssd_lifetime_years: Option<f64>,
    /// What the configured device failure did (`None` without one, or
    /// when the run ended before it).
    #[serde(default)]
    pub failure: Option<crate::failure::FailureResult>,
}

/// What a key-value run measures beyond the common figures (there, the
/// requests are cache commands and `hit_ratio` is the share of GETs that
/// found their key).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct KvResult {
    /// Mean GET latency in the steady state, µs.
    pub get_mean_latency_us: f64,
    /// 99th percentile GET latency in the steady state, µs.
    pub get_p99_latency_us: f64,
    /// GETs in the steady state.
    pub gets: u64,
    /// GETs answered from DRAM in the steady state.
    pub dram_hits: u64,
    /// GETs answered from flash in the steady state (for the cache, from
    /// the volume or from a region buffer not yet written).
    pub flash_hits: u64,
    /// SETs in the steady state.
    pub sets: u64,
    /// Reads of the volume the key-value layer issued in the steady state.
    pub volume_reads: u64,
    /// Items DRAM evicted in the steady state that no flash cache stored
    /// (no large-object region free, and its insert queue full).
    pub dropped: u64,
    /// SETs refused in the steady state ("the store is full").
    pub refused: u64,
    /// SETs of the prefill refused (their keys start unset): a store
    /// whose keys do not all fit.
    #[serde(default)]
    pub prefill_refused: u64,
}

impl Window {
    /// Mean latency of the requests of operation `i` (0 reads, 1 writes),
    /// µs; `None` without any.
    fn op_mean_latency_us(&self, i: usize) -> Option<f64> {
        let n = self.op_requests[i];
        (n > 0).then(|| self.op_latency_sum_ns[i] / n as f64 / 1e3)
    }
}

impl Simulator {
    /// The convergence time after the last step of a `steps` schedule.
    fn convergence_after_last_step(&self) -> Option<f64> {
        let Schedule::Steps { times_s, .. } = &self.r.cfg.client.schedule else {
            return None;
        };
        let &t_step_s = times_s.last()?;
        let t_end_s = self.r.cfg.duration_s;
        let interval_s = self.sample_ns as f64 / 1e9;
        super::converge::convergence_s(
            &self.samples,
            interval_s,
            t_step_s,
            t_end_s,
            super::converge::DEFAULT_TOLERANCE,
        )
    }

    pub(super) fn sample(&mut self) {
        let secs = self.sample_ns as f64 / 1e9;
        let a = std::mem::take(&mut self.sample_acc);
        let classified = a.read_hits + a.read_misses;
        let device_bytes_per_s = self
            .devices
            .iter()
            .zip(self.sample_dev_bytes.iter_mut())
            .map(|(d, prev)| {
                let now = d.counters.read_bytes + d.counters.write_bytes;
                let v = (now - *prev) as f64 / secs;
                *prev = now;
                v
            })
            .collect();
        self.integrate_load();
        let load = std::mem::take(&mut self.load_integral) / self.sample_ns as f64;
        self.samples.push(Sample {
            t_s: self.now as f64 / 1e9,
            throughput_ops_per_s: a.requests as f64 / secs,
            mean_latency_us: a.mean_latency_ns() / 1e3,
            hit_ratio: if classified > 0 {
                a.read_hits as f64 / classified as f64
            } else {
                f64::NAN
            },
            device_bytes_per_s,
            load,
            controller: self.controller_state(),
        });
        self.push(self.now + self.sample_ns, Ev::Sample);
    }

    /// The load offered now: active closed-loop workers (those asked to
    /// retire no longer count), or the open-loop rate multiplier, or a
    /// recorded trace's speed-up.
    fn current_load(&self) -> f64 {
        match self.r.client {
            ClientMode::Closed { .. } => (self.running_workers - self.retiring) as f64,
            ClientMode::Open { .. } | ClientMode::Load { .. } => self.load_factor,
            ClientMode::Recorded { speedup } => speedup,
        }
    }

    /// Adds the load offered since the last call to the sample interval's
    /// integral; called before the load changes and when a sample is taken.
    pub(super) fn integrate_load(&mut self) {
        assert!(self.now >= self.load_integrated_to_ns, "time ran backwards");
        let held_ns = self.now - self.load_integrated_to_ns;
        self.load_integral += self.current_load() * held_ns as f64;
        self.load_integrated_to_ns = self.now;
    }

    pub(super) fn controller_state(&self) -> Vec<(String, f64)> {
        self.dispatcher
            .policy()
            .controller_state()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect()
    }

    pub(super) fn start_measuring(&mut self) {
        self.measuring = true;
        self.window = Window::default();
        self.dev_at_warmup = self.devices.iter().map(|d| d.counters).collect();
        if let Some(kv) = self.kv.as_mut() {
            kv.get_latency.clear();
            kv.stats_at_warmup = kv.stats();
            kv.refused_at_warmup = kv.refused;
        }
    }

    /// Each device's counters over the measured `secs`.
    fn device_results(&self, secs: f64) -> Vec<DeviceResult> {
        self.devices
            .iter()
            .zip(&self.dev_at_warmup)
            .zip(&self.r.devices)
            .zip(&self.r.power)
            .zip(&self.r.endurance)
            .zip(&self.content)
            .map(|(((((d, s), (name, _)), power), endurance), content)| {
                let c = d.counters;
                let rb = c.read_bytes - s.read_bytes;
                let wb = c.write_bytes - s.write_bytes;
                let purpose = |p: Purpose| {
                    c.write_bytes_by_purpose[p.index()] - s.write_bytes_by_purpose[p.index()]
                };
                let capacity_bytes = content.len() as u64 * self.block_size;
                let migration_dwpd = crate::wear::drive_writes_per_day(
                    purpose(Purpose::Migrate),
                    secs,
                    capacity_bytes,
                );
                DeviceResult {
                    name: name.clone(),
                    ops_per_s: ((c.read_ops + c.write_ops) - (s.read_ops + s.write_ops)) as f64
                        / secs,
                    bytes_per_s: (rb + wb) as f64 / secs,
                    read_bytes_per_s: rb as f64 / secs,
                    write_bytes_per_s: wb as f64 / secs,
                    utilization: ((c.busy_ns - s.busy_ns) / 1e9 / secs).min(1.0),
                    admitted_bytes: purpose(Purpose::Admit),
                    flushed_bytes: purpose(Purpose::Flush),
                    migrated_bytes: purpose(Purpose::Migrate),
                    migration_dwpd,
                    migration_lifetime_years: endurance
                        .zip(migration_dwpd)
                        .and_then(|(e, dwpd)| e.migration_lifetime_years(dwpd)),
                    written_bytes: wb,
                    energy_j: power.map(|p| {
                        p.energy_j(c.read_ops - s.read_ops, c.write_ops - s.write_ops, secs)
                    }),
                    lifetime_years: endurance.and_then(|e| {
                        crate::wear::lifetime_years(e.writes_per_gb, capacity_bytes, wb, secs)
                    }),
                }
            })
            .collect()
    }

    /// The key-value layer's counters since the warm-up, if it ran.
    fn kv_result(&self) -> Option<KvResult> {
        self.kv.as_ref().map(|kv| {
            let (now, then) = (kv.stats(), kv.stats_at_warmup);
            KvResult {
                get_mean_latency_us: kv.get_latency.mean() / 1e3,
                get_p99_latency_us: kv.get_latency.quantile(0.99) as f64 / 1e3,
                gets: now.gets - then.gets,
                dram_hits: now.dram_hits - then.dram_hits,
                flash_hits: now.flash_hits - then.flash_hits,
                sets: now.sets - then.sets,
                volume_reads: now.volume_reads - then.volume_reads,
                dropped: now.dropped - then.dropped,
                refused: kv.refused - kv.refused_at_warmup,
                prefill_refused: kv.prefill_refused,
            }
        })
    }

    pub(super) fn finish(self) -> RunResult {
        let secs = (self.end_ns - self.warmup_ns.min(self.end_ns)).max(1) as f64 / 1e9;
        let w = &self.window;
        let classified = w.read_hits + w.read_misses;
        let devices = self.device_results(secs);
        let convergence_s = self.convergence_after_last_step();
        let kv = self.kv_result();
        let powered: Vec<f64> = devices.iter().filter_map(|d| d.energy_j).collect();
        let energy_j = (!powered.is_empty()).then(|| powered.iter().sum());
        let ssds = || {
            devices
                .iter()
                .zip(&self.r.endurance)
                .filter(|(_, e)| e.is_some())
        };
        let ssd_written = ssds().map(|(d, _)| d.written_bytes).reduce(|a, b| a + b);
        let cwaf = crate::wear::cwaf(ssd_written, w.write_bytes);
        let ssd_lifetime_years = ssds()
            .filter_map(|(d, _)| d.lifetime_years)
            .reduce(f64::min);
        RunResult {
            measured_s: secs,
            energy_j,
            cwaf,
            ssd_lifetime_years,
            policy: self.r.cfg.policy.clone(),
            throughput_ops_per_s: w.requests as f64 / secs,
            throughput_bytes_per_s: w.bytes as f64 / secs,
            mean_latency_us: w.latency.mean() / 1e3,
            p50_latency_us: w.latency.quantile(0.5) as f64 / 1e3,
            p99_latency_us: w.latency.quantile(0.99) as f64 / 1e3,
            p999_latency_us: w.latency.quantile(0.999) as f64 / 1e3,
            read_mean_latency_us: w.op_mean_latency_us(0),
            write_mean_latency_us: w.op_mean_latency_us(1),
            hit_ratio: if classified > 0 {
                w.read_hits as f64 / classified as f64
            } else {
                f64::NAN
            },
            requests: w.requests,
            workers: match self.r.client {
                ClientMode::Closed { workers } => workers,
                ClientMode::Open { .. } | ClientMode::Load { .. } | ClientMode::Recorded { .. } => {
                    0
                }
            },
            working_set_blocks: self.r.working_set,
            devices,
            controller: self.controller_state(),
            samples: self.samples,
            reads_checked: self.reads_checked,
            dropped_requests: self.dropped,
            events: self.events_processed,
            merged_device_requests: self.merging.merged_ops,
            merged_blocks: self.merging.merged_blocks,
            convergence_s,
            kv,
            failure: self.failure,
        }
    }
}
