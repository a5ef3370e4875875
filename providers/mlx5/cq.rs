//! The completion queue: owner-bit polling, CQE parsing, wr_id mapping.
//!
//! ## Indices
//!
//! - `ci` (consumer index, `u32`, free-running, written by the poller only): the next CQE to
//!   look at is slot `ci & (cqe_cnt - 1)`. A CQE is ours when its opcode is not INVALID (15)
//!   and its owner bit equals `(ci & cqe_cnt) != 0` (the wrap parity). The body is read only
//!   after that check, behind [`from_device_load_barrier`], with volatile loads (never `&`
//!   into CQ memory). With 128-byte CQEs the 64-byte CQE is the second half of the slot.
//! - After a batch: the barrier of "The fast path" below, then `dbrec[0] = be32(ci & 0xffffff)`
//!   once.
//!
//! ## Where each piece sits in libmlx5
//!
//! A reader who knows rdma-core's `providers/mlx5/cq.c` finds its steps here, split by how
//! often they run. libmlx5's `poll_cq` locks the CQ, calls `mlx5_poll_one` once per
//! completion (`mlx5_get_next_cqe`: `next_cqe_sw` / `get_sw_cqe` test the owner bit, the
//! load barrier, `cons_index` one on; then `mlx5_parse_cqe` dispatches on the CQE opcode)
//! and ends with `update_cons_index`. Here:
//!
//! | here | libmlx5 | what ours adds |
//! |---|---|---|
//! | `poll_inner` (`cq.rs`), the entry of `poll` | `poll_cq` / `mlx5_poll_cq` | no lock: `&mut self` is the exclusion; the polling handshake (`CqShared::polling`) with QP drop; picks a fast path by the first one or two CQEs |
//! | `cqe_ready`, `wire::cqe_sw_owned` and `cqe_sw_owned_x` (the one ownership rule) | `get_sw_cqe`, `next_cqe_sw` | one compare for owner bit and opcode (`cqe_sw_owned_x` on `op_own` XOR the parity); the address and parity of `ci` kept (`cur`, `cur_par`) |
//! | `from_device_load_barrier` after the owner test | `udma_from_device_barrier` in `mlx5_get_next_cqe` | the same |
//! | `poll_tail`, the general loop | the `for` loop of `poll_cq` over `mlx5_poll_one` | takes `run_hot` between CQEs that need `process` |
//! | `process` (`cq/process.rs`) | `mlx5_parse_cqe` | purge of a reset or dropped QP's CQEs (libmlx5 compacts the ring in `__mlx5_cq_clean` instead), QP liveness, the side check (a CQE of a side not on this CQ is dropped and counted) |
//! | `lookup` (`cq/table.rs`), `hot_qpn` | `get_req_context` / `get_qp_ctx` with `cur_rsc`, `mlx5_find_qp` | a linear table of the QPs on this CQ, the last hit cached across polls |
//! | `complete_send` (`cq/req.rs`) | the `MLX5_CQE_REQ` case of `mlx5_parse_cqe` with `handle_good_req` | opcode from our own SQ ring and wr_id from the poster's record (`SqShared::wqes`), never the CQE's word alone; `wqe_counter` checked against what is outstanding; covered (unsignaled) WRs counted, not just skipped (libmlx5's `wq->tail = wqe_head[idx] + 1`) |
//! | `complete_recv` (`cq/resp.rs`) | `handle_responder` (RQ tail, SRQ `wqe_counter`, `mlx5_free_srq_wqe`) | a receive with none outstanding, or an SRQ entry completed twice, is dropped and counted |
//! | `syndrome_status` and the error branch of `process` | `mlx5_handle_error_cqe` and the `REQ_ERR` / `RESP_ERR` case | the QP marked failed (`QpShared::failed`): its posts are refused from then on |
//! | `scatter_from_cqe`, `scatter_req` | `mlx5_copy_to_recv_wqe`, `mlx5_copy_to_recv_srq`, `mlx5_copy_to_send_wqe` | the copy bounded by the WQE's own SGEs and opcode; a CQE that does not fit is `GeneralErr` and counted |
//! | `finish`, `finish_one`, `advance_one` (`cq/one.rs`) | `update_cons_index` | [`consumer_index_barrier`] before the store; the published `ci` and the CQ entries given back (`CqShared::unreleased`: the ledger `PostError::CqFull` is decided on) |
//! | `run_short_any`, `run_short` (`cq/hot.rs`) | none: the whole of `mlx5_poll_one` per CQE | a poll that starts with plain CQEs of the hot QP goes to one of the runs below, chosen by its first two CQEs (one out-of-line instance per sides, CQE size and owner parity) |
//! | `run_sq` (`cq/send_run.rs`) | `mlx5_poll_one` + `handle_good_req` per requester CQE | a stream of successful requester CQEs in registers: one compare of CQE bytes 56..59 with the last one taken, the size and wr_id from the poster's record, four stores |
//! | `run_rq` (`cq/recv_run.rs`) | `mlx5_poll_one` + `handle_responder` per receive CQE | a stream of plain receives on the RQ, bounded up front by the receives published |
//! | `run_mixed` (`cq/hot.rs`) | the same, both sides | both sides' positions in registers, each checked before each CQE of its side |
//! | `run_hot`, `run_sides` (`cq/hot.rs`) | the same, inside the general loop | the fast path entered again after a CQE `process` took; the general counterpart of the three runs above |
//! | `req_cqe`, `req_cqe_covered` (`cq/send_run.rs`) | the `MLX5_CQE_REQ` case, `wqe_head` | the one requester-CQE path of every loop; the covered count in O(1) while only one-WQEBB WQEs are outstanding (the covered path) |
//! | `take_oldest_one`, `take_covered_one` (`cq/send_run.rs`) | the `MLX5_CQE_REQ` case for one CQE | the single requester CQE's two steps (the oldest WQE; a later one, covering), shared by `process_req` and `take_dedicated` |
//! | `process_req`, `process_req_covered` (`cq/req.rs`) | `mlx5_poll_one` for one requester CQE | a single requester CQE with nothing set up: the hot QP's checks, then the steps above against the published producer position |
//! | `poll_one`, `poll_one_recv`, `take_recv_one` (`cq/one.rs`) | `mlx5_poll_one` with `ne = 1` (`ibv_poll_cq(cq, 1, wc)`) | no slice; a requester or plain receive CQE taken inline, any other CQE through `poll` with one slot |
//! | `take_dedicated::<COVER>`, `take_dedicated_recv` (`cq/dedicated.rs`) | `mlx5_poll_one` on a CQ that one QP owns | no handshake, lookup, liveness or purge check: the pair's `&mut` rules them out; the same single-CQE steps against the last doorbell's position |
//! | `poll_ts`, `cqe_timestamp_at` (`cq/clock.rs`) | `mlx5_cq_read_wc_completion_ts` of the extended poll | the same loop instantiated with timestamps; the plain poll reads none |
//!
//! What every path adds to libmlx5's: a CQE is checked against what its QP has outstanding
//! (the published producer position, the RQ head, the SRQ's taken entries) before any ring
//! or record is read, so a lying device completes nothing twice and nothing never posted
//! (dropped CQEs go to [`Mlx5Cq::bogus_cqes`]); the CQ-entry ledger (`CqShared::ci`,
//! `unreleased`, `SqDone`) that lets a post refuse what would overrun the CQ; and the count
//! of covered requests (`SqDone::retired`) that `max_send_wr` is checked against.
//!
//! ### Why each specialised way remains
//!
//! Each was folded into its general counterpart and measured with `benches/compare.sh`
//! (plain memory, instructions per operation); a way stays only where a row shows its gain
//! (the bar: no row more than 1 instruction worse). Folded: the three runs' dispatch is one
//! out-of-line `run_short` per instance; the single requester CQE's steps
//! (`take_oldest_one`, `take_covered_one`) and the single receive (`take_recv_one`) are
//! written once for `poll_one` and the dedicated pair. Kept, and what folding cost:
//!
//! | way | folded into | rows worse |
//! |---|---|---|
//! | `run_sq` | the general loop (`run_hot`, `run_sides::<true, false>`) | `poll16` +16.5, `every1` +16.1, `cover16` +2.9 |
//! | `run_rq` | the general loop (`run_sides::<false, true>`) | `recv16` +12.9 |
//! | `run_mixed` | `run_sides::<true, true>`, both sides taken first | `mixed16` +9.5 (left to the general loop: +17.5) |
//! | `poll_one` | `poll` with a one-slot slice | the `one` row against `poll1`: +8.0 |
//! | `take_dedicated` (the pair's `poll_one`) | the CQ's `poll_one` | the `ded_one` row against `one`: +14.1 |
//!
//! The single-CQE steps take their completion's operands lazily (closures, the opcode by
//! value) and read the retired count after the completion's stores: with the operands as
//! values `ded16_one` +6.0, `ded_rt` +4.0, `poll1` +3.0; with the count read first
//! `cover_one` +3.0.
//!
//! ## Mapping a CQE to a request
//!
//! The CQE names the QP (`qpn` = low 24 bits at offset 56); the CQ keeps a small table of
//! the QPs registered with it (scanned linearly, last hit cached). Per QP:
//!
//! - requester CQEs (REQ, REQ_ERR): `wqe_counter` is the first WQEBB of the WQE that
//!   completed; its wr_id and size (WQEBBs) are the ones the poster recorded in the QP's
//!   `SqShared::wqes` before it rang (never the ring, which the device reads). The earlier
//!   unsignaled WRs the completion covers (`covered`, oldest `covered_from`) are the WQEs from
//!   the oldest outstanding one up to it: on the fast paths in O(1) while no WQE of more
//!   than one WQEBB is outstanding (`SqShared::big_end`, which only the poster's general
//!   path writes): the WQEBBs from the oldest outstanding WQE to the one named; else (and
//!   in `process`) by stepping through the recorded sizes, which refuses a `wqe_counter`
//!   that names no WQE start (the poster marks the other WQEBBs of a larger WQE). (libmlx5
//!   records a running count per WQE, `wqe_head`, for the same; the fast post here stores a
//!   constant size and nothing else.) A
//!   flush or error CQE retires exactly the WQE it names and the covered ones before it. The
//!   poller publishes the retired WQEBB position and the retired request count
//!   (`SqDone`), which the poster reads for room and for `max_send_wr`.
//! - responder CQEs on an RQ complete in order (the RQ tail); on an SRQ `wqe_counter` is the
//!   SRQ WQE index, which goes back to the SRQ's free list.
//!
//! CQEs of a QP that was reset or dropped ("DV owned" CQ: nobody else cleans it) are dropped:
//! at reset/drop the QP records the position just past the last CQE the device had written,
//! and the poller discards that QP's CQEs before it. Until then each of those stale CQEs
//! still occupies a ring slot, so the QP keeps one CQ entry reserved per stale CQE
//! (`QpShared::stale_send` / `stale_recv`) and gives back only the rest of what it held; the
//! poller gives each back as it discards the CQE. A reconnect, a reset or a new QP on the CQ
//! never counts on room the ring does not have yet: a post meanwhile is refused with
//! `PostError::CqFull` (one poll of the CQ discards the stale CQEs), never let into an
//! overrun.
//!
//! ## Errors
//!
//! Error CQEs map their syndrome to [`WcStatus`] and keep
//! `vendor_err = syndrome | vendor_syndrome << 8`. An error CQE means the device moved the QP
//! to ERR; the poller records that in the QP's shared state (`QpShared::failed`), after which
//! its queues refuse posts with `PostError::BadState` and `state()` reports ERR (the rxe
//! provider does the same), until the control path takes it back to RESET.
//!
//! Errors outside the CQEs arrive as async events, which the provider hands to
//! [`Mlx5Qp::mark_fatal`](super::Mlx5Qp::mark_fatal) (`QP_FATAL` and its kin: the same as an
//! error CQE) and [`Mlx5Cq::mark_error`] (`CQ_ERR`: the CQ overran or failed; the sim does
//! both itself). A CQ in error fails every QP on it with the CQ as the reason: their posts
//! are refused with `PostError::CqError` naming the CQ, `state()` says ERR, and a reset does
//! not revive them (nothing can complete on that CQ again). The CQ's poll returns the CQEs
//! still in its ring, then once a completion flagged `WcFlags::CQ_ERROR` (status
//! `GeneralErr`, `vendor_err` the CQN, no request): the requests still outstanding on its
//! QPs are lost and are not reported one by one. The check costs the empty poll one flag
//! load and nothing per CQE.
//!
//! ## Scatter-to-CQE
//!
//! On hardware the `mlx5` device glue creates QPs with scatter-to-CQE disabled
//! (`MLX5_SCATTER_TO_CQE=0` in the environment before QP creation, or
//! `mlx5dv_create_qp` with `MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE`). Should a CQE still
//! carry data (`op_own` bits 0x4: the data is in CQE bytes 0..32; 0x8: in the 64 bytes before
//! the CQE), the poller copies it into the local SGEs the WQE named (read back from our own
//! RQ / SRQ / SQ ring), so the caller sees the same bytes either way. A device can lie, so:
//!
//! - on the requester side the WQE's own opcode (from our SQ ring) decides, never the CQE's:
//!   only a READ (its SGEs, at most the CQE's byte count) or an atomic (8 bytes) takes data;
//! - the 64-byte form exists only with 128-byte CQEs (the data is the slot's first half; with
//!   64-byte CQEs those bytes are the previous CQE or memory before the ring);
//! - the SQ position, RQ tail or SRQ slot is given back only after the copy (the poster may
//!   rewrite the entry's data segments as soon as it is);
//! - a CQE whose data cannot go where the request said is reported `GeneralErr`, nothing
//!   written, and counted in [`Mlx5Cq::bogus_cqes`].
//!
//! A CQE naming nothing outstanding (no send WQE between the retired and the published
//! position, an empty RQ, an SRQ entry already completed and not yet taken back by the
//! poster) is dropped and counted before any ring is read, so no request completes twice.
//!
//! ## CQ overrun
//!
//! Every send WR (signaled or not: a QP that fails may flush each outstanding WQE with its
//! own error CQE) and every RQ receive reserves one CQ entry at post time; an SRQ reserves
//! its whole size once per CQ it may complete into. A post that would exceed `cqe_cnt` is
//! refused with `PostError::CqFull`. A send queue reserves its entries ahead, as a posting
//! budget (see `sq.rs`), which [`Mlx5Cq::reserved`] counts too. The poller gives the entries
//! back without a read-modify-write: a CQE gives back its request's entry when the poll
//! publishes `ci`, and the CQE that gives back none or more than one (an SRQ receive, a
//! stale or stray CQE, a completion covering unsignaled requests) moves a poller-written
//! count, `CqShared::unreleased`, stored before `ci` (the fast path's covered completions
//! store it as they are taken, with the covered requests' count in `SqDone::retired`); posters compute the entries in use as
//! `reserved - (ci - unreleased)`, reading the poller's side first so it never runs ahead of
//! them. `Provider::create_qp` refuses a QP unless the CQ absorbs every queue
//! on it (`providers/cq_room.rs`), so for QPs made there the refusal comes only while CQEs
//! of a reset or dropped QP still sit unpolled in the ring (see above).
//!
//! ## The fast path
//!
//! Successful CQEs without scattered data of the QP the last CQE named (the hot QP) take a
//! fast path without the QP table, the purge logic or the walk (`cq/hot.rs`):
//!
//! - a requester CQE (opcode REQ) that completes the oldest outstanding send WQE, or a
//!   later one (selective signaling: the WQEs before it retire with it, counted in O(1),
//!   `req_cqe_covered` in `cq/send_run.rs`: the WQE named lies below the published producer
//!   position and no WQE of more than one WQEBB is outstanding, so every WQEBB from the
//!   oldest outstanding one to it starts a one-WQEBB WQE and the count is its distance;
//!   with a larger WQE outstanding the CQE goes to `process`; the two-sided run at a poll's
//!   start, `run_mixed`, stops at such a CQE and the general loop's `run_sides` takes it,
//!   so that run's loop keeps its registers);
//! - a responder CQE of a plain SEND (no immediate) on the QP's RQ (not an SRQ), with a
//!   receive outstanding.
//!
//! Per CQE: one test of `op_own` against the expected owner parity (opcode, no scatter bits),
//! the load barrier, then one 8-byte load of CQE bytes 56..63 compared with the QP number and
//! the expected `wqe_counter` (a receive: bytes 56..59, the QP number). A send WQE's size
//! comes from the poster's record, checked against the producer position the poster published in
//! the QP's doorbell record (re-read only when a WQE seems past it); a receive against the
//! RQ head the poster published. The queues' positions sit in registers (`Hot`, each side
//! taken once per poll at its first CQE, when the QP has no purge pending and is alive) and
//! are published when the fast path ends or before any CQE goes to `process`. A single
//! requester CQE (a poll of one slot, [`Mlx5Cq::poll_one`], or a CQE with no software-owned
//! CQE after it) goes through `process_req`, nothing to set up: the hot QP and an opcode
//! without a byte length in one compare, the QP's liveness and purge, the oldest
//! outstanding WQE, its recorded size below the published producer position, four stores
//! (from `poll_one`, a CQE covering unsignaled requests too, with the checks above; a poll
//! of one slot leaves it to the general loop, whose fast path takes it).
//! `poll_one` takes a single successful receive without scattered data (SEND, SEND or
//! RDMA WRITE WITH IMMEDIATE) of the hot QP's RQ through `process_recv` the same way. Every
//! other CQE goes to `process`.
//!
//! A poll whose first CQE is a plain one (requester or receive) while a hot QP is known
//! starts with `run_short` instead: by the first two CQEs, the requester-only run
//! (`run_sq`), the receive-only run (`run_rq`) or the two-sided one (`run_mixed`,
//! `cq/hot.rs`). Each takes its sides straight into registers and is instantiated per CQE
//! size and owner parity, so it keeps neither in a register. The QP number and the WQE
//! opcode come from one 4-byte load (bytes 56..59 XOR the QP's number leave the opcode; one
//! compare checks the QP and that the opcode carries no byte length), the `wqe_counter` from
//! a 2-byte one. With the send side alone the count of published, not retired WQEBBs is
//! kept above zero between CQEs (re-read at the published position when it reaches zero,
//! before the next CQE may read the ring); with the receive side alone the run takes at
//! most as many CQEs as receives are published and not completed; with both each count is
//! checked before each CQE of its side. A run publishes what it reached; the general loop
//! above takes over at the CQE where it stopped, if that one is software-owned. Every loop
//! takes a requester CQE through the one requester-CQE path, `req_cqe` (`cq/send_run.rs`).
//!
//! A stream of requester CQEs alone (`run_sq`, `cq/send_run.rs`) is tighter still: the CQ
//! remembers bytes 56..59 of the last CQE it took (opcode and qpn; reset to the hot QP's
//! number whenever the hot QP changes), so a CQE of the same opcode and QP is one compare,
//! and its completion is four stores (`wr_id`; `byte_len` with `qp_num`; `opcode` with
//! `status` from a table by WQE opcode; the zero tail). Another opcode of the hot QP takes an
//! out-of-line branch (READ and atomics, which carry a byte length, are taken there one by
//! one); another QP ends the run.
//!
//! A stream of receive CQEs alone (`run_rq`, `cq/recv_run.rs`) is bounded up front by the
//! receives published (no count per CQE), addresses the CQE and the completion by one index,
//! and keeps the QP out of its loop: its state fits in registers, whatever crate names the
//! device type the CQ is instantiated with.
//!
//! The CQ keeps the address of the CQE at `ci` and its owner parity (`cur`, `cur_par`), set
//! at the end of every poll that moved `ci`: a poll starts with two loads and one test.
//!
//! A CQ that one QP alone completes into, owned together with it
//! ([`Mlx5Dedicated`](super::Mlx5Dedicated)), has a way of its own for that QP's plain
//! requester CQEs (`cq/dedicated.rs`): no polling handshake, QP lookup, liveness or purge
//! check, since nothing can happen to the QP or the CQ while the pair polls; every other CQE
//! goes through the ways above (a CQE covering unsignaled requests: the pair's slow way,
//! `take_dedicated::<true>`, with the same checks against the last doorbell's position).
//!
//! After the last CQE of a poll the consumer index goes to the CQ doorbell record once,
//! behind [`consumer_index_barrier`]: the CQE loads must be complete before that store hands
//! the slots back.
//!
//! A CQ created to report completion timestamps reads the 64-bit timestamp at CQE byte 48
//! in [`Mlx5Cq::poll_ts`]: the same loop instantiated with timestamps (a const generic), the
//! read done beside `run_hot` and `process` while the slots are still ours. The plain `poll`
//! is the instance without them: no load, no branch.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crossbeam_utils::CachePadded;

use super::dv::DvCq;
use super::owners::Owners;
use super::shared::{CqShared, QpShared};
use super::Mlx5Device;
use crate::barrier::{consumer_index_barrier, from_device_load_barrier};
use crate::mmio;
use crate::wire::{
    cqe_parity, cqe_sw_owned, cqe_sw_owned_x, MLX5_CQE64_LEN, MLX5_CQE_OPCODE_SHIFT, MLX5_CQE_REQ,
    MLX5_CQE_REQ_ERR, MLX5_CQE_SYNDROME_BAD_RESP_ERR, MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR,
    MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR, MLX5_CQE_SYNDROME_LOCAL_PROT_ERR,
    MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR, MLX5_CQE_SYNDROME_MW_BIND_ERR,
    MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR, MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR,
    MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR, MLX5_CQE_SYNDROME_REMOTE_OP_ERR,
    MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR, MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR,
    MLX5_CQE_SYNDROME_WR_FLUSH_ERR, MLX5_CQ_CI_MASK, MLX5_INLINE_SCATTER_32,
    MLX5_INLINE_SCATTER_64, MLX5_QPN_MASK,
};
use crate::{Completion, CompletionQueue, WcFlags, WcStatus};

/// Error syndromes (CQE byte 55) as `WcStatus`, as libmlx5 maps them; unknown syndromes
/// map to `GeneralErr`.
pub fn syndrome_status(syndrome: u8) -> WcStatus {
    match syndrome {
        MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR => WcStatus::LocLenErr,
        MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR => WcStatus::LocQpOpErr,
        MLX5_CQE_SYNDROME_LOCAL_PROT_ERR => WcStatus::LocProtErr,
        MLX5_CQE_SYNDROME_WR_FLUSH_ERR => WcStatus::WrFlushErr,
        MLX5_CQE_SYNDROME_MW_BIND_ERR => WcStatus::MwBindErr,
        MLX5_CQE_SYNDROME_BAD_RESP_ERR => WcStatus::BadRespErr,
        MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR => WcStatus::LocAccessErr,
        MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR => WcStatus::RemInvReqErr,
        MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR => WcStatus::RemAccessErr,
        MLX5_CQE_SYNDROME_REMOTE_OP_ERR => WcStatus::RemOpErr,
        MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR => WcStatus::RetryExcErr,
        MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR => WcStatus::RnrRetryExcErr,
        MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR => WcStatus::RemAbortErr,
        _ => WcStatus::GeneralErr,
    }
}

/// Address of the 64-byte CQE of position `ci`.
#[inline(always)]
fn cqe_ptr(dv: &DvCq, ci: u32) -> *const u8 {
    let slot = (ci & (dv.cqe_cnt - 1)) as usize * dv.cqe_size as usize;
    // `wrapping_add`: pure address arithmetic; dereferenced only through `mmio`.
    dv.buf
        .wrapping_add(slot + dv.cqe_size as usize - MLX5_CQE64_LEN)
}

/// True when the CQE at position `ci` is software-owned (valid opcode, owner bit = parity).
#[inline(always)]
pub(crate) fn cqe_ready(dv: &DvCq, ci: u32) -> bool {
    // SAFETY: `dv.buf` holds `cqe_cnt` CQEs of `cqe_size` bytes (from_dv's contract); byte 63
    // of the slot's CQE is inside it.
    let op_own = unsafe { cqe::op_own(cqe_ptr(dv, ci)) };
    cqe_sw_owned(op_own, ci, dv.cqe_cnt)
}

/// The QP number a software-owned CQE at position `ci` names, and whether it is a requester
/// CQE (REQ or REQ_ERR). Control path only: a reset or dropped QP counts the CQEs it leaves
/// in the ring (`CqShared::stale_of`); the caller checked [`cqe_ready`] and ordered it before
/// this with the from-device load barrier.
pub(crate) fn cqe_qp_side(dv: &DvCq, ci: u32) -> (u32, bool) {
    let cqe = cqe_ptr(dv, ci);
    // SAFETY: a 64-byte CQE of this CQ (from_dv's contract); bytes 56..59 and 63 are in it.
    let (op_own, qpn) = unsafe { (cqe::op_own(cqe), cqe::sop_drop_qpn(cqe) & MLX5_QPN_MASK) };
    let opcode = op_own >> MLX5_CQE_OPCODE_SHIFT;
    (qpn, opcode == MLX5_CQE_REQ || opcode == MLX5_CQE_REQ_ERR)
}

/// [`Mlx5Cq`]'s `hot_tag` without a hot QP: bit 32 set, so no 4-byte CQE word XORed with it
/// is at most 0xff (a CQE naming qpn 0xffffff matches no QP).
const NO_HOT_TAG: u64 = 1 << 32;

/// The `op_own` bits that say the data is in the CQE (scatter to CQE).
const INLINE_SCATTER: u8 = MLX5_INLINE_SCATTER_32 | MLX5_INLINE_SCATTER_64;

/// A QP registered with this CQ.
struct Entry {
    qpn: u32,
    qp: Arc<QpShared>,
    /// Send completions of this QP land here.
    send: bool,
    /// Receive completions land here.
    recv: bool,
}

/// An mlx5 completion queue (hardware or sim memory).
// `repr(C, align(64))`: the fields keep the order written, so what every poll reads (`dv`
// through `last`) shares the first cache lines ahead of the rarely touched counters.
#[repr(C, align(64))]
pub struct Mlx5Cq<D: Owners = Mlx5Device> {
    dv: DvCq,
    /// Consumer index (see the module doc). Poller-private; published to `shared.ci`.
    ci: u32,
    /// The 64-byte CQE of position `ci` is at `cqe0 + ((ci & (cqe_cnt - 1)) << cqe_shift)`
    /// (`cqe0`: the first slot's 64-byte CQE; `cqe_shift`: 6 or 7).
    cqe0: *const u8,
    cqe_shift: u32,
    /// `1 << cqe_shift`, and `cqe_cnt - 1`: a poll's first CQE address is one `and`, one
    /// multiply and one add from `ci`, each with its operand straight from memory.
    cqe_stride: usize,
    slot_mask: u32,
    /// The owner parity of `ci` (`(ci & cqe_cnt) != 0` as 0 or 1), and the 64-byte CQE of
    /// position `ci`: set with `ci` at the end of every poll that moved it, so a poll starts
    /// with two loads (no address arithmetic).
    cur_par: u8,
    /// The process polls with the light side of the polling handshake
    /// ([`super::handshake`]: `PollBarrier::Membarrier`).
    light: bool,
    cur: *const u8,
    /// The QP of the last CQE mapped (qpn, and its entry's `QpShared`, kept alive by
    /// `entries`; `u32::MAX`: none). Reset whenever `entries` changes.
    hot_qpn: u32,
    hot_qp: *const QpShared,
    /// The hot QP's number as CQE bytes 57..59 hold it (bits 8..31 of the little-endian u32
    /// of bytes 56..59), or [`NO_HOT_TAG`]: XORed with that u32 it leaves at most 0xff
    /// (the WQE opcode) exactly for a CQE of the hot QP, and never when there is none.
    /// Requester CQEs are checked against it; `NO_HOT_TAG` when the hot QP's send side
    /// does not complete into this CQ (a lying device's CQE then matches nothing).
    hot_tag: u64,
    /// The same for responder CQEs: `NO_HOT_TAG` unless its receive side completes here.
    hot_rtag: u64,
    /// The hot QP's sides that complete into this CQ (`HOT_SEND`, `HOT_RECV`): the runs take
    /// only those.
    hot_sides: u8,
    /// CQE bytes 56..59 (WQE opcode and qpn, as a little-endian u32) of the last CQE the
    /// requester-only run took, where the next run starts (see `run_sq`). Always names the hot
    /// QP: set to its number with opcode 0 whenever `hot_qpn` changes.
    hot_want: core::cell::Cell<u32>,
    shared: Arc<CqShared>,
    entries: Vec<Entry>,
    /// Index into `entries` of the last hit.
    last: usize,
    /// CQEs that named an unknown QP or a WQE outside the outstanding range (dropped).
    bogus: u64,
    /// Completion timestamps: the CQ's format and clock info (`None`: not asked for).
    clock: Option<Box<super::ts::CqClock>>,
    /// Keeps the CQ memory alive; every QP registered with this CQ holds it too.
    pub(crate) owner: Arc<D::Cq>,
    /// The CQ's error (`CqShared::error`) was reported by a poll.
    error_reported: bool,
}

// SAFETY: `cqe0` points into the CQ memory `owner` keeps alive (like `dv`, which is `Send`);
// only this poller (`&mut self`) reads through it.
unsafe impl<D: Owners> Send for Mlx5Cq<D> {}

impl<D: Owners> std::fmt::Debug for Mlx5Cq<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mlx5Cq")
            .field("cqn", &self.dv.cqn)
            .field("cqe_cnt", &self.dv.cqe_cnt)
            .field("ci", &self.ci)
            .finish_non_exhaustive()
    }
}

impl<D: Owners> Mlx5Cq<D> {
    /// Wrap a CQ's memory.
    ///
    /// # Safety
    /// `dv` memory stays valid and is used as an mlx5 CQ (only by this object and the device)
    /// until drop; `owner` keeps it alive. The ring is initialised the way the device expects
    /// (every `op_own = 0xF0` in a new CQ).
    pub unsafe fn from_dv(dv: DvCq, owner: D::Cq) -> crate::Result<Mlx5Cq<D>> {
        let bad = |detail: String| crate::Error::InvalidArgument {
            context: "Mlx5Cq::from_dv",
            detail,
        };
        if dv.buf.is_null() || dv.dbrec.is_null() {
            return Err(bad("null CQ buffer or doorbell record".into()));
        }
        if !dv.cqe_cnt.is_power_of_two() || dv.cqe_cnt < 2 {
            return Err(bad(format!(
                "cqe_cnt {} is not a power of two >= 2",
                dv.cqe_cnt
            )));
        }
        if dv.cqe_size != 64 && dv.cqe_size != 128 {
            return Err(bad(format!(
                "cqe_size {} is neither 64 nor 128",
                dv.cqe_size
            )));
        }
        if dv.buf as usize % 64 != 0 || dv.dbrec as usize % 4 != 0 {
            return Err(bad(
                "CQ buffer not 64-byte aligned or dbrec not 4-byte aligned".into(),
            ));
        }
        Ok(Mlx5Cq {
            dv,
            ci: 0,
            cqe0: dv.buf.wrapping_add(dv.cqe_size as usize - MLX5_CQE64_LEN),
            cqe_shift: dv.cqe_size.trailing_zeros(),
            cqe_stride: dv.cqe_size as usize,
            slot_mask: dv.cqe_cnt - 1,
            cur_par: 0,
            light: super::handshake::poll_barrier() == super::handshake::PollBarrier::Membarrier,
            cur: dv.buf.wrapping_add(dv.cqe_size as usize - MLX5_CQE64_LEN),
            hot_qpn: u32::MAX,
            hot_qp: core::ptr::null(),
            hot_tag: NO_HOT_TAG,
            hot_rtag: NO_HOT_TAG,
            hot_sides: 0,
            hot_want: core::cell::Cell::new(0),
            shared: Arc::new(CqShared {
                dv,
                reserved: CachePadded::new(0.into()),
                unreleased: CachePadded::new(0.into()),
                ci: CachePadded::new(0.into()),
                polling: CachePadded::new(false.into()),
                commit: Default::default(),
                error: false.into(),
                qps: Default::default(),
            }),
            error_reported: false,
            entries: Vec::with_capacity(8),
            last: 0,
            bogus: 0,
            clock: None,
            owner: Arc::new(owner),
        })
    }

    /// The CQ in error, reported once as a completion flagged `WcFlags::CQ_ERROR`.
    #[cold]
    #[inline(never)]
    fn report_error(&mut self, out: &mut [Completion]) -> usize {
        if self.error_reported {
            return 0;
        }
        self.error_reported = true;
        out[0] = Completion {
            status: WcStatus::GeneralErr,
            flags: WcFlags::CQ_ERROR,
            vendor_err: self.dv.cqn,
            ..Completion::EMPTY
        };
        1
    }

    /// True once the CQ went into error (an overrun or the device's `IBV_EVENT_CQ_ERR`):
    /// nothing more completes on it; see `WcFlags::CQ_ERROR`.
    pub fn in_error(&self) -> bool {
        self.shared.error.load(Ordering::Acquire)
    }

    /// The device reported this CQ in error (`IBV_EVENT_CQ_ERR`, or the sim's overrun):
    /// marks it and every QP on it (see [`WcFlags::CQ_ERROR`]). Control path; the providers
    /// call it when they learn of the event.
    pub fn mark_error(&self) {
        self.shared.fail();
    }

    /// CQ number.
    pub fn cqn(&self) -> u32 {
        self.dv.cqn
    }
    /// The consumer index (free-running).
    pub fn ci(&self) -> u32 {
        self.ci
    }
    /// CQ entries currently spoken for by posted requests and by send queues' posting
    /// budgets (see the module doc).
    pub fn reserved(&self) -> u32 {
        self.shared.in_use()
    }
    /// CQEs dropped because they named no registered QP or no outstanding WQE.
    pub fn bogus_cqes(&self) -> u64 {
        self.bogus
    }
    /// The CQ's doorbell record (`[0]` consumer index, `[1]` arm word), for
    /// [`CqArm`](super::arm::CqArm).
    pub fn dbrec(&self) -> *mut u32 {
        self.dv.dbrec
    }
    /// A handle that keeps the CQ's memory (ring, record, the owner's mappings) alive.
    pub fn keep_alive(&self) -> Arc<dyn std::any::Any + Send + Sync> {
        Arc::clone(&self.owner) as Arc<dyn std::any::Any + Send + Sync>
    }
    /// The poll loop. With `TS`, `ts[i]` gets the raw timestamp of the CQE that gave
    /// `out[i]` (`ts` at least as long as `out`); without, the code is the plain poll's.
    #[inline(always)]
    fn poll_inner<const TS: bool>(&mut self, out: &mut [Completion], ts: &mut [u64]) -> usize {
        let start_ci = self.ci;
        if out.is_empty() {
            return 0;
        }
        let cqe = self.cur;
        debug_assert_eq!(cqe, cqe_ptr(&self.dv, start_ci));
        // SAFETY: byte 63 of a CQE of this CQ (from_dv's contract).
        let op_own = unsafe { cqe::op_own(cqe) };
        let parity = self.cur_par;
        let x = op_own ^ parity;
        // Not software-owned: empty, one test (the busy-poll case).
        if !cqe_sw_owned_x(x) {
            // Nothing in the ring: the one place a CQ in error is reported (see
            // `WcFlags::CQ_ERROR`); one flag load on the empty poll only.
            if self.shared.error.load(Ordering::Relaxed) {
                return self.report_error(out);
            }
            return 0;
        }
        let cnt = self.dv.cqe_cnt;
        let first = start_ci & self.slot_mask;
        // A plain requester CQE (opcode REQ) or a plain receive (RESP_SEND), no scattered
        // data: one test each; any other software-owned CQE: the general loop (below).
        const PM: u8 = crate::wire::CQE_PLAIN_OWNED_MASK;
        const RESP_PLAIN: u8 = crate::wire::MLX5_CQE_RESP_SEND << MLX5_CQE_OPCODE_SHIFT;
        let plain_req = x & PM == 0;
        let plain_resp = !plain_req && (x ^ RESP_PLAIN) & PM == 0;
        // The shared state by address, kept for the end of the poll (not reloaded from `self`
        // after the barriers).
        let shared: *const CqShared = Arc::as_ptr(&self.shared);
        // SAFETY: `self.shared` is an `Arc` this CQ holds and never replaces.
        let shared = unsafe { &*shared };
        // From here on QP memory is read (see `CqShared::polling`).
        super::handshake::enter_poll(&shared.polling, self.light);
        let (mut n, mut ci, mut released) = (0, start_ci, 0u32);
        // The next CQE, when there is a slot for it and it is before the ring's end: not
        // written yet, the first CQE is a single one (completions trickling in); a plain CQE of
        // the other kind, the stream is a mixed one (both sides at once).
        let peek = out.len() > 1 && first + 1 != cnt;
        let y = if peek {
            // SAFETY: byte 63 of the next CQE of this CQ (not past the ring's end).
            let next = unsafe { cqe::op_own(cqe.wrapping_add(self.cqe_stride)) };
            next ^ parity
        } else {
            0
        };
        // The CQEs a run of the fast path took, if one ran.
        let run = if plain_req {
            if out.len() == 1 || (peek && !cqe_sw_owned_x(y)) {
                // A single requester CQE: the single-CQE way, with nothing to set up
                // (without a hot QP its tag matches no CQE).
                // Orders the owner-bit load above before the loads of the CQE body below.
                from_device_load_barrier();
                if self.process_req::<false>(cqe, &mut out[0]) {
                    if TS {
                        ts[0] = self.cqe_timestamp_at(ci);
                    }
                    self.finish_one(shared, ci, cqe);
                    return 1;
                }
                None
            } else if self.hot_qpn != u32::MAX {
                let rq = peek && (y ^ RESP_PLAIN) & PM == 0;
                Some(self.run_short_any(true, rq, parity, ci, cqe, out))
            } else {
                None
            }
        } else if plain_resp && self.hot_qpn != u32::MAX {
            let sq = peek && y & PM == 0;
            Some(self.run_short_any(sq, true, parity, ci, cqe, out))
        } else {
            None
        };
        if let Some(k) = run {
            if TS {
                // One completion per CQE; the slots are still ours (the dbrec store
                // comes last).
                for (j, t) in ts[..k].iter_mut().enumerate() {
                    *t = self.cqe_timestamp_at(ci.wrapping_add(j as u32));
                }
            }
            n = k;
            ci = ci.wrapping_add(k as u32);
            released = k as u32;
            if n == out.len() || !cqe_ready(&self.dv, ci) {
                self.finish(shared, ci, start_ci, released);
                return n;
            }
        }
        self.poll_tail::<TS>(shared, out, ts, n, ci, start_ci, released)
    }

    /// The general loop of a poll from position `ci` (`n` completions in `out` already,
    /// `released` CQ entries to give back; `shared.polling` set), then [`Self::finish`].
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn poll_tail<const TS: bool>(
        &mut self,
        shared: &CqShared,
        out: &mut [Completion],
        ts: &mut [u64],
        mut n: usize,
        mut ci: u32,
        start_ci: u32,
        mut released: u32,
    ) -> usize {
        // The fast path for the hot QP, taken at its first CQE (see `run_hot`).
        let mut hot = Hot::new(self.hot_qpn, self.hot_qp, self.hot_sides);
        while n < out.len() {
            if self.hot_qpn != u32::MAX {
                let h = &mut hot;
                let k = self.run_hot(h, ci, &mut out[n..]);
                if TS {
                    // One completion per CQE on the fast path; the slots are still ours
                    // (the dbrec store comes last).
                    for j in 0..k {
                        ts[n + j] = self.cqe_timestamp_at(ci.wrapping_add(j as u32));
                    }
                }
                n += k;
                ci = ci.wrapping_add(k as u32);
                released += k as u32;
                if h.idle {
                    break;
                }
                if k != 0 {
                    // Stopped at the ring's end or at a CQE that may need the other side
                    // taken: once more.
                    continue;
                }
            }
            let cqe = cqe_ptr(&self.dv, ci);
            // SAFETY: byte 63 of a CQE of this CQ (from_dv's contract).
            let op_own = unsafe { cqe::op_own(cqe) };
            if !cqe_sw_owned(op_own, ci, self.dv.cqe_cnt) {
                break;
            }
            // Orders the owner-bit load above before the loads of the CQE body below.
            from_device_load_barrier();
            // `process` reads and retires either queue: publish what the fast path did; it
            // is taken again (for the QP `process` maps, which becomes the hot one) after.
            hot.flush();
            self.ci = ci;
            // Its own counter: `released` stays in a register on the other paths.
            let mut rel = 0;
            let got = self.process(cqe, op_own, &mut out[n], &mut rel) as usize;
            released += rel;
            hot = Hot::new(self.hot_qpn, self.hot_qp, self.hot_sides);
            if TS && got == 1 {
                ts[n] = self.cqe_timestamp_at(ci);
            }
            n += got;
            ci = ci.wrapping_add(1);
        }
        hot.flush();
        self.finish(shared, ci, start_ci, released);
        n
    }

    /// The end of a poll that found CQEs: the consumer index (position `ci`) to the CQ
    /// doorbell record if it moved from `start_ci`, `released` CQ entries given back, and
    /// `shared.polling` cleared.
    #[inline(always)]
    pub(super) fn finish(&mut self, shared: &CqShared, ci: u32, start_ci: u32, released: u32) {
        self.ci = ci;
        if ci != start_ci {
            self.cur = self
                .cqe0
                .wrapping_add((ci & self.slot_mask) as usize * self.cqe_stride);
            self.cur_par = cqe_parity(ci, self.dv.cqe_cnt);
            // Orders the CQE loads above before the dbrec store below, which lets the device
            // reuse their slots.
            consumer_index_barrier();
            // SAFETY: `dbrec` is the CQ's 4-byte aligned doorbell record (from_dv's contract).
            unsafe { mmio::write32(self.dv.dbrec, (ci & MLX5_CQ_CI_MASK).to_be()) };
            // Entries given back: one per CQE is what `ci` says; the difference, if any,
            // goes to `unreleased` first (see `CqShared::unreleased`).
            let consumed = ci.wrapping_sub(start_ci);
            if released != consumed {
                // Written by this poller only: its own last store.
                let u = shared
                    .unreleased
                    .load(Ordering::Relaxed)
                    .wrapping_add(consumed.wrapping_sub(released));
                shared.unreleased.store(u, Ordering::Release);
            }
            shared.ci.store(ci, Ordering::Release);
        }
        shared.polling.store(false, Ordering::Release);
    }

    /// What keeps the CQ memory alive (on hardware the verbs CQ).
    pub fn owner(&self) -> &D::Cq {
        &self.owner
    }
    pub(crate) fn shared(&self) -> &Arc<CqShared> {
        &self.shared
    }
}

impl<D: Owners> CompletionQueue for Mlx5Cq<D> {
    #[inline]
    fn poll(&mut self, out: &mut [Completion]) -> usize {
        self.poll_inner::<false>(out, &mut [])
    }

    #[inline(always)]
    fn poll_one(&mut self, out: &mut Completion) -> bool {
        Mlx5Cq::poll_one(self, out)
    }

    fn cqe(&self) -> u32 {
        self.dv.cqe_cnt
    }

    #[inline]
    fn poll_ts(&mut self, out: &mut [Completion], ns: &mut [u64]) -> usize {
        Mlx5Cq::poll_ts(self, out, ns)
    }
}

mod clock;
mod cqe;
use cqe::late;
mod dedicated;
mod one;
pub(crate) use dedicated::{Took, CLOSED};
pub(crate) use hot::len_qpn;
mod hot;
mod process;
mod table;
use table::{HOT_RECV, HOT_SEND};
mod recv_run;
mod send_run;
use hot::Hot;
mod req;
mod resp;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Syndrome;

    #[test]
    fn every_named_syndrome_has_its_own_status() {
        let mut seen = Vec::new();
        for syn in Syndrome::ALL {
            let st = syndrome_status(u8::from(syn));
            assert_ne!(st, WcStatus::GeneralErr, "{}", syn.name());
            assert!(!seen.contains(&st), "{}", syn.name());
            seen.push(st);
        }
        assert_eq!(
            syndrome_status(u8::from(Syndrome::RemAccess)),
            WcStatus::RemAccessErr
        );
        assert_eq!(syndrome_status(0x99), WcStatus::GeneralErr);
    }
}
