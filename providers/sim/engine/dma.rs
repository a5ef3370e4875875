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

/// The bytes `skip..skip + n` of the concatenation of `spans`, as spans into `out` (at most
/// `spans.len()` of them). Returns how many; fewer bytes than `n` when `spans` ends first.
pub(super) fn sub_spans(spans: &[Span], skip: usize, n: usize, out: &mut [Span]) -> usize {
    let (mut skip, mut left, mut k) = (skip, n, 0);
    for s in spans {
        if left == 0 || k == out.len() {
            break;
        }
        if skip >= s.len {
            skip -= s.len;
            continue;
        }
        let take = (s.len - skip).min(left);
        out[k] = Span {
            // Inside `s` (skip < s.len): no pointer leaves the span the caller checked.
            ptr: s.ptr.wrapping_add(skip),
            len: take,
        };
        k += 1;
        left -= take;
        skip = 0;
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sub_spans_cut_a_list_at_any_byte() {
        let mut a = [0u8; 10];
        let mut b = [0u8; 6];
        let spans = [
            Span {
                ptr: a.as_mut_ptr(),
                len: 10,
            },
            Span {
                ptr: b.as_mut_ptr(),
                len: 6,
            },
        ];
        let mut out = [EMPTY_SPAN; 2];
        let k = sub_spans(&spans, 8, 5, &mut out);
        assert_eq!(k, 2);
        assert_eq!(
            (out[0].ptr, out[0].len),
            (a.as_mut_ptr().wrapping_add(8), 2)
        );
        assert_eq!((out[1].ptr, out[1].len), (b.as_mut_ptr(), 3));
        assert_eq!(sub_spans(&spans, 16, 4, &mut out), 0);
        let k = sub_spans(&spans, 12, 100, &mut out);
        assert_eq!((k, out[0].len), (1, 4));
        // Bytes copied into a list from an offset land after it, and stop at its end.
        let mut src = [7u8; 8];
        let s = [Span {
            ptr: src.as_mut_ptr(),
            len: 8,
        }];
        // SAFETY: every span is a live local array of its length.
        unsafe { copy_list_at(&s, &spans, 7) };
        assert_eq!(a, [0, 0, 0, 0, 0, 0, 0, 7, 7, 7]);
        assert_eq!(b, [7, 7, 7, 7, 7, 0]);
        // SAFETY: as above.
        unsafe { copy_list_at(&s, &spans, 14) };
        assert_eq!(b, [7; 6], "two bytes from 14 on, the rest past the end");
        // One span into one: as far as the destination holds, an empty source copies
        // nothing (its pointer is not touched).
        let mut one = [0u8; 5];
        let d = [Span {
            ptr: one.as_mut_ptr(),
            len: 5,
        }];
        // SAFETY: as above; the empty span is never dereferenced.
        unsafe { copy_list(&s, &d) };
        assert_eq!(one, [7; 5]);
        let mut three = [1u8; 3];
        let d = [Span {
            ptr: three.as_mut_ptr(),
            len: 3,
        }];
        // SAFETY: as above.
        unsafe { copy_list(&[EMPTY_SPAN], &d) };
        assert_eq!(three, [1; 3]);
        // SAFETY: as above.
        unsafe { copy_list(&s[..], &d) };
        assert_eq!(three, [7; 3]);
        assert_eq!(a, [0, 0, 0, 0, 0, 0, 0, 7, 7, 7]);
    }
}
