//! Opening a volume: its devices with their layers, the policy, the
//! checks a configuration must pass (address spaces, devices in memory),
//! recovery of the saved map (forgetting what devices lost), and devices
//! that failed at open taken out of service.

use std::collections::VecDeque;

use tiermux_core::policy::{DeviceSpec, VolumeSpec};
use tiermux_core::{build_policy, Dispatcher, ObservationBuilder};

use super::bufpool::BufPool;
use super::{discards, health, Volume, VolumeStats};
use crate::config::VolumeConfig;
use crate::device::Device;
use crate::emulate::Emulated;
use crate::journal::{Metadata, Recovery, VolumeShape};
use crate::reactor::Reactor;
use crate::slab::Slab;

/// Why a volume could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// A device problem.
    #[error(transparent)]
    Device(#[from] crate::device::DeviceError),
    /// A policy problem.
    #[error(transparent)]
    Policy(#[from] tiermux_core::PolicyError),
    /// A metadata problem.
    #[error(transparent)]
    Meta(#[from] crate::journal::MetaError),
    /// Devices in memory would hold the only copy of writes.
    #[error("{message}")]
    Volatile {
        /// Which devices, and what to do.
        message: String,
    },
    /// The saved map does not suit the policy.
    #[error("metadata in {dir}: {message}")]
    Restore {
        /// The metadata directory.
        dir: String,
        /// The policy's complaint.
        message: String,
    },
}

/// Recovers the volume's metadata. The devices are synced first: whatever
/// recovery finds points at their data, and the checkpoint it writes must
/// not outlive that data in a power cut. A device other than home whose
/// sync fails is left out (bit set in the returned mask); the caller takes
/// it out of service.
fn open_metadata(
    cfg: &VolumeConfig,
    shape: &VolumeShape,
    home: u8,
    devices: &[Device],
    r: &mut dyn Reactor,
) -> Result<(Metadata, tiermux_core::PlacementMap, Recovery, u8), OpenError> {
    let mut failed = 0u8;
    for (i, d) in devices.iter().enumerate() {
        if let Err(source) = r.sync_now(d.fd()) {
            if i == home as usize {
                return Err(crate::journal::MetaError::Io {
                    path: d.path.clone(),
                    source,
                }
                .into());
            }
            eprintln!(
                "tiermux: device '{}' failed its sync at open: {source}",
                d.name
            );
            failed |= 1 << i;
        }
    }
    let mask = |f: fn(&Device) -> bool| {
        (0..devices.len())
            .filter(|&i| f(&devices[i]))
            .fold(0u8, |m, i| m | 1 << i)
    };
    // A volume wholly in memory is taken to be meant as such (and the
    // simulated power cuts of tests keep its files): only a persistent
    // home makes the caches in memory lose their contents at a reboot.
    let home_in_memory = devices[home as usize].memory_backed;
    let lost = crate::journal::Lost {
        created: mask(|d| d.created),
        in_memory: if home_in_memory {
            0
        } else {
            mask(|d| d.memory_backed)
        },
    };
    let (mut meta, map, recovery) =
        Metadata::open_forgetting(&cfg.metadata_dir, shape, home, &r.boot_id(), lost)?;
    for (i, d) in devices.iter().enumerate() {
        if recovery.lost_devices & (1 << i) != 0 && !recovery.fresh {
            let why = if d.created {
                "its file is new"
            } else {
                "it is in memory and the machine rebooted"
            };
            eprintln!("tiermux: device '{}' lost its contents ({why})", d.name);
        }
    }
    if recovery.forgotten_copies > 0 {
        eprintln!(
            "tiermux: {} copies on devices that lost their contents forgotten; {} blocks whose newest data was only there now read their older home copy",
            recovery.forgotten_copies, recovery.lost_blocks
        );
    }
    meta.set_data_fds(
        devices
            .iter()
            .enumerate()
            .filter(|(i, _)| failed & (1 << i) == 0)
            .map(|(_, d)| d.fd())
            .collect(),
    );
    Ok((meta, map, recovery, failed))
}

/// Opens every device of `cfg` with its layers.
fn open_devices(cfg: &VolumeConfig) -> Result<Vec<Device>, OpenError> {
    let mut devices = Vec::new();
    for (i, d) in cfg.devices.iter().enumerate() {
        let mut dev = Device::open(&d.name, &d.path, d.size_bytes, d.direct)?;
        if let Some(p) = &d.profile {
            let seed = cfg.seed ^ (i as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407);
            let timing = Emulated::new(p, seed).map_err(|e| crate::device::DeviceError {
                name: d.name.clone(),
                path: d.path.clone(),
                message: format!("profile: {e}"),
            })?;
            dev.wrap(Box::new(timing));
        }
        if let Some(name) = &d.array {
            let array = crate::emulate::EmulatedArray::new(name, cfg.block_size as u64)
                .expect("config checked the array's name");
            dev.wrap(Box::new(array));
        }
        if let Some(spec) = d.faults {
            let seed = cfg.seed ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            dev.wrap(Box::new(crate::faults::Injected::new(spec, seed)));
        }
        devices.push(dev);
    }
    Ok(devices)
}

/// The volume's shape as policies see it.
pub(super) fn volume_spec(cfg: &VolumeConfig) -> VolumeSpec {
    let bs = cfg.block_size as u64;
    VolumeSpec {
        num_blocks: cfg.size_bytes / bs,
        block_size: cfg.block_size,
        devices: cfg
            .devices
            .iter()
            .map(|d| DeviceSpec {
                name: d.name.clone(),
                capacity_blocks: d.size_bytes / bs,
                role: d.role,
            })
            .collect(),
    }
}

/// Refuses devices in memory (tmpfs, ramfs) that the policy may leave
/// holding the only copy of acknowledged writes while home is persistent,
/// and a metadata directory in memory when any cache device may hold such
/// a copy (a reboot would forget where it is): a power cut would lose
/// those writes, which a persistent home suggests the user does not
/// expect. `volatile_ok` accepts the risk. A volume wholly in memory is
/// taken to be meant as such.
pub(super) fn check_volatile(
    cfg: &VolumeConfig,
    devices: &[Device],
    home: u8,
    policy: &dyn tiermux_core::Policy,
) -> Result<(), OpenError> {
    let in_memory = |d: &Device| d.memory_backed;
    if cfg.volatile_ok || in_memory(&devices[home as usize]) {
        return Ok(());
    }
    let volatile = (0..devices.len() as u8)
        .filter(|&d| d != home && in_memory(&devices[d as usize]))
        .fold(0u8, |m, d| m | 1 << d);
    check_volatile_metadata(cfg, devices, home, policy)?;
    if !policy.may_keep_sole_copies(volatile) {
        return Ok(());
    }
    let names: Vec<String> = (0..devices.len())
        .filter(|&d| volatile & (1 << d) != 0)
        .map(|d| format!("'{}' ({})", devices[d].name, devices[d].path.display()))
        .collect();
    Err(OpenError::Volatile {
        message: format!(
            "{} {} in memory (tmpfs or ramfs), and policy '{}' may keep the only copy of acknowledged writes there, while home device '{}' is persistent: a power cut would lose them. Move {} to persistent storage, or set volatile_ok = true to accept that",
            if names.len() > 1 { "devices" } else { "device" },
            names.join(" and ") + if names.len() > 1 { " are" } else { " is" },
            policy.name(),
            devices[home as usize].name,
            if names.len() > 1 { "them" } else { "it" },
        ),
    })
}

/// Refuses a metadata directory in memory when a cache device may hold
/// the only copy of acknowledged writes (see [`check_volatile`]).
fn check_volatile_metadata(
    cfg: &VolumeConfig,
    devices: &[Device],
    home: u8,
    policy: &dyn tiermux_core::Policy,
) -> Result<(), OpenError> {
    let caches = (0..devices.len() as u8)
        .filter(|&d| d != home)
        .fold(0u8, |m, d| m | 1 << d);
    if !metadata_in_memory(cfg)? || !policy.may_keep_sole_copies(caches) {
        return Ok(());
    }
    Err(OpenError::Volatile {
        message: format!(
            "metadata directory {} is in memory (tmpfs or ramfs), and policy '{}' may keep the only copy of acknowledged writes on a cache device, while home device '{}' is persistent: a reboot would lose the map that names those copies. Move the metadata directory to persistent storage, or set volatile_ok = true to accept that",
            cfg.metadata_dir.display(),
            policy.name(),
            devices[home as usize].name,
        ),
    })
}

/// Whether the metadata directory (created if missing) lies in memory.
fn metadata_in_memory(cfg: &VolumeConfig) -> Result<bool, OpenError> {
    let dir = &cfg.metadata_dir;
    let io = |source| crate::journal::MetaError::Io {
        path: dir.clone(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    let f = std::fs::File::open(dir).map_err(io)?;
    Ok(crate::device::in_memory(&f))
}

/// Refuses a policy that addresses more of a device than it has.
fn check_address_spaces(
    cfg: &VolumeConfig,
    devices: &[Device],
    policy: &dyn tiermux_core::Policy,
) -> Result<(), OpenError> {
    for (d, dev) in devices.iter().enumerate() {
        let need = policy.address_space(d) * cfg.block_size as u64;
        if need > dev.size_bytes {
            return Err(OpenError::Restore {
                dir: cfg.metadata_dir.display().to_string(),
                message: format!(
                    "policy addresses {need} bytes of device '{}', which has {}",
                    dev.name, dev.size_bytes
                ),
            });
        }
    }
    Ok(())
}

/// The health of freshly opened devices: those in `failed` (their sync at
/// open failed) are taken out of service, or the volume cannot open when
/// the policy cannot do without one.
fn give_up_failed_devices(
    cfg: &VolumeConfig,
    devices: &[Device],
    failed: u8,
    dispatcher: &mut Dispatcher,
) -> Result<health::Health, OpenError> {
    let mut health = health::Health::new(cfg.devices.len());
    for d in (0..devices.len() as u8).filter(|d| failed & (1 << d) != 0) {
        health.failed(d, health::OUT_OF_SERVICE_AFTER_ERRORS);
        if !dispatcher.take_out_of_service(d) {
            return Err(OpenError::Restore {
                dir: cfg.metadata_dir.display().to_string(),
                message: format!(
                    "device '{}' fails, and policy '{}' cannot do without it",
                    devices[d as usize].name,
                    dispatcher.policy().name()
                ),
            });
        }
        health.out_of_service(d);
        let at_risk = dispatcher
            .map()
            .iter()
            .filter(|(_, e)| e.dirty_on(d))
            .count();
        eprintln!(
            "tiermux: device '{}' taken out of service at open{}",
            devices[d as usize].name,
            if at_risk > 0 {
                format!("; AT RISK: {at_risk} blocks whose newest data is only on it")
            } else {
                String::new()
            }
        );
    }
    Ok(health)
}

impl Volume {
    /// Opens the devices, builds the policy and recovers the saved map.
    pub fn open(cfg: &VolumeConfig, r: &mut dyn Reactor) -> Result<Volume, OpenError> {
        let bs = cfg.block_size as u64;
        let devices = open_devices(cfg)?;
        let spec = volume_spec(cfg);
        let policy = build_policy(&cfg.policy, &cfg.params, &spec, cfg.seed)?;
        let home = spec.home().ok_or_else(|| OpenError::Restore {
            dir: cfg.metadata_dir.display().to_string(),
            message: "the engine needs a device with the role 'home' (volumes without one are not served yet)".into(),
        })?;
        let shape = VolumeShape {
            format: crate::journal::FORMAT,
            block_size: cfg.block_size,
            num_blocks: spec.num_blocks,
            devices: (0..devices.len())
                .map(|d| (cfg.devices[d].name.clone(), policy.address_space(d)))
                .collect(),
            policy_family: policy.layout().to_string(),
            seed: cfg.seed,
        };
        check_address_spaces(cfg, &devices, policy.as_ref())?;
        check_volatile(cfg, &devices, home, policy.as_ref())?;
        let (mut meta, map, recovery, failed) = open_metadata(cfg, &shape, home, &devices, r)?;
        let discard_devices = cfg
            .devices
            .iter()
            .enumerate()
            .filter(|(_, d)| d.discard)
            .fold(0u8, |m, (i, _)| m | 1 << i);
        meta.set_discard_devices(discard_devices);
        let mut dispatcher =
            Dispatcher::with_map(policy, map).map_err(|message| OpenError::Restore {
                dir: cfg.metadata_dir.display().to_string(),
                message,
            })?;
        dispatcher.track_changes();
        let health = give_up_failed_devices(cfg, &devices, failed, &mut dispatcher)?;
        let address_spaces = (0..cfg.devices.len())
            .map(|d| dispatcher.policy().address_space(d))
            .collect();
        let tick_interval_ns = dispatcher.policy().tick_interval_ns();
        let now = r.now_ns();
        let mut vol = Volume {
            cfg: cfg.clone(),
            dispatcher,
            pool: BufPool::new(bs as usize),
            obs: ObservationBuilder::new(devices.len(), now, bs),
            devices,
            meta,
            ops: Slab::new(),
            merged: Slab::new(),
            emu_waits: Default::default(),
            batch: Vec::new(),
            reqs: Slab::new(),
            blocked: VecDeque::new(),
            rmw_busy: Default::default(),
            finished: Vec::new(),
            next_tick_ns: tick_interval_ns.map(|i| now + i),
            tick_interval_ns,
            home,
            address_spaces,
            stats: VolumeStats::default(),
            recovery,
            marks: Default::default(),
            meta_error: None,
            health,
            discards: discards::Discards::on(discard_devices),
        };
        // Work the policy queued at open (flushes of a device taken out
        // of service) starts with the first wait.
        vol.drain(r);
        Ok(vol)
    }
}
