//! Completions: what [`crate::providers::CompletionQueue::poll`] writes.
//!
//! [`WcStatus`] and [`WcOpcode`] carry the values of `enum ibv_wc_status` and
//! `enum ibv_wc_opcode`, so a verbs completion converts with one `from_ibv` and the mlx5 and sim
//! providers produce the same values. Each enum is declared once, as a table of
//! (variant, C value, name); the conversions both ways and the names are generated from it.

use std::fmt;

/// Declares a C enum mirror from one table: the enum (plus `Other(u32)` for values this
/// crate does not know), `from_ibv`, `to_ibv`, `name`, `from_name` and `ALL`.
macro_rules! ibv_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident = $cname:literal, default $default:ident, other $other_doc:literal {
            $( $(#[$vmeta:meta])* $variant:ident = $value:literal, $text:literal; )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
            #[doc = $other_doc]
            Other(u32),
        }

        impl Default for $name {
            fn default() -> Self {
                $name::$default
            }
        }

        impl $name {
            /// Every known value: (variant, C value, name), in C value order.
            pub const ALL: &'static [($name, u32, &'static str)] =
                &[$(($name::$variant, $value, $text)),+];

            #[doc = concat!("From `", $cname, "`.")]
            pub fn from_ibv(v: u32) -> $name {
                match v {
                    $($value => $name::$variant,)+
                    x => $name::Other(x),
                }
            }

            #[doc = concat!("To `", $cname, "`.")]
            pub fn to_ibv(self) -> u32 {
                match self {
                    $($name::$variant => $value,)+
                    $name::Other(x) => x,
                }
            }

            /// The C name without its `IBV_WC_` prefix (`REM_ACCESS_ERR`, `RDMA_WRITE`), as
            /// scenario files and error messages spell it; `UNKNOWN` for [`Self::Other`].
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                    $name::Other(_) => "UNKNOWN",
                }
            }

            /// Parse [`Self::name`] back (case-insensitive); `None` for anything else.
            pub fn from_name(s: &str) -> Option<$name> {
                Self::ALL
                    .iter()
                    .find(|e| e.2.eq_ignore_ascii_case(s))
                    .map(|e| e.0)
            }
        }
    };
}

ibv_enum! {
    /// Completion status: every `enum ibv_wc_status` value, with its meaning.
    pub enum WcStatus = "enum ibv_wc_status", default Success, other "Any value this crate does not know." {
        /// 0: the request completed.
        Success = 0, "SUCCESS";
        /// 1: local length error (receive buffer too small, or message too long for the QP).
        LocLenErr = 1, "LOC_LEN_ERR";
        /// 2: local QP operation error (an internal QP consistency error, or an op the QP cannot do).
        LocQpOpErr = 2, "LOC_QP_OP_ERR";
        /// 3: local EE context operation error (RD only).
        LocEecOpErr = 3, "LOC_EEC_OP_ERR";
        /// 4: local protection error (an lkey that does not cover the SGE, wrong PD).
        LocProtErr = 4, "LOC_PROT_ERR";
        /// 5: flushed: the QP went to ERR before this request ran.
        WrFlushErr = 5, "WR_FLUSH_ERR";
        /// 6: memory window bind error.
        MwBindErr = 6, "MW_BIND_ERR";
        /// 7: bad response from the responder (unexpected transport opcode).
        BadRespErr = 7, "BAD_RESP_ERR";
        /// 8: local access error (a protection error on the responder side of an incoming op).
        LocAccessErr = 8, "LOC_ACCESS_ERR";
        /// 9: the responder found the request invalid (e.g. the SEND was longer than its receive).
        RemInvReqErr = 9, "REM_INV_REQ_ERR";
        /// 10: remote access error (wrong rkey, out of bounds, missing remote access rights).
        RemAccessErr = 10, "REM_ACCESS_ERR";
        /// 11: remote operation error (the responder could not complete it).
        RemOpErr = 11, "REM_OP_ERR";
        /// 12: transport retry counter exceeded (no ack from the peer).
        RetryExcErr = 12, "RETRY_EXC_ERR";
        /// 13: RNR retry counter exceeded (the peer had no receive posted).
        RnrRetryExcErr = 13, "RNR_RETRY_EXC_ERR";
        /// 14: local RDD violation (RD only).
        LocRddViolErr = 14, "LOC_RDD_VIOL_ERR";
        /// 15: remote invalid RD request.
        RemInvRdReqErr = 15, "REM_INV_RD_REQ_ERR";
        /// 16: remote aborted.
        RemAbortErr = 16, "REM_ABORT_ERR";
        /// 17: invalid EE context number.
        InvEecnErr = 17, "INV_EECN_ERR";
        /// 18: invalid EE context state.
        InvEecStateErr = 18, "INV_EEC_STATE_ERR";
        /// 19: fatal error.
        FatalErr = 19, "FATAL_ERR";
        /// 20: response timeout.
        RespTimeoutErr = 20, "RESP_TIMEOUT_ERR";
        /// 21: general error.
        GeneralErr = 21, "GENERAL_ERR";
        /// 22: tag matching error.
        TmErr = 22, "TM_ERR";
        /// 23: tag matching rendezvous incomplete.
        TmRndvIncomplete = 23, "TM_RNDV_INCOMPLETE";
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

ibv_enum! {
    /// Completion opcode, as in `enum ibv_wc_opcode`.
    pub enum WcOpcode = "enum ibv_wc_opcode", default Send, other "Any other value." {
        /// SEND or SEND WITH IMM completed (requester).
        Send = 0, "SEND";
        /// RDMA WRITE (with or without IMM) completed (requester).
        RdmaWrite = 1, "RDMA_WRITE";
        /// RDMA READ completed (requester).
        RdmaRead = 2, "RDMA_READ";
        /// Compare-and-swap completed (requester).
        CompSwap = 3, "COMP_SWAP";
        /// Fetch-and-add completed (requester).
        FetchAdd = 4, "FETCH_ADD";
        /// A receive consumed by a SEND (responder).
        Recv = 128, "RECV";
        /// A receive consumed by an RDMA WRITE WITH IMM (responder).
        RecvRdmaWithImm = 129, "RECV_RDMA_WITH_IMM";
    }
}

impl WcOpcode {
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
