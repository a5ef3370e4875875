//! The CQ's QP table: registering a QP (control path), and the poller's lookup of the QP a
//! CQE names (the hot QP and the sides of it that complete here) and its purge check.

use super::{Entry, Mlx5Cq, NO_HOT_TAG};
use crate::mlx5::owners::Owners;
use crate::mlx5::shared::{before, QpShared};
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl<D: Owners> Mlx5Cq<D> {
    /// Register a QP (control path). A dead entry with the same qpn (a dropped QP whose
    /// number the device reused) hands its purge marks on.
    pub(crate) fn register(&mut self, qp: &Arc<QpShared>, send: bool, recv: bool) {
        self.hot_qpn = u32::MAX;
        self.hot_tag = NO_HOT_TAG;
        self.hot_rtag = NO_HOT_TAG;
        self.hot_sides = 0;
        let mut i = 0;
        while i < self.entries.len() {
            let e = &self.entries[i];
            if e.qpn == qp.qpn && !e.qp.alive.load(Ordering::Acquire) {
                for (old, new) in [
                    (&e.qp.purge_send, &qp.purge_send),
                    (&e.qp.purge_recv, &qp.purge_recv),
                ] {
                    let m = old.load(Ordering::Acquire);
                    if m != 0 {
                        new.store(m, Ordering::Release);
                    }
                }
                for (old, new) in [
                    (&e.qp.stale_send, &qp.stale_send),
                    (&e.qp.stale_recv, &qp.stale_recv),
                ] {
                    new.fetch_add(old.swap(0, Ordering::AcqRel), Ordering::AcqRel);
                }
                self.entries.swap_remove(i);
            } else if !e.qp.alive.load(Ordering::Acquire) && self.purge_done(e) {
                self.entries.swap_remove(i);
            } else {
                i += 1;
            }
        }
        if let Some(e) = self.entries.iter_mut().find(|e| Arc::ptr_eq(&e.qp, qp)) {
            e.send |= send;
            e.recv |= recv;
            return;
        }
        self.entries.push(Entry {
            qpn: qp.qpn,
            qp: qp.clone(),
            send,
            recv,
        });
        self.last = 0;
        self.hot_qpn = u32::MAX;
        self.hot_tag = NO_HOT_TAG;
        self.hot_rtag = NO_HOT_TAG;
        self.hot_sides = 0;
    }

    pub(super) fn purge_done(&self, e: &Entry) -> bool {
        [&e.qp.purge_send, &e.qp.purge_recv].iter().all(|m| {
            let m = m.load(Ordering::Acquire);
            m == 0 || !before(self.ci, m as u32)
        })
    }

    #[inline(always)]
    pub(super) fn lookup(&mut self, qpn: u32) -> Option<usize> {
        if let Some(e) = self.entries.get(self.last) {
            if e.qpn == qpn {
                self.set_hot(self.last);
                return Some(self.last);
            }
        }
        let i = self.entries.iter().position(|e| e.qpn == qpn)?;
        self.last = i;
        self.set_hot(i);
        Some(i)
    }

    /// Make entry `i` the hot QP, with the sides of it that complete here.
    #[inline(always)]
    fn set_hot(&mut self, i: usize) {
        let e = &self.entries[i];
        let qpn = e.qpn;
        if self.hot_qpn != qpn {
            self.hot_want.set(qpn.to_be());
        }
        self.hot_qpn = qpn;
        let tag = u64::from(qpn.to_be());
        self.hot_tag = if e.send { tag } else { NO_HOT_TAG };
        self.hot_rtag = if e.recv { tag } else { NO_HOT_TAG };
        self.hot_sides = if e.send { HOT_SEND } else { 0 } | if e.recv { HOT_RECV } else { 0 };
        self.hot_qp = Arc::as_ptr(&e.qp);
    }
}

/// [`Mlx5Cq`]'s `hot_sides`: the hot QP's send side completes into this CQ.
pub(super) const HOT_SEND: u8 = 1;
/// [`Mlx5Cq`]'s `hot_sides`: its receive side does.
pub(super) const HOT_RECV: u8 = 2;
