//! The data-path entry points of a context's ops table.
//!
//! `verbs.h` defines `ibv_post_send`, `ibv_post_recv`, `ibv_post_srq_recv`, `ibv_poll_cq` and
//! `ibv_req_notify_cq` as static inline functions that call through
//! `object->context->ops.<fn>`; they are not exported from libibverbs, so we do the same here.
//! Each returns what the provider returns: 0 or a positive errno for posts (with `*bad_wr`
//! pointing at the first rejected WR), the number of completions or a negative value for
//! `poll_cq`. A provider without the entry point gives `ENOSYS` (`-1` for `poll_cq`).
//!
//! A caller on a hot loop can read the pointers once with [`DataPathOps::of`] and call them
//! directly.

use super::types::*;
use libc::c_int;

/// The five data-path function pointers of one context.
#[derive(Clone, Copy)]
pub struct DataPathOps {
    /// `ops.post_send`.
    pub post_send: Option<post_send_fn>,
    /// `ops.post_recv`.
    pub post_recv: Option<post_recv_fn>,
    /// `ops.post_srq_recv`.
    pub post_srq_recv: Option<post_srq_recv_fn>,
    /// `ops.poll_cq`.
    pub poll_cq: Option<poll_cq_fn>,
    /// `ops.req_notify_cq`.
    pub req_notify_cq: Option<req_notify_cq_fn>,
}

impl DataPathOps {
    /// Reads the ops table of `ctx`.
    ///
    /// # Safety
    /// `ctx` must be a context returned by `ibv_open_device` and not yet closed.
    pub unsafe fn of(ctx: *const ibv_context) -> DataPathOps {
        // SAFETY: the caller guarantees `ctx` is a live context; the ops table is written
        // once by libibverbs when the context is opened and only read afterwards.
        let ops = unsafe { &(*ctx).ops };
        DataPathOps {
            post_send: ops.post_send,
            post_recv: ops.post_recv,
            post_srq_recv: ops.post_srq_recv,
            poll_cq: ops.poll_cq,
            req_notify_cq: ops.req_notify_cq,
        }
    }
}

/// `ibv_post_send`.
///
/// # Safety
/// `qp` is a live QP; `wr` heads a well-formed NULL-terminated list whose SGEs (and, for
/// inline sends, data) are readable; `bad_wr` is writable. The same rules as the C inline.
#[inline]
pub unsafe fn post_send(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    // SAFETY: the caller guarantees `qp` is live, so `qp->context` is a live context.
    let f = unsafe { (*(*qp).context).ops.post_send };
    match f {
        // SAFETY: forwarded caller contract.
        Some(f) => unsafe { f(qp, wr, bad_wr) },
        None => libc::ENOSYS,
    }
}

/// `ibv_post_recv`.
///
/// # Safety
/// As for [`post_send`], with a receive list.
#[inline]
pub unsafe fn post_recv(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    // SAFETY: the caller guarantees `qp` is live.
    let f = unsafe { (*(*qp).context).ops.post_recv };
    match f {
        // SAFETY: forwarded caller contract.
        Some(f) => unsafe { f(qp, wr, bad_wr) },
        None => libc::ENOSYS,
    }
}

/// `ibv_post_srq_recv`.
///
/// # Safety
/// `srq` is a live SRQ; otherwise as for [`post_recv`].
#[inline]
pub unsafe fn post_srq_recv(
    srq: *mut ibv_srq,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    // SAFETY: the caller guarantees `srq` is live.
    let f = unsafe { (*(*srq).context).ops.post_srq_recv };
    match f {
        // SAFETY: forwarded caller contract.
        Some(f) => unsafe { f(srq, wr, bad_wr) },
        None => libc::ENOSYS,
    }
}

/// `ibv_poll_cq`: returns the number of completions written to `wc` (0..=n), or a negative
/// value on error.
///
/// # Safety
/// `cq` is a live CQ and `wc` points to `n` writable `ibv_wc`.
#[inline]
pub unsafe fn poll_cq(cq: *mut ibv_cq, n: c_int, wc: *mut ibv_wc) -> c_int {
    // SAFETY: the caller guarantees `cq` is live.
    let f = unsafe { (*(*cq).context).ops.poll_cq };
    match f {
        // SAFETY: forwarded caller contract.
        Some(f) => unsafe { f(cq, n, wc) },
        None => -1,
    }
}

/// `ibv_req_notify_cq`.
///
/// # Safety
/// `cq` is a live CQ.
#[inline]
pub unsafe fn req_notify_cq(cq: *mut ibv_cq, solicited_only: bool) -> c_int {
    // SAFETY: the caller guarantees `cq` is live.
    let f = unsafe { (*(*cq).context).ops.req_notify_cq };
    match f {
        // SAFETY: forwarded caller contract.
        Some(f) => unsafe { f(cq, c_int::from(solicited_only)) },
        None => libc::ENOSYS,
    }
}
