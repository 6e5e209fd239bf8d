//! Marks: the points a power cut can bring the volume back to, and the
//! writes that wait for them.
//!
//! A mark syncs every data device, then appends a mark record to the
//! journal and syncs the journal. Once it completes, every record below
//! the mark is on stable storage and every device operation those records
//! depend on is too. After a power cut, recovery replays the records up to
//! the last durable mark (`journal/`); after a crash of the process
//! alone it replays them all, since the kernel kept everything.
//!
//! That state must stay true until the next mark: a location it names for
//! a block must keep that block's data. So a write to a location that a
//! record released (an evicted block's slot, the cache copy of a clean
//! block being overwritten) waits, held here, until a mark covers the
//! release ([`crate::journal::Metadata::quarantined`]); a write-back cache
//! whose slots turn over starts marks as they are needed.
//!
//! `FLUSH` and FUA writes are marks too: a flush completes when a mark
//! started after it arrived completes.

use tiermux_core::{Op, Ready};

use super::{token, Phase, Volume, KIND_MARK};
use crate::reactor::Reactor;

/// The token index of a mark's journal sync (device syncs use their
/// device's index).
const JOURNAL: usize = usize::MAX >> 8;

/// Marks in progress and what waits for them.
#[derive(Default)]
pub(super) struct Marks {
    /// The mark in progress.
    current: Option<MarkRun>,
    /// Requests (flushes, FUA writes) waiting for the next mark.
    waiting: Vec<usize>,
    /// A mark is needed even if no request waits (held writes).
    wanted: bool,
    /// Writes held until a mark covers the release of their location.
    held: Vec<Ready>,
    /// Marks completed.
    pub(super) completed: u64,
    /// Writes that had to wait for a mark.
    pub(super) writes_held: u64,
}

struct MarkRun {
    /// Records below this sequence number are covered.
    seq: u64,
    /// Syncs still running in this phase.
    pending: usize,
    /// Whether the devices are synced and the journal sync runs.
    journal_phase: bool,
    /// The first error of a sync, as a positive errno.
    error: i32,
    /// Data is at risk on a device out of service: the mark still covers
    /// the records, but the flushes waiting for it fail.
    at_risk: bool,
    /// Requests that complete with the mark.
    waiters: Vec<usize>,
}

impl Volume {
    /// True when a device write must wait for a mark (see the module
    /// documentation).
    pub(super) fn must_hold(&self, ready: &Ready) -> bool {
        self.waits_for_mark(ready) || self.waits_for_discard(ready)
    }

    /// True when `ready` writes a place whose release no mark covers yet.
    fn waits_for_mark(&self, ready: &Ready) -> bool {
        let io = ready.io;
        io.dir == Op::Write
            && self.meta.has_quarantine()
            && self.meta.quarantined(io.device, io.addr)
    }

    /// Holds `ready` until a mark covers its location's release, or until
    /// the discard of its location completes. A copy keeps the reference
    /// to its source read's buffer that the read handed it.
    pub(super) fn hold(&mut self, ready: Ready) {
        self.marks.wanted |= self.waits_for_mark(&ready);
        self.marks.held.push(ready);
        self.marks.writes_held += 1;
    }

    /// The device operations of the writes held.
    pub(super) fn held_writes(&self) -> impl Iterator<Item = tiermux_core::Io> + '_ {
        self.marks.held.iter().map(|ready| ready.io)
    }

    /// Issues the held writes that need not wait any more.
    pub(super) fn release_held(&mut self, r: &mut dyn Reactor) {
        let held = std::mem::take(&mut self.marks.held);
        for ready in held {
            if self.must_hold(&ready) {
                self.marks.wanted |= self.waits_for_mark(&ready);
                self.marks.held.push(ready);
            } else {
                self.issue(ready, r);
            }
        }
    }

    /// Request `idx` (a flush or a FUA write) completes with the next mark.
    pub(super) fn wait_for_mark(&mut self, idx: usize) {
        let req = self.reqs.get_mut(idx).expect("request waiting for a mark");
        req.phase = Phase::Sync;
        self.marks.waiting.push(idx);
    }

    /// Starts a mark if one is needed and none runs. Commits the journal
    /// first: the mark covers every record queued so far.
    pub(super) fn start_mark(
        &mut self,
        r: &mut dyn Reactor,
    ) -> Result<(), crate::journal::MetaError> {
        if self.discards.devices != 0
            && self.meta.freed_waiting() >= super::discards::DISCARD_BATCH_PLACES
        {
            self.marks.wanted = true;
        }
        let m = &mut self.marks;
        if m.current.is_some() || (m.waiting.is_empty() && !m.wanted) {
            return Ok(());
        }
        self.meta.commit(r)?;
        // A device out of service is not synced; the data it still holds
        // (blocks at risk) makes every flush fail instead.
        let out = self.health.out_of_service_mask();
        let at_risk = out != 0 && (0..8).any(|d| out & (1 << d) != 0 && self.at_risk_blocks(d) > 0);
        let in_service: Vec<usize> = (0..self.devices.len())
            .filter(|&d| out & (1 << d) == 0)
            .collect();
        let m = &mut self.marks;
        m.wanted = false;
        m.current = Some(MarkRun {
            seq: self.meta.next_seq(),
            pending: in_service.len(),
            journal_phase: false,
            error: 0,
            at_risk,
            waiters: std::mem::take(&mut m.waiting),
        });
        for d in in_service {
            r.fsync(self.devices[d].fd(), token(KIND_MARK, d));
        }
        Ok(())
    }

    /// A sync of the mark in progress completed with `result`.
    pub(super) fn on_mark_sync(
        &mut self,
        index: usize,
        result: i32,
        r: &mut dyn Reactor,
    ) -> Result<(), crate::journal::MetaError> {
        let injected = index != JOURNAL && self.devices[index].fails(crate::faults::FaultOp::Sync);
        let result = if injected {
            -rustix::io::Errno::IO.raw_os_error()
        } else {
            result
        };
        let run = self.marks.current.as_mut().expect("a mark in progress");
        assert_eq!(
            run.journal_phase,
            index == JOURNAL,
            "sync of the mark's phase"
        );
        if result < 0 {
            if run.error == 0 {
                run.error = -result;
            }
            if index != JOURNAL {
                let why = rustix::io::Errno::from_raw_os_error(-result).to_string();
                self.device_failed(
                    index as u8,
                    "sync",
                    &why,
                    super::OUT_OF_SERVICE_AFTER_ERRORS,
                );
            }
        }
        let run = self.marks.current.as_mut().expect("a mark in progress");
        run.pending = run.pending.checked_sub(1).expect("more syncs than issued");
        if run.pending > 0 {
            return Ok(());
        }
        if !run.journal_phase && run.error == 0 {
            let seq = run.seq;
            run.journal_phase = true;
            run.pending = 1;
            self.meta.append_mark(seq, r)?;
            r.fsync(self.meta.journal_fd(), token(KIND_MARK, JOURNAL));
            return Ok(());
        }
        let run = self.marks.current.take().expect("the mark in progress");
        if run.error == 0 {
            self.meta.marked(run.seq);
            self.marks.completed += 1;
            self.start_discards(r);
        } else {
            eprintln!(
                "tiermux: a sync failed ({}); flushes waiting for it fail",
                rustix::io::Errno::from_raw_os_error(run.error)
            );
        }
        let error = match (run.error, run.at_risk) {
            (0, true) => rustix::io::Errno::IO.raw_os_error(),
            (e, _) => e,
        };
        for idx in run.waiters {
            let req = self.reqs.get_mut(idx).expect("request waiting for a mark");
            if req.error == 0 {
                req.error = error;
            }
            req.phase = Phase::Access;
            self.finished.push(idx);
        }
        self.release_held(r);
        self.start_mark(r)
    }

    /// True when nothing waits for or runs a mark.
    pub(super) fn marks_idle(&self) -> bool {
        let m = &self.marks;
        m.current.is_none() && m.waiting.is_empty() && m.held.is_empty()
    }
}
