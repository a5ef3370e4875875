//! Volatile access to device memory (UAR / BlueFlame registers, doorbell records, CQEs).
//!
//! Device memory is never turned into `&` / `&mut` (the device changes it behind the
//! compiler's back; a reference would promise otherwise). Every access here is a single
//! volatile load or store of a naturally aligned integer, so the compiler emits exactly one
//! instruction of that width and neither merges, splits, elides nor reorders it with other
//! volatile accesses. Ordering against normal memory is the caller's job, with the named
//! barriers of [`crate::barrier`].
//!
//! The BlueFlame copy goes 64 bytes at a time, in ascending address order, as rdma-core 44's
//! `mmio_memcpy_x64` does it on each architecture: on x86_64 eight 8-byte volatile stores; on
//! aarch64 one `ld4` of the 64 source bytes into four NEON registers and one `st4` of them
//! (`vst4q_u64(dst, vld4q_u64(src))`: the de-interleaving load and the interleaving store
//! cancel, so the bytes land unchanged). Never `memcpy`, which may use wider or narrower
//! stores, or go backwards: the write-combining buffer must see whole, in-order 64-byte
//! chunks.

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

/// Copy `chunks` 64-byte chunks from a ring to a BlueFlame register, each with
/// [`copy64`], in order. The source starts at `src_off` bytes into the ring of `ring_len`
/// bytes and wraps to the ring start at its end.
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
        // `ring + off` are inside the ring and 8-byte aligned; `d` is the next 64 bytes of
        // the destination the caller vouched for.
        unsafe { copy64(d, ring.add(off) as *const u64) };
        // SAFETY: still within the `chunks * 64` bytes of `dst`.
        d = unsafe { d.add(8) };
        off += 64;
        if off == ring_len {
            off = 0;
        }
    }
}

/// Copy one 64-byte chunk to device memory as rdma-core 44's `mmio_memcpy_x64` does for 64
/// bytes: on aarch64 one `ld4` / `st4` pair on four 128-bit NEON registers (one store
/// instruction for the 64 bytes); elsewhere eight 8-byte volatile stores in ascending order.
///
/// # Safety
/// `dst` is valid for 64 bytes of writes, `src` for 64 bytes of reads; both 8-byte aligned.
#[inline(always)]
pub unsafe fn copy64(dst: *mut u64, src: *const u64) {
    #[cfg(target_arch = "aarch64")]
    // SAFETY: the caller vouches for 64 readable bytes at `src` and 64 writable bytes at
    // `dst`, 8-byte aligned (the element size of `.2d`, as device memory needs); v0-v3 are
    // declared clobbered; the block reads and writes memory, so it is not `nomem`/`readonly`.
    unsafe {
        core::arch::asm!(
            "ld4 {{v0.2d, v1.2d, v2.2d, v3.2d}}, [{src}]",
            "st4 {{v0.2d, v1.2d, v2.2d, v3.2d}}, [{dst}]",
            src = in(reg) src,
            dst = in(reg) dst,
            out("v0") _,
            out("v1") _,
            out("v2") _,
            out("v3") _,
            options(nostack, preserves_flags),
        );
    }
    #[cfg(not(target_arch = "aarch64"))]
    for i in 0..8 {
        // SAFETY: `src + i` and `dst + i` are inside the 64 bytes the caller vouched for.
        unsafe { write64(dst.add(i), core::ptr::read(src.add(i))) };
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
    fn bf_copy_moves_every_byte_unchanged_and_nothing_outside() {
        // Every source byte distinct, so a permuted word or byte (an ld4 without the matching
        // st4, say) shows; guard words around the destination catch a stray store.
        #[repr(C, align(64))]
        struct Ring([u8; 256]);
        let mut ring = Ring([0; 256]);
        for (i, b) in ring.0.iter_mut().enumerate() {
            *b = i as u8;
        }
        const GUARD: u64 = 0xa5a5_a5a5_a5a5_a5a5;
        for (start, chunks) in [(0usize, 1usize), (64, 2), (192, 3), (128, 4)] {
            let mut dst = [GUARD; 8 + 4 * 8 + 8];
            // SAFETY: the destination after the first guard chunk has room for 4 chunks, 8-byte
            // aligned; the ring is 256 bytes, 64-byte aligned; `start` is a multiple of 64
            // below 256.
            unsafe { bf_copy(dst.as_mut_ptr().add(8), ring.0.as_ptr(), 256, start, chunks) };
            let got: Vec<u8> = dst[8..8 + chunks * 8]
                .iter()
                .flat_map(|w| w.to_ne_bytes())
                .collect();
            let want: Vec<u8> = (0..chunks * 64)
                .map(|i| ((start + i) % 256) as u8)
                .collect();
            assert_eq!(got, want, "start {start}, {chunks} chunks");
            assert!(
                dst[..8].iter().all(|&w| w == GUARD),
                "before: {:x?}",
                &dst[..8]
            );
            assert!(
                dst[8 + chunks * 8..].iter().all(|&w| w == GUARD),
                "after: start {start}, {chunks} chunks"
            );
        }
    }

    #[test]
    fn copy64_copies_one_chunk_exactly() {
        let src: [u64; 8] = core::array::from_fn(|i| 0x0807_0605_0403_0201u64 * (i as u64 + 1));
        let mut dst = [0u64; 10];
        // SAFETY: 64 readable bytes in `src`, 64 writable bytes from `dst[1]`, both aligned.
        unsafe { copy64(dst.as_mut_ptr().add(1), src.as_ptr()) };
        assert_eq!(dst[1..9], src);
        assert_eq!((dst[0], dst[9]), (0, 0));
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
