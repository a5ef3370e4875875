//! The engine's object tables (QPs, CQs): an object's number to its context, in ascending
//! order of numbers.
//!
//! Contract: the part of `BTreeMap`'s interface the engine uses (`get`, `get_mut`,
//! `contains_key`, indexing, `insert`, `remove`, `keys`, `values`, `values_mut`, `iter`,
//! `iter_mut`, and `range(from..)` as [`Table::range_from`]), with the same results and
//! the same ascending iteration order. A device has few objects and looks one up several
//! times a pass: here a lookup is a scan of a short vector of numbers (a binary search
//! past [`SCAN_MAX`]), where a B-tree walk costs a few dozen instructions. Inserting and
//! removing (the control path) move the entries behind the object.

/// Up to this many entries a lookup scans the numbers in order; beyond, it bisects them.
const SCAN_MAX: usize = 8;

/// Number to `V` (a QP's or CQ's context; see the module doc).
pub(crate) struct Table<V> {
    /// Ascending, one per entry of `ctxs`.
    nums: Vec<u32>,
    ctxs: Vec<V>,
}

impl<V> Default for Table<V> {
    fn default() -> Self {
        Table {
            nums: Vec::new(),
            ctxs: Vec::new(),
        }
    }
}

impl<V> Table<V> {
    #[inline]
    fn find(&self, num: u32) -> Option<usize> {
        if self.nums.len() <= SCAN_MAX {
            self.nums.iter().position(|&k| k == num)
        } else {
            self.nums.binary_search(&num).ok()
        }
    }

    /// The context of `num`.
    #[inline]
    pub(crate) fn get(&self, num: &u32) -> Option<&V> {
        self.find(*num).map(|i| &self.ctxs[i])
    }

    /// The context of `num`, to change.
    #[inline]
    pub(crate) fn get_mut(&mut self, num: &u32) -> Option<&mut V> {
        self.find(*num).map(|i| &mut self.ctxs[i])
    }

    /// Put `ctx` under `num`; the context it replaces, if any.
    pub(crate) fn insert(&mut self, num: u32, ctx: V) -> Option<V> {
        match self.nums.binary_search(&num) {
            Ok(i) => Some(std::mem::replace(&mut self.ctxs[i], ctx)),
            Err(i) => {
                self.nums.insert(i, num);
                self.ctxs.insert(i, ctx);
                None
            }
        }
    }

    /// Take `num`'s context out.
    pub(crate) fn remove(&mut self, num: &u32) -> Option<V> {
        let i = self.nums.binary_search(num).ok()?;
        self.nums.remove(i);
        Some(self.ctxs.remove(i))
    }

    /// The numbers, ascending.
    pub(crate) fn keys(&self) -> std::slice::Iter<'_, u32> {
        self.nums.iter()
    }

    /// True when `num` has an entry.
    #[inline]
    pub(crate) fn contains_key(&self, num: &u32) -> bool {
        self.find(*num).is_some()
    }

    /// The entries, ascending.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&u32, &V)> {
        self.nums.iter().zip(&self.ctxs)
    }

    /// The entries, ascending, to change.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (&u32, &mut V)> {
        self.nums.iter().zip(self.ctxs.iter_mut())
    }

    /// The contexts, in number order.
    pub(crate) fn values(&self) -> std::slice::Iter<'_, V> {
        self.ctxs.iter()
    }

    /// The entries from QPN `from` on, ascending (`BTreeMap::range(from..)`).
    pub(crate) fn range_from(&self, from: u32) -> impl Iterator<Item = (&u32, &V)> {
        let i = self.nums.partition_point(|&k| k < from);
        self.nums[i..].iter().zip(&self.ctxs[i..])
    }

    /// The contexts, in number order, to change.
    pub(crate) fn values_mut(&mut self) -> std::slice::IterMut<'_, V> {
        self.ctxs.iter_mut()
    }
}

impl<V> std::ops::Index<&u32> for Table<V> {
    type Output = V;

    /// The context of `num`; panics when there is none (an engine bug, as `BTreeMap`'s
    /// indexing).
    fn index(&self, num: &u32) -> &V {
        self.get(num)
            .expect("no object with this number in the engine's table")
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
        let mut m: Table<u32> = Table::default();
        let mut b: BTreeMap<u32, u32> = BTreeMap::new();
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        let mut most = 0;
        for step in 0..5000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let num = (x % 40) as u32 * 3;
            if x % 3 == 0 {
                assert_eq!(m.remove(&num), b.remove(&num), "step {step}");
            } else {
                assert_eq!(m.insert(num, step), b.insert(num, step), "step {step}");
            }
            most = most.max(b.len());
            for k in [num, num + 1, 0, 117] {
                assert_eq!(m.get(&k), b.get(&k));
            }
            assert!(m.keys().eq(b.keys()));
            assert!(m.values().eq(b.values()));
            assert!(m.iter().eq(b.iter()));
            let from = (x >> 8) as u32 % 130;
            assert!(m.range_from(from).eq(b.range(from..)));
        }
        assert!(most > SCAN_MAX, "the bisecting lookups ran too");
        for v in m.values_mut() {
            *v = 7;
        }
        assert!(m.values().all(|&v| v == 7));
        for (k, v) in m.iter_mut() {
            *v = *k;
        }
        assert!(m.keys().all(|k| m.contains_key(k) && m[k] == *k));
        assert!(!m.contains_key(&1));
        let k = *b.keys().next().expect("entries left");
        assert_eq!(m[&k], k);
        if let Some(v) = m.get_mut(&k) {
            *v = 8;
        }
        assert_eq!(m.get(&k), Some(&8));
    }
}
