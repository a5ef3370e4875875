//! The requester-only run of the fast path (see "The fast path" in `cq.rs`): a stream of
//! successful requester CQEs of the hot QP, each completing its oldest outstanding WQE or a
//! later one (covering the unsignaled ones before it, [`Mlx5Cq::req_cqe_covered`]), kept
//! apart from the two-sided loop of `hot.rs` so that its state fits in registers. The
//! CQ remembers CQE bytes 56..59 (opcode and qpn) of the last CQE it took (`hot_want`): a
//! CQE with the same word is one compare; the WQE's size and wr_id are the poster's record
//! (`SqShared::wqes`, one entry); a completion is four stores (`put_req`).
//!
//! The requester-CQE path itself (the checks against the send queue, the completion, the
//! positions) is written once, [`Mlx5Cq::req_cqe`], and inlined into every loop of the fast
//! path: this run, the two-sided run (`run_mixed`, `hot.rs`) and the general loop's
//! (`run_sides`). What keeps the loops' state in registers: no call on any path of a loop's
//! body but this run's out-of-line branch for READ and atomics ([`Mlx5Cq::req_cqe_apart`]);
//! the re-reads of the published producer position are inline too. A call makes every value
//! live across it leave the registers a call may overwrite, on every iteration of the loop,
//! whether or not that iteration takes the call.

use super::hot::{avail_at, len_qpn, PLAIN_MASK, REQ_LEN, REQ_OPCODE, REQ_OP_WITH_LEN};
use super::{cqe, late, Mlx5Cq};
use crate::barrier::from_device_load_barrier;
use crate::mlx5::cold_path;
use crate::mlx5::owners::Owners;
use crate::mlx5::shared::{CqShared, SqDone, SqEntry, SqShared};
use crate::wire::MLX5_OPCODE_RDMA_READ;
use crate::{Completion, WcOpcode, WcStatus};
use std::sync::atomic::Ordering;

/// `opcode` and `status` of a [`Completion`] side by side (they are, 16-aligned), so a
/// successful requester completion takes them from [`REQ_OK`] in one 16-byte copy.
#[repr(C, align(16))]
#[derive(Clone, Copy)]
pub(super) struct OpStatus {
    opcode: WcOpcode,
    status: WcStatus,
}
static_assertions::const_assert_eq!(
    core::mem::offset_of!(Completion, status),
    core::mem::offset_of!(Completion, opcode) + core::mem::size_of::<WcOpcode>()
);
static_assertions::const_assert_eq!(core::mem::offset_of!(Completion, opcode) % 16, 0);
static_assertions::const_assert_eq!(core::mem::size_of::<OpStatus>(), 16);

/// [`OpStatus`] of a successful requester completion by send WQE opcode byte.
pub(super) static REQ_OK: [OpStatus; 256] = {
    let mut t = [OpStatus {
        opcode: WcOpcode::Send,
        status: WcStatus::Success,
    }; 256];
    let mut i = 0;
    while i < 256 {
        t[i].opcode = REQ_OPCODE[i];
        i += 1;
    }
    t
};

/// The fields after `status` (`covered_from` to the end): zero in a successful requester
/// completion, written as 32 zero bytes (with the trailing padding).
const TAIL: usize = core::mem::offset_of!(Completion, covered_from);
static_assertions::const_assert_eq!(TAIL, 32);
static_assertions::const_assert_eq!(core::mem::size_of::<Completion>(), 64);
static_assertions::const_assert_eq!(core::mem::offset_of!(Completion, wr_id), 0);
static_assertions::const_assert_eq!(core::mem::offset_of!(Completion, covered), TAIL + 8);
static_assertions::const_assert_eq!(core::mem::offset_of!(Completion, imm), TAIL + 12);

/// Store a successful requester completion at `slot` in four stores: `wr_id`; `byte_len`
/// and `qp_num` as [`len_qpn`] gives them; `opcode` and `status` ([`REQ_OK`]); zero for
/// `covered_from` through `flags` and the padding.
///
/// # Safety
/// `slot` points to a whole, writable `Completion` (8-aligned: the 16-byte stores are
/// unaligned ones).
#[inline(always)]
pub(super) unsafe fn put_req(slot: *mut Completion, wr_id: u64, len_qpn: u64, opst: OpStatus) {
    let p = slot as *mut u8;
    // SAFETY: the caller's contract; each write is a field (or fields) of `*slot` at its
    // asserted offset with a valid value of its type (the tail: integers, `WcFlags(0)` and
    // padding).
    unsafe {
        p.cast::<u64>().write(wr_id);
        p.add(core::mem::offset_of!(Completion, byte_len))
            .cast::<u64>()
            .write(len_qpn);
        p.add(core::mem::offset_of!(Completion, opcode))
            .cast::<OpStatus>()
            .write_unaligned(opst);
        p.add(TAIL).cast::<[u128; 2]>().write_unaligned([0; 2]);
    }
}

/// The send side of a short-way run: the hot QP's `SqShared::wqes` and its mask, the retired
/// WQEBB position `sci`, and `avail`, the published producer position minus `sci` as last
/// read (the poster's only grows).
#[derive(Clone, Copy)]
pub(super) struct SendWalk {
    pub(super) wqes: *const SqEntry,
    pub(super) mask: u32,
    pub(super) sci: u32,
    pub(super) avail: u32,
}

/// `byte_len` of a successful requester completion of send WQE opcode `w` (at least READ,
/// at most 0xff): READ's from the CQE's byte count, the atomics' 8.
///
/// # Safety
/// `cqe` is a CQE of this CQ, seen software-owned, read after the load barrier.
#[inline(always)]
pub(super) unsafe fn req_len(cqe: *const u8, w: usize) -> u32 {
    if w == MLX5_OPCODE_RDMA_READ as usize {
        // SAFETY: byte_cnt is a 4-aligned word of the CQE (the caller's contract).
        unsafe { cqe::byte_cnt(cqe) }
    } else {
        REQ_LEN[w & 0xff]
    }
}

/// What [`Mlx5Cq::req_cqe`] did with a requester CQE.
pub(super) enum Req {
    /// Completed; the run goes on.
    Done,
    /// Not taken (nothing changed): the run stops before it.
    Stop,
    /// Completed, and nothing more is published: the run stops after it.
    Last,
}

impl<D: Owners> Mlx5Cq<D> {
    /// The requester-CQE path of the fast path, the one every run takes (the requester-only
    /// run below, the two-sided run and the general loop of `hot.rs`): the CQE's
    /// `wqe_counter` `wc` names the oldest outstanding WQE (`s.sci`; a later one goes to
    /// [`Self::req_cqe_covered`]), and the WQE, as
    /// large as the poster recorded it, must lie wholly below the published producer
    /// position (`s.avail`, read again through the hot QP when it does not reach); then the
    /// completion (`put_req`: `wr_id`, `lq` =
    /// `byte_len` and `qp_num`, `opst`) at `slot` and the positions. An entry is read only
    /// while a request is known published (a stray CQE stops the run; `process` drops it).
    /// `ALONE`: the send side runs alone and keeps `s.avail > 0` between CQEs (read again
    /// when it reaches 0: [`Req::Last`] when still 0); else `s.avail` may be 0 on entry.
    ///
    /// # Safety
    /// `slot` points to a whole, writable `Completion`; `s.wqes` has `s.mask + 1` entries.
    #[inline(always)]
    pub(super) unsafe fn req_cqe<const ALONE: bool, const COVER: bool>(
        &self,
        s: &mut SendWalk,
        wc: u16,
        slot: *mut Completion,
        lq: u64,
        opst: &OpStatus,
    ) -> Req {
        if wc != s.sci as u16 {
            if !COVER {
                return Req::Stop;
            }
            // A later WQE: the completion covers unsignaled requests before it.
            // SAFETY: the caller's contract.
            return unsafe {
                self.req_cqe_covered::<ALONE>(s, wc, slot, lq, opst, |sci| self.reread_avail(sci))
            };
        }
        if !ALONE && s.avail == 0 {
            s.avail = self.reread_avail(s.sci);
            if s.avail == 0 {
                return Req::Stop;
            }
        }
        // (The counter is `sci`'s low 16 bits; the ring has at most 32768 WQEBBs.)
        // SAFETY: the caller's contract; the index is masked.
        let e = unsafe { &*s.wqes.add((u32::from(wc) & s.mask) as usize) };
        let (nbb, wr_id) = (e.nbb(), e.wr_id.load(Ordering::Relaxed));
        // The whole WQE below the published producer position and more published after it:
        // one compare (`avail` is at most 0xffff and `nbb` at most 16 or `NO_WQE`, all
        // positive as `i32`).
        // Both sides: `avail` may reach 0, so a WQE up to the position as last read passes.
        let below = if ALONE {
            s.avail as i32 > nbb as i32
        } else {
            nbb <= s.avail
        };
        if below {
            // SAFETY: the caller's contract.
            unsafe { put_req(slot, wr_id, lq, *opst) };
            s.sci = s.sci.wrapping_add(nbb);
            s.avail -= nbb;
            return Req::Done;
        }
        // Past the published position as last read, or (alone) the last WQE published: look
        // at the position again.
        s.avail = self.reread_avail(s.sci);
        if nbb > s.avail {
            return Req::Stop;
        }
        // SAFETY: the caller's contract.
        unsafe { put_req(slot, wr_id, lq, *opst) };
        s.sci = s.sci.wrapping_add(nbb);
        s.avail -= nbb;
        // Alone: nothing more known outstanding, look at the published position again
        // before the next CQE may read an entry.
        if ALONE && s.avail == 0 {
            s.avail = self.reread_avail(s.sci);
            if s.avail == 0 {
                return Req::Last;
            }
        }
        Req::Done
    }
}

impl<D: Owners> Mlx5Cq<D> {
    /// [`Self::req_cqe`] for a CQE whose `wqe_counter` `wc` names a WQE past the oldest
    /// outstanding one (selective signaling): the requests from the oldest outstanding WQE up
    /// to the one named retire at once, counted in O(1), not by a walk. The checks: the WQE
    /// named lies below the published producer position (read again when it does not seem
    /// to) before any entry is read; no WQE of more than one WQEBB lies at or past the oldest
    /// outstanding one ([`SqShared::no_big_from`]), so every WQEBB from there to the
    /// published position starts a one-WQEBB WQE of this lap: the WQE named starts one, lies
    /// wholly below the published position, and covers its distance in WQEBBs. Anything else
    /// (a larger WQE outstanding included: `process` steps by the sizes) is [`Req::Stop`],
    /// nothing changed: `process` takes the CQE and drops it as it does today. `reread`
    /// gives the published producer position again as a distance from a retired position.
    ///
    /// # Safety
    /// As [`Self::req_cqe`].
    #[inline(always)]
    pub(super) unsafe fn req_cqe_covered<const ALONE: bool>(
        &self,
        s: &mut SendWalk,
        wc: u16,
        slot: *mut Completion,
        lq: u64,
        opst: &OpStatus,
        reread: impl Fn(u32) -> u32,
    ) -> Req {
        // WQEBBs from the oldest outstanding WQE to the one named (1..=0xffff).
        let dist = u32::from(wc.wrapping_sub(s.sci as u16));
        if dist >= s.avail {
            s.avail = reread(s.sci);
            if dist >= s.avail {
                return Req::Stop;
            }
        }
        // No WQE larger than one WQEBB from the oldest outstanding one on (read after the
        // published position `avail` came from): the WQEs before the one named are its
        // distance, and it starts a WQE of one WQEBB, below the published position.
        // The QP loaded for this read alone (not kept in a register for a later re-read of
        // the published position: the loop around holds its own values there).
        // SAFETY: the walk is the hot QP's send queue (`hot_qp`, alive while it is hot; a
        // plain field of `self`).
        let qp = unsafe { &*late(&self.hot_qp) };
        let big_end = qp.sq.big_end.load(Ordering::Relaxed);
        if !SqShared::no_big_from(big_end, s.sci, s.mask) {
            return Req::Stop;
        }
        let covered = dist;
        let used = dist + 1;
        // The covered requests counted and their CQ entries given back here (first, so the
        // QP's address is not held across the stores below), not by the loop's end: the
        // loops keep no count of them (their registers stay theirs, their ends test
        // nothing). `retired` runs ahead of the run's `ci` until the run ends, which
        // overstates nothing: the requests are done (see `SqDone::retired`).
        qp.sq.done.add_retired(covered);
        self.give_back(covered);
        // Both published (the oldest outstanding one at `sci`, `dist < avail`).
        // SAFETY: the caller's contract; the indices are masked.
        let (e, o) = unsafe {
            (
                &*s.wqes.add((u32::from(wc) & s.mask) as usize),
                &*s.wqes.add((s.sci & s.mask) as usize),
            )
        };
        let from = o.wr_id.load(Ordering::Relaxed);
        // SAFETY: the caller's contract.
        unsafe {
            put_req_covered(
                slot,
                e.wr_id.load(Ordering::Relaxed),
                lq,
                *opst,
                from,
                covered,
            )
        };
        s.sci = s.sci.wrapping_add(used);
        s.avail -= used;
        if ALONE && s.avail == 0 {
            s.avail = reread(s.sci);
            if s.avail == 0 {
                return Req::Last;
            }
        }
        Req::Done
    }

    /// Give back `n` CQ entries beyond one per CQE consumed (the requests covered
    /// completions retired): `CqShared::unreleased` moves down, stored before the poll's
    /// `ci` (the requests are retired already; see `CqShared::unreleased`).
    #[inline(always)]
    pub(super) fn give_back(&self, n: u32) {
        give_back(&self.shared, n);
    }
}

/// [`Mlx5Cq::give_back`] with the CQ's shared state at hand.
#[inline(always)]
pub(super) fn give_back(shared: &CqShared, n: u32) {
    // Written by the poller only: its own last store.
    let u = shared.unreleased.load(Ordering::Relaxed).wrapping_sub(n);
    shared.unreleased.store(u, Ordering::Release);
}

/// A single requester CQE (nothing set up: [`Mlx5Cq::poll_one`]'s `process_req`, the
/// dedicated pair's `take_dedicated`) that names the oldest outstanding WQE, at retired
/// position `sci` of the queue of `wqes`, `mask` and `done`: the WQE, at the size the poster
/// recorded (at least 1, or `NO_WQE`, so this also says one is outstanding), must lie wholly
/// within `posted`, the WQEBBs published (or rung) and not retired; then the completion
/// ([`put_req`]: `lq` gives `byte_len` and `qp_num`, `w` is the WQE opcode, one without a
/// byte length) at `out` and the WQE retired. False (nothing changed) when it does not fit.
/// The operands are taken lazily: evaluated before the check (a value, not a closure),
/// they cost `ded16_one` +6.0, `ded_rt` +4.0, `poll1` and `rt` +3.0 instructions.
///
/// # Safety
/// `out` points to a whole, writable `Completion`; `wqes` has `mask + 1` entries.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn take_oldest_one(
    wqes: *const SqEntry,
    mask: u32,
    done: &SqDone,
    sci: u32,
    posted: u32,
    lq: impl FnOnce() -> u64,
    w: usize,
    out: *mut Completion,
) -> bool {
    // SAFETY: the caller's contract; the index is masked.
    let e = unsafe { &*wqes.add((sci & mask) as usize) };
    let nbb = e.nbb();
    if nbb > posted {
        return false;
    }
    // SAFETY: the caller's contract.
    unsafe { put_req(out, e.wr_id.load(Ordering::Relaxed), lq(), REQ_OK[w & 0xff]) };
    done.retire(sci.wrapping_add(nbb), 1);
    true
}

/// A single requester CQE (nothing set up: [`Mlx5Cq::poll_one`]'s `process_req`, the
/// dedicated pair's `take_dedicated`) whose `wqe_counter` `wc` names a WQE past the oldest
/// outstanding one (at retired position `sci` of the queue of `wqes`, `mask` and `done`):
/// the checks and the count of [`Mlx5Cq::req_cqe_covered`], against `posted`, the WQEBBs
/// published (or rung) and not retired; `big_end` gives `SqShared::big_end`, read after
/// `posted` and only when the WQE named lies below it. The completion
/// ([`put_req_covered`]: `lq` gives `byte_len` and `qp_num`, `w` is the WQE opcode, one
/// without a byte length) at `out`, the requests retired, their CQ entries given back to
/// the CQ's `shared` state; false (nothing changed) when a check fails. The operands are
/// taken lazily (see [`take_oldest_one`]).
///
/// # Safety
/// `out` points to a whole, writable `Completion`; `wqes` has `mask + 1` entries.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn take_covered_one<'a>(
    shared: impl FnOnce() -> &'a CqShared,
    wqes: *const SqEntry,
    mask: u32,
    done: &SqDone,
    sci: u32,
    posted: u32,
    big_end: impl FnOnce() -> u32,
    wc: u16,
    lq: impl FnOnce() -> u64,
    w: usize,
    out: *mut Completion,
) -> bool {
    let dist = u32::from(wc.wrapping_sub(sci as u16));
    if dist >= posted {
        return false;
    }
    // No WQE larger than one WQEBB from the oldest outstanding one on (read after the
    // published position): the WQE named starts one, below `posted`, and the WQEs before
    // it are its distance (see `SqShared::no_big_from`).
    if !SqShared::no_big_from(big_end(), sci, mask) {
        return false;
    }
    let (covered, used) = (dist, dist + 1);
    // Both published: the WQE named and the oldest outstanding one.
    // SAFETY: the caller's contract; the indices are masked.
    let (e, o) = unsafe {
        (
            &*wqes.add((sci.wrapping_add(dist) & mask) as usize),
            &*wqes.add((sci & mask) as usize),
        )
    };
    // SAFETY: the caller's contract.
    unsafe {
        put_req_covered(
            out,
            e.wr_id.load(Ordering::Relaxed),
            lq(),
            REQ_OK[w & 0xff],
            o.wr_id.load(Ordering::Relaxed),
            covered,
        )
    };
    // The count read after the stores (not held in a register across them).
    let retired = done.retired.load(Ordering::Relaxed);
    done.retire_to(sci.wrapping_add(used), retired.wrapping_add(covered + 1));
    give_back(shared(), covered);
    true
}

/// [`put_req`] for a completion covering `covered` (at least 1) unsignaled requests, the
/// oldest with wr_id `from`.
///
/// # Safety
/// As [`put_req`].
#[inline(always)]
pub(super) unsafe fn put_req_covered(
    slot: *mut Completion,
    wr_id: u64,
    len_qpn: u64,
    opst: OpStatus,
    from: u64,
    covered: u32,
) {
    let p = slot as *mut u8;
    // SAFETY: the caller's contract; as in `put_req`, then the tail: `covered_from`, then
    // `covered` with a zero `imm` (adjacent, as `len_qpn` pairs two fields), then zero through the padding (integers, `WcFlags(0)`).
    unsafe {
        p.cast::<u64>().write(wr_id);
        p.add(core::mem::offset_of!(Completion, byte_len))
            .cast::<u64>()
            .write(len_qpn);
        p.add(core::mem::offset_of!(Completion, opcode))
            .cast::<OpStatus>()
            .write_unaligned(opst);
        p.add(TAIL).cast::<u64>().write(from);
        p.add(TAIL + 8)
            .cast::<u64>()
            .write(super::hot::len_qpn(covered, 0));
        p.add(TAIL + 16).cast::<u128>().write_unaligned(0);
    }
}

impl<D: Owners> Mlx5Cq<D> {
    /// [`Self::run_short`] with the send side alone: a stream of requester CQEs of the hot
    /// QP, each completing its oldest outstanding WQE. Kept apart from the two-sided loop
    /// so that its state fits in registers: the CQE and the completion are addressed by one
    /// index counting up to zero, the slot comes from the CQE's own (checked) `wqe_counter`,
    /// and a completion is four stores (`wr_id`; `byte_len` and `qp_num`; `opcode` and
    /// `status` from [`REQ_OK`]; the zero tail). Kept: left to the general loop's
    /// `run_sides::<true, false>`, `poll16` +16.5, `every1` +16.1, `cover16` +2.9
    /// instructions (`benches/compare.sh`).
    #[inline(always)]
    pub(super) fn run_sq<const BIG: bool, const P: u8>(
        &self,
        ci: u32,
        cqe: *const u8,
        out: &mut [Completion],
    ) -> usize {
        // SAFETY: as in `run_mixed`.
        let qp = unsafe { &*self.hot_qp };
        // `alive` as in `process` (`SeqCst`, see `CqShared::polling`); no purge pending. (The
        // run reads the QP's entries, never its ring.)
        if !qp.alive.load(Ordering::SeqCst)
            || qp.purge_send.load(Ordering::Relaxed) != 0
            || self.hot_sides & super::HOT_SEND == 0
        {
            return 0;
        }
        let sq = &qp.sq;
        let sci = sq.done.ci.load(Ordering::Relaxed);
        // WQEBBs published and not retired: kept above 0 between CQEs (re-read at the
        // published position when it reaches 0), so an entry is read only for an
        // outstanding request (a stray CQE goes to `process`, which drops it).
        let avail = avail_at(qp.dbrec, sci);
        if avail == 0 {
            return 0;
        }
        // Up to the ring's end: one owner parity for all of them.
        let cnt = self.dv.cqe_cnt;
        let m = out.len().min((cnt - (ci & (cnt - 1))) as usize);
        let qpn = self.hot_qpn;
        let tag = qpn.to_be();
        let lq = len_qpn(0, qpn);
        let (wqes, sq_mask) = (sq.wqes.as_ptr(), sq.mask);
        // `off` counts the bytes of `out` still to fill, negated: the completion is at
        // `out_end + off`, the CQE at `cqe_end + (off << scale)`. One induction variable for
        // both, which reaches 0 at the end.
        let out_end = out.as_mut_ptr().wrapping_add(m) as *mut u8;
        let cqe_end = cqe.wrapping_add((m * super::hot::COMPLETION) << super::hot::cqe_scale(BIG));
        let mut off = -((m * super::hot::COMPLETION) as isize);
        // The loop below takes a first CQE before it tests `off`: the caller's `out` is not
        // empty and `ci`'s slot is before the ring's end.
        debug_assert!(m > 0);
        // CQE bytes 56..59 (little-endian u32: sop = the WQE opcode, then the qpn) of the
        // opcode the run is at, and that opcode's `opcode` and `status`: a CQE equal to
        // `want` needs one compare. Another opcode of the hot QP without a byte length
        // (SEND / WRITE and their IMM forms) becomes the run's; READ and atomics (a byte
        // length each) are taken one by one; another QP stops the run.
        let mut want = self.hot_want.get();
        let mut opst = REQ_OK[want as u8 as usize];
        let mut walk = SendWalk {
            wqes,
            mask: sq_mask,
            sci,
            avail,
        };
        // At least one CQE (`m > 0`: the caller saw the first one, before the ring's end).
        loop {
            let cqe = cqe_end.wrapping_offset(off << super::hot::cqe_scale(BIG));
            // SAFETY: byte 63 of a CQE of this CQ (`cqe` is one of the `m` from `ci`, before
            // the ring's end).
            if unsafe { cqe::op_own(cqe) } & PLAIN_MASK != P {
                break;
            }
            // Orders the owner-bit load above before the loads of the CQE body below.
            from_device_load_barrier();
            // Bytes 56..59: sop (the WQE opcode) and the qpn, as a little-endian u32.
            // SAFETY: a 4-aligned word of the CQE (CQEs are 64-byte aligned).
            let word = u32::from_le(unsafe { cqe::sop_drop_qpn_raw(cqe) });
            // SAFETY: the 2-aligned wqe_counter field of the CQE.
            let wc = u16::from_be(unsafe { cqe::wqe_counter_raw(cqe) });
            // A requester CQE completing with `byte_len` / `qp_num` `$lq` and `$opst`
            // ([`Self::req_cqe`]) at `out_end + off`.
            macro_rules! take {
                ($lq:expr, $opst:expr) => {{
                    let slot = out_end.wrapping_offset(off).cast();
                    // SAFETY: `out_end + off` is a whole `Completion` of `out` (`off < 0`);
                    // `wqes` has `sq_mask + 1` entries.
                    match unsafe { self.req_cqe::<true, true>(&mut walk, wc, slot, $lq, &$opst) } {
                        Req::Done => off += super::hot::COMPLETION as isize,
                        Req::Stop => break,
                        Req::Last => {
                            off += super::hot::COMPLETION as isize;
                            break;
                        }
                    }
                    if off == 0 {
                        break;
                    }
                }};
            }
            if word != want {
                // Not the common case (once per opcode change): its values stay out of the
                // loop's registers.
                cold_path();
                // The qpn bytes XOR the hot QP's to zero, leaving the opcode.
                let w = word ^ tag;
                if w >= REQ_OP_WITH_LEN {
                    if w > 0xff {
                        break;
                    }
                    // SAFETY: the CQE is software-owned, read after the barrier.
                    let len = unsafe { req_len(cqe, w as usize) };
                    let slot = out_end.wrapping_offset(off).cast();
                    let step;
                    // SAFETY: as in `take!`.
                    (step, walk) = unsafe {
                        self.req_cqe_apart::<true>(
                            walk,
                            wc,
                            slot,
                            len_qpn(len, qpn),
                            REQ_OK[w as usize],
                        )
                    };
                    match step {
                        Req::Done => off += super::hot::COMPLETION as isize,
                        Req::Stop => break,
                        Req::Last => {
                            off += super::hot::COMPLETION as isize;
                            break;
                        }
                    }
                    if off == 0 {
                        break;
                    }
                    continue;
                }
                want = word;
                opst = REQ_OK[w as usize];
            }
            take!(lq, opst);
        }
        self.hot_want.set(want);
        // (`off` is a multiple of `C`, at most 0.)
        let k = (m as isize + (off >> super::hot::COMPLETION.trailing_zeros())) as usize;
        if k != 0 {
            // The QP loaded again (not kept in a register across the loop).
            // SAFETY: as above; `hot_qp` is a plain field of `self`.
            let qp = unsafe { &*late(&self.hot_qp) };
            qp.sq.done.retire(walk.sci, k as u32);
        }
        k
    }

    /// A successful requester CQE with `wqe_counter` `wc` and bytes 56..59 XOR the hot QP's
    /// tag `w` (the send WQE opcode for the hot QP, more for another: [`Req::Stop`]):
    /// [`Self::req_cqe`] (one compare checks the QP and an opcode without a byte length,
    /// completing with `lq0`: `byte_len` 0 and the qpn; READ and atomics with theirs). For
    /// the two-sided loops: both paths inline.
    ///
    /// # Safety
    /// As [`Self::req_cqe`]; `cqe` is the CQE, seen software-owned, after the load barrier.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn req_cqe_op<const ALONE: bool, const COVER: bool>(
        &self,
        s: &mut SendWalk,
        cqe: *const u8,
        w: usize,
        wc: u16,
        slot: *mut Completion,
        lq0: u64,
        qpn: u32,
    ) -> Req {
        if w < REQ_OP_WITH_LEN as usize {
            // SAFETY: the caller's contract.
            return unsafe { self.req_cqe::<ALONE, COVER>(s, wc, slot, lq0, &REQ_OK[w]) };
        }
        if w > 0xff {
            return Req::Stop;
        }
        // SAFETY: the caller's contract.
        let lq = len_qpn(unsafe { req_len(cqe, w) }, qpn);
        // SAFETY: the caller's contract.
        unsafe { self.req_cqe::<ALONE, COVER>(s, wc, slot, lq, &REQ_OK[w]) }
    }

    /// [`Self::req_cqe`] out of line, for the requester-only run's CQEs of an opcode with a
    /// byte length (READ, atomics): the walk by value, so the run's stays in registers.
    /// (Inlined, the compiler merges a run's two calls of `req_cqe` into one whose operands
    /// are chosen per CQE, which every CQE then pays.)
    ///
    /// # Safety
    /// As [`Self::req_cqe`].
    #[cold]
    #[inline(never)]
    pub(super) unsafe fn req_cqe_apart<const ALONE: bool>(
        &self,
        mut s: SendWalk,
        wc: u16,
        slot: *mut Completion,
        lq: u64,
        opst: OpStatus,
    ) -> (Req, SendWalk) {
        // SAFETY: the caller's contract.
        let step = unsafe { self.req_cqe::<ALONE, true>(&mut s, wc, slot, lq, &opst) };
        (step, s)
    }

    /// [`avail_at`] for the hot QP: the fast path's re-reads of the published producer
    /// position (rare: when a WQE seems past it, or nothing more is known outstanding). The
    /// QP is loaded here, not kept live across a loop. Inline, not a call: a call would make
    /// every value live across it leave the registers a call may overwrite (the requester-only
    /// run's `OpStatus` among them, a vector register), in the loop's every iteration.
    #[inline(always)]
    fn reread_avail(&self, sci: u32) -> u32 {
        avail_at(self.hot_dbrec(), sci)
    }
}
