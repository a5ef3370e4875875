//! The send queue: WQE writing, accounting, doorbell and BlueFlame.
//!
//! ## Indices
//!
//! - `pi` (producer index, `u32`, free-running, in WQEBBs, written by the poster): the next
//!   WQE starts at WQEBB `pi & (wqe_cnt - 1)`; the ctrl segment carries `pi & 0xffff`.
//! - `ci` (in [`SqShared`], written by the poller): WQEBBs before it are retired and may be
//!   overwritten. Free WQEBBs = `wqe_cnt - (pi - ci)`; the poster caches `ci` and re-reads
//!   it only when the ring looks full.
//! - `seq` (WR sequence, free-running): one per posted WR; a completion for the WR with
//!   sequence `s` retires every WR from the oldest outstanding one up to `s`.
//!
//! ## Doorbell (rdma-core's order)
//!
//! WQEs written; [`to_device_store_barrier`]; `dbrec[1] = be32(pi & 0xffff)`; [`wc_start`];
//! then either the 8-byte doorbell (the first 8 bytes of the last WQE's ctrl segment) or a
//! BlueFlame copy of the single staged WQE, to `bf_reg + bf_offset`; [`wc_flush`]; the offset
//! toggles by `bf_size`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::shared::{CqShared, QpShared};
use super::DoorbellMode;
use crate::barrier::{to_device_store_barrier, wc_flush, wc_start};
use crate::mmio;
use crate::providers::{
    Payload, PostError, QpCaps, QpState, QpType, Rejected, SendFlags, SendOp, SendQueue, SendWr,
};

/// WQE opcodes (ctrl segment byte 3).
pub mod wqe_op {
    /// NOP.
    pub const NOP: u8 = 0x00;
    /// RDMA WRITE.
    pub const RDMA_WRITE: u8 = 0x08;
    /// RDMA WRITE with immediate.
    pub const RDMA_WRITE_IMM: u8 = 0x09;
    /// SEND.
    pub const SEND: u8 = 0x0a;
    /// SEND with immediate.
    pub const SEND_IMM: u8 = 0x0b;
    /// RDMA READ.
    pub const RDMA_READ: u8 = 0x10;
    /// Atomic compare-and-swap.
    pub const ATOMIC_CS: u8 = 0x11;
    /// Atomic fetch-and-add.
    pub const ATOMIC_FA: u8 = 0x12;
}

/// ctrl `fm_ce_se` bits.
pub mod fm_ce_se {
    /// Generate a CQE.
    pub const CQ_UPDATE: u8 = 0x08;
    /// Solicited event.
    pub const SOLICITED: u8 = 0x02;
    /// Fence: wait for earlier READs/atomics.
    pub const FENCE: u8 = 0x80;
}

/// `fm_ce_se` by `SendFlags` bits (SIGNALED 1, FENCE 2, SOLICITED 4).
const FM_CE_SE: [u8; 8] = {
    let mut t = [0u8; 8];
    let mut i = 0;
    while i < 8 {
        let mut v = 0;
        if i & 1 != 0 {
            v |= fm_ce_se::CQ_UPDATE;
        }
        if i & 2 != 0 {
            v |= fm_ce_se::FENCE;
        }
        if i & 4 != 0 {
            v |= fm_ce_se::SOLICITED;
        }
        t[i] = v;
        i += 1;
    }
    t
};

// The table above is indexed by these bit values.
const _: () =
    assert!(SendFlags::SIGNALED.0 == 1 && SendFlags::FENCE.0 == 2 && SendFlags::SOLICITED.0 == 4);

/// A checked request decoded once: what the WQE needs.
#[derive(Clone, Copy)]
struct Plan {
    opcode: u8,
    imm: u32,
    has_remote: bool,
    has_atomic: bool,
    raddr: u64,
    rkey: u32,
    swap_add: u64,
    compare: u64,
    /// Size in 16-byte units.
    ds: u32,
}

impl Plan {
    #[inline(always)]
    fn new(opcode: u8, imm: u32) -> Plan {
        Plan {
            opcode,
            imm,
            has_remote: false,
            has_atomic: false,
            raddr: 0,
            rkey: 0,
            swap_add: 0,
            compare: 0,
            ds: 1,
        }
    }
    #[inline(always)]
    fn remote(mut self, raddr: u64, rkey: u32) -> Plan {
        self.has_remote = true;
        self.raddr = raddr;
        self.rkey = rkey;
        self.ds += 1;
        self
    }
    #[inline(always)]
    fn atomic(mut self, swap_add: u64, compare: u64) -> Plan {
        self.has_atomic = true;
        self.swap_add = swap_add;
        self.compare = compare;
        self.ds += 1;
        self
    }
}

/// `byte_count` flag of an inline segment.
const INLINE_SEG: u32 = 0x8000_0000;

/// The send queue of an [`super::Mlx5Qp`].
pub struct Mlx5Sq {
    buf: *mut u8,
    wqe_cnt: u32,
    /// Ring size in bytes minus one (for wrapping byte offsets).
    byte_mask: usize,
    qpn: u32,
    qp_type: QpType,
    pub(crate) state: QpState,
    caps: QpCaps,
    /// CQ_UPDATE when the QP signals every request, else 0.
    sig_all_fm: u8,
    pub(crate) signal_every: u32,
    since_signal: u32,
    pub(crate) path_mtu: u32,
    /// BlueFlame is used for a single staged WQE with `bf_min_ds <= ds <= bf_max_ds`
    /// (derived from the [`DoorbellMode`] and `bf_size`; `bf_max_ds == 0`: never).
    bf_min_ds: u32,
    bf_max_ds: u32,
    /// See the module doc.
    pi: u32,
    seq: u32,
    cached_ci: u32,
    /// WQEs staged since the last ring; offset and ds of the last one.
    staged: u32,
    last_off: usize,
    last_ds: u32,
    dbrec: *mut u32,
    bf_reg: *mut u8,
    bf_size: u32,
    bf_offset: u32,
    shared: Arc<QpShared>,
    cq: Arc<CqShared>,
}

// SAFETY: the raw pointers point into this QP's rings, dbrec and bfreg, which the QP's owner
// keeps alive; only this queue (one producer, `&mut self`) writes through them.
unsafe impl Send for Mlx5Sq {}

impl std::fmt::Debug for Mlx5Sq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mlx5Sq")
            .field("qpn", &self.qpn)
            .field("wqe_cnt", &self.wqe_cnt)
            .field("pi", &self.pi)
            .field("staged", &self.staged)
            .finish_non_exhaustive()
    }
}

/// Segment writer over the ring: 16-byte segments, wrapping at the ring end.
struct Cursor {
    buf: *mut u8,
    byte_mask: usize,
    off: usize,
}

impl Cursor {
    /// Pointer to the next 16-byte segment, and advance.
    #[inline(always)]
    fn seg(&mut self) -> *mut u8 {
        // `wrapping_add`: address arithmetic only; the offset is inside the ring.
        let p = self.buf.wrapping_add(self.off);
        self.off = (self.off + 16) & self.byte_mask;
        p
    }
}

/// Store `v` big-endian at `p`.
///
/// # Safety
/// `p` is valid for 4 bytes of writes (alignment not required).
#[inline(always)]
unsafe fn put32(p: *mut u8, v: u32) {
    // SAFETY: guaranteed by the caller.
    unsafe { core::ptr::write_unaligned(p as *mut u32, v.to_be()) }
}

/// Store `v` big-endian at `p`.
///
/// # Safety
/// `p` is valid for 8 bytes of writes.
#[inline(always)]
unsafe fn put64(p: *mut u8, v: u64) {
    // SAFETY: guaranteed by the caller.
    unsafe { core::ptr::write_unaligned(p as *mut u64, v.to_be()) }
}

/// Copy `src` to `dst`; small sizes with a few overlapping word moves instead of a `memcpy`
/// call.
///
/// # Safety
/// `dst` is valid for `src.len()` bytes of writes and does not overlap `src`.
#[inline(always)]
unsafe fn copy_small(dst: *mut u8, src: &[u8]) {
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
fn inline_ds(len: usize) -> u32 {
    if len == 0 {
        0
    } else {
        (len + 4).div_ceil(16) as u32
    }
}

impl Mlx5Sq {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        dv: &super::dv::DvQp,
        qp_type: QpType,
        caps: QpCaps,
        sig_all: bool,
        shared: Arc<QpShared>,
        cq: Arc<CqShared>,
    ) -> Mlx5Sq {
        Mlx5Sq {
            buf: dv.sq_buf,
            wqe_cnt: dv.sq_wqe_cnt,
            byte_mask: dv.sq_wqe_cnt as usize * 64 - 1,
            qpn: dv.qpn,
            qp_type,
            state: QpState::Reset,
            caps,
            sig_all_fm: if sig_all { fm_ce_se::CQ_UPDATE } else { 0 },
            signal_every: 0,
            since_signal: 0,
            path_mtu: 4096,
            bf_min_ds: 2,
            bf_max_ds: if dv.bf_reg.is_null() {
                0
            } else {
                dv.bf_size / 16
            },
            pi: 0,
            seq: 0,
            cached_ci: 0,
            staged: 0,
            last_off: 0,
            last_ds: 0,
            dbrec: dv.dbrec,
            bf_reg: dv.bf_reg,
            bf_size: dv.bf_size,
            bf_offset: 0,
            shared,
            cq,
        }
    }

    /// Back to the RESET state: indices zero (the device expects it), nothing staged.
    pub(crate) fn reset(&mut self) {
        self.pi = 0;
        self.seq = 0;
        self.cached_ci = 0;
        self.staged = 0;
        self.since_signal = 0;
        self.bf_offset = 0;
        let sq = &self.shared.sq;
        sq.ci.store(0, Ordering::Relaxed);
        sq.retired_seq.store(0, Ordering::Relaxed);
        sq.pi.store(0, Ordering::Release);
    }

    /// The flags of the next WQE: the request's own, sq_sig_all, and the `signal_every` rule.
    #[inline(always)]
    fn fm_for(&mut self, flags: u8) -> u8 {
        let mut fm = FM_CE_SE[(flags & 7) as usize] | self.sig_all_fm;
        if self.signal_every != 0 {
            self.since_signal += 1;
            if fm & fm_ce_se::CQ_UPDATE == 0 && self.since_signal >= self.signal_every {
                fm |= fm_ce_se::CQ_UPDATE;
            }
            if fm & fm_ce_se::CQ_UPDATE != 0 {
                self.since_signal = 0;
            }
        }
        fm
    }

    /// Record the WQE just written at `pi` (`ds` units, `nbb` WQEBBs) for the poller and
    /// advance the producer state.
    #[inline(always)]
    fn record(&mut self, wr_id: u64, ds: u32, nbb: u32) {
        let sq = &self.shared.sq;
        let end = self.pi.wrapping_add(nbb);
        // SAFETY: `slots` and `wrid` have `wqe_cnt` entries and both indices are masked with
        // `wqe_cnt - 1` (`sq.mask == self.wqe_cnt - 1`, set together in `from_dv`).
        let (slot, wrid) = unsafe {
            (
                sq.slots.get_unchecked((self.pi & sq.mask) as usize),
                sq.wrid.get_unchecked((self.seq & sq.mask) as usize),
            )
        };
        slot.seq.store(self.seq, Ordering::Relaxed);
        slot.end.store(end, Ordering::Relaxed);
        wrid.store(wr_id, Ordering::Relaxed);
        self.last_off = (self.pi & (self.wqe_cnt - 1)) as usize * 64;
        self.last_ds = ds;
        self.pi = end;
        self.seq = self.seq.wrapping_add(1);
        self.staged += 1;
    }

    /// The latency fast path (like rdma-core's `ibv_wr_rdma_write` + `ibv_wr_set_inline_data`):
    /// stage one RDMA WRITE of `data` inline to `raddr`/`rkey`, signaled or not. Same checks
    /// and accounting as [`SendQueue::post`] (state, QP type, inline size, free WQEBBs, CQ
    /// room), without decoding a general [`SendWr`]; the WQE bytes are identical.
    #[inline(always)]
    pub fn post_write_inline(
        &mut self,
        wr_id: u64,
        raddr: u64,
        rkey: u32,
        data: &[u8],
        signaled: bool,
    ) -> Result<(), PostError> {
        if self.state != QpState::Rts {
            return Err(PostError::BadState { state: self.state });
        }
        if self.qp_type == QpType::Ud {
            return Err(PostError::OpNotSupported {
                op: "WRITE",
                qp_type: QpType::Ud,
            });
        }
        if data.len() > self.caps.max_inline_data as usize {
            return Err(PostError::InlineTooLarge {
                len: data.len().min(u32::MAX as usize) as u32,
                max: self.caps.max_inline_data,
            });
        }
        let ds = 2 + inline_ds(data.len());
        let nbb = ds.div_ceil(4);
        if nbb > self.wqe_cnt || !self.room(nbb) {
            return Err(PostError::QueueFull {
                capacity: self.caps.max_send_wr,
            });
        }
        if !self.cq.try_reserve(1) {
            return Err(PostError::CqFull {
                cqe: self.cq.dv.cqe_cnt,
            });
        }
        let fm = self.fm_for(signaled as u8);
        let off = (self.pi & (self.wqe_cnt - 1)) as usize * 64;
        let mut c = Cursor {
            buf: self.buf,
            byte_mask: self.byte_mask,
            off,
        };
        let ctrl = c.seg();
        let r = c.seg();
        // SAFETY: two 16-byte segments inside the SQ ring, in WQEBBs `room` found free.
        unsafe {
            put32(ctrl, (self.pi & 0xffff) << 8 | wqe_op::RDMA_WRITE as u32);
            put32(ctrl.add(4), self.qpn << 8 | ds);
            put32(ctrl.add(8), fm as u32);
            put32(ctrl.add(12), 0);
            put64(r, raddr);
            put32(r.add(8), rkey);
            put32(r.add(12), 0);
        }
        if !data.is_empty() {
            self.write_inline(c, data);
        }
        self.record(wr_id, ds, nbb);
        Ok(())
    }

    /// Choose doorbell or BlueFlame.
    pub(crate) fn set_mode(&mut self, m: DoorbellMode) {
        let max = if self.bf_reg.is_null() {
            0
        } else {
            self.bf_size / 16
        };
        (self.bf_min_ds, self.bf_max_ds) = match m {
            DoorbellMode::Doorbell => (1, 0),
            DoorbellMode::BlueFlame => (1, max),
            DoorbellMode::Auto => (2, max),
        };
    }

    /// WRs posted and not yet retired.
    pub(crate) fn outstanding(&self) -> u32 {
        self.seq
            .wrapping_sub(self.shared.sq.retired_seq.load(Ordering::Acquire))
    }

    /// The producer index (WQEBBs, free-running).
    pub fn pi(&self) -> u32 {
        self.pi
    }

    /// Validate `wr` and decode it into what the WQE needs. Writes nothing.
    #[inline(always)]
    fn check(&self, wr: &SendWr<'_>) -> Result<Plan, PostError> {
        if self.state != QpState::Rts {
            return Err(PostError::BadState { state: self.state });
        }
        // One pass over the op: opcode, immediate, remote segment, atomic operands.
        let mut p = match wr.op {
            SendOp::Send => Plan::new(wqe_op::SEND, 0),
            SendOp::SendImm { imm } => Plan::new(wqe_op::SEND_IMM, imm),
            SendOp::Write { raddr, rkey } => Plan::new(wqe_op::RDMA_WRITE, 0).remote(raddr, rkey),
            SendOp::WriteImm { raddr, rkey, imm } => {
                Plan::new(wqe_op::RDMA_WRITE_IMM, imm).remote(raddr, rkey)
            }
            SendOp::Read { raddr, rkey } => Plan::new(wqe_op::RDMA_READ, 0).remote(raddr, rkey),
            SendOp::CompareSwap {
                raddr,
                rkey,
                compare,
                swap,
            } => Plan::new(wqe_op::ATOMIC_CS, 0)
                .remote(raddr, rkey)
                .atomic(swap, compare),
            SendOp::FetchAdd { raddr, rkey, add } => Plan::new(wqe_op::ATOMIC_FA, 0)
                .remote(raddr, rkey)
                .atomic(add, 0),
        };
        if self.qp_type != QpType::Rc || wr.ud.is_some() {
            p.ds += self.check_transport(wr)?;
        }
        if p.opcode >= wqe_op::RDMA_READ {
            return self.check_read_like(wr, p);
        }
        match wr.payload {
            Payload::Inline(data) => {
                if data.len() > self.caps.max_inline_data as usize {
                    return Err(PostError::InlineTooLarge {
                        len: data.len().min(u32::MAX as usize) as u32,
                        max: self.caps.max_inline_data,
                    });
                }
                p.ds += inline_ds(data.len());
            }
            Payload::Sges(sges) => {
                if sges.len() > self.caps.max_send_sge as usize {
                    return Err(PostError::TooManySges {
                        n: sges.len().min(u32::MAX as usize) as u32,
                        max: self.caps.max_send_sge,
                    });
                }
                p.ds += sges.iter().filter(|s| s.length != 0).count() as u32;
            }
        }
        if p.ds > 63 {
            // The ctrl segment's ds field has 6 bits.
            return Err(PostError::InlineTooLarge {
                len: wr.payload.len().min(u32::MAX as usize) as u32,
                max: self.caps.max_inline_data.min(63 * 16 - 4),
            });
        }
        Ok(p)
    }

    /// UC / UD rules, and a destination given to a connected QP. Returns the extra segments
    /// (UD: the 48-byte address vector).
    #[inline(never)]
    fn check_transport(&self, wr: &SendWr<'_>) -> Result<u32, PostError> {
        match self.qp_type {
            QpType::Ud => {
                if !matches!(wr.op, SendOp::Send | SendOp::SendImm { .. }) {
                    return Err(PostError::OpNotSupported {
                        op: wr.op.name(),
                        qp_type: QpType::Ud,
                    });
                }
                if wr.ud.is_none() {
                    return Err(PostError::UdDest);
                }
                let len = wr.payload.len();
                if len > self.path_mtu as usize {
                    return Err(PostError::UdTooLarge {
                        len: len.min(u32::MAX as usize) as u32,
                        mtu: self.path_mtu,
                    });
                }
                Ok(3)
            }
            QpType::Uc | QpType::Rc => {
                if wr.ud.is_some() {
                    return Err(PostError::UdDest);
                }
                if self.qp_type == QpType::Uc && wr.op.is_read_like() {
                    return Err(PostError::OpNotSupported {
                        op: wr.op.name(),
                        qp_type: QpType::Uc,
                    });
                }
                Ok(0)
            }
        }
    }

    /// READ and atomics: local buffers only (no inline), READ not empty, atomics 8-byte
    /// aligned with one 8-byte SGE.
    #[inline(never)]
    fn check_read_like(&self, wr: &SendWr<'_>, mut p: Plan) -> Result<Plan, PostError> {
        let sges = match wr.payload {
            Payload::Inline(_) => return Err(PostError::InlineNotAllowed),
            Payload::Sges(s) => s,
        };
        if p.has_atomic {
            if p.raddr % 8 != 0 {
                return Err(PostError::AtomicMisaligned { raddr: p.raddr });
            }
            let len = wr.payload.len();
            if sges.len() != 1 || len != 8 {
                return Err(PostError::AtomicLocalLen {
                    len: len.min(u32::MAX as usize) as u32,
                });
            }
            p.ds += 1;
            return Ok(p);
        }
        if wr.payload.is_empty() {
            return Err(PostError::ZeroLengthRead);
        }
        if sges.len() > self.caps.max_send_sge as usize {
            return Err(PostError::TooManySges {
                n: sges.len().min(u32::MAX as usize) as u32,
                max: self.caps.max_send_sge,
            });
        }
        p.ds += sges.iter().filter(|s| s.length != 0).count() as u32;
        Ok(p)
    }

    /// Free WQEBBs, refreshing the cached consumer index when `need` does not fit.
    #[inline(always)]
    fn room(&mut self, need: u32) -> bool {
        if self.wqe_cnt - self.pi.wrapping_sub(self.cached_ci) >= need {
            return true;
        }
        self.cached_ci = self.shared.sq.ci.load(Ordering::Acquire);
        self.wqe_cnt - self.pi.wrapping_sub(self.cached_ci) >= need
    }

    /// Write the WQE of `wr` (already checked and decoded into `p`) at `pi`.
    #[inline(always)]
    fn write_wqe(&mut self, wr: &SendWr<'_>, p: &Plan, fm: u8) {
        let off = (self.pi & (self.wqe_cnt - 1)) as usize * 64;
        let mut c = Cursor {
            buf: self.buf,
            byte_mask: self.byte_mask,
            off,
        };
        let ctrl = c.seg();
        // All segment writes below: each `c.seg()` pointer is a 16-byte segment inside the SQ
        // ring (offsets are masked by the ring size, a multiple of 64), and the WQEBBs it lies
        // in are free (`room` checked), so the device is not reading them.
        // SAFETY: as just said, for the ctrl segment.
        unsafe {
            put32(ctrl, (self.pi & 0xffff) << 8 | p.opcode as u32);
            put32(ctrl.add(4), self.qpn << 8 | p.ds);
            // signature, dci stream channel id (2 bytes), fm_ce_se
            put32(ctrl.add(8), fm as u32);
            put32(ctrl.add(12), p.imm);
        }
        if let Some(ud) = wr.ud {
            let av = c.seg();
            let av2 = c.seg();
            let av3 = c.seg();
            // SAFETY: see above; the 48-byte address vector spans three segments, each
            // written separately because the ring may wrap between them.
            unsafe {
                core::ptr::copy_nonoverlapping(ud.ah.av.as_ptr(), av, 16);
                core::ptr::copy_nonoverlapping(ud.ah.av.as_ptr().add(16), av2, 16);
                core::ptr::copy_nonoverlapping(ud.ah.av.as_ptr().add(32), av3, 16);
                put32(av, ud.remote_qkey);
                put32(av.add(8), ud.remote_qpn | 0x8000_0000);
            }
        }
        if p.has_remote {
            let r = c.seg();
            // SAFETY: see above.
            unsafe {
                put64(r, p.raddr);
                put32(r.add(8), p.rkey);
                put32(r.add(12), 0);
            }
            if p.has_atomic {
                let a = c.seg();
                // SAFETY: see above.
                unsafe {
                    put64(a, p.swap_add);
                    put64(a.add(8), p.compare);
                }
            }
        }
        match wr.payload {
            Payload::Sges(sges) => {
                for s in sges.iter().filter(|s| s.length != 0) {
                    let d = c.seg();
                    // SAFETY: see above.
                    unsafe {
                        put32(d, s.length);
                        put32(d.add(4), s.lkey);
                        put64(d.add(8), s.addr);
                    }
                }
            }
            Payload::Inline(data) if !data.is_empty() => self.write_inline(c, data),
            Payload::Inline(_) => {}
        }
    }

    /// Inline segment at the cursor: header, data (wrapping at the ring end), zero padding
    /// up to the segment end.
    #[inline(always)]
    fn write_inline(&self, c: Cursor, data: &[u8]) {
        let start = c.off;
        let len = data.len();
        let total = inline_ds(len) as usize * 16; // header + data + padding, >= 16
        if start + total <= self.byte_mask + 1 {
            // Fast path: the inline segments do not wrap.
            // SAFETY: `start + total` is inside the ring and these WQEBBs are free (see
            // write_wqe). The last 16 bytes are zeroed first (the padding lies there), then
            // the header and the data overwrite their part.
            unsafe {
                let p = self.buf.add(start);
                core::ptr::write_unaligned(p.add(total - 16) as *mut u64, 0);
                core::ptr::write_unaligned(p.add(total - 8) as *mut u64, 0);
                put32(p, len as u32 | INLINE_SEG);
                copy_small(p.add(4), data);
            }
            return;
        }
        self.write_inline_wrapping(start, data, total);
    }

    /// Inline segments that run past the ring end.
    #[cold]
    fn write_inline_wrapping(&self, start: usize, data: &[u8], total: usize) {
        // SAFETY: a segment start inside the ring, in free WQEBBs (see write_wqe).
        unsafe { put32(self.buf.add(start), data.len() as u32 | INLINE_SEG) };
        let ring = self.byte_mask + 1;
        let mut pos = (start + 4) & self.byte_mask;
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
        for _ in 4 + data.len()..total {
            // SAFETY: as above, one byte inside the segment run.
            unsafe { core::ptr::write(self.buf.add(pos), 0) };
            pos = (pos + 1) & self.byte_mask;
        }
    }

    /// Publish the staged WQEs: dbrec, then the doorbell or BlueFlame.
    #[inline]
    fn ring_doorbell(&mut self) {
        // Orders the WQE stores before the dbrec store the device may act on.
        to_device_store_barrier();
        // SAFETY: `dbrec` is the QP's 8-byte doorbell record; [1] is the send counter.
        unsafe { mmio::write32(self.dbrec.add(1), (self.pi & 0xffff).to_be()) };
        self.shared.sq.pi.store(self.pi, Ordering::Release);
        if self.bf_reg.is_null() {
            self.staged = 0;
            return;
        }
        let dst = self.bf_reg.wrapping_add(self.bf_offset as usize);
        let use_bf =
            self.staged == 1 && self.last_ds <= self.bf_max_ds && self.last_ds >= self.bf_min_ds;
        // Orders the dbrec store before the write-combining stores to the bfreg.
        wc_start();
        if use_bf {
            let chunks = (self.last_ds as usize * 16).div_ceil(64);
            // SAFETY: `dst` is this QP's BlueFlame half (`bf_size` bytes, 8-aligned) and
            // `chunks * 64 <= bf_size`; the source is the staged WQE in our ring.
            unsafe {
                mmio::bf_copy(
                    dst as *mut u64,
                    self.buf,
                    self.byte_mask + 1,
                    self.last_off,
                    chunks,
                )
            };
        } else {
            // SAFETY: the last WQE's ctrl segment is inside the ring (8-aligned); `dst` is the
            // 8-aligned doorbell register.
            unsafe {
                let ctrl = core::ptr::read(self.buf.add(self.last_off) as *const u64);
                mmio::write64(dst as *mut u64, ctrl);
            }
        }
        // Pushes the WC stores out before anything later.
        wc_flush();
        self.bf_offset ^= self.bf_size;
        self.staged = 0;
    }
}

/// The refusal path, out of line so the accepting path stays short.
#[cold]
#[inline(never)]
fn reject(wr: SendWr<'_>, error: PostError) -> Rejected<SendWr<'_>> {
    Rejected { wr, error }
}

impl SendQueue for Mlx5Sq {
    #[inline(always)]
    fn post<'a>(&mut self, wr: SendWr<'a>) -> Result<(), Rejected<SendWr<'a>>> {
        let plan = match self.check(&wr) {
            Ok(p) => p,
            Err(error) => return Err(reject(wr, error)),
        };
        let ds = plan.ds;
        let nbb = ds.div_ceil(4);
        if nbb > self.wqe_cnt || !self.room(nbb) {
            let capacity = self.caps.max_send_wr;
            return Err(reject(wr, PostError::QueueFull { capacity }));
        }
        if !self.cq.try_reserve(1) {
            let cqe = self.cq.dv.cqe_cnt;
            return Err(reject(wr, PostError::CqFull { cqe }));
        }
        let fm = self.fm_for(wr.flags.0);
        self.write_wqe(&wr, &plan, fm);
        self.record(wr.wr_id, ds, nbb);
        Ok(())
    }

    #[inline]
    fn ring(&mut self) {
        if self.staged != 0 {
            self.ring_doorbell();
        }
    }

    fn free_slots(&self) -> u32 {
        let ci = self.shared.sq.ci.load(Ordering::Acquire);
        self.wqe_cnt - self.pi.wrapping_sub(ci)
    }

    fn staged(&self) -> u32 {
        self.staged
    }
}
