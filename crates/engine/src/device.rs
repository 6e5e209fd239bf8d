//! Devices of a volume: a file or block device, and the layers wrapped
//! around it ([`crate::emulate`]).
//!
//! A device is opened with O_DIRECT when its filesystem allows it (tmpfs,
//! for example, may refuse), and created or extended to the size the volume
//! needs when it is a regular file. Layers see every operation: an
//! emulated device ([`crate::emulate::Emulated`]) gives the file the timing
//! of a device profile, and the engine completes each operation no earlier
//! than the latest time any layer asks for (see `docs/engine.md`).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use tiermux_core::Op;

use crate::emulate::Layer;

/// Why a device could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("device '{name}' ({path}): {message}")]
pub struct DeviceError {
    /// Device name from the config.
    pub name: String,
    /// Its path.
    pub path: PathBuf,
    /// What went wrong.
    pub message: String,
}

/// Cumulative counters of one device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceCounters {
    /// Reads completed.
    pub read_ops: u64,
    /// Writes completed.
    pub write_ops: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Latencies of the reads, from submission to completion.
    pub read_latency: LatencyBuckets,
    /// Latencies of the writes.
    pub write_latency: LatencyBuckets,
}

/// Upper bounds of the latency buckets, µs; a last bucket takes the rest.
/// From memory-backed files (about 1 µs) to a disk under a deep queue.
pub const LATENCY_BUCKET_BOUNDS_US: [u64; 18] = [
    1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000,
    500_000, 1_000_000,
];

/// Device operation latencies counted into fixed buckets (the shape of a
/// Prometheus histogram): cheap to record and to copy into a snapshot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LatencyBuckets {
    /// Operations per bucket, not cumulative: bucket `i` counts latencies
    /// above bound `i - 1` up to bound `i`; the last, those above every
    /// bound.
    pub counts: [u64; LATENCY_BUCKET_BOUNDS_US.len() + 1],
    /// The sum of the latencies, ns.
    pub sum_ns: u64,
}

impl LatencyBuckets {
    /// Counts one latency.
    pub fn record(&mut self, latency_ns: u64) {
        let i = LATENCY_BUCKET_BOUNDS_US.partition_point(|&b| b * 1000 < latency_ns);
        self.counts[i] += 1;
        self.sum_ns += latency_ns;
    }

    /// Operations counted.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// An opened device.
pub struct Device {
    /// Name from the config.
    pub name: String,
    /// Path of the file or block device.
    pub path: PathBuf,
    file: File,
    /// Whether O_DIRECT is in effect.
    pub direct: bool,
    /// Whether the file lives in memory (tmpfs or ramfs), where the loop
    /// serves its I/O inline ([`crate::reactor::Reactor::serve_inline`]).
    pub memory_backed: bool,
    /// The file did not exist before this open: it holds zeros, whatever
    /// the metadata says was on it.
    pub created: bool,
    /// Usable bytes.
    pub size_bytes: u64,
    /// Layers around the file, innermost first.
    layers: Vec<Box<dyn Layer>>,
    /// Cumulative counters.
    pub counters: DeviceCounters,
    /// Operations in flight (reads, writes).
    pub inflight: (u32, u32),
}

impl Device {
    /// Opens (creating or extending a regular file to) `size_bytes` at
    /// `path`, with O_DIRECT if `direct` and the filesystem supports it.
    pub fn open(
        name: &str,
        path: &Path,
        size_bytes: u64,
        direct: bool,
    ) -> Result<Device, DeviceError> {
        let err = |message: String| DeviceError {
            name: name.to_string(),
            path: path.to_path_buf(),
            message,
        };
        let meta = std::fs::metadata(path).ok();
        let is_block = meta
            .as_ref()
            .is_some_and(|m| m.file_type().is_block_device());
        if let Some(parent) = path.parent() {
            if !parent.as_os_str().is_empty() && !is_block {
                std::fs::create_dir_all(parent)
                    .map_err(|e| err(format!("cannot create its directory: {e}")))?;
            }
        }
        let (mut file, mut direct) =
            open_file(path, direct, is_block).map_err(|e| err(format!("cannot open: {e}")))?;
        size_to(&file, is_block, size_bytes).map_err(err)?;
        if direct {
            if let Err(e) = probe_direct(&file, crate::buf::ALIGN) {
                // Some filesystems (FUSE ones, for example) accept O_DIRECT
                // at open and then fail every aligned read.
                eprintln!(
                    "tiermux: device '{name}' ({}) accepts O_DIRECT but an aligned read failed ({e}); using buffered I/O",
                    path.display()
                );
                (file, direct) = open_file(path, false, is_block)
                    .map_err(|e| err(format!("cannot open: {e}")))?;
            }
        }
        let memory_backed = in_memory(&file);
        Ok(Device {
            name: name.to_string(),
            path: path.to_path_buf(),
            file,
            direct,
            memory_backed,
            created: meta.is_none(),
            size_bytes,
            layers: Vec::new(),
            counters: DeviceCounters::default(),
            inflight: (0, 0),
        })
    }

    /// Whether a layer fails the operation that just completed (or a
    /// sync); every layer is asked.
    pub fn fails(&mut self, op: crate::faults::FaultOp) -> bool {
        self.layers.iter_mut().fold(false, |f, l| l.fails(op) | f)
    }

    /// Wraps the device in `layer` (outside the layers it has).
    pub fn wrap(&mut self, layer: Box<dyn Layer>) {
        self.layers.push(layer);
    }

    /// What the layers do, innermost first ("emulated optane-905p").
    pub fn layers(&self) -> Vec<String> {
        self.layers.iter().map(|l| l.describe()).collect()
    }

    /// The file descriptor I/O is submitted on.
    pub fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    /// Notes the submission of the operation the volume knows as
    /// `token`; returns the earliest time (ns on the loop's clock) any
    /// layer lets it complete, 0 for no constraint, or
    /// [`crate::emulate::NOT_YET`] when a layer holds it (a later
    /// [`Device::take_released`] lets it go).
    pub fn submitted(
        &mut self,
        now_ns: u64,
        dir: Op,
        bytes: u64,
        addr: u64,
        purpose: usize,
        token: u64,
    ) -> u64 {
        match dir {
            Op::Read => self.inflight.0 += 1,
            Op::Write => self.inflight.1 += 1,
        }
        self.layers
            .iter_mut()
            .map(|l| l.submitted(now_ns, dir, bytes, addr, purpose, token))
            .max()
            .unwrap_or(0)
    }

    /// Notes a completion of `bytes`, `latency_ns` after its submission.
    pub fn completed(&mut self, dir: Op, bytes: u64, latency_ns: u64) {
        match dir {
            Op::Read => {
                self.inflight.0 = self
                    .inflight
                    .0
                    .checked_sub(1)
                    .expect("a read completed that was not in flight");
                self.counters.read_ops += 1;
                self.counters.read_bytes += bytes;
                self.counters.read_latency.record(latency_ns);
            }
            Op::Write => {
                self.inflight.1 = self
                    .inflight
                    .1
                    .checked_sub(1)
                    .expect("a write completed that was not in flight");
                self.counters.write_ops += 1;
                self.counters.write_bytes += bytes;
                self.counters.write_latency.record(latency_ns);
            }
        }
        for l in &mut self.layers {
            l.completed(dir);
        }
    }

    /// When a layer needs [`Device::wake`] next, ns on the loop's clock.
    pub fn next_wake_ns(&self) -> Option<u64> {
        self.layers.iter().filter_map(|l| l.next_wake_ns()).min()
    }

    /// Wakes the layers whose time has come at `now_ns`.
    pub fn wake(&mut self, now_ns: u64) {
        for l in &mut self.layers {
            if l.next_wake_ns().is_some_and(|t| t <= now_ns) {
                l.wake(now_ns);
            }
        }
    }

    /// Moves to `out` the operations the layers held and now let go.
    pub fn take_released(&mut self, out: &mut Vec<crate::emulate::Released>) {
        for l in &mut self.layers {
            l.take_released(out);
        }
    }
}

/// Opens `path` for reading and writing (creating a regular file), with
/// O_DIRECT when asked and the filesystem accepts it; says whether it is on.
fn open_file(path: &Path, direct: bool, is_block: bool) -> io::Result<(File, bool)> {
    let open = |flags: i32| {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(!is_block)
            .truncate(false)
            .custom_flags(flags)
            .open(path)
    };
    if !direct {
        return Ok((open(0)?, false));
    }
    match open(rustix::fs::OFlags::DIRECT.bits() as i32) {
        Ok(f) => Ok((f, true)),
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::INVAL.raw_os_error()) => {
            Ok((open(0)?, false))
        }
        Err(e) => Err(e),
    }
}

/// Reads `len` bytes at offset 0 into a buffer aligned for O_DIRECT: the
/// I/O the volume will do. A short read or an error means O_DIRECT does not
/// work on this file.
fn probe_direct(file: &File, len: usize) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut buf = crate::buf::AlignedBuf::zeroed(crate::buf::ALIGN.max(len));
    let n = file.read_at(&mut buf[..len], 0)?;
    if n != len {
        return Err(io::Error::other(format!("read {n} of {len} bytes")));
    }
    Ok(())
}

/// Makes `file` hold at least `size_bytes`: extends a regular file (never
/// shrinks it); a block device that is too small is an error.
fn size_to(file: &File, is_block: bool, size_bytes: u64) -> Result<(), String> {
    let current = if is_block {
        use std::io::Seek;
        let mut f = file;
        f.seek(io::SeekFrom::End(0))
            .map_err(|e| format!("cannot read its size: {e}"))?
    } else {
        file.metadata()
            .map_err(|e| format!("cannot stat: {e}"))?
            .len()
    };
    if current >= size_bytes {
        return Ok(());
    }
    if is_block {
        return Err(format!(
            "the block device has {current} bytes, the volume needs {size_bytes}"
        ));
    }
    file.set_len(size_bytes)
        .map_err(|e| format!("cannot extend to {size_bytes} bytes: {e}"))
}

/// Whether an open file or directory lies on a filesystem in memory
/// (tmpfs, ramfs), whose contents a reboot or power cut erases.
pub fn in_memory(fd: impl rustix::fd::AsFd) -> bool {
    const TMPFS_MAGIC: u64 = 0x0102_1994;
    const RAMFS_MAGIC: u64 = 0x8584_58f6;
    rustix::fs::fstatfs(fd).is_ok_and(|st| matches!(st.f_type as u64, TMPFS_MAGIC | RAMFS_MAGIC))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A latency on a bound counts in that bound's bucket (`le`), one just
    /// above it in the next; beyond every bound, in the last.
    #[test]
    fn latencies_fall_in_the_bucket_whose_bound_is_the_first_at_or_above() {
        let mut b = LatencyBuckets::default();
        for ns in [
            0,
            1_000,
            1_001,
            10_000,
            999_999,
            1_000_000_000,
            1_000_000_001,
        ] {
            b.record(ns);
        }
        let at = |us: u64| {
            LATENCY_BUCKET_BOUNDS_US
                .iter()
                .position(|&x| x == us)
                .unwrap()
        };
        assert_eq!(b.counts[at(1)], 2, "0 and exactly 1 µs");
        assert_eq!(b.counts[at(2)], 1, "1.001 µs");
        assert_eq!(b.counts[at(10)], 1);
        assert_eq!(b.counts[at(1_000)], 1, "999.999 µs");
        assert_eq!(b.counts[at(1_000_000)], 1, "exactly 1 s");
        assert_eq!(b.counts[LATENCY_BUCKET_BOUNDS_US.len()], 1, "beyond 1 s");
        assert_eq!(b.count(), 7);
        assert_eq!(
            b.sum_ns,
            2_000_000_000 + 1_000 + 1_001 + 10_000 + 999_999 + 1
        );
    }

    #[test]
    fn creates_extends_and_never_shrinks() {
        let dir = std::env::temp_dir().join(format!("tiermux-dev-{}", std::process::id()));
        let path = dir.join("sub/dev.img");
        let d = Device::open("fast", &path, 1 << 20, true).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 1 << 20);
        assert_eq!(d.memory_backed, dir.starts_with("/dev/shm"));
        drop(d);
        Device::open("fast", &path, 4096, false).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 1 << 20);
        let e = Device::open("x", Path::new("/proc/version/nope"), 4096, false)
            .err()
            .unwrap();
        assert!(e.to_string().contains("device 'x'"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }

    /// The O_DIRECT probe passes where aligned reads work and fails where
    /// they do not (here: a length O_DIRECT refuses, as a filesystem that
    /// cannot serve O_DIRECT refuses every read).
    #[test]
    fn the_direct_io_probe_tells_working_from_failing_reads() {
        let dir = std::env::temp_dir().join(format!("tiermux-probe-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("dev.img");
        std::fs::write(&path, vec![0u8; 1 << 16]).unwrap();
        let (file, direct) = open_file(&path, true, false).unwrap();
        probe_direct(&file, crate::buf::ALIGN).unwrap();
        if direct {
            assert!(
                probe_direct(&file, 1000).is_err(),
                "a 1000-byte O_DIRECT read"
            );
        }
        let (buffered, _) = open_file(&path, false, false).unwrap();
        probe_direct(&buffered, 1000).unwrap();
        std::fs::remove_dir_all(&dir).ok();
    }
}
