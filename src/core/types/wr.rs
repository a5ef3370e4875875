//! Work requests: what a send or receive queue is given.
//!
//! A [`SendWr`] borrows its SGE list or inline bytes and its address handle; building one
//! allocates nothing, and it is `Copy`, so a refused request comes back whole. The address
//! handle type `A` is the provider's own (`Provider::Ah`, the send queue's `SendQueue::Ah`),
//! so a UD send carries a handle of the device it is posted to.
//!
//! ## Receives and WRITE WITH IMMEDIATE
//!
//! A receive work request may have zero SGEs. An RDMA WRITE WITH IMMEDIATE **does consume a
//! posted receive WQE at the responder** (the data goes to the remote address; the receive WQE
//! only carries the completion and the immediate), so a responder must keep receives posted
//! for it, zero-SGE ones being enough.
//!
//! ## Immediate data
//!
//! [`SendOp::SendImm`] / [`SendOp::WriteImm`] take the immediate as a host-order `u32`; it
//! travels big-endian and the completion's `imm` gives back the same host-order value.

use super::RemoteTarget;
use std::fmt;

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

/// A UD destination: the address handle (of the provider's type `A`) and the remote QP.
pub struct UdDest<'a, A> {
    /// The address handle (from the provider's `create_ah`).
    pub ah: &'a A,
    /// Remote QPN.
    pub remote_qpn: u32,
    /// Remote Q_Key.
    pub remote_qkey: u32,
}

// Copy whatever `A` is: only a reference to it is held.
impl<A> Clone for UdDest<'_, A> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<A> Copy for UdDest<'_, A> {}

// Debug whatever `A` is (the handle prints as its address), so a refused request prints, and
// `unwrap`s, in code generic over the provider.
impl<A> fmt::Debug for UdDest<'_, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UdDest")
            .field("ah", &(self.ah as *const A))
            .field("remote_qpn", &self.remote_qpn)
            .field("remote_qkey", &self.remote_qkey)
            .finish()
    }
}

/// A send work request. It borrows its SGE list and inline bytes; nothing is allocated. `A` is
/// the address handle type of the provider (used on UD QPs only).
pub struct SendWr<'a, A> {
    /// The caller's identifier, returned in the completion.
    pub wr_id: u64,
    /// What to do.
    pub op: SendOp,
    /// Local data.
    pub payload: Payload<'a>,
    /// Signaled, fence, solicited.
    pub flags: SendFlags,
    /// The destination, on UD QPs only.
    pub ud: Option<UdDest<'a, A>>,
}

impl<A> Clone for SendWr<'_, A> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<A> Copy for SendWr<'_, A> {}

// Debug whatever `A` is, as for `UdDest`.
impl<A> fmt::Debug for SendWr<'_, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendWr")
            .field("wr_id", &self.wr_id)
            .field("op", &self.op)
            .field("payload", &self.payload)
            .field("flags", &self.flags)
            .field("ud", &self.ud)
            .finish()
    }
}

impl<'a, A> SendWr<'a, A> {
    /// A request with `op` over `sges`, unsignaled.
    pub const fn new(wr_id: u64, op: SendOp, sges: &'a [Sge]) -> Self {
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
    /// SEND WITH IMMEDIATE of `sges` (`imm` in host order), unsignaled.
    pub fn send_imm(wr_id: u64, sges: &'a [Sge], imm: u32) -> Self {
        Self::new(wr_id, SendOp::SendImm { imm }, sges)
    }
    /// RDMA WRITE WITH IMMEDIATE of `sges` to `raddr`/`rkey`, unsignaled. It consumes one
    /// receive at the peer, which completes with `imm`.
    pub fn write_imm(wr_id: u64, sges: &'a [Sge], raddr: u64, rkey: u32, imm: u32) -> Self {
        Self::new(wr_id, SendOp::WriteImm { raddr, rkey, imm }, sges)
    }
    /// 8-byte compare-and-swap at `raddr` (8-byte aligned); the old value lands in `local`
    /// (one 8-byte SGE), unsignaled.
    pub fn cas(
        wr_id: u64,
        local: &'a [Sge],
        raddr: u64,
        rkey: u32,
        compare: u64,
        swap: u64,
    ) -> Self {
        let op = SendOp::CompareSwap {
            raddr,
            rkey,
            compare,
            swap,
        };
        Self::new(wr_id, op, local)
    }
    /// 8-byte fetch-and-add at `raddr` (8-byte aligned); the old value lands in `local`
    /// (one 8-byte SGE), unsignaled.
    pub fn faa(wr_id: u64, local: &'a [Sge], raddr: u64, rkey: u32, add: u64) -> Self {
        Self::new(wr_id, SendOp::FetchAdd { raddr, rkey, add }, local)
    }
    /// RDMA WRITE of `sges` to `to` (a [`RemoteTarget`]: address and rkey checked against
    /// the peer's window when it was made), unsignaled.
    #[inline]
    pub fn write_to(wr_id: u64, sges: &'a [Sge], to: RemoteTarget) -> Self {
        Self::write(wr_id, sges, to.addr(), to.rkey())
    }
    /// RDMA WRITE WITH IMMEDIATE of `sges` to `to`, unsignaled; the rkey travels inside the
    /// target, so it cannot change places with `imm`. It consumes one receive at the peer,
    /// which completes with `imm`.
    #[inline]
    pub fn write_imm_to(wr_id: u64, sges: &'a [Sge], to: RemoteTarget, imm: u32) -> Self {
        Self::write_imm(wr_id, sges, to.addr(), to.rkey(), imm)
    }
    /// RDMA READ from `from` into `sges`, unsignaled.
    #[inline]
    pub fn read_from(wr_id: u64, sges: &'a [Sge], from: RemoteTarget) -> Self {
        Self::read(wr_id, sges, from.addr(), from.rkey())
    }
    /// 8-byte compare-and-swap at `at` (8-byte aligned, checked at post); the old value lands
    /// in `local` (one 8-byte SGE), unsignaled.
    #[inline]
    pub fn cas_at(wr_id: u64, local: &'a [Sge], at: RemoteTarget, compare: u64, swap: u64) -> Self {
        Self::cas(wr_id, local, at.addr(), at.rkey(), compare, swap)
    }
    /// 8-byte fetch-and-add at `at` (8-byte aligned, checked at post); the old value lands in
    /// `local` (one 8-byte SGE), unsignaled.
    #[inline]
    pub fn faa_at(wr_id: u64, local: &'a [Sge], at: RemoteTarget, add: u64) -> Self {
        Self::faa(wr_id, local, at.addr(), at.rkey(), add)
    }
    /// Signaled when `yes` (for selective signaling: `.signaled_if(i % 16 == 15)`).
    pub fn signaled_if(self, yes: bool) -> Self {
        if yes {
            self.signaled()
        } else {
            self
        }
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
    pub fn to(mut self, dest: UdDest<'a, A>) -> Self {
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

impl<'a> RecvWr<'a> {
    /// A receive into `sges` (may be empty: enough for a WRITE WITH IMMEDIATE's immediate).
    pub const fn new(wr_id: u64, sges: &'a [Sge]) -> Self {
        RecvWr { wr_id, sges }
    }
}

/// Up to `N` send requests built one by one and posted with one doorbell, without a dummy
/// array: `push` them, then hand [`SendBatch::as_slice`] to `post_list`. Lives on the stack;
/// nothing is allocated.
/// `A` is the provider's address handle type, as in [`SendWr`].
#[derive(Debug)]
pub struct SendBatch<'a, A, const N: usize> {
    wrs: [SendWr<'a, A>; N],
    len: usize,
}

impl<A, const N: usize> Clone for SendBatch<'_, A, N> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<A, const N: usize> Copy for SendBatch<'_, A, N> {}

impl<'a, A, const N: usize> Default for SendBatch<'a, A, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<'a, A, const N: usize> SendBatch<'a, A, N> {
    /// An empty batch.
    pub const fn new() -> Self {
        SendBatch {
            wrs: [SendWr::new(0, SendOp::Send, &[]); N],
            len: 0,
        }
    }
    /// Adds `wr`; hands it back when the batch already holds `N`.
    pub fn push(&mut self, wr: SendWr<'a, A>) -> Result<(), SendWr<'a, A>> {
        match self.wrs.get_mut(self.len) {
            Some(slot) => {
                *slot = wr;
                self.len += 1;
                Ok(())
            }
            None => Err(wr),
        }
    }
    /// The requests pushed, in order.
    pub fn as_slice(&self) -> &[SendWr<'a, A>] {
        &self.wrs[..self.len]
    }
    /// How many are pushed.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when nothing is pushed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// True when `N` are pushed.
    pub fn is_full(&self) -> bool {
        self.len == N
    }
    /// Empties the batch.
    pub fn clear(&mut self) {
        self.len = 0;
    }
}
