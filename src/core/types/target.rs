//! [`RemoteTarget`]: where in the peer's memory a WRITE, WRITE WITH IMMEDIATE, READ or atomic
//! goes — address, rkey and length in one value.
//!
//! A target is made from the peer's window ([`crate::endpoint::RemoteMr::target`]), which
//! checks once that the range lies inside the window; after that a post needs no bounds
//! check, and the rkey cannot be given where the immediate belongs (or the other way round):
//! the typed constructors ([`crate::types::SendWr::write_to`],
//! [`crate::types::SendWr::write_imm_to`], [`crate::types::SendWr::read_from`],
//! [`crate::types::SendWr::cas_at`], [`crate::types::SendWr::faa_at`]) take the target whole.
//!
//! ```compile_fail
//! use rdma_direct_core::types::{RemoteTarget, SendWr, Sge};
//! fn swapped(sge: &[Sge], target: RemoteTarget, imm: u32) -> SendWr<'_, ()> {
//!     SendWr::write_imm_to(1, sge, imm, target) // the immediate where the target goes
//! }
//! ```
//!
//! The same call with the arguments in their places compiles:
//!
//! ```
//! use rdma_direct_core::types::{RemoteTarget, SendWr, Sge};
//! fn in_place(sge: &[Sge], target: RemoteTarget, imm: u32) -> SendWr<'_, ()> {
//!     SendWr::write_imm_to(1, sge, target, imm)
//! }
//! ```
//!
//! The raw constructors ([`crate::types::SendWr::write`] and the others taking `raddr, rkey`)
//! stay for addresses that come from elsewhere; nothing checks those before the peer does.

/// `len` bytes at `addr` in the peer's memory region of `rkey`, checked to lie inside the
/// window it was made from. `Copy`, 16 bytes; making one allocates nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RemoteTarget {
    addr: u64,
    rkey: u32,
    len: u32,
}

impl RemoteTarget {
    /// Only the window types of this crate make targets, after their bounds check.
    pub(crate) const fn checked(addr: u64, rkey: u32, len: u32) -> RemoteTarget {
        RemoteTarget { addr, rkey, len }
    }
    /// The remote virtual address of the first byte.
    #[inline]
    pub const fn addr(&self) -> u64 {
        self.addr
    }
    /// The rkey of the peer's memory region.
    #[inline]
    pub const fn rkey(&self) -> u32 {
        self.rkey
    }
    /// How many bytes from [`RemoteTarget::addr`] lie inside the window.
    #[inline]
    pub const fn len(&self) -> u32 {
        self.len
    }
    /// True for an empty target (never made by a window; kept for the `len` convention).
    #[inline]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The `len` bytes at `offset` into this target, as a narrower target; `None` when the
    /// range is empty or leaves it.
    #[inline]
    pub const fn sub(&self, offset: u32, len: u32) -> Option<RemoteTarget> {
        match offset.checked_add(len) {
            Some(end) if len > 0 && end <= self.len => Some(RemoteTarget {
                addr: self.addr + offset as u64,
                rkey: self.rkey,
                len,
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sub_stays_inside_and_refuses_the_rest() {
        let t = RemoteTarget::checked(0x1000, 7, 64);
        assert_eq!(t.sub(8, 8), Some(RemoteTarget::checked(0x1008, 7, 8)));
        assert_eq!(t.sub(0, 64), Some(t));
        assert_eq!(t.sub(60, 8), None);
        assert_eq!(t.sub(8, 0), None);
        assert_eq!(t.sub(u32::MAX, 2), None);
        assert_eq!(
            (t.addr(), t.rkey(), t.len(), t.is_empty()),
            (0x1000, 7, 64, false)
        );
    }
}
