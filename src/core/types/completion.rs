//! Completions: what the providers' `CompletionQueue::poll` writes.
//!
//! [`WcStatus`] and [`WcOpcode`] carry the values of `enum ibv_wc_status` and
//! `enum ibv_wc_opcode`, so a verbs completion converts with one `from_ibv` and the mlx5 and sim
//! providers produce the same values. Each enum is declared once, as a table of
//! (variant, C value, name) given to `ibv_enum!`; the conversions both ways and the names are
//! generated from it.

use std::fmt;

ibv_enum! {
    /// Completion status: every `enum ibv_wc_status` value, with its meaning.
    pub enum WcStatus = "enum ibv_wc_status", default Success, other Other "Any value this crate does not know." {
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

impl WcStatus {
    /// The usual cause of an error status and what to do about it, for messages; a generic
    /// pointer for the statuses without one usual cause, empty for `SUCCESS`.
    pub fn hint(self) -> &'static str {
        match self {
            WcStatus::Success => "",
            WcStatus::RnrRetryExcErr => {
                "no receive posted at the peer for this SEND / WRITE WITH IMM, and the \
                 requester gave up after rnr_retry retries: keep receives posted at the peer \
                 before it is sent to (a receive replenisher), or raise ConnectOpts::rnr_retry \
                 (7 waits forever)"
            }
            WcStatus::RetryExcErr => {
                "no acknowledgement from the peer after retry_cnt retries: the peer is gone \
                 (process exited, QP destroyed or in ERR) or the path is wrong (QPN, GID \
                 index, link down)"
            }
            WcStatus::WrFlushErr => {
                "flushed: the QP is in ERR and this request never ran; the QP's first error \
                 completion says why; reconnect (a new QP) to go on"
            }
            WcStatus::RemAccessErr => {
                "the peer refused the access: its MR lacks the remote access flag for this op \
                 (REMOTE_WRITE / REMOTE_READ / REMOTE_ATOMIC), or the target is outside its \
                 window or the rkey wrong; make targets with RemoteMr::target"
            }
            WcStatus::RemInvReqErr => {
                "the peer found the request invalid: a SEND longer than its receive buffer, or \
                 an operation its QP does not allow"
            }
            WcStatus::LocLenErr => {
                "the receive is too small for the message (or the message too long for the \
                 QP): post larger receive buffers, or send less"
            }
            WcStatus::LocProtErr => {
                "an lkey that does not cover the SGE (or another PD's MR): build SGEs with \
                 RegisteredBuf::sge"
            }
            _ => {
                "see the status's meaning in WcStatus; the vendor syndrome narrows it down, \
                 and the QP is in ERR after it"
            }
        }
    }
}

ibv_enum! {
    /// Completion opcode, as in `enum ibv_wc_opcode`.
    pub enum WcOpcode = "enum ibv_wc_opcode", default Send, other Other "Any other value." {
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
    /// Not a request's completion: the CQ itself went into error (an overrun, or the
    /// device's `IBV_EVENT_CQ_ERR`). `status` is `GeneralErr`, `vendor_err` the CQN, `qp_num`
    /// and `wr_id` 0. The CQ reports it once, after the CQEs it still holds; nothing more
    /// completes on it, and posts to its QPs are refused with `PostError::CqError`. The
    /// requests still outstanding on its QPs are lost: destroy the QPs and the CQ.
    pub const CQ_ERROR: WcFlags = WcFlags(4);
    /// Not a request's completion: a doorbell the device refused after a bare `ring` (verbs
    /// provider only), reported in band by an empty poll of the CQ the queue completes on
    /// when no call on the queue reported it first. `status` is `GeneralErr`, `wr_id` the
    /// first request taken back, `byte_len` how many were, `vendor_err` the errno, `opcode`
    /// `Send` (`ibv_post_send`) or `Recv` (`ibv_post_recv`), `qp_num` the QP. The requests it
    /// names were never posted and end no other way; [`Completion::refusal`] gives it back
    /// as the [`RingError`](crate::types::RingError) the call would have returned.
    pub const REFUSED: WcFlags = WcFlags(8);
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
///
/// 64 bytes, `repr(C)` in this order so a poller fills it with few stores: what every
/// completion sets first (`wr_id`, `byte_len`, `qp_num`, `opcode`), then the fields that are
/// zero on a successful send completion (`status` through `flags`), contiguous. The field
/// order is a layout choice, not an ABI: it is not `struct ibv_wc`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Completion {
    /// The request's `wr_id`.
    pub wr_id: u64,
    /// Bytes received (responder), read or written (requester READ/atomics: 8).
    pub byte_len: u32,
    /// The local QP the completion belongs to.
    pub qp_num: u32,
    /// What completed. On an error completion only the queue it names is meaningful: a
    /// receive's says [`WcOpcode::Recv`] (every provider tells it from the request, since
    /// rxe reports opcode 0 there), a send's is a send opcode.
    pub opcode: WcOpcode,
    /// Status. On error the other fields except `wr_id`, `qp_num`, `vendor_err`, the queue
    /// `opcode` names and `covered` / `covered_from` are not meaningful (rxe reports
    /// byte_len 0 there).
    pub status: WcStatus,
    /// wr_id of the oldest covered request (valid when `covered > 0`).
    pub covered_from: u64,
    /// Send completions: how many earlier *unsignaled* requests of the same send queue this
    /// completion retires (selective signaling). They are the `covered` requests posted
    /// immediately before this one, in post order; the oldest has wr_id `covered_from`.
    ///
    /// One meaning whatever the status: a send completion ends `1 + covered` requests. The
    /// `covered` ones ran, and successfully: a send queue executes in post order, and an
    /// error or flush completion names the request that failed or was flushed (every
    /// request that did not run gets a completion of its own when the QP fails, signaled or
    /// not). The one it names ended with `status`. A receive completion ends one receive;
    /// `covered` is 0 there. The flow module's `SendWindow::retire` and the recovery helper
    /// count so.
    pub covered: u32,
    /// Immediate data in host order (valid when `flags` has [`WcFlags::WITH_IMM`]).
    pub imm: u32,
    /// The remote QP (UD receives; 0 elsewhere unless the device fills it).
    pub src_qp: u32,
    /// Vendor error / syndrome: on mlx5, `syndrome | vendor_syndrome << 8`; on verbs,
    /// `ibv_wc.vendor_err`.
    pub vendor_err: u32,
    /// GRH / WITH_IMM.
    pub flags: WcFlags,
}

static_assertions::const_assert_eq!(core::mem::size_of::<Completion>(), 64);

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

    /// The refused doorbell this completion reports ([`WcFlags::REFUSED`]), if it is one:
    /// the verb, the errno and the requests taken back, as `try_ring` returns them.
    pub fn refusal(&self) -> Option<crate::types::RingError> {
        self.flags
            .contains(WcFlags::REFUSED)
            .then(|| crate::types::RingError {
                verb: if self.opcode == WcOpcode::Recv {
                    crate::types::RingVerb::PostRecv
                } else {
                    crate::types::RingVerb::PostSend
                },
                errno: self.vendor_err as i32,
                first_wr_id: self.wr_id,
                count: self.byte_len,
            })
    }
    /// `Ok` for a successful completion; for a failed one an [`crate::Error::Completion`]
    /// carrying status, vendor syndrome, opcode, QP and wr_id, whose message names the likely
    /// cause and fix. Allocates nothing, so it can stand in the hot loop:
    /// `for c in &wc[..n] { c.check()?; }`.
    #[inline]
    pub fn check(&self) -> crate::Result<()> {
        if self.is_ok() {
            Ok(())
        } else {
            Err(crate::Error::Completion {
                status: self.status,
                vendor_err: self.vendor_err,
                opcode: self.opcode,
                qp_num: self.qp_num,
                wr_id: self.wr_id,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::QpState;

    #[test]
    fn each_table_converts_both_ways_and_by_name() {
        for &(s, v, n) in WcStatus::ALL {
            assert_eq!((WcStatus::from_ibv(v), s.to_ibv(), s.name()), (s, v, n));
            assert_eq!(WcStatus::from_name(&n.to_lowercase()), Some(s));
        }
        for &(o, v, n) in WcOpcode::ALL {
            assert_eq!((WcOpcode::from_ibv(v), o.to_ibv(), o.name()), (o, v, n));
            assert_eq!(WcOpcode::from_name(n), Some(o));
        }
        for &(q, v, n) in QpState::ALL {
            assert_eq!(
                (QpState::from_ibv(v), q.to_ibv(), q.to_string()),
                (q, v, n.into())
            );
        }
        // The C values, spot-checked against verbs.h.
        assert_eq!(WcStatus::ALL.len(), 24);
        assert_eq!(WcStatus::RemAccessErr.to_ibv(), 10);
        assert_eq!(WcStatus::TmRndvIncomplete.to_ibv(), 23);
        assert_eq!(WcOpcode::RecvRdmaWithImm.to_ibv(), 129);
        assert_eq!(QpState::Err.to_ibv(), 6);
        // Unknown values survive the round trip and print their number.
        assert_eq!(WcStatus::from_ibv(99), WcStatus::Other(99));
        assert_eq!(WcStatus::Other(99).to_ibv(), 99);
        assert_eq!(WcStatus::Other(99).to_string(), "UNKNOWN(99)");
        assert_eq!(WcOpcode::from_ibv(7).name(), "UNKNOWN");
        assert_eq!(QpState::from_ibv(9).to_string(), "UNKNOWN(9)");
        assert_eq!(WcStatus::from_name("UNKNOWN"), None);
        assert_eq!(WcStatus::default(), WcStatus::Success);
        assert_eq!(WcOpcode::default(), WcOpcode::Send);
    }
}
