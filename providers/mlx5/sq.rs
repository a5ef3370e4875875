//! The send queue: WQE writing, accounting, doorbell and BlueFlame.
//!
//! ## Indices
//!
//! - `pi` (producer index, `u32`, free-running, in WQEBBs, written by the poster): the next
//!   WQE starts at WQEBB `pi & (wqe_cnt - 1)`; the ctrl segment carries `pi & 0xffff`.
//! - `ci` (in [`SqShared`], written by the poller): WQEBBs before it are retired and may be
//!   overwritten; the oldest outstanding WQE starts there. Free WQEBBs = `wqe_cnt - (pi - ci)`.
//! - `rung_pi` (poster): `pi` at the last doorbell; nothing is staged when equal.
//! - `limit` (poster): the posting budget, see below; `pi <= limit <= ci + wqe_cnt`.
//!
//! The poster records each WQE's wr_id and size (WQEBBs) in `SqShared::wqes[first WQEBB]`
//! (one 16-byte entry) before it rings; the poller reads both there, and counts the
//! unsignaled WQEs a completion covers by stepping through the recorded sizes from `ci`;
//! there is no per-WQE sequence number to maintain at post time.
//!
//! ## Posting budget (one check per post)
//!
//! `limit - pi` WQEBBs may be posted without looking at shared state. The budget folds four
//! checks into one compare: the QP is in RTS (outside RTS the budget is zero, so every post
//! reaches the slow path, which refuses it), the SQ has room (the budget never exceeds the
//! free WQEBBs seen at the last refill), at most `max_send_wr` requests are outstanding (the
//! budget never exceeds the requests still allowed at the last refill, less one; a request
//! uses at least one budget WQEBB), and the CQ cannot overrun: every budget WQEBB is
//! backed by one CQ entry reserved in `CqShared::reserved` at refill, in one atomic step for
//! up to `min(CQ_BUDGET_MAX, cqe_cnt / 8, free WQEBBs, requests still allowed)` entries. The
//! invariant, exact at every moment:
//!
//! `CQ entries this SQ holds in CqShared::reserved = outstanding WRs + (limit - pi) + cq_extra`
//!
//! where `cq_extra` counts entries held beyond the budget (a WQE of `n` WQEBBs uses `n` budget
//! WQEBBs but one CQ entry; the rest stays held). The poller gives an entry back per retired
//! WR, a reset or drop gives back the budget too. So `reserved <= cqe_cnt` still guarantees
//! that the CQEs of everything posted fit the CQ. Entries are taken only while fewer than
//! `max_send_wr` requests are outstanding and never beyond that count, so an SQ holds at
//! most `max_send_wr` entries; QP creation refuses a QP whose CQs cannot absorb the sum of
//! their queues' depths (`providers/cq_room.rs`), so a post never finds the CQ full.
//! [`Mlx5Sq::cq_budget`] reports the holding.
//!
//! The outstanding-request count the `max_send_wr` check needs is `posted - retired`, as
//! rdma-core's `sq.head - sq.tail`: the poller counts the requests it retires
//! (`SqDone::retired`); the poster derives the requests it posted from `pi` and the WQEBBs
//! its multi-WQEBB WQEs took beyond their first (`bb_extra`, which only the general path
//! adds to), so the fast path counts nothing.
//!
//! An error completion moves the QP to ERR behind the poster's back: the poller sets
//! `QpShared::failed` and closes the fast-path gate ([`SqGates`]), which the fast path
//! reads anyway; the general path checks `failed` and refuses with `BadState`.
//!
//! ## Fast path
//!
//! An inline WRITE or SEND (no UD destination) of at most 12 bytes fits one WQEBB (ctrl,
//! [raddr,] one inline segment), which never wraps. [`SendQueue::post`] writes it with 64-bit
//! stores from precomputed parts when `pi < SqGates::fast_end` (one load, one compare, besides
//! `len <= 12`). The gate is the budget's `limit`, published whenever `limit` changes, when
//! the QP allows the fast path at all (RC / UC, `max_inline_data >= 12`, no `signal_every`)
//! and `pi..limit` does not wrap past `u32::MAX`, else 0 (the wrap happens once per 2^32
//! WQEBBs; until the next refill those posts go the general way); the poller zeroes it when
//! the QP fails, and outside RTS the budget is empty. Always `fast_end <= limit`, so that
//! compare is the QP state, the room in the SQ, the CQ reservation, `max_send_wr` and the
//! inline cap at once.
//! The ctrl segment's first 8 bytes are a per-QP template by (opcode, ds) ORed with
//! `be32(wqe_idx << 8)`; the rest is fixed per QP (`ctrl_fm`) or comes from the request.
//! `pi << 3 & mask8` addresses both the WQE (times 8: 64-byte WQEBBs) and its entry in
//! `SqShared::wqes` (times 2: 16-byte entries).
//! Everything else, and the post that finds the budget empty (it refills, then writes the fast
//! way), takes the out-of-line path; [`Mlx5Sq::post_general`] checks and writes every request.
//! Both produce the same bytes and accounting (tests/mlx5_sq.rs holds them equal).
//!
//! ## Doorbell (rdma-core's order)
//!
//! `ring` compares the staged WQEBBs with `bf_bbs` once (0 with BlueFlame off): more staged
//! than a BlueFlame WQE spans is the 8-byte doorbell, written inline; 1..=`bf_bbs` staged
//! (BlueFlame on) goes to the out-of-line BlueFlame choice; nothing staged, nothing. WQEs
//! written; [`to_device_store_barrier`]; `dbrec[1] = be32(pi & 0xffff)` (also the
//! producer position the poller validates a CQE against); [`wc_start`]; then either the
//! 8-byte doorbell (the first 8 bytes of the last WQE's ctrl segment, kept from when it was
//! written) or a BlueFlame copy of the single staged WQE, to the current BlueFlame half;
//! [`wc_flush`]; the half toggles (`bf_size` apart).

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use super::owners::Owners;
use super::shared::{CqShared, QpShared, SqEntry, SqGates};
use super::{DoorbellMode, Mlx5Device};
use crate::barrier::{to_device_store_barrier, wc_flush, wc_start};
use crate::mmio;
use crate::wire::offset::{av, ctrl as ctrl_off, data as data_off, raddr as raddr_off};
use crate::wire::{
    MAX_DS, MLX5_AV_LEN, MLX5_EXTENDED_UD_AV, MLX5_INLINE_SEG, MLX5_OPCODE_ATOMIC_CS,
    MLX5_OPCODE_ATOMIC_FA, MLX5_OPCODE_RDMA_READ, MLX5_OPCODE_RDMA_WRITE,
    MLX5_OPCODE_RDMA_WRITE_IMM, MLX5_OPCODE_SEND, MLX5_OPCODE_SEND_IMM, MLX5_QPN_MASK,
    MLX5_SEND_WQE_BB, MLX5_SND_DBR, MLX5_WQE_CTRL_CQ_UPDATE, MLX5_WQE_CTRL_DS_MASK,
    MLX5_WQE_CTRL_FENCE, MLX5_WQE_CTRL_QPN_SHIFT, MLX5_WQE_CTRL_SOLICITED,
    MLX5_WQE_CTRL_WQE_INDEX_SHIFT, MLX5_WQE_DS_UNITS, MLX5_WQE_INDEX_MASK,
};
use crate::{
    Payload, PostError, QpCaps, QpState, QpType, Rejected, SendFlags, SendOp, SendQueue, SendWr,
};

/// `fm_ce_se` by `SendFlags` bits (SIGNALED 1, FENCE 2, SOLICITED 4).
const FM_CE_SE: [u8; 8] = {
    let mut t = [0u8; 8];
    let mut i = 0;
    while i < 8 {
        let mut v = 0;
        if i & 1 != 0 {
            v |= MLX5_WQE_CTRL_CQ_UPDATE;
        }
        if i & 2 != 0 {
            v |= MLX5_WQE_CTRL_FENCE;
        }
        if i & 4 != 0 {
            v |= MLX5_WQE_CTRL_SOLICITED;
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

/// Largest inline payload of the one-WQEBB fast path: header and data in one 16-byte segment.
const FAST_INLINE_MAX: u32 = 12;

/// Most CQ entries a send queue takes into its posting budget at once.
const CQ_BUDGET_MAX: u32 = 256;

/// The send queue of an [`super::Mlx5Qp`].
// `repr(C, align(64))`: the fields keep the order written, so every field a post or ring
// touches lies in the first two cache lines (checked below) and no cold field sits among them.
#[repr(C, align(64))]
pub struct Mlx5Sq<D: Owners = Mlx5Device> {
    // --- Hot: read or written by every post / ring. ---
    buf: *mut u8,
    /// `wqe_cnt - 1`.
    mask: u32,
    /// `mask << 3`: masks `pi << 3`, an offset that scaled by 8 is the WQE's in the ring and
    /// by 2 its entry's in `SqShared::wqes` (see `fast_inline`).
    mask8: u32,
    /// See the module doc.
    pi: u32,
    /// Posting budget as a limit on `pi` (see the module doc): `limit - pi` WQEBBs may be
    /// posted without looking at shared state. Equal to `pi` when the QP is not in RTS.
    limit: u32,
    /// `pi` at the last doorbell (nothing staged when equal).
    rung_pi: u32,
    /// WQEBBs beyond the first of every WQE written (free-running): `pi - bb_extra` requests
    /// were posted, `pi - bb_extra - SqDone::retired` are outstanding. Only the general path
    /// adds to it (the fast path writes one-WQEBB WQEs), so counting costs the fast path
    /// nothing.
    bb_extra: u32,
    /// `QpShared::gates` (`shared` keeps it alive): the fast path is open while
    /// `pi < fast_end` (see [`SqGates`]).
    gates: *const SqGates,
    /// The fast path's ctrl segment bytes 0..8 less the WQE index, by
    /// `[2 * is_write + has_data]`: `be32(opcode)` in the low half (opmod 0), `be32(qpn << 8
    /// | ds)` in the high half; the WQE ORs in `be32(wqe_idx << 8)`.
    ctrl_fast: [u64; 4],
    /// The ctrl segment's bytes 8..16 for `fm_ce_se` 0: `sq_sig_all`'s CQ_UPDATE at byte 11.
    ctrl_fm: u64,
    /// First 8 bytes of the last WQE's ctrl segment: the 8-byte doorbell.
    last_ctrl: u64,
    /// The `wqes` array of [`SqShared`], by first WQEBB (`shared` keeps it alive).
    wqes: *const SqEntry,
    /// `dbrec[1]`, the send counter.
    dbrec_sq: *mut u32,
    /// The BlueFlame half the next doorbell goes to, and the XOR that flips to the other.
    bf_cur: *mut u8,
    bf_flip: usize,
    /// Staged WQEBBs up to this many go through [`Self::ring_bf`], which may use BlueFlame
    /// for a single WQE (0: BlueFlame off; else the WQEBBs of the largest BlueFlame WQE).
    bf_bbs: u32,
    // --- Cold: slow path, control path. ---
    wqe_cnt: u32,
    /// Ring size in bytes minus one (for wrapping byte offsets).
    byte_mask: usize,
    qpn: u32,
    qp_type: QpType,
    state: QpState,
    caps: QpCaps,
    /// CQ_UPDATE when the QP signals every request, else 0.
    sig_all_fm: u8,
    signal_every: u32,
    since_signal: u32,
    path_mtu: u32,
    /// BlueFlame is used for a single staged WQE with `bf_min_ds <= ds <= bf_max_ds`
    /// (derived from the [`DoorbellMode`] and `bf_size`; `bf_max_ds == 0`: never).
    bf_min_ds: u32,
    bf_max_ds: u32,
    /// The QP allows the fast path (RC / UC, `max_inline_data >= FAST_INLINE_MAX`, no
    /// `signal_every`): `SqGates::fast_end` follows `limit`, else it stays 0.
    fast_ok: bool,
    /// CQ entries held beyond `limit - pi` (see the module doc).
    cq_extra: u32,
    /// The CQ entries one budget refill asks for.
    cq_batch: u32,
    /// Start of the BlueFlame register (first half).
    bf_reg: *mut u8,
    bf_size: u32,
    /// Doorbell sink when the device gave no BlueFlame register (never read).
    _sink: Option<Box<[u64; 8]>>,
    shared: Arc<QpShared>,
    cq: Arc<CqShared>,
    /// UD requests name `D::Ah` address handles.
    _ah: PhantomData<fn(&D::Ah)>,
}

// The hot fields end within the first 128 bytes.
const _: () = assert!(core::mem::offset_of!(Mlx5Sq, bf_bbs) < 128);
const _: () = assert!(MLX5_OPCODE_RDMA_WRITE_IMM == MLX5_OPCODE_RDMA_WRITE | 1);

// SAFETY: the raw pointers point into this QP's rings, dbrec and bfreg, which the QP's owner
// keeps alive, or into `shared` / `_sink`, which this queue owns; only this queue (one
// producer, `&mut self`) writes through them.
unsafe impl<D: Owners> Send for Mlx5Sq<D> {}

impl<D: Owners> std::fmt::Debug for Mlx5Sq<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mlx5Sq")
            .field("qpn", &self.qpn)
            .field("wqe_cnt", &self.wqe_cnt)
            .field("pi", &self.pi)
            .field("rung_pi", &self.rung_pi)
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
        self.off = (self.off + MLX5_WQE_DS_UNITS) & self.byte_mask;
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

impl<D: Owners> Mlx5Sq<D> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        dv: &super::dv::DvQp,
        qp_type: QpType,
        caps: QpCaps,
        sig_all: bool,
        shared: Arc<QpShared>,
        cq: Arc<CqShared>,
    ) -> Mlx5Sq<D> {
        let mut sink = None;
        let bf_reg = if dv.bf_reg.is_null() {
            // No register: the doorbell stores go to a private sink (the sim and plain memory
            // always give one; hardware always does).
            let s: &mut Box<[u64; 8]> = sink.insert(Box::new([0u64; 8]));
            s.as_mut_ptr() as *mut u8
        } else {
            dv.bf_reg
        };
        let bf_size = if dv.bf_reg.is_null() { 0 } else { dv.bf_size };
        let qpn = dv.qpn & MLX5_QPN_MASK;
        let mut ctrl_fast = [0u64; 4];
        for (i, w) in ctrl_fast.iter_mut().enumerate() {
            let (is_write, has_data) = (i as u32 >> 1, i as u32 & 1);
            let ds = 1 + is_write + has_data;
            let opcode = if is_write != 0 {
                MLX5_OPCODE_RDMA_WRITE
            } else {
                MLX5_OPCODE_SEND
            };
            *w = (u64::from((qpn << MLX5_WQE_CTRL_QPN_SHIFT | ds).to_be()) << 32)
                | u64::from(u32::from(opcode).to_be());
        }
        let mut sq = Mlx5Sq {
            buf: dv.sq_buf,
            mask: dv.sq_wqe_cnt - 1,
            mask8: (dv.sq_wqe_cnt - 1) << 3,
            pi: 0,
            limit: 0,
            rung_pi: 0,
            bb_extra: 0,
            ctrl_fast,
            ctrl_fm: 0,
            last_ctrl: 0,
            wqes: shared.sq.wqes.as_ptr(),
            gates: &shared.gates,
            dbrec_sq: dv.dbrec.wrapping_add(MLX5_SND_DBR),
            bf_cur: bf_reg,
            bf_flip: (bf_reg as usize) ^ (bf_reg as usize + bf_size as usize),
            bf_bbs: 0,
            wqe_cnt: dv.sq_wqe_cnt,
            byte_mask: dv.sq_wqe_cnt as usize * MLX5_SEND_WQE_BB - 1,
            qpn,
            qp_type,
            state: QpState::Reset,
            caps,
            sig_all_fm: if sig_all { MLX5_WQE_CTRL_CQ_UPDATE } else { 0 },
            signal_every: 0,
            since_signal: 0,
            path_mtu: 4096,
            bf_min_ds: 0,
            bf_max_ds: 0,
            fast_ok: false,
            cq_extra: 0,
            cq_batch: (cq.dv.cqe_cnt / 8).clamp(1, CQ_BUDGET_MAX),
            bf_reg,
            bf_size,
            _sink: sink,
            shared,
            cq,
            _ah: PhantomData,
        };
        sq.ctrl_fm = u64::from(sq.sig_all_fm) << 24;
        sq.set_mode(DoorbellMode::Auto);
        sq.update_fast_limits();
        sq
    }

    /// Whether the QP allows the fast path (QP type, inline cap, `signal_every`), then the
    /// gate.
    fn update_fast_limits(&mut self) {
        self.fast_ok = self.signal_every == 0
            && self.qp_type != QpType::Ud
            && self.caps.max_inline_data >= FAST_INLINE_MAX;
        self.publish_limit();
    }

    /// The fast-path gate after `limit` or `fast_ok` changed (see [`SqGates`]): `limit`
    /// when the fast path is allowed and `pi..limit` does not wrap, else closed.
    #[inline(never)]
    fn publish_limit(&mut self) {
        let end = if self.fast_ok && self.limit >= self.pi {
            self.limit
        } else {
            0
        };
        let g = &self.shared.gates;
        g.fast_end.store(end, Ordering::SeqCst);
        // The poller may have failed the QP meanwhile (see `SqGates`).
        if self.shared.failed.load(Ordering::SeqCst) {
            g.close();
        }
    }

    /// The QP's state changed (control path). Outside RTS the posting budget is zero, so every
    /// post takes the slow path, which refuses it; the CQ entries held stay held.
    pub(crate) fn set_state(&mut self, s: QpState) {
        self.state = s;
        if s != QpState::Rts {
            self.cq_extra += self.limit.wrapping_sub(self.pi);
            self.limit = self.pi;
            self.publish_limit();
        }
    }

    /// Path MTU in bytes (UD sends larger than it are refused).
    pub(crate) fn set_path_mtu(&mut self, bytes: u32) {
        self.path_mtu = bytes;
    }

    /// Force CQ_UPDATE at least every `n` WQEs (0 = off).
    pub(crate) fn set_signal_every(&mut self, n: u32) {
        self.signal_every = n;
        self.since_signal = 0;
        self.update_fast_limits();
    }

    /// Hand back the CQ entries of the posting budget (the caller releases them in the CQ).
    pub(crate) fn take_cq_budget(&mut self) -> u32 {
        let held = self.limit.wrapping_sub(self.pi) + self.cq_extra;
        self.limit = self.pi;
        self.cq_extra = 0;
        self.publish_limit();
        held
    }

    /// CQ entries this queue holds as its posting budget: reserved in the CQ, not yet used by
    /// a post (see the module doc). [`super::Mlx5Cq::reserved`] counts them.
    pub fn cq_budget(&self) -> u32 {
        self.limit.wrapping_sub(self.pi) + self.cq_extra
    }

    /// Back to the RESET state: indices zero (the device expects it), nothing staged. The
    /// budget must have been handed back ([`Self::take_cq_budget`]).
    pub(crate) fn reset(&mut self) {
        debug_assert_eq!(self.cq_budget(), 0);
        self.pi = 0;
        self.limit = 0;
        self.cq_extra = 0;
        self.rung_pi = 0;
        self.bb_extra = 0;
        self.since_signal = 0;
        self.bf_cur = self.bf_reg;
        let sq = &self.shared.sq;
        sq.done.ci.store(0, Ordering::Relaxed);
        sq.done.retired.store(0, Ordering::Relaxed);
        // Reopen the fast-path gates a failure closed (the caller cleared `failed`).
        self.update_fast_limits();
    }

    /// The flags of the next WQE: the request's own, sq_sig_all, and the `signal_every` rule.
    #[inline(always)]
    fn fm_for(&mut self, flags: u8) -> u8 {
        let mut fm = FM_CE_SE[(flags & 7) as usize] | self.sig_all_fm;
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

    /// Take `nbb` WQEBBs and one CQ entry from the posting budget. Fails (taking nothing)
    /// when the QP is not in RTS, the SQ is full or the CQ could overrun.
    #[inline(always)]
    fn take(&mut self, nbb: u32) -> Result<(), PostError> {
        if self.limit.wrapping_sub(self.pi) >= nbb {
            // `nbb` WQEBBs of the budget go, with their CQ entries; the WQE uses one of
            // those, the other `nbb - 1` stay held.
            self.cq_extra += nbb - 1;
            return Ok(());
        }
        self.refill(nbb)
    }

    /// The slow path of [`Self::take`]: refresh the consumer index, take more CQ entries.
    #[cold]
    #[inline(never)]
    fn refill(&mut self, nbb: u32) -> Result<(), PostError> {
        let state = self.state();
        if state != QpState::Rts {
            return Err(PostError::BadState { state });
        }
        let ci = self.shared.sq.done.ci.load(Ordering::Acquire);
        let room = self.wqe_cnt - self.pi.wrapping_sub(ci);
        let wrs = self
            .posted()
            .wrapping_sub(self.shared.sq.done.retired.load(Ordering::Acquire));
        if nbb > room || wrs >= self.caps.max_send_wr {
            return Err(PostError::QueueFull {
                capacity: self.caps.max_send_wr,
            });
        }
        let mut held = self.limit.wrapping_sub(self.pi) + self.cq_extra;
        if held == 0 {
            // Never more than the requests still allowed: an SQ then holds at most
            // `max_send_wr` entries, which QP creation made sure its CQ can absorb.
            held = self
                .cq
                .grab(room.min(self.cq_batch).min(self.caps.max_send_wr - wrs));
            if held == 0 {
                return Err(PostError::CqFull {
                    cqe: self.cq.dv.cqe_cnt,
                });
            }
        }
        // This WQE's entry; the rest is budget, as far as the SQ has room for it and the
        // requests it can carry (at least one WQEBB each) stay within max_send_wr.
        held -= 1;
        let budget = held.min(room - nbb).min(self.caps.max_send_wr - wrs - 1);
        self.limit = self.pi.wrapping_add(nbb).wrapping_add(budget);
        self.cq_extra = held - budget;
        self.publish_limit();
        Ok(())
    }

    /// The QP's state as this queue sees it: the one the control path last set, or ERR once
    /// the poller returned an error completion for the QP.
    #[inline(always)]
    pub(crate) fn state(&self) -> QpState {
        if self.failed() {
            QpState::Err
        } else {
            self.state
        }
    }

    /// Requests posted (free-running; see `bb_extra`).
    #[inline(always)]
    fn posted(&self) -> u32 {
        self.pi.wrapping_sub(self.bb_extra)
    }

    /// The fast path may take an inline payload of `len` bytes now: the gate is open for
    /// `pi` (budget, QP type and state, inline cap; see [`SqGates`]) and the payload fits one
    /// inline segment.
    #[inline(always)]
    fn fast_open(&self, len: usize) -> bool {
        // SAFETY: `gates` points into `shared`, which this queue holds.
        let end = unsafe { (*self.gates).fast_end.load(Ordering::Relaxed) };
        self.pi < end && len <= FAST_INLINE_MAX as usize
    }

    /// True once the poller returned an error completion for this QP (see the module doc).
    #[inline(always)]
    fn failed(&self) -> bool {
        self.shared.failed.load(Ordering::Relaxed)
    }

    /// Record the WQE just written at `pi` (`nbb` WQEBBs; `ctrl` its first 8 bytes) for the
    /// poller and the doorbell, and advance the producer state.
    #[inline(always)]
    fn record(&mut self, wr_id: u64, ctrl: u64, nbb: u32) {
        let i = (self.pi & self.mask) as usize;
        // SAFETY: `wqes` points to `wqe_cnt` entries kept alive by `shared`; `i` is masked
        // with `wqe_cnt - 1`.
        let e = unsafe { &*self.wqes.add(i) };
        e.wr_id.store(wr_id, Ordering::Relaxed);
        e.nbb.store(nbb, Ordering::Relaxed);
        self.last_ctrl = ctrl;
        self.pi = self.pi.wrapping_add(nbb);
    }

    /// The first 8 bytes of a ctrl segment at `pi`: opmod 0, `wqe_idx`, opcode, qpn, ds.
    #[inline(always)]
    fn ctrl0(&self, opcode: u8, ds: u32) -> u64 {
        let hi = u64::from((self.qpn << MLX5_WQE_CTRL_QPN_SHIFT | ds).to_be()) << 32;
        let idx = self.pi & MLX5_WQE_INDEX_MASK;
        u64::from((idx << MLX5_WQE_CTRL_WQE_INDEX_SHIFT | u32::from(opcode)).to_be()) | hi
    }

    /// The gate was shut for a fast-path request of `len` bytes: when only the budget ran
    /// out, refill it for this request (one WQEBB) and say so; the caller then writes it on
    /// the fast path. Otherwise (or when the refill is refused) false: the general path
    /// takes the request and finds the same refusal, if any.
    #[cold]
    #[inline(never)]
    fn fast_refill(&mut self, len: usize) -> bool {
        self.fast_ok
            && len <= FAST_INLINE_MAX as usize
            && self.pi == self.limit
            && self.refill(1).is_ok()
    }

    /// The one-WQEBB fast path: an inline WRITE (`remote` given) or SEND of at most
    /// [`FAST_INLINE_MAX`] bytes, the caller having checked [`Self::fast_open`]. Same bytes
    /// as [`Self::write_wqe`]; no wrap (one WQEBB never wraps). (Or after
    /// [`Self::fast_refill`], when the gate stays shut only because `pi..limit` wraps.)
    #[inline(always)]
    fn fast_inline(
        &mut self,
        wr_id: u64,
        remote: Option<(u64, u32)>,
        imm: Option<u32>,
        data: &[u8],
        flags: u8,
    ) {
        let len = data.len();
        let has_data = len != 0;
        let pi = self.pi;
        // WRITE WITH IMMEDIATE: the WRITE template with the opcode's low bit set (opcode
        // byte 3 of the little-endian word).
        let imm_op = if imm.is_some() { 1u64 << 24 } else { 0 };
        let ctrl = self.ctrl_fast[remote.is_some() as usize * 2 + has_data as usize]
            | imm_op
            | u64::from(((pi & MLX5_WQE_INDEX_MASK) << MLX5_WQE_CTRL_WQE_INDEX_SHIFT).to_be());
        let fm = u64::from(FM_CE_SE[(flags & 7) as usize]) << 24;
        // The slot times 8: twice that is its entry's offset in `wqes` (16 bytes an entry), 8
        // times that the WQE's in the ring (64 bytes a WQEBB). One shift serves both
        // addresses (x86 scales an index by 2 or 8 for free).
        let slot8 = (pi << 3 & self.mask8) as usize;
        // SAFETY: the WQE is one WQEBB at `pi & mask` inside the SQ ring (64-aligned, the ring
        // is a multiple of 64), and it is free: the gate (`fast_open`) covered it.
        unsafe {
            let w = self.buf.add(slot8 * (MLX5_SEND_WQE_BB / 8));
            core::ptr::write(w as *mut u64, ctrl);
            // signature, dci stream channel id, fm_ce_se, imm (big-endian; 0 without one):
            // one 64-bit store.
            let imm = match imm {
                Some(v) => u64::from(v.to_be()) << 32,
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
                    seg as *mut u64,
                    u64::from((len as u32 | MLX5_INLINE_SEG).to_be()),
                );
                core::ptr::write(seg.add(8) as *mut u64, 0);
                copy_small(seg.add(4), data);
            }
            // SAFETY: `wqes` points to `wqe_cnt` entries kept alive by `shared`; `slot8 / 8`
            // is masked with `wqe_cnt - 1`.
            let e = &*((self.wqes as *const u8).add(slot8 * 2) as *const SqEntry);
            e.wr_id.store(wr_id, Ordering::Relaxed);
            e.nbb.store(1, Ordering::Relaxed);
        }
        self.last_ctrl = ctrl;
        self.pi = pi.wrapping_add(1);
    }

    /// The latency fast path (like rdma-core's `ibv_wr_rdma_write` + `ibv_wr_set_inline_data`):
    /// stage one RDMA WRITE of `data` inline to `raddr`/`rkey`, signaled or not. Same checks
    /// and accounting as [`SendQueue::post`] (it is what `post` does for such a request), the
    /// WQE bytes are identical.
    #[inline(always)]
    pub fn post_write_inline(
        &mut self,
        wr_id: u64,
        raddr: u64,
        rkey: u32,
        data: &[u8],
        signaled: bool,
    ) -> Result<(), PostError> {
        if self.fast_open(data.len()) || self.fast_refill(data.len()) {
            self.fast_inline(wr_id, Some((raddr, rkey)), None, data, signaled as u8);
            return Ok(());
        }
        let mut wr = SendWr::new(wr_id, SendOp::Write { raddr, rkey }, &[]).inline(data);
        if signaled {
            wr = wr.signaled();
        }
        self.post_general(&wr)
    }

    /// Choose doorbell or BlueFlame.
    pub(crate) fn set_mode(&mut self, m: DoorbellMode) {
        let max = self.bf_size / MLX5_WQE_DS_UNITS as u32;
        (self.bf_min_ds, self.bf_max_ds) = match m {
            DoorbellMode::Doorbell => (1, 0),
            DoorbellMode::BlueFlame => (1, max),
            DoorbellMode::Auto => (2, max),
        };
        self.bf_bbs = self.bf_max_ds.div_ceil(4);
    }

    /// WRs posted and not yet retired.
    pub(crate) fn outstanding(&self) -> u32 {
        let retired = self.shared.sq.done.retired.load(Ordering::Acquire);
        self.posted().wrapping_sub(retired)
    }

    /// The producer index (WQEBBs, free-running).
    pub fn pi(&self) -> u32 {
        self.pi
    }

    /// Validate `wr` and decode it into what the WQE needs. Writes nothing. (The QP state is
    /// checked by the budget, [`Self::take`].)
    #[inline(always)]
    fn check(&self, wr: &SendWr<'_, D::Ah>) -> Result<Plan, PostError> {
        // One pass over the op: opcode, immediate, remote segment, atomic operands.
        let mut p = match wr.op {
            SendOp::Send => Plan::new(MLX5_OPCODE_SEND, 0),
            SendOp::SendImm { imm } => Plan::new(MLX5_OPCODE_SEND_IMM, imm),
            SendOp::Write { raddr, rkey } => {
                Plan::new(MLX5_OPCODE_RDMA_WRITE, 0).remote(raddr, rkey)
            }
            SendOp::WriteImm { raddr, rkey, imm } => {
                Plan::new(MLX5_OPCODE_RDMA_WRITE_IMM, imm).remote(raddr, rkey)
            }
            SendOp::Read { raddr, rkey } => Plan::new(MLX5_OPCODE_RDMA_READ, 0).remote(raddr, rkey),
            SendOp::CompareSwap {
                raddr,
                rkey,
                compare,
                swap,
            } => Plan::new(MLX5_OPCODE_ATOMIC_CS, 0)
                .remote(raddr, rkey)
                .atomic(swap, compare),
            SendOp::FetchAdd { raddr, rkey, add } => Plan::new(MLX5_OPCODE_ATOMIC_FA, 0)
                .remote(raddr, rkey)
                .atomic(add, 0),
        };
        if self.qp_type != QpType::Rc || wr.ud.is_some() {
            p.ds += self.check_transport(wr)?;
        }
        if p.opcode >= MLX5_OPCODE_RDMA_READ {
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
                max: self
                    .caps
                    .max_inline_data
                    .min((MAX_DS * MLX5_WQE_DS_UNITS - 4) as u32),
            });
        }
        Ok(p)
    }

    /// UC / UD rules, and a destination given to a connected QP. Returns the extra segments
    /// (UD: the 48-byte address vector).
    #[inline(never)]
    fn check_transport(&self, wr: &SendWr<'_, D::Ah>) -> Result<u32, PostError> {
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
    fn check_read_like(&self, wr: &SendWr<'_, D::Ah>, mut p: Plan) -> Result<Plan, PostError> {
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

    /// Write the WQE of `wr` (already checked and decoded into `p`) at `pi`; returns the
    /// first 8 bytes of its ctrl segment.
    #[inline(always)]
    fn write_wqe(&mut self, wr: &SendWr<'_, D::Ah>, p: &Plan, fm: u8) -> u64 {
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
        let ctrl0 = self.ctrl0(p.opcode, p.ds);
        // SAFETY: as just said, for the ctrl segment (64-aligned: a WQE starts a WQEBB).
        unsafe {
            core::ptr::write(ctrl as *mut u64, ctrl0);
            // signature, dci stream channel id (2 bytes), fm_ce_se
            put32(ctrl.add(ctrl_off::SIGNATURE), fm as u32);
            put32(ctrl.add(ctrl_off::IMM), p.imm);
        }
        if let Some(ud) = wr.ud {
            const U: usize = MLX5_WQE_DS_UNITS;
            const _: () = assert!(MLX5_AV_LEN == 3 * U);
            let av0 = c.seg();
            let av1 = c.seg();
            let av2 = c.seg();
            // SAFETY: see above; the 48-byte address vector spans three segments, each
            // written separately because the ring may wrap between them.
            unsafe {
                let av = D::av(ud.ah);
                core::ptr::copy_nonoverlapping(av.as_ptr(), av0, U);
                core::ptr::copy_nonoverlapping(av.as_ptr().add(U), av1, U);
                core::ptr::copy_nonoverlapping(av.as_ptr().add(2 * U), av2, U);
                put32(av0.add(av::KEY), ud.remote_qkey);
                put32(av0.add(av::DQP_DCT), ud.remote_qpn | MLX5_EXTENDED_UD_AV);
            }
        }
        if p.has_remote {
            let r = c.seg();
            // SAFETY: see above.
            unsafe {
                put64(r.add(raddr_off::RADDR), p.raddr);
                put32(r.add(raddr_off::RKEY), p.rkey);
                put32(r.add(raddr_off::RKEY + 4), 0);
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
    fn write_inline(&self, c: Cursor, data: &[u8]) {
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
                core::ptr::write_unaligned(p.add(total - 8) as *mut u64, 0);
                put32(p, len as u32 | MLX5_INLINE_SEG);
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
        unsafe { put32(self.buf.add(start), data.len() as u32 | MLX5_INLINE_SEG) };
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

    /// Publish the `staged_bbs` (> 0) staged WQEBBs: dbrec, then the 8-byte doorbell, or,
    /// when `maybe_bf`, [`Self::ring_bf`].
    #[inline(always)]
    fn ring_doorbell(&mut self, staged_bbs: u32, maybe_bf: bool) {
        self.rung_pi = self.pi;
        // Orders the WQE stores before the dbrec store the device may act on.
        to_device_store_barrier();
        // SAFETY: `dbrec_sq` is the QP's 4-aligned send doorbell record (`dbrec[1]`), host
        // memory; the poller reads it atomically too (the published producer position).
        unsafe {
            (*(self.dbrec_sq as *const AtomicU32))
                .store((self.pi & MLX5_WQE_INDEX_MASK).to_be(), Ordering::Release)
        };
        if maybe_bf {
            self.ring_bf(staged_bbs);
            return;
        }
        // Orders the dbrec store before the write-combining store to the bfreg.
        wc_start();
        // SAFETY: `bf_cur` is this QP's 8-aligned doorbell register half (or the sink).
        unsafe { mmio::write64(self.bf_cur as *mut u64, self.last_ctrl) };
        // Pushes the WC store out before anything later.
        wc_flush();
        self.bf_cur = (self.bf_cur as usize ^ self.bf_flip) as *mut u8;
    }

    /// The doorbell when BlueFlame may be used: a BlueFlame copy of a single staged WQE whose
    /// `ds` fits the mode, else the 8-byte doorbell.
    #[inline(never)]
    fn ring_bf(&mut self, staged_bbs: u32) {
        // The last WQE's index and ds, from its ctrl segment's first 8 bytes; it is the only
        // one staged when it covers every staged WQEBB.
        let ctrl = self.last_ctrl;
        let idx = u32::from_be(ctrl as u32) >> MLX5_WQE_CTRL_WQE_INDEX_SHIFT & MLX5_WQE_INDEX_MASK;
        let ds = u32::from_be((ctrl >> 32) as u32) & MLX5_WQE_CTRL_DS_MASK;
        let single = ds.div_ceil(4).max(1) == staged_bbs;
        let use_bf = single && ds <= self.bf_max_ds && ds >= self.bf_min_ds;
        let dst = self.bf_cur as *mut u64;
        // Orders the dbrec store before the write-combining stores to the bfreg.
        wc_start();
        if use_bf {
            let chunks = (ds as usize * MLX5_WQE_DS_UNITS).div_ceil(MLX5_SEND_WQE_BB);
            // SAFETY: `dst` is this QP's BlueFlame half (`bf_size` bytes, 8-aligned) and
            // `chunks * 64 <= bf_size` (`bf_max_ds = bf_size / 16`); the source is the staged
            // WQE in our ring, starting at a WQEBB.
            unsafe {
                mmio::bf_copy(
                    dst,
                    self.buf,
                    self.byte_mask + 1,
                    (idx & self.mask) as usize * MLX5_SEND_WQE_BB,
                    chunks,
                )
            };
        } else {
            // SAFETY: `dst` is the 8-aligned doorbell register half.
            unsafe { mmio::write64(dst, ctrl) };
        }
        // Pushes the WC stores out before anything later.
        wc_flush();
        self.bf_cur = (self.bf_cur as usize ^ self.bf_flip) as *mut u8;
    }

    /// The general path: any request, every check, never the one-WQEBB inline fast path
    /// [`SendQueue::post`] takes for small inline WRITEs and SENDs. Same bytes, same
    /// accounting, same refusals as `post` (a test holds them equal); `post` is faster.
    #[inline(always)]
    pub fn post_general(&mut self, wr: &SendWr<'_, D::Ah>) -> Result<(), PostError> {
        if self.failed() {
            return Err(self.shared.failed_error());
        }
        let plan = match self.check(wr) {
            Ok(p) => p,
            Err(e) => return Err(self.refusal(e)),
        };
        let nbb = plan.ds.div_ceil(4);
        if nbb > self.wqe_cnt {
            return Err(self.refusal(PostError::QueueFull {
                capacity: self.caps.max_send_wr,
            }));
        }
        self.take(nbb)?;
        self.bb_extra = self.bb_extra.wrapping_add(nbb - 1);
        let fm = self.fm_for(wr.flags.0);
        let ctrl = self.write_wqe(wr, &plan, fm);
        self.record(wr.wr_id, ctrl, nbb);
        Ok(())
    }

    /// A refusal found by validation: the state error wins (a post outside RTS is refused
    /// as such whatever the request).
    #[cold]
    #[inline(never)]
    fn refusal(&self, e: PostError) -> PostError {
        match self.state() {
            QpState::Rts => e,
            state => PostError::BadState { state },
        }
    }
}

impl<D: Owners> Mlx5Sq<D> {
    /// Every request the fast path does not take (out of line, so the request is only
    /// materialised in memory here, not on the fast path).
    #[cold]
    #[inline(never)]
    fn post_slow<'a>(&mut self, wr: SendWr<'a, D::Ah>) -> Result<(), Rejected<SendWr<'a, D::Ah>>> {
        // A fast-path request that found only the budget empty: refilled, it is written the
        // fast way here.
        if let (Payload::Inline(data), None) = (wr.payload, wr.ud) {
            let fast = match wr.op {
                SendOp::Write { raddr, rkey } => Some((Some((raddr, rkey)), None)),
                SendOp::WriteImm { raddr, rkey, imm } => Some((Some((raddr, rkey)), Some(imm))),
                SendOp::Send => Some((None, None)),
                _ => None,
            };
            if let Some((remote, imm)) = fast {
                if self.fast_refill(data.len()) {
                    self.fast_inline(wr.wr_id, remote, imm, data, wr.flags.0);
                    return Ok(());
                }
            }
        }
        match self.post_general(&wr) {
            Ok(()) => Ok(()),
            Err(error) => Err(reject(wr, error)),
        }
    }
}

/// The refusal path, out of line so the accepting path stays short.
#[cold]
#[inline(never)]
fn reject<A>(wr: SendWr<'_, A>, error: PostError) -> Rejected<SendWr<'_, A>> {
    Rejected { wr, error }
}

impl<D: Owners> SendQueue for Mlx5Sq<D> {
    type Ah = D::Ah;
    fn set_signal_every(&mut self, n: u32) {
        Mlx5Sq::set_signal_every(self, n);
    }
    #[inline(always)]
    fn post<'a>(&mut self, wr: SendWr<'a, D::Ah>) -> Result<(), Rejected<SendWr<'a, D::Ah>>> {
        // Small inline WRITEs and SENDs (one WQEBB) take the fast path while its gate is open:
        // same checks (folded into the gate, see `SqGates`), same bytes. Anything else, and
        // the post that finds the budget empty, goes the general way (which refills it).
        if let (Payload::Inline(data), None) = (wr.payload, wr.ud) {
            let fast_op = matches!(wr.op, SendOp::Write { .. } | SendOp::Send);
            if fast_op && self.fast_open(data.len()) {
                let remote = match wr.op {
                    SendOp::Write { raddr, rkey } => Some((raddr, rkey)),
                    _ => None,
                };
                self.fast_inline(wr.wr_id, remote, None, data, wr.flags.0);
                return Ok(());
            }
            // WRITE WITH IMMEDIATE apart: the two above keep their code.
            if let SendOp::WriteImm { raddr, rkey, imm } = wr.op {
                if self.fast_open(data.len()) {
                    self.fast_inline(wr.wr_id, Some((raddr, rkey)), Some(imm), data, wr.flags.0);
                    return Ok(());
                }
            }
        }
        // `black_box` (an identity) makes the request's copy in memory happen here, on this
        // path only: otherwise LLVM builds the caller's request in memory before the fast-path
        // checks, eight stores per post that the fast path never reads.
        self.post_slow(core::hint::black_box(wr))
    }

    #[inline(always)]
    fn ring(&mut self) {
        // One compare for the common case: more WQEBBs staged than a BlueFlame WQE has (with
        // BlueFlame off, `bf_bbs` is 0: anything staged) is the 8-byte doorbell.
        let staged = self.pi.wrapping_sub(self.rung_pi);
        if staged > self.bf_bbs {
            self.ring_doorbell(staged, false);
        } else if staged != 0 {
            self.ring_doorbell(staged, true);
        }
    }

    fn free_slots(&self) -> u32 {
        let ci = self.shared.sq.done.ci.load(Ordering::Acquire);
        let bbs = self.wqe_cnt - self.pi.wrapping_sub(ci);
        let wrs = self
            .posted()
            .wrapping_sub(self.shared.sq.done.retired.load(Ordering::Acquire));
        bbs.min(self.caps.max_send_wr.saturating_sub(wrs))
    }

    fn staged(&self) -> u32 {
        self.shared.wqes_between(self.rung_pi, self.pi).unwrap_or(0)
    }
}
