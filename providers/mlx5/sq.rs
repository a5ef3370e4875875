//! The send queue: WQE writing, accounting, doorbell and BlueFlame.
//!
//! This file holds the queue's state, its control-path setters and the post paths
//! ([`SendQueue`]); one job each in the files below it: `check.rs` (validation of the WQE
//! that describes a request, a `wire::SendWqe`), `write.rs` (the WQE writers and the
//! poster's record), `budget.rs` (the posting budget and the fast-path limit), `ring.rs`
//! (doorbell and BlueFlame).
//!
//! ## Indices
//!
//! - `pi` (producer index, `u32`, free-running, in WQEBBs, written by the poster): the next
//!   WQE starts at WQEBB `pi & (wqe_cnt - 1)`; the ctrl segment carries `pi & 0xffff`.
//! - `ci` (in [`SqShared`](super::shared::SqShared), written by the poller): WQEBBs before it are retired and may be
//!   overwritten; the oldest outstanding WQE starts there. Free WQEBBs = `wqe_cnt - (pi - ci)`.
//! - `rung.pi` (poster): `pi` at the last doorbell; nothing is staged when equal.
//! - `limit` (poster): the posting budget, see below; `pi <= limit <= ci + wqe_cnt`.
//!
//! The poster records each WQE's wr_id and size (WQEBBs) in `SqShared::wqes[first WQEBB]`
//! (one 16-byte entry), marks the other WQEBBs of a larger WQE as no WQE start, and (general
//! path only) the position past the last larger WQE (`SqShared::big_end`), before it rings;
//! the poller reads them there, and counts the unsignaled WQEs a completion covers in O(1)
//! while no larger WQE is outstanding (see `cq.rs`). The one-WQEBB fast path records a
//! constant size: there is no per-WQE running count to maintain at post time.
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
//! WR (see `cq.rs`, "CQ overrun"), a reset or drop gives back the budget too. So the entries
//! in use never exceeding `cqe_cnt` still guarantees
//! that the CQEs of everything posted fit the CQ. Entries are taken only while fewer than
//! `max_send_wr` requests are outstanding and never beyond that count, so an SQ holds at
//! most `max_send_wr` entries; QP creation refuses a QP whose CQs cannot absorb the sum of
//! their queues' depths (`providers/cq_room.rs`), so a post never finds the CQ full.
//! [`Mlx5Sq::cq_budget`] reports the holding.
//!
//! The outstanding-request count the `max_send_wr` check needs is `posted - retired`, as
//! rdma-core's `sq.head - sq.tail`: the poller counts the requests it retires
//! (`SqDone::retired`); the poster derives the requests it posted from `pi` and the WQEBBs
//! its multi-WQEBB WQEs took beyond their first (`bb_extra`, which only the general path adds to), so the fast path counts nothing.
//!
//! An error completion moves the QP to ERR behind the poster's back: the poller sets
//! `QpShared::failed` and closes the fast-path limit ([`SqFastLimit`]), which the fast path
//! reads anyway; the general path checks `failed` and refuses with `BadState`. The one request
//! a QP in ERR takes is the drain's flush marker ([`SendQueue::post_flush_marker`]), written
//! outside the budget (its room and CQ entry checked on their own, the budget left empty).
//!
//! ## Fast path
//!
//! An inline WRITE or SEND (no UD destination) of at most 12 bytes fits one WQEBB (ctrl,
//! \[raddr,\] one inline segment), which never wraps. [`SendQueue::post`] writes it with 64-bit
//! stores from precomputed parts when `pi < SqFastLimit::fast_end` (one load, one compare, besides
//! `len <= 12`). The limit is the budget's `limit`, published whenever `limit` changes, when
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
//! written; [`to_device_store_barrier`]; `dbrec[1] = be32(pi & 0xffff)` (also the producer
//! position the poller validates a CQE against); [`wc_start`]; then either the 8-byte
//! doorbell (the first 8 bytes of the last WQE's ctrl segment, kept from when it was
//! written) or a BlueFlame copy of the single staged WQE, to the current BlueFlame half;
//! [`wc_flush`]; the half toggles (`bf_size` apart).
//!
//! [`SendQueue::post_and_ring`] is `post` then `ring`, except that a request the fast path
//! takes, with nothing staged and BlueFlame off, is written and rung with the ctrl word kept
//! in a register: "nothing staged, BlueFlame off" is one compare of `pi` with the 8-byte
//! `rung` word (`rung_pi` and `bf_bbs` side by side, see [`Rung`]).
//!
//! [`to_device_store_barrier`]: crate::barrier::to_device_store_barrier
//! [`wc_start`]: crate::barrier::wc_start
//! [`wc_flush`]: crate::barrier::wc_flush

mod budget;
mod check;
mod ring;
mod write;

use std::marker::PhantomData;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::owners::Owners;
use super::shared::{CqShared, QpShared, SqDone, SqEntry, SqFastLimit};
use super::{DoorbellMode, Mlx5Device};
use crate::wire::{
    MLX5_OPCODE_RDMA_WRITE, MLX5_OPCODE_RDMA_WRITE_IMM, MLX5_OPCODE_SEND, MLX5_QPN_MASK,
    MLX5_SEND_WQE_BB, MLX5_SND_DBR, MLX5_WQE_CTRL_CQ_UPDATE, MLX5_WQE_CTRL_QPN_SHIFT,
    MLX5_WQE_DS_UNITS,
};
use crate::{Payload, PostError, QpCaps, QpState, QpType, Rejected, SendOp, SendQueue, SendWr};

/// Largest inline payload of the one-WQEBB fast path: header and data in one 16-byte segment.
const FAST_INLINE_MAX: u32 = 12;

/// 16-byte segments (ds units) in a 64-byte WQEBB.
const DS_PER_BB: u32 = (MLX5_SEND_WQE_BB / MLX5_WQE_DS_UNITS) as u32;

/// Most CQ entries a send queue takes into its posting budget at once.
const CQ_BUDGET_MAX: u32 = 256;

/// `pi` at the last doorbell and the BlueFlame span, side by side in one aligned 8-byte
/// word, so that "nothing staged and BlueFlame off" is one compare of the word with `pi`
/// ([`Rung::idle_db`]).
#[repr(C, align(8))]
struct Rung {
    /// `pi` at the last doorbell (nothing staged when equal).
    pi: u32,
    /// Staged WQEBBs up to this many go through [`Mlx5Sq::ring_bf`], which may use BlueFlame
    /// for a single WQE (0: BlueFlame off; else the WQEBBs of the largest BlueFlame WQE).
    bf_bbs: u32,
}

impl Rung {
    /// Nothing is staged at `pi` and BlueFlame is off: the word equals `pi` widened, its
    /// `bf_bbs` half zero.
    #[inline(always)]
    fn idle_db(&self, pi: u32) -> bool {
        // SAFETY: `Rung` is two initialised `u32`s, 8 bytes without padding, 8-aligned
        // (`repr(C, align(8))`): one `u64` read of its own bytes.
        let word = unsafe { *(self as *const Rung as *const u64) };
        word == Rung { pi, bf_bbs: 0 }.word()
    }

    /// Store both halves with one 8-byte store. A 4-byte store of `pi` read back by
    /// [`Self::idle_db`]'s 8-byte load cannot be forwarded from the store buffer: with that,
    /// a post and doorbell in one call took 7.1 ns instead of 3.2 (x86_64, plain memory).
    /// `ring` still stores `pi` alone (a whole store there costs four instructions more per
    /// ring): the first `post_and_ring` after a `ring` pays that stall once.
    #[inline(always)]
    fn set(&mut self, pi: u32, bf_bbs: u32) {
        // SAFETY: as in `idle_db`; the word written is two `u32`s in memory order.
        unsafe { *(self as *mut Rung as *mut u64) = Rung { pi, bf_bbs }.word() };
    }

    /// The two halves as one `u64`, in memory order.
    #[inline(always)]
    fn word(self) -> u64 {
        if cfg!(target_endian = "little") {
            u64::from(self.pi) | u64::from(self.bf_bbs) << 32
        } else {
            u64::from(self.pi) << 32 | u64::from(self.bf_bbs)
        }
    }
}

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
    /// `pi` at the last doorbell and the BlueFlame span, one 8-byte word (see [`Rung`]).
    rung: Rung,
    /// WQEBBs beyond the first of every WQE written (free-running): `pi - bb_extra` requests
    /// were posted, `pi - bb_extra - SqDone::retired` are outstanding. Only the general path
    /// adds to it (the fast path writes one-WQEBB WQEs), so counting costs the fast path
    /// nothing.
    bb_extra: u32,
    /// `QpShared::fast_limit` (`shared` keeps it alive): the fast path is open while
    /// `pi < fast_end` (see [`SqFastLimit`]).
    fast_limit: *const SqFastLimit,
    /// The fast path's ctrl segment bytes 0..8 less the WQE index, by
    /// `[2 * is_write + has_data]`: `be32(opcode)` in the low half (opmod 0), `be32(qpn << 8
    /// | ds)` in the high half; the WQE ORs in `be32(wqe_idx << 8)`.
    ctrl_fast: [u64; 4],
    /// The ctrl segment's bytes 8..16 for `fm_ce_se` 0: `sq_sig_all`'s CQ_UPDATE at byte 11.
    ctrl_fm: u64,
    /// First 8 bytes of the last staged WQE's ctrl segment: the 8-byte doorbell (meaningful
    /// while something is staged; `post_and_ring` rings its WQE without storing it).
    last_ctrl: u64,
    /// The `wqes` array of [`SqShared`](super::shared::SqShared), by first WQEBB (`shared` keeps it alive).
    wqes: *const SqEntry,
    /// `dbrec[1]`, the send counter.
    dbrec_sq: *mut u32,
    /// The BlueFlame half the next doorbell goes to, and the XOR that flips to the other.
    bf_cur: *mut u8,
    bf_flip: usize,
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
    /// `signal_every`): `SqFastLimit::fast_end` follows `limit`, else it stays 0.
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
const _: () = assert!(core::mem::offset_of!(Mlx5Sq, bf_flip) + 8 <= 128);
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
            .field("rung_pi", &self.rung.pi)
            .field("bf_bbs", &self.rung.bf_bbs)
            .finish_non_exhaustive()
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
            *w = (u64::from((qpn << MLX5_WQE_CTRL_QPN_SHIFT | ds).to_be()) << write::QPN_DS_BIT)
                | u64::from(u32::from(opcode).to_be());
        }
        let mut sq = Mlx5Sq {
            buf: dv.sq_buf,
            mask: dv.sq_wqe_cnt - 1,
            mask8: (dv.sq_wqe_cnt - 1) << 3,
            pi: 0,
            limit: 0,
            rung: Rung { pi: 0, bf_bbs: 0 },
            bb_extra: 0,
            ctrl_fast,
            ctrl_fm: 0,
            last_ctrl: 0,
            wqes: shared.sq.wqes.as_ptr(),
            fast_limit: &shared.fast_limit,
            dbrec_sq: dv.dbrec.wrapping_add(MLX5_SND_DBR),
            bf_cur: bf_reg,
            bf_flip: (bf_reg as usize) ^ (bf_reg as usize + bf_size as usize),
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
        sq.ctrl_fm = u64::from(sq.sig_all_fm) << write::FM_CE_SE_BIT;
        sq.set_mode(DoorbellMode::Auto);
        sq.update_fast_limits();
        sq
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

    /// Back to the RESET state: indices zero (the device expects it), nothing staged. The
    /// budget must have been handed back ([`Self::take_cq_budget`]).
    pub(crate) fn reset(&mut self) {
        debug_assert_eq!(self.cq_budget(), 0);
        self.pi = 0;
        self.limit = 0;
        self.cq_extra = 0;
        self.rung.pi = 0;
        self.bb_extra = 0;
        self.since_signal = 0;
        self.bf_cur = self.bf_reg;
        let sq = &self.shared.sq;
        sq.done.ci.store(0, Ordering::Relaxed);
        sq.done.retired.store(0, Ordering::Relaxed);
        sq.big_end.store(0, Ordering::Relaxed);
        // Reopen the fast-path limit a failure closed (the caller cleared `failed`).
        self.update_fast_limits();
    }

    /// What the poll of a CQ this queue alone completes into reads of it
    /// ([`super::Mlx5Dedicated`]): the poster's records (`SqShared::wqes`) and their mask, the
    /// producer position at the last doorbell (the one the device may complete up to), and
    /// the poller's retired positions.
    #[inline(always)]
    pub(crate) fn dedicated_view(&self) -> (*const SqEntry, u32, u32, &SqDone) {
        (self.wqes, self.mask, self.rung.pi, &self.shared.sq.done)
    }

    /// `SqShared::big_end`: past the last WQE of more than one WQEBB this queue wrote.
    #[inline(always)]
    pub(crate) fn big_end(&self) -> u32 {
        self.shared.sq.big_end.load(Ordering::Relaxed)
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

    /// True once the poller returned an error completion for this QP (see the module doc).
    #[inline(always)]
    fn failed(&self) -> bool {
        self.shared.failed.load(Ordering::Relaxed)
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

    /// The producer index (WQEBBs, free-running).
    pub fn pi(&self) -> u32 {
        self.pi
    }

    /// The general path: any request, every check, never the one-WQEBB inline fast path
    /// [`SendQueue::post`] takes for small inline WRITEs and SENDs. Same bytes, same
    /// accounting, same refusals as `post` (a test holds them equal); `post` is faster.
    #[inline(always)]
    pub fn post_general(&mut self, wr: &SendWr<'_, D::Ah>) -> Result<(), PostError> {
        if self.failed() {
            return Err(self.shared.failed_error());
        }
        let (wqe, ds) = match self.check(wr) {
            Ok(c) => c,
            Err(e) => return Err(self.refusal(e)),
        };
        let nbb = ds.div_ceil(DS_PER_BB);
        if nbb > self.wqe_cnt {
            return Err(self.refusal(PostError::QueueFull {
                capacity: self.caps.max_send_wr,
            }));
        }
        self.take(nbb)?;
        let fm = self.fm_for(wqe.fm_ce_se);
        let ctrl = self.write_wqe(&wqe, ds, fm);
        self.record(wr.wr_id, ctrl, nbb);
        Ok(())
    }

    /// [`SendQueue::post_flush_marker`]: the marker's WQE written at `pi` with what is staged
    /// and rung. Outside the posting budget (empty in ERR): room in the SQ and one request
    /// below `max_send_wr` checked here, its CQ entry taken from the entries the queue still
    /// holds (`limit - pi` and `cq_extra`) or grabbed, the budget then left empty, so the
    /// module doc's invariant holds (the entry moves from held to outstanding).
    #[cold]
    #[inline(never)]
    fn flush_marker(&mut self, wr_id: u64) -> Result<(), PostError> {
        let state = self.state();
        if !matches!(state, QpState::Err | QpState::Sqe) {
            return Err(PostError::BadState { state });
        }
        if self.shared.cq_error.load(Ordering::Acquire) != 0 {
            return Err(self.shared.failed_error());
        }
        let wr = SendWr::<D::Ah>::write(wr_id, &[], 0, 0).signaled();
        let (wqe, ds) = self.check(&wr)?;
        let nbb = ds.div_ceil(DS_PER_BB);
        let ci = self.shared.sq.done.ci.load(Ordering::Acquire);
        let room = self.wqe_cnt - self.pi.wrapping_sub(ci);
        if nbb > room || self.outstanding() >= self.caps.max_send_wr {
            return Err(PostError::QueueFull {
                capacity: self.caps.max_send_wr,
            });
        }
        let mut held = self.limit.wrapping_sub(self.pi) + self.cq_extra;
        if held == 0 {
            held = self.cq.grab(1);
            if held == 0 {
                return Err(PostError::CqFull {
                    cqe: self.cq.dv.cqe_cnt,
                });
            }
        }
        let fm = self.fm_for(wqe.fm_ce_se);
        let ctrl = self.write_wqe(&wqe, ds, fm);
        self.record(wr_id, ctrl, nbb);
        self.cq_extra = held - 1;
        self.limit = self.pi;
        self.publish_limit();
        self.ring();
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
        match self.post_general_apart(&wr) {
            Ok(()) => Ok(()),
            Err(error) => Err(reject(wr, error)),
        }
    }

    /// [`Self::post_general`] out of line: `post_slow`'s refill-and-write-fast path (the
    /// common one there) then keeps the general path's frame and register saves out of its
    /// own.
    #[inline(never)]
    fn post_general_apart(&mut self, wr: &SendWr<'_, D::Ah>) -> Result<(), PostError> {
        self.post_general(wr)
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
        // Small inline WRITEs and SENDs (one WQEBB) take the fast path while its limit allows it:
        // same checks (folded into the limit, see `SqFastLimit`), same bytes. Anything else, and
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
    fn post_and_ring<'a>(
        &mut self,
        wr: SendWr<'a, D::Ah>,
    ) -> Result<(), Rejected<SendWr<'a, D::Ah>>> {
        // The one-message case: nothing staged and BlueFlame off (one compare, see `Rung`),
        // a request the fast path takes. One WQEBB is then staged, more than `bf_bbs` (0):
        // `ring` would write the 8-byte doorbell, which goes out here with the ctrl word
        // still in a register.
        if let (Payload::Inline(data), None) = (wr.payload, wr.ud) {
            let fast_op = matches!(wr.op, SendOp::Write { .. } | SendOp::Send);
            if fast_op && self.rung.idle_db(self.pi) && self.fast_open(data.len()) {
                let remote = match wr.op {
                    SendOp::Write { raddr, rkey } => Some((raddr, rkey)),
                    _ => None,
                };
                let ctrl = self.fast_inline_wqe(wr.wr_id, remote, None, data, wr.flags.0);
                self.ring_db(ctrl, true);
                return Ok(());
            }
            // WRITE WITH IMMEDIATE apart, as in `post`.
            if let SendOp::WriteImm { raddr, rkey, imm } = wr.op {
                if self.rung.idle_db(self.pi) && self.fast_open(data.len()) {
                    let remote = Some((raddr, rkey));
                    let ctrl = self.fast_inline_wqe(wr.wr_id, remote, Some(imm), data, wr.flags.0);
                    self.ring_db(ctrl, true);
                    return Ok(());
                }
            }
        }
        let r = self.post(wr);
        self.ring();
        r
    }

    #[inline(always)]
    fn ring(&mut self) {
        // One compare for the common case: more WQEBBs staged than a BlueFlame WQE has (with
        // BlueFlame off, `bf_bbs` is 0: anything staged) is the 8-byte doorbell.
        let staged = self.pi.wrapping_sub(self.rung.pi);
        if staged > self.rung.bf_bbs {
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
        self.shared.wqes_between(self.rung.pi, self.pi).unwrap_or(0)
    }

    fn post_flush_marker(&mut self, wr_id: u64) -> Result<(), PostError> {
        self.flush_marker(wr_id)
    }
}
