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
//!    the MR or the QP) → requester `REM_ACCESS`; a SEND longer than the receive → responder
//!    `LOC_LEN`, requester `REM_INV_REQ`; no receive posted → RNR (see below).
//!    A misaligned atomic is a requester `REM_INV_REQ`; a receive WQE with a bad lkey is
//!    responder `LOC_PROT` and requester `REM_OP`.
//!    Syndrome values are `MLX5_CQE_SYNDROME_*` of rdma-core `mlx5dv.h`, and libmlx5's
//!    `mlx5_handle_error_cqe` turns them into the `ibv_wc_status` the provider reports. Which
//!    check yields which syndrome is the sim's reading of the IBA error classes (local
//!    protection → LOC_PROT, a malformed WQE → LOC_QP_OP, responder NAKs → REM_*), the same
//!    the IBA and the mlx5 column of DESIGN.md §5b give; it was not captured from hardware
//!    (there is none here). Vendor syndromes (byte 54) are not modelled: always 0.
//! 3. **Execution** against the peer QP's memory (RC and UC: the QP's remote QPN; UD: the
//!    address vector's `dqp_dct`), in order; CQEs are written with the right opcode, byte
//!    count, immediate, QPN, `wqe_counter` and owner parity, for send WQEs only when
//!    `CQ_UPDATE` is set (errors and flushes always).
//! 4. **Errors** write an error CQE, move the QP to ERR; every later WQE (signaled or not) and
//!    every posted receive then gets one `WR_FLUSH` CQE.
//!
//! RNR and transport retries are counted in passes: with `rnr_retry` (`retry_cnt`) below 7 a
//! blocked WQE is retried on that many further passes and then fails with `RNR_RETRY_EXC`
//! (`RETRY_EXC`); 7 means forever: the WQE stays at the head of the queue until a receive
//! (a ready peer) appears. In deterministic mode a pass is the RNR timer and the ACK
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
//! behaviour, congestion, packetisation (a message moves in one piece), solicited events and
//! CQ arming (no event channel), memory windows, the masked/extended atomics.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use super::fault::{FaultConfig, FaultInjector, FaultStats};
use super::layout::{
    be32, cqe_op, op, syndrome, CqeFields, CTRL_CQ_UPDATE, CTRL_SOLICITED, GRH_LEN, WQEBB,
};
use super::mem::{dma_copy, DevMem};
use crate::providers::{Access, QpState, QpType};
use crate::wire::{self, DataItem};

/// The largest WQE: `ds` is 6 bits, so 63 × 16 bytes, rounded up to whole WQEBBs.
const MAX_WQE: usize = 1024;
/// At most this many data segments fit in the largest WQE (and in a receive WQE we create).
const MAX_SEGS: usize = 64;
/// Offset of the BlueFlame register in a QP's UAR page (the first bfreg of a UAR page on
/// ConnectX sits at 0x800; its two halves are 0x800 and 0x900).
pub(crate) const BF_OFFSET: usize = 0x800;
/// Size of one BlueFlame half.
pub(crate) const BF_SIZE: u32 = 256;

/// Something the device reports outside the CQs (an `ibv_async_event`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsyncEvent {
    /// A CQ would have overrun: the CQE was not written and the CQ is in error
    /// (`IBV_EVENT_CQ_ERR`).
    CqOverrun {
        /// The CQ.
        cqn: u32,
    },
    /// A QP moved to ERR because of a local error (`IBV_EVENT_QP_FATAL` class).
    QpFatal {
        /// The QP.
        qpn: u32,
    },
}

/// Attributes the control path sets on a QP (the sim's `ibv_qp_attr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimQpAttr {
    /// Remote QPN (RC/UC; set on the move to RTR).
    pub remote_qpn: u32,
    /// Path MTU in bytes (UD sends above it fail; RC/UC messages are not packetised).
    pub path_mtu: u32,
    /// RNR retries (7 = forever).
    pub rnr_retry: u8,
    /// Transport retries (7 = forever).
    pub retry_cnt: u8,
    /// Minimal RNR NAK timer this QP asks its requesters to wait (IBA encoding, 12 = 0.64 ms).
    pub min_rnr_timer: u8,
    /// Local ACK timeout exponent (4.096 µs × 2^timeout) before a transport retry.
    pub timeout: u8,
    /// Remote access rights of the QP.
    pub access: Access,
    /// Q_Key (UD).
    pub qkey: u32,
}

impl Default for SimQpAttr {
    fn default() -> Self {
        SimQpAttr {
            remote_qpn: 0,
            path_mtu: 1024,
            rnr_retry: 7,
            retry_cnt: 7,
            min_rnr_timer: 12,
            timeout: 14,
            access: Access::LOCAL_WRITE,
            qkey: 0,
        }
    }
}

/// Counters of what the engine did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Engine passes.
    pub passes: u64,
    /// Doorbells seen (UAR / BlueFlame words that changed).
    pub doorbells: u64,
    /// Deterministic mode: BlueFlame copies whose bytes were compared with the WQE in the
    /// ring and matched.
    pub bf_copies: u64,
    /// Deterministic mode: BlueFlame copies that did *not* match the WQE in the ring (a host
    /// bug: hardware would execute the BlueFlame bytes).
    pub bf_mismatches: u64,
    /// Send WQEs consumed (executed, failed or flushed).
    pub wqes: u64,
    /// CQEs written.
    pub cqes: u64,
    /// CQEs dropped because their CQ was in error.
    pub cqes_dropped: u64,
    /// Bytes moved between MRs.
    pub bytes: u64,
}

pub(crate) struct MrEntry {
    pd: u32,
    addr: u64,
    len: u64,
    access: Access,
}

struct Held {
    fields: CqeFields,
    stream: u64,
    release_pass: u64,
}

pub(crate) struct CqCtx {
    pub(crate) mem: Arc<DevMem>,
    pub(crate) cqe_cnt: u32,
    pub(crate) cqe_size: u32,
    pub(crate) dbrec_off: usize,
    /// Producer index: CQEs written, free running (the owner bit is its wrap parity).
    pi: u32,
    overrun: bool,
    held: VecDeque<Held>,
}

pub(crate) struct SrqCtx {
    pd: u32,
    pub(crate) mem: Arc<DevMem>,
    pub(crate) wqe_cnt: u32,
    pub(crate) stride: u32,
    pub(crate) dbrec_off: usize,
    /// Index of the next WQE to consume (follows the `next_wqe_index` links).
    cur: u16,
    /// Receives consumed, free running (compared with `dbrec[0]` in 16 bits).
    consumed: u32,
}

pub(crate) struct QpCtx {
    qpn: u32,
    qp_type: QpType,
    pd: u32,
    pub(crate) mem: Arc<DevMem>,
    pub(crate) sq_cnt: u32,
    pub(crate) rq_off: usize,
    pub(crate) rq_cnt: u32,
    pub(crate) rq_stride: u32,
    pub(crate) dbrec_off: usize,
    pub(crate) uar_off: usize,
    send_cqn: u32,
    recv_cqn: u32,
    srqn: Option<u32>,
    state: QpState,
    attr: SimQpAttr,
    /// Device SQ index in WQEBBs (free running; compared with `dbrec[1]` in 16 bits).
    sq_ci: u32,
    /// Device RQ index (free running; compared with `dbrec[0]` in 16 bits).
    rq_ci: u32,
    /// Last UAR words seen in the two BlueFlame halves.
    last_db: [u64; 2],
    /// A doorbell was seen and the SQ is not drained yet.
    rung: bool,
    /// Deterministic mode: the BlueFlame half last written (its `wqe_idx` and bytes), to
    /// compare with the ring when that WQE executes.
    bf_copy: Option<(u16, [u8; BF_SIZE as usize])>,
    /// RNR / transport retries left for the WQE at the head of the SQ.
    rnr_left: Option<u8>,
    retry_left: Option<u8>,
    /// Device-thread mode: the head WQE is not retried before this instant (the RNR timer
    /// or the ACK timeout running).
    retry_at: Option<std::time::Instant>,
}

impl QpCtx {
    fn sq_pi(&self) -> u32 {
        self.mem.load_be32(self.dbrec_off + 4) & 0xffff
    }
    fn rq_posted(&self) -> u32 {
        self.mem.load_be32(self.dbrec_off) & 0xffff
    }
}

/// Where the receive for an incoming message comes from.
#[derive(Clone, Copy)]
enum RecvLoc {
    Rq { ci: u32 },
    Srq { srqn: u32, index: u16 },
}

#[derive(Clone, Copy)]
struct Span {
    ptr: *mut u8,
    len: usize,
}

const EMPTY_SPAN: Span = Span {
    ptr: std::ptr::null_mut(),
    len: 0,
};

/// A parsed send WQE (from [`wire::parse_send_wqe`], plus what the device adds).
struct Wqe {
    opcode: u8,
    idx: u16,
    signaled: bool,
    solicited: bool,
    imm: [u8; 4],
    raddr: u64,
    rkey: u32,
    swap_add: u64,
    compare: u64,
    dqpn: u32,
    qkey: u32,
    /// Inline payload: up to two pieces (the WQE may wrap) inside the local WQE copy.
    inline: [Span; 2],
    ninline: usize,
    /// Data segments: (addr, byte_count, lkey).
    segs: [(u64, u32, u32); MAX_SEGS],
    nsegs: usize,
}

impl Wqe {
    fn len(&self) -> u64 {
        if self.ninline > 0 {
            self.inline[..self.ninline]
                .iter()
                .map(|s| s.len as u64)
                .sum()
        } else {
            self.segs[..self.nsegs]
                .iter()
                .map(|s| u64::from(seg_len(s.1)))
                .sum()
        }
    }
}

/// A data segment's byte count; 0 means 2 GiB in a send WQE (PRM: "byte_count 0 = 2^31").
fn seg_len(bc: u32) -> u32 {
    if bc == 0 {
        0x8000_0000
    } else {
        bc & 0x7fff_ffff
    }
}

/// What happened to the WQE at the head of the SQ.
enum Step {
    /// Consumed (done, failed or flushed).
    Advanced,
    /// Waiting (RNR or transport retry forever, or retries left).
    Blocked { retried: bool },
}

/// What the responder said.
enum Resp {
    Ok,
    /// No receive posted.
    Rnr,
    /// The peer is not there / not ready: no response at all.
    NoPeer,
    /// UC/UD: dropped silently.
    Dropped,
    /// NAK with this requester syndrome (responder side already handled).
    Nak(u8),
}

/// The device state: every object and the fault injector.
pub(crate) struct Engine {
    pub(crate) qps: BTreeMap<u32, QpCtx>,
    pub(crate) cqs: BTreeMap<u32, CqCtx>,
    pub(crate) srqs: BTreeMap<u32, SrqCtx>,
    mrs: HashMap<u32, MrEntry>,
    next_pd: u32,
    next_key: u32,
    next_qpn: u32,
    next_cqn: u32,
    next_srqn: u32,
    pub(crate) fault: Option<FaultInjector>,
    pub(crate) events: Vec<AsyncEvent>,
    pub(crate) stats: EngineStats,
    order: Vec<u32>,
}

fn einval(context: &'static str, detail: impl Into<String>) -> crate::Error {
    crate::Error::InvalidArgument {
        context,
        detail: detail.into(),
    }
}

impl Engine {
    pub(crate) fn new() -> Engine {
        Engine {
            qps: BTreeMap::new(),
            cqs: BTreeMap::new(),
            srqs: BTreeMap::new(),
            mrs: HashMap::new(),
            next_pd: 1,
            next_key: 0x1000,
            next_qpn: 0x100,
            next_cqn: 0x40,
            next_srqn: 0x20,
            fault: None,
            events: Vec::new(),
            stats: EngineStats::default(),
            order: Vec::new(),
        }
    }

    // ---------------------------------------------------------------- control path

    pub(crate) fn alloc_pd(&mut self) -> u32 {
        let pd = self.next_pd;
        self.next_pd += 1;
        pd
    }

    /// Register an MR; lkey == rkey as on mlx5. Keys never equal `MLX5_INVALID_LKEY`.
    pub(crate) fn reg_mr(&mut self, pd: u32, addr: u64, len: u64, access: Access) -> u32 {
        let key = self.next_key;
        // Step by 0x100 plus a varying low byte, so keys of different MRs differ in every
        // nibble a stale-key bug could hide in.
        self.next_key = self.next_key.wrapping_add(0x101);
        if self.next_key & 0xffff_ff00 == 0x100 || self.next_key == 0 {
            self.next_key = 0x1000;
        }
        self.mrs.insert(
            key,
            MrEntry {
                pd,
                addr,
                len,
                access,
            },
        );
        key
    }

    pub(crate) fn dereg_mr(&mut self, key: u32) {
        self.mrs.remove(&key);
    }

    pub(crate) fn create_cq(&mut self, cqe: u32, cqe_size: u32) -> crate::Result<u32> {
        if cqe == 0 || cqe > 1 << 22 {
            return Err(einval("sim create_cq", format!("{cqe} entries (1..=4M)")));
        }
        let cnt = cqe.next_power_of_two().max(2);
        if cqe_size != 64 && cqe_size != 128 {
            return Err(einval(
                "sim create_cq",
                format!("CQE size {cqe_size} (64 or 128)"),
            ));
        }
        let ring = cnt as usize * cqe_size as usize;
        let mem = Arc::new(DevMem::new(ring + 64)?);
        // A new CQ buffer as libmlx5 and the kernel leave it: every op_own = INVALID << 4
        // (0xF0, owner bit 0), the rest zero (rdma-core `mlx5_alloc_cq_buf`, kernel
        // `init_cq_frag_buf`).
        for i in 0..cnt as usize {
            // With 128-byte CQEs the 64-byte CQE is the second half of the slot.
            mem.write((i + 1) * cqe_size as usize - 1, &[cqe_op::INVALID << 4]);
        }
        let cqn = self.next_cqn;
        self.next_cqn += 1;
        self.cqs.insert(
            cqn,
            CqCtx {
                mem,
                cqe_cnt: cnt,
                cqe_size,
                dbrec_off: ring,
                pi: 0,
                overrun: false,
                held: VecDeque::new(),
            },
        );
        Ok(cqn)
    }

    pub(crate) fn create_srq(&mut self, pd: u32, max_wr: u32, max_sge: u32) -> crate::Result<u32> {
        if max_wr == 0 || max_wr > 1 << 15 || max_sge == 0 || max_sge as usize >= MAX_SEGS {
            return Err(einval(
                "sim create_srq",
                format!("max_wr {max_wr} (1..=32768), max_sge {max_sge} (1..=63)"),
            ));
        }
        // One entry stays unused as the free-list tail (libmlx5 keeps it so), hence +1.
        let cnt = (max_wr + 1).next_power_of_two();
        let stride = ((1 + max_sge) * 16).next_power_of_two();
        let ring = cnt as usize * stride as usize;
        let mem = Arc::new(DevMem::new(ring + 64)?);
        // Free list: entry i links to i + 1 (next_wqe_index at byte 2 of the next segment).
        for i in 0..cnt {
            let next = ((i + 1) & (cnt - 1)) as u16;
            mem.write(i as usize * stride as usize + 2, &next.to_be_bytes());
        }
        let srqn = self.next_srqn;
        self.next_srqn += 1;
        self.srqs.insert(
            srqn,
            SrqCtx {
                pd,
                mem,
                wqe_cnt: cnt,
                stride,
                dbrec_off: ring,
                cur: 0,
                consumed: 0,
            },
        );
        Ok(srqn)
    }

    /// Create a QP in RESET. Returns the QPN and the granted capacities
    /// (sq WQEBBs, granted max_send_wr, rq entries, rq stride).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn create_qp(
        &mut self,
        pd: u32,
        qp_type: QpType,
        caps: &crate::providers::QpCaps,
        send_cqn: u32,
        recv_cqn: u32,
        srqn: Option<u32>,
    ) -> crate::Result<(u32, crate::providers::QpCaps, u32)> {
        if !self.cqs.contains_key(&send_cqn) || !self.cqs.contains_key(&recv_cqn) {
            return Err(einval("sim create_qp", "unknown CQ"));
        }
        if let Some(s) = srqn {
            if !self.srqs.contains_key(&s) {
                return Err(einval("sim create_qp", "unknown SRQ"));
            }
        }
        if caps.max_send_wr == 0 || caps.max_send_wr > 1 << 14 {
            return Err(einval(
                "sim create_qp",
                format!("max_send_wr {} (1..=16384)", caps.max_send_wr),
            ));
        }
        if caps.max_send_sge as usize > 16 || caps.max_recv_sge as usize > 16 {
            return Err(einval(
                "sim create_qp",
                "max_send_sge / max_recv_sge above 16",
            ));
        }
        if caps.max_inline_data > 512 {
            return Err(einval(
                "sim create_qp",
                format!("max_inline_data {} above 512", caps.max_inline_data),
            ));
        }
        if srqn.is_none() && (caps.max_recv_wr == 0 || caps.max_recv_wr > 1 << 14) {
            return Err(einval(
                "sim create_qp",
                format!("max_recv_wr {} (1..=16384)", caps.max_recv_wr),
            ));
        }
        // Send WQE size, as libmlx5 computes it: ctrl + the largest transport segment
        // (UD: address vector; RC/UC: raddr + atomic) + the larger of the SGE list and the
        // inline data, rounded up to whole WQEBBs.
        let xport = match qp_type {
            QpType::Ud => wire::AV_LEN,
            _ => 32,
        };
        let data = (caps.max_send_sge.max(1) as usize * 16)
            .max((caps.max_inline_data as usize + 4).next_multiple_of(16));
        let wqe_size = (16 + xport + data).next_multiple_of(WQEBB);
        let bbs = (wqe_size / WQEBB) as u32;
        let sq_cnt = (caps.max_send_wr * bbs).next_power_of_two();
        let mut granted = *caps;
        granted.max_send_wr = sq_cnt / bbs;
        granted.max_send_sge = caps.max_send_sge.max(1);
        // Granted exactly as asked (libmlx5 reports the room its WQE size leaves, which can
        // be more): a post-time limit then reads the same on every provider.
        granted.max_inline_data = caps.max_inline_data;
        let (rq_cnt, rq_stride) = if srqn.is_some() {
            granted.max_recv_wr = 0;
            granted.max_recv_sge = 0;
            (0, 0)
        } else {
            let stride = (caps.max_recv_sge.max(1) * 16).next_power_of_two();
            let cnt = caps.max_recv_wr.next_power_of_two();
            granted.max_recv_wr = cnt;
            granted.max_recv_sge = stride / 16;
            (cnt, stride)
        };
        let sq_len = sq_cnt as usize * WQEBB;
        let rq_off = sq_len;
        let rq_len = rq_cnt as usize * rq_stride as usize;
        let dbrec_off = (rq_off + rq_len).next_multiple_of(64);
        let uar_off = (dbrec_off + 64).next_multiple_of(4096);
        let mem = Arc::new(DevMem::new(uar_off + 4096)?);
        let qpn = self.next_qpn;
        self.next_qpn += 1;
        self.qps.insert(
            qpn,
            QpCtx {
                qpn,
                qp_type,
                pd,
                mem,
                sq_cnt,
                rq_off,
                rq_cnt,
                rq_stride,
                dbrec_off,
                uar_off: uar_off + BF_OFFSET,
                send_cqn,
                recv_cqn,
                srqn,
                state: QpState::Reset,
                attr: SimQpAttr::default(),
                sq_ci: 0,
                rq_ci: 0,
                last_db: [0; 2],
                rung: false,
                bf_copy: None,
                rnr_left: None,
                retry_left: None,
                retry_at: None,
            },
        );
        Ok((qpn, granted, sq_cnt))
    }

    pub(crate) fn qp(&self, qpn: u32) -> Option<&QpCtx> {
        self.qps.get(&qpn)
    }

    pub(crate) fn qp_state(&self, qpn: u32) -> Option<QpState> {
        self.qps.get(&qpn).map(|q| q.state)
    }

    /// `ibv_modify_qp`: the transitions the real state machine allows.
    pub(crate) fn modify_qp(
        &mut self,
        qpn: u32,
        to: QpState,
        attr: Option<SimQpAttr>,
    ) -> crate::Result<()> {
        let Some(q) = self.qps.get_mut(&qpn) else {
            return Err(einval("sim modify_qp", format!("no QP {qpn:#x}")));
        };
        use QpState as S;
        let ok = matches!(
            (q.state, to),
            (_, S::Reset)
                | (_, S::Err)
                | (S::Reset, S::Init)
                | (S::Init, S::Init)
                | (S::Init, S::Rtr)
                | (S::Rtr, S::Rts)
                | (S::Rts, S::Rts)
        );
        if !ok {
            return Err(crate::Error::verb(
                "ibv_modify_qp (sim)",
                libc::EINVAL,
                format!("{} -> {} is not a valid QP transition", q.state, to),
            ));
        }
        if let Some(a) = attr {
            q.attr = a;
        }
        q.state = to;
        q.rnr_left = None;
        q.retry_left = None;
        q.retry_at = None;
        if to == S::Reset {
            // Back to the state of a new QP: the device's indices zero (the host zeroes the
            // dbrec and its own indices, as on hardware), and the doorbell latch cleared: the
            // UAR words are the device's own registers, so the next doorbell is seen.
            q.sq_ci = 0;
            q.rq_ci = 0;
            q.rung = false;
            q.last_db = [0; 2];
            q.bf_copy = None;
            q.mem.store_raw64(q.uar_off, 0);
            q.mem.store_raw64(q.uar_off + BF_SIZE as usize, 0);
            // CQEs of this QP still held inside the device are dropped with it.
            for cq in self.cqs.values_mut() {
                cq.held.retain(|h| h.stream >> 1 != u64::from(qpn));
            }
        }
        Ok(())
    }

    pub(crate) fn destroy_qp(&mut self, qpn: u32) {
        self.qps.remove(&qpn);
        for cq in self.cqs.values_mut() {
            cq.held.retain(|h| h.stream >> 1 != u64::from(qpn));
        }
    }

    pub(crate) fn destroy_cq(&mut self, cqn: u32) {
        self.cqs.remove(&cqn);
    }

    pub(crate) fn destroy_srq(&mut self, srqn: u32) {
        self.srqs.remove(&srqn);
    }

    pub(crate) fn set_faults(&mut self, cfg: Option<FaultConfig>) {
        self.fault = cfg.map(FaultInjector::new);
    }

    pub(crate) fn fault_stats(&self) -> FaultStats {
        self.fault.as_ref().map(|f| f.stats).unwrap_or_default()
    }

    pub(crate) fn cq_in_error(&self, cqn: u32) -> bool {
        self.cqs.get(&cqn).is_some_and(|c| c.overrun)
    }

    // ---------------------------------------------------------------- the engine

    /// One pass over every QP; returns how much work was done (0 = idle).
    pub(crate) fn process(&mut self, torn_ok: bool) -> usize {
        self.stats.passes += 1;
        let mut work = 0;
        let mut order = std::mem::take(&mut self.order);
        order.clear();
        order.extend(self.qps.keys().copied());
        if let Some(f) = self.fault.as_mut() {
            // Out-of-order across QPs: visit them in a random order this pass.
            if f.cfg.reorder_ppm > 0 {
                for i in (1..order.len()).rev() {
                    let j = f.rng.below(i as u64 + 1) as usize;
                    order.swap(i, j);
                }
            }
        }
        for (k, &qpn) in order.iter().enumerate() {
            work += self.run_qp(qpn, torn_ok);
            if k % 2 == 1 {
                // CQEs arriving mid-pass: release what is due between QPs.
                work += self.release_held(torn_ok);
            }
        }
        self.order = order;
        work += self.release_held(torn_ok);
        // CQEs still held by the fault injector are work to come: a caller running "until
        // idle" keeps going until they are out.
        if self.cqs.values().any(|c| !c.held.is_empty()) {
            work += 1;
        }
        work
    }

    fn run_qp(&mut self, qpn: u32, torn_ok: bool) -> usize {
        let mut work = 0;
        let Some(q) = self.qps.get_mut(&qpn) else {
            return 0;
        };
        // 1. Doorbell: a changed word in either BlueFlame half.
        let halves = if BF_SIZE == 0 { 1 } else { 2 };
        for h in 0..halves {
            let w = q.mem.load_raw64(q.uar_off + h * BF_SIZE as usize);
            if w != q.last_db[h] {
                q.last_db[h] = w;
                q.rung = true;
                self.stats.doorbells += 1;
                if !torn_ok {
                    // Deterministic mode (nothing writes concurrently): keep the half's bytes
                    // and clear the device register behind the first word, so an 8-byte
                    // doorbell next time is told apart from a BlueFlame copy.
                    let off = q.uar_off + h * BF_SIZE as usize;
                    let mut bytes = [0u8; BF_SIZE as usize];
                    q.mem.read(off, &mut bytes);
                    q.mem.write(off + 8, &[0u8; BF_SIZE as usize - 8]);
                    let idx =
                        (u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) >> 8) as u16;
                    q.bf_copy = Some((idx, bytes));
                }
            }
        }
        // 2. Receive flushes in ERR (no doorbell needed: the RQ has only its dbrec).
        loop {
            let Some(q) = self.qps.get_mut(&qpn) else {
                return work;
            };
            if q.state != QpState::Err || q.srqn.is_some() || q.rq_ci & 0xffff == q.rq_posted() {
                break;
            }
            let f = CqeFields {
                opcode: cqe_op::RESP_ERR,
                qpn,
                wqe_counter: q.rq_ci as u16,
                syndrome: syndrome::WR_FLUSH,
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
            if q.sq_ci & 0xffff == q.sq_pi() {
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

    /// Copy the WQE at the SQ head into `buf`, laid out as a ring of
    /// `min(sq_cnt, 16)` WQEBBs at the same slot (modulo that ring), so the wire parser
    /// follows the same wrap the device ring has. Returns the local ring length in bytes and
    /// the WQE's WQEBB count from its `ds` (at least 1, to step over a `ds = 0` WQE).
    fn read_head(q: &QpCtx, buf: &mut [u8; MAX_WQE]) -> (usize, u32) {
        let local_cnt = q.sq_cnt.min((MAX_WQE / WQEBB) as u32);
        let copy = |i: u32, buf: &mut [u8; MAX_WQE]| {
            let s = ((q.sq_ci + i) & (q.sq_cnt - 1)) as usize;
            let d = ((q.sq_ci + i) & (local_cnt - 1)) as usize * WQEBB;
            q.mem.read(s * WQEBB, &mut buf[d..d + WQEBB]);
        };
        copy(0, buf);
        let first = ((q.sq_ci & (local_cnt - 1)) as usize) * WQEBB;
        let ds = buf[first + 7] & 0x3f;
        let nbb = (u32::from(ds) * 16).div_ceil(WQEBB as u32).max(1);
        for i in 1..nbb.min(local_cnt) {
            copy(i, buf);
        }
        (local_cnt as usize * WQEBB, nbb)
    }

    /// Compare a BlueFlame half with the WQE at the head of the ring: `None` when it was a
    /// plain 8-byte doorbell (nothing behind the first word), `Some(matches)` for a copy.
    fn compare_bf(
        q: &QpCtx,
        buf: &[u8; MAX_WQE],
        ring_len: usize,
        nbb: u32,
        bf: &[u8; BF_SIZE as usize],
    ) -> Option<bool> {
        let len = (usize::from(buf[((q.sq_ci as usize * WQEBB) & (ring_len - 1)) + 7] & 0x3f) * 16)
            .min(BF_SIZE as usize);
        if bf[8..].iter().all(|&b| b == 0) {
            return None;
        }
        let local_cnt = ring_len / WQEBB;
        let mut same = true;
        for i in 0..(nbb as usize).min(BF_SIZE as usize / WQEBB) {
            let slot = (q.sq_ci as usize + i) & (local_cnt - 1);
            let n = len.saturating_sub(i * WQEBB).min(WQEBB);
            same &= buf[slot * WQEBB..slot * WQEBB + n] == bf[i * WQEBB..i * WQEBB + n];
        }
        Some(same)
    }

    /// Parse and check the layout of a send WQE (no memory access yet). Malformed WQEs are
    /// LOC_QP_OP ("local QP operation error: an internal QP consistency error was detected
    /// while processing this WQE"): ds of zero or past the ring, ds too small for the opcode,
    /// an inline length past ds, a ctrl qpn that is not this QP's, a wqe_idx that is not the
    /// device's index, an opcode the QP type cannot do, an atomic whose data segment is not 8
    /// bytes.
    fn parse(q: &QpCtx, buf: &[u8; MAX_WQE], ring_len: usize) -> Result<Wqe, u8> {
        let p = wire::parse_send_wqe(&buf[..ring_len], q.sq_ci, q.qp_type == QpType::Ud)
            .map_err(|_| syndrome::LOC_QP_OP)?;
        if p.qpn != q.qpn || u32::from(p.wqe_idx) != q.sq_ci & 0xffff {
            return Err(syndrome::LOC_QP_OP);
        }
        let opcode = u8::from(p.opcode);
        let ok_for_type = match q.qp_type {
            QpType::Rc => true,
            QpType::Uc => !matches!(opcode, op::RDMA_READ | op::ATOMIC_CS | op::ATOMIC_FA),
            QpType::Ud => matches!(opcode, op::NOP | op::SEND | op::SEND_IMM),
        };
        if !ok_for_type {
            return Err(syndrome::LOC_QP_OP);
        }
        let (raddr, rkey) = p.raddr.unwrap_or((0, 0));
        let (swap_add, compare) = p.atomic.unwrap_or((0, 0));
        let (qkey, dqpn) = match p.av {
            Some(av) => (be32(&av, 0), be32(&av, 8) & 0xff_ffff),
            None => (0, 0),
        };
        let mut w = Wqe {
            opcode,
            idx: p.wqe_idx,
            signaled: p.fm_ce_se & CTRL_CQ_UPDATE != 0,
            solicited: p.fm_ce_se & CTRL_SOLICITED != 0,
            imm: p.imm.to_be_bytes(),
            raddr,
            rkey,
            swap_add,
            compare,
            dqpn,
            qkey,
            inline: [EMPTY_SPAN; 2],
            ninline: 0,
            segs: [(0, 0, 0); MAX_SEGS],
            nsegs: 0,
        };
        let reads = matches!(opcode, op::RDMA_READ | op::ATOMIC_CS | op::ATOMIC_FA);
        for item in p.data_segs() {
            match item {
                DataItem::Inline(d) => {
                    if reads || w.nsegs > 0 || w.ninline > 0 {
                        return Err(syndrome::LOC_QP_OP);
                    }
                    for piece in [d.first, d.second] {
                        if !piece.is_empty() {
                            w.inline[w.ninline] = Span {
                                // Read-only source inside the local copy `buf`.
                                ptr: piece.as_ptr() as *mut u8,
                                len: piece.len(),
                            };
                            w.ninline += 1;
                        }
                    }
                }
                DataItem::Sge(sge) => {
                    if w.ninline > 0 || w.nsegs == MAX_SEGS {
                        return Err(syndrome::LOC_QP_OP);
                    }
                    w.segs[w.nsegs] = (sge.addr, sge.length, sge.lkey);
                    w.nsegs += 1;
                }
            }
        }
        if matches!(opcode, op::ATOMIC_CS | op::ATOMIC_FA) && (w.nsegs != 1 || w.segs[0].1 != 8) {
            return Err(syndrome::LOC_QP_OP);
        }
        Ok(w)
    }

    /// Check one local SGE against its MR: known lkey, same PD, in bounds, and LOCAL_WRITE
    /// when the device writes it. Violations are LOC_PROT.
    fn local_span(&self, pd: u32, addr: u64, len: u32, lkey: u32, write: bool) -> Result<Span, u8> {
        let len = u64::from(len);
        let mr = self.mrs.get(&lkey).ok_or(syndrome::LOC_PROT)?;
        if mr.pd != pd
            || addr < mr.addr
            || addr.checked_add(len).is_none_or(|e| e > mr.addr + mr.len)
            || (write && !mr.access.contains(Access::LOCAL_WRITE))
        {
            return Err(syndrome::LOC_PROT);
        }
        Ok(Span {
            ptr: addr as usize as *mut u8,
            len: len as usize,
        })
    }

    /// Check a remote range against the responder's MR and QP rights: REM_ACCESS otherwise.
    fn remote_span(
        &self,
        resp: &QpCtx,
        raddr: u64,
        len: u64,
        rkey: u32,
        need: Access,
    ) -> Result<Span, u8> {
        let mr = self.mrs.get(&rkey).ok_or(syndrome::REM_ACCESS)?;
        if mr.pd != resp.pd
            || raddr < mr.addr
            || raddr.checked_add(len).is_none_or(|e| e > mr.addr + mr.len)
            || !mr.access.contains(need)
            || !resp.attr.access.contains(need)
        {
            return Err(syndrome::REM_ACCESS);
        }
        Ok(Span {
            ptr: raddr as usize as *mut u8,
            len: len as usize,
        })
    }

    fn exec_head(&mut self, qpn: u32, torn_ok: bool) -> Step {
        let mut buf = [0u8; MAX_WQE];
        let q = self.qps.get(&qpn).expect("present");
        if let Some(t) = q.retry_at {
            if std::time::Instant::now() < t {
                return Step::Blocked { retried: false };
            }
        }
        let (ring_len, nbb) = Self::read_head(q, &mut buf);
        if let Some((idx, bf)) = q.bf_copy {
            if u32::from(idx) == q.sq_ci & 0xffff {
                match Self::compare_bf(q, &buf, ring_len, nbb, &bf) {
                    Some(true) => self.stats.bf_copies += 1,
                    Some(false) => self.stats.bf_mismatches += 1,
                    None => {}
                }
            }
        }
        let q = self.qps.get(&qpn).expect("present");
        let w = match Self::parse(q, &buf, ring_len) {
            Ok(w) => w,
            Err(s) => {
                let idx = q.sq_ci as u16;
                let head = ((q.sq_ci as usize) * WQEBB) & (ring_len - 1);
                self.fail_head(qpn, buf[head + 3], idx, nbb, s, torn_ok);
                return Step::Advanced;
            }
        };
        // Injected transport error (fault injector).
        if let Some(f) = self.fault.as_mut() {
            if f.rng.chance(f.cfg.error_ppm) {
                f.stats.errors += 1;
                self.fail_head(qpn, w.opcode, w.idx, nbb, syndrome::RETRY_EXC, torn_ok);
                return Step::Advanced;
            }
        }
        let q = self.qps.get(&qpn).expect("present");
        let pd = q.pd;
        // Gather (or, for READ/atomics, scatter) list.
        let writes_local = matches!(w.opcode, op::RDMA_READ | op::ATOMIC_CS | op::ATOMIC_FA);
        let mut local = [EMPTY_SPAN; MAX_SEGS];
        let mut nlocal = 0;
        if w.ninline > 0 {
            local[..w.ninline].copy_from_slice(&w.inline[..w.ninline]);
            nlocal = w.ninline;
        } else {
            for &(addr, bc, lkey) in &w.segs[..w.nsegs] {
                match self.local_span(pd, addr, seg_len(bc), lkey, writes_local) {
                    Ok(s) => {
                        local[nlocal] = s;
                        nlocal += 1;
                    }
                    Err(s) => {
                        self.fail_head(qpn, w.opcode, w.idx, nbb, s, torn_ok);
                        return Step::Advanced;
                    }
                }
            }
        }
        let local = &local[..nlocal];
        let len = w.len();
        let (resp, byte_cnt) = match (q.qp_type, w.opcode) {
            (_, op::NOP) => (Resp::Ok, 0),
            (QpType::Ud, _) => {
                if len > u64::from(q.attr.path_mtu) {
                    // A UD message never exceeds one MTU: local length error.
                    self.fail_head(qpn, w.opcode, w.idx, nbb, syndrome::LOC_LEN, torn_ok);
                    return Step::Advanced;
                }
                (self.deliver_ud(qpn, &w, local, torn_ok), len as u32)
            }
            (_, _) => {
                let peer = q.attr.remote_qpn;
                (
                    self.deliver_connected(qpn, peer, &w, local, torn_ok),
                    len as u32,
                )
            }
        };
        let peer_rnr_timer = if matches!(resp, Resp::Rnr) {
            self.qps
                .get(&self.qps[&qpn].attr.remote_qpn)
                .map_or(12, |p| p.attr.min_rnr_timer)
        } else {
            12
        };
        let q = self.qps.get_mut(&qpn).expect("present");
        match resp {
            Resp::Ok | Resp::Dropped => {
                q.rnr_left = None;
                q.retry_left = None;
                q.retry_at = None;
                q.sq_ci = q.sq_ci.wrapping_add(nbb);
                let byte_cnt = match w.opcode {
                    op::ATOMIC_CS | op::ATOMIC_FA => 8,
                    _ => byte_cnt,
                };
                if w.signaled {
                    let f = CqeFields {
                        opcode: cqe_op::REQ,
                        qpn,
                        wqe_opcode: w.opcode,
                        wqe_counter: w.idx,
                        byte_cnt,
                        ..Default::default()
                    };
                    let cqn = q.send_cqn;
                    self.push_cqe(cqn, f, stream(qpn, false), torn_ok);
                }
                Step::Advanced
            }
            Resp::Nak(s) => {
                self.fail_head(qpn, w.opcode, w.idx, nbb, s, torn_ok);
                Step::Advanced
            }
            Resp::Rnr => {
                // The responder's RNR NAK carries its min_rnr_timer; the requester waits
                // that long before retrying (device-thread mode; a pass otherwise).
                if torn_ok {
                    q.retry_at = Some(std::time::Instant::now() + rnr_timer(peer_rnr_timer));
                }
                if q.attr.rnr_retry >= 7 {
                    return Step::Blocked { retried: false };
                }
                let left = q.rnr_left.get_or_insert(q.attr.rnr_retry);
                if *left == 0 {
                    self.fail_head(qpn, w.opcode, w.idx, nbb, syndrome::RNR_RETRY_EXC, torn_ok);
                    return Step::Advanced;
                }
                *left -= 1;
                Step::Blocked { retried: true }
            }
            Resp::NoPeer => {
                if torn_ok {
                    // Local ACK timeout: 4.096 µs × 2^timeout.
                    let t = std::time::Duration::from_nanos(4096 << q.attr.timeout.min(31));
                    q.retry_at = Some(std::time::Instant::now() + t);
                }
                if q.attr.retry_cnt >= 7 {
                    return Step::Blocked { retried: false };
                }
                let left = q.retry_left.get_or_insert(q.attr.retry_cnt);
                if *left == 0 {
                    self.fail_head(qpn, w.opcode, w.idx, nbb, syndrome::RETRY_EXC, torn_ok);
                    return Step::Advanced;
                }
                *left -= 1;
                Step::Blocked { retried: true }
            }
        }
    }

    /// The head WQE failed: error CQE (always, whatever CQ_UPDATE says), QP to ERR.
    fn fail_head(&mut self, qpn: u32, wqe_opcode: u8, idx: u16, nbb: u32, s: u8, torn_ok: bool) {
        let Some(q) = self.qps.get_mut(&qpn) else {
            return;
        };
        q.sq_ci = q.sq_ci.wrapping_add(nbb);
        q.state = QpState::Err;
        q.rnr_left = None;
        q.retry_left = None;
        q.retry_at = None;
        let cqn = q.send_cqn;
        let f = CqeFields {
            opcode: cqe_op::REQ_ERR,
            qpn,
            wqe_opcode,
            wqe_counter: idx,
            syndrome: s,
            ..Default::default()
        };
        self.push_cqe(cqn, f, stream(qpn, false), torn_ok);
    }

    /// Flush the head WQE of a QP in ERR.
    fn flush_head(&mut self, qpn: u32, torn_ok: bool) {
        let mut buf = [0u8; MAX_WQE];
        let q = self.qps.get_mut(&qpn).expect("present");
        let (ring_len, nbb) = Self::read_head(q, &mut buf);
        let idx = q.sq_ci as u16;
        let head = ((q.sq_ci as usize) * WQEBB) & (ring_len - 1);
        q.sq_ci = q.sq_ci.wrapping_add(nbb);
        let cqn = q.send_cqn;
        let f = CqeFields {
            opcode: cqe_op::REQ_ERR,
            qpn,
            wqe_opcode: buf[head + 3],
            wqe_counter: idx,
            syndrome: syndrome::WR_FLUSH,
            ..Default::default()
        };
        self.push_cqe(cqn, f, stream(qpn, false), torn_ok);
    }

    /// Move a responder QP to ERR (the requester learns of it through its NAK).
    fn responder_error(&mut self, qpn: u32) {
        if let Some(q) = self.qps.get_mut(&qpn) {
            q.state = QpState::Err;
        }
    }

    /// RC / UC delivery to `peer`.
    fn deliver_connected(
        &mut self,
        qpn: u32,
        peer: u32,
        w: &Wqe,
        local: &[Span],
        torn_ok: bool,
    ) -> Resp {
        let reliable = self.qps.get(&qpn).map(|q| q.qp_type) == Some(QpType::Rc);
        let lost = if reliable {
            Resp::NoPeer
        } else {
            Resp::Dropped
        };
        let Some(p) = self.qps.get(&peer) else {
            return lost;
        };
        if !matches!(p.state, QpState::Rtr | QpState::Rts) || p.qp_type != self.qps[&qpn].qp_type {
            return lost;
        }
        let len = w.len();
        // Remote checks first (the responder validates the RETH before touching anything).
        let remote = match w.opcode {
            op::RDMA_WRITE | op::RDMA_WRITE_IMM => {
                self.remote_span(p, w.raddr, len, w.rkey, Access::REMOTE_WRITE)
            }
            op::RDMA_READ => self.remote_span(p, w.raddr, len, w.rkey, Access::REMOTE_READ),
            op::ATOMIC_CS | op::ATOMIC_FA => {
                if w.raddr % 8 != 0 {
                    // A misaligned atomic: the responder NAKs it as an invalid request.
                    self.responder_error(peer);
                    return Resp::Nak(syndrome::REM_INV_REQ);
                }
                self.remote_span(p, w.raddr, 8, w.rkey, Access::REMOTE_ATOMIC)
            }
            _ => Ok(EMPTY_SPAN),
        };
        let remote = match remote {
            Ok(r) => r,
            Err(s) => {
                if !reliable {
                    return Resp::Dropped;
                }
                // rxe and the IBA agree: a remote access violation puts the responder QP in
                // ERR too (its posted receives are then flushed).
                self.responder_error(peer);
                return Resp::Nak(s);
            }
        };
        match w.opcode {
            op::RDMA_WRITE => {
                // SAFETY: `remote` was checked against an MR of the responder's PD and
                // `local` against MRs of the requester (or points into the WQE buffer); the
                // registration contract keeps both valid.
                unsafe { gather_into(local, remote) };
                self.stats.bytes += len;
                Resp::Ok
            }
            op::RDMA_READ => {
                // SAFETY: as above, direction reversed (local spans need LOCAL_WRITE, checked).
                unsafe { scatter_from(remote, local) };
                self.stats.bytes += len;
                Resp::Ok
            }
            op::ATOMIC_CS | op::ATOMIC_FA => {
                let target = remote.ptr as *mut u64;
                // SAFETY: `remote` is an 8-byte, 8-aligned range of a registered MR; the
                // device's atomic is modelled as an unaligned-safe read-modify-write. The old
                // value lands in host byte order (mlx5 with the kernel's atomic endian mode).
                unsafe {
                    let old = std::ptr::read_volatile(target);
                    let new = if w.opcode == op::ATOMIC_CS {
                        if old == w.compare {
                            w.swap_add
                        } else {
                            old
                        }
                    } else {
                        old.wrapping_add(w.swap_add)
                    };
                    std::ptr::write_volatile(target, new);
                    std::ptr::write_unaligned(local[0].ptr as *mut u64, old);
                }
                self.stats.bytes += 8;
                Resp::Ok
            }
            op::SEND | op::SEND_IMM | op::RDMA_WRITE_IMM => {
                let r = self.consume_recv(qpn, peer, w, local, remote, None, torn_ok);
                if !reliable && matches!(r, Resp::Rnr | Resp::Nak(_)) {
                    // UC has no acks: the requester never hears of the responder's trouble
                    // (the responder side, a LOC_LEN CQE and ERR, has happened already).
                    return Resp::Dropped;
                }
                r
            }
            _ => Resp::Ok,
        }
    }

    /// UD delivery: address vector → destination QP, Q_Key check, 40-byte GRH space.
    fn deliver_ud(&mut self, qpn: u32, w: &Wqe, local: &[Span], torn_ok: bool) -> Resp {
        let Some(p) = self.qps.get(&w.dqpn) else {
            return Resp::Dropped;
        };
        if p.qp_type != QpType::Ud || !matches!(p.state, QpState::Rtr | QpState::Rts) {
            return Resp::Dropped;
        }
        // IBA: a Q_Key with its high-order bit set in the request means "use the sending
        // QP's own Q_Key". A mismatch drops the datagram silently.
        let qkey = if w.qkey & 0x8000_0000 != 0 {
            self.qps.get(&qpn).map_or(0, |q| q.attr.qkey)
        } else {
            w.qkey
        };
        if p.attr.qkey != qkey {
            return Resp::Dropped;
        }
        let peer = w.dqpn;
        match self.consume_recv(qpn, peer, w, local, EMPTY_SPAN, Some(()), torn_ok) {
            Resp::Rnr | Resp::Nak(_) | Resp::NoPeer => Resp::Dropped,
            r => r,
        }
    }

    fn find_recv(&self, peer: u32) -> Option<RecvLoc> {
        let p = self.qps.get(&peer)?;
        match p.srqn {
            None => {
                if p.rq_ci & 0xffff == p.rq_posted() {
                    None
                } else {
                    Some(RecvLoc::Rq { ci: p.rq_ci })
                }
            }
            Some(srqn) => {
                let s = self.srqs.get(&srqn)?;
                let posted = s.mem.load_be32(s.dbrec_off) & 0xffff;
                if s.consumed & 0xffff == posted {
                    None
                } else {
                    Some(RecvLoc::Srq { srqn, index: s.cur })
                }
            }
        }
    }

    /// Read the data segments of a receive WQE (up to the `MLX5_INVALID_LKEY` terminator),
    /// check them against the MRs of `pd` (LOCAL_WRITE), and return the spans.
    fn recv_spans(
        &self,
        loc: RecvLoc,
        peer: u32,
        spans: &mut [Span; MAX_SEGS],
    ) -> Result<(usize, u64), u8> {
        let mut wqe = [0u8; MAX_WQE];
        let (mem, off, stride, first, pd) = match loc {
            RecvLoc::Rq { ci } => {
                let p = &self.qps[&peer];
                let slot = (ci & (p.rq_cnt - 1)) as usize;
                (
                    &p.mem,
                    p.rq_off + slot * p.rq_stride as usize,
                    p.rq_stride as usize,
                    0,
                    p.pd,
                )
            }
            RecvLoc::Srq { srqn, index } => {
                let s = &self.srqs[&srqn];
                (
                    &s.mem,
                    usize::from(index) * s.stride as usize,
                    s.stride as usize,
                    16,
                    s.pd,
                )
            }
        };
        let stride = stride.min(MAX_WQE);
        mem.read(off, &mut wqe[..stride]);
        let mut n = 0;
        let mut cap = 0u64;
        let slot = &wqe[first..stride];
        // A receive WQE we cannot read as one is a local QP operation error on the responder.
        let sges = wire::parse_recv_wqe(slot, slot.len() / 16).map_err(|_| syndrome::LOC_QP_OP)?;
        for sge in sges {
            if sge.length == 0 || n == MAX_SEGS {
                continue;
            }
            let len = sge.length & 0x7fff_ffff;
            spans[n] = self.local_span(pd, sge.addr, len, sge.lkey, true)?;
            cap += u64::from(len);
            n += 1;
        }
        Ok((n, cap))
    }

    fn commit_recv(&mut self, peer: u32, loc: RecvLoc) -> u16 {
        match loc {
            RecvLoc::Rq { ci } => {
                if let Some(p) = self.qps.get_mut(&peer) {
                    p.rq_ci = ci.wrapping_add(1);
                }
                ci as u16
            }
            RecvLoc::Srq { srqn, index } => {
                if let Some(s) = self.srqs.get_mut(&srqn) {
                    let mut nb = [0u8; 2];
                    s.mem
                        .read(usize::from(index) * s.stride as usize + 2, &mut nb);
                    s.cur = u16::from_be_bytes(nb) & (s.wqe_cnt - 1) as u16;
                    s.consumed = s.consumed.wrapping_add(1);
                }
                index
            }
        }
    }

    /// A message that consumes a receive at `peer` (SEND, SEND_IMM, WRITE_IMM; UD when `ud`).
    #[allow(clippy::too_many_arguments)]
    fn consume_recv(
        &mut self,
        qpn: u32,
        peer: u32,
        w: &Wqe,
        local: &[Span],
        remote: Span,
        ud: Option<()>,
        torn_ok: bool,
    ) -> Resp {
        let Some(loc) = self.find_recv(peer) else {
            return Resp::Rnr;
        };
        let len = w.len();
        let p = &self.qps[&peer];
        let (recv_cqn, srqn) = (p.recv_cqn, p.srqn.unwrap_or(0));
        let mut spans = [EMPTY_SPAN; MAX_SEGS];
        let scanned = self.recv_spans(loc, peer, &mut spans);
        let counter = self.commit_recv(peer, loc);
        let resp_err = |s: u8| CqeFields {
            opcode: cqe_op::RESP_ERR,
            qpn: peer,
            wqe_counter: counter,
            syndrome: s,
            srqn,
            ..Default::default()
        };
        let (n, cap) = match scanned {
            Ok(x) => x,
            Err(s) => {
                // A bad receive WQE: responder LOC_PROT, requester REM_OP (the responder
                // could not complete the operation).
                self.push_cqe(recv_cqn, resp_err(s), stream(peer, true), torn_ok);
                self.responder_error(peer);
                return Resp::Nak(syndrome::REM_OP);
            }
        };
        let grh = ud.is_some();
        let needed = if w.opcode == op::RDMA_WRITE_IMM {
            0
        } else {
            len + if grh { GRH_LEN as u64 } else { 0 }
        };
        if needed > cap {
            // Longer than the receive: responder LOC_LEN, requester REM_INV_REQ (mlx5 and
            // the IBA; rxe reports LOC_QP_OP / REM_OP here, see DESIGN.md 5b).
            self.push_cqe(
                recv_cqn,
                resp_err(syndrome::LOC_LEN),
                stream(peer, true),
                torn_ok,
            );
            self.responder_error(peer);
            return Resp::Nak(syndrome::REM_INV_REQ);
        }
        let spans = &spans[..n];
        match w.opcode {
            op::RDMA_WRITE_IMM => {
                // SAFETY: `remote` checked against the responder's MR, `local` against the
                // requester's (or the WQE buffer).
                unsafe { gather_into(local, remote) };
            }
            _ => {
                let mut grh_bytes = make_grh(len as u32);
                let mut src = [EMPTY_SPAN; MAX_SEGS + 1];
                let mut ns = 0;
                if grh {
                    src[0] = Span {
                        ptr: grh_bytes.as_mut_ptr(),
                        len: GRH_LEN,
                    };
                    ns = 1;
                }
                for s in local {
                    src[ns] = *s;
                    ns += 1;
                }
                // SAFETY: source spans are checked requester MRs, the WQE buffer or the GRH
                // array on this stack; destination spans are checked LOCAL_WRITE MRs of the
                // responder; `needed <= cap`.
                unsafe { copy_list(&src[..ns], spans) };
            }
        }
        self.stats.bytes += len;
        let (opcode, with_imm) = match w.opcode {
            op::SEND => (cqe_op::RESP_SEND, false),
            op::SEND_IMM => (cqe_op::RESP_SEND_IMM, true),
            _ => (cqe_op::RESP_WR_IMM, true),
        };
        let f = CqeFields {
            opcode,
            qpn: peer,
            wqe_counter: counter,
            byte_cnt: (len + if grh { GRH_LEN as u64 } else { 0 }) as u32,
            imm_be: if with_imm { w.imm } else { [0; 4] },
            src_qpn: qpn,
            grh,
            srqn,
            se: w.solicited,
            ..Default::default()
        };
        self.push_cqe(recv_cqn, f, stream(peer, true), torn_ok);
        Resp::Ok
    }

    // ---------------------------------------------------------------- CQ writing

    fn push_cqe(&mut self, cqn: u32, f: CqeFields, stream: u64, torn_ok: bool) {
        let pass = self.stats.passes;
        let mut delay = 0;
        if let Some(fi) = self.fault.as_mut() {
            if fi.rng.chance(fi.cfg.delay_ppm) {
                fi.stats.delayed += 1;
                delay = 1 + fi.rng.below(u64::from(fi.cfg.max_delay_passes.max(1)));
            }
        }
        let Some(cq) = self.cqs.get_mut(&cqn) else {
            return;
        };
        if delay > 0 || !cq.held.is_empty() {
            cq.held.push_back(Held {
                fields: f,
                stream,
                release_pass: pass + delay,
            });
            return;
        }
        self.write_cqe(cqn, f, torn_ok);
    }

    /// Release held CQEs that are due, keeping each queue's order; with the reorder fault,
    /// a due CQE may overtake older ones of *other* queues.
    fn release_held(&mut self, torn_ok: bool) -> usize {
        let pass = self.stats.passes;
        let cqns: Vec<u32> = self
            .cqs
            .iter()
            .filter(|(_, c)| !c.held.is_empty())
            .map(|(&n, _)| n)
            .collect();
        let mut n = 0;
        for cqn in cqns {
            loop {
                let reorder = match self.fault.as_mut() {
                    Some(f) => f.rng.chance(f.cfg.reorder_ppm),
                    None => false,
                };
                let cq = self.cqs.get_mut(&cqn).expect("present");
                // Candidates: due, and no older held CQE of the same stream.
                let mut pick = None;
                let mut seen: [u64; 8] = [u64::MAX; 8];
                let mut nseen = 0;
                for (i, h) in cq.held.iter().enumerate().take(8) {
                    let blocked = seen[..nseen].contains(&h.stream);
                    if !blocked && h.release_pass <= pass {
                        pick = Some(i);
                        if !reorder || i > 0 {
                            break;
                        }
                    }
                    if nseen < 8 {
                        seen[nseen] = h.stream;
                        nseen += 1;
                    }
                }
                let Some(i) = pick else { break };
                if i > 0 {
                    if let Some(f) = self.fault.as_mut() {
                        f.stats.reordered += 1;
                    }
                }
                let h = cq.held.remove(i).expect("index valid");
                self.write_cqe(cqn, h.fields, torn_ok);
                n += 1;
            }
        }
        n
    }

    /// Write one CQE: body first, then `op_own` with a release store. Checks for overrun.
    fn write_cqe(&mut self, cqn: u32, f: CqeFields, torn_ok: bool) {
        let spins = self.fault.as_ref().map_or(0, |f| f.cfg.torn_write_spins);
        let Some(cq) = self.cqs.get_mut(&cqn) else {
            return;
        };
        if cq.overrun {
            self.stats.cqes_dropped += 1;
            return;
        }
        let ci = cq.mem.load_be32(cq.dbrec_off) & 0xff_ffff;
        if (cq.pi.wrapping_sub(ci) & 0xff_ffff) >= cq.cqe_cnt {
            cq.overrun = true;
            self.stats.cqes_dropped += 1;
            self.events.push(AsyncEvent::CqOverrun { cqn });
            // The QPs completing on this CQ cannot go on: move them to ERR.
            let hit: Vec<u32> = self
                .qps
                .values()
                .filter(|q| q.send_cqn == cqn || q.recv_cqn == cqn)
                .map(|q| q.qpn)
                .collect();
            for qpn in hit {
                if let Some(q) = self.qps.get_mut(&qpn) {
                    q.state = QpState::Err;
                }
                self.events.push(AsyncEvent::QpFatal { qpn });
            }
            return;
        }
        let owner = cq.pi & cq.cqe_cnt != 0;
        let bytes = f.emit(owner);
        let slot = (cq.pi & (cq.cqe_cnt - 1)) as usize;
        let off = slot * cq.cqe_size as usize + (cq.cqe_size as usize - 64);
        cq.mem.write(off, &bytes[..63]);
        if torn_ok {
            for _ in 0..spins {
                std::hint::spin_loop();
            }
        }
        cq.mem.store_u8_release(off + 63, bytes[63]);
        cq.pi = cq.pi.wrapping_add(1);
        self.stats.cqes += 1;
    }
}

/// The RNR NAK timer of an IBA-encoded `min_rnr_timer` (0 = 655.36 ms, 1 = 0.01 ms, ...,
/// 12 = 0.64 ms, 31 = 491.52 ms).
fn rnr_timer(code: u8) -> std::time::Duration {
    const US: [u32; 32] = [
        655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560,
        3_840, 5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880,
        163_840, 245_760, 327_680, 491_520,
    ];
    std::time::Duration::from_micros(u64::from(US[usize::from(code & 31)]))
}

fn stream(qpn: u32, recv: bool) -> u64 {
    (u64::from(qpn) << 1) | u64::from(recv)
}

/// The 40-byte GRH in front of a UD receive: an IPv6-shaped header (version 6, payload
/// length = BTH 12 + DETH 8 + payload + ICRC 4, next header 0x1b = IBA transport, hop limit
/// 64) with the sim port's GID (`::ffff:127.0.0.1`) as source and destination: the sim has
/// one port, so every datagram is a loopback.
fn make_grh(payload: u32) -> [u8; GRH_LEN] {
    let mut g = [0u8; GRH_LEN];
    g[0] = 0x60;
    g[4..6].copy_from_slice(&((payload + 12 + 8 + 4) as u16).to_be_bytes());
    g[6] = 0x1b;
    g[7] = 64;
    g[8..24].copy_from_slice(&super::SIM_GID);
    g[24..40].copy_from_slice(&super::SIM_GID);
    g
}

/// Copy the concatenation of `src` into the concatenation of `dst`.
///
/// # Safety
/// Every span must be valid for its length (sources readable, destinations writable), and
/// the total of `dst` at least that of `src`.
unsafe fn copy_list(src: &[Span], dst: &[Span]) {
    let mut di = 0;
    let mut doff = 0;
    for s in src {
        let mut soff = 0;
        while soff < s.len {
            while di < dst.len() && doff == dst[di].len {
                di += 1;
                doff = 0;
            }
            if di == dst.len() {
                return;
            }
            let n = (s.len - soff).min(dst[di].len - doff);
            // SAFETY: both sub-ranges lie inside spans the caller vouches for.
            unsafe { dma_copy(dst[di].ptr.add(doff), s.ptr.add(soff), n) };
            soff += n;
            doff += n;
        }
    }
}

/// Gather `local` into the single range `remote`.
///
/// # Safety
/// As [`copy_list`].
unsafe fn gather_into(local: &[Span], remote: Span) {
    // SAFETY: forwarded.
    unsafe { copy_list(local, &[remote]) }
}

/// Scatter the single range `remote` into `local`.
///
/// # Safety
/// As [`copy_list`].
unsafe fn scatter_from(remote: Span, local: &[Span]) {
    // SAFETY: forwarded.
    unsafe { copy_list(&[remote], local) }
}
