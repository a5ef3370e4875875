//! The CQ's QP table on the control path: registering a QP (the poller's lookup and purge
//! checks stay beside the poll in `cq.rs`).

use super::*;

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
}
