//! The policies and their registry. Each file holds one policy (or one
//! family) and its `REGISTERED` entry; `cache` is the caching building block
//! several of them share. Adding a policy adds one file and one line to
//! [`REGISTRY`].

use crate::params::{ParamError, Params};
use crate::policy::{Policy, PolicyError, VolumeSpec};

pub mod batman;
pub mod cache;
pub mod classic;
pub mod colloid;
pub mod fixed;
pub mod hemem;
pub mod hibachi;
pub mod hybrid_arc;
pub mod hybrid_lru;
pub mod lbica;
pub mod most;
pub mod nhc;
pub mod nhc_kv;
pub mod passthrough;
pub mod raid1;
pub mod sib;
pub mod split;
pub mod srac;
pub mod stable;
pub mod stacked;
pub mod stripe;
pub mod tica;
pub mod tiered;
pub mod ucache;

/// The most blocks a policy that places every block by a fixed rule
/// (`passthrough`, `split`, `stripe`) decides at once: 1 MiB of 4 KiB
/// blocks, as many as the drivers merge into one device operation
/// ([`crate::dispatch::merge::MERGE_MAX_BLOCKS`]).
pub const RANGE_DECISION_BLOCKS: u32 = crate::dispatch::merge::MERGE_MAX_BLOCKS as u32;

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
    classic::REGISTERED,
    split::REGISTERED,
    stripe::REGISTERED,
    nhc::REGISTERED,
    nhc_kv::REGISTERED,
    sib::REGISTERED_PLUS,
    sib::REGISTERED_PLUS_PLUS,
    lbica::REGISTERED,
    passthrough::REGISTERED,
    stacked::REGISTERED,
    hemem::REGISTERED,
    most::REGISTERED,
    batman::REGISTERED,
    colloid::REGISTERED,
    colloid::REGISTERED_PLUS,
    colloid::REGISTERED_PLUS_PLUS,
    hibachi::REGISTERED,
    hybrid_lru::REGISTERED,
    hybrid_arc::REGISTERED,
    tica::REGISTERED_EF,
    tica::REGISTERED_WED,
    tica::REGISTERED_A,
    ucache::REGISTERED,
    srac::REGISTERED,
    raid1::REGISTERED,
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
    volume.validate().map_err(|message| PolicyError::Volume {
        policy: name.to_string(),
        message,
    })?;
    let policy = (reg.build)(params, volume, seed)?;
    params
        .reject_unused("see `tiermux policies` for the parameters of each policy")
        .map_err(|error| PolicyError::Param {
            policy: name.to_string(),
            error,
        })?;
    Ok(policy)
}

/// Wraps a [`ParamError`] for policy `policy`.
pub fn param_err(policy: &str) -> impl Fn(ParamError) -> PolicyError + '_ {
    move |error| PolicyError::Param {
        policy: policy.to_string(),
        error,
    }
}
