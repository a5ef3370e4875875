//! Writing WQEs into the send ring: the general writer (any checked request, segments through
//! a wrapping [`Cursor`]), the one-WQEBB inline fast path, and the poster's record of each
//! WQE (wr_id and size in `SqShared::wqes`). Every byte of a WQE's segments is written,
//! padding included (a reused slot holds old data). Segment offsets are
//! `crate::wire::offset`'s.

use std::sync::atomic::Ordering;

use super::Mlx5Sq;
use crate::mlx5::owners::Owners;
use crate::mlx5::shared::{SqEntry, NO_WQE};
use crate::wire::fm_ce_se;
use crate::wire::offset::{
    atomic, av, ctrl as ctrl_off, data as data_off, inline, raddr as raddr_off,
};
use crate::wire::{
    Payload, SendWqe, MLX5_AV_LEN, MLX5_EXTENDED_UD_AV, MLX5_INLINE_SEG, MLX5_QPN_MASK,
    MLX5_SEND_WQE_BB, MLX5_WQE_CTRL_CQ_UPDATE, MLX5_WQE_CTRL_QPN_SHIFT,
    MLX5_WQE_CTRL_WQE_INDEX_SHIFT, MLX5_WQE_DS_UNITS, MLX5_WQE_INDEX_MASK,
};
use crate::Sge;

// (`SendFlags` bits index `wire::fm_ce_se`: asserted in `wqe.rs`.)

/// Bit position of the opcode byte in the little-endian u64 of ctrl bytes 0..8.
pub(super) const OPCODE_BIT: u32 =
    (ctrl_off::OPCODE - ctrl_off::OPMOD_IDX_OPCODE) as u32 * u8::BITS;
/// Bit position of `qpn_ds` in the little-endian u64 of ctrl bytes 0..8.
pub(super) const QPN_DS_BIT: u32 =
    (ctrl_off::QPN_DS - ctrl_off::OPMOD_IDX_OPCODE) as u32 * u8::BITS;
/// Bit position of `fm_ce_se` in the little-endian u64 of ctrl bytes 8..16.
pub(super) const FM_CE_SE_BIT: u32 = (ctrl_off::FM_CE_SE - ctrl_off::SIGNATURE) as u32 * u8::BITS;
/// Bit position of `imm` in the little-endian u64 of ctrl bytes 8..16.
const IMM_BIT: u32 = (ctrl_off::IMM - ctrl_off::SIGNATURE) as u32 * u8::BITS;
/// The second 8-byte half of a 16-byte segment.
const SEG_HALF: usize = MLX5_WQE_DS_UNITS / 2;

/// Segment writer over the ring: 16-byte segments, wrapping at the ring end.
pub(super) struct Cursor {
    pub(super) buf: *mut u8,
    pub(super) byte_mask: usize,
    pub(super) off: usize,
}

impl Cursor {
    /// Pointer to the next 16-byte segment, and advance.
    #[inline(always)]
    pub(super) fn seg(&mut self) -> *mut u8 {
        // `wrapping_add`: address arithmetic only; the offset is inside the ring.
        let p = self.buf.wrapping_add(self.off);
        self.off = (self.off + MLX5_WQE_DS_UNITS) & self.byte_mask;
        p
    }
}

/// Store `v` big-endian at `p`.
///
/// # Safety
/// `p` is valid for 4 bytes of writes (alignment not required).
#[inline(always)]
pub(super) unsafe fn put32(p: *mut u8, v: u32) {
    // SAFETY: guaranteed by the caller.
    unsafe { core::ptr::write_unaligned(p as *mut u32, v.to_be()) }
}

/// Store `v` big-endian at `p`.
///
/// # Safety
/// `p` is valid for 8 bytes of writes.
#[inline(always)]
pub(super) unsafe fn put64(p: *mut u8, v: u64) {
    // SAFETY: guaranteed by the caller.
    unsafe { core::ptr::write_unaligned(p as *mut u64, v.to_be()) }
}

/// Copy `src` to `dst`; small sizes with a few overlapping word moves instead of a `memcpy`
/// call.
///
/// # Safety
/// `dst` is valid for `src.len()` bytes of writes and does not overlap `src`.
#[inline(always)]
pub(super) unsafe fn copy_small(dst: *mut u8, src: &[u8]) {
    let n = src.len();
    let s = src.as_ptr();
    // SAFETY: in each branch the head and tail words lie inside both buffers because `n` is
    // at least the word size; they may overlap each other, never the other buffer; the
    // caller vouches for `dst`.
    unsafe {
        if (8..=16).contains(&n) {
            let head = core::ptr::read_unaligned(s as *const u64);
            let tail = core::ptr::read_unaligned(s.add(n - 8) as *const u64);
            core::ptr::write_unaligned(dst as *mut u64, head);
            core::ptr::write_unaligned(dst.add(n - 8) as *mut u64, tail);
        } else if (4..8).contains(&n) {
            let head = core::ptr::read_unaligned(s as *const u32);
            let tail = core::ptr::read_unaligned(s.add(n - 4) as *const u32);
            core::ptr::write_unaligned(dst as *mut u32, head);
            core::ptr::write_unaligned(dst.add(n - 4) as *mut u32, tail);
        } else {
            core::ptr::copy_nonoverlapping(s, dst, n);
        }
    }
}

/// Segment count (16-byte units) of an inline payload of `len` bytes (0 = no segment).
#[inline(always)]
pub(super) fn inline_ds(len: usize) -> u32 {
    if len == 0 {
        0
    } else {
        (inline::DATA + len).div_ceil(MLX5_WQE_DS_UNITS) as u32
    }
}

impl<D: Owners> Mlx5Sq<D> {
    /// The flags of the next WQE: the request's own (`fm`, its `fm_ce_se` byte), sq_sig_all,
    /// and the `signal_every` rule.
    #[inline(always)]
    pub(super) fn fm_for(&mut self, fm: u8) -> u8 {
        let mut fm = fm | self.sig_all_fm;
        if self.signal_every != 0 {
            self.since_signal += 1;
            if fm & MLX5_WQE_CTRL_CQ_UPDATE == 0 && self.since_signal >= self.signal_every {
                fm |= MLX5_WQE_CTRL_CQ_UPDATE;
            }
            if fm & MLX5_WQE_CTRL_CQ_UPDATE != 0 {
                self.since_signal = 0;
            }
        }
        fm
    }

    /// Record the WQE just written at `pi` (`nbb` WQEBBs; `ctrl` its first 8 bytes) for the
    /// poller and the doorbell, and advance the producer state.
    #[inline(always)]
    pub(super) fn record(&mut self, wr_id: u64, ctrl: u64, nbb: u32) {
        let i = (self.pi & self.mask) as usize;
        // SAFETY: `wqes` points to `wqe_cnt` entries kept alive by `shared`; `i` is masked
        // with `wqe_cnt - 1`.
        let e = unsafe { &*self.wqes.add(i) };
        e.wr_id.store(wr_id, Ordering::Relaxed);
        e.size.store(u64::from(nbb), Ordering::Relaxed);
        if nbb != 1 {
            self.record_larger(nbb);
        }
        self.last_ctrl = ctrl;
        self.pi = self.pi.wrapping_add(nbb);
    }

    /// [`Self::record`] for a WQE of `nbb` (more than one) WQEBBs at `pi`: its other WQEBBs
    /// start no WQE (an entry of an earlier lap there would pass for one), the WQEBBs beyond
    /// the first count in `bb_extra`, and the poller learns where the last larger WQE ends
    /// (`SqShared::big_end`, stored before the doorbell record publishes the WQE).
    #[cold]
    #[inline(never)]
    fn record_larger(&mut self, nbb: u32) {
        for k in 1..nbb {
            let j = (self.pi.wrapping_add(k) & self.mask) as usize;
            // SAFETY: `wqes` points to `wqe_cnt` entries kept alive by `shared`; `j` is
            // masked with `wqe_cnt - 1`.
            unsafe { &*self.wqes.add(j) }
                .size
                .store(u64::from(NO_WQE), Ordering::Relaxed);
        }
        self.bb_extra = self.bb_extra.wrapping_add(nbb - 1);
        self.shared
            .sq
            .big_end
            .store(self.pi.wrapping_add(nbb), Ordering::Relaxed);
    }

    /// The first 8 bytes of a ctrl segment at `pi`: opmod 0, `wqe_idx`, opcode, qpn, ds.
    #[inline(always)]
    pub(super) fn ctrl0(&self, opcode: u8, ds: u32) -> u64 {
        let hi = u64::from((self.qpn << MLX5_WQE_CTRL_QPN_SHIFT | ds).to_be()) << QPN_DS_BIT;
        let idx = self.pi & MLX5_WQE_INDEX_MASK;
        u64::from((idx << MLX5_WQE_CTRL_WQE_INDEX_SHIFT | u32::from(opcode)).to_be()) | hi
    }

    /// The one-WQEBB fast path: an inline WRITE (`remote` given) or SEND of at most
    /// [`FAST_INLINE_MAX`](super::FAST_INLINE_MAX) bytes, the caller having checked
    /// [`Self::fast_open`] (or [`Self::fast_refill`], when the limit stays below `pi` only
    /// because `pi..limit` wraps). Same bytes as [`Self::write_wqe`]; no wrap (one WQEBB
    /// never wraps).
    #[inline(always)]
    pub(super) fn fast_inline(
        &mut self,
        wr_id: u64,
        remote: Option<(u64, u32)>,
        imm: Option<u32>,
        data: &[u8],
        flags: u8,
    ) {
        self.last_ctrl = self.fast_inline_wqe(wr_id, remote, imm, data, flags);
    }

    /// [`Self::fast_inline`] less the store of `last_ctrl`: returns the ctrl segment's first
    /// 8 bytes for a doorbell rung at once ([`super::SendQueue::post_and_ring`]).
    #[inline(always)]
    pub(super) fn fast_inline_wqe(
        &mut self,
        wr_id: u64,
        remote: Option<(u64, u32)>,
        imm: Option<u32>,
        data: &[u8],
        flags: u8,
    ) -> u64 {
        let len = data.len();
        let has_data = len != 0;
        let pi = self.pi;
        // WRITE WITH IMMEDIATE: the WRITE template with the opcode's low bit set.
        let imm_op = if imm.is_some() { 1u64 << OPCODE_BIT } else { 0 };
        let ctrl = self.ctrl_fast[remote.is_some() as usize * 2 + has_data as usize]
            | imm_op
            | u64::from(((pi & MLX5_WQE_INDEX_MASK) << MLX5_WQE_CTRL_WQE_INDEX_SHIFT).to_be());
        let fm = u64::from(fm_ce_se::of(flags)) << FM_CE_SE_BIT;
        // The slot times 8: twice that is its entry's offset in `wqes` (16 bytes an entry), 8
        // times that the WQE's in the ring (64 bytes a WQEBB). One shift serves both
        // addresses (x86 scales an index by 2 or 8 for free).
        let slot8 = (pi << 3 & self.mask8) as usize;
        // SAFETY: the WQE is one WQEBB at `pi & mask` inside the SQ ring (64-aligned, the ring
        // is a multiple of 64), and it is free: the limit (`fast_open`) covered it.
        unsafe {
            let w = self.buf.add(slot8 * (MLX5_SEND_WQE_BB / 8));
            core::ptr::write(w as *mut u64, ctrl);
            // signature, dci stream channel id, fm_ce_se, imm (big-endian; 0 without one):
            // one 64-bit store.
            let imm = match imm {
                Some(v) => u64::from(v.to_be()) << IMM_BIT,
                None => 0,
            };
            core::ptr::write(
                w.add(ctrl_off::SIGNATURE) as *mut u64,
                self.ctrl_fm | fm | imm,
            );
            let mut seg = w.add(MLX5_WQE_DS_UNITS);
            if let Some((raddr, rkey)) = remote {
                core::ptr::write(seg.add(raddr_off::RADDR) as *mut u64, raddr.to_be());
                // rkey and the reserved word, zero.
                core::ptr::write(
                    seg.add(raddr_off::RKEY) as *mut u64,
                    u64::from(rkey.to_be()),
                );
                seg = seg.add(MLX5_WQE_DS_UNITS);
            }
            if has_data {
                // The whole segment first (header, zero padding), then the data over it.
                core::ptr::write(
                    seg.add(inline::BYTE_COUNT) as *mut u64,
                    u64::from((len as u32 | MLX5_INLINE_SEG).to_be()),
                );
                core::ptr::write(seg.add(SEG_HALF) as *mut u64, 0);
                copy_small(seg.add(inline::DATA), data);
            }
            // SAFETY: `wqes` points to `wqe_cnt` entries kept alive by `shared`; `slot8 / 8`
            // is masked with `wqe_cnt - 1`.
            let e = &*((self.wqes as *const u8).add(slot8 * 2) as *const SqEntry);
            e.wr_id.store(wr_id, Ordering::Relaxed);
            // One WQEBB.
            e.size.store(1, Ordering::Relaxed);
        }
        self.pi = pi.wrapping_add(1);
        ctrl
    }

    /// Write the checked WQE `w` of `ds` 16-byte units at `pi` with flags `fm` (in place of
    /// `w.fm_ce_se`: the queue's signaling applied); returns the first 8 bytes of its ctrl
    /// segment.
    #[inline(always)]
    pub(super) fn write_wqe(&mut self, w: &SendWqe<'_, Sge>, ds: u32, fm: u8) -> u64 {
        let off = (self.pi & self.mask) as usize * MLX5_SEND_WQE_BB;
        let mut c = Cursor {
            buf: self.buf,
            byte_mask: self.byte_mask,
            off,
        };
        let ctrl = c.seg();
        // All segment writes below: each `c.seg()` pointer is a 16-byte segment inside the SQ
        // ring (offsets are masked by the ring size, a multiple of 64), and the WQEBBs it lies
        // in are free (`room` checked), so the device is not reading them.
        let ctrl0 = self.ctrl0(u8::from(w.opcode), ds);
        // SAFETY: as just said, for the ctrl segment (64-aligned: a WQE starts a WQEBB).
        unsafe {
            core::ptr::write(ctrl as *mut u64, ctrl0);
            // signature, dci stream channel id (2 bytes), fm_ce_se
            put32(ctrl.add(ctrl_off::SIGNATURE), fm as u32);
            put32(ctrl.add(ctrl_off::IMM), w.imm);
        }
        if let Some(ud) = w.ud {
            const U: usize = MLX5_WQE_DS_UNITS;
            const _: () = assert!(MLX5_AV_LEN == 3 * U);
            let av0 = c.seg();
            let av1 = c.seg();
            let av2 = c.seg();
            // SAFETY: see above; the 48-byte address vector spans three segments, each
            // written separately because the ring may wrap between them.
            unsafe {
                let av = ud.av;
                core::ptr::copy_nonoverlapping(av.as_ptr(), av0, U);
                core::ptr::copy_nonoverlapping(av.as_ptr().add(U), av1, U);
                core::ptr::copy_nonoverlapping(av.as_ptr().add(2 * U), av2, U);
                put32(av0.add(av::QKEY), ud.qkey);
                put32(
                    av0.add(av::DQP_DCT),
                    ud.dqpn & MLX5_QPN_MASK | MLX5_EXTENDED_UD_AV,
                );
            }
        }
        if let Some((raddr, rkey)) = w.raddr {
            let r = c.seg();
            // SAFETY: see above.
            unsafe {
                put64(r.add(raddr_off::RADDR), raddr);
                put32(r.add(raddr_off::RKEY), rkey);
                put32(r.add(raddr_off::RESERVED), 0);
            }
            if let Some((swap_add, compare)) = w.atomic {
                let a = c.seg();
                // SAFETY: see above.
                unsafe {
                    put64(a.add(atomic::SWAP_ADD), swap_add);
                    put64(a.add(atomic::COMPARE), compare);
                }
            }
        }
        match w.data {
            Payload::Sges(sges) => {
                for s in sges.iter().filter(|s| s.length != 0) {
                    let d = c.seg();
                    // SAFETY: see above.
                    unsafe {
                        put32(d.add(data_off::BYTE_COUNT), s.length);
                        put32(d.add(data_off::LKEY), s.lkey);
                        put64(d.add(data_off::ADDR), s.addr);
                    }
                }
            }
            Payload::Inline(data) if !data.is_empty() => self.write_inline(c, data),
            Payload::Inline(_) => {}
        }
        ctrl0
    }

    /// Inline segment at the cursor: header, data (wrapping at the ring end), zero padding
    /// up to the segment end.
    #[inline(always)]
    pub(super) fn write_inline(&self, c: Cursor, data: &[u8]) {
        let start = c.off;
        let len = data.len();
        let total = inline_ds(len) as usize * MLX5_WQE_DS_UNITS; // header + data + padding, >= 16
        if start + total <= self.byte_mask + 1 {
            // Fast path: the inline segments do not wrap.
            // SAFETY: `start + total` is inside the ring and these WQEBBs are free (see
            // write_wqe). The last 16 bytes are zeroed first (the padding lies there), then
            // the header and the data overwrite their part.
            unsafe {
                let p = self.buf.add(start);
                core::ptr::write_unaligned(p.add(total - MLX5_WQE_DS_UNITS) as *mut u64, 0);
                core::ptr::write_unaligned(p.add(total - SEG_HALF) as *mut u64, 0);
                put32(p.add(inline::BYTE_COUNT), len as u32 | MLX5_INLINE_SEG);
                copy_small(p.add(inline::DATA), data);
            }
            return;
        }
        self.write_inline_wrapping(start, data, total);
    }

    /// Inline segments that run past the ring end.
    #[cold]
    pub(super) fn write_inline_wrapping(&self, start: usize, data: &[u8], total: usize) {
        // SAFETY: a segment start inside the ring, in free WQEBBs (see write_wqe).
        unsafe {
            put32(
                self.buf.add(start + inline::BYTE_COUNT),
                data.len() as u32 | MLX5_INLINE_SEG,
            )
        };
        let ring = self.byte_mask + 1;
        let mut pos = (start + inline::DATA) & self.byte_mask;
        let mut src = 0usize;
        // Copy data in runs that stop at the ring end.
        while src < data.len() {
            let run = (data.len() - src).min(ring - pos);
            // SAFETY: `pos + run <= ring`; the bytes belong to this WQE's free WQEBBs.
            unsafe {
                core::ptr::copy_nonoverlapping(data.as_ptr().add(src), self.buf.add(pos), run)
            };
            src += run;
            pos = (pos + run) & self.byte_mask;
        }
        // Zero the padding (emit writes every byte: a reused slot holds old data).
        for _ in inline::DATA + data.len()..total {
            // SAFETY: as above, one byte inside the segment run.
            unsafe { core::ptr::write(self.buf.add(pos), 0) };
            pos = (pos + 1) & self.byte_mask;
        }
    }
}
