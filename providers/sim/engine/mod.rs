//! The engine: the device side of the mlx5 protocol.
//!
//! One *pass* ([`Engine::process`]) looks at every QP once:
//!
//! 1. **Doorbell.** It reads the QP's two BlueFlame halves (the UAR words the host writes the
//!    first 8 bytes of the last WQE's ctrl segment to, or a whole WQE). A word that changed
//!    since the last pass is a doorbell. Only then does it read the send counter in the
//!    doorbell record (`dbrec[1]`) and consume WQEs from its own index (`sq_ci`) up to it —
//!    a dbrec update without a UAR write is not seen, as on hardware. The WQE is read from the
//!    SQ ring (hardware would take a BlueFlame copy's bytes instead; in deterministic mode
//!    the sim compares the copy with the ring and counts mismatches in [`EngineStats`]).
//!    Send WQEs execute only in RTS and are flushed in ERR; rung in RESET/INIT/RTR they wait
//!    and run once the QP reaches RTS (as rxe's are; the mlx5 provider refuses such posts).
//! 2. **Validation** of each WQE, with the syndrome hardware reports: ctrl `qpn` or
//!    `wqe_idx` not this QP's / not the expected index, `ds` of zero, larger than the ring or
//!    too small for the opcode's segments, an inline segment running past `ds`, an opcode the
//!    QP type cannot do → `LOC_QP_OP`; an lkey that is unknown, of another PD, does not cover
//!    the SGE, or lacks LOCAL_WRITE where the device writes → `LOC_PROT`; on the responder
//!    an rkey that is unknown, of another PD, out of bounds or without the access right (on
//!    the MR or the QP) → requester `REM_ACCESS` (a zero-length RDMA READ or WRITE has no
//!    address or rkey to check, IBA C9-88, as rxe); a SEND longer than the receive → responder
//!    `LOC_LEN`, requester `REM_INV_REQ`; no receive posted → RNR (see below).
//!    A misaligned atomic is a requester `REM_INV_REQ`; a receive WQE with a bad lkey is
//!    responder `LOC_PROT` and requester `REM_OP`.
//!    Syndrome values are `MLX5_CQE_SYNDROME_*` of rdma-core `mlx5dv.h`, and libmlx5's
//!    `mlx5_handle_error_cqe` turns them into the `ibv_wc_status` the provider reports. Which
//!    check yields which syndrome is the sim's reading of the IBA error classes (local
//!    protection → LOC_PROT, a malformed WQE → LOC_QP_OP, responder NAKs → REM_*), which is
//!    also what mlx5 reports where rxe differs (rxe, kernel 6.1, reports a SEND longer than
//!    the receive as responder LOC_QP_OP / requester REM_OP); it was not captured from
//!    hardware (there is none here). Vendor syndromes (byte 54) are not modelled: always 0.
//! 3. **Execution** against the peer QP's memory (RC and UC: the QP's remote QPN; UD: the
//!    address vector's `dqp_dct`), in order; CQEs are written with the right opcode, byte
//!    count, immediate, QPN, `wqe_counter` and owner parity, for send WQEs only when
//!    `CQ_UPDATE` is set (errors and flushes always).
//! 4. **Errors** write an error CQE, move the QP to ERR; every later WQE (signaled or not) and
//!    every posted receive then gets one `WR_FLUSH` CQE.
//!
//! RNR and transport retries are counted in passes: with `rnr_retry` below 7 a WQE blocked
//! by RNR is retried on that many further passes and then fails with `RNR_RETRY_EXC`;
//! `rnr_retry` 7 means forever: the WQE stays at the head of the queue until a receive
//! appears. A WQE whose RC peer is gone is retried `retry_cnt` times (7 included: seven
//! retries, as mlx5; rxe alone retries forever at 7) and then fails with `RETRY_EXC`. In deterministic mode a pass is the RNR timer and the ACK
//! timeout; with the device thread the requester waits the responder's `min_rnr_timer`
//! (IBA encoding) or its own `4.096 µs × 2^timeout` before each retry, as hardware does.
//!
//! CQ overrun: before writing a CQE the engine reads the CQ's doorbell record (the consumer
//! index the host publishes); if the ring is full the CQ enters an error state, an
//! [`AsyncEvent::CqOverrun`] is queued, the CQE is *not* written, and the QPs that complete on
//! that CQ move to ERR (their later completions are dropped, as a CQ in error writes nothing).
//!
//! Not modelled (deliberately): scatter-to-CQE (the sim behaves as if it were disabled, which
//! is how the mlx5 provider configures hardware), PCIe and wire timing, write-combining buffer
//! behaviour, congestion, packetisation on one device (a message moves in one piece; across
//! processes `remote` cuts it into packets), memory windows, the masked/extended atomics.
//!
//! ## Files, by concern
//!
//! - `mod.rs`: the [`Engine`] (every table, the counters, the event queue) and the pass
//!   (`process`, `run_qp`): which QP is looked at when, receive flushes in ERR.
//! - `objects`: the object tables (PD, MR, CQ, SRQ, QP) and the control path on them;
//!   `table`: the sorted table the QPs and CQs live in (a lookup scans a few QPNs).
//! - `fetch`: doorbells and reading WQEs from the SQ ring the host wrote (the small inline
//!   RDMA WRITE parsed a short way, everything else by the general parse), and the scratch
//!   a WQE is read, parsed and checked in.
//! - `execute`: running the head WQE (SEND, WRITE, READ, atomics), errors, retries.
//! - `recv`: receive matching on the responder (RQ or SRQ) and scattering into it.
//! - `remote`: RC with a peer QP of another process, as packets over the sim fabric
//!   (PSN window, segmentation, go-back-N, RNR timer from the NAK).
//! - `cqe`: writing CQEs (overrun detection, the fault injector's held CQEs).
//!
//! Every mlx5 layout number the engine reads or writes (opcodes, syndromes, `fm_ce_se` bits,
//! segment sizes, offsets, doorbell-record indices, BlueFlame geometry) is a `crate::wire`
//! name with its `mlx5dv.h` spelling; the engine keeps no copy.
//! - `dma`: checked memory ranges and the copies between them.
//! - `events`: asynchronous events and the engine's counters.
//! - `arm`: CQ arming (the CQ doorbell in the UAR) and completion events on a channel.

mod arm;
mod cqe;
mod dma;
mod events;
mod execute;
mod fetch;
mod objects;
mod recv;
mod remote;
mod table;

use std::collections::BTreeMap;
use std::sync::Arc;

pub use events::{AsyncEvent, EngineStats};
pub use objects::SimQpAttr;
pub(crate) use objects::{CqCtx, QpCtx, SrqCtx};
pub(crate) use remote::Port;

use super::clock::SimClock;
use super::fault::FaultInjector;
use crate::wire;
use crate::wire::{CqeOpcode, CqeRepr, Syndrome};
use crate::QpState;
use execute::Step;
use objects::MrMap;

/// The device state: every object and the fault injector.
pub(crate) struct Engine {
    pub(crate) qps: table::Table<QpCtx>,
    pub(crate) cqs: table::Table<CqCtx>,
    pub(crate) srqs: BTreeMap<u32, SrqCtx>,
    mrs: MrMap,
    next_pd: u32,
    next_key: u32,
    next_qpn: u32,
    /// The GID of the device's port (source and destination of every GRH it writes).
    gid: [u8; 16],
    next_cqn: u32,
    next_srqn: u32,
    pub(crate) fault: Option<FaultInjector>,
    pub(crate) events: Vec<AsyncEvent>,
    pub(crate) stats: EngineStats,
    /// The QPNs a pass visits, in order: rebuilt from `qps` when a QP was created or
    /// destroyed (`order_stale`), or every pass while the fault injector shuffles it.
    order: Vec<u32>,
    order_stale: bool,
    /// The device clock (CQE timestamps).
    pub(crate) clock: Arc<SimClock>,
    /// Some CQ may hold CQEs back (the fault injector's delay): set when one is held,
    /// cleared by a release that finds none left. While clear, a pass skips the CQs' scans.
    maybe_held: bool,
    /// Some CQ has had a completion channel (events): until then a pass does not look at
    /// the CQs' arm words.
    pub(crate) any_channel: bool,
    /// The device's place on the sim fabric, once a QP connected to another process
    /// (`remote`).
    /// Boxed: a pass takes it out and puts it back, which moves a pointer, not the port.
    pub(crate) port: Option<Box<Port>>,
    /// Lent to the WQE being executed (`execute`): out only during `exec_head`.
    scratch: Option<Box<fetch::Scratch>>,
}

fn einval(context: &'static str, detail: impl Into<String>) -> crate::Error {
    crate::Error::InvalidArgument {
        context,
        detail: detail.into(),
    }
}

/// The first CQ number a device hands out (any non-zero start works; distinct ranges for CQs
/// and SRQs make a mixed-up number visible in a trace).
const FIRST_CQN: u32 = 0x40;
/// The first SRQ number a device hands out.
const FIRST_SRQN: u32 = 0x20;

impl Engine {
    /// An engine with no objects whose QPNs start at `qpn_base` and whose port has `gid`.
    pub(crate) fn new(qpn_base: u32, gid: [u8; 16], clock: Arc<SimClock>) -> Engine {
        Engine {
            qps: table::Table::default(),
            cqs: table::Table::default(),
            srqs: BTreeMap::new(),
            mrs: MrMap::default(),
            next_pd: 1,
            next_key: 0x1000,
            next_qpn: qpn_base,
            gid,
            next_cqn: FIRST_CQN,
            next_srqn: FIRST_SRQN,
            fault: None,
            events: Vec::new(),
            stats: EngineStats::default(),
            order: Vec::new(),
            order_stale: true,
            clock,
            maybe_held: false,
            any_channel: false,
            port: None,
            scratch: Some(fetch::Scratch::new()),
        }
    }

    /// One pass over every QP; returns how much work was done (0 = idle).
    pub(crate) fn process(&mut self, torn_ok: bool) -> usize {
        self.stats.passes += 1;
        let mut work = self.poll_fabric(torn_ok);
        let mut order = std::mem::take(&mut self.order);
        let shuffled = self.fault.as_ref().is_some_and(|f| f.cfg.reorder_ppm > 0);
        if self.order_stale || shuffled {
            order.clear();
            order.extend(self.qps.keys().copied());
            // A shuffled order is rebuilt sorted on the next pass without the shuffle.
            self.order_stale = shuffled;
        }
        if let Some(f) = self.fault.as_mut() {
            // Out-of-order across QPs: visit them in a random order this pass.
            if shuffled {
                for i in (1..order.len()).rev() {
                    let j = f.rng.below(i as u64 + 1) as usize;
                    order.swap(i, j);
                }
            }
        }
        for (k, &qpn) in order.iter().enumerate() {
            work += self.run_qp(qpn, torn_ok);
            if k % 2 == 1 && self.maybe_held {
                // CQEs arriving mid-pass: release what is due between QPs.
                work += self.release_held(torn_ok);
            }
        }
        self.order = order;
        // (Both calls return at once without held CQEs / completion channels: checked here
        // so an idle pass does not pay for the calls.)
        if self.maybe_held {
            work += self.release_held(torn_ok);
        }
        if self.any_channel {
            work += self.poll_arms();
        }
        // CQEs still held by the fault injector are work to come: a caller running "until
        // idle" keeps going until they are out.
        if self.maybe_held && self.cqs.values().any(|c| !c.held.is_empty()) {
            work += 1;
        }
        work
    }

    fn run_qp(&mut self, qpn: u32, torn_ok: bool) -> usize {
        let mut work = 0;
        // 1. Doorbell: a changed word in either BlueFlame half (false: nothing to do, no SQ
        // rung and no receive to flush).
        if !self.poll_doorbell(qpn, torn_ok) {
            return 0;
        }
        // A fabric requester waiting for an answer (RTS, so no receive to flush): nothing
        // to do until one comes, a doorbell rings or its ACK timeout runs out.
        if self.fabric_parked(qpn) {
            return 0;
        }
        // 2. Receive flushes in ERR (no doorbell needed: the RQ has only its dbrec).
        loop {
            let Some(q) = self.qps.get_mut(&qpn) else {
                return work;
            };
            if q.state != QpState::Err
                || q.srqn.is_some()
                || q.rq_ci & wire::MLX5_WQE_INDEX_MASK == q.rq_posted()
            {
                break;
            }
            let f = CqeRepr {
                opcode: CqeOpcode::RespErr,
                qpn,
                wqe_counter: q.rq_ci as u16,
                syndrome: Syndrome::WrFlush,
                ..Default::default()
            };
            q.rq_ci = q.rq_ci.wrapping_add(1);
            let cqn = q.recv_cqn;
            self.push_cqe(cqn, f, stream(qpn, true), torn_ok);
            work += 1;
        }
        // 3. Send queue.
        while let Some(q) = self.qps.get_mut(&qpn) {
            if !q.rung {
                break;
            }
            if q.sq_ci & wire::MLX5_WQE_INDEX_MASK == q.sq_pi() {
                q.rung = false;
                break;
            }
            let step = match q.state {
                QpState::Rts => self.exec_head(qpn, torn_ok),
                QpState::Err => {
                    self.flush_head(qpn, torn_ok);
                    Step::Advanced
                }
                _ => break,
            };
            match step {
                Step::Advanced => {
                    work += 1;
                    self.stats.wqes += 1;
                }
                Step::Blocked { retried } => {
                    if retried {
                        work += 1;
                    }
                    break;
                }
            }
        }
        work
    }
}

fn stream(qpn: u32, recv: bool) -> u64 {
    (u64::from(qpn) << 1) | u64::from(recv)
}
