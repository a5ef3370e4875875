//! The send-only run of the short way (see "The short way" in `cq.rs`): a stream of
//! successful requester CQEs of the hot QP, each completing its oldest outstanding WQE,
//! kept apart from the two-sided loop of `hot.rs` so that its state fits in registers. The
//! CQ remembers CQE bytes 56..59 (opcode and qpn) of the last CQE it took (`hot_want`): a
//! CQE with the same word is one compare; the WQE's size and wr_id are the poster's record
//! (`SqShared::wqes`, one entry); a completion is four stores (`put_req`).

use super::hot::{avail_at, len_qpn, PLAIN_MASK, REQ_LEN, REQ_OPCODE, REQ_OP_WITH_LEN};
use super::*;

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

/// Marks the branch that calls it as rarely taken (the register allocator then keeps the
/// loop's values in registers and spills around that branch instead).
#[cold]
#[inline(never)]
fn cold_path() {}

impl<D: Owners> Mlx5Cq<D> {
    /// [`Self::run_short`] with the send side alone: a stream of requester CQEs of the hot
    /// QP, each completing its oldest outstanding WQE. Kept apart from the two-sided loop
    /// so that its state fits in registers: the CQE and the completion are addressed by one
    /// index counting up to zero, the slot comes from the CQE's own (checked) `wqe_counter`,
    /// and a completion is four stores (`wr_id`; `byte_len` and `qp_num`; `opcode` and
    /// `status` from [`REQ_OK`]; the zero tail).
    #[inline(always)]
    pub(super) fn run_sq<const BIG: bool, const P: u8>(
        &self,
        ci: u32,
        cqe: *const u8,
        out: &mut [Completion],
    ) -> usize {
        // SAFETY: as in `run_short`.
        let qp = unsafe { &*self.hot_qp };
        // `alive` as in `process` (`SeqCst`, see `CqShared::polling`); no purge pending. (The
        // run reads the QP's entries, never its ring.)
        if !qp.alive.load(Ordering::SeqCst) || qp.purge_send.load(Ordering::Relaxed) != 0 {
            return 0;
        }
        let sq = &qp.sq;
        let mut sci = sq.done.ci.load(Ordering::Relaxed);
        // WQEBBs published and not retired: kept above 0 between CQEs (re-read at the
        // published position when it reaches 0), so an entry is read only for an
        // outstanding request (a stray CQE goes to `process`, which drops it).
        let mut avail = avail_at(qp.dbrec, sci);
        if avail == 0 {
            return 0;
        }
        const C: usize = core::mem::size_of::<Completion>();
        // CQE stride over completion stride.
        const fn scale(big: bool) -> usize {
            if big {
                1
            } else {
                0
            }
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
        let cqe_end = cqe.wrapping_add((m * C) << scale(BIG));
        let mut off = -((m * C) as isize);
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
        // The rest of a requester CQE completing with `lq` (`byte_len` and `qp_num`) and
        // `opst`: the checks against the send queue, the completion, the positions.
        macro_rules! send_cqe {
            ($wc:expr, $lq:expr, $opst:expr) => {{
                // The WQE named must be the oldest outstanding one.
                if $wc != sci as u16 {
                    break;
                }
                // (The counter is `sci`'s low 16 bits; the ring has at most 32768 WQEBBs.)
                let slot = (u32::from($wc) & sq_mask) as usize;
                // The WQE's entry: its size as the poster recorded it (`avail > 0` here) and
                // its wr_id.
                // SAFETY: `wqes` has `sq_mask + 1` entries and `slot` is masked.
                let e = unsafe { &*wqes.add(slot) };
                let (nbb, wr_id) = (
                    e.nbb.load(Ordering::Relaxed),
                    e.wr_id.load(Ordering::Relaxed),
                );
                // The whole WQE below the published producer position and more published
                // after it: one compare (`avail` is at most 0xffff and `nbb` at most 16 or
                // `NO_WQE`, all positive as `i32`).
                if avail as i32 > nbb as i32 {
                    // SAFETY: `out_end + off` is a whole `Completion` of `out` (`off < 0`).
                    unsafe { put_req(out_end.wrapping_offset(off).cast(), wr_id, $lq, $opst) };
                    sci = sci.wrapping_add(nbb);
                    avail -= nbb;
                } else {
                    cold_path();
                    // Past the published position as last read, or the last WQE published:
                    // look at the position again (the poster's only grows).
                    avail = self.reread_avail(sci);
                    if nbb > avail {
                        break;
                    }
                    // SAFETY: `out_end + off` is a whole `Completion` of `out` (`off < 0`).
                    unsafe { put_req(out_end.wrapping_offset(off).cast(), wr_id, $lq, $opst) };
                    sci = sci.wrapping_add(nbb);
                    avail -= nbb;
                    // Nothing more known outstanding: look at the published position again
                    // before the next CQE may read an entry.
                    if avail == 0 {
                        avail = self.reread_avail(sci);
                        if avail == 0 {
                            off += C as isize;
                            break;
                        }
                    }
                }
                off += C as isize;
            }};
        }
        // At least one CQE (`m > 0`: the caller saw the first one, before the ring's end).
        loop {
            let cqe = cqe_end.wrapping_offset(off << scale(BIG));
            // SAFETY: byte 63 of a CQE of this CQ (`cqe` is one of the `m` from `ci`, before
            // the ring's end).
            if unsafe { mmio::read8(cqe.add(cqe64::OP_OWN)) } & PLAIN_MASK != P {
                break;
            }
            // Orders the owner-bit load above before the loads of the CQE body below.
            from_device_load_barrier();
            // Bytes 56..59: sop (the WQE opcode) and the qpn, as a little-endian u32.
            // SAFETY: a 4-aligned word of the CQE (CQEs are 64-byte aligned).
            let word = u32::from_le(unsafe {
                core::ptr::read_volatile(cqe.add(cqe64::SOP_DROP_QPN) as *const u32)
            });
            // SAFETY: the 2-aligned wqe_counter field of the CQE.
            let wc = u16::from_be(unsafe {
                core::ptr::read_volatile(cqe.add(cqe64::WQE_COUNTER) as *const u16)
            });
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
                    let len = if w == u32::from(MLX5_OPCODE_RDMA_READ) {
                        // SAFETY: byte_cnt is a 4-aligned word of the CQE.
                        unsafe { be32_at(cqe, cqe64::BYTE_CNT) }
                    } else {
                        REQ_LEN[w as usize]
                    };
                    send_cqe!(wc, len_qpn(len, qpn), REQ_OK[w as usize]);
                    if off == 0 {
                        break;
                    }
                    continue;
                }
                want = word;
                opst = REQ_OK[w as usize];
            }
            send_cqe!(wc, lq, opst);
            if off == 0 {
                break;
            }
        }
        self.hot_want.set(want);
        // (`off` is a multiple of `C`, at most 0.)
        let k = (m as isize + (off >> C.trailing_zeros())) as usize;
        if k != 0 {
            // The QP loaded again (not kept in a register across the loop).
            // SAFETY: as above; `hot_qp` is a plain field of `self`.
            let qp = unsafe { &*core::ptr::read_volatile(&self.hot_qp) };
            qp.sq.done.retire(sci, k as u32);
        }
        k
    }

    /// [`avail_at`] for the hot QP, out of line: the short way's rare re-reads of the
    /// published producer position (the QP is loaded here, not kept live in the loop).
    #[cold]
    #[inline(never)]
    fn reread_avail(&self, sci: u32) -> u32 {
        avail_at(self.hot_dbrec(), sci)
    }
}
