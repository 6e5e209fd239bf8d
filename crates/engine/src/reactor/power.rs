//! What a power cut keeps of file writes not yet made durable, for the
//! simulated reactor.
//!
//! Every write a file receives (through the reactor) is performed on the
//! real file at once, as the kernel's page cache or a drive's write cache
//! would hold it, and is also remembered as *pending* until a sync of that
//! file. The file's content as of its last sync is its *durable image*. At a
//! power cut each file goes back to its durable image, and each pending
//! write independently is lost, kept or torn (some of its sectors kept),
//! applied in a random order, as a drive's cache and the kernel's writeback
//! persist data out of order.
//!
//! Files are known by their inode, so the model outlives a reactor: a test
//! shares one [`Machine`] among the reactors of successive runs of a
//! volume, and a power cut after a process crash still loses what the
//! crashed process left unsynced.
//!
//! Sectors: a write aligned to 4 KiB tears only at 4 KiB boundaries (a
//! device that writes 4 KiB atomically, like a 4Kn drive); any other write
//! (the journal's appends) tears at 512-byte boundaries.

use std::collections::HashMap;
use std::os::fd::{BorrowedFd, RawFd};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tiermux_core::rng::Rng;

use super::faults::{FaultOp, FaultSpec, FaultStats, Faults};

/// The simulated machine that simulated reactors run on: its files' pending
/// writes and its boot count. Clones share it.
#[derive(Clone, Default)]
pub struct Machine {
    inner: Arc<Mutex<MachineState>>,
}

#[derive(Default)]
struct MachineState {
    files: VolatileFiles,
    boots: u64,
    stats: PowerCutStats,
    faults: Faults,
}

impl Machine {
    /// A machine with no pending writes, in its first boot.
    pub fn new() -> Machine {
        Machine::default()
    }

    /// Its boot id: changes at every power cut.
    pub fn boot_id(&self) -> String {
        format!("simulated-boot-{}", self.state().boots)
    }

    /// What power cuts did so far.
    pub fn stats(&self) -> PowerCutStats {
        self.state().stats
    }

    /// Makes the file at `path` fail operations as `spec` says, from now
    /// on and across reactors (`faults.rs`); a default spec heals it.
    pub fn inject_faults(&self, path: &std::path::Path, spec: FaultSpec) -> std::io::Result<()> {
        self.state().faults.inject(path, spec)
    }

    /// The errors injected so far.
    pub fn fault_stats(&self) -> FaultStats {
        self.state().faults.stats
    }

    pub(crate) fn fails(&self, fd: RawFd, op: FaultOp, rng: &mut Rng) -> bool {
        self.state().faults.fails(fd, op, rng)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, MachineState> {
        self.inner.lock().expect("machine state")
    }

    pub(crate) fn wrote(&self, fd: RawFd, offset: u64, bytes: &[u8]) {
        self.state().files.wrote(fd, offset, bytes);
    }

    pub(crate) fn synced(&self, fd: RawFd) {
        self.state().files.synced(fd, usize::MAX);
    }

    /// How many writes of `fd` are pending now (a sync submitted now makes
    /// these durable, not later ones).
    pub(crate) fn pending_writes(&self, fd: RawFd) -> usize {
        self.state().files.pending_writes(fd)
    }

    /// A sync of `fd` submitted when `n` of its writes were pending
    /// completed: those are durable.
    pub(crate) fn synced_first(&self, fd: RawFd, n: usize) {
        self.state().files.synced(fd, n);
    }

    /// The power fails (see the module documentation); the next boot
    /// begins.
    pub(crate) fn power_cut(&self, rng: &mut Rng) {
        let mut st = self.state();
        let MachineState {
            files,
            boots,
            stats,
            ..
        } = &mut *st;
        files.power_cut(rng, stats);
        *boots += 1;
    }
}

/// Pending writes and durable images of files, by inode.
#[derive(Default)]
struct VolatileFiles {
    files: HashMap<(u64, u64), VolatileFile>,
}

struct VolatileFile {
    /// Where the file is (to restore it at a power cut).
    path: PathBuf,
    /// The file's content at its last sync (or when first written).
    durable: Vec<u8>,
    /// Writes since then, in completion order: (offset, bytes).
    pending: Vec<(u64, Vec<u8>)>,
}

/// Counters of what power cuts did to pending writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PowerCutStats {
    /// Pending writes lost entirely.
    pub lost: u64,
    /// Pending writes kept entirely.
    pub kept: u64,
    /// Pending writes of which only some sectors were kept.
    pub torn: u64,
}

/// A file of its own for `fd` (a duplicate, closed when dropped).
fn file_of(fd: RawFd) -> std::fs::File {
    // SAFETY: the reactor's contracts keep `fd` open while operations on it
    // are in flight or being performed, which is when this is called.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    std::fs::File::from(
        fd.try_clone_to_owned()
            .expect("duplicate a file descriptor"),
    )
}

fn inode(f: &std::fs::File) -> (u64, u64) {
    let m = f.metadata().expect("stat");
    (m.dev(), m.ino())
}

impl VolatileFiles {
    /// Notes a write of `bytes` at `offset` of `fd`, about to be performed
    /// on the real file.
    fn wrote(&mut self, fd: RawFd, offset: u64, bytes: &[u8]) {
        let file = file_of(fd);
        let f = self.files.entry(inode(&file)).or_insert_with(|| {
            let path = std::fs::read_link(format!("/proc/self/fd/{fd}")).expect("the file's path");
            // Through a buffered descriptor of its own: `fd` may be
            // O_DIRECT, which an unaligned read fails.
            let buffered = std::fs::File::open(&path).expect("open the file buffered");
            VolatileFile {
                durable: read_all(&buffered),
                path,
                pending: Vec::new(),
            }
        });
        f.pending.push((offset, bytes.to_vec()));
    }

    /// A sync of `fd` completed: its first `n` pending writes (all, for
    /// `usize::MAX`) are durable.
    fn synced(&mut self, fd: RawFd, n: usize) {
        if let Some(f) = self.files.get_mut(&inode(&file_of(fd))) {
            let n = n.min(f.pending.len());
            for (offset, bytes) in f.pending.drain(..n) {
                apply(&mut f.durable, offset, &bytes);
            }
        }
    }

    fn pending_writes(&self, fd: RawFd) -> usize {
        self.files
            .get(&inode(&file_of(fd)))
            .map_or(0, |f| f.pending.len())
    }

    /// The power fails: every file gets its durable image plus a random
    /// part of its pending writes (see the module documentation).
    fn power_cut(&mut self, rng: &mut Rng, stats: &mut PowerCutStats) {
        let mut keys: Vec<(u64, u64)> = self.files.keys().copied().collect();
        keys.sort_unstable();
        for key in keys {
            let mut f = self.files.remove(&key).expect("listed");
            let mut order: Vec<usize> = (0..f.pending.len()).collect();
            for i in (1..order.len()).rev() {
                order.swap(i, rng.below(i as u64 + 1) as usize);
            }
            let mut content = std::mem::take(&mut f.durable);
            for i in order {
                let (offset, bytes) = &f.pending[i];
                match rng.below(3) {
                    0 => stats.lost += 1,
                    1 => {
                        apply(&mut content, *offset, bytes);
                        stats.kept += 1;
                    }
                    _ => {
                        let sector = if offset % 4096 == 0 && bytes.len() % 4096 == 0 {
                            4096
                        } else {
                            512
                        };
                        tear(&mut content, *offset, bytes, sector, rng);
                        stats.torn += 1;
                    }
                }
            }
            // A file removed since (an old journal) stays removed.
            if let Ok(file) = std::fs::OpenOptions::new().write(true).open(&f.path) {
                if inode(&file) == key {
                    write_all(&file, &content);
                }
            }
        }
    }
}

/// Writes the sectors of `bytes` (sectors of the file, `sector` bytes
/// each) that a coin flip keeps.
fn tear(content: &mut Vec<u8>, offset: u64, bytes: &[u8], sector: u64, rng: &mut Rng) {
    let end = offset + bytes.len() as u64;
    let mut s = offset - offset % sector;
    while s < end {
        let (a, b) = (s.max(offset), (s + sector).min(end));
        if rng.below(2) == 0 {
            let part = &bytes[(a - offset) as usize..(b - offset) as usize];
            apply(content, a, part);
        }
        s += sector;
    }
}

fn apply(content: &mut Vec<u8>, offset: u64, bytes: &[u8]) {
    let end = offset as usize + bytes.len();
    if content.len() < end {
        content.resize(end, 0);
    }
    content[offset as usize..end].copy_from_slice(bytes);
}

fn read_all(f: &std::fs::File) -> Vec<u8> {
    let len = f.metadata().expect("stat").len() as usize;
    let mut buf = vec![0u8; len];
    f.read_exact_at(&mut buf, 0)
        .expect("read a file's durable image");
    buf
}

fn write_all(f: &std::fs::File, content: &[u8]) {
    f.set_len(content.len() as u64)
        .expect("truncate to the durable length");
    f.write_all_at(content, 0)
        .expect("write the content a power cut left");
}
