//! Device memory of the software mlx5 device.
//!
//! Every ring, doorbell record and UAR page the sim hands out lives in a [`DevMem`]: an
//! anonymous `memmap2` mapping, page aligned and zero filled, that never moves while it is
//! alive. The host side (the mlx5 provider) reaches it only through the raw pointers of the
//! `Dv*` descriptors; the device side (the engine) only through the accessors below, which are
//! volatile for bulk bytes and atomic for the words both sides touch concurrently (doorbell
//! records, UAR/BlueFlame words, the CQE `op_own` byte). No `&`/`&mut` to this memory is ever
//! formed outside this file, so the host and the device thread never hold aliasing references.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

use memmap2::MmapMut;

/// One anonymous mapping of device memory.
pub(crate) struct DevMem {
    map: MmapMut,
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain process memory owned by this value; all access goes through
// raw pointers with volatile or atomic operations (see the module doc), so sharing the handle
// between the host thread and the device thread creates no references that could alias.
unsafe impl Send for DevMem {}
// SAFETY: as above; `&DevMem` only hands out raw pointers and performs volatile/atomic access.
unsafe impl Sync for DevMem {}

impl DevMem {
    /// Map `len` bytes (rounded up to a page), zero filled.
    pub(crate) fn new(len: usize) -> crate::Result<DevMem> {
        let len = len.max(64).next_multiple_of(4096);
        let mut map = MmapMut::map_anon(len)
            .map_err(|e| crate::Error::io("sim: mapping device memory", &e))?;
        let base = map.as_mut_ptr();
        Ok(DevMem { map, base, len })
    }

    /// Raw pointer to byte `off`. Panics (a sim bug, never input) when `off` is past the end.
    pub(crate) fn ptr(&self, off: usize) -> *mut u8 {
        assert!(
            off <= self.len,
            "sim: device memory offset {off} past {}",
            self.len
        );
        // SAFETY: `off <= len`, so the result stays inside (or one past) the mapping.
        unsafe { self.base.add(off) }
    }

    /// Read `out.len()` bytes at `off` (volatile: in aligned 8-byte words, bytes at the edges).
    pub(crate) fn read(&self, off: usize, out: &mut [u8]) {
        assert!(
            off + out.len() <= self.len,
            "sim: device memory read out of range"
        );
        let mut i = 0;
        // Byte by byte up to an 8-byte boundary of the device memory, then in 8-byte words,
        // then the tail byte by byte.
        while i < out.len() && (off + i) % 8 != 0 {
            // SAFETY: in range (asserted above); volatile because the host writes this memory.
            out[i] = unsafe { std::ptr::read_volatile(self.base.add(off + i)) };
            i += 1;
        }
        while i + 8 <= out.len() {
            // SAFETY: in range (asserted above) and 8-aligned (the base is page aligned,
            // `off + i` a multiple of 8); volatile as above. The word is copied out whole;
            // its bytes land in `out` in memory order.
            let w = unsafe { std::ptr::read_volatile(self.base.add(off + i).cast::<u64>()) };
            out[i..i + 8].copy_from_slice(&w.to_ne_bytes());
            i += 8;
        }
        while i < out.len() {
            // SAFETY: as the first loop.
            out[i] = unsafe { std::ptr::read_volatile(self.base.add(off + i)) };
            i += 1;
        }
    }

    /// Zero `len` bytes at `off` (volatile, as [`DevMem::write`] of zeros, without a buffer of
    /// zeros to copy from).
    pub(crate) fn zero(&self, off: usize, len: usize) {
        assert!(
            off + len <= self.len,
            "sim: device memory write out of range"
        );
        let mut i = 0;
        while i < len && (off + i) % 8 != 0 {
            // SAFETY: in range (asserted above); volatile because the host reads this memory.
            unsafe { std::ptr::write_volatile(self.base.add(off + i), 0u8) };
            i += 1;
        }
        while i + 8 <= len {
            // SAFETY: in range and 8-aligned (page-aligned base, `off + i` a multiple of 8).
            unsafe { std::ptr::write_volatile(self.base.add(off + i).cast::<u64>(), 0) };
            i += 8;
        }
        while i < len {
            // SAFETY: as the first loop.
            unsafe { std::ptr::write_volatile(self.base.add(off + i), 0u8) };
            i += 1;
        }
    }

    /// Write `data` at `off` (volatile: in aligned 8-byte words, bytes at the edges).
    pub(crate) fn write(&self, off: usize, data: &[u8]) {
        assert!(
            off + data.len() <= self.len,
            "sim: device memory write out of range"
        );
        let mut i = 0;
        // As `read`: bytes up to an 8-byte boundary, 8-byte words, then the tail bytes.
        while i < data.len() && (off + i) % 8 != 0 {
            // SAFETY: in range (asserted above); volatile because the host reads this memory.
            unsafe { std::ptr::write_volatile(self.base.add(off + i), data[i]) };
            i += 1;
        }
        while i + 8 <= data.len() {
            let mut w = [0u8; 8];
            w.copy_from_slice(&data[i..i + 8]);
            // SAFETY: in range (asserted above) and 8-aligned (page-aligned base, `off + i` a
            // multiple of 8); volatile as above; the bytes land in memory order.
            unsafe {
                std::ptr::write_volatile(
                    self.base.add(off + i).cast::<u64>(),
                    u64::from_ne_bytes(w),
                )
            };
            i += 8;
        }
        while i < data.len() {
            // SAFETY: as the first loop.
            unsafe { std::ptr::write_volatile(self.base.add(off + i), data[i]) };
            i += 1;
        }
    }

    fn atomic_u32(&self, off: usize) -> &AtomicU32 {
        assert!(
            off % 4 == 0 && off + 4 <= self.len,
            "sim: bad u32 offset {off}"
        );
        // SAFETY: aligned (page-aligned base, `off % 4 == 0`) and in range; the mapping lives
        // as long as `self`; every concurrent access to this word is atomic or a volatile
        // store of the same size by the host, which is what a device register sees.
        unsafe { AtomicU32::from_ptr(self.base.add(off).cast()) }
    }

    /// Atomic load of a big-endian 32-bit word (a doorbell record) as host order.
    pub(crate) fn load_be32(&self, off: usize) -> u32 {
        u32::from_be(self.atomic_u32(off).load(Ordering::Acquire))
    }

    /// Atomic load of a raw 64-bit word (a UAR / BlueFlame doorbell), as stored in memory.
    pub(crate) fn load_raw64(&self, off: usize) -> u64 {
        assert!(
            off % 8 == 0 && off + 8 <= self.len,
            "sim: bad u64 offset {off}"
        );
        // SAFETY: aligned and in range as asserted; see `atomic_u32`.
        let a = unsafe { AtomicU64::from_ptr(self.base.add(off).cast()) };
        a.load(Ordering::Acquire)
    }

    /// Atomic store of a raw 64-bit word.
    pub(crate) fn store_raw64(&self, off: usize, v: u64) {
        assert!(
            off % 8 == 0 && off + 8 <= self.len,
            "sim: bad u64 offset {off}"
        );
        // SAFETY: aligned and in range as asserted; see `atomic_u32`.
        let a = unsafe { AtomicU64::from_ptr(self.base.add(off).cast()) };
        a.store(v, Ordering::Release)
    }

    /// Release store of one byte: the CQE `op_own` byte, written after the CQE body so a
    /// poller that sees the new owner bit sees the whole CQE.
    pub(crate) fn store_u8_release(&self, off: usize, v: u8) {
        assert!(off < self.len, "sim: bad u8 offset {off}");
        // SAFETY: in range; one byte is always aligned.
        let a = unsafe { AtomicU8::from_ptr(self.base.add(off)) };
        a.store(v, Ordering::Release)
    }

    /// Write 64 bytes at 8-aligned `off`, given as eight words `w` (word `i` is bytes
    /// `8i..8i + 8` in little-endian order, as `wire::CqeWords`): bytes 0..63 with volatile
    /// stores (8, 4, 2 and 1 bytes wide), then `between()`, then byte 63 with a release store
    /// (a CQE: the host never sees its `op_own` before its body).
    pub(crate) fn write64_last_release(&self, off: usize, w: &[u64; 8], between: impl FnOnce()) {
        assert!(
            off % 8 == 0 && off + 64 <= self.len,
            "sim: bad 64-byte offset {off}"
        );
        let last = w[7];
        // SAFETY: `off..off + 64` is in range and `off` 8-aligned (asserted above, the base is
        // page aligned), so every store below is in range and aligned for its width; volatile
        // because the host reads this memory, and the host reads the body only after it saw
        // the last byte, which is stored last with release ordering.
        unsafe {
            let mut p = self.base.add(off);
            for &v in &w[..7] {
                std::ptr::write_volatile(p.cast::<u64>(), v.to_le());
                p = p.add(size_of::<u64>());
            }
            std::ptr::write_volatile(p.cast::<u32>(), (last as u32).to_le());
            p = p.add(size_of::<u32>());
            std::ptr::write_volatile(p.cast::<u16>(), ((last >> 32) as u16).to_le());
            p = p.add(size_of::<u16>());
            std::ptr::write_volatile(p, (last >> 48) as u8);
        }
        between();
        self.store_u8_release(off + 63, (last >> 56) as u8);
    }
}

impl std::fmt::Debug for DevMem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DevMem")
            .field("base", &self.base)
            .field("len", &self.len)
            .field("mapped", &self.map.len())
            .finish()
    }
}

/// Copy between two places in *host* memory registered as MRs (DMA by the device). The
/// ranges were checked against their MRs by the caller.
///
/// # Safety
/// `src..src+len` must be readable and `dst..dst+len` writable for the duration of the call
/// (guaranteed by the registration contract of [`crate::Provider::reg_mr`]).
pub(crate) unsafe fn dma_copy(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: the caller guarantees both ranges are valid; `copy` allows overlap (a WRITE
    // within one MR).
    unsafe { std::ptr::copy(src, dst, len) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bulk reads, writes and zeroing at every start and length around the 8-byte words:
    /// byte for byte what a byte loop would do, nothing outside the range touched.
    #[test]
    fn bulk_access_is_byte_exact_at_any_alignment() {
        let m = DevMem::new(4096).unwrap();
        let pattern = |i: usize| (i * 7 + 3) as u8;
        for off in 0..24 {
            for len in 0..40 {
                let data: Vec<u8> = (0..len).map(pattern).collect();
                m.write(0, &[0xee; 96]);
                m.write(off, &data);
                let mut all = [0u8; 96];
                m.read(0, &mut all);
                for (i, &b) in all.iter().enumerate() {
                    let want = if (off..off + len).contains(&i) {
                        pattern(i - off)
                    } else {
                        0xee
                    };
                    assert_eq!(b, want, "write at {off} len {len}: byte {i}");
                }
                let mut back = vec![0u8; len];
                m.read(off, &mut back);
                assert_eq!(back, data, "read at {off} len {len}");
                m.zero(off, len);
                m.read(0, &mut all);
                for (i, &b) in all.iter().enumerate() {
                    let want = if (off..off + len).contains(&i) {
                        0
                    } else {
                        0xee
                    };
                    assert_eq!(b, want, "zero at {off} len {len}: byte {i}");
                }
            }
        }
    }
}
