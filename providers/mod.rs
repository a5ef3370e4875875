//! The data-plane API and its providers.
//!
//! One hot loop, written once against these traits, runs on three providers:
//!
//! - [`mlx5`]: the Rust code writes mlx5 WQEs into the send queue, updates the doorbell record,
//!   rings the doorbell through the UAR (8-byte write or BlueFlame copy) and parses CQEs itself.
//! - [`rxe`]: any verbs device (soft-RoCE in particular) through libibverbs' own
//!   `ibv_post_send` / `ibv_post_recv` / `ibv_poll_cq`.
//! - [`sim`]: a software mlx5 device; the [`mlx5`] provider runs on it unchanged.
//!
//! Dispatch is static: code is generic over [`Provider`] and the queue traits.
//!
//! ## Posting and doorbells
//!
//! [`SendQueue::post`] *stages* a work request: it is written (mlx5) or queued (verbs) but
//! the device does not see it until [`SendQueue::ring`] publishes everything staged with one
//! doorbell (mlx5: one doorbell record update and one UAR write; verbs: one `ibv_post_send`
//! call with a linked list, i.e. one `write()` on rxe). [`SendQueue::post_list`] is
//! post-each-then-ring.
//!
//! Every queue method takes `&mut self`: a queue has exactly one producer, and the borrow
//! checker enforces it. Two live posters on one queue do not compile:
//!
//! ```compile_fail
//! use rdma_direct::providers::{QueuePair, SendQueue, SendWr};
//! fn two_posters<Q: QueuePair>(qp: &mut Q) {
//!     let a = qp.sq();
//!     let b = qp.sq(); // second mutable borrow while `a` is alive
//!     let _ = a.post(SendWr::send(1, &[]));
//!     let _ = b.post(SendWr::send(2, &[]));
//! }
//! ```
//!
//! The same two posts one after the other compile (so the failure above is the borrow, not a
//! typo):
//!
//! ```
//! use rdma_direct::providers::{QueuePair, SendQueue, SendWr};
//! fn one_poster_at_a_time<Q: QueuePair>(qp: &mut Q) {
//!     let _ = qp.sq().post(SendWr::send(1, &[]));
//!     let _ = qp.sq().post(SendWr::send(2, &[]));
//! }
//! ```
//!
//! ## Accounting: nothing is lost
//!
//! A send queue holds at most [`QpCaps::max_send_wr`] outstanding work requests. A request
//! stays outstanding until a completion retires it: its own (signaled) completion, or a later
//! signaled completion on the same send queue that *covers* it ([`Completion::covered`]), or a
//! flush completion when the QP fails. Posting to a full queue returns
//! [`PostError::QueueFull`] and hands the request back ([`Rejected`]); it never overwrites an
//! unfinished WQE. A request that is invalid (inline too large, too many SGEs, a misaligned
//! atomic, an op the QP type cannot do, a QP not in a state that may post) is rejected before
//! anything is written.
//!
//! ## Receives and WRITE WITH IMMEDIATE
//!
//! A receive work request may have zero SGEs. An RDMA WRITE WITH IMMEDIATE **does consume a
//! posted receive WQE at the responder** (the data goes to the remote address; the receive WQE
//! only carries the completion and the immediate), so a responder must keep receives posted
//! for it, zero-SGE ones being enough. (The guide this project grew from says otherwise; it is
//! wrong on this point.)
//!
//! ## Immediate data
//!
//! [`SendOp::SendImm`] / [`SendOp::WriteImm`] take the immediate as a host-order `u32`; it
//! travels big-endian and [`Completion::imm`] gives back the same host-order value.

use std::fmt;

pub mod mlx5;
pub mod rxe;
pub mod sim;

pub use crate::endpoint::{Mtu, QpEndpoint, RemoteMr};

/// One scatter/gather element: `length` bytes at `addr`, inside the MR of `lkey`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Sge {
    /// Virtual address.
    pub addr: u64,
    /// Length in bytes. Zero-length SGEs are skipped.
    pub length: u32,
    /// Local key of the MR the bytes lie in.
    pub lkey: u32,
}

/// The operation of a send work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOp {
    /// SEND: consumes a receive at the responder.
    Send,
    /// SEND WITH IMMEDIATE (`imm` in host order).
    SendImm {
        /// Immediate data, host order.
        imm: u32,
    },
    /// RDMA WRITE to `raddr` in the remote MR of `rkey`.
    Write {
        /// Remote address.
        raddr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// RDMA WRITE WITH IMMEDIATE: consumes a receive at the responder.
    WriteImm {
        /// Remote address.
        raddr: u64,
        /// Remote key.
        rkey: u32,
        /// Immediate data, host order.
        imm: u32,
    },
    /// RDMA READ from `raddr` into the local SGEs.
    Read {
        /// Remote address.
        raddr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// 8-byte atomic compare-and-swap at `raddr` (8-byte aligned); the old value lands in the
    /// single 8-byte local SGE, in host byte order.
    CompareSwap {
        /// Remote address (8-byte aligned).
        raddr: u64,
        /// Remote key.
        rkey: u32,
        /// Value compared with the remote one.
        compare: u64,
        /// Value written when they are equal.
        swap: u64,
    },
    /// 8-byte atomic fetch-and-add at `raddr` (8-byte aligned); the old value lands in the
    /// single 8-byte local SGE, in host byte order.
    FetchAdd {
        /// Remote address (8-byte aligned).
        raddr: u64,
        /// Remote key.
        rkey: u32,
        /// Addend.
        add: u64,
    },
}

impl SendOp {
    /// Short name, perftest style (`SEND`, `WRITE_IMM`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            SendOp::Send => "SEND",
            SendOp::SendImm { .. } => "SEND_IMM",
            SendOp::Write { .. } => "WRITE",
            SendOp::WriteImm { .. } => "WRITE_IMM",
            SendOp::Read { .. } => "READ",
            SendOp::CompareSwap { .. } => "CMP_SWAP",
            SendOp::FetchAdd { .. } => "FETCH_ADD",
        }
    }
    /// True for READ and the atomics (the ones that bring data back).
    pub fn is_read_like(&self) -> bool {
        matches!(
            self,
            SendOp::Read { .. } | SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. }
        )
    }
    /// True for the atomics.
    pub fn is_atomic(&self) -> bool {
        matches!(self, SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. })
    }
}

/// Where a send request's local data comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Payload<'a> {
    /// Gather from (or, for READ/atomics, scatter into) registered memory.
    Sges(&'a [Sge]),
    /// Copy these bytes into the WQE at post time (no lkey needed; the buffer may be reused as
    /// soon as `post` returns). Not valid for READ and atomics.
    Inline(&'a [u8]),
}

impl Payload<'_> {
    /// Total length in bytes.
    pub fn len(&self) -> usize {
        match self {
            Payload::Sges(s) => s.iter().map(|s| s.length as usize).sum(),
            Payload::Inline(b) => b.len(),
        }
    }
    /// True when there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Flags of a send work request (a hand-written bit set).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct SendFlags(pub u8);

impl SendFlags {
    /// No flags: unsignaled, unfenced.
    pub const NONE: SendFlags = SendFlags(0);
    /// Generate a completion for this request (and retire the unsignaled ones before it).
    pub const SIGNALED: SendFlags = SendFlags(1);
    /// Wait for earlier READs and atomics to finish before starting this request.
    pub const FENCE: SendFlags = SendFlags(2);
    /// Ask the responder to raise a solicited event.
    pub const SOLICITED: SendFlags = SendFlags(4);

    /// True if every flag of `other` is set.
    #[inline]
    pub const fn contains(self, other: SendFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for SendFlags {
    type Output = SendFlags;
    fn bitor(self, rhs: SendFlags) -> SendFlags {
        SendFlags(self.0 | rhs.0)
    }
}

/// A UD destination: the address handle and the remote QP.
#[derive(Clone, Copy, Debug)]
pub struct UdDest<'a> {
    /// The address handle (from [`Provider::create_ah`]).
    pub ah: &'a AddressHandle,
    /// Remote QPN.
    pub remote_qpn: u32,
    /// Remote Q_Key.
    pub remote_qkey: u32,
}

/// A send work request. It borrows its SGE list and inline bytes; nothing is allocated.
#[derive(Clone, Copy, Debug)]
pub struct SendWr<'a> {
    /// The caller's identifier, returned in the completion.
    pub wr_id: u64,
    /// What to do.
    pub op: SendOp,
    /// Local data.
    pub payload: Payload<'a>,
    /// Signaled, fence, solicited.
    pub flags: SendFlags,
    /// The destination, on UD QPs only.
    pub ud: Option<UdDest<'a>>,
}

impl<'a> SendWr<'a> {
    /// A request with `op` over `sges`, unsignaled.
    pub fn new(wr_id: u64, op: SendOp, sges: &'a [Sge]) -> Self {
        SendWr {
            wr_id,
            op,
            payload: Payload::Sges(sges),
            flags: SendFlags::NONE,
            ud: None,
        }
    }
    /// SEND of `sges`, unsignaled.
    pub fn send(wr_id: u64, sges: &'a [Sge]) -> Self {
        Self::new(wr_id, SendOp::Send, sges)
    }
    /// RDMA WRITE of `sges` to `raddr`/`rkey`, unsignaled.
    pub fn write(wr_id: u64, sges: &'a [Sge], raddr: u64, rkey: u32) -> Self {
        Self::new(wr_id, SendOp::Write { raddr, rkey }, sges)
    }
    /// RDMA READ from `raddr`/`rkey` into `sges`, unsignaled.
    pub fn read(wr_id: u64, sges: &'a [Sge], raddr: u64, rkey: u32) -> Self {
        Self::new(wr_id, SendOp::Read { raddr, rkey }, sges)
    }
    /// Use inline data instead of SGEs.
    pub fn inline(mut self, data: &'a [u8]) -> Self {
        self.payload = Payload::Inline(data);
        self
    }
    /// Ask for a completion.
    pub fn signaled(mut self) -> Self {
        self.flags = self.flags | SendFlags::SIGNALED;
        self
    }
    /// Add flags.
    pub fn with_flags(mut self, f: SendFlags) -> Self {
        self.flags = self.flags | f;
        self
    }
    /// Set the UD destination.
    pub fn to(mut self, dest: UdDest<'a>) -> Self {
        self.ud = Some(dest);
        self
    }
}

/// A receive work request: where the incoming bytes go. Zero SGEs are allowed (see the
/// module doc on WRITE WITH IMMEDIATE).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvWr<'a> {
    /// The caller's identifier, returned in the completion.
    pub wr_id: u64,
    /// Scatter list.
    pub sges: &'a [Sge],
}

/// Transport type of a QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QpType {
    /// Reliable connected.
    Rc,
    /// Unreliable connected (no READ, no atomics, no acks).
    Uc,
    /// Unreliable datagram (SEND only, one MTU at most, address handle per request).
    Ud,
}

impl fmt::Display for QpType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QpType::Rc => "RC",
            QpType::Uc => "UC",
            QpType::Ud => "UD",
        })
    }
}

/// QP state, as in `enum ibv_qp_state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QpState {
    /// RESET (0).
    Reset,
    /// INIT (1): receives may be posted.
    Init,
    /// Ready to receive (2).
    Rtr,
    /// Ready to send (3): sends may be posted.
    Rts,
    /// Send queue drained (4).
    Sqd,
    /// Send queue error (5).
    Sqe,
    /// Error (6): everything outstanding is flushed.
    Err,
    /// Any other value the device reported.
    Unknown(u32),
}

impl QpState {
    /// From `enum ibv_qp_state`.
    pub fn from_ibv(v: u32) -> QpState {
        match v {
            0 => QpState::Reset,
            1 => QpState::Init,
            2 => QpState::Rtr,
            3 => QpState::Rts,
            4 => QpState::Sqd,
            5 => QpState::Sqe,
            6 => QpState::Err,
            x => QpState::Unknown(x),
        }
    }
    /// To `enum ibv_qp_state`.
    pub fn to_ibv(self) -> u32 {
        match self {
            QpState::Reset => 0,
            QpState::Init => 1,
            QpState::Rtr => 2,
            QpState::Rts => 3,
            QpState::Sqd => 4,
            QpState::Sqe => 5,
            QpState::Err => 6,
            QpState::Unknown(x) => x,
        }
    }
}

impl fmt::Display for QpState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QpState::Reset => f.write_str("RESET"),
            QpState::Init => f.write_str("INIT"),
            QpState::Rtr => f.write_str("RTR"),
            QpState::Rts => f.write_str("RTS"),
            QpState::Sqd => f.write_str("SQD"),
            QpState::Sqe => f.write_str("SQE"),
            QpState::Err => f.write_str("ERR"),
            QpState::Unknown(x) => write!(f, "UNKNOWN({x})"),
        }
    }
}

/// Why a post was refused. Small and `Copy`; the request itself comes back in [`Rejected`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PostError {
    /// The queue has `capacity` outstanding requests (or, on mlx5, not enough free WQEBBs).
    QueueFull {
        /// Outstanding requests the queue holds.
        capacity: u32,
    },
    /// A signaled request (or a receive) could overrun its CQ: `cqe` entries are spoken for.
    CqFull {
        /// CQ size.
        cqe: u32,
    },
    /// Inline payload longer than the QP's max inline.
    InlineTooLarge {
        /// Requested length.
        len: u32,
        /// The QP's max inline.
        max: u32,
    },
    /// More SGEs than the queue allows.
    TooManySges {
        /// Given.
        n: u32,
        /// The queue's max SGE.
        max: u32,
    },
    /// Atomic remote address not 8-byte aligned.
    AtomicMisaligned {
        /// The address.
        raddr: u64,
    },
    /// Atomic local buffer must be exactly one 8-byte SGE.
    AtomicLocalLen {
        /// The total length given.
        len: u32,
    },
    /// Inline data on an op that cannot carry it (READ, atomics).
    InlineNotAllowed,
    /// A zero-length RDMA READ.
    ZeroLengthRead,
    /// The op is not valid on this QP type (READ/atomics on UC, anything but SEND on UD).
    OpNotSupported {
        /// The op's name.
        op: &'static str,
        /// The QP type.
        qp_type: QpType,
    },
    /// The QP is not in a state that accepts this post (sends need RTS; receives need
    /// INIT, RTR or RTS).
    BadState {
        /// The state it is in.
        state: QpState,
    },
    /// A UD send without a destination, or a connected QP given one.
    UdDest,
    /// A UD send larger than the path MTU (rxe reports success and sends nothing).
    UdTooLarge {
        /// Payload length.
        len: u32,
        /// MTU in bytes.
        mtu: u32,
    },
    /// The device (libibverbs) refused the post with this errno.
    Device {
        /// errno.
        errno: i32,
    },
}

impl fmt::Display for PostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            PostError::QueueFull { capacity } => {
                write!(
                    f,
                    "queue full: {capacity} requests outstanding; poll completions first"
                )
            }
            PostError::CqFull { cqe } => {
                write!(
                    f,
                    "CQ full: all {cqe} entries are spoken for; poll it or create a larger CQ"
                )
            }
            PostError::InlineTooLarge { len, max } => {
                write!(
                    f,
                    "inline payload of {len} B exceeds the QP's max_inline_data {max} B"
                )
            }
            PostError::TooManySges { n, max } => {
                write!(f, "{n} SGEs exceed the queue's max_sge {max}")
            }
            PostError::AtomicMisaligned { raddr } => {
                write!(f, "atomic remote address {raddr:#x} is not 8-byte aligned")
            }
            PostError::AtomicLocalLen { len } => {
                write!(f, "atomic needs one local 8-byte SGE, got {len} B")
            }
            PostError::InlineNotAllowed => {
                f.write_str("inline data is not allowed on READ or atomics")
            }
            PostError::ZeroLengthRead => f.write_str("zero-length RDMA READ"),
            PostError::OpNotSupported { op, qp_type } => {
                write!(f, "{op} is not supported on {qp_type} QPs")
            }
            PostError::BadState { state } => {
                write!(
                    f,
                    "QP is in {state}: sends need RTS, receives need INIT/RTR/RTS"
                )
            }
            PostError::UdDest => {
                f.write_str("UD sends need a destination (and only UD sends take one)")
            }
            PostError::UdTooLarge { len, mtu } => {
                write!(f, "UD send of {len} B exceeds the path MTU of {mtu} B")
            }
            PostError::Device { errno } => {
                write!(
                    f,
                    "device refused the post: {}",
                    crate::error::errno_name(errno)
                )
            }
        }
    }
}

impl std::error::Error for PostError {}

/// A refused request, handed back with the reason.
#[derive(Clone, Copy, Debug)]
pub struct Rejected<W> {
    /// The request, unchanged.
    pub wr: W,
    /// Why.
    pub error: PostError,
}

/// Completion status: every `enum ibv_wc_status` value, with its meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum WcStatus {
    /// 0: the request completed.
    #[default]
    Success,
    /// 1: local length error (receive buffer too small, or message too long for the QP).
    LocLenErr,
    /// 2: local QP operation error (an internal QP consistency error, or an op the QP cannot do).
    LocQpOpErr,
    /// 3: local EE context operation error (RD only).
    LocEecOpErr,
    /// 4: local protection error (an lkey that does not cover the SGE, wrong PD).
    LocProtErr,
    /// 5: flushed: the QP went to ERR before this request ran.
    WrFlushErr,
    /// 6: memory window bind error.
    MwBindErr,
    /// 7: bad response from the responder (unexpected transport opcode).
    BadRespErr,
    /// 8: local access error (a protection error on the responder side of an incoming op).
    LocAccessErr,
    /// 9: the responder found the request invalid (e.g. the SEND was longer than its receive).
    RemInvReqErr,
    /// 10: remote access error (wrong rkey, out of bounds, missing remote access rights).
    RemAccessErr,
    /// 11: remote operation error (the responder could not complete it).
    RemOpErr,
    /// 12: transport retry counter exceeded (no ack from the peer).
    RetryExcErr,
    /// 13: RNR retry counter exceeded (the peer had no receive posted).
    RnrRetryExcErr,
    /// 14: local RDD violation (RD only).
    LocRddViolErr,
    /// 15: remote invalid RD request.
    RemInvRdReqErr,
    /// 16: remote aborted.
    RemAbortErr,
    /// 17: invalid EE context number.
    InvEecnErr,
    /// 18: invalid EE context state.
    InvEecStateErr,
    /// 19: fatal error.
    FatalErr,
    /// 20: response timeout.
    RespTimeoutErr,
    /// 21: general error.
    GeneralErr,
    /// 22: tag matching error.
    TmErr,
    /// 23: tag matching rendezvous incomplete.
    TmRndvIncomplete,
    /// Any value this crate does not know.
    Other(u32),
}

impl WcStatus {
    /// From `enum ibv_wc_status`.
    pub fn from_ibv(v: u32) -> WcStatus {
        use WcStatus::*;
        match v {
            0 => Success,
            1 => LocLenErr,
            2 => LocQpOpErr,
            3 => LocEecOpErr,
            4 => LocProtErr,
            5 => WrFlushErr,
            6 => MwBindErr,
            7 => BadRespErr,
            8 => LocAccessErr,
            9 => RemInvReqErr,
            10 => RemAccessErr,
            11 => RemOpErr,
            12 => RetryExcErr,
            13 => RnrRetryExcErr,
            14 => LocRddViolErr,
            15 => RemInvRdReqErr,
            16 => RemAbortErr,
            17 => InvEecnErr,
            18 => InvEecStateErr,
            19 => FatalErr,
            20 => RespTimeoutErr,
            21 => GeneralErr,
            22 => TmErr,
            23 => TmRndvIncomplete,
            x => Other(x),
        }
    }
    /// To `enum ibv_wc_status`.
    pub fn to_ibv(self) -> u32 {
        use WcStatus::*;
        match self {
            Success => 0,
            LocLenErr => 1,
            LocQpOpErr => 2,
            LocEecOpErr => 3,
            LocProtErr => 4,
            WrFlushErr => 5,
            MwBindErr => 6,
            BadRespErr => 7,
            LocAccessErr => 8,
            RemInvReqErr => 9,
            RemAccessErr => 10,
            RemOpErr => 11,
            RetryExcErr => 12,
            RnrRetryExcErr => 13,
            LocRddViolErr => 14,
            RemInvRdReqErr => 15,
            RemAbortErr => 16,
            InvEecnErr => 17,
            InvEecStateErr => 18,
            FatalErr => 19,
            RespTimeoutErr => 20,
            GeneralErr => 21,
            TmErr => 22,
            TmRndvIncomplete => 23,
            Other(x) => x,
        }
    }
    /// The name `ibv_wc_status_str` style tools print (`IBV_WC_REM_ACCESS_ERR`), without
    /// the prefix: `REM_ACCESS_ERR`.
    pub fn name(self) -> &'static str {
        use WcStatus::*;
        match self {
            Success => "SUCCESS",
            LocLenErr => "LOC_LEN_ERR",
            LocQpOpErr => "LOC_QP_OP_ERR",
            LocEecOpErr => "LOC_EEC_OP_ERR",
            LocProtErr => "LOC_PROT_ERR",
            WrFlushErr => "WR_FLUSH_ERR",
            MwBindErr => "MW_BIND_ERR",
            BadRespErr => "BAD_RESP_ERR",
            LocAccessErr => "LOC_ACCESS_ERR",
            RemInvReqErr => "REM_INV_REQ_ERR",
            RemAccessErr => "REM_ACCESS_ERR",
            RemOpErr => "REM_OP_ERR",
            RetryExcErr => "RETRY_EXC_ERR",
            RnrRetryExcErr => "RNR_RETRY_EXC_ERR",
            LocRddViolErr => "LOC_RDD_VIOL_ERR",
            RemInvRdReqErr => "REM_INV_RD_REQ_ERR",
            RemAbortErr => "REM_ABORT_ERR",
            InvEecnErr => "INV_EECN_ERR",
            InvEecStateErr => "INV_EEC_STATE_ERR",
            FatalErr => "FATAL_ERR",
            RespTimeoutErr => "RESP_TIMEOUT_ERR",
            GeneralErr => "GENERAL_ERR",
            TmErr => "TM_ERR",
            TmRndvIncomplete => "TM_RNDV_INCOMPLETE",
            Other(_) => "UNKNOWN",
        }
    }
    /// Parse [`WcStatus::name`] back (scenario files use these names).
    pub fn from_name(s: &str) -> Option<WcStatus> {
        (0..24)
            .map(WcStatus::from_ibv)
            .find(|w| w.name().eq_ignore_ascii_case(s))
    }
}

impl fmt::Display for WcStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WcStatus::Other(x) => write!(f, "UNKNOWN({x})"),
            s => f.write_str(s.name()),
        }
    }
}

/// Completion opcode, as in `enum ibv_wc_opcode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum WcOpcode {
    /// SEND or SEND WITH IMM completed (requester).
    #[default]
    Send,
    /// RDMA WRITE (with or without IMM) completed (requester).
    RdmaWrite,
    /// RDMA READ completed (requester).
    RdmaRead,
    /// Compare-and-swap completed (requester).
    CompSwap,
    /// Fetch-and-add completed (requester).
    FetchAdd,
    /// A receive consumed by a SEND (responder).
    Recv,
    /// A receive consumed by an RDMA WRITE WITH IMM (responder).
    RecvRdmaWithImm,
    /// Any other value.
    Other(u32),
}

impl WcOpcode {
    /// From `enum ibv_wc_opcode`.
    pub fn from_ibv(v: u32) -> WcOpcode {
        match v {
            0 => WcOpcode::Send,
            1 => WcOpcode::RdmaWrite,
            2 => WcOpcode::RdmaRead,
            3 => WcOpcode::CompSwap,
            4 => WcOpcode::FetchAdd,
            128 => WcOpcode::Recv,
            129 => WcOpcode::RecvRdmaWithImm,
            x => WcOpcode::Other(x),
        }
    }
    /// Name used in scenario files (`SEND`, `RDMA_WRITE`, `RDMA_READ`, `COMP_SWAP`,
    /// `FETCH_ADD`, `RECV`, `RECV_RDMA_WITH_IMM`).
    pub fn name(self) -> &'static str {
        match self {
            WcOpcode::Send => "SEND",
            WcOpcode::RdmaWrite => "RDMA_WRITE",
            WcOpcode::RdmaRead => "RDMA_READ",
            WcOpcode::CompSwap => "COMP_SWAP",
            WcOpcode::FetchAdd => "FETCH_ADD",
            WcOpcode::Recv => "RECV",
            WcOpcode::RecvRdmaWithImm => "RECV_RDMA_WITH_IMM",
            WcOpcode::Other(_) => "UNKNOWN",
        }
    }
    /// Parse [`WcOpcode::name`] back.
    pub fn from_name(s: &str) -> Option<WcOpcode> {
        [0u32, 1, 2, 3, 4, 128, 129]
            .iter()
            .map(|&v| WcOpcode::from_ibv(v))
            .find(|w| w.name().eq_ignore_ascii_case(s))
    }
    /// True for responder-side (receive) completions.
    pub fn is_recv(self) -> bool {
        matches!(self, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm)
    }
}

/// Completion flags (a hand-written bit set).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct WcFlags(pub u8);

impl WcFlags {
    /// A 40-byte GRH precedes the payload in the receive buffer (UD).
    pub const GRH: WcFlags = WcFlags(1);
    /// [`Completion::imm`] is valid.
    pub const WITH_IMM: WcFlags = WcFlags(2);
    /// True if every flag of `other` is set.
    #[inline]
    pub const fn contains(self, other: WcFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for WcFlags {
    type Output = WcFlags;
    fn bitor(self, rhs: WcFlags) -> WcFlags {
        WcFlags(self.0 | rhs.0)
    }
}

/// One completion, polled into a caller-provided slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Completion {
    /// The request's `wr_id`.
    pub wr_id: u64,
    /// Status. On error the other fields except `wr_id`, `qp_num` and `vendor_err` are not
    /// meaningful (rxe reports opcode 0 and byte_len 0 there).
    pub status: WcStatus,
    /// What completed.
    pub opcode: WcOpcode,
    /// Bytes received (responder), read or written (requester READ/atomics: 8).
    pub byte_len: u32,
    /// Immediate data in host order (valid when `flags` has [`WcFlags::WITH_IMM`]).
    pub imm: u32,
    /// The local QP the completion belongs to.
    pub qp_num: u32,
    /// The remote QP (UD receives; 0 elsewhere unless the device fills it).
    pub src_qp: u32,
    /// GRH / WITH_IMM.
    pub flags: WcFlags,
    /// Send completions: how many earlier *unsignaled* requests of the same send queue this
    /// completion retires (selective signaling). They are the `covered` requests posted
    /// immediately before this one, in post order; the oldest has wr_id `covered_from`.
    pub covered: u32,
    /// wr_id of the oldest covered request (valid when `covered > 0`).
    pub covered_from: u64,
    /// Vendor error / syndrome: on mlx5, `syndrome | vendor_syndrome << 8`; on verbs,
    /// `ibv_wc.vendor_err`.
    pub vendor_err: u32,
}

impl Completion {
    /// A zeroed completion, for initialising poll buffers.
    pub const EMPTY: Completion = Completion {
        wr_id: 0,
        status: WcStatus::Success,
        opcode: WcOpcode::Send,
        byte_len: 0,
        imm: 0,
        qp_num: 0,
        src_qp: 0,
        flags: WcFlags(0),
        covered: 0,
        covered_from: 0,
        vendor_err: 0,
    };
    /// True when `status` is success.
    #[inline]
    pub fn is_ok(&self) -> bool {
        self.status == WcStatus::Success
    }
}

/// Queue capacities of a QP: requested at creation, granted values read back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpCaps {
    /// Outstanding send requests.
    pub max_send_wr: u32,
    /// Outstanding receive requests (ignored with an SRQ).
    pub max_recv_wr: u32,
    /// SGEs per send request.
    pub max_send_sge: u32,
    /// SGEs per receive request.
    pub max_recv_sge: u32,
    /// Inline bytes per send request.
    pub max_inline_data: u32,
}

impl QpCaps {
    /// Each limit the smaller of `self` (asked) and `granted`: the limits a provider enforces
    /// at post time, the same on every provider whatever the device rounded up to.
    pub fn within(self, granted: QpCaps) -> QpCaps {
        QpCaps {
            max_send_wr: self.max_send_wr.min(granted.max_send_wr),
            max_recv_wr: self.max_recv_wr.min(granted.max_recv_wr),
            max_send_sge: self.max_send_sge.min(granted.max_send_sge),
            max_recv_sge: self.max_recv_sge.min(granted.max_recv_sge),
            max_inline_data: self.max_inline_data.min(granted.max_inline_data),
        }
    }
}

impl Default for QpCaps {
    fn default() -> Self {
        QpCaps {
            max_send_wr: 128,
            max_recv_wr: 128,
            max_send_sge: 4,
            max_recv_sge: 4,
            max_inline_data: 64,
        }
    }
}

/// Memory access rights of an MR or a QP (`enum ibv_access_flags` values).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct Access(pub u32);

impl Access {
    /// Local read only.
    pub const LOCAL_READ: Access = Access(0);
    /// The device may write it locally (receives, READ results).
    pub const LOCAL_WRITE: Access = Access(1);
    /// Peers may RDMA WRITE into it.
    pub const REMOTE_WRITE: Access = Access(2);
    /// Peers may RDMA READ it.
    pub const REMOTE_READ: Access = Access(4);
    /// Peers may run atomics on it.
    pub const REMOTE_ATOMIC: Access = Access(8);
    /// All of the above.
    pub const ALL: Access = Access(1 | 2 | 4 | 8);
    /// True if every bit of `other` is set.
    #[inline]
    pub const fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for Access {
    type Output = Access;
    fn bitor(self, rhs: Access) -> Access {
        Access(self.0 | rhs.0)
    }
}

/// How a QP is created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpConfig {
    /// RC, UC or UD.
    pub qp_type: QpType,
    /// Requested capacities.
    pub caps: QpCaps,
    /// Every send request generates a completion, whatever its flags.
    pub sq_sig_all: bool,
}

impl QpConfig {
    /// A config with default caps.
    pub fn new(qp_type: QpType) -> Self {
        QpConfig {
            qp_type,
            caps: QpCaps::default(),
            sq_sig_all: false,
        }
    }
}

/// Parameters of the RESET → INIT → RTR → RTS bring-up (defaults are `ibv_rc_pingpong`'s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectOpts {
    /// Local port (1-based).
    pub port: u8,
    /// Local GID index used for the GRH (RoCE needs one).
    pub gid_index: u8,
    /// Path MTU; `None` = the smaller of the two ports' active MTUs.
    pub path_mtu: Option<Mtu>,
    /// Local ACK timeout exponent (4.096 µs × 2^timeout).
    pub timeout: u8,
    /// Transport retries (0..=7; 7 retries forever on rxe).
    pub retry_cnt: u8,
    /// RNR retries (0..=7; 7 = forever).
    pub rnr_retry: u8,
    /// Minimal RNR NAK timer (encoded, 12 = 0.64 ms).
    pub min_rnr_timer: u8,
    /// Outstanding READs/atomics we initiate.
    pub max_rd_atomic: u8,
    /// Outstanding READs/atomics we answer.
    pub max_dest_rd_atomic: u8,
    /// Service level.
    pub sl: u8,
    /// Remote access rights of the QP (RC/UC).
    pub access: Access,
    /// Q_Key (UD).
    pub qkey: u32,
}

impl Default for ConnectOpts {
    fn default() -> Self {
        ConnectOpts {
            port: 1,
            gid_index: 0,
            path_mtu: None,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            max_rd_atomic: 1,
            max_dest_rd_atomic: 1,
            sl: 0,
            access: Access::LOCAL_WRITE
                | Access::REMOTE_WRITE
                | Access::REMOTE_READ
                | Access::REMOTE_ATOMIC,
            qkey: 0x1111_1111,
        }
    }
}

/// A UD address handle. Providers fill the parts they use.
pub struct AddressHandle {
    /// The 48-byte mlx5 address vector (mlx5 and sim providers).
    pub(crate) av: [u8; 48],
    /// `struct ibv_ah *` (verbs provider); null elsewhere.
    pub(crate) raw: *mut std::ffi::c_void,
    /// Keeps whatever owns `raw` alive (and destroys it on drop).
    pub(crate) _owner: Option<Box<dyn std::any::Any + Send + Sync>>,
}

impl fmt::Debug for AddressHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AddressHandle")
            .field("raw", &self.raw)
            .finish_non_exhaustive()
    }
}

// SAFETY: `raw` is an `ibv_ah *` that libibverbs allows to be used from any thread (verbs
// objects are thread safe); the AH is only read through it.
unsafe impl Send for AddressHandle {}
// SAFETY: as above; nothing is mutated through a shared reference.
unsafe impl Sync for AddressHandle {}

/// A registered memory region.
pub trait MemoryRegion {
    /// Start address.
    fn addr(&self) -> u64;
    /// Length in bytes.
    fn len(&self) -> usize;
    /// True for an empty region.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Local key.
    fn lkey(&self) -> u32;
    /// Remote key.
    fn rkey(&self) -> u32;
    /// An SGE over `len` bytes at `offset` into the region.
    fn sge(&self, offset: usize, len: u32) -> Sge {
        Sge {
            addr: self.addr() + offset as u64,
            length: len,
            lkey: self.lkey(),
        }
    }
}

/// A send queue: one producer (`&mut self`).
pub trait SendQueue {
    /// Stage one request. It is not visible to the device until [`SendQueue::ring`].
    fn post<'a>(&mut self, wr: SendWr<'a>) -> Result<(), Rejected<SendWr<'a>>>;
    /// Publish everything staged with one doorbell. Ringing with nothing staged does nothing.
    fn ring(&mut self);
    /// Post each request, then ring once. On a refusal, the requests before it are staged and
    /// rung, and the refused index comes back with the error.
    fn post_list(&mut self, wrs: &[SendWr<'_>]) -> Result<(), (usize, PostError)> {
        for (i, wr) in wrs.iter().enumerate() {
            if let Err(r) = self.post(*wr) {
                self.ring();
                return Err((i, r.error));
            }
        }
        self.ring();
        Ok(())
    }
    /// How many more requests fit (the smallest possible WQE each, on mlx5).
    fn free_slots(&self) -> u32;
    /// Requests staged but not yet rung.
    fn staged(&self) -> u32;
}

/// A receive queue or SRQ: one producer (`&mut self`).
pub trait RecvQueue {
    /// Stage one receive. It is not visible to the device until [`RecvQueue::ring`].
    fn post_recv<'a>(&mut self, wr: RecvWr<'a>) -> Result<(), Rejected<RecvWr<'a>>>;
    /// Publish everything staged.
    fn ring(&mut self);
    /// Post each, then ring once.
    fn post_recv_list(&mut self, wrs: &[RecvWr<'_>]) -> Result<(), (usize, PostError)> {
        for (i, wr) in wrs.iter().enumerate() {
            if let Err(r) = self.post_recv(*wr) {
                self.ring();
                return Err((i, r.error));
            }
        }
        self.ring();
        Ok(())
    }
    /// How many more receives fit.
    fn free_slots(&self) -> u32;
}

/// A completion queue: one consumer (`&mut self`).
pub trait CompletionQueue {
    /// Poll up to `out.len()` completions into `out`; returns how many were written.
    /// Never allocates; on mlx5/sim makes no system call.
    fn poll(&mut self, out: &mut [Completion]) -> usize;
    /// CQ size (entries).
    fn cqe(&self) -> u32;
}

/// A queue pair: a send queue and a receive queue (or none, with an SRQ).
pub trait QueuePair {
    /// The send queue type.
    type Sq: SendQueue;
    /// The receive queue type.
    type Rq: RecvQueue;
    /// QP number.
    fn qpn(&self) -> u32;
    /// RC, UC or UD.
    fn qp_type(&self) -> QpType;
    /// The state as last set or observed.
    fn state(&self) -> QpState;
    /// Capacities the device granted.
    fn caps(&self) -> QpCaps;
    /// The send queue.
    fn sq(&mut self) -> &mut Self::Sq;
    /// The receive queue (posting to it on a QP created with an SRQ is refused).
    fn rq(&mut self) -> &mut Self::Rq;
    /// Both at once (post from one, receive into the other).
    fn queues(&mut self) -> (&mut Self::Sq, &mut Self::Rq);
}

/// Which provider a [`Provider`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProviderKind {
    /// Direct mlx5 WQE writing on hardware.
    Mlx5,
    /// libibverbs post/poll (rxe or any verbs device).
    Verbs,
    /// The mlx5 hot path on the software mlx5 device.
    Sim,
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProviderKind::Mlx5 => "mlx5",
            ProviderKind::Verbs => "verbs",
            ProviderKind::Sim => "sim",
        })
    }
}

/// A device opened for the data plane: the control path the scenario runner, pingpong and the
/// benches need, generic over the three providers.
pub trait Provider {
    /// Protection domain.
    type Pd;
    /// Memory region.
    type Mr: MemoryRegion;
    /// Completion queue.
    type Cq: CompletionQueue;
    /// Shared receive queue.
    type Srq: RecvQueue;
    /// Queue pair.
    type Qp: QueuePair;

    /// Which provider this is.
    fn kind(&self) -> ProviderKind;
    /// Device name (`rxe0`, `mlx5_0`, `sim0`).
    fn device_name(&self) -> &str;
    /// Allocate a protection domain.
    fn alloc_pd(&mut self) -> crate::Result<Self::Pd>;
    /// Register `len` bytes at `addr`.
    ///
    /// # Safety
    /// The memory must stay valid (and not be unmapped) until the MR is dropped; the device
    /// may read and write it as `access` allows.
    unsafe fn reg_mr(
        &mut self,
        pd: &Self::Pd,
        addr: *mut u8,
        len: usize,
        access: Access,
    ) -> crate::Result<Self::Mr>;
    /// Create a CQ with at least `cqe` entries.
    fn create_cq(&mut self, cqe: u32) -> crate::Result<Self::Cq>;
    /// Create an SRQ.
    fn create_srq(&mut self, pd: &Self::Pd, max_wr: u32, max_sge: u32) -> crate::Result<Self::Srq>;
    /// Create a QP in RESET. `recv_cq: None` means "the same CQ as `send_cq`".
    fn create_qp(
        &mut self,
        pd: &Self::Pd,
        send_cq: &mut Self::Cq,
        recv_cq: Option<&mut Self::Cq>,
        srq: Option<&mut Self::Srq>,
        cfg: &QpConfig,
    ) -> crate::Result<Self::Qp>;
    /// What a peer needs to connect to `qp` (PSN chosen by the provider).
    fn endpoint(&self, qp: &Self::Qp, opts: &ConnectOpts) -> crate::Result<QpEndpoint>;
    /// RESET → INIT → RTR → RTS towards `remote` (UD: `remote` is ignored beyond its MTU).
    fn connect(
        &mut self,
        qp: &mut Self::Qp,
        local: &QpEndpoint,
        remote: &QpEndpoint,
        opts: &ConnectOpts,
    ) -> crate::Result<()>;
    /// Move `qp` to ERR: everything outstanding is flushed.
    fn to_error(&mut self, qp: &mut Self::Qp) -> crate::Result<()>;
    /// An address handle towards `remote` (UD).
    fn create_ah(
        &mut self,
        pd: &Self::Pd,
        remote: &QpEndpoint,
        opts: &ConnectOpts,
    ) -> crate::Result<AddressHandle>;
    /// Give the device a chance to run (the sim in deterministic mode runs until idle; real
    /// devices do nothing).
    fn progress(&mut self) {}
}
