//! Prefilled key-value fronts shared by the runs of a sweep. A key-value
//! run's prefill sets every key before the run starts; what it leaves
//! depends on the key-value spec, the workload, the keys, the volume's
//! size and the seed, not on the policy, the devices or the client (see
//! [`prefill_key`]). A sweep over policies and hierarchies then prefills
//! each distinct front once and starts each of its runs from a copy:
//! MOST Figure 9's 48 runs have 4 distinct prefills, those of mixes A and
//! B (2 million keys) over 5 s each.
//!
//! A front is kept from its first user until its last has taken it (the
//! last takes the original, the others copies), so the share holds at
//! most one front for each distinct prefill in flight. A copy zeroes and
//! copies every stretch of the store the prefill wrote, so a front with
//! few keys spread over a large store (a sweep cut with `--max-keys`, or
//! large values) is cheaper to prefill again, and each of its runs does.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::kv::{prefill_key, Prefilled};
use crate::config::SimConfig;

/// The prefilled fronts of a set of runs, for [`super::run_sharing`].
pub struct PrefillShare {
    slots: Mutex<HashMap<String, Slot>>,
    copies: AtomicU64,
}

/// A prefill that more than one run starts from.
struct Slot {
    /// Runs that have not yet taken the front.
    users_left: usize,
    /// The front, once its first user has prefilled it; none if copying
    /// it costs more than a prefill.
    front: Arc<OnceLock<Option<Prefilled>>>,
}

impl PrefillShare {
    /// The share for `configs`: a slot for each prefill that two or more
    /// of them start from. A configuration that does not resolve gets
    /// none (its run fails with the configuration's error).
    pub fn plan(configs: &[SimConfig]) -> PrefillShare {
        let mut users: HashMap<String, usize> = HashMap::new();
        for cfg in configs {
            if cfg.kv.as_ref().is_some_and(|k| k.prefill) {
                if let Some(key) = cfg.resolve().ok().as_ref().and_then(prefill_key) {
                    *users.entry(key).or_default() += 1;
                }
            }
        }
        let slots = users
            .into_iter()
            .filter(|&(_, n)| n > 1)
            .map(|(key, users_left)| {
                let front = Arc::new(OnceLock::new());
                (key, Slot { users_left, front })
            })
            .collect();
        PrefillShare {
            slots: Mutex::new(slots),
            copies: AtomicU64::new(0),
        }
    }

    /// A share that holds nothing: every run prefills its own front.
    pub fn none() -> PrefillShare {
        PrefillShare::plan(&[])
    }

    /// Prefills that more than one run starts from and some run has yet
    /// to take.
    pub fn pending(&self) -> usize {
        self.slots.lock().expect("the prefill share").len()
    }

    /// Fronts copied so far (a run that started from the original or
    /// from a prefill of its own is none).
    pub fn copies(&self) -> u64 {
        self.copies.load(Ordering::Relaxed)
    }

    /// A copy of `front`, counted.
    fn copy(&self, front: &Prefilled) -> Prefilled {
        self.copies.fetch_add(1, Ordering::Relaxed);
        front.clone()
    }

    /// The prefilled front of `key`: made by `prefill` for a key no other
    /// run shares and for the first run of a shared one (the others wait
    /// for it), then a copy for each later run, and the original for the
    /// last; or made by `prefill` for every run, if the first finds a copy
    /// dearer than a prefill ([`Prefilled::cheaper_to_copy`]).
    pub(super) fn take(&self, key: &str, prefill: impl FnOnce() -> Prefilled) -> Prefilled {
        let (front, last) = {
            let mut slots = self.slots.lock().expect("the prefill share");
            let Some(slot) = slots.get_mut(key) else {
                drop(slots);
                return prefill();
            };
            assert!(slot.users_left > 0, "a slot is removed with its last user");
            slot.users_left -= 1;
            let front = Arc::clone(&slot.front);
            let last = slot.users_left == 0;
            if last {
                slots.remove(key);
            }
            (front, last)
        };
        let mut prefill = Some(prefill);
        let mut own = None;
        let shared = front.get_or_init(|| {
            let first = prefill.take().expect("prefilled once")();
            if first.cheaper_to_copy() {
                Some(first)
            } else {
                own = Some(first);
                None
            }
        });
        match (own, shared) {
            (Some(own), _) => own,
            (None, None) => prefill.take().expect("not yet prefilled")(),
            (None, Some(_)) if last => match Arc::try_unwrap(front) {
                Ok(cell) => cell
                    .into_inner()
                    .flatten()
                    .expect("the front was prefilled"),
                // Another run is still copying it; the copy is freed with
                // its reference.
                Err(shared) => self.copy(shared.get().and_then(Option::as_ref).expect("prefilled")),
            },
            (None, Some(shared)) => self.copy(shared),
        }
    }
}
