//! QP state transitions: which attributes each transition sets, and the attribute mask it
//! passes.
//!
//! A QP moves RESET → INIT → RTR → RTS (and to ERR or back to RESET from anywhere). Each
//! transition starts from a zeroed `ibv_qp_attr`, fills exactly the attributes the kernel
//! requires for that transition and QP type (the table of `ib_modify_qp_is_ok` in the
//! kernel's `drivers/infiniband/core/verbs.c`), and passes exactly that mask: see
//! [`transition_mask`]. Values are range-checked before the call ([`check_24bit`],
//! [`check_range`]), and a failure names the transition and what is most likely wrong.

use crate::error::{Error, Result};
use crate::ffi;
use crate::types::{Access, Mtu, QpCaps, QpState, QpType};
use libc::c_int;
use std::fmt;

/// A state transition this module performs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transition {
    /// RESET → INIT.
    ResetToInit,
    /// INIT → RTR.
    InitToRtr,
    /// RTR → RTS.
    RtrToRts,
    /// Any → ERR.
    ToErr,
    /// Any → RESET.
    ToReset,
}

impl Transition {
    /// The target state.
    pub fn target(self) -> QpState {
        match self {
            Transition::ResetToInit => QpState::Init,
            Transition::InitToRtr => QpState::Rtr,
            Transition::RtrToRts => QpState::Rts,
            Transition::ToErr => QpState::Err,
            Transition::ToReset => QpState::Reset,
        }
    }

    /// The state it must start from, if any particular one.
    pub fn source(self) -> Option<QpState> {
        match self {
            Transition::ResetToInit => Some(QpState::Reset),
            Transition::InitToRtr => Some(QpState::Init),
            Transition::RtrToRts => Some(QpState::Rtr),
            Transition::ToErr | Transition::ToReset => None,
        }
    }

    /// The verb name used in errors.
    pub fn verb(self) -> &'static str {
        match self {
            Transition::ResetToInit => "ibv_modify_qp(INIT)",
            Transition::InitToRtr => "ibv_modify_qp(RTR)",
            Transition::RtrToRts => "ibv_modify_qp(RTS)",
            Transition::ToErr => "ibv_modify_qp(ERR)",
            Transition::ToReset => "ibv_modify_qp(RESET)",
        }
    }
}

impl fmt::Display for Transition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.source() {
            Some(s) => write!(f, "{s} → {}", self.target()),
            None => write!(f, "→ {}", self.target()),
        }
    }
}

/// The exact attribute mask this module passes for `t` on a QP of type `ty`: the kernel's
/// required attributes for that transition, plus `IBV_QP_STATE`.
pub fn transition_mask(t: Transition, ty: QpType) -> c_int {
    use ffi::*;
    match (t, ty) {
        (Transition::ResetToInit, QpType::Rc | QpType::Uc) => {
            IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS
        }
        (Transition::ResetToInit, QpType::Ud) => {
            IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY
        }
        (Transition::InitToRtr, QpType::Rc) => {
            IBV_QP_STATE
                | IBV_QP_AV
                | IBV_QP_PATH_MTU
                | IBV_QP_DEST_QPN
                | IBV_QP_RQ_PSN
                | IBV_QP_MAX_DEST_RD_ATOMIC
                | IBV_QP_MIN_RNR_TIMER
        }
        (Transition::InitToRtr, QpType::Uc) => {
            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN
        }
        (Transition::InitToRtr, QpType::Ud) => IBV_QP_STATE,
        (Transition::RtrToRts, QpType::Rc) => {
            IBV_QP_STATE
                | IBV_QP_SQ_PSN
                | IBV_QP_TIMEOUT
                | IBV_QP_RETRY_CNT
                | IBV_QP_RNR_RETRY
                | IBV_QP_MAX_QP_RD_ATOMIC
        }
        (Transition::RtrToRts, QpType::Uc | QpType::Ud) => IBV_QP_STATE | IBV_QP_SQ_PSN,
        (Transition::ToErr | Transition::ToReset, _) => IBV_QP_STATE,
    }
}

/// Attributes the kernel accepts but does not require for a transition (its optional set).
pub(super) fn optional_mask(t: Transition, ty: QpType) -> c_int {
    use ffi::*;
    match (t, ty) {
        (Transition::InitToRtr, QpType::Rc | QpType::Uc) => {
            IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX
        }
        (Transition::InitToRtr, QpType::Ud) => IBV_QP_PKEY_INDEX | IBV_QP_QKEY,
        (Transition::RtrToRts, QpType::Rc) => {
            IBV_QP_CUR_STATE
                | IBV_QP_ALT_PATH
                | IBV_QP_ACCESS_FLAGS
                | IBV_QP_MIN_RNR_TIMER
                | IBV_QP_PATH_MIG_STATE
        }
        (Transition::RtrToRts, QpType::Uc) => {
            IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MIG_STATE
        }
        (Transition::RtrToRts, QpType::Ud) => IBV_QP_CUR_STATE | IBV_QP_QKEY,
        _ => 0,
    }
}

/// The names of the bits of an attribute mask, for messages: `"PORT, ACCESS_FLAGS"`.
pub fn mask_names(mask: c_int) -> String {
    const NAMES: [&str; 21] = [
        "STATE",
        "CUR_STATE",
        "EN_SQD_ASYNC_NOTIFY",
        "ACCESS_FLAGS",
        "PKEY_INDEX",
        "PORT",
        "QKEY",
        "AV",
        "PATH_MTU",
        "TIMEOUT",
        "RETRY_CNT",
        "RNR_RETRY",
        "RQ_PSN",
        "MAX_QP_RD_ATOMIC",
        "ALT_PATH",
        "MIN_RNR_TIMER",
        "SQ_PSN",
        "MAX_DEST_RD_ATOMIC",
        "PATH_MIG_STATE",
        "CAP",
        "DEST_QPN",
    ];
    let mut v: Vec<String> = Vec::new();
    for bit in 0..31 {
        if mask & (1 << bit) != 0 {
            v.push(match NAMES.get(bit) {
                Some(n) => (*n).to_string(),
                None => format!("bit{bit}"),
            });
        }
    }
    v.join(", ")
}

/// RESET → INIT attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InitAttr {
    /// Local port (1-based).
    pub port: u8,
    /// P_Key index (0 = default partition).
    pub pkey_index: u16,
    /// Remote access rights (RC, UC; UC can only grant REMOTE_WRITE).
    pub access: Access,
    /// Q_Key (UD).
    pub qkey: u32,
}

/// INIT → RTR attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtrAttr {
    /// Local port (1-based).
    pub port: u8,
    /// The remote QPN (24 bits).
    pub dest_qpn: u32,
    /// The remote's starting PSN (24 bits).
    pub rq_psn: u32,
    /// Path MTU.
    pub path_mtu: Mtu,
    /// Remote LID (InfiniBand; 0 on RoCE).
    pub dlid: u16,
    /// Remote GID: `Some` adds a GRH (required on RoCE).
    pub dgid: Option<[u8; 16]>,
    /// Local GID index used for the GRH.
    pub sgid_index: u8,
    /// Service level.
    pub sl: u8,
    /// Outstanding READ/atomic we answer (RC).
    pub max_dest_rd_atomic: u8,
    /// Minimal RNR NAK timer code (RC, 0..=31).
    pub min_rnr_timer: u8,
}

/// RTR → RTS attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtsAttr {
    /// Our starting PSN (24 bits).
    pub sq_psn: u32,
    /// Local ACK timeout code (RC, 0..=31).
    pub timeout: u8,
    /// Transport retries (RC, 0..=7).
    pub retry_cnt: u8,
    /// RNR retries (RC, 0..=7; 7 = forever).
    pub rnr_retry: u8,
    /// Outstanding READ/atomic we initiate (RC).
    pub max_rd_atomic: u8,
}

/// What `ibv_query_qp` says about a QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpAttr {
    /// Current state.
    pub state: QpState,
    /// Path MTU (when set).
    pub path_mtu: Option<Mtu>,
    /// Remote QPN.
    pub dest_qpn: u32,
    /// Receive PSN.
    pub rq_psn: u32,
    /// Send PSN.
    pub sq_psn: u32,
    /// Q_Key.
    pub qkey: u32,
    /// Access flags.
    pub access: Access,
    /// Port.
    pub port: u8,
    /// Timeout code.
    pub timeout: u8,
    /// Retry count.
    pub retry_cnt: u8,
    /// RNR retry count.
    pub rnr_retry: u8,
    /// Min RNR timer code.
    pub min_rnr_timer: u8,
    /// Outstanding READ/atomic as initiator.
    pub max_rd_atomic: u8,
    /// Outstanding READ/atomic as target.
    pub max_dest_rd_atomic: u8,
    /// Capacities.
    pub caps: QpCaps,
}

pub(super) fn check_24bit(t: Transition, what: &str, v: u32) -> Result<()> {
    if v > 0xff_ffff {
        return Err(Error::InvalidArgument {
            context: t.verb(),
            detail: format!("{what} {v:#x} does not fit 24 bits"),
        });
    }
    Ok(())
}

pub(super) fn check_range(t: Transition, what: &str, v: u8, max: u8) -> Result<()> {
    if v > max {
        return Err(Error::InvalidArgument {
            context: t.verb(),
            detail: format!("{what} {v} > {max}"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::*;

    #[test]
    fn masks_match_the_kernel_table() {
        assert_eq!(
            transition_mask(Transition::ResetToInit, QpType::Rc),
            IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS
        );
        assert_eq!(transition_mask(Transition::ResetToInit, QpType::Rc), 0x39);
        assert_eq!(transition_mask(Transition::ResetToInit, QpType::Uc), 0x39);
        assert_eq!(transition_mask(Transition::ResetToInit, QpType::Ud), 0x71);
        // AV | PATH_MTU | DEST_QPN | RQ_PSN | MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER | STATE
        assert_eq!(
            transition_mask(Transition::InitToRtr, QpType::Rc),
            0x12_9181
        );
        assert_eq!(
            transition_mask(Transition::InitToRtr, QpType::Uc),
            0x10_1181
        );
        assert_eq!(transition_mask(Transition::InitToRtr, QpType::Ud), 0x1);
        // SQ_PSN | TIMEOUT | RETRY_CNT | RNR_RETRY | MAX_QP_RD_ATOMIC | STATE
        assert_eq!(transition_mask(Transition::RtrToRts, QpType::Rc), 0x1_2e01);
        assert_eq!(transition_mask(Transition::RtrToRts, QpType::Uc), 0x1_0001);
        assert_eq!(transition_mask(Transition::RtrToRts, QpType::Ud), 0x1_0001);
        for ty in [QpType::Rc, QpType::Uc, QpType::Ud] {
            assert_eq!(transition_mask(Transition::ToErr, ty), IBV_QP_STATE);
            assert_eq!(transition_mask(Transition::ToReset, ty), IBV_QP_STATE);
        }
    }

    #[test]
    fn required_and_optional_never_overlap() {
        for t in [
            Transition::ResetToInit,
            Transition::InitToRtr,
            Transition::RtrToRts,
        ] {
            for ty in [QpType::Rc, QpType::Uc, QpType::Ud] {
                assert_eq!(transition_mask(t, ty) & optional_mask(t, ty), 0, "{t} {ty}");
            }
        }
    }

    #[test]
    fn mask_names_list_each_bit() {
        assert_eq!(mask_names(IBV_QP_STATE | IBV_QP_PORT), "STATE, PORT");
        assert_eq!(
            mask_names(IBV_QP_DEST_QPN | IBV_QP_MAX_DEST_RD_ATOMIC),
            "MAX_DEST_RD_ATOMIC, DEST_QPN"
        );
        assert_eq!(mask_names(1 << 25), "bit25");
        assert_eq!(mask_names(0), "");
    }

    #[test]
    fn transitions_print_their_states() {
        assert_eq!(Transition::InitToRtr.to_string(), "INIT → RTR");
        assert_eq!(Transition::ToErr.to_string(), "→ ERR");
        assert_eq!(Transition::RtrToRts.verb(), "ibv_modify_qp(RTS)");
    }
}
