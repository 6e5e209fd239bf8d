//! Aligned I/O buffers.
//!
//! O_DIRECT needs the buffer address, the length and the file offset aligned
//! to the device's logical block size; [`ALIGN`] (4 KiB) satisfies every
//! device in practice. Buffers are zeroed when allocated.
//!
//! Large buffers (a request's, up to 32 MiB) are kept for reuse when
//! dropped, a few per size class and thread ([`SPARE_MAX_BYTES`] in all):
//! the allocator returns such blocks to the kernel at once, and a new one
//! costs a page fault per 4 KiB page, which at 1 MiB requests took four
//! tenths of the server's CPU time (measured with `perf`; see
//! `docs/performance.md`).
//!
//! Buffers of [`HUGE_MIN_BYTES`] or more are aligned to a huge page, padded
//! to whole huge pages and offered to the kernel for transparent huge pages
//! (`MADV_HUGEPAGE`), before they are first touched. A direct read into
//! such a buffer is a few physically contiguous segments instead of one per
//! 4 KiB page: on the virtio disk of `docs/performance.md`, 1 MiB direct
//! reads ran at 2.2-2.3 GB/s into huge pages against 0.8-1.1 GB/s into
//! 4 KiB pages.

use std::alloc::{alloc, alloc_zeroed, dealloc, Layout};
use std::cell::RefCell;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// Alignment of every buffer, bytes.
pub const ALIGN: usize = 4096;

/// Buffers of at least this many bytes are kept for reuse when dropped;
/// their capacity is rounded up to a power of two (their size class).
pub const SPARE_MIN_BYTES: usize = 64 * 1024;

/// The most bytes of spare buffers one thread keeps.
pub const SPARE_MAX_BYTES: usize = 64 * 1024 * 1024;

/// Buffers of at least this many bytes are backed by transparent huge
/// pages where the kernel allows (see the module documentation).
pub const HUGE_MIN_BYTES: usize = 1 << 20;

/// A transparent huge page, bytes (x86-64, arm64 with 4 KiB pages).
pub const HUGE_PAGE_BYTES: usize = 2 << 20;

/// The most spare buffers one thread keeps of one size class.
const SPARE_PER_CLASS: usize = 8;

/// Size classes: powers of two from [`SPARE_MIN_BYTES`] up, a class per
/// bit of a 64-bit length.
const SPARE_CLASSES: usize = 64;

/// One thread's spare buffers, by size class.
struct Spare {
    by_class: Vec<Vec<NonNull<u8>>>,
    bytes: usize,
}

impl Spare {
    fn take(&mut self, cap: usize) -> Option<NonNull<u8>> {
        let ptr = self.by_class[class_of(cap)].pop()?;
        self.bytes -= AlignedBuf::layout(cap).size();
        Some(ptr)
    }

    /// Keeps `ptr` (of capacity `cap`), or gives it back when full.
    fn keep(&mut self, ptr: NonNull<u8>, cap: usize) -> bool {
        let class = &mut self.by_class[class_of(cap)];
        let size = AlignedBuf::layout(cap).size();
        if class.len() >= SPARE_PER_CLASS || self.bytes + size > SPARE_MAX_BYTES {
            return false;
        }
        class.push(ptr);
        self.bytes += size;
        true
    }
}

impl Drop for Spare {
    fn drop(&mut self) {
        for (class, ptrs) in self.by_class.iter().enumerate() {
            for p in ptrs {
                // SAFETY: every kept pointer was allocated by `AlignedBuf`
                // with capacity 1 << class and is owned by nothing else.
                unsafe { dealloc(p.as_ptr(), AlignedBuf::layout(1 << class)) };
            }
        }
    }
}

fn class_of(cap: usize) -> usize {
    debug_assert!(cap.is_power_of_two());
    cap.trailing_zeros() as usize
}

thread_local! {
    static SPARE: RefCell<Spare> = RefCell::new(Spare {
        by_class: (0..SPARE_CLASSES).map(|_| Vec::new()).collect(),
        bytes: 0,
    });
}

/// The capacity a buffer of `len` bytes is allocated with.
fn capacity_for(len: usize) -> usize {
    if len >= SPARE_MIN_BYTES {
        len.next_power_of_two()
    } else {
        len
    }
}

/// A heap buffer whose address is aligned to [`ALIGN`].
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    /// Bytes allocated (at least `len`; a power of two from
    /// [`SPARE_MIN_BYTES`] up).
    cap: usize,
}

// SAFETY: the buffer owns its allocation exclusively (like a Box<[u8]>), so
// moving it to another thread or sharing `&AlignedBuf` is as safe as for
// `Vec<u8>`.
unsafe impl Send for AlignedBuf {}
// SAFETY: see above; `&AlignedBuf` only gives `&[u8]`.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes (`len` may be 0).
    pub fn zeroed(len: usize) -> Self {
        if len == 0 {
            return AlignedBuf {
                ptr: NonNull::dangling(),
                len: 0,
                cap: 0,
            };
        }
        let cap = capacity_for(len);
        if cap >= SPARE_MIN_BYTES {
            let spare = SPARE.try_with(|s| s.borrow_mut().take(cap)).ok().flatten();
            if let Some(ptr) = spare {
                // SAFETY: a spare pointer owns `cap` >= `len` bytes.
                unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, len) };
                return AlignedBuf { ptr, len, cap };
            }
        }
        let layout = Self::layout(cap);
        if cap < HUGE_MIN_BYTES {
            // SAFETY: the layout has a non-zero size (cap >= len > 0) and a
            // valid power-of-two alignment.
            let raw = unsafe { alloc_zeroed(layout) };
            let ptr = NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
            return AlignedBuf { ptr, len, cap };
        }
        // SAFETY: as above.
        let raw = unsafe { alloc(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        // SAFETY: `ptr` owns `layout.size()` bytes, aligned to a huge page,
        // and padded to whole huge pages; the advice changes no contents
        // and its failure (a kernel without transparent huge pages) leaves
        // ordinary pages, so its result is not needed.
        unsafe {
            libc::madvise(ptr.as_ptr().cast(), layout.size(), libc::MADV_HUGEPAGE);
        }
        // SAFETY: `ptr` owns `layout.size()` >= `cap` bytes; zeroing them
        // initializes the buffer (and faults it in, in huge pages where the
        // kernel has them).
        unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, layout.size()) };
        AlignedBuf { ptr, len, cap }
    }

    /// A buffer of `len` bytes whose contents are unspecified: a spare
    /// buffer as an earlier user on this thread left it, else zeroed. For
    /// buffers that are written before they are read (a receive buffer, a
    /// copy's destination), where zeroing would be wasted work.
    pub fn scratch(len: usize) -> Self {
        let cap = capacity_for(len);
        if cap >= SPARE_MIN_BYTES {
            let spare = SPARE.try_with(|s| s.borrow_mut().take(cap)).ok().flatten();
            if let Some(ptr) = spare {
                // Every spare buffer's bytes were initialized (zeroed when
                // first allocated, then written), so exposing them is sound.
                return AlignedBuf { ptr, len, cap };
            }
        }
        Self::zeroed(len)
    }

    /// A buffer holding a copy of `data`.
    pub fn from_slice(data: &[u8]) -> Self {
        let mut b = Self::scratch(data.len());
        b.copy_from_slice(data);
        b
    }

    /// The layout of a buffer of capacity `cap`: aligned to [`ALIGN`], or
    /// to a huge page and padded to whole ones from [`HUGE_MIN_BYTES`] up.
    fn layout(cap: usize) -> Layout {
        let (size, align) = if cap >= HUGE_MIN_BYTES {
            (cap.next_multiple_of(HUGE_PAGE_BYTES), HUGE_PAGE_BYTES)
        } else {
            (cap, ALIGN)
        };
        Layout::from_size_align(size, align).expect("buffer length overflows a layout")
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a zero-length buffer.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Raw pointer to the first byte, for submitting the buffer to the
    /// kernel. The caller keeps the buffer alive until the I/O completes.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` points to `len` initialized (zeroed at allocation)
        // bytes owned by `self`, or is dangling with `len == 0`, which is a
        // valid empty slice.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` guarantees exclusivity.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.cap == 0 {
            return;
        }
        let (ptr, cap) = (self.ptr, self.cap);
        if cap >= SPARE_MIN_BYTES
            && SPARE
                .try_with(|s| s.borrow_mut().keep(ptr, cap))
                .unwrap_or(false)
        {
            return;
        }
        // SAFETY: allocated in `zeroed` with exactly this layout
        // (`Self::layout` of the same capacity).
        unsafe { dealloc(ptr.as_ptr(), Self::layout(cap)) };
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBuf({} bytes)", self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_zeroed_writable_and_sendable() {
        for len in [0usize, 1, 512, 4096, 65536 + 7] {
            let mut b = AlignedBuf::zeroed(len);
            assert_eq!(b.len(), len);
            assert!(b.iter().all(|&x| x == 0));
            if len > 0 {
                assert_eq!(b.as_mut_ptr() as usize % ALIGN, 0);
                b[len - 1] = 7;
            }
            let b = std::thread::spawn(move || b).join().unwrap();
            if len > 0 {
                assert_eq!(b[len - 1], 7);
            }
        }
    }

    #[test]
    fn a_reused_buffer_comes_back_zeroed_within_its_class() {
        let len = 3 * SPARE_MIN_BYTES + 5;
        let mut a = AlignedBuf::zeroed(len);
        a.fill(0xAB);
        let addr = a.as_mut_ptr() as usize;
        drop(a);
        // Same class (4 x SPARE_MIN_BYTES): the spare buffer is reused.
        let mut b = AlignedBuf::zeroed(4 * SPARE_MIN_BYTES);
        assert_eq!(
            b.as_mut_ptr() as usize,
            addr,
            "the spare buffer was not reused"
        );
        assert!(b.iter().all(|&x| x == 0), "a reused buffer kept old bytes");
        // A small buffer is never taken from the spares.
        let small = AlignedBuf::zeroed(SPARE_MIN_BYTES / 2);
        assert!(small.iter().all(|&x| x == 0));
    }

    #[test]
    fn a_copy_holds_exactly_its_slice() {
        let data: Vec<u8> = (0..3 * SPARE_MIN_BYTES).map(|i| (i % 251) as u8).collect();
        drop(AlignedBuf::zeroed(4 * SPARE_MIN_BYTES)); // leaves a spare of that class
        let b = AlignedBuf::from_slice(&data);
        assert_eq!(&b[..], &data[..]);
        assert_eq!(AlignedBuf::from_slice(&[1, 2, 3])[..], [1, 2, 3]);
        assert!(AlignedBuf::from_slice(&[]).is_empty());
    }

    #[test]
    fn large_buffers_start_on_a_huge_page_and_fill_whole_ones() {
        for len in [HUGE_MIN_BYTES, HUGE_MIN_BYTES + 1, 3 * HUGE_PAGE_BYTES] {
            let mut b = AlignedBuf::zeroed(len);
            assert_eq!(b.as_mut_ptr() as usize % HUGE_PAGE_BYTES, 0, "{len}");
            assert!(b.iter().all(|&x| x == 0));
            b.fill(0x5A);
            assert!(b.iter().all(|&x| x == 0x5A));
            let layout = AlignedBuf::layout(b.cap);
            assert_eq!(layout.size() % HUGE_PAGE_BYTES, 0);
            assert!(layout.size() >= b.cap);
        }
        assert_eq!(AlignedBuf::layout(SPARE_MIN_BYTES).align(), ALIGN);
    }

    #[test]
    fn spares_stay_within_their_byte_limit() {
        let big = SPARE_MAX_BYTES / 2;
        let bufs: Vec<AlignedBuf> = (0..4).map(|_| AlignedBuf::zeroed(big)).collect();
        drop(bufs);
        let kept = SPARE.with(|s| s.borrow().bytes);
        assert!(kept <= SPARE_MAX_BYTES, "{kept} bytes kept");
        assert_eq!(kept, 2 * big, "two of the four fit the limit");
    }
}
