//! Whether a run's state fits in this machine's memory. The simulator
//! keeps state for every block of the volume and of each device (the
//! version checker, the devices' contents), and a key-value run keeps the
//! volume's bytes too; a volume too large for the machine gets a
//! configuration error that names its size, instead of an allocation
//! failure partway through a sweep, and a sweep runs no more key-value
//! runs at once than fit.

use tiermux_core::{DeviceRole, VolumeSpec};

/// Bytes a run keeps for each block of the volume, at least: the version
/// checker's entry (the versions issued and acknowledged, 4 bytes each).
pub const STATE_BYTES_PER_VOLUME_BLOCK: u64 = 8;
/// Bytes a run keeps for each block a device addresses: the version its
/// content holds.
pub const STATE_BYTES_PER_DEVICE_BLOCK: u64 = 4;

/// The least memory a run of `volume` needs for its per-block state, in
/// bytes (the home device addresses the whole volume).
pub fn state_bytes(volume: &VolumeSpec) -> u128 {
    let device_blocks: u128 = volume
        .devices
        .iter()
        .map(|d| match d.role {
            DeviceRole::Home => volume.num_blocks as u128,
            _ => d.capacity_blocks as u128,
        })
        .sum();
    volume.num_blocks as u128 * STATE_BYTES_PER_VOLUME_BLOCK as u128
        + device_blocks * STATE_BYTES_PER_DEVICE_BLOCK as u128
}

/// This machine's memory in bytes (`MemTotal` of `/proc/meminfo`), or
/// `None` where it cannot be read.
pub fn machine_memory_bytes() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Checks that a run of `volume` can keep its per-block state, and the
/// volume's bytes where it keeps them (`keeps_contents`: a key-value run,
/// whose machine reads back what it wrote), within `memory_bytes` (no
/// check when it is unknown); the error says how much the volume needs
/// and what to change.
pub fn check_fits(
    volume: &VolumeSpec,
    keeps_contents: bool,
    memory_bytes: Option<u64>,
) -> Result<(), String> {
    let Some(memory) = memory_bytes else {
        return Ok(());
    };
    let state = state_bytes(volume);
    let contents = if keeps_contents {
        volume.num_blocks as u128 * volume.block_size as u128
    } else {
        0
    };
    if state + contents <= memory as u128 {
        return Ok(());
    }
    const GIB: f64 = (1u64 << 30) as f64;
    let blocks = format!(
        "a volume of {} blocks on devices of {} blocks",
        volume.num_blocks,
        volume
            .devices
            .iter()
            .map(|d| d.capacity_blocks.to_string())
            .collect::<Vec<_>>()
            .join(" + ")
    );
    if contents > 0 {
        return Err(format!(
            "{blocks} keeps its {:.1} GiB of bytes (a key-value run reads back what it wrote) and {:.1} GiB of per-block state, more than this machine's {:.1} GiB; use a smaller volume",
            contents as f64 / GIB,
            state as f64 / GIB,
            memory as f64 / GIB
        ));
    }
    Err(format!(
        "{blocks} keeps at least {:.1} GiB of per-block state, more than this machine's {:.1} GiB; use fewer or larger blocks",
        state as f64 / GIB,
        memory as f64 / GIB
    ))
}

/// How a sweep runs its key-value runs within `memory_bytes`: at most
/// `threads` at once, and whether they may share prefills (a share holds
/// a front beside each thread's own, so a thread may need two copies of
/// the volume's bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SweepFit {
    /// Runs at once.
    pub threads: usize,
    /// Whether the runs may share prefilled fronts.
    pub share_prefills: bool,
    /// The largest key-value run's volume, bytes (0 without one).
    pub volume_bytes: u64,
}

/// The threads a sweep may run `configs` on, up to `threads`, so that the
/// key-value runs' volume bytes fit `memory_bytes` (no limit when it is
/// unknown or no run is a key-value run); sharing prefills when two
/// copies a thread fit at least one thread.
pub fn sweep_fit(
    configs: &[crate::SimConfig],
    threads: usize,
    memory_bytes: Option<u64>,
) -> SweepFit {
    let threads = threads.max(1);
    let largest_bytes = configs
        .iter()
        .filter(|c| c.kv.is_some())
        .map(|c| c.volume_blocks.unwrap_or(0) as u128 * c.block_size as u128)
        .max()
        .unwrap_or(0);
    let volume_bytes = u64::try_from(largest_bytes).unwrap_or(u64::MAX);
    let (Some(memory), true) = (memory_bytes, largest_bytes > 0) else {
        return SweepFit {
            threads,
            share_prefills: true,
            volume_bytes,
        };
    };
    let fitting = |copies: u128| (memory as u128 / (copies * largest_bytes)) as usize;
    if fitting(2) >= 1 {
        SweepFit {
            threads: threads.min(fitting(2)),
            share_prefills: true,
            volume_bytes,
        }
    } else {
        // Each run alone was checked to fit (`check_fits`).
        SweepFit {
            threads: threads.min(fitting(1).max(1)),
            share_prefills: false,
            volume_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tiermux_core::policy::DeviceSpec;

    fn volume(num_blocks: u64, cache_blocks: u64) -> VolumeSpec {
        let device = |name: &str, capacity_blocks, role| DeviceSpec {
            name: name.into(),
            capacity_blocks,
            role,
        };
        VolumeSpec {
            num_blocks,
            block_size: 4096,
            devices: vec![
                device("fast", cache_blocks, DeviceRole::Cache),
                device("slow", num_blocks, DeviceRole::Home),
            ],
        }
    }

    #[test]
    fn state_counts_the_volume_and_every_device() {
        // 8 bytes per volume block, 4 per block of each device.
        assert_eq!(state_bytes(&volume(1000, 100)), 8_000 + 4 * 1_100);
    }

    #[test]
    fn a_volume_past_the_memory_is_refused_with_its_size() {
        let gib = 1u64 << 30;
        assert!(check_fits(&volume(1 << 20, 1 << 10), false, Some(gib)).is_ok());
        let err = check_fits(&volume(u64::MAX / 2, 1 << 10), false, Some(gib)).unwrap_err();
        assert!(err.contains(&format!("{} blocks", u64::MAX / 2)), "{err}");
        assert!(err.contains("1.0 GiB"), "{err}");
        // Unknown memory: no check.
        assert!(check_fits(&volume(u64::MAX / 2, 1 << 10), false, None).is_ok());
    }

    #[test]
    fn a_sweep_runs_as_many_key_value_runs_at_once_as_fit() {
        let gib = 1u64 << 30;
        let run = |blocks: u64, kv: bool| crate::SimConfig {
            volume_blocks: Some(blocks),
            kv: kv.then(crate::kvconfig::KvSpec::default),
            ..crate::SimConfig::default()
        };
        let fit = |configs: &[crate::SimConfig], threads, memory| {
            let f = sweep_fit(configs, threads, Some(memory));
            (f.threads, f.share_prefills)
        };
        // 1 GiB volumes, two copies a thread: 8 GiB fits 4 threads.
        let kv = [run(1 << 18, true), run(1 << 17, true)];
        assert_eq!(fit(&kv, 16, 8 * gib), (4, true));
        assert_eq!(fit(&kv, 2, 8 * gib), (2, true));
        // 1.5 GiB: one copy fits, two do not.
        assert_eq!(fit(&kv, 16, 3 * gib / 2), (1, false));
        // Block runs keep no volume bytes; unknown memory sets no limit.
        assert_eq!(fit(&[run(1 << 30, false)], 16, gib), (16, true));
        assert_eq!(sweep_fit(&kv, 16, None).threads, 16);
        assert_eq!(sweep_fit(&kv, 16, None).volume_bytes, gib);
    }

    #[test]
    fn a_key_value_run_counts_the_volume_bytes_too() {
        let gib = 1u64 << 30;
        // 1 GiB of 4 KiB blocks: 2 MiB of per-block state alone, but with
        // its bytes more than 1 GiB.
        let v = volume(1 << 18, 1 << 10);
        assert!(check_fits(&v, false, Some(gib)).is_ok());
        let err = check_fits(&v, true, Some(gib)).unwrap_err();
        assert!(err.contains("keeps its 1.0 GiB of bytes"), "{err}");
        assert!(err.contains("use a smaller volume"), "{err}");
        assert!(check_fits(&v, true, Some(2 * gib)).is_ok());
    }
}
