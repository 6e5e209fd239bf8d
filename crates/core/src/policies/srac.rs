//! S-RAC (Ni, Jiang, Jiang, Ma, Xiong and Wang, "S-RAC: SSD Friendly
//! Caching for Data Center Workloads", SYSTOR 2016) as the TICA paper runs
//! it: a single-level SSD cache given a DRAM level in front, over a RAID-1
//! pair of like SSDs (writes written to both).
//!
//! S-RAC tells six kinds of access apart by a cost-benefit analysis and
//! keeps SSD-friendly blocks with re-adding and ghost-cache adaptation. No
//! code of it is public; this is our reading of that description
//! (`docs/tica.md`):
//! - **Six kinds**: a block's first access within the history window
//!   (read or write), or a read or write after a read or after a write.
//! - **Cost and benefit**: keeping a block on the SSDs after an access
//!   costs an SSD write; it pays off when the block is accessed again
//!   while it could still be there (a read hit, or in write-back a write
//!   hit that saves a disk write). For each kind S-RAC learns the share of
//!   accesses followed by another access within a history of twice the
//!   SSD's blocks (a ghost of recent blocks and the kind of their last
//!   access), whether the SSDs kept the block or not, so a refused kind's
//!   share keeps being measured: the ghost adaptation. The counts halve
//!   every `history_blocks` accesses. Blocks accessed once (read or
//!   written and not again) are what it keeps off the SSDs.
//! - **Admission**: a write whose kind's share is below `t_benefit` goes
//!   home instead of to the SSDs; so does a clean DRAM victim whose last
//!   access was of such a kind.
//! - **Re-adding**: an SSD victim read on the SSDs since it arrived goes
//!   back to the most recent end once, without an SSD write.

use super::{param_err, Registered};
use crate::hybrid::ghost::Ghost;
use crate::params::Params;
use crate::policy::{Policy, PolicyError, VolumeSpec};
use crate::tica::rules::Rules;
use crate::tica::{Choice, Ssds, Tica};
use crate::types::Op;

/// Registry entry.
pub const REGISTERED: Registered = Registered {
    name: "s-rac",
    summary: "S-RAC: DRAM over a RAID-1 SSD pair, six access kinds admitted by learned reuse, SSD hits re-added",
    build,
};

/// The six kinds of access.
const KINDS: usize = 6;

/// The kind of an access of `op` after one of `prev` (`None`: the block's
/// first access in the history): 0 first read, 1 first write, 2 read after
/// read, 3 read after write, 4 write after read, 5 write after write.
fn kind(prev: Option<Op>, op: Op) -> usize {
    match (prev, op) {
        (None, Op::Read) => 0,
        (None, Op::Write) => 1,
        (Some(Op::Read), Op::Read) => 2,
        (Some(Op::Write), Op::Read) => 3,
        (Some(Op::Read), Op::Write) => 4,
        (Some(Op::Write), Op::Write) => 5,
    }
}

/// The operation of each kind of access.
const KIND_OP: [Op; KINDS] = [
    Op::Read,
    Op::Write,
    Op::Read,
    Op::Read,
    Op::Write,
    Op::Write,
];

/// Names of the kinds, for the counters.
const KIND_NAMES: [&str; KINDS] = [
    "reuse_share_first_read",
    "reuse_share_first_write",
    "reuse_share_read_after_read",
    "reuse_share_read_after_write",
    "reuse_share_write_after_read",
    "reuse_share_write_after_write",
];

/// S-RAC's access history and per-kind estimates.
#[derive(Debug)]
struct Srac {
    /// Recent blocks, in one ghost per kind of their last access.
    recent: [Ghost; KINDS],
    history_blocks: usize,
    /// Per kind: accesses, and those followed by another access of their
    /// block within the history.
    seen: [f64; KINDS],
    followed: [f64; KINDS],
    t_benefit: f64,
    /// Accesses since the counts last halved.
    since_decay: usize,
    /// The kind of the access being decided.
    current: usize,
    refused_writes: u64,
    refused_victims: u64,
}

impl Srac {
    /// The kind of `block`'s last access, if the history holds it.
    fn last_kind(&self, block: u64) -> Option<usize> {
        (0..KINDS).find(|&k| self.recent[k].contains(block))
    }

    /// The share of accesses of kind `k` followed by another access of
    /// their block within the history, with one access and its reuse as a
    /// prior (so a kind not measured yet pays, and the access being
    /// decided, counted already, does not sink its kind's share).
    fn reuse_share(&self, k: usize) -> f64 {
        (self.followed[k] + 1.0) / (self.seen[k] + 1.0)
    }

    fn pays(&self, k: usize) -> bool {
        self.reuse_share(k) >= self.t_benefit
    }
}

impl Rules for Srac {
    fn note(&mut self, block: u64, op: Op) {
        let prev = (0..KINDS).find(|&k| self.recent[k].take(block)).map(|k| {
            self.followed[k] += 1.0;
            KIND_OP[k]
        });
        self.current = kind(prev, op);
        self.seen[self.current] += 1.0;
        self.recent[self.current].push(block, self.history_blocks);
        self.since_decay += 1;
        if self.since_decay >= self.history_blocks {
            self.since_decay = 0;
            for k in 0..KINDS {
                self.seen[k] /= 2.0;
                self.followed[k] /= 2.0;
            }
        }
    }

    fn admit_victim(&mut self, block: u64, _reused: bool) -> bool {
        let admit = self.pays(self.last_kind(block).unwrap_or(0));
        self.refused_victims += u64::from(!admit);
        admit
    }

    fn cache_write(&mut self, _block: u64) -> bool {
        let cache = self.pays(self.current);
        self.refused_writes += u64::from(!cache);
        cache
    }

    fn readds(&self) -> bool {
        true
    }

    fn state(&self) -> Vec<(&'static str, f64)> {
        let mut s = vec![
            ("refused_writes", self.refused_writes as f64),
            ("refused_victims", self.refused_victims as f64),
        ];
        s.extend((0..KINDS).map(|k| (KIND_NAMES[k], self.reuse_share(k))));
        s
    }
}

fn build(p: &Params, vol: &VolumeSpec, _seed: u64) -> Result<Box<dyn Policy>, PolicyError> {
    let e = param_err("s-rac");
    let ssd_blocks = vol.devices.get(1).map_or(1, |d| d.capacity_blocks.max(1));
    let rules = Srac {
        recent: Default::default(),
        history_blocks: p
            .u64_in("history_blocks", 2 * ssd_blocks, 1, 1 << 40)
            .map_err(&e)? as usize,
        seen: [0.0; KINDS],
        followed: [0.0; KINDS],
        t_benefit: p.f64_in("t_benefit", 0.5, 0.0, 1.0).map_err(&e)?,
        since_decay: 0,
        current: 0,
        refused_writes: 0,
        refused_victims: 0,
    };
    Ok(Box::new(Tica::build(
        "s-rac",
        Choice::Rules(Box::new(rules)),
        Ssds::Mirrored,
        p,
        vol,
    )?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn srac(history_blocks: usize) -> Srac {
        Srac {
            recent: Default::default(),
            history_blocks,
            seen: [0.0; KINDS],
            followed: [0.0; KINDS],
            t_benefit: 0.5,
            since_decay: 0,
            current: 0,
            refused_writes: 0,
            refused_victims: 0,
        }
    }

    /// Blocks written once and never again stop being cached; blocks
    /// written over and over, and blocks written and then read, keep being
    /// cached.
    #[test]
    fn learns_which_kinds_are_accessed_again() {
        let mut s = srac(1_000);
        let mut once = 1_000_000;
        for round in 0..20u64 {
            for b in 0..10 {
                once += 1;
                s.note(once, Op::Write); // written once
                s.note(b, Op::Write); // rewritten every round
                s.note(100 + b, Op::Read); // read every round
            }
            if round > 2 {
                s.note(once + 1_000_000, Op::Write);
                assert!(!s.cache_write(0), "a first write, round {round}");
                s.note(5, Op::Write);
                assert!(s.cache_write(5), "write after write, round {round}");
                s.note(105, Op::Write);
                assert!(s.cache_write(105), "write after read, round {round}");
            }
        }
        assert!(s.reuse_share(1) < 0.2, "{}", s.reuse_share(1));
        assert!(s.reuse_share(5) > 0.9, "{}", s.reuse_share(5));
        assert!(s.reuse_share(2) > 0.9, "{}", s.reuse_share(2));
        assert_eq!(s.last_kind(105), Some(4));
        assert!(s.refused_writes > 0);
        // A DRAM victim last read after a read is admitted.
        assert!(s.admit_victim(101, false));
    }

    #[test]
    fn six_kinds() {
        let all: Vec<usize> = [None, Some(Op::Read), Some(Op::Write)]
            .into_iter()
            .flat_map(|p| [Op::Read, Op::Write].map(|o| kind(p, o)))
            .collect();
        assert_eq!(all, vec![0, 1, 2, 4, 3, 5]);
    }
}
