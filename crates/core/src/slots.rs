//! The slots of one cache device: which are free, how many the policy
//! lets pages hold (the device's blocks less a reserve), and how many it
//! counts as held. Shared by the multi-device caches (`hybrid`, `tica`).

use crate::map::PlacementMap;
use crate::types::{DeviceIndex, Plan, PlanIndex, Purpose};

/// Records a copy of block `b` at `slot` of device `dev` (clean unless
/// the caller marks it dirty).
pub(crate) fn place_copy(map: &mut PlacementMap, b: u64, dev: DeviceIndex, slot: u32) {
    let en = map.entry_mut(b);
    en.present |= 1 << dev;
    en.set_loc(dev, slot);
}

/// Marks `slot` of `device` (whose slots `used` flags) as held by block
/// `b` while a saved map is read back; the error names a slot held twice
/// or beyond the device.
pub(crate) fn claim(
    used: &mut [bool],
    b: u64,
    device: DeviceIndex,
    slot: u32,
) -> Result<(), String> {
    match used.get_mut(slot as usize) {
        Some(u) if !*u => {
            *u = true;
            Ok(())
        }
        Some(_) => Err(format!(
            "block {b}: slot {slot} of device {device} is held twice"
        )),
        None => Err(format!("block {b}: slot {slot} is beyond device {device}")),
    }
}

/// Places a clean copy of block `b` at `slot` of device `dev` and plans
/// its fill from the home copy, reusing the client's read `read` of it.
pub(crate) fn fill_from_home(
    map: &mut PlacementMap,
    plan: &mut Plan,
    read: PlanIndex,
    (home, b): (DeviceIndex, u64),
    (dev, slot): (DeviceIndex, u32),
) {
    place_copy(map, b, dev, slot);
    plan.copy(
        Some(read),
        (home, b),
        (dev, slot as u64),
        Purpose::Admit,
        false,
    );
}

/// The slots of one cache device.
#[derive(Clone, Debug)]
pub(crate) struct SlotPool {
    /// The device the slots are on.
    pub device: DeviceIndex,
    /// Slots pages may hold between accesses: the device's blocks less the
    /// reserve that absorbs a page arriving before its victim has left.
    pub capacity: u64,
    /// The device's blocks.
    pub physical: u32,
    /// Free slots, the next to hand out last.
    pub free: Vec<u32>,
    /// Pages the policy counts on this device.
    pub resident: u64,
    /// The device is out of service: no slot is handed out again, and a
    /// released slot stays used.
    pub retired: bool,
}

impl SlotPool {
    /// The `physical` slots of `device`, `reserve` of them kept back.
    pub fn new(device: DeviceIndex, physical: u64, reserve: u64) -> SlotPool {
        let physical = u32::try_from(physical).expect("cache devices address slots in 32 bits");
        SlotPool {
            device,
            capacity: (physical as u64).saturating_sub(reserve),
            physical,
            free: (0..physical).rev().collect(),
            resident: 0,
            retired: false,
        }
    }

    /// Takes the device out of service: its capacity becomes zero and
    /// its slots are never handed out again.
    pub fn retire(&mut self) {
        self.retired = true;
        self.capacity = 0;
        self.free.clear();
    }

    /// Takes a free slot, if any.
    pub fn alloc(&mut self) -> Option<u32> {
        self.free.pop()
    }

    /// Returns `slot` to the free list (unless the device is retired).
    pub fn release(&mut self, slot: u32) {
        assert!(slot < self.physical, "slot {slot} beyond the device");
        if self.retired {
            return;
        }
        debug_assert!(!self.free.contains(&slot), "slot {slot} freed twice");
        self.free.push(slot);
    }

    /// Takes `slot` out of the free list (a slot a repaired copy keeps);
    /// false when it was not free.
    pub fn reclaim(&mut self, slot: u32) -> bool {
        match self.free.iter().position(|&s| s == slot) {
            Some(at) => {
                self.free.swap_remove(at);
                true
            }
            None => false,
        }
    }

    /// Rebuilds the free list from the slots in use (`used[s]` for slot
    /// `s`), after a restore.
    pub fn set_used(&mut self, used: &[bool]) {
        assert_eq!(used.len(), self.physical as usize, "one flag per slot");
        self.free = (0..self.physical)
            .rev()
            .filter(|&s| !used[s as usize])
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hands_out_every_slot_once_and_takes_them_back() {
        let mut p = SlotPool::new(2, 4, 1);
        assert_eq!(p.capacity, 3);
        let got: Vec<u32> = std::iter::from_fn(|| p.alloc()).collect();
        assert_eq!(got, vec![0, 1, 2, 3]);
        p.release(2);
        assert!(p.reclaim(2) && !p.reclaim(2));
        p.set_used(&[true, false, true, false]);
        assert_eq!(p.alloc(), Some(1));
        assert_eq!(p.alloc(), Some(3));
        assert_eq!(p.alloc(), None);
        p.release(1);
        p.retire();
        assert_eq!((p.capacity, p.alloc()), (0, None));
        p.release(3);
        assert_eq!(p.alloc(), None, "a retired pool hands out nothing");
        let mut used = [false, true];
        assert_eq!(claim(&mut used, 7, 2, 0), Ok(()));
        assert_eq!(
            claim(&mut used, 8, 2, 0).unwrap_err(),
            "block 8: slot 0 of device 2 is held twice"
        );
        assert_eq!(
            claim(&mut used, 9, 2, 5).unwrap_err(),
            "block 9: slot 5 is beyond device 2"
        );
    }
}
