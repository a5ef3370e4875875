//! Volatile access to device memory (UAR / BlueFlame registers, doorbell records, CQEs).
//!
//! Device memory is never turned into `&` / `&mut` (the device changes it behind the
//! compiler's back; a reference would promise otherwise). Every access here is a single
//! volatile load or store of a naturally aligned integer, so the compiler emits exactly one
//! instruction of that width and neither merges, splits, elides nor reorders it with other
//! volatile accesses. Ordering against normal memory is the caller's job, with the named
//! barriers of [`crate::barrier`].
//!
//! The BlueFlame copy is a loop of 8-byte volatile stores: never `memcpy`, which may use
//! wider or narrower stores, or go backwards, and the write-combining buffer must see whole,
//! in-order 64-byte chunks.

/// Store a 32-bit value (already in the byte order the device expects).
///
/// # Safety
/// `p` is valid for a 4-byte write and 4-byte aligned.
#[inline(always)]
pub unsafe fn write32(p: *mut u32, v: u32) {
    // SAFETY: guaranteed by the caller.
    unsafe { core::ptr::write_volatile(p, v) }
}

/// Load a 32-bit value as stored (no byte swap).
///
/// # Safety
/// `p` is valid for a 4-byte read and 4-byte aligned.
#[inline(always)]
pub unsafe fn read32(p: *const u32) -> u32 {
    // SAFETY: guaranteed by the caller.
    unsafe { core::ptr::read_volatile(p) }
}

/// Load a 16-bit value as stored.
///
/// # Safety
/// `p` is valid for a 2-byte read and 2-byte aligned.
#[inline(always)]
pub unsafe fn read16(p: *const u16) -> u16 {
    // SAFETY: guaranteed by the caller.
    unsafe { core::ptr::read_volatile(p) }
}

/// Load one byte.
///
/// # Safety
/// `p` is valid for a 1-byte read.
#[inline(always)]
pub unsafe fn read8(p: *const u8) -> u8 {
    // SAFETY: guaranteed by the caller.
    unsafe { core::ptr::read_volatile(p) }
}

/// Store a 64-bit value as one 8-byte store (the 8-byte doorbell).
///
/// # Safety
/// `p` is valid for an 8-byte write and 8-byte aligned.
#[inline(always)]
pub unsafe fn write64(p: *mut u64, v: u64) {
    // SAFETY: guaranteed by the caller.
    unsafe { core::ptr::write_volatile(p, v) }
}

/// Copy `chunks` 64-byte chunks from a ring to a BlueFlame register with 8-byte volatile
/// stores, in order. The source starts at `src_off` bytes into the ring of `ring_len` bytes
/// and wraps to the ring start at its end.
///
/// # Safety
/// `dst` is valid for `chunks * 64` bytes of writes and 8-byte aligned; `ring` is valid for
/// `ring_len` bytes of reads, 8-byte aligned; `ring_len` and `src_off` are multiples of 64
/// and `src_off < ring_len`.
#[inline(always)]
pub unsafe fn bf_copy(
    dst: *mut u64,
    ring: *const u8,
    ring_len: usize,
    src_off: usize,
    chunks: usize,
) {
    let mut off = src_off;
    let mut d = dst;
    for _ in 0..chunks {
        // SAFETY: `off` is a multiple of 64 below `ring_len`, so the 64 bytes at
        // `ring + off` are inside the ring and 8-byte aligned.
        let s = unsafe { ring.add(off) } as *const u64;
        for i in 0..8 {
            // SAFETY: `s + i` is inside the chunk just checked; `d + i` is inside the
            // destination the caller vouched for.
            unsafe { write64(d.add(i), core::ptr::read(s.add(i))) };
        }
        // SAFETY: still within the `chunks * 64` bytes of `dst`.
        d = unsafe { d.add(8) };
        off += 64;
        if off == ring_len {
            off = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf_copy_wraps_at_ring_end() {
        let mut ring = [0u64; 16]; // 128 bytes = two chunks
        for (i, w) in ring.iter_mut().enumerate() {
            *w = i as u64;
        }
        let mut dst = [0u64; 16];
        // SAFETY: both buffers are 128 bytes, 8-aligned; offset 64 < 128.
        unsafe { bf_copy(dst.as_mut_ptr(), ring.as_ptr() as *const u8, 128, 64, 2) };
        let want: Vec<u64> = (8..16).chain(0..8).collect();
        assert_eq!(dst.to_vec(), want);
    }

    #[test]
    fn scalar_accessors_do_not_swap() {
        let mut w = 0u32;
        // SAFETY: a local, aligned u32.
        unsafe { write32(&mut w, 0x1234_5678u32.to_be()) };
        assert_eq!(w.to_ne_bytes(), [0x12, 0x34, 0x56, 0x78]);
        // SAFETY: as above.
        assert_eq!(unsafe { read32(&w) }, 0x1234_5678u32.to_be());
        let mut q = 0u64;
        // SAFETY: a local, aligned u64.
        unsafe { write64(&mut q, 7) };
        assert_eq!(q, 7);
        let b = [9u8, 8];
        // SAFETY: a local byte.
        assert_eq!(unsafe { read8(&b[1]) }, 8);
        let h = [0x0102u16];
        // SAFETY: a local, aligned u16.
        assert_eq!(unsafe { read16(&h[0]) }, 0x0102);
    }
}
