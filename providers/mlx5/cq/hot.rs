//! The fast path of the CQ (see "The fast path" in `cq.rs`): successful CQEs without
//! scattered data of the QP the last CQE named, each completing that QP's oldest outstanding
//! send WQE or a later one (the unsignaled ones before it covered, counted in O(1)) or the
//! RQ's oldest receive, with the queues' positions in
//! registers. Every other CQE is left to `process`.

use super::send_run::{Req, SendWalk};
use super::{cqe, late, Mlx5Cq};
use crate::barrier::from_device_load_barrier;
use crate::mlx5::owners::Owners;
use crate::mlx5::shared::{QpShared, RqShared, SqDone, SqEntry};
use crate::wire::{
    cqe_parity, cqe_sw_owned_x, MLX5_CQE_FLAGS_GRH, MLX5_CQE_OPCODE_SHIFT, MLX5_CQE_RESP_SEND,
    MLX5_OPCODE_ATOMIC_CS, MLX5_OPCODE_ATOMIC_FA, MLX5_OPCODE_RDMA_READ, MLX5_QPN_MASK,
    MLX5_SND_DBR, MLX5_WQE_INDEX_MASK,
};
use crate::{Completion, WcFlags, WcOpcode, WcStatus};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// [`req_opcode`](super::req) of every WQE opcode byte.
pub(super) const REQ_OPCODE: [WcOpcode; 256] = {
    let mut t = [WcOpcode::Send; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = super::req::req_opcode(i as u8);
        i += 1;
    }
    t
};

/// `byte_len` of a successful requester completion by send WQE opcode (READ: the CQE's
/// byte count instead).
pub(super) const REQ_LEN: [u32; 256] = {
    let mut t = [0u32; 256];
    t[MLX5_OPCODE_ATOMIC_CS as usize] = 8;
    t[MLX5_OPCODE_ATOMIC_FA as usize] = 8;
    t
};

/// Bytes of a [`Completion`]: the short runs step a CQE and its completion with one index.
pub(super) const COMPLETION: usize = core::mem::size_of::<Completion>();

/// The CQE stride over the completion stride, as a shift: 64-byte CQEs (`big` false) are one
/// completion apart, 128-byte ones two.
pub(super) const fn cqe_scale(big: bool) -> usize {
    if big {
        1
    } else {
        0
    }
}

/// The lowest send WQE opcode whose successful completion has a byte length (RDMA READ;
/// the atomics follow it): below it `byte_len` is 0.
pub(super) const REQ_OP_WITH_LEN: u32 = MLX5_OPCODE_RDMA_READ as u32;

/// Bytes 1..3 of the little-endian u32 of CQE bytes 56..59: the qpn.
pub(super) const QPN_MATCH_MASK: u32 = 0xffff_ff00;
/// `op_own` bits a short-way CQE is checked on: opcode, scatter bits, owner (not SE).
pub(super) const PLAIN_MASK: u8 = crate::wire::CQE_PLAIN_OWNED_MASK;
/// `op_own` of a plain incoming SEND with owner bit 0 (the receive fast path).
pub(super) const RESP_PLAIN: u8 = MLX5_CQE_RESP_SEND << MLX5_CQE_OPCODE_SHIFT;

/// `byte_len` and `qp_num` of a [`Completion`] as the one 8-byte word they share in memory
/// (adjacent fields, the pair 8-aligned), for one store of the two.
#[inline(always)]
pub(crate) const fn len_qpn(byte_len: u32, qpn: u32) -> u64 {
    if cfg!(target_endian = "little") {
        (qpn as u64) << 32 | byte_len as u64
    } else {
        (byte_len as u64) << 32 | qpn as u64
    }
}
static_assertions::const_assert_eq!(
    core::mem::offset_of!(Completion, qp_num),
    core::mem::offset_of!(Completion, byte_len) + 4
);
static_assertions::const_assert_eq!(core::mem::offset_of!(Completion, byte_len) % 8, 0);

/// CQE bytes 56..59 XOR `tag` (the qpn as bits 8..31 of the little-endian u32 of bytes
/// 56..59), and the `wqe_counter`, of a successful requester CQE: for the QP of `tag` the
/// qpn bytes XOR to zero, leaving the send WQE opcode (at most 0xff); another QP's CQE gives
/// more.
///
/// # Safety
/// `cqe` is a CQE of this CQ (64-byte aligned, inside the ring), seen software-owned, and
/// the load barrier after its owner byte has run.
#[inline(always)]
unsafe fn req_word(cqe: *const u8, tag: u32) -> (usize, u16) {
    // Bytes 56..59 as they lie in memory: sop (the WQE opcode), qpn (big-endian).
    // SAFETY: a 4-aligned word of the CQE (the caller's contract).
    let w = (u32::from_le(unsafe { cqe::sop_drop_qpn_raw(cqe) }) ^ tag) as usize;
    // SAFETY: the 2-aligned wqe_counter field of the CQE.
    let wc = u16::from_be(unsafe { cqe::wqe_counter_raw(cqe) });
    (w, wc)
}

/// Set `byte_len` and `qp_num` of `slot` from [`len_qpn`]'s word, in one store.
#[inline(always)]
fn set_len_qpn(slot: &mut Completion, len_qpn: u64) {
    // SAFETY: `byte_len` and `qp_num` are the two 4-byte fields of one 8-aligned word of
    // `*slot` (asserted above), a plain `u32` each: any 8 bytes are valid for them.
    unsafe {
        (slot as *mut Completion as *mut u8)
            .add(core::mem::offset_of!(Completion, byte_len))
            .cast::<u64>()
            .write(len_qpn)
    };
}

/// The successful completion of a plain incoming SEND (no immediate, no scatter) for the
/// receive `wr_id` on QP `qpn`, from the CQE at `cqe`: byte count, source QP, GRH flag.
///
/// # Safety
/// `cqe` is a CQE of this CQ (64-byte aligned, inside the ring), seen software-owned, and
/// the load barrier after its owner byte has run.
#[inline(always)]
pub(super) unsafe fn recv_completion(cqe: *const u8, wr_id: u64, qpn: u32) -> Completion {
    // SAFETY: 4-aligned words of the CQE (the caller's contract).
    let (byte_len, frq) = unsafe { (cqe::byte_cnt(cqe), cqe::flags_rqpn(cqe)) };
    let grh = (frq >> 24) as u8 & MLX5_CQE_FLAGS_GRH != 0;
    Completion {
        wr_id,
        status: WcStatus::Success,
        opcode: WcOpcode::Recv,
        byte_len,
        qp_num: qpn,
        src_qp: frq & MLX5_QPN_MASK,
        flags: WcFlags(if grh { WcFlags::GRH.0 } else { 0 }),
        ..Completion::EMPTY
    }
}

/// A side of the fast path: not looked at yet this poll, ready, or not available.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Untried,
    On,
    Off,
}

/// The hot QP's queues on the fast path, copied out of its `QpShared` (each side when its
/// first CQE comes, once per poll) so the per-CQE work touches registers and the rings only.
/// Positions reached are published by [`Hot::flush`].
pub(super) struct Hot {
    /// The qpn as CQE bytes 57..59 hold it: bits 8..31 of the little-endian u32 of bytes
    /// 56..59.
    tag: u32,
    qpn: u32,
    /// The hot QP (`Mlx5Cq::hot_qp`).
    qp: *const QpShared,
    sq: Side,
    rq: Side,
    /// The CQE that stopped the last `run_hot` was not software-owned (the CQ is drained).
    pub(super) idle: bool,
    // Send side.
    wqes: *const SqEntry,
    mask: u32,
    dbrec: *const u32,
    /// The queue's `SqDone`, alive while the QP is (checked when the side was taken).
    done: *const SqDone,
    /// Retired WQEBB position.
    sci: u32,
    /// Published producer position minus `sci` (as read here; the poster's only grows).
    avail: u32,
    /// Requests retired since the side was taken.
    sn: u32,
    // Receive side.
    rwrid: *const AtomicU64,
    rmask: u32,
    rqs: *const RqShared,
    /// RQ tail reached.
    tail: u32,
    /// Published receives (head) minus `tail`, as read here.
    ravail: u32,
    /// Receives completed since the side was taken.
    rn: u32,
}

/// The producer position the poster published in the send dbrec, as a distance from `ci`
/// (the 16-bit send counter is never more than `wqe_cnt` (<= 32768) ahead of `ci`).
#[inline(always)]
pub(super) fn avail_at(dbrec: *const u32, ci: u32) -> u32 {
    // SAFETY: `dbrec` is the QP's 4-aligned doorbell record, alive while the QP is (checked
    // `alive` when the side was taken, under `CqShared::polling`).
    let db = unsafe { (*(dbrec.add(MLX5_SND_DBR) as *const AtomicU32)).load(Ordering::Acquire) };
    u32::from_be(db).wrapping_sub(ci) & MLX5_WQE_INDEX_MASK
}

/// Published receives not yet completed (`head - tail`).
#[inline(always)]
fn ravail_at(rq: *const RqShared, tail: u32) -> u32 {
    // SAFETY: `rq` is the hot QP's `RqShared`, alive while the QP's entry is.
    unsafe { &*rq }
        .head
        .load(Ordering::Acquire)
        .wrapping_sub(tail)
}

/// [`ravail_at`] out of line, for the fast path's rare re-reads.
#[cold]
#[inline(never)]
fn read_ravail(rq: *const RqShared, tail: u32) -> u32 {
    ravail_at(rq, tail)
}

impl Hot {
    /// The fast path for the CQ's hot QP (`hot_qpn`, `hot_qp`); its sides are taken when
    /// their first CQE comes.
    #[inline(always)]
    pub(super) fn new(qpn: u32, qp: *const QpShared, sides: u8) -> Hot {
        let side = |bit: u8| {
            if sides & bit != 0 {
                Side::Untried
            } else {
                Side::Off
            }
        };
        Hot {
            tag: qpn.to_be(),
            qpn,
            qp,
            sq: side(super::HOT_SEND),
            rq: side(super::HOT_RECV),
            idle: false,
            wqes: core::ptr::null(),
            mask: 0,
            dbrec: core::ptr::null(),
            done: core::ptr::null(),
            sci: 0,
            avail: 0,
            sn: 0,
            rwrid: core::ptr::null(),
            rmask: 0,
            rqs: core::ptr::null(),
            tail: 0,
            ravail: 0,
            rn: 0,
        }
    }

    /// Take the send side, unless the QP has a purge pending or is dead (its CQEs go to
    /// `process`). Called with `shared.polling` set (it reads the QP's memory).
    #[inline(always)]
    fn take_sq(&mut self) {
        // SAFETY: `qp` is the `QpShared` of an entry of the CQ's `entries` (set with
        // `hot_qpn` by `lookup`, cleared by `register`, the only place entries go), which
        // holds an `Arc`.
        let qp = unsafe { &*self.qp };
        // `alive` as in `process` (`SeqCst`, see `CqShared::polling`).
        if qp.purge_send.load(Ordering::Relaxed) != 0
            || !qp.alive.load(Ordering::SeqCst)
            || qp.sq_buf.is_null()
        {
            self.sq = Side::Off;
            return;
        }
        let ci = qp.sq.done.ci.load(Ordering::Relaxed);
        self.wqes = qp.sq.wqes.as_ptr();
        self.mask = qp.sq.mask;
        self.dbrec = qp.dbrec;
        self.done = &*qp.sq.done;
        self.sci = ci;
        self.avail = avail_at(qp.dbrec, ci);
        self.sq = Side::On;
    }

    /// Take the receive side: an RQ (SRQ completions go to `process`), no purge pending,
    /// alive. As [`Hot::take_sq`].
    #[inline(always)]
    fn take_rq(&mut self) {
        // SAFETY: as in `take_sq`.
        let qp = unsafe { &*self.qp };
        let rq = match &qp.rq {
            Some(rq)
                if qp.srq.is_none()
                    && qp.purge_recv.load(Ordering::Relaxed) == 0
                    && qp.alive.load(Ordering::SeqCst) =>
            {
                rq
            }
            _ => {
                self.rq = Side::Off;
                return;
            }
        };
        self.rwrid = rq.wrid.as_ptr();
        self.rmask = rq.mask;
        self.rqs = rq;
        self.tail = rq.tail.load(Ordering::Relaxed);
        self.ravail = ravail_at(rq, self.tail);
        self.rq = Side::On;
    }

    /// Publish the positions reached: the retired send position and count, the RQ tail.
    #[inline(always)]
    pub(super) fn flush(self) {
        if self.sn != 0 {
            // SAFETY: `done` lives in the hot QP's `QpShared`, held by an entry of the CQ
            // for this whole poll.
            unsafe { &*self.done }.retire(self.sci, self.sn);
        }
        if self.rn != 0 {
            // SAFETY: as above, for the QP's `RqShared`.
            unsafe { &*self.rqs }
                .tail
                .store(self.tail, Ordering::Release);
        }
    }
}

impl<D: Owners> Mlx5Cq<D> {
    /// The hot QP's doorbell record (the fast path's rare re-reads of the published producer
    /// position go through `self`, so its loop keeps fewer values live).
    #[inline(always)]
    pub(super) fn hot_dbrec(&self) -> *const u32 {
        // Loaded here each time (volatile), not kept from an earlier load of the QP: a loop
        // would hold that in a register for this rare read.
        // SAFETY: as in `run_mixed`: `hot_qp` is held by an entry of `entries`; a plain field
        // of `self`.
        unsafe { &*late(&self.hot_qp) }.dbrec
    }

    /// [`Self::run_short`] for the sides `sq` / `rq` (at least one), this CQ's CQE size and
    /// the owner `parity` of `ci`.
    #[inline(always)]
    pub(super) fn run_short_any(
        &self,
        sq: bool,
        rq: bool,
        parity: u8,
        ci: u32,
        cqe: *const u8,
        out: &mut [Completion],
    ) -> usize {
        macro_rules! by_size_parity {
            ($sq:literal, $rq:literal) => {
                match (self.cqe_shift == 7, parity != 0) {
                    (false, false) => self.run_short::<$sq, $rq, false, 0>(ci, cqe, out),
                    (false, true) => self.run_short::<$sq, $rq, false, 1>(ci, cqe, out),
                    (true, false) => self.run_short::<$sq, $rq, true, 0>(ci, cqe, out),
                    (true, true) => self.run_short::<$sq, $rq, true, 1>(ci, cqe, out),
                }
            };
        }
        match (sq, rq) {
            (true, false) => by_size_parity!(true, false),
            (false, true) => by_size_parity!(false, true),
            _ => by_size_parity!(true, true),
        }
    }

    /// The fast path at the start of a poll whose first CQE (`cqe`, at `ci`, owner bit `P`:
    /// the parity of `ci`) is a plain CQE of a side this instance runs (`SQ`: requester,
    /// `RQ`: receive; `BIG`: 128-byte CQEs): the requester-only run ([`Self::run_sq`]), the
    /// receive-only run ([`Self::run_rq`]) or the two-sided one ([`Self::run_mixed`]). Each
    /// takes the hot QP's sides itself (purge, liveness, positions straight into registers;
    /// 0 when one is not available) and publishes the positions reached. Fills `out` from
    /// its start and returns how many; `poll` goes on with the general loop when the CQE a
    /// run stopped at is software-owned. Out of line: the loop's own register allocation;
    /// the owner parity and the CQE size are constants of the instance, so a loop keeps
    /// neither in a register.
    #[inline(never)]
    pub(super) fn run_short<const SQ: bool, const RQ: bool, const BIG: bool, const P: u8>(
        &self,
        ci: u32,
        cqe: *const u8,
        out: &mut [Completion],
    ) -> usize {
        match (SQ, RQ) {
            (true, false) => self.run_sq::<BIG, P>(ci, cqe, out),
            (false, true) => self.run_rq::<BIG, P>(ci, cqe, out),
            _ => self.run_mixed::<BIG, P>(ci, cqe, out),
        }
    }

    /// The two-sided run: requester and receive CQEs of the hot QP in any order, each
    /// completing its side's oldest outstanding request. It stops at the ring's end, at the
    /// end of `out`, or at the first CQE it does not take (see [`Self::run_hot`] for which
    /// it takes; a requester CQE covering unsignaled requests is left to `run_hot`: inline
    /// here, its branch would take registers from the loop every CQE needs). Kept: as
    /// `run_sides::<true, true>` with both sides taken first, `mixed16` +9.5 instructions;
    /// left to the general loop, +17.5 (`benches/compare.sh`).
    #[inline(always)]
    fn run_mixed<const BIG: bool, const P: u8>(
        &self,
        ci: u32,
        cqe: *const u8,
        out: &mut [Completion],
    ) -> usize {
        // SAFETY: `hot_qp` is the `QpShared` of an entry of `entries` (set with `hot_qpn` by
        // `lookup`, cleared by `register`, the only place entries go), which holds an `Arc`;
        // the caller checked `hot_qpn` is set.
        let qp = unsafe { &*self.hot_qp };
        // `alive` as in `process` (`SeqCst`, see `CqShared::polling`); both sides complete
        // into this CQ; send side: no purge pending, a ring.
        const BOTH: u8 = super::HOT_SEND | super::HOT_RECV;
        if !qp.alive.load(Ordering::SeqCst)
            || self.hot_sides != BOTH
            || qp.purge_send.load(Ordering::Relaxed) != 0
            || qp.sq_buf.is_null()
        {
            return 0;
        }
        // Receive side: an RQ (SRQ completions go to `process`), no purge pending.
        let rq = match &qp.rq {
            Some(rq) if qp.srq.is_none() && qp.purge_recv.load(Ordering::Relaxed) == 0 => {
                rq as *const RqShared
            }
            _ => return 0,
        };
        let sq = &qp.sq;
        let sci = sq.done.ci.load(Ordering::Relaxed);
        // WQEBBs published and not retired, receives published and not completed, each
        // checked before a CQE of its side: nothing is read from a ring before a request is
        // known to be there (a stray CQE goes to `process`, which drops it).
        let avail = avail_at(qp.dbrec, sci);
        // SAFETY: `rq` is the hot QP's `RqShared` (taken above).
        let tail0 = unsafe { &*rq }.tail.load(Ordering::Relaxed);
        let mut tail = tail0;
        let mut ravail = ravail_at(rq, tail);
        // Up to the ring's end: one owner parity for all of them.
        let cnt = self.dv.cqe_cnt;
        let m = out.len().min((cnt - (ci & (cnt - 1))) as usize);
        let qpn = self.hot_qpn;
        let tag = qpn.to_be();
        let lq0 = len_qpn(0, qpn);
        let mut walk = SendWalk {
            wqes: sq.wqes.as_ptr(),
            mask: sq.mask,
            sci,
            avail,
        };
        let (rwrid, rmask) = {
            // SAFETY: as above.
            let r = unsafe { &*rq };
            (r.wrid.as_ptr(), r.mask)
        };
        const C: usize = core::mem::size_of::<Completion>();
        let base = out.as_mut_ptr();
        // Byte offset of the completion in `out`, and (doubled for 128-byte CQEs) of the CQE
        // from `cqe`: one induction variable for both.
        let end = m * C;
        let cqe_scale = if BIG { 1 } else { 0 };
        let mut off = 0usize;
        while off != end {
            let cqe = cqe.wrapping_add(off << cqe_scale);
            // SAFETY: `off < end`: a whole `Completion` of `out`.
            let slot_out = unsafe { &mut *(base as *mut u8).add(off).cast::<Completion>() };
            // SAFETY: byte 63 of a CQE of this CQ (`cqe` is the one of `ci`; fewer than `m`
            // slots on, before the ring's end).
            let own = unsafe { cqe::op_own(cqe) } & PLAIN_MASK;
            if own == P {
                // Orders the owner-bit load above before the loads of the CQE body below.
                from_device_load_barrier();
                // SAFETY: `cqe` is a CQE of this CQ, seen software-owned, after the barrier.
                let (w, wc) = unsafe { req_word(cqe, tag) };
                // SAFETY: `slot_out` is a whole `Completion` of `out`; `walk.wqes` has
                // `walk.mask + 1` entries (the hot QP's, taken above).
                match unsafe {
                    self.req_cqe_op::<false, false>(&mut walk, cqe, w, wc, slot_out, lq0, qpn)
                } {
                    Req::Done => off += C,
                    Req::Stop | Req::Last => break,
                }
            } else if own == RESP_PLAIN | P {
                // Orders the owner-bit load above before the loads of the CQE body below.
                from_device_load_barrier();
                // SAFETY: a 4-aligned word of the CQE (bytes 56..59: sop, qpn).
                let w = u32::from_le(unsafe { cqe::sop_drop_qpn_raw(cqe) });
                if (w ^ tag) & QPN_MATCH_MASK != 0 {
                    break;
                }
                if ravail == 0 {
                    ravail = ravail_at(rq, tail);
                    if ravail == 0 {
                        break;
                    }
                }
                // SAFETY: `rwrid` has `rmask + 1` entries; the index is masked.
                let wr_id = unsafe { &*rwrid.add((tail & rmask) as usize) }.load(Ordering::Relaxed);
                // SAFETY: a software-owned CQE of this CQ, read after the barrier above.
                let c = unsafe { recv_completion(cqe, wr_id, qpn) };
                let byte_len = c.byte_len;
                *slot_out = c;
                // `byte_len` and `qp_num` in one store.
                set_len_qpn(slot_out, len_qpn(byte_len, qpn));
                tail = tail.wrapping_add(1);
                ravail -= 1;
                off += C;
            } else {
                break;
            }
        }
        let k = off / C;
        // Receives completed in this run (one each); the others were sends.
        let rn = tail.wrapping_sub(tail0);
        if k as u32 != rn {
            // The QP again through `self` (one value kept across the loop, not two).
            // SAFETY: as above.
            unsafe { &*self.hot_qp }
                .sq
                .done
                .retire(walk.sci, k as u32 - rn);
        }
        if rn != 0 {
            // SAFETY: as above.
            unsafe { &*rq }.tail.store(tail, Ordering::Release);
        }
        k
    }

    /// The fast path from position `ci` (software-owned or not): fills `out` from its start
    /// and returns how many, stopping at the ring's end (the owner parity flips there), at a
    /// CQE that is not software-owned (`h.idle`), or at the first CQE it does not take:
    /// `poll` hands that one to [`Self::process`], which handles every case. A requester CQE
    /// is taken when it is REQ without scatter, names the hot QP and an outstanding WQE (its
    /// oldest, or a later one covering the unsignaled ones before it; checked against the
    /// published producer position before the ring is read); a responder CQE when it is a
    /// plain SEND (no immediate, no scatter) on the hot QP's RQ with a receive outstanding.
    /// Gives back one CQ entry per request retired.
    #[inline(always)]
    pub(super) fn run_hot(&self, h: &mut Hot, ci: u32, out: &mut [Completion]) -> usize {
        // The sides this run needs, by the first CQE.
        let cqe = self
            .cqe0
            .wrapping_add(((ci & (self.dv.cqe_cnt - 1)) as usize) << self.cqe_shift);
        let parity = cqe_parity(ci, self.dv.cqe_cnt);
        // SAFETY: byte 63 of a CQE of this CQ (from_dv's contract).
        let x = unsafe { cqe::op_own(cqe) } ^ parity;
        if x & PLAIN_MASK == 0 && h.sq == Side::Untried {
            h.take_sq();
        } else if (x ^ RESP_PLAIN) & PLAIN_MASK == 0 && h.rq == Side::Untried {
            h.take_rq();
        }
        // A loop for the sides that are on: the other side's state stays out of it.
        match (h.sq == Side::On, h.rq == Side::On) {
            (true, false) => self.run_sides::<true, false>(h, ci, out),
            (false, true) => self.run_sides::<false, true>(h, ci, out),
            (true, true) => self.run_sides::<true, true>(h, ci, out),
            // Nothing for the fast path: `poll` looks at the CQE itself.
            (false, false) => 0,
        }
    }

    /// [`Self::run_hot`] with the send side on when `SQ`, the receive side when `RQ`.
    // Out of line: its own register allocation, not the outer loop's.
    #[inline(never)]
    fn run_sides<const SQ: bool, const RQ: bool>(
        &self,
        h: &mut Hot,
        ci: u32,
        out: &mut [Completion],
    ) -> usize {
        let cnt = self.dv.cqe_cnt;
        let first = ci & (cnt - 1);
        let parity = cqe_parity(ci, cnt);
        let mut cqe = self.cqe0.wrapping_add((first as usize) << self.cqe_shift);
        let stride = 1usize << self.cqe_shift;
        // Up to the ring's end: one owner parity for all of them.
        let m = out.len().min((cnt - first) as usize);
        // `op_own & PLAIN_MASK` of a CQE each side takes (opcode, no scatter, owner bit = the
        // parity).
        let (req_own, resp_own) = (parity, RESP_PLAIN | parity);
        let (tag, qpn) = (h.tag, h.qpn);
        let lq0 = len_qpn(0, qpn);
        let mut walk = SendWalk {
            wqes: h.wqes,
            mask: h.mask,
            sci: h.sci,
            avail: h.avail,
        };
        let (rwrid, rmask) = (h.rwrid, h.rmask);
        let (mut tail, mut ravail) = (h.tail, h.ravail);
        let start = cqe;
        for slot_out in out[..m].iter_mut() {
            // SAFETY: byte 63 of a CQE of this CQ (from_dv's contract).
            let own = unsafe { cqe::op_own(cqe) } & PLAIN_MASK;
            if SQ && own == req_own {
                // Orders the owner-bit load above before the loads of the CQE body below.
                from_device_load_barrier();
                // SAFETY: `cqe` is a CQE of this CQ, seen software-owned, after the barrier.
                let (w, wc) = unsafe { req_word(cqe, tag) };
                // SAFETY: `slot_out` is a whole `Completion` of `out`; `walk.wqes` has
                // `walk.mask + 1` entries (the hot QP's, taken with the side).
                match unsafe {
                    self.req_cqe_op::<false, true>(&mut walk, cqe, w, wc, slot_out, lq0, qpn)
                } {
                    Req::Done => {}
                    Req::Stop | Req::Last => break,
                }
            } else if RQ && own == resp_own {
                // Orders the owner-bit load above before the loads of the CQE body below.
                from_device_load_barrier();
                // SAFETY: a 4-aligned word of the CQE (bytes 56..59: sop, qpn).
                let w = u32::from_le(unsafe { cqe::sop_drop_qpn_raw(cqe) });
                if (w ^ tag) & QPN_MATCH_MASK != 0 {
                    break;
                }
                // A receive must be outstanding (a stray CQE is dropped by `process`).
                if ravail == 0 {
                    ravail = read_ravail(h.rqs, tail);
                    if ravail == 0 {
                        break;
                    }
                }
                // SAFETY: `rwrid` has `rmask + 1` entries; the index is masked.
                let wr_id = unsafe { &*rwrid.add((tail & rmask) as usize) }.load(Ordering::Relaxed);
                // SAFETY: a software-owned CQE of this CQ, read after the barrier above.
                let c = unsafe { recv_completion(cqe, wr_id, qpn) };
                *slot_out = c;
                tail = tail.wrapping_add(1);
                ravail -= 1;
            } else {
                break;
            }
            cqe = cqe.wrapping_add(stride);
        }
        // CQEs taken: the pointer advanced one slot for each.
        let k = (cqe as usize - start as usize) >> self.cqe_shift;
        if k < m {
            // Read again: the CQE the loop stopped at (it may have become software-owned
            // since, which only makes the poll look again).
            // SAFETY: as above.
            let op_own = unsafe { cqe::op_own(cqe) };
            h.idle = !cqe_sw_owned_x(op_own ^ parity);
        }
        // Receives completed in this run (one each); the others were sends.
        let rn = if RQ { tail.wrapping_sub(h.tail) } else { 0 };
        if SQ {
            (h.sci, h.avail, h.sn) = (walk.sci, walk.avail, h.sn + (k as u32 - rn));
        }
        if RQ {
            (h.tail, h.ravail, h.rn) = (tail, ravail, h.rn + rn);
        }
        k
    }
}
