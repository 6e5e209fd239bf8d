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
//! - [`tiers`]: the segment classes (capacity, performance, mirrored),
//!   their slots on the fast device, and the moves between classes as
//!   jobs over a segment's blocks;
//! - [`migrator`]: moves under the bandwidth cap, HeMem's quantum, and
//!   moving a share of the accesses between the devices.

pub mod budget;
pub mod heat;
pub mod latency;
pub mod migrator;
pub mod offload;
pub mod tiers;

pub use budget::{Direction, MigrationBudget};
pub use heat::{Heat, HeatMap};
pub use latency::{DeviceLatency, IdleLatency, LatencySignals};
pub use offload::{Decision, Migration, MigrationRule, MirrorChange, OffloadController};
pub use tiers::{Class, Move, Tiers};
