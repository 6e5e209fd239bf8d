//! The migrator shared by the tiering policies: it turns "move this
//! segment" into claimed jobs under the migration bandwidth cap, runs
//! HeMem's quantum (promote hot capacity segments into free performance
//! slots, or swap them with colder performance segments), and starts a
//! swap's promotion once the demotion that frees its slot has finished.

use std::collections::VecDeque;

use super::budget::{Direction, MigrationBudget};
use super::heat::HeatMap;
use super::tiers::{Class, Move, Tiers};
use crate::types::Job;

/// Moves in flight and waiting, under a bandwidth cap.
#[derive(Clone, Debug)]
pub struct Migrator {
    budget: MigrationBudget,
    segment_bytes: u64,
    max_inflight: u32,
    inflight: u32,
    /// Capacity segments waiting for a slot a running demotion frees.
    waiting: VecDeque<u64>,
    /// A swap needs the promoted segment's accesses to exceed this many
    /// times the demoted one's (1: strictly more).
    swap_min_ratio: f64,
}

/// Which tier moves a quantum may start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Allowed {
    /// Moves onto the performance device (promotions).
    pub up: bool,
    /// Moves off it (demotions).
    pub down: bool,
}

impl Allowed {
    /// Both directions.
    pub const BOTH: Allowed = Allowed {
        up: true,
        down: true,
    };
}

impl Migrator {
    /// A migrator moving segments of `segment_bytes` under `budget`, with
    /// at most `max_inflight` moves running at once.
    pub fn new(budget: MigrationBudget, segment_bytes: u64, max_inflight: u32) -> Migrator {
        assert!(max_inflight >= 1, "at least one move may run");
        Migrator {
            budget,
            segment_bytes,
            max_inflight,
            inflight: 0,
            waiting: VecDeque::new(),
            swap_min_ratio: 1.0,
        }
    }

    /// Sets how much hotter a capacity segment must be than the performance
    /// segment it displaces: a swap needs its accesses to exceed `ratio`
    /// times the other's. At 1 any hotter segment swaps, and on a working
    /// set whose segments are about equally hot the quantum keeps swapping
    /// segments that sampling noise and cooling set apart
    /// (`experiments/most-swaps-under-load.toml`).
    pub fn set_swap_min_ratio(&mut self, ratio: f64) {
        assert!(
            ratio >= 1.0,
            "a swap ratio below 1 would swap colder segments up"
        );
        self.swap_min_ratio = ratio;
    }

    /// Changes the bandwidth cap, its window and the moves allowed at once
    /// while running (moves already running finish).
    pub fn set_limits(&mut self, bytes_per_s: f64, window_ns: u64, max_inflight: u32) {
        assert!(max_inflight >= 1, "at least one move may run");
        self.budget.set_rate(bytes_per_s, window_ns);
        self.max_inflight = max_inflight;
    }

    /// Bytes migrated so far in direction `d` (a segment's size per move).
    pub fn migrated_bytes(&self, d: Direction) -> u64 {
        self.budget.migrated_bytes(d)
    }

    /// Moves running.
    pub fn inflight(&self) -> u32 {
        self.inflight
    }

    /// Claims `segment` for `m` and queues its job if the cap and the
    /// in-flight limit allow; false otherwise.
    pub fn queue(
        &mut self,
        tiers: &mut Tiers,
        segment: u64,
        m: Move,
        now_ns: u64,
        jobs: &mut Vec<Job>,
    ) -> bool {
        if self.inflight >= self.max_inflight || !tiers.claim(segment, m) {
            return false;
        }
        // Dropping the capacity copy of a mirrored segment whose fast copy
        // is all current moves no data; it needs no bandwidth.
        let free = m == Move::Unmirror && !tiers.is_unclean(segment);
        if !free
            && !self
                .budget
                .try_start(now_ns, self.segment_bytes, m.direction())
        {
            tiers.release(segment);
            return false;
        }
        self.inflight += 1;
        jobs.push(tiers.job(segment, m));
        true
    }

    /// A move's job finished: ends it in `tiers`, and starts a waiting
    /// promotion if a slot is free now.
    pub fn finished(&mut self, tiers: &mut Tiers, job: Job, now_ns: u64, jobs: &mut Vec<Job>) {
        tiers.finish(job);
        self.inflight = self.inflight.checked_sub(1).expect("moves in flight");
        while tiers.free_slots() > 0 {
            let Some(s) = self.waiting.pop_front() else {
                break;
            };
            if tiers.class(s) == Class::Capacity
                && !self.queue(tiers, s, Move::Promote, now_ns, jobs)
            {
                break;
            }
        }
    }

    /// HeMem's quantum: promote hot capacity segments, hottest first, into
    /// free slots, and when none is free swap each with the coldest
    /// performance segment that is not hot, within `allowed`.
    pub fn tier(
        &mut self,
        tiers: &mut Tiers,
        heat: &HeatMap,
        allowed: Allowed,
        now_ns: u64,
        jobs: &mut Vec<Job>,
    ) {
        self.budget.refill(now_ns);
        if !allowed.up {
            self.waiting.clear();
            return;
        }
        let room = (self.max_inflight - self.inflight.min(self.max_inflight)) as usize;
        let hot = heat.hottest(room, |s| {
            tiers.class(s) == Class::Capacity && !tiers.is_busy(s) && heat.is_hot(s)
        });
        if hot.is_empty() {
            return;
        }
        let mut cold = ranked(tiers, heat, Class::Performance, hot.len(), false).into_iter();
        for (s, h) in hot {
            let swap_with = |c| allowed.down && !heat.is_hot(c);
            if self
                .promote_or_swap(tiers, (s, h.total()), &mut cold, swap_with, now_ns, jobs)
                .is_none()
            {
                break;
            }
        }
    }

    /// Promotes capacity segment `s` (with `counts` accesses) into a free
    /// slot; with none free, demotes the next of `cold` (coldest first)
    /// when it is colder and `swap_with` accepts it, and promotes `s` once
    /// that demotion has finished. Returns the accesses the fast device
    /// gains, or `None` when nothing could start (the caller stops).
    fn promote_or_swap(
        &mut self,
        tiers: &mut Tiers,
        (s, counts): (u64, u32),
        cold: &mut impl Iterator<Item = (u64, u32)>,
        swap_with: impl Fn(u64) -> bool,
        now_ns: u64,
        jobs: &mut Vec<Job>,
    ) -> Option<u32> {
        if tiers.free_slots() > 0 {
            return self
                .queue(tiers, s, Move::Promote, now_ns, jobs)
                .then_some(counts);
        }
        let (c, cold_counts) = cold.next()?;
        if cold_counts as f64 * self.swap_min_ratio >= counts as f64
            || !swap_with(c)
            || !self.queue(tiers, c, Move::Demote, now_ns, jobs)
        {
            return None;
        }
        self.waiting.push_back(s);
        Some(counts - cold_counts)
    }
}

impl Migrator {
    /// Moves about `share` of all accesses off the performance device:
    /// demotes its hottest idle segments until their share of the counted
    /// accesses reaches `share` (Colloid and BATMAN move load this way).
    /// Returns the share moved.
    pub fn demote_share(
        &mut self,
        tiers: &mut Tiers,
        heat: &HeatMap,
        share: f64,
        now_ns: u64,
        jobs: &mut Vec<Job>,
    ) -> f64 {
        let total = total_heat(heat);
        let mut moved = 0.0;
        for (s, h) in ranked(tiers, heat, Class::Performance, usize::MAX, true) {
            if moved >= share || h == 0 {
                break;
            }
            if !self.queue(tiers, s, Move::Demote, now_ns, jobs) {
                break;
            }
            moved += h as f64 / total;
        }
        moved
    }

    /// Moves about `share` of all accesses onto the performance device:
    /// promotes the hottest idle capacity segments into free slots, or in
    /// place of colder performance segments, until their share reaches
    /// `share`. Returns the share moved.
    pub fn promote_share(
        &mut self,
        tiers: &mut Tiers,
        heat: &HeatMap,
        share: f64,
        now_ns: u64,
        jobs: &mut Vec<Job>,
    ) -> f64 {
        self.budget.refill(now_ns);
        let total = total_heat(heat);
        let hot = heat.hottest(usize::MAX, |s| {
            tiers.class(s) == Class::Capacity && !tiers.is_busy(s)
        });
        let mut cold = ranked(tiers, heat, Class::Performance, hot.len(), false).into_iter();
        let mut moved = 0.0;
        for (s, h) in hot {
            if moved >= share || h.total() == 0 {
                break;
            }
            let swap_with = |_| true;
            match self.promote_or_swap(tiers, (s, h.total()), &mut cold, swap_with, now_ns, jobs) {
                Some(gain) => moved += gain as f64 / total,
                None => break,
            }
        }
        moved
    }
}

/// Accesses counted over every segment (at least 1).
fn total_heat(heat: &HeatMap) -> f64 {
    (heat.iter().map(|(_, h)| h.total() as u64).sum::<u64>()).max(1) as f64
}

/// The `n` idle segments of `class` (not the capacity class) with their
/// total access counts, hottest first when `hottest`, else coldest first
/// (ties: lower segment first, so runs are deterministic).
pub fn ranked(
    tiers: &Tiers,
    heat: &HeatMap,
    class: Class,
    n: usize,
    hottest: bool,
) -> Vec<(u64, u32)> {
    let mut v: Vec<(u64, u32)> = tiers
        .placed()
        .filter(|&(s, c)| c == class && !tiers.is_busy(s))
        .map(|(s, _)| (s, heat.heat(s).total()))
        .collect();
    v.sort_unstable_by(|a, b| {
        let by_counts = if hottest {
            b.1.cmp(&a.1)
        } else {
            a.1.cmp(&b.1)
        };
        by_counts.then(a.0.cmp(&b.0))
    });
    v.truncate(n);
    v
}
