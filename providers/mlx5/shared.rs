//! State shared between a queue's poster and the CQ poller, without locks.
//!
//! Each queue has one producer (the poster, through `&mut` on the queue) and one consumer
//! at a time (the poller of the CQ the completions land in). They meet here:
//!
//! - the poster fills per-slot records (a send WQE's `wr_id` and size in WQEBBs,
//!   [`SqEntry`]; a receive's `wr_id`) for slots that are free, then publishes its position
//!   with a `Release` store when it rings;
//! - the poller reads only slots below the published position (`Acquire`), retires them and
//!   publishes the retired position with a `Release` store, which the poster reads
//!   (`Acquire`) before it reuses a slot.
//!
//! The slots are atomics accessed `Relaxed` (plain loads and stores on x86_64 and aarch64):
//! the ordering comes from the index handoff, and a misbehaving caller (say, a reset racing a
//! poll, which the docs forbid) gets wrong accounting, never undefined behaviour.
//!
//! Counters run free and wrap (`u32`); they are masked only at the slot.

use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use super::dv::DvCq;

/// True when position `a` comes before `b` (free-running `u32` counters).
#[inline(always)]
pub(crate) fn before(a: u32, b: u32) -> bool {
    (b.wrapping_sub(a) as i32) > 0
}

/// Per-CQ state shared by the CQ and every queue that completes into it.
// `repr(C)`: the padded counters keep their order, each on its own cache line.
#[repr(C)]
pub(crate) struct CqShared {
    /// The CQ's memory (read by a QP's reset/drop to find the last software-owned CQE).
    pub dv: DvCq,
    /// CQ entries taken (free-running, wrapping): by posted requests (every send WR,
    /// signaled or not, and every RQ receive), the posting budgets send queues hold and the
    /// static reservations of attached SRQs; less what the control path gave back (the
    /// requests of a reset or dropped QP). Posters (any thread) and the control path change
    /// it with read-modify-writes; the poller never writes it: the entries it gives back are
    /// counted by `ci` and `unreleased` ([`CqShared::given_back`]). In use: `reserved -
    /// given_back`.
    // Padded: the posters' read-modify-writes must not bounce the line of `ci` or `polling`.
    pub reserved: CachePadded<AtomicU32>,
    /// The poller's consumer index, published after each batch (`Release`).
    // Padded: written by the poller only; posters' writes to `reserved` leave it alone.
    pub ci: CachePadded<AtomicU32>,
    /// The CQEs the poller consumed that gave back no CQ entry (an SRQ's receive, a stale or
    /// stray CQE), less the entries CQEs gave back beyond their own one (the unsignaled
    /// requests a completion covers); free-running, wrapping. Written by the poller only,
    /// before the `ci` it goes with: the poller has given back `ci - unreleased` entries.
    /// A poll whose every CQE gives back exactly its request's entry (every fast path)
    /// leaves it alone, so giving entries back costs a poll nothing beyond publishing `ci`:
    /// no read-modify-write, no lock.
    // Padded: the posters read it with `ci`; `polling` is stored twice per poll.
    pub unreleased: CachePadded<AtomicU32>,
    /// True while a poll that found CQEs runs (set before it reads any QP's memory, cleared
    /// `Release` at its end). A dropped QP waits for it to clear after marking itself dead
    /// (`alive`, `SeqCst`), so the poller never reads a QP's ring or doorbell record after
    /// its memory is freed: either the poller sees `alive == false`, or the dropper sees the
    /// poll running and waits. The two sides cannot both miss: `SeqCst` stores on both, or a
    /// plain store behind a compiler barrier in the poll and `membarrier` in the drop
    /// (`mlx5/handshake.rs`, chosen once per process).
    // Padded: stored twice per poll; it must not share a line with the posters' `reserved`.
    pub polling: CachePadded<AtomicBool>,
    /// What the queues created on this CQ may have outstanding (control path: QP creation
    /// refuses a QP the CQ cannot absorb; see `providers/cq_room.rs`).
    pub commit: crate::cq_room::CqCommit,
    /// Set (once, for good) when the CQ went into error: the device reported an overrun or
    /// `IBV_EVENT_CQ_ERR` ([`CqShared::fail`]). Read by a poll that finds no CQE.
    pub error: AtomicBool,
    /// The QPs completing on this CQ (control path: registered at QP creation, marked by
    /// [`CqShared::fail`]).
    pub qps: std::sync::Mutex<Vec<std::sync::Weak<QpShared>>>,
}

impl CqShared {
    /// The CQ went into error (the device's overrun or `IBV_EVENT_CQ_ERR`; control path):
    /// every QP on it fails with the CQ named as the reason (posts refused with
    /// `PostError::CqError`, `state()` ERR), and polls report it once the ring is drained.
    pub fn fail(&self) {
        self.error.store(true, Ordering::SeqCst);
        let qps = self.qps.lock().unwrap_or_else(|p| p.into_inner());
        for qp in qps.iter().filter_map(std::sync::Weak::upgrade) {
            qp.cq_error
                .store(CQ_ERROR_SET | self.dv.cqn, Ordering::SeqCst);
            qp.fail();
        }
    }
    /// The entries the poller has given back (free-running): `ci - unreleased`. `ci` is read
    /// first: the `unreleased` read after it is at least as new as the one stored with it,
    /// so the count is never ahead of the poller (a newer `unreleased` only understates it).
    #[inline(always)]
    pub fn given_back(&self) -> u32 {
        let ci = self.ci.load(Ordering::Acquire);
        ci.wrapping_sub(self.unreleased.load(Ordering::Acquire))
    }

    /// Entries in use now (taken and not given back).
    pub fn in_use(&self) -> u32 {
        let given = self.given_back();
        self.reserved.load(Ordering::Acquire).wrapping_sub(given)
    }

    /// Reserve `n` entries; false (and nothing reserved) when the CQ could overrun. What the
    /// poller gave back is read before the reservation, so it is never newer than the
    /// reservations it accounts for and the entries in use are never understated.
    #[inline(always)]
    pub fn try_reserve(&self, n: u32) -> bool {
        let cap = self.dv.cqe_cnt;
        let given = self.given_back();
        let prev = self.reserved.fetch_add(n, Ordering::AcqRel);
        if prev.wrapping_add(n).wrapping_sub(given) > cap {
            self.reserved.fetch_sub(n, Ordering::Relaxed);
            return false;
        }
        true
    }
    /// Reserve up to `want` entries, as many as the CQ has left; returns how many (0: none
    /// left). Used by a send queue to take a posting budget at once (see `sq.rs`).
    pub fn grab(&self, want: u32) -> u32 {
        let cap = self.dv.cqe_cnt;
        let given = self.given_back();
        let mut cur = self.reserved.load(Ordering::Acquire);
        loop {
            let take = cap.saturating_sub(cur.wrapping_sub(given)).min(want);
            if take == 0 {
                return 0;
            }
            match self.reserved.compare_exchange_weak(
                cur,
                cur.wrapping_add(take),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return take,
                Err(now) => cur = now,
            }
        }
    }
    /// Give `n` entries back on the control path (requests of a reset or dropped QP that
    /// will never complete, an SRQ's reservation); the poller gives its own back through
    /// `ci` and `unreleased`.
    pub fn give_back(&self, n: u32) {
        if n != 0 {
            self.reserved.fetch_sub(n, Ordering::AcqRel);
        }
    }
    /// The CQEs the device has written for QP `qpn` and the poller has not consumed yet:
    /// the position one past the last software-owned CQE (scanning from the published ci),
    /// and how many CQEs before it name `qpn`, as (requester, responder) CQEs. Called on the
    /// control path (reset / drop of a QP, once the device stopped working on it): every
    /// CQE the device wrote for that QP lies before the position, and each of them occupies
    /// a slot of the ring until the poller consumes it.
    pub fn stale_of(&self, qpn: u32) -> (u32, u32, u32) {
        let mut ci = self.ci.load(Ordering::Acquire);
        let (mut req, mut resp) = (0, 0);
        for _ in 0..self.dv.cqe_cnt {
            if !super::cq::cqe_ready(&self.dv, ci) {
                break;
            }
            // Orders the owner-bit load above before the loads of the CQE body.
            crate::barrier::from_device_load_barrier();
            match super::cq::cqe_qp_side(&self.dv, ci) {
                (q, true) if q == qpn => req += 1,
                (q, false) if q == qpn => resp += 1,
                _ => {}
            }
            ci = ci.wrapping_add(1);
        }
        (ci, req, resp)
    }
}

/// [`SqEntry::nbb`] of a WQEBB where no WQE started yet: above any count of published
/// WQEBBs (at most 0xffff), as a `u32` and as an `i32`, so the poller's size checks fail it.
pub(crate) const NO_WQE: u32 = 0x4000_0000;

/// What the poster records for the WQE starting at a WQEBB, before it rings: its wr_id and
/// its size. 16 bytes, so one scaled index addresses the entry (and the WQE: 4 times that).
#[repr(C, align(16))]
pub(crate) struct SqEntry {
    pub wr_id: AtomicU64,
    /// The WQE's WQEBBs (its ctrl segment's `ds` rounded up to 64 bytes; [`NO_WQE`] where no
    /// WQE starts), in the low half; the high half is zero. One 8-byte word of a constant on
    /// the one-WQEBB fast path (one store of an immediate): no running count is recorded
    /// per WQE (see [`SqShared::big_end`] for how a covered completion is counted in O(1)).
    pub size: AtomicU64,
}

impl SqEntry {
    /// The WQE's WQEBBs ([`NO_WQE`] where none starts).
    #[inline(always)]
    pub fn nbb(&self) -> u32 {
        self.size.load(Ordering::Relaxed) as u32
    }
}
static_assertions::const_assert_eq!(core::mem::size_of::<SqEntry>(), 16);

/// Send-queue tracking, indexed by the first WQEBB of each WQE (`position & mask`).
///
/// The poster records `wqes[i]` (wr_id and size, [`SqEntry`]) for the WQE starting at WQEBB
/// `i` before it rings, and marks the other WQEBBs of a larger WQE [`NO_WQE`]; the poller
/// reads the entry of the WQE a requester CQE names (`wqe_counter`). The poster does not
/// touch an entry or the ring while its WQE is outstanding. So every WQEBB between the
/// retired and the published position holds either the entry of a WQE starting there or
/// `NO_WQE`, never an entry of an earlier lap: the size gives the retired position, and the
/// unsignaled requests a completion covers are the WQEs from the oldest outstanding one up to
/// the one named: their distance in WQEBBs when none of them is larger than one WQEBB
/// ([`SqShared::big_end`] tells, in O(1)), else counted by stepping by the sizes
/// ([`QpShared::wqes_between`]). The producer
/// position the poller checks a `wqe_counter` against is the one the poster published in the
/// doorbell record.
// `repr(C)`: `done` (poller-written) stays after the fields the poster reads.
#[repr(C)]
pub(crate) struct SqShared {
    /// The WQE starting at each WQEBB.
    pub wqes: Box<[SqEntry]>,
    /// `wqe_cnt - 1`.
    pub mask: u32,
    /// The WQEBB position just past the last WQE of more than one WQEBB posted since the
    /// queue's creation or reset (free-running; 0 before any), written by the poster's general
    /// path before it publishes that WQE (the one-WQEBB fast path never writes it), read by
    /// the poller. The fast ways take a covered completion only when it shows no such WQE
    /// outstanding ([`SqShared::no_big_from`]): then every WQE from the oldest outstanding
    /// one on is one WQEBB, and the WQEs a CQE covers are its distance in WQEBBs (libmlx5
    /// records a running count per WQE instead, `wqe_head`; here the fast post stores a
    /// constant).
    pub big_end: AtomicU32,
    /// Consumer side, written by the poller only, on one cache line (the poster reads both
    /// on its slow path).
    // Padded: the poller's stores must not invalidate the line holding `wrid` and `mask`.
    pub done: CachePadded<SqDone>,
}

/// What the poller has retired from a send queue.
pub(crate) struct SqDone {
    /// WQEBB position retired up to (free-running; the oldest outstanding WQE starts here).
    pub ci: AtomicU32,
    /// Requests retired (free-running), signaled and covered alike. The poster counts the
    /// requests it posts; the difference is what `max_send_wr` caps. Stored after `ci` (the
    /// fast path's covered completions add theirs as they are taken, before the run stores
    /// `ci`), and either may be seen newer than the other: each alone understates progress
    /// (a count ahead of `ci` counts requests that are done), never overstates it, so the
    /// poster's checks stay conservative.
    pub retired: AtomicU32,
}

impl SqDone {
    /// Poller side: requests up to WQEBB position `ci` are retired, `retired` of them in all
    /// (free-running).
    #[inline(always)]
    pub fn retire_to(&self, ci: u32, retired: u32) {
        self.ci.store(ci, Ordering::Release);
        self.retired.store(retired, Ordering::Release);
    }

    /// Poller side: `n` more requests retired, their WQEBBs not yet published in `ci` (the
    /// fast path's covered completions: `ci` follows when the run ends). The requests are
    /// done, so a `retired` ahead of `ci` overstates nothing.
    #[inline(always)]
    pub fn add_retired(&self, n: u32) {
        let r = self.retired.load(Ordering::Relaxed);
        self.retired.store(r.wrapping_add(n), Ordering::Release);
    }

    /// Poller side: requests up to WQEBB position `ci` are retired, `n` more of them.
    #[inline(always)]
    pub fn retire(&self, ci: u32, n: u32) {
        self.ci.store(ci, Ordering::Release);
        let r = self.retired.load(Ordering::Relaxed);
        self.retired.store(r.wrapping_add(n), Ordering::Release);
    }
}

impl SqShared {
    /// The entry of the WQE starting at WQEBB position `pos`.
    #[inline(always)]
    pub fn at(&self, pos: u32) -> &SqEntry {
        // SAFETY: `wqes` has `mask + 1` entries and the index is masked.
        unsafe { self.wqes.get_unchecked((pos & self.mask) as usize) }
    }

    /// No WQE of more than one WQEBB lies at or past WQEBB position `sci` (the poller's retired
    /// position): [`Self::big_end`] is not in `(sci, sci + wqe_cnt]`, where the end of any
    /// WQE posted and not retired lies (the poster never runs more than `wqe_cnt` WQEBBs past
    /// a retired position). Read after the published producer position the caller checks a
    /// `wqe_counter` against (the poster stores `big_end` before it publishes), so a larger
    /// WQE below that position is seen; a `big_end` of a later one, or one more than
    /// 2^32 - `wqe_cnt` WQEBBs old, only sends the CQE to a slower way.
    #[inline(always)]
    pub fn no_big_from(big_end: u32, sci: u32, mask: u32) -> bool {
        big_end.wrapping_sub(sci).wrapping_sub(1) > mask
    }

    /// wr_id of the WQE starting at WQEBB position `pos`.
    #[inline(always)]
    pub fn wrid_at(&self, pos: u32) -> u64 {
        self.at(pos).wr_id.load(Ordering::Relaxed)
    }

    pub fn new(wqe_cnt: u32) -> SqShared {
        SqShared {
            wqes: (0..wqe_cnt)
                .map(|_| SqEntry {
                    wr_id: AtomicU64::new(0),
                    size: AtomicU64::new(NO_WQE as u64),
                })
                .collect(),
            mask: wqe_cnt - 1,
            big_end: AtomicU32::new(0),
            done: CachePadded::new(SqDone {
                ci: AtomicU32::new(0),
                retired: AtomicU32::new(0),
            }),
        }
    }
}

/// The fast-path limit of a send queue: an inline WRITE / SEND of at most 12 bytes takes the
/// one-WQEBB fast path while the producer index `pi < fast_end` (unsigned; 0 = closed). The
/// poster sets it to its posting budget's limit when the QP allows the fast path (RC / UC,
/// `max_inline_data >= 12`, no `signal_every`) and that limit does not wrap past `u32::MAX`,
/// else to 0; the poller zeroes it right after it sets `QpShared::failed`, so the one load
/// the fast path makes anyway covers the budget, the QP type and state, the inline cap and a
/// failed QP (refused posts go the general way, which checks `failed`). Both sides use
/// `SeqCst` for the flag and the limit when they write (a Dekker pair: the poster stores the
/// limit, then loads `failed` and zeroes it if set; the poller stores `failed`, then zeroes
/// the limit), so a failed QP never keeps an open limit; the fast path reads it `Relaxed`.
/// Written at each budget refill (one per up to 256 WQEBBs posted) and on control-path events.
pub(crate) struct SqFastLimit {
    pub fast_end: AtomicU32,
}

impl SqFastLimit {
    pub fn new() -> SqFastLimit {
        SqFastLimit {
            fast_end: AtomicU32::new(0),
        }
    }
    /// Poller side: the QP failed (after `failed` was set).
    pub fn close(&self) {
        self.fast_end.store(0, Ordering::SeqCst);
    }
}

/// Receive-queue tracking (in-order ring).
// `repr(C)`: `head` and `tail` keep their order, each on its own cache line.
#[repr(C)]
pub(crate) struct RqShared {
    /// wr_id by slot (`head & mask`).
    pub wrid: Box<[AtomicU64]>,
    /// `wqe_cnt - 1`.
    pub mask: u32,
    /// Receives posted and published (poster).
    // Padded: written by the poster; the poller's `tail` stores must not share its line.
    pub head: CachePadded<AtomicU32>,
    /// Receives completed (poller).
    // Padded: written by the poller, read by the poster for room.
    pub tail: CachePadded<AtomicU32>,
}

impl RqShared {
    pub fn new(wqe_cnt: u32) -> RqShared {
        RqShared {
            wrid: (0..wqe_cnt).map(|_| AtomicU64::new(0)).collect(),
            mask: wqe_cnt.saturating_sub(1),
            head: CachePadded::new(AtomicU32::new(0)),
            tail: CachePadded::new(AtomicU32::new(0)),
        }
    }
}

/// SRQ tracking: wr_id by WQE index and a free bitmap pollers set and the poster drains.
pub(crate) struct SrqShared {
    /// wr_id by WQE index.
    pub wrid: Box<[AtomicU64]>,
    /// Bit `i` set: WQE `i` completed and may be linked back into the free list. Set by any
    /// poller (`fetch_or`, `Release`), taken by the poster (`swap(0)`, `Acquire`): several
    /// CQs, polled from several threads, may complete receives of one SRQ.
    pub freed: Box<[CachePadded<AtomicU64>]>,
    /// Number of WQEs.
    pub wqe_cnt: u32,
    /// The SRQ ring and its stride (scatter-to-CQE reads the data segments back).
    pub buf: *mut u8,
    pub stride: u32,
    /// Static CQ reservations: (CQ identity, QPs attached through it, what was committed on
    /// that CQ for the SRQ, see `providers/cq_room.rs`). Control path only.
    pub cq_refs: std::sync::Mutex<Vec<(usize, u32, crate::cq_room::Need)>>,
}

// SAFETY: `buf` points into SRQ memory the SRQ's owner keeps alive (held by the `Mlx5Srq` and
// every QP attached to it, see `super::owners`); everything else is atomic
// or behind the mutex.
unsafe impl Send for SrqShared {}
// SAFETY: as above.
unsafe impl Sync for SrqShared {}

impl SrqShared {
    pub fn new(wqe_cnt: u32, buf: *mut u8, stride: u32) -> SrqShared {
        SrqShared {
            buf,
            stride,
            cq_refs: std::sync::Mutex::new(Vec::new()),
            wrid: (0..wqe_cnt).map(|_| AtomicU64::new(0)).collect(),
            freed: (0..wqe_cnt.div_ceil(64))
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            wqe_cnt,
        }
    }
    /// Mark WQE `idx` free (poller side).
    #[inline(always)]
    pub fn free(&self, idx: u32) {
        if idx < self.wqe_cnt {
            self.freed[(idx / 64) as usize].fetch_or(1 << (idx % 64), Ordering::Release);
        }
    }
}

/// [`QpShared::cq_error`]: set, with the CQN in the low 24 bits.
pub(crate) const CQ_ERROR_SET: u32 = 1 << 31;

/// Marks that make a CQ drop the CQEs a reset or dropped QP left behind: `0` = none, else
/// `1 << 63 | position`: CQEs at positions before `position` belonging to this QP are stale.
pub(crate) const PURGE_ACTIVE: u64 = 1 << 63;

/// What a CQ knows about one QP.
pub(crate) struct QpShared {
    pub qpn: u32,
    pub sq: SqShared,
    /// `None` with an SRQ.
    pub rq: Option<RqShared>,
    pub srq: Option<std::sync::Arc<SrqShared>>,
    /// The SQ ring (for scatter-to-CQE of READ/atomic results: the local SGE is read from
    /// the WQE) and its size in bytes.
    pub sq_buf: *mut u8,
    pub sq_bytes: usize,
    /// The QP's doorbell record (`[1]`: the send counter the poster published, 16 bits).
    pub dbrec: *const u32,
    /// RQ ring and stride (scatter-to-CQE of receives).
    pub rq_buf: *mut u8,
    pub rq_stride: u32,
    /// Purge marks for the send CQ and the receive CQ (see [`PURGE_ACTIVE`]).
    pub purge_send: AtomicU64,
    pub purge_recv: AtomicU64,
    /// CQ entries still held for CQEs of this QP that the device wrote before a reset or
    /// drop and the poller has not consumed (requester CQEs on the send CQ, responder CQEs
    /// on the receive CQ): each occupies a ring slot until the poller discards it, and gives
    /// its entry back then (`cq/process.rs`). Set by the control path, taken by the poller.
    pub stale_send: AtomicU32,
    pub stale_recv: AtomicU32,
    /// Cleared when the QP is dropped: the CQ then drops its CQEs and forgets it.
    pub alive: AtomicBool,
    /// Set by the poller when it returns an error completion (error or flush CQE) for this
    /// QP: the device moved the QP to ERR, so the queues refuse posts with
    /// `PostError::BadState` from then on, as rxe does. Read by the poster's general paths;
    /// cleared by the control path when the QP goes back to RESET.
    pub failed: AtomicBool,
    /// `CQ_ERROR_SET | cqn` once a CQ this QP completes on went into error (0: none); the
    /// reason posts are refused with, and why a reset does not revive the QP.
    pub cq_error: AtomicU32,
    /// The send queue's fast-path limit, read on every post (see `sq.rs`).
    pub fast_limit: SqFastLimit,
    /// The CQs (to give back reservations on reset/drop).
    pub send_cq: std::sync::Arc<CqShared>,
    pub recv_cq: std::sync::Arc<CqShared>,
}

impl QpShared {
    /// The device moved the QP to ERR outside a CQE (an async QP_FATAL, or its CQ in error;
    /// control path): posts are refused and `state()` says ERR from now on, as after an error
    /// completion.
    pub fn fail(&self) {
        if !self.failed.swap(true, Ordering::SeqCst) {
            self.fast_limit.close();
        }
    }

    /// Why the queues refuse posts once `failed` is set: the CQ in error, or the QP in ERR.
    #[cold]
    pub fn failed_error(&self) -> crate::types::PostError {
        match self.cq_error.load(Ordering::Acquire) {
            0 => crate::types::PostError::BadState {
                state: crate::types::QpState::Err,
            },
            c => crate::types::PostError::CqError {
                cqn: c & !CQ_ERROR_SET,
            },
        }
    }
    /// WQEBBs of the WQE starting at position `pos`, as the poster recorded it ([`NO_WQE`]
    /// where none started yet). Only for a WQE the poster does not touch meanwhile: a staged
    /// or outstanding one.
    #[inline(always)]
    pub fn nbb_at(&self, pos: u32) -> u32 {
        self.sq.at(pos).nbb()
    }

    /// How many WQEs start in `[from, to)`, stepping by their recorded sizes (see
    /// [`Self::nbb_at`]); `None` when `to` is not the start of a WQE.
    #[inline]
    pub fn wqes_between(&self, from: u32, to: u32) -> Option<u32> {
        let mut p = from;
        let mut n = 0;
        while before(p, to) {
            p = p.wrapping_add(self.nbb_at(p));
            n += 1;
        }
        (p == to).then_some(n)
    }
}

// SAFETY: the raw pointers point into queue memory that `Mlx5Qp`'s owner keeps alive until the
// QP is dropped, and the CQ dereferences them (scatter-to-CQE) only for QPs still marked
// alive; all other fields are atomics or `Arc`s of `Sync` types.
unsafe impl Send for QpShared {}
// SAFETY: as above.
unsafe impl Sync for QpShared {}
// SAFETY: `DvCq` is plain addresses, only dereferenced through volatile reads of CQ memory
// that the CQ's owner keeps alive (held by the `Mlx5Cq` and every QP registered with it, see
// `super::owners`); the other fields are atomics.
unsafe impl Sync for CqShared {}
