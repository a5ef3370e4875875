//! Why a post was refused: [`PostError`], and [`Rejected`], which hands the request back.
//!
//! These are hot-path errors: small and `Copy`, built without allocating. Control-path
//! errors are [`crate::error::Error`].

use super::{QpState, QpType};
use std::fmt;

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
    /// A CQ the QP completes on is in error (an overrun, or the device's `IBV_EVENT_CQ_ERR`):
    /// completions were lost and nothing more arrives on it. Destroy the QPs on it and the CQ,
    /// and create them again.
    CqError {
        /// The CQ in error.
        cqn: u32,
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
    /// The device (libibverbs' `ibv_post_send` / `ibv_post_recv`, verbs provider only)
    /// refused the doorbell that would have submitted the request: the requests it names
    /// were taken back, never reach the device and produce no completion.
    Device {
        /// The verb that refused.
        verb: RingVerb,
        /// Its errno.
        errno: i32,
        /// How many requests it took back: the newest staged, the request handed back with
        /// this error among them (see `post_and_ring` and `post_list`).
        count: u32,
    },
}

impl fmt::Display for PostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            PostError::QueueFull { capacity } => {
                write!(
                    f,
                    "queue full: {capacity} requests outstanding; poll completions first \
                     (unsignaled requests are retired only by a later signaled one: signal at \
                     least one in every {capacity})"
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
            PostError::CqError { cqn } => {
                write!(
                    f,
                    "CQ {cqn:#x} of this QP is in error (CQ_ERR: overrun, completions lost): \
                     destroy its QPs and the CQ and create them again"
                )
            }
            PostError::UdDest => {
                f.write_str("UD sends need a destination (and only UD sends take one)")
            }
            PostError::UdTooLarge { len, mtu } => {
                write!(f, "UD send of {len} B exceeds the path MTU of {mtu} B")
            }
            PostError::Device { verb, errno, count } => write!(
                f,
                "{verb}: {}: {count} request{} refused and taken back (not posted, no \
                 completion); {}",
                crate::error::errno_name(errno),
                if count == 1 { "" } else { "s" },
                post_errno_hint(errno)
            ),
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

impl<W> fmt::Display for Rejected<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "post refused: {}", self.error)
    }
}

// `Rejected` and `PostListError` borrow the request (its SGE list, its address handle), so
// they cannot be `'static` errors themselves; instead of `std::error::Error` they convert,
// dropping the request, into `crate::Error` and into the boxed errors, so `?` works in code
// generic over the provider whatever the request borrows:
// `fn f<P: Provider>(..) -> Result<(), Box<dyn Error>> { qp.sq().post(wr)?; .. }`.
impl<W> From<Rejected<W>> for Box<dyn std::error::Error> {
    fn from(r: Rejected<W>) -> Self {
        Box::new(crate::Error::from(r))
    }
}
impl<W> From<Rejected<W>> for Box<dyn std::error::Error + Send + Sync> {
    fn from(r: Rejected<W>) -> Self {
        Box::new(crate::Error::from(r))
    }
}

/// A `post_list` / `post_recv_list` that stopped at `index`: the requests before it were
/// staged and rung, the one at `index` was refused for `error`, and `rest` (starting with the
/// refused one) was not posted, ready to retry once the cause is gone.
#[derive(Clone, Copy, Debug)]
pub struct PostListError<'s, W> {
    /// Index of the refused request in the list given.
    pub index: usize,
    /// Why it was refused.
    pub error: PostError,
    /// The refused request and everything after it, unposted.
    pub rest: &'s [W],
}

impl<W> fmt::Display for PostListError<'_, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "post list stopped at index {} ({} not posted): {}",
            self.index,
            self.rest.len(),
            self.error
        )
    }
}

impl<W> From<PostListError<'_, W>> for Box<dyn std::error::Error> {
    fn from(e: PostListError<'_, W>) -> Self {
        Box::new(crate::Error::from(e))
    }
}
impl<W> From<PostListError<'_, W>> for Box<dyn std::error::Error + Send + Sync> {
    fn from(e: PostListError<'_, W>) -> Self {
        Box::new(crate::Error::from(e))
    }
}

/// A doorbell (`ring`) the device refused after every check of `post` passed. Only the
/// verbs provider can see one (`ibv_post_send` / `ibv_post_recv` returning an errno); the
/// refused requests and every one staged after them were taken back: they never reach the
/// device and produce no completion. mlx5 and the sim write the doorbell themselves and never
/// fail here.
///
/// It reaches the caller at the call that rings: [`crate::types`]'s users get it from
/// `try_ring`, `post_and_ring` and `post_list` (as [`PostError::Device`]) of the provider
/// traits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingError {
    /// The verb that refused.
    pub verb: RingVerb,
    /// The errno libibverbs returned.
    pub errno: i32,
    /// wr_id of the first request taken back.
    pub first_wr_id: u64,
    /// How many were taken back.
    pub count: u32,
}

impl fmt::Display for RingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}: {} requests from wr_id {} refused and taken back (not posted, no \
             completion); {}",
            self.verb,
            crate::error::errno_name(self.errno),
            self.count,
            self.first_wr_id,
            post_errno_hint(self.errno)
        )
    }
}

impl From<RingError> for PostError {
    fn from(e: RingError) -> Self {
        PostError::Device {
            verb: e.verb,
            errno: e.errno,
            count: e.count,
        }
    }
}

/// The libibverbs verb behind a refused doorbell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingVerb {
    /// `ibv_post_send`.
    PostSend,
    /// `ibv_post_recv` (or `ibv_post_srq_recv`).
    PostRecv,
}

impl fmt::Display for RingVerb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RingVerb::PostSend => "ibv_post_send",
            RingVerb::PostRecv => "ibv_post_recv",
        })
    }
}

/// What an errno of `ibv_post_send` / `ibv_post_recv` means and what to do about it.
pub fn post_errno_hint(errno: i32) -> &'static str {
    match errno {
        libc::EOPNOTSUPP => {
            "the device does not support this opcode or flag: use another provider or opcode \
             (rdma-direct info lists the device's capabilities)"
        }
        libc::ENOMEM => {
            "the device's queue has no room: poll completions, then post the requests again"
        }
        libc::EINVAL => {
            "the device rejected a request's shape (SGE count, inline size, opcode or QP \
             state): check it against the QP's caps"
        }
        _ => "see the device's provider for what this errno means on a post",
    }
}

impl std::error::Error for RingError {}
