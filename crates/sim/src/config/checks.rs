//! The checks of a configuration's sizes, times, workload and client:
//! each refuses what a run could not do (or would overflow, hang or abort
//! on) with an error that names the field.

use tiermux_core::params::shown;

use super::{check, ClientMode, ConfigError, SimConfig};
use crate::workload::Pattern;

/// Most closed-loop workers a run may have: each keeps a request in flight,
/// and the event queue holds at most 2^24 events at once.
pub const MAX_WORKERS: u32 = 1 << 20;
/// Highest open-loop arrival rate: one arrival per nanosecond, the
/// simulated clock's resolution.
pub const MAX_RATE_OPS_PER_S: f64 = 1e9;
/// Longest run, s: the simulated clock counts nanoseconds in 64 bits
/// (about 1.8e10 s), with room for the events scheduled past the end.
pub const MAX_DURATION_S: f64 = 1e9;

impl SimConfig {
    pub(super) fn check_sizes_and_times(&self) -> Result<(), ConfigError> {
        let c = self;
        check(
            "block_size",
            c.block_size >= 512 && c.block_size.is_power_of_two(),
            || {
                format!(
                    "must be a power of two of at least 512 bytes, got {}",
                    c.block_size
                )
            },
        )?;
        let most = tiermux_core::policy::MAX_LOCATION_BLOCKS;
        check("cache_blocks", (1..=most).contains(&c.cache_blocks), || {
            format!(
                "must be 1 to {most} (32-bit locations), got {}",
                c.cache_blocks
            )
        })?;
        check(
            "roles",
            c.roles.is_empty() || c.roles.len() == c.devices.len(),
            || {
                format!(
                    "gives {} roles for {} devices",
                    c.roles.len(),
                    c.devices.len()
                )
            },
        )?;
        check(
            "middle_device_blocks",
            c.middle_device_blocks.is_empty()
                || c.middle_device_blocks.len() + 2 == c.devices.len(),
            || {
                format!(
                    "gives {} sizes; the {} devices have {} between the first and the last",
                    c.middle_device_blocks.len(),
                    c.devices.len(),
                    c.devices.len().saturating_sub(2)
                )
            },
        )?;
        check(
            "middle_device_blocks",
            c.middle_device_blocks
                .iter()
                .all(|b| (1..=most).contains(b)),
            || format!("every size must be 1 to {most} (32-bit locations)"),
        )?;
        check(
            "duration_s",
            c.duration_s.is_finite() && c.duration_s > 0.0 && c.duration_s <= MAX_DURATION_S,
            || {
                format!(
                    "must be positive and at most {MAX_DURATION_S:e} s (the simulated clock counts nanoseconds in 64 bits), got {}",
                    shown(c.duration_s)
                )
            },
        )?;
        check(
            "warmup_s",
            c.warmup_s.is_finite() && c.warmup_s >= 0.0 && c.warmup_s < c.duration_s,
            || {
                format!(
                    "must be in [0, duration_s = {}), got {} (when left out it is {} s)",
                    c.duration_s,
                    c.warmup_s,
                    super::default_warmup()
                )
            },
        )?;
        check(
            "sample_interval_ms",
            c.sample_interval_ms >= 1e-3 && c.sample_interval_ms.is_finite(),
            || {
                format!(
                    "must be at least 0.001 (1 µs, the time series' resolution), got {}",
                    shown(c.sample_interval_ms)
                )
            },
        )?;
        Ok(())
    }

    pub(super) fn check_workload(&self) -> Result<(), ConfigError> {
        let c = self;
        let w = &c.workload;
        check(
            "workload.write_ratio",
            (0.0..=1.0).contains(&w.write_ratio),
            || format!("must be in [0, 1], got {}", w.write_ratio),
        )?;
        check(
            "workload.write_set_fraction",
            w.write_set_fraction > 0.0 && w.write_set_fraction <= 1.0,
            || format!("must be in (0, 1], got {}", w.write_set_fraction),
        )?;
        check(
            "workload.write_ratio_max",
            (0.0..=1.0).contains(&w.write_ratio_max),
            || format!("must be in [0, 1], got {}", w.write_ratio_max),
        )?;
        check("workload.request_blocks", w.request_blocks >= 1, || {
            "must be at least 1".into()
        })?;
        if let Some(h) = w.hit_ratio {
            check("workload.hit_ratio", h > 0.0 && h <= 1.0, || {
                format!("must be in (0, 1], got {h}")
            })?;
        }
        for (field, set) in [
            ("workload.shift_blocks", w.shift_blocks.is_some()),
            ("workload.shift_reverses", w.shift_reverses),
        ] {
            check(field, !set || w.shift_at_s.is_some(), || {
                "a shift needs its time, workload.shift_at_s".into()
            })?;
        }
        check(
            "workload.shift_reverses",
            !(w.shift_reverses && w.shift_blocks.is_some()),
            || "a reversing shift moves no distance; leave out workload.shift_blocks".into(),
        )?;
        if let Some(p) = w.write_ratio_period_s {
            check("workload.write_ratio_period_s", p > 0.0, || {
                format!("must be positive, got {p}")
            })?;
        }
        if let Err((field, message)) = crate::spikes::check(&w.write_spikes, w.working_set_blocks) {
            return Err(ConfigError::new(&field, message));
        }
        self.check_discards()?;
        check_pattern(&w.pattern)
    }

    /// `workload.discard_chunk_blocks`: only a log on the volume, of
    /// requests no larger than a chunk, discards ahead of its writes.
    fn check_discards(&self) -> Result<(), ConfigError> {
        let w = &self.workload;
        if let Some(n) = w.discard_chunk_blocks {
            check(
                "workload.discard_chunk_blocks",
                matches!(
                    w.pattern,
                    Pattern::Sequential { .. } | Pattern::Latest { .. } | Pattern::Recent { .. }
                ),
                || {
                    "only log patterns (sequential, latest, recent) discard ahead of their writes"
                        .into()
                },
            )?;
            check("workload.discard_chunk_blocks", !w.scramble, || {
                "a scrambled log is not sequential on the volume; leave out workload.scramble"
                    .into()
            })?;
            check("workload.discard_chunk_blocks", self.kv.is_none(), || {
                "key-value runs free space through their own layer".into()
            })?;
            check(
                "workload.discard_chunk_blocks",
                n >= w.request_blocks as u64,
                || {
                    format!(
                        "must be at least workload.request_blocks ({}), got {n}",
                        w.request_blocks
                    )
                },
            )?;
        }
        Ok(())
    }
    pub(super) fn resolve_client(&self) -> Result<ClientMode, ConfigError> {
        let c = self;
        if let Some(speedup) = c.client.replay_speedup {
            check(
                "client.replay_speedup",
                speedup.is_finite() && speedup > 0.0,
                || format!("must be positive, got {speedup}"),
            )?;
            let others = [
                c.client.workers.is_some(),
                c.client.load.is_some(),
                c.client.rate_ops_per_s.is_some(),
            ];
            check("client", !others.contains(&true), || {
                "replay_speedup sets when requests arrive; leave out workers, load and rate_ops_per_s".into()
            })?;
            return Ok(ClientMode::Recorded { speedup });
        }
        let client = match (c.client.workers, c.client.load, c.client.rate_ops_per_s) {
            (Some(n), None, None) => {
                check("client.workers", (1..=MAX_WORKERS).contains(&n), || {
                    format!("must be 1 to {MAX_WORKERS}, got {n}")
                })?;
                ClientMode::Closed { workers: n }
            }
            (None, Some(l), None) => {
                check("client.load", l.is_finite() && l > 0.0 && l <= 64.0, || {
                    format!("must be in (0, 64], got {l}")
                })?;
                ClientMode::Load { load: l }
            }
            (None, None, Some(r)) => {
                check(
                    "client.rate_ops_per_s",
                    r.is_finite() && r > 0.0 && r <= MAX_RATE_OPS_PER_S,
                    || {
                        format!(
                        "must be positive and at most {MAX_RATE_OPS_PER_S:e} (one arrival per nanosecond, the clock's resolution), got {}",
                        shown(r)
                    )
                    },
                )?;
                ClientMode::Open { rate_ops_per_s: r }
            }
            (None, None, None) => ClientMode::Closed { workers: 16 },
            _ => {
                return Err(ConfigError::new(
                    "client",
                    "give exactly one of workers, load or rate_ops_per_s",
                ))
            }
        };
        check(
            "client.think_time_us",
            c.client.think_time_us.is_finite() && c.client.think_time_us >= 0.0,
            || format!("must be zero or positive, got {}", c.client.think_time_us),
        )?;
        Ok(client)
    }
}

/// The pattern's own parameters.
fn check_pattern(pattern: &Pattern) -> Result<(), ConfigError> {
    match pattern {
        Pattern::Zipf { theta } | Pattern::Latest { theta } => {
            check(
                "workload.pattern.theta",
                *theta > 0.0 && *theta < 1.0,
                || format!("must be in (0, 1), got {theta}"),
            )?;
        }
        Pattern::Hotset {
            hot_fraction,
            hot_access_fraction,
        }
        | Pattern::Recent {
            hot_fraction,
            hot_access_fraction,
        } => {
            check(
                "workload.pattern.hot_fraction",
                *hot_fraction > 0.0 && *hot_fraction <= 1.0,
                || format!("must be in (0, 1], got {hot_fraction}"),
            )?;
            check(
                "workload.pattern.hot_access_fraction",
                (0.0..=1.0).contains(hot_access_fraction),
                || format!("must be in [0, 1], got {hot_access_fraction}"),
            )?;
        }
        Pattern::Sequential { streams } => {
            check("workload.pattern.streams", *streams >= 1, || {
                "must be at least 1".into()
            })?;
        }
        Pattern::Cachebench { mix } => {
            check(
                "workload.pattern.mix",
                crate::cachebench::popularity(mix).is_some(),
                || crate::cachebench::unknown_mix(mix),
            )?;
        }
        Pattern::Uniform => {}
    }
    Ok(())
}
