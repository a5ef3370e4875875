//! Moving bytes between checked ranges of host memory.
//!
//! A [`Span`] is a raw range the engine has already checked (against a registered MR, or
//! inside the engine's own copy of a WQE, or a GRH on its stack); the copy helpers move
//! bytes between lists of spans with [`dma_copy`], as the device's DMA would. Reads and
//! writes nothing else. Invariant: a span is only built by the checks in `execute` /
//! `recv` (or for the engine's own buffers), so every copy here stays inside memory the
//! host registered or the engine owns.

use crate::sim::mem::dma_copy;

/// A checked range of memory: `len` bytes at `ptr`.
#[derive(Clone, Copy)]
pub(super) struct Span {
    pub(super) ptr: *mut u8,
    pub(super) len: usize,
}

pub(super) const EMPTY_SPAN: Span = Span {
    ptr: std::ptr::null_mut(),
    len: 0,
};

/// Copy the concatenation of `src` into the concatenation of `dst`.
///
/// # Safety
/// Every span must be valid for its length (sources readable, destinations writable), and
/// the total of `dst` at least that of `src`.
pub(super) unsafe fn copy_list(src: &[Span], dst: &[Span]) {
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
pub(super) unsafe fn gather_into(local: &[Span], remote: Span) {
    // SAFETY: forwarded.
    unsafe { copy_list(local, &[remote]) }
}

/// Scatter the single range `remote` into `local`.
///
/// # Safety
/// As [`copy_list`].
pub(super) unsafe fn scatter_from(remote: Span, local: &[Span]) {
    // SAFETY: forwarded.
    unsafe { copy_list(&[remote], local) }
}
