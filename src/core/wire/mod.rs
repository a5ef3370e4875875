//! The mlx5 wire layer: typed views over WQE segments and CQEs, and whole-WQE encoders and
//! parsers. Bytes in, fields out; no unsafe code, no allocation.
//!
//! A leaf: it imports nothing from the rest of the crate (the data-plane API converts its
//! requests into [`SendWqe`]s, the mlx5 provider maps syndromes to completion statuses).
//!
//! Everything here is checked byte for byte against rdma-core 44's `mlx5dv.h` by the golden
//! fixtures in `fixtures/mlx5/` (see `tests/golden_mlx5.rs`).
//!
//! # Words
//!
//! - **WQE** (work queue entry): one request in a send or receive queue.
//! - **WQEBB** (WQE basic block): 64 bytes; a send WQE takes 1..N of them. The send queue
//!   ("SQ") is a ring of `wqe_cnt` WQEBBs, `wqe_cnt` a power of two.
//! - **segment**: a 16-byte unit of a WQE (ctrl, raddr, data, inline, atomic) or a run of them
//!   (the 48-byte datagram address vector, an inline segment longer than 12 bytes).
//! - **ds** (data size): the WQE's length in 16-byte units, the ctrl segment included.
//! - **pi** (producer index): the free-running count of WQEBBs posted; its low 16 bits are
//!   the `wqe_idx` written into the ctrl segment, `pi & (wqe_cnt - 1)` is the slot.
//! - **ci** (consumer index): the free-running count of CQEs consumed from a CQ.
//! - **qpn**, **lkey**, **rkey**, **imm**: as in verbs; 24-bit QP number, local and remote
//!   memory keys, the 32-bit immediate.
//! - **CQE**: a 64-byte completion entry (the second half of each slot of a 128-byte CQ);
//!   `op_own` is its last byte (opcode, format, solicited, owner bit).
//! - **wqe_counter**: in a requester CQE, the `wqe_idx` of the WQE it completes.
//!
//! # At a glance
//!
//! | side | what | items |
//! |---|---|---|
//! | both | segment views | [`CtrlSeg`], [`RaddrSeg`], [`DataSeg`], [`InlineSeg`], [`AtomicSeg`], [`DatagramSeg`], [`SrqNextSeg`], [`fm_ce_se`] |
//! | both | CQE views | [`Cqe64`], [`ErrCqe`], [`cqe64_offset`], [`cqe_owner_for`], [`cqe_sw_owned`], and for pollers [`cqe_parity`], [`cqe_sw_owned_x`], [`CQE_PLAIN_OWNED_MASK`], [`CQE_UNSCATTERED_OWNED_MASK`] |
//! | both | named numbers | every `MLX5_*` layout constant of `mlx5dv.h` the crate uses ([`MLX5_OPCODE_SEND`], [`MLX5_CQE_REQ`], [`MLX5_CQE_SYNDROME_WR_FLUSH_ERR`], ...), field offsets in [`offset`] |
//! | both | enums keeping unknown values | [`Opcode`], [`CqeOpcode`], [`Syndrome`] |
//! | host | send WQE encoder | [`SendWqe`] with its [`Payload`] of [`Sge`]s, [`wqe_size`], [`emit_send_wqe`] (whole ring, wraps) |
//! | host | receive / SRQ WQEs | [`emit_recv_wqe`], [`emit_srq_wqe`] |
//! | device | send WQE parser | [`parse_send_wqe`] → [`ParsedWqe`], [`DataSegs`] of [`DataItem`] |
//! | device | receive / SRQ parsers | [`parse_recv_wqe`], [`parse_srq_wqe`] → [`RecvSges`] |
//! | device | CQE writer | [`CqeRepr::emit`], or [`CqeRepr::to_words`] as [`CqeWords`] (and [`CqeRepr::parse`] for the host) |
//!
//! # Contract of the views
//!
//! Each view (`CtrlSeg<T>`, `Cqe64<T>`, ...) wraps a buffer `T: AsRef<[u8]>`. After
//! `new_checked` (or `check_len` returning `Ok`) no accessor panics; `new_unchecked` leaves
//! the length check to the caller, and an accessor on a too-short buffer panics. All
//! multi-byte fields on the wire are big-endian; accessors take and return host-order values
//! and do the conversion inside. Setters on `T: AsMut<[u8]>` write exactly the bytes of their
//! field. A `Repr` (`CqeRepr`, `SendWqe`, ...) is a plain value: `emit` writes every byte of
//! the entry it describes, reserved bytes as zero, because a reused ring slot still holds the
//! previous entry; `parse` reads it back.
//!
//! # Contract of the whole-WQE functions
//!
//! The send ring is the whole SQ buffer (`wqe_cnt * 64` bytes, a power of two). The
//! encoders and parsers reject a ring of any other length with an error, then never panic:
//! they index with offsets masked by the ring length, so a WQE that runs past the end of the
//! ring continues at its start, exactly as the device reads it.

//!
//! # Example
//!
//! The host writes an 8-byte inline RDMA WRITE at producer index 0xffff of an 8-WQEBB ring;
//! the device side reads it back:
//!
//! ```
//! use rdma_direct_core::wire::{self, fm_ce_se, DataItem, Opcode, Payload, SendWqe, WqeSize};
//!
//! let mut ring = vec![0u8; 8 * wire::MLX5_SEND_WQE_BB];
//! let wqe = SendWqe {
//!     fm_ce_se: fm_ce_se::of(fm_ce_se::FLAG_SIGNALED),
//!     raddr: Some((0x7f00_0000_1000, 0x1234)),
//!     data: Payload::Inline(b"8 bytes!"),
//!     ..SendWqe::new(Opcode::RdmaWrite, 0xffff, 0x42)
//! };
//! let size = wire::emit_send_wqe(&mut ring, &wqe)?;
//! assert_eq!(size, WqeSize { ds: 3, wqebbs: 1 });
//!
//! let p = wire::parse_send_wqe(&ring, 0xffff, false)?;
//! assert_eq!((p.opcode, p.qpn, p.raddr), (Opcode::RdmaWrite, 0x42, wqe.raddr));
//! let Some(DataItem::Inline(bytes)) = p.data_segs().next() else { unreachable!() };
//! assert_eq!(bytes.first, b"8 bytes!");
//! # Ok::<(), wire::WqeError>(())
//! ```

#![forbid(unsafe_code)]

mod consts;
mod cqe;
mod seg;
mod wqe;

pub use consts::*;
pub use cqe::{
    cqe64_offset, cqe_owner_for, cqe_parity, cqe_sw_owned, cqe_sw_owned_x, Cqe64, CqeOpcode,
    CqeRepr, CqeWords, ErrCqe, Syndrome, CQE_PLAIN_OWNED_MASK, CQE_UNSCATTERED_OWNED_MASK,
};
pub use seg::{
    fm_ce_se, AtomicSeg, CtrlSeg, DataSeg, DatagramSeg, InlineSeg, Opcode, RaddrSeg, SrqNextSeg,
};
pub use wqe::{
    emit_recv_wqe, emit_send_wqe, emit_srq_wqe, parse_recv_wqe, parse_send_wqe, parse_srq_wqe,
    wqe_size, DataItem, DataSegs, InlineData, ParsedWqe, Payload, RecvSges, SendWqe, Sge, UdAv,
    WqeError, WqeSize,
};

/// A too-short buffer handed to a view's `new_checked`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Truncated {
    /// Bytes the view needs.
    pub needed: usize,
    /// Bytes the buffer has.
    pub got: usize,
}

impl std::fmt::Display for Truncated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "buffer too short: {} bytes, the layout needs {}",
            self.got, self.needed
        )
    }
}

impl std::error::Error for Truncated {}

/// A byte range of a layout.
type Field = std::ops::Range<usize>;

/// The `len` bytes of a field at offset `off` (an entry of [`offset`]).
const fn at(off: usize, len: usize) -> Field {
    off..off + len
}

#[inline(always)]
fn be16(b: &[u8], f: Field) -> u16 {
    let mut a = [0u8; 2];
    a.copy_from_slice(&b[f]);
    u16::from_be_bytes(a)
}

#[inline(always)]
fn be32(b: &[u8], f: Field) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[f]);
    u32::from_be_bytes(a)
}

#[inline(always)]
fn be64(b: &[u8], f: Field) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[f]);
    u64::from_be_bytes(a)
}

#[inline(always)]
fn put16(b: &mut [u8], f: Field, v: u16) {
    b[f].copy_from_slice(&v.to_be_bytes());
}

#[inline(always)]
fn put32(b: &mut [u8], f: Field, v: u32) {
    b[f].copy_from_slice(&v.to_be_bytes());
}

#[inline(always)]
fn put64(b: &mut [u8], f: Field, v: u64) {
    b[f].copy_from_slice(&v.to_be_bytes());
}
