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
    if let ([s], [d]) = (src, dst) {
        // One range into one (a packet's payload, a READ's segment): as far as `d` holds.
        let n = s.len.min(d.len);
        if n > 0 {
            // SAFETY: forwarded; `n` bytes lie in both spans.
            unsafe { dma_copy(d.ptr, s.ptr, n) };
        }
        return;
    }
    // SAFETY: forwarded.
    unsafe { copy_list_at(src, dst, 0) }
}

/// Copy the concatenation of `src` into the concatenation of `dst` from its byte `skip` on
/// (a packet of a message into the receive, after the bytes of the packets before it).
/// Bytes past the end of `dst` are not copied.
///
/// # Safety
/// Every span must be valid for its length (sources readable, destinations writable).
pub(super) unsafe fn copy_list_at(src: &[Span], dst: &[Span], skip: usize) {
    let mut di = 0;
    let mut doff = skip;
    while di < dst.len() && doff >= dst[di].len {
        doff -= dst[di].len;
        di += 1;
    }
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

/// Copy the bytes `skip..skip + dst.len` of the concatenation of `src` into `dst` (a
/// packet's piece of a message), without building a list of sub-spans. Bytes past the end
/// of `src` are not copied.
///
/// # Safety
/// Every span must be valid for its length (sources readable, `dst` writable).
pub(super) unsafe fn gather_at(src: &[Span], skip: usize, dst: Span) {
    let (mut skip, mut done) = (skip, 0);
    for s in src {
        if done == dst.len {
            break;
        }
        if skip >= s.len {
            skip -= s.len;
            continue;
        }
        let n = (s.len - skip).min(dst.len - done);
        // SAFETY: `skip + n <= s.len` and `done + n <= dst.len`: both ranges lie inside
        // spans the caller vouches for.
        unsafe { dma_copy(dst.ptr.add(done), s.ptr.add(skip), n) };
        done += n;
        skip = 0;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gather_at_copies_any_piece_of_a_list() {
        let (mut a, mut b) = ([0u8; 10], [0u8; 6]);
        for (i, x) in a.iter_mut().chain(b.iter_mut()).enumerate() {
            *x = i as u8 + 1;
        }
        let src = [
            Span {
                ptr: a.as_mut_ptr(),
                len: 10,
            },
            EMPTY_SPAN,
            Span {
                ptr: b.as_mut_ptr(),
                len: 6,
            },
        ];
        let all: Vec<u8> = (1..=16).collect();
        for skip in 0..=16 {
            for n in 0..=16 - skip {
                let mut out = [0u8; 16];
                let dst = Span {
                    ptr: out.as_mut_ptr(),
                    len: n,
                };
                // SAFETY: every span covers live arrays of its length.
                unsafe { gather_at(&src, skip, dst) };
                assert_eq!(&out[..n], &all[skip..skip + n], "skip {skip} n {n}");
                assert!(out[n..].iter().all(|&x| x == 0), "nothing past n");
            }
        }
        // Past the end of the list: what there is, nothing more.
        let mut out = [0u8; 8];
        let dst = Span {
            ptr: out.as_mut_ptr(),
            len: 8,
        };
        // SAFETY: as above.
        unsafe { gather_at(&src, 12, dst) };
        assert_eq!(out, [13, 14, 15, 16, 0, 0, 0, 0]);
    }
}
