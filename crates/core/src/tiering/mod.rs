//! Machinery shared by the tiering policies (MOST, HeMem, BATMAN, Colloid):
//! what they measure and how they decide, without I/O or a clock.
//!
//! - [`heat`]: per-segment read and write counters with HeMem-style
//!   cooling, which say which segments are hot;
//! - [`latency`]: per-device latency signals smoothed from the
//!   observations every controller receives, which say which device is
//!   overloaded;
//! - [`budget`]: the migration bandwidth cap, and the bytes migrated per
//!   direction;
//! - [`offload`]: MOST's optimizer (its Algorithm 1), which moves the
//!   offload ratio until the devices' latencies meet and says what the
//!   mirrored class and the migrator should do.
//!
//! Placement itself (segments, subpages, copies) is the map's
//! ([`crate::segments`]); moving data is the dispatcher's jobs.

pub mod budget;
pub mod heat;
pub mod latency;
pub mod migrator;
pub mod offload;
pub mod tiers;

pub use budget::{Direction, MigrationBudget};
pub use heat::{Heat, HeatMap};
pub use latency::{DeviceLatency, LatencySignals};
pub use offload::{Decision, Migration, MirrorChange, OffloadController};
