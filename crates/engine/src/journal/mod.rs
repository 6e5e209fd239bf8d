//! Crash-safe persistence of the placement map: a journal of entry records
//! plus periodic checkpoints.
//!
//! Files in the metadata directory:
//! - `volume.json`: the volume's shape (block size, blocks, devices and
//!   their address spaces, policy family, seed). A restart with a config of
//!   a different shape is refused with the differences named.
//! - `checkpoint`: every non-default entry at one moment, and the journal
//!   generation that continues it. Written to a temporary file, synced and
//!   renamed, so it is always whole.
//! - `journal.<generation>`: records `(seq, block, entry, crc)` appended
//!   in order. Recovery replays the records that follow the checkpoint and
//!   stops at the first record whose checksum or sequence number is wrong
//!   (a write torn by a crash).
//!
//! Formats. `volume.json` names the format the directory was written in,
//! each checkpoint names its own in its magic, and a journal generation's
//! records use the format of the checkpoint that starts it. Format 2 (40-byte
//! records, 24-byte entries with a location on each of the first three
//! devices; each entry carries the number 2) is written; format 1 (32-byte
//! records, 16-byte entries with one cache slot, on device 0) is read and
//! upgraded by the checkpoint every start writes. Other formats are refused
//! with a message naming them.
//!
//! The engine decides *when* a record is written (see `volume/` and
//! `ARCHITECTURE.md`); this module makes the records durable against a
//! process crash as soon as [`Metadata::commit`] returns (they are in the
//! kernel's page cache). Against power loss, the volume appends *marks*
//! ([`Metadata::append_mark`]) after syncing the data devices, and syncs the
//! journal: after a reboot (the `boot` file names another boot than the
//! kernel's), recovery replays only the records below the last durable mark,
//! and [`Metadata::quarantined`] says which device places must not be
//! written until a mark covers the record that dropped or relied on them.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use tiermux_core::map::{BlockMap, LOC_DEVICES};
use tiermux_core::safe::current_copies;

use crate::reactor::Reactor;
use tiermux_core::{Entry, PlacementMap};

mod format;
mod freed;
mod store;

pub use freed::FreedPlace;

use format::*;
use store::*;

/// The metadata format this engine writes.
pub const FORMAT: u32 = 2;

/// The shape a metadata directory was written for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeShape {
    /// Format version of the metadata directory.
    pub format: u32,
    /// Block size, bytes.
    pub block_size: u32,
    /// Blocks in the client-visible address space.
    pub num_blocks: u64,
    /// Device names and the blocks of each the policy addresses.
    pub devices: Vec<(String, u64)>,
    /// Policy family: which policies can read this map ("cache" for every
    /// caching policy, otherwise the policy's name).
    pub policy_family: String,
    /// Seed of policies that hash placement.
    pub seed: u64,
}

/// Why metadata could not be opened or written.
#[derive(Debug, thiserror::Error)]
pub enum MetaError {
    /// An I/O error on a named file.
    #[error("metadata {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// The directory belongs to a volume of another shape.
    #[error("metadata in {dir} was written for a different volume ({differences}); use the original config or remove the directory to start cold")]
    Mismatch {
        /// The directory.
        dir: PathBuf,
        /// What differs.
        differences: String,
    },
    /// The directory was written in a format this engine cannot read.
    #[error("metadata in {dir} has format {format}; this tiermux reads formats 1 and 2 (a newer tiermux may have written it)")]
    Format {
        /// The directory.
        dir: PathBuf,
        /// The format `volume.json` names.
        format: u32,
    },
    /// A file is damaged beyond a torn journal tail.
    #[error("metadata {path} is corrupt: {message}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

fn io_err(path: &Path) -> impl Fn(io::Error) -> MetaError + '_ {
    move |source| MetaError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What recovery found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Recovery {
    /// True when the directory was new (a cold start).
    pub fresh: bool,
    /// Entries loaded from the checkpoint.
    pub checkpoint_entries: u64,
    /// Journal records replayed after it.
    pub journal_records: u64,
    /// Bytes of torn or stale journal tail discarded.
    pub discarded_bytes: u64,
    /// Records after the last mark, not replayed because the machine
    /// rebooted since they were written (see [`Metadata::append_mark`]).
    pub unmarked_records: u64,
    /// True when the machine rebooted since the metadata was last written
    /// (a power cut, or a crash of the whole machine).
    pub rebooted: bool,
    /// Devices whose contents did not survive (see [`Lost`]), one bit
    /// each, and the copies recovery forgot on them.
    pub lost_devices: u8,
    /// Copies on lost devices, forgotten.
    pub forgotten_copies: u64,
    /// Blocks whose newest data was on lost devices only: they now read
    /// their home copy, older data.
    pub lost_blocks: u64,
    /// Non-default entries after recovery.
    pub entries: u64,
    /// Wall-clock time of recovery, including the compacting checkpoint, ms.
    pub elapsed_ms: f64,
}

/// Drops every copy on `lost` devices from `durable`; a block left with
/// no current copy reads its home copy. Returns the copies dropped and
/// those blocks.
fn forget_devices(durable: &mut BlockMap<Entry>, home: u8, lost: u8) -> (u64, u64) {
    if lost == 0 {
        return (0, 0);
    }
    let (mut copies, mut blocks) = (0, 0);
    let touched: Vec<(u64, Entry)> = durable
        .iter()
        .filter(|(_, e)| e.present & lost != 0)
        .map(|(&b, &e)| (b, e))
        .collect();
    for (b, e) in touched {
        copies += (e.present & lost).count_ones() as u64;
        let mut kept = tiermux_core::safe::drop_devices(e, lost, home);
        if tiermux_core::safe::current_copies(&e) & !lost == 0 {
            blocks += 1;
            kept = Entry {
                present: 1 << home,
                ..Entry::default()
            };
        }
        set_entry(durable, home, b, kept);
    }
    (copies, blocks)
}

fn strip(mut e: Entry) -> Entry {
    e.flags = 0;
    e
}

fn journal_path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("journal.{generation}"))
}

/// The durable placement map of a volume.
pub struct Metadata {
    dir: PathBuf,
    home: u8,
    durable: BlockMap<Entry>,
    journal: File,
    generation: u64,
    journal_len: u64,
    next_seq: u64,
    pending: Vec<u8>,
    records_in_generation: u64,
    /// Start a checkpoint once a journal generation holds this many records.
    pub checkpoint_every_records: u64,
    checkpointing: Option<std::thread::JoinHandle<Result<(), MetaError>>>,
    /// Records written since opening.
    pub records_written: u64,
    /// Checkpoints completed since opening.
    pub checkpoints: u64,
    /// Places (device, address) whose copies records dropped, moved or
    /// relied on, with the sequence number of the latest such record;
    /// writing there waits until a mark covers it.
    quarantine: HashMap<(u8, u64), u64>,
    /// The same releases in sequence order, to lift them mark by mark.
    releases: std::collections::VecDeque<(u64, u8, u64)>,
    /// Records below this sequence number are covered by a completed mark.
    marked_seq: u64,
    /// Places records gave up on devices that discard.
    freed: freed::Freed,
    /// The data devices a checkpoint must sync before it is written.
    data_fds: Vec<std::os::fd::RawFd>,
}

/// Where `e` keeps `block` on device `d`: its location on a device that
/// allocates locations (not `home`), else the block's own address.
pub(crate) fn place_of(home: u8, block: u64, d: u8, e: &Entry) -> u64 {
    if (d as usize) < LOC_DEVICES && d != home {
        e.loc(d) as u64
    } else {
        block
    }
}

/// Devices whose contents may not have survived since the metadata was
/// written: recovery forgets the copies it finds on them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Lost {
    /// Devices whose files were created at this open (they hold zeros).
    pub created: u8,
    /// Devices in memory (tmpfs, ramfs): empty after a reboot.
    pub in_memory: u8,
}

impl Metadata {
    /// [`Metadata::open_forgetting`] with every device's contents intact.
    pub fn open(
        dir: &Path,
        shape: &VolumeShape,
        home: u8,
        boot_id: &str,
    ) -> Result<(Metadata, PlacementMap, Recovery), MetaError> {
        Self::open_forgetting(dir, shape, home, boot_id, Lost::default())
    }

    /// Opens (or creates) the metadata of a volume of `shape` in `dir`,
    /// recovers the map and compacts it into a fresh checkpoint. `home` is
    /// the device of blocks without an entry; `boot_id` names the machine's
    /// current boot ([`crate::reactor::Reactor::boot_id`]). When the
    /// machine rebooted since the journal was written, only records covered
    /// by its last mark are replayed. Copies on devices that `lost` says
    /// are empty now are forgotten in the new checkpoint, before the boot
    /// is recorded. The caller syncs the data devices first: the new
    /// checkpoint points at their data.
    pub fn open_forgetting(
        dir: &Path,
        shape: &VolumeShape,
        home: u8,
        boot_id: &str,
        lost: Lost,
    ) -> Result<(Metadata, PlacementMap, Recovery), MetaError> {
        assert_eq!(shape.format, FORMAT, "new volumes use the current format");
        let t0 = Instant::now();
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let mut rec = Recovery::default();
        // The layout of journal records when no checkpoint says otherwise.
        let (mut layout, upgrade) = match check_shape(dir, shape)? {
            Some(layout) => (layout, layout.format != FORMAT),
            None => {
                rec.fresh = true;
                (CURRENT, false)
            }
        };
        let mut durable = BlockMap::default();
        let mut generation = 1;
        let mut next_seq = 0;
        let ckpt_path = dir.join("checkpoint");
        if let Some((ckpt_layout, g, seq, entries)) = read_checkpoint(&ckpt_path)? {
            layout = ckpt_layout;
            generation = g;
            next_seq = seq;
            rec.checkpoint_entries = entries.len() as u64;
            durable.extend(entries);
        }
        // A directory from before boot records: its journals were written
        // for crashes of the process only.
        rec.rebooted = read_boot(dir)?.is_some_and(|b| b != boot_id);
        let g = replay_journals(
            dir,
            layout,
            generation,
            &mut next_seq,
            &mut durable,
            home,
            &mut rec,
        )?;
        rec.lost_devices = lost.created | if rec.rebooted { lost.in_memory } else { 0 };
        rec.lost_devices &= !(1 << home);
        (rec.forgotten_copies, rec.lost_blocks) =
            forget_devices(&mut durable, home, rec.lost_devices);
        let map = placement_map(&durable, home);
        rec.entries = durable.len() as u64;
        let new_generation = g.max(generation) + 1;
        let journal = compact(
            dir,
            new_generation,
            next_seq,
            &durable,
            upgrade.then_some(shape),
        )?;
        write_atomically(dir, "boot", boot_id.as_bytes())?;
        rec.elapsed_ms = t0.elapsed().as_secs_f64() * 1e3;
        let meta = Metadata::started(dir, home, durable, journal, new_generation, next_seq);
        Ok((meta, map, rec))
    }

    /// Metadata that continues journal generation `generation` (empty) at
    /// sequence number `next_seq`.
    fn started(
        dir: &Path,
        home: u8,
        durable: BlockMap<Entry>,
        journal: File,
        generation: u64,
        next_seq: u64,
    ) -> Metadata {
        Metadata {
            dir: dir.to_path_buf(),
            home,
            durable,
            journal,
            generation,
            journal_len: 0,
            next_seq,
            pending: Vec::new(),
            records_in_generation: 0,
            checkpoint_every_records: 1 << 20,
            checkpointing: None,
            records_written: 0,
            checkpoints: 0,
            quarantine: HashMap::new(),
            releases: Default::default(),
            marked_seq: next_seq,
            freed: freed::Freed::default(),
            data_fds: Vec::new(),
        }
    }

    /// The durable entry of `block` (what recovery would return now, once
    /// pending records are committed).
    pub fn durable(&self, block: u64) -> Entry {
        self.durable.get(&block).copied().unwrap_or(Entry {
            present: 1 << self.home,
            ..Entry::default()
        })
    }

    /// Queues a record setting `block` to `e` (flags are not persisted);
    /// nothing is queued when the durable entry is already `e`.
    pub fn record(&mut self, block: u64, e: Entry) {
        let e = strip(e);
        let old = self.durable(block);
        if old == e {
            return;
        }
        self.note_releases(block, &old, &e);
        set_entry(&mut self.durable, self.home, block, e);
        const N: usize = CURRENT.record_bytes;
        let mut r = [0u8; N];
        r[0..8].copy_from_slice(&self.next_seq.to_le_bytes());
        CURRENT.encode_entry(block, &e, &mut r[8..8 + CURRENT.entry_bytes]);
        let crc = crc32fast::hash(&r[..N - 4]);
        r[N - 4..].copy_from_slice(&crc.to_le_bytes());
        self.pending.extend_from_slice(&r);
        self.next_seq += 1;
    }

    /// Quarantines the places of every current copy in `old` when `new`
    /// drops or moves any of them: until a mark covers the record queued
    /// next, a power cut brings back `old`, so neither the space released
    /// nor the copies kept may be overwritten (the kept copies must still
    /// match the dropped ones, which `old` calls current).
    fn note_releases(&mut self, block: u64, old: &Entry, new: &Entry) {
        let home = self.home;
        self.freed.note(self.next_seq, block, old, new, |d, e| {
            place_of(home, block, d, e)
        });
        let current = old.present & !old.stale;
        let dropped = (0..tiermux_core::types::MAX_DEVICES as u8).any(|d| {
            let bit = 1 << d;
            current & bit != 0
                && (new.present & bit == 0
                    || self.place(block, d, new) != self.place(block, d, old))
        });
        // Copies `old` calls equal that `new` no longer calls current
        // (a mirrored block's capacity copy given up without I/O): a write
        // to the one kept must wait too, or a power cut would bring back
        // two copies that differ.
        let equal = current_copies(old);
        let unmatched = equal.count_ones() >= 2 && equal & !current_copies(new) != 0;
        if !dropped && !unmatched {
            return;
        }
        for d in 0..tiermux_core::types::MAX_DEVICES as u8 {
            if current & (1 << d) != 0 {
                let place = self.place(block, d, old);
                self.quarantine.insert((d, place), self.next_seq);
                self.releases.push_back((self.next_seq, d, place));
            }
        }
    }

    /// Where `e` keeps `block` on device `d`: its location on a device that
    /// allocates locations, else the block's own address.
    fn place(&self, block: u64, d: u8, e: &Entry) -> u64 {
        place_of(self.home, block, d, e)
    }

    /// Devices (bit per device) whose freed places are kept for discards
    /// (see [`Metadata::freed_covered`]).
    pub fn set_discard_devices(&mut self, devices: u8) {
        self.freed.devices = devices;
    }

    /// Moves to `out` the places that records freed on discarding devices
    /// and that a completed mark covers: no state recovery can return to
    /// names them any more (unless something reused them since).
    pub fn freed_covered(&mut self, out: &mut Vec<FreedPlace>) {
        self.freed.covered(self.marked_seq, out);
    }

    /// Freed places waiting for a mark.
    pub fn freed_waiting(&self) -> usize {
        self.freed.waiting()
    }

    /// True while a write at address `addr` of device `d` must wait: a
    /// record dropped or moved a copy there, or a copy that the dropped one
    /// matched, and no completed mark covers it yet, so a power cut could
    /// bring back the entry that names it.
    pub fn quarantined(&self, d: u8, addr: u64) -> bool {
        self.quarantine
            .get(&(d, addr))
            .is_some_and(|&seq| seq >= self.marked_seq)
    }

    /// True when some location waits for a mark.
    pub fn has_quarantine(&self) -> bool {
        !self.releases.is_empty()
    }

    /// The sequence number of the next record: a mark started now covers
    /// the records below it.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Appends a mark covering the records below `seq` and commits it.
    ///
    /// The caller guarantees that every device operation those records
    /// depend on is durable (it synced the data devices after they were
    /// committed), and syncs the journal afterwards; then, after a power
    /// cut, recovery replays exactly the records below the last durable
    /// mark, a state whose every location holds the data it names (see
    /// [`Metadata::quarantined`]).
    pub fn append_mark(&mut self, seq: u64, r: &mut dyn Reactor) -> Result<(), MetaError> {
        assert!(seq <= self.next_seq, "a mark covers records already queued");
        const N: usize = CURRENT.record_bytes;
        let mut rec = [0u8; N];
        rec[0..8].copy_from_slice(&self.next_seq.to_le_bytes());
        CURRENT.encode_entry(
            MARK_BLOCK,
            &mark_entry(seq),
            &mut rec[8..8 + CURRENT.entry_bytes],
        );
        let crc = crc32fast::hash(&rec[..N - 4]);
        rec[N - 4..].copy_from_slice(&crc.to_le_bytes());
        self.pending.extend_from_slice(&rec);
        self.next_seq += 1;
        self.commit(r)
    }

    /// The mark covering records below `seq` is durable: the locations
    /// they released may be reused.
    pub fn marked(&mut self, seq: u64) {
        assert!(seq >= self.marked_seq, "marks complete in order");
        self.marked_seq = seq;
        while let Some(&(s, d, loc)) = self.releases.front() {
            if s >= seq {
                break;
            }
            self.releases.pop_front();
            if self.quarantine.get(&(d, loc)) == Some(&s) {
                self.quarantine.remove(&(d, loc));
            }
        }
    }

    /// The data devices a checkpoint syncs before it is written.
    pub fn set_data_fds(&mut self, fds: Vec<std::os::fd::RawFd>) {
        self.data_fds = fds;
    }

    /// Writes queued records to the journal (one `pwrite`). When it returns,
    /// they survive a crash of this process. Starts a checkpoint when the
    /// journal generation is long.
    pub fn commit(&mut self, r: &mut dyn Reactor) -> Result<(), MetaError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let path = journal_path(&self.dir, self.generation);
        r.write_now(self.journal_fd(), &self.pending, self.journal_len)
            .map_err(io_err(&path))?;
        let n = (self.pending.len() / CURRENT.record_bytes) as u64;
        self.journal_len += self.pending.len() as u64;
        self.records_in_generation += n;
        self.records_written += n;
        self.pending.clear();
        if self.records_in_generation >= self.checkpoint_every_records {
            self.start_checkpoint(r)?;
        }
        Ok(())
    }

    /// The journal's file descriptor (for an asynchronous `fdatasync`).
    pub fn journal_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.journal.as_raw_fd()
    }

    fn finish_checkpoint(&mut self, wait: bool) -> Result<(), MetaError> {
        let done = self.checkpointing.as_ref().is_some_and(|h| h.is_finished());
        if done || (wait && self.checkpointing.is_some()) {
            let h = self.checkpointing.take().expect("checkpoint running");
            h.join().expect("checkpoint thread panicked")?;
            self.checkpoints += 1;
        }
        Ok(())
    }

    /// Switches to a new journal generation and writes a checkpoint of the
    /// durable map in the background (at most one at a time).
    fn start_checkpoint(&mut self, r: &mut dyn Reactor) -> Result<(), MetaError> {
        self.finish_checkpoint(false)?;
        if self.checkpointing.is_some() {
            return Ok(());
        }
        // Every record of the old generation is durable before the switch:
        // a `FLUSH` syncs only the current journal, and recovery refuses a
        // damaged generation followed by another.
        let old = journal_path(&self.dir, self.generation);
        r.sync_now(self.journal_fd()).map_err(io_err(&old))?;
        // The checkpoint holds entries whose data may still be in the
        // devices' caches: make it durable first.
        for &fd in &self.data_fds {
            r.sync_now(fd).map_err(io_err(&self.dir))?;
        }
        let new_generation = self.generation + 1;
        self.journal = create_journal(&self.dir, new_generation)?;
        self.generation = new_generation;
        self.journal_len = 0;
        self.records_in_generation = 0;
        let snapshot = self.durable.clone();
        let dir = self.dir.clone();
        let seq = self.next_seq;
        self.checkpointing = Some(std::thread::spawn(move || {
            write_checkpoint(&dir, new_generation, seq, &snapshot)?;
            remove_journals_before(&dir, new_generation)
        }));
        Ok(())
    }

    /// Commits, waits for a running checkpoint and writes a final one (a
    /// clean shutdown: the next start replays nothing).
    pub fn close(&mut self, r: &mut dyn Reactor) -> Result<(), MetaError> {
        self.commit(r)?;
        self.finish_checkpoint(true)?;
        self.start_checkpoint(r)?;
        self.finish_checkpoint(true)
    }

    /// Non-default durable entries.
    pub fn len(&self) -> usize {
        self.durable.len()
    }

    /// True when every block has the default placement.
    pub fn is_empty(&self) -> bool {
        self.durable.is_empty()
    }
}

impl Drop for Metadata {
    /// Waits for a background checkpoint, so that a volume reopened in the
    /// same process never races with it. (Records not committed are lost,
    /// as in a crash.)
    fn drop(&mut self) {
        if let Some(h) = self.checkpointing.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests;
