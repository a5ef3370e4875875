//! The engine's QP table: QPN to QP context, in ascending QPN order.
//!
//! Contract: the part of `BTreeMap`'s interface the engine uses (`get`, `get_mut`,
//! indexing, `insert`, `remove`, `keys`, `values`, `values_mut`, and `range(from..)` as
//! [`QpMap::range_from`]), with the same results and the same ascending iteration order. A device has few QPs and looks one up several times a pass:
//! here a lookup is a scan of a short vector of QPNs (a binary search past
//! [`SCAN_MAX`]), where a B-tree walk costs a few dozen instructions. Inserting and
//! removing (the control path) move the entries behind the QP.

/// Up to this many QPs a lookup scans the QPNs in order; beyond, it bisects them.
const SCAN_MAX: usize = 8;

/// QPN to `V` (the engine's QP context; see the module doc).
pub(crate) struct QpMap<V> {
    /// Ascending, one per entry of `ctxs`.
    qpns: Vec<u32>,
    ctxs: Vec<V>,
}

impl<V> Default for QpMap<V> {
    fn default() -> Self {
        QpMap {
            qpns: Vec::new(),
            ctxs: Vec::new(),
        }
    }
}

impl<V> QpMap<V> {
    #[inline]
    fn find(&self, qpn: u32) -> Option<usize> {
        if self.qpns.len() <= SCAN_MAX {
            self.qpns.iter().position(|&k| k == qpn)
        } else {
            self.qpns.binary_search(&qpn).ok()
        }
    }

    /// The context of `qpn`.
    #[inline]
    pub(crate) fn get(&self, qpn: &u32) -> Option<&V> {
        self.find(*qpn).map(|i| &self.ctxs[i])
    }

    /// The context of `qpn`, to change.
    #[inline]
    pub(crate) fn get_mut(&mut self, qpn: &u32) -> Option<&mut V> {
        self.find(*qpn).map(|i| &mut self.ctxs[i])
    }

    /// Put `ctx` under `qpn`; the context it replaces, if any.
    pub(crate) fn insert(&mut self, qpn: u32, ctx: V) -> Option<V> {
        match self.qpns.binary_search(&qpn) {
            Ok(i) => Some(std::mem::replace(&mut self.ctxs[i], ctx)),
            Err(i) => {
                self.qpns.insert(i, qpn);
                self.ctxs.insert(i, ctx);
                None
            }
        }
    }

    /// Take `qpn`'s context out.
    pub(crate) fn remove(&mut self, qpn: &u32) -> Option<V> {
        let i = self.qpns.binary_search(qpn).ok()?;
        self.qpns.remove(i);
        Some(self.ctxs.remove(i))
    }

    /// The QPNs, ascending.
    pub(crate) fn keys(&self) -> std::slice::Iter<'_, u32> {
        self.qpns.iter()
    }

    /// The contexts, in QPN order.
    pub(crate) fn values(&self) -> std::slice::Iter<'_, V> {
        self.ctxs.iter()
    }

    /// The entries from QPN `from` on, ascending (`BTreeMap::range(from..)`).
    pub(crate) fn range_from(&self, from: u32) -> impl Iterator<Item = (&u32, &V)> {
        let i = self.qpns.partition_point(|&k| k < from);
        self.qpns[i..].iter().zip(&self.ctxs[i..])
    }

    /// The contexts, in QPN order, to change.
    pub(crate) fn values_mut(&mut self) -> std::slice::IterMut<'_, V> {
        self.ctxs.iter_mut()
    }
}

impl<V> std::ops::Index<&u32> for QpMap<V> {
    type Output = V;

    /// The context of `qpn`; panics when there is none (an engine bug, as `BTreeMap`'s
    /// indexing).
    fn index(&self, qpn: &u32) -> &V {
        self.get(qpn)
            .expect("no QP with this QPN in the engine's table")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Random inserts, replacements and removals: every answer and every iteration as a
    /// `BTreeMap`'s, past the scan limit and back.
    #[test]
    fn the_map_answers_as_a_btree_map() {
        let mut m: QpMap<u32> = QpMap::default();
        let mut b: BTreeMap<u32, u32> = BTreeMap::new();
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        let mut most = 0;
        for step in 0..5000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let qpn = (x % 40) as u32 * 3;
            if x % 3 == 0 {
                assert_eq!(m.remove(&qpn), b.remove(&qpn), "step {step}");
            } else {
                assert_eq!(m.insert(qpn, step), b.insert(qpn, step), "step {step}");
            }
            most = most.max(b.len());
            for k in [qpn, qpn + 1, 0, 117] {
                assert_eq!(m.get(&k), b.get(&k));
            }
            assert!(m.keys().eq(b.keys()));
            assert!(m.values().eq(b.values()));
            let from = (x >> 8) as u32 % 130;
            assert!(m.range_from(from).eq(b.range(from..)));
        }
        assert!(most > SCAN_MAX, "the bisecting lookups ran too");
        for v in m.values_mut() {
            *v = 7;
        }
        assert!(m.values().all(|&v| v == 7));
        let k = *b.keys().next().expect("entries left");
        assert_eq!(m[&k], 7);
        if let Some(v) = m.get_mut(&k) {
            *v = 8;
        }
        assert_eq!(m.get(&k), Some(&8));
    }
}
