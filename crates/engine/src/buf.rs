//! Aligned I/O buffers.
//!
//! O_DIRECT needs the buffer address, the length and the file offset aligned
//! to the device's logical block size; [`ALIGN`] (4 KiB) satisfies every
//! device in practice. Buffers are zeroed when allocated and freed on drop.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// Alignment of every buffer, bytes.
pub const ALIGN: usize = 4096;

/// A heap buffer whose address is aligned to [`ALIGN`].
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
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
            };
        }
        let layout = Self::layout(len);
        // SAFETY: the layout has a non-zero size (len > 0) and a valid
        // power-of-two alignment.
        let raw = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, len }
    }

    fn layout(len: usize) -> Layout {
        Layout::from_size_align(len, ALIGN).expect("buffer length overflows a layout")
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
        if self.len > 0 {
            // SAFETY: allocated in `zeroed` with exactly this layout.
            unsafe { dealloc(self.ptr.as_ptr(), Self::layout(self.len)) };
        }
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
}
