//! Requests, device operations and plans: the vocabulary between a policy
//! and the driver (the simulator or the engine) that executes its decisions.

use serde::{Deserialize, Serialize};

/// Index of a device in the hierarchy. Device 0 is the fastest
/// ("performance") device; the last one is usually the capacity device.
pub type DeviceIndex = u8;

/// The most devices a hierarchy may have (placement masks are `u8`).
pub const MAX_DEVICES: usize = 8;

/// Direction of a client request or a device operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Op {
    /// Read data.
    Read,
    /// Write data.
    Write,
}

/// A client access to consecutive blocks, as the policy sees it: the
/// blocks `block .. block + blocks`. A policy decides at most
/// [`crate::policy::Policy::max_access_blocks`] blocks at once (one, unless
/// it says otherwise); the dispatcher hands it longer accesses in pieces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    /// The first block, in the volume's address space.
    pub block: u64,
    /// How many blocks, from `block` (at least 1).
    pub blocks: u32,
    /// Read or write.
    pub op: Op,
    /// True when these blocks continue one client request whose earlier
    /// blocks (those just below `block`) were handed over before: a piece
    /// after the first of a longer request. Policies that count accesses
    /// per request (the tiering policies' heat) count a continuing piece
    /// only where it enters a new counting unit.
    pub continues: bool,
}

impl Access {
    /// An access of `op` to the one block `block`.
    #[inline]
    pub fn one(block: u64, op: Op) -> Access {
        Access {
            block,
            blocks: 1,
            op,
            continues: false,
        }
    }

    /// An access of `op` to the `blocks` blocks from `block`.
    #[inline]
    pub fn range(block: u64, blocks: u32, op: Op) -> Access {
        assert!(blocks >= 1, "an access covers at least one block");
        Access {
            block,
            blocks,
            op,
            continues: false,
        }
    }

    /// The same blocks, marked as continuing a request (`continues`).
    #[inline]
    pub fn continuing(self, continues: bool) -> Access {
        Access { continues, ..self }
    }

    /// One past the last block of the access.
    #[inline]
    pub fn end(&self) -> u64 {
        self.block + self.blocks as u64
    }
}

/// Why a device operation is issued; drivers account bytes per purpose.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Purpose {
    /// Serves the client request's data.
    Client,
    /// Copies a block into a faster device (cache fill / admission).
    Admit,
    /// Writes dirty data back to its home device.
    Flush,
    /// Moves or copies a block between devices for placement (tiering).
    Migrate,
}

impl Purpose {
    /// Number of purposes (for per-purpose counter arrays).
    pub const COUNT: usize = 4;

    /// Dense index of the purpose.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Index of an operation within its plan.
pub type PlanIndex = u16;

/// Marker for "this operation depends on nothing".
pub const NO_DEP: PlanIndex = PlanIndex::MAX;

/// The most operations one plan may hold: enough to move a 64 MiB segment
/// of 4 KiB blocks (a read and a write per block).
pub const MAX_PLAN_IOS: usize = 32 * 1024;

/// One device operation of a plan.
///
/// A write whose purpose is not [`Purpose::Client`] copies the data that the
/// read named by `after` returned (a fill, flush or migration). Client writes
/// carry the request's new data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Io {
    /// Device that performs the operation.
    pub device: DeviceIndex,
    /// Read or write.
    pub dir: Op,
    /// Block location on that device, in block units (a slot on a cache
    /// device, the block number on a device that holds the whole volume).
    pub addr: u64,
    /// Why the operation exists.
    pub purpose: Purpose,
    /// Index (within the plan) of the operation that must complete first, or
    /// [`NO_DEP`].
    pub after: PlanIndex,
    /// Whether the client's acknowledgement waits for this operation.
    pub acks: bool,
    /// For an operation of a client access: which of the access's blocks
    /// it serves (block `access.block + part`; 0 for one-block accesses).
    /// 0 for jobs.
    pub part: u16,
}

/// The operations that carry out one decision. Small and reused.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// Operations in submission order; `after` indices refer to this list.
    pub ios: Vec<Io>,
    /// Whether the operations that wait for a read are handed out only
    /// once every read of the plan has completed: a copy of many blocks
    /// is then read whole and written whole, and its writes reach their
    /// device together, in plan order, as one sequential transfer (a
    /// buffer cache's flush of a run of dirty pages) rather than one by
    /// one in the order their reads happened to complete.
    pub gather: bool,
}

impl Plan {
    /// Appends an operation and returns its index for `after` references.
    #[inline]
    pub fn push(&mut self, io: Io) -> PlanIndex {
        let index = self.ios.len();
        assert!(
            index < MAX_PLAN_IOS,
            "a plan holds at most {MAX_PLAN_IOS} operations"
        );
        assert!(
            io.after == NO_DEP || (io.after as usize) < index,
            "operation {index} depends on a later one ({})",
            io.after
        );
        self.ios.push(io);
        index as PlanIndex
    }

    /// Appends a client read or write that the acknowledgement waits for
    /// (of a one-block access).
    #[inline]
    pub fn client(&mut self, device: DeviceIndex, dir: Op, addr: u64) -> PlanIndex {
        self.client_part(device, dir, addr, 0)
    }

    /// Appends a client read or write that the acknowledgement waits for,
    /// serving block `part` of a multi-block access.
    #[inline]
    pub fn client_part(&mut self, device: DeviceIndex, dir: Op, addr: u64, part: u16) -> PlanIndex {
        self.push(Io {
            device,
            dir,
            addr,
            purpose: Purpose::Client,
            after: NO_DEP,
            acks: true,
            part,
        })
    }

    /// Appends a copy from (`src`, `src_addr`) to (`dst`, `dst_addr`): a read
    /// and a dependent write. `read_index` reuses an existing read instead of
    /// issuing a new one. `acks` says whether the client waits for the copy.
    pub fn copy(
        &mut self,
        read_index: Option<PlanIndex>,
        src: (DeviceIndex, u64),
        dst: (DeviceIndex, u64),
        purpose: Purpose,
        acks: bool,
    ) {
        let r = match read_index {
            Some(i) => i,
            None => self.push(Io {
                device: src.0,
                dir: Op::Read,
                addr: src.1,
                purpose,
                after: NO_DEP,
                acks,
                part: 0,
            }),
        };
        self.push(Io {
            device: dst.0,
            dir: Op::Write,
            addr: dst.1,
            purpose,
            after: r,
            acks,
            part: 0,
        });
    }

    /// True when any operation writes a device.
    pub fn writes(&self) -> bool {
        self.ios.iter().any(|io| io.dir == Op::Write)
    }

    /// Removes every operation and turns gathering off.
    pub fn clear(&mut self) {
        self.ios.clear();
        self.gather = false;
    }
}

/// How a policy classified a client access, for hit-ratio accounting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The data was present in a cache device; the device named served the
    /// access (a cache, or the home device when the policy offloads a hit).
    Hit(DeviceIndex),
    /// The data had to come from (or go to) its home device only.
    Miss,
    /// The policy has no notion of hits (splitting, striping, tiering).
    NotApplicable,
}

/// A unit of background work the policy asked for, decided when it starts.
///
/// The work covers the blocks `block .. block + blocks` (one block for a
/// cache flush, a whole segment for a tiering move). The dispatcher takes
/// the lock of every block in the range before calling
/// [`crate::policy::Policy::start_job`], so the policy plans against the
/// range's state at that moment, not at the moment it queued the job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Job {
    /// The first block the work is about.
    pub block: u64,
    /// How many blocks, from `block`, it covers (at least 1).
    pub blocks: u32,
    /// Policy-defined kind of work.
    pub kind: u8,
}

impl Job {
    /// Work of `kind` on one block.
    pub fn one(block: u64, kind: u8) -> Job {
        Job {
            block,
            blocks: 1,
            kind,
        }
    }
}
