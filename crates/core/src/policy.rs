//! The policy interface and the registry of policies.
//!
//! A policy sees one block access at a time, with the block's lock held by
//! the [`crate::dispatch::Dispatcher`], and answers with a [`Plan`] of device
//! operations, changes to the [`PlacementMap`] and background [`Job`]s. It
//! never performs I/O and never reads a clock: time and measurements arrive
//! through [`Observation`]s on ticks.

use crate::map::PlacementMap;
use crate::observe::Observation;
use crate::params::{ParamError, Params};
use crate::types::{Access, Job, Outcome, Plan};

/// One device of a volume as policies see it.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceSpec {
    /// Human-readable name (profile name or path).
    pub name: String,
    /// Blocks of this device the volume may use.
    pub capacity_blocks: u64,
}

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

    /// Decides how to serve one block access.
    ///
    /// Contract with drivers that persist the map: a decision may add copies
    /// only of its own block (the plan's operations fill them); other blocks
    /// it touches (eviction victims) may only lose copies.
    fn decide(&mut self, access: Access, ctx: &mut Ctx<'_>) -> Outcome;

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
    #[error("policy '{policy}': {source}")]
    Param {
        /// The policy being built.
        policy: String,
        /// The parameter problem.
        source: ParamError,
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

/// Constructor signature of a registered policy.
pub type PolicyBuilder = fn(&Params, &VolumeSpec, u64) -> Result<Box<dyn Policy>, PolicyError>;

/// A registry entry: name, one-line description, constructor.
pub struct Registered {
    /// Short name used in configs and on the command line.
    pub name: &'static str,
    /// One line saying what the policy does.
    pub summary: &'static str,
    /// Builds the policy from parameters, volume shape and seed.
    pub build: PolicyBuilder,
}

/// Every policy tiermux knows. Adding a policy adds one line here.
pub static REGISTRY: &[Registered] = &[
    crate::policies::classic::REGISTERED,
    crate::policies::split::REGISTERED,
    crate::policies::nhc::REGISTERED,
    crate::policies::sib::REGISTERED_PLUS,
    crate::policies::sib::REGISTERED_PLUS_PLUS,
    crate::policies::lbica::REGISTERED,
    crate::policies::passthrough::REGISTERED,
];

/// Builds the policy `name` with `params` for `volume`, seeded by `seed`.
/// Unknown names and unknown or invalid parameters are errors.
pub fn build_policy(
    name: &str,
    params: &Params,
    volume: &VolumeSpec,
    seed: u64,
) -> Result<Box<dyn Policy>, PolicyError> {
    let reg = REGISTRY
        .iter()
        .find(|r| r.name == name)
        .ok_or_else(|| PolicyError::Unknown {
            name: name.to_string(),
            known: REGISTRY
                .iter()
                .map(|r| r.name)
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    let policy = (reg.build)(params, volume, seed)?;
    params
        .reject_unused("see `tiermux policies` for the parameters of each policy")
        .map_err(|source| PolicyError::Param {
            policy: name.to_string(),
            source,
        })?;
    Ok(policy)
}

/// Wraps a [`ParamError`] for policy `policy`.
pub fn param_err(policy: &str) -> impl Fn(ParamError) -> PolicyError + '_ {
    move |source| PolicyError::Param {
        policy: policy.to_string(),
        source,
    }
}
