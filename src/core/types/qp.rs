//! Queue-pair vocabulary: transport type, state, capacities, creation and connection
//! parameters, and the path MTU.
//!
//! The numeric values are those of libibverbs (`enum ibv_qp_state`, `enum ibv_mtu`), so the
//! control path converts without a table of its own.

use super::Access;
use std::fmt;

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

ibv_enum! {
    /// QP state, as in `enum ibv_qp_state`.
    pub enum QpState = "enum ibv_qp_state", other Unknown "Any other value the device reported." {
        /// RESET (0).
        Reset = 0, "RESET";
        /// INIT (1): receives may be posted.
        Init = 1, "INIT";
        /// Ready to receive (2).
        Rtr = 2, "RTR";
        /// Ready to send (3): sends may be posted.
        Rts = 3, "RTS";
        /// Send queue drained (4).
        Sqd = 4, "SQD";
        /// Send queue error (5).
        Sqe = 5, "SQE";
        /// Error (6): everything outstanding is flushed.
        Err = 6, "ERR";
    }
}

impl fmt::Display for QpState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QpState::Unknown(x) => write!(f, "UNKNOWN({x})"),
            s => f.write_str(s.name()),
        }
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
    /// A config with the default caps ([`QpCaps::default`]): 128 send and 128 receive
    /// requests outstanding, 4 SGEs per send and per receive, 64 inline bytes, and
    /// `sq_sig_all` off (only requests marked signaled complete, plus those the
    /// `set_signal_every` policy signals). Each CQ must absorb the queues of its QPs
    /// (`create_qp` refuses a smaller one): with these defaults, 128 entries per queue.
    ///
    /// ```
    /// use rdma_direct_core::types::{QpCaps, QpConfig, QpType};
    /// let cfg = QpConfig::new(QpType::Rc);
    /// let QpCaps { max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data } = cfg.caps;
    /// assert_eq!((max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data), (128, 128, 4, 4, 64));
    /// assert!(!cfg.sq_sig_all);
    /// ```
    pub fn new(qp_type: QpType) -> Self {
        QpConfig {
            qp_type,
            caps: QpCaps::default(),
            sq_sig_all: false,
        }
    }
}

/// Parameters of the RESET → INIT → RTR → RTS bring-up (defaults are `ibv_rc_pingpong`'s,
/// except `retry_cnt` and `rnr_retry`: 6 each, finite, where `ibv_rc_pingpong` uses 7).
///
/// **A dead peer is noticed with the defaults, on every provider.** A request the peer never
/// acknowledges (the peer QP destroyed, its host gone, the link down) is sent
/// `retry_cnt + 1` times, each followed by the local ACK timeout `4.096 µs × 2^timeout`;
/// then the oldest outstanding request completes with `RETRY_EXC_ERR` and the rest of the
/// queue is flushed (`WR_FLUSH_ERR`). The bound is
/// [`ConnectOpts::retry_budget`] = `4.096 µs × 2^timeout × (retry_cnt + 1)`: with the defaults
/// (timeout 14, retry_cnt 6) 67.1 ms × 7 = 0.47 s. Per provider: mlx5 hardware counts
/// `retry_cnt` retries for every value 0..=7 (7 = seven retries; the timer may run up to
/// about twice the nominal value; `timeout` 0 disables the timer there: never use it);
/// **rxe retries forever when `retry_cnt` is 7** (its completer never counts 7 down), which
/// is why the default is 6; the sim counts as mlx5 does (7 = seven retries), waiting the
/// timeout between tries on its device thread and one device pass per try under manual
/// progress (`progress`).
///
/// ```
/// use rdma_direct_core::types::ConnectOpts;
/// let o = ConnectOpts::default();
/// assert_eq!((o.timeout, o.retry_cnt, o.rnr_retry), (14, 6, 6));
/// assert_eq!(o.retry_budget().as_micros(), 469_762); // 4.096 µs × 16384 × 7
/// ```
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
    /// Transport retries (0..=7): how many times a request the peer does not acknowledge is
    /// sent again before it completes with `RETRY_EXC_ERR`. Default 6; 7 retries forever on
    /// rxe (seven times on mlx5 and the sim). See the bound above.
    pub retry_cnt: u8,
    /// RNR retries (0..=7) of a SEND or WRITE WITH IMM that finds no receive posted at the
    /// peer. Default **6**: the requester retries 6 times, each after the responder's
    /// `min_rnr_timer` (0.64 ms by default, so about 4 ms in all), then the request completes
    /// with `RNR_RETRY_EXC_ERR` ("the peer had no receive posted") and the QP goes to ERR.
    /// **7 retries forever**: a receive that is never posted then stalls the send queue
    /// without an error (only `poll_wait`/`drain` notice, as a stall); set it only when the
    /// peer always has receives posted before it can be sent to (perftest uses 7 that way).
    pub rnr_retry: u8,
    /// Minimal RNR NAK timer this QP asks its requesters to wait before a retry (IBA
    /// encoding: 12 = 0.64 ms, the default, as `ibv_rc_pingpong`; 14 = 1.28 ms; 0 = 655 ms).
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
            retry_cnt: 6,
            rnr_retry: 6,
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

impl ConnectOpts {
    /// How long a request the peer never acknowledges takes to end in `RETRY_EXC_ERR`:
    /// `4.096 µs × 2^timeout × (retry_cnt + 1)` (the nominal bound; hardware timers may run
    /// late by up to the same again). `retry_cnt` 7 on rxe retries forever: the bound does
    /// not hold there (see the type's doc).
    pub fn retry_budget(&self) -> std::time::Duration {
        let per_try = 4096u64 << self.timeout.min(31);
        std::time::Duration::from_nanos(per_try * (u64::from(self.retry_cnt.min(7)) + 1))
    }
}

/// An IB path MTU (the only five values the wire allows).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mtu {
    /// 256 bytes (`IBV_MTU_256` = 1).
    Mtu256 = 1,
    /// 512 bytes.
    Mtu512 = 2,
    /// 1024 bytes.
    Mtu1024 = 3,
    /// 2048 bytes.
    Mtu2048 = 4,
    /// 4096 bytes.
    Mtu4096 = 5,
}

impl Mtu {
    /// The MTU in bytes.
    pub fn bytes(self) -> u32 {
        128 << (self as u32)
    }
    /// From the verbs enum value (1..=5).
    pub fn from_ibv(v: u32) -> Option<Mtu> {
        Some(match v {
            1 => Mtu::Mtu256,
            2 => Mtu::Mtu512,
            3 => Mtu::Mtu1024,
            4 => Mtu::Mtu2048,
            5 => Mtu::Mtu4096,
            _ => return None,
        })
    }
    /// From a size in bytes (256, 512, 1024, 2048, 4096).
    pub fn from_bytes(b: u32) -> Option<Mtu> {
        Some(match b {
            256 => Mtu::Mtu256,
            512 => Mtu::Mtu512,
            1024 => Mtu::Mtu1024,
            2048 => Mtu::Mtu2048,
            4096 => Mtu::Mtu4096,
            _ => return None,
        })
    }
}
