//! Block locks: a block's holders and its queue of waiting work, and how
//! the dispatcher takes and releases them. Work asks for every lock of its
//! range when it arrives, holds those it can have and queues behind
//! earlier work at the others; each block's queue is in arrival order, so
//! no work waits for later work.

use std::collections::hash_map::Entry as MapEntry;
use std::collections::VecDeque;

use super::{Dispatcher, Work};
use crate::map::BlockMap;
use crate::policy::LockView;

/// Work waiting for some of its blocks' locks, and how many it lacks.
#[derive(Clone, Copy, Debug)]
pub(super) struct Waiting {
    pub(super) work: Work,
    pub(super) missing: u32,
}

/// A place in a block's lock queue: the waiting work (its index in
/// `Dispatcher::waiting`) and whether it wants the lock exclusively.
#[derive(Clone, Copy, Debug)]
pub(super) struct Waiter {
    pub(super) id: u32,
    pub(super) exclusive: bool,
}

#[derive(Default, Debug)]
pub(super) struct LockState {
    pub(super) readers: u32,
    pub(super) writer: bool,
    pub(super) waiters: VecDeque<Waiter>,
}

impl LockState {
    /// The state of a block just locked by one holder.
    pub(super) fn held(exclusive: bool) -> LockState {
        let mut st = LockState::default();
        st.hold(exclusive);
        st
    }
    pub(super) fn can_grant(&self, exclusive: bool) -> bool {
        if exclusive {
            !self.writer && self.readers == 0
        } else {
            !self.writer
        }
    }
    pub(super) fn hold(&mut self, exclusive: bool) {
        if exclusive {
            self.writer = true;
        } else {
            self.readers += 1;
        }
    }
    pub(super) fn release(&mut self, exclusive: bool) {
        if exclusive {
            assert!(self.writer, "released an exclusive lock not held");
            self.writer = false;
        } else {
            assert!(self.readers > 0, "released a shared lock not held");
            self.readers -= 1;
        }
    }

    /// Grants the lock to the waiters that can have it now, in order
    /// (every shared waiter up to an exclusive one, or the exclusive one
    /// alone), adding their ids to `granted`. Returns true when the lock is
    /// then free with no waiter (its state can go).
    pub(super) fn grant(&mut self, granted: &mut Vec<u32>) -> bool {
        while let Some(&next) = self.waiters.front() {
            if !self.can_grant(next.exclusive) {
                break;
            }
            self.waiters.pop_front();
            self.hold(next.exclusive);
            granted.push(next.id);
            if next.exclusive {
                break;
            }
        }
        self.readers == 0 && !self.writer && self.waiters.is_empty()
    }

    /// [`LockState::release`] then [`LockState::grant`].
    pub(super) fn release_and_grant(&mut self, exclusive: bool, granted: &mut Vec<u32>) -> bool {
        self.release(exclusive);
        self.grant(granted)
    }
}

pub(super) struct Locks(pub(super) BlockMap<LockState>);

impl LockView for Locks {
    fn is_locked(&self, block: u64) -> bool {
        self.0.contains_key(&block)
    }
}

impl Dispatcher {
    /// Asks for the locks of all the work's blocks: holds those it can have
    /// now and queues behind earlier work at the others. True when it holds
    /// them all (it runs now); otherwise it runs when granted the last
    /// ([`Dispatcher::release`]).
    #[inline]
    pub(super) fn acquire(&mut self, work: Work) -> bool {
        let exclusive = work.exclusive();
        let block = work.block();
        if work.end() != block + 1 {
            return self.acquire_range(work);
        }
        let st = match self.locks.0.entry(block) {
            // A free block: its state is made held, never read back.
            MapEntry::Vacant(v) => {
                v.insert(LockState::held(exclusive));
                return true;
            }
            MapEntry::Occupied(o) => o.into_mut(),
        };
        if st.waiters.is_empty() && st.can_grant(exclusive) {
            st.hold(exclusive);
            return true;
        }
        let id = match self.free_waiting.pop() {
            Some(i) => i,
            None => {
                self.waiting.push(Waiting { work, missing: 0 });
                (self.waiting.len() - 1) as u32
            }
        };
        st.waiters.push_back(Waiter { id, exclusive });
        self.waiting[id as usize] = Waiting { work, missing: 1 };
        self.stats.lock_waits += 1;
        false
    }

    /// [`Dispatcher::acquire`] for work of several blocks.
    #[inline(never)]
    fn acquire_range(&mut self, work: Work) -> bool {
        let exclusive = work.exclusive();
        let end = work.end();
        assert!(work.block() < end, "work covers no block");
        let mut id = None;
        let mut missing = 0u32;
        for b in work.block()..end {
            let st = match self.locks.0.entry(b) {
                // A free block: its state is made held, never read back.
                MapEntry::Vacant(v) => {
                    v.insert(LockState::held(exclusive));
                    continue;
                }
                MapEntry::Occupied(o) => o.into_mut(),
            };
            if st.waiters.is_empty() && st.can_grant(exclusive) {
                st.hold(exclusive);
                continue;
            }
            let id = *id.get_or_insert_with(|| match self.free_waiting.pop() {
                Some(i) => i,
                None => {
                    self.waiting.push(Waiting { work, missing: 0 });
                    (self.waiting.len() - 1) as u32
                }
            });
            st.waiters.push_back(Waiter { id, exclusive });
            missing += 1;
        }
        match id {
            None => true,
            Some(id) => {
                self.waiting[id as usize] = Waiting { work, missing };
                self.stats.lock_waits += 1;
                false
            }
        }
    }

    /// Counts the locks [`LockState::grant`] just gave to waiting work;
    /// work that now holds all its blocks' locks is queued to run.
    #[inline]
    pub(super) fn granted(&mut self) {
        if self.granted.is_empty() {
            return;
        }
        for id in self.granted.drain(..) {
            let w = &mut self.waiting[id as usize];
            assert!(w.missing > 0, "waiting work granted a lock it holds");
            w.missing -= 1;
            if w.missing == 0 {
                self.resumed.push_back(w.work);
                self.free_waiting.push(id);
            }
        }
    }

    /// Whether work holding its blocks' locks shared holds every one of
    /// them alone (so its decision may write).
    pub(super) fn reads_alone(&self, work: &Work) -> bool {
        let alone = |b| {
            let st = &self.locks.0[&b];
            st.readers == 1 && !st.writer
        };
        let block = work.block();
        match work.end() - block {
            1 => alone(block),
            _ => (block..work.end()).all(alone),
        }
    }

    /// Releases `block`'s lock and grants it to the waiters that can have
    /// it now, in order (every shared waiter up to an exclusive one, or the
    /// exclusive one alone).
    pub(super) fn release(&mut self, block: u64, exclusive: bool) {
        if self.deferred_repairs.is_empty() {
            // One lookup: release, grant and remove through the entry.
            let MapEntry::Occupied(mut o) = self.locks.0.entry(block) else {
                panic!("released block {block}'s lock, which is not held");
            };
            if o.get_mut().release_and_grant(exclusive, &mut self.granted) {
                o.remove();
            }
            self.granted();
            return;
        }
        let st = self.locks.0.get_mut(&block).expect("lock held");
        st.release(exclusive);
        if st.readers == 0 && !st.writer {
            if let Some((old, failures)) = self.deferred_repairs.remove(&block) {
                self.repair_block(block, old, failures);
                self.note_changes(None, 0);
            }
        }
        let st = self.locks.0.get_mut(&block).expect("lock held");
        if st.grant(&mut self.granted) {
            self.locks.0.remove(&block);
        }
        self.granted();
    }
}
