//! tiermux device models.
//!
//! How long a device takes, without touching one: the pipe-and-channels
//! timing model ([`model`]), disk arrays ([`disk`], queued by [`array`], each disk in [`elevator`] order), device profiles that derive it from the numbers
//! the papers and datasheets publish ([`profile`]), and measurements of a
//! model taken the way the papers measured devices ([`calibrate`]), and what
//! devices cost besides time: power, price, failure rate, endurance
//! ([`economics`]). The
//! simulator runs workloads on these models in virtual time; the engine
//! wraps a real file with one to emulate a device's timing.
#![warn(missing_docs)]

pub mod array;
mod builtin_profiles;
pub mod calibrate;
pub mod disk;
pub mod economics;
pub mod elevator;
pub mod model;
pub mod profile;
mod tica_profiles;

pub use economics::PowerW;
pub use model::{DeviceCounters, DeviceModel, DirModel, SimDevice};
pub use profile::{builtin_profiles, find_builtin, lookup_profile, ProfileError, ProfileSpec};
