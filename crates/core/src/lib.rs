//! tiermux policy core.
//!
//! Everything a storage-hierarchy policy needs and nothing that touches a
//! device or a clock: the request and plan vocabulary ([`types`]), the
//! placement map ([`map`], with a segment layer in [`segments`]), cache replacement ([`replacement`]), the
//! policy interface ([`policy`]), the policies and their registry
//! ([`policies`]), the observations
//! controllers consume ([`observe`]), what tiering controllers measure
//! ([`tiering`]: segment heat, device latency signals) and the
//! [`dispatch::Dispatcher`] that runs a policy with per-block locking. The simulator (`tiermux-sim`) drives
//! it in virtual time; the engine drives it on real devices.
#![warn(missing_docs)]

mod dirty_order;
pub mod dispatch;
pub mod hist;
pub mod hybrid;
pub mod map;
pub mod observe;
pub mod params;
pub mod policies;
pub mod policy;
pub mod prefetch;
pub mod replacement;
pub mod rng;
pub mod safe;
pub mod segments;
mod slots;
pub mod tica;
pub mod tiering;
pub mod types;
pub mod zipf;

pub use dispatch::{Acked, Dispatcher, Ready, NO_TAG};
pub use hist::Histogram;
pub use map::{Entry, PlacementMap};
pub use observe::{Observation, ObservationBuilder};
pub use params::{ParamError, ParamValue, Params};
pub use policies::{build_policy, REGISTRY};
pub use policy::{DeviceRole, DeviceSpec, Policy, PolicyError, VolumeSpec};
pub use types::{Access, DeviceIndex, Io, Job, Op, Outcome, Plan, PlanIndex, Purpose};
