//! The policy interface: what a policy sees and answers. The policies
//! themselves and their registry are in [`crate::policies`].
//!
//! A policy sees one client access at a time (of one block, or of a range
//! when it allows ranges), with the blocks' locks held by the
//! [`crate::dispatch::Dispatcher`], and answers with a [`Plan`] of device
//! operations, changes to the [`PlacementMap`] and background [`Job`]s. It
//! never performs I/O and never reads a clock: time and measurements arrive
//! through [`Observation`]s on ticks.

use crate::map::PlacementMap;
use crate::observe::Observation;
use crate::params::ParamError;
use crate::types::{Access, DeviceIndex, Job, Outcome, Plan};

/// What a device is for in a volume.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceRole {
    /// Holds copies of blocks that live elsewhere, in locations it
    /// allocates (a cache's slots).
    Cache,
    /// Holds blocks in locations it allocates, as part of the volume's
    /// capacity (tiering: a block lives on one tier, or is mirrored).
    Tier,
    /// Holds every block at its own block number; a block placed nowhere
    /// else lives here.
    Home,
}

impl DeviceRole {
    /// Lowercase name, as configs write it.
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceRole::Cache => "cache",
            DeviceRole::Tier => "tier",
            DeviceRole::Home => "home",
        }
    }

    /// The roles of a hierarchy of `n` devices when a config names none:
    /// every device caches the next one, and the last is home.
    pub fn defaults(n: usize) -> Vec<DeviceRole> {
        (0..n)
            .map(|i| {
                if i + 1 == n {
                    DeviceRole::Home
                } else {
                    DeviceRole::Cache
                }
            })
            .collect()
    }
}

/// One device of a volume as policies see it.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceSpec {
    /// Human-readable name (profile name or path).
    pub name: String,
    /// Blocks of this device the volume may use.
    pub capacity_blocks: u64,
    /// What the device is for.
    pub role: DeviceRole,
}

/// Most blocks a device that allocates locations may offer: the placement
/// map and the slot pools address its blocks in 32 bits.
pub const MAX_LOCATION_BLOCKS: u64 = u32::MAX as u64;

/// Shape of a volume: its size, block size and devices (fastest first).
#[derive(Clone, Debug, PartialEq)]
pub struct VolumeSpec {
    /// Number of blocks in the client-visible address space.
    pub num_blocks: u64,
    /// Block size in bytes.
    pub block_size: u32,
    /// Devices, fastest first.
    pub devices: Vec<DeviceSpec>,
}

impl VolumeSpec {
    /// The devices with `role`, fastest first.
    pub fn with_role(&self, role: DeviceRole) -> impl Iterator<Item = DeviceIndex> + '_ {
        self.devices
            .iter()
            .enumerate()
            .filter(move |(_, d)| d.role == role)
            .map(|(i, _)| i as DeviceIndex)
    }

    /// The device that holds blocks placed nowhere else: the home device,
    /// or `None` when no device has that role.
    pub fn home(&self) -> Option<DeviceIndex> {
        self.with_role(DeviceRole::Home).next()
    }

    /// Checks what every volume must satisfy: at most
    /// [`crate::types::MAX_DEVICES`] devices, at most one home device, and
    /// devices that allocate locations among the first
    /// [`crate::map::LOC_DEVICES`], each of at most
    /// [`MAX_LOCATION_BLOCKS`] blocks.
    pub fn validate(&self) -> Result<(), String> {
        check_device_count(self.devices.len())?;
        if self.with_role(DeviceRole::Home).count() > 1 {
            return Err("at most one device can have the role 'home'".into());
        }
        for (i, d) in self.devices.iter().enumerate() {
            if d.role != DeviceRole::Home && i >= crate::map::LOC_DEVICES {
                return Err(format!(
                    "device {i} ('{}') has the role '{}', but only the first {} devices can hold blocks at locations they allocate; make it the home device",
                    d.name,
                    d.role.as_str(),
                    crate::map::LOC_DEVICES
                ));
            }
            if d.role != DeviceRole::Home && d.capacity_blocks > MAX_LOCATION_BLOCKS {
                return Err(format!(
                    "device {i} ('{}') offers {} blocks, but a device that holds blocks at locations it allocates addresses at most {MAX_LOCATION_BLOCKS} (32-bit locations)",
                    d.name, d.capacity_blocks
                ));
            }
        }
        Ok(())
    }
}

/// Checks that a volume of `n` devices fits the placement map (whose
/// per-device bitmasks hold [`crate::types::MAX_DEVICES`]); the error is the
/// one every config reader reports.
pub fn check_device_count(n: usize) -> Result<(), String> {
    if n == 0 || n > crate::types::MAX_DEVICES {
        return Err(format!(
            "a volume has 1 to {} devices (the placement map's limit), this one has {n}",
            crate::types::MAX_DEVICES
        ));
    }
    Ok(())
}

/// Read-only view of which blocks are locked by in-flight work.
pub trait LockView {
    /// True when any plan or waiter holds `block`.
    fn is_locked(&self, block: u64) -> bool;
}

/// What a policy may touch while deciding.
pub struct Ctx<'a> {
    /// The placement map.
    pub map: &'a mut PlacementMap,
    /// Which blocks are busy (never evict one of these).
    pub locks: &'a dyn LockView,
    /// Output: device operations for this decision.
    pub plan: &'a mut Plan,
    /// Output: background work to queue.
    pub jobs: &'a mut Vec<Job>,
    /// Whether this decision holds its block exclusively. A read decided
    /// alongside other readers must not write any device for its block.
    pub may_write: bool,
}

/// What a controller may touch on a tick.
pub struct TickCtx<'a> {
    /// The placement map.
    pub map: &'a mut PlacementMap,
    /// Which blocks are busy.
    pub locks: &'a dyn LockView,
    /// Output: background work to queue.
    pub jobs: &'a mut Vec<Job>,
}

/// A placement and routing policy.
pub trait Policy: Send {
    /// Registry name of the policy.
    fn name(&self) -> &str;

    /// Block locations the policy uses on `device` (its address space).
    fn address_space(&self, device: usize) -> u64;

    /// Decides how to serve a client access, of one block unless
    /// [`Policy::max_access_blocks`] allows more.
    ///
    /// Contract with drivers that persist the map: a decision may add copies
    /// only of its own blocks (the plan's operations fill them); other blocks
    /// it touches (eviction victims) may only lose copies. In a plan for
    /// several blocks, each client operation names the block it serves in
    /// [`crate::types::Io::part`], and every block has one.
    fn decide(&mut self, access: Access, ctx: &mut Ctx<'_>) -> Outcome;

    /// The most blocks one decision may cover. The dispatcher hands a
    /// longer client access to [`Policy::decide`] in pieces of at most this
    /// many, each decided under the locks of all its blocks. The default, 1,
    /// suits policies that place each block on its own (caches, tiering);
    /// fixed placements decide a whole range at once.
    fn max_access_blocks(&self) -> u32 {
        1
    }

    /// Hints that `block`, whose map entry is `entry`, will be accessed
    /// soon: the policy may start loading the state its decision will read
    /// (see [`crate::prefetch`]). Never changes state.
    fn prefetch(&self, block: u64, entry: &crate::map::Entry, stage: crate::prefetch::Stage) {
        let _ = (block, entry, stage);
    }

    /// Plans a background job whose block lock is now held.
    fn start_job(&mut self, job: Job, ctx: &mut Ctx<'_>) {
        let _ = (job, ctx);
    }

    /// Called when every operation of a started job has completed; the
    /// policy may queue follow-up jobs.
    fn finish_job(&mut self, job: Job, ctx: &mut TickCtx<'_>) {
        let _ = (job, ctx);
    }

    /// How often the driver should call [`Policy::on_tick`], ns.
    fn tick_interval_ns(&self) -> Option<u64> {
        None
    }

    /// Feeds the controller one interval's observation.
    fn on_tick(&mut self, obs: &Observation, ctx: &mut TickCtx<'_>) {
        let _ = (obs, ctx);
    }

    /// Controller variables for time series, as (name, value) pairs.
    fn controller_state(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }

    /// The on-device layout the policy uses. Policies with the same layout
    /// can take over each other's devices and saved map (every caching
    /// policy uses "cache"); others cannot.
    fn layout(&self) -> &str {
        self.name()
    }

    /// Rebuilds the policy's own state (slot allocation, replacement order,
    /// dirty counts) from a placement map saved before a restart. A policy
    /// that keeps no placement refuses a non-empty map.
    fn restore(&mut self, map: &mut PlacementMap) -> Result<(), String> {
        if map.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "policy '{}' places no blocks, but the saved map places {}",
                self.name(),
                map.len()
            ))
        }
    }

    /// Discards `block` (a client's TRIM): drops the copies the policy
    /// keeps of it beyond its home copy, dirty ones too, and frees their
    /// space. Plans no I/O; the block then reads as its home copy holds
    /// it. The default keeps everything (policies that place no copies).
    fn trim(&mut self, block: u64, ctx: &mut Ctx<'_>) {
        let _ = (block, ctx);
    }

    /// A client discards blocks `first..end`: called once for the whole
    /// range, before the [`Policy::trim`]s of the blocks the map places,
    /// and before any later access. Bookkeeping only (no map change, no
    /// I/O, no lock held): a tiering policy forgets that the segments the
    /// range covers whole were ever written, so that the next write to
    /// one is a new allocation. The default keeps nothing to forget.
    fn discarded(&mut self, first: u64, end: u64) {
        let _ = (first, end);
    }

    /// Sets `block`'s entry to `target` after operations of its plan
    /// failed, keeping the policy's own state (slots, replacement order,
    /// dirty counts) in step. `target` keeps no copy the current entry
    /// lacks, except a dirty block's only copy that the decision had not
    /// moved (see [`crate::safe::after_failure`]). The default suits
    /// policies whose only state is the map; every policy that keeps more
    /// must override it.
    fn repair(&mut self, block: u64, target: crate::map::Entry, ctx: &mut TickCtx<'_>) {
        ctx.map.set(block, target);
    }

    /// Stops placing data on `device`, which keeps failing, and serves what
    /// can be served from elsewhere. Returns false when the policy cannot
    /// do without it (the default).
    fn take_out_of_service(&mut self, device: DeviceIndex, ctx: &mut TickCtx<'_>) -> bool {
        let _ = (device, ctx);
        false
    }

    /// Whether the newest data of an acknowledged write may be held by
    /// devices in the mask `devices` (devices other than home) and by no
    /// other, so that losing all of them at once, as memory loses its
    /// contents in a power cut, would lose it. The engine refuses to keep
    /// such devices in memory over a persistent home. The default says
    /// yes for any device (policies that place single copies anywhere:
    /// tiering, splitting).
    fn may_keep_sole_copies(&self, devices: u8) -> bool {
        devices != 0
    }

    /// The parameters [`Policy::reconfigure`] can change while the volume
    /// runs. The default: none (every change needs a restart).
    fn live_params(&self) -> Vec<&'static str> {
        Vec::new()
    }

    /// Applies a changed parameter table while the volume runs. `params`
    /// is the whole table, the running one with the changes applied; the
    /// driver has built a policy from it first (so every value passed the
    /// checks a config file's do) and has refused changes to names not in
    /// [`Policy::live_params`]. The policy re-reads those names; work the
    /// change needs (flushing dirty blocks when write-back ends) is queued
    /// as jobs. The default, for policies with no live parameters, has
    /// nothing to re-read.
    fn reconfigure(
        &mut self,
        params: &crate::params::Params,
        ctx: &mut TickCtx<'_>,
    ) -> Result<(), PolicyError> {
        let _ = (params, ctx);
        Ok(())
    }

    /// Places `block` as if it had been admitted, without I/O (cache
    /// pre-warming). Returns false when the policy has nowhere to put it.
    fn warm(&mut self, block: u64, map: &mut PlacementMap) -> bool {
        let _ = (block, map);
        false
    }
}

/// Why a policy could not be built.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// No policy has this name.
    #[error("unknown policy '{name}' (known: {known})")]
    Unknown {
        /// The name asked for.
        name: String,
        /// Comma-separated registry names.
        known: String,
    },
    /// A parameter is missing, mistyped or out of range.
    #[error("policy '{policy}': {error}")]
    Param {
        /// The policy being built.
        policy: String,
        /// The parameter problem (part of this error's message, not a
        /// separate cause, so that it is printed once).
        error: ParamError,
    },
    /// The volume does not suit the policy (for example, too few devices).
    #[error("policy '{policy}': {message}")]
    Volume {
        /// The policy being built.
        policy: String,
        /// What is wrong.
        message: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_past_32_bit_locations_is_refused_unless_it_is_home() {
        let volume = |cache_blocks| VolumeSpec {
            num_blocks: 1 << 40,
            block_size: 4096,
            devices: vec![
                DeviceSpec {
                    name: "fast".into(),
                    capacity_blocks: cache_blocks,
                    role: DeviceRole::Cache,
                },
                DeviceSpec {
                    name: "slow".into(),
                    capacity_blocks: 1 << 40,
                    role: DeviceRole::Home,
                },
            ],
        };
        assert_eq!(volume(MAX_LOCATION_BLOCKS).validate(), Ok(()));
        let e = volume(MAX_LOCATION_BLOCKS + 1).validate().unwrap_err();
        assert!(e.contains("device 0 ('fast')"), "{e}");
    }
}
