//! Per-QP accounting of send requests in flight, and receives kept posted.

use crate::{Completion, PostListError, QueuePair, RecvQueue, RecvWr, SendQueue, SendWr, Sge};

/// How many send requests one QP has in flight, kept from its completions.
///
/// A request is in flight from its post until a completion retires it: its own, or a later
/// signaled one that covers it ([`Completion::covered`]). So with selective signaling the
/// window counts `1 + covered` per send completion, which is exact whatever the device
/// signals. [`SendWindow::room`] is how many more may be posted before the send queue is full
/// (in requests: `max_send_wr`, the QP's granted depth).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendWindow {
    qpn: u32,
    depth: u32,
    in_flight: u32,
}

impl SendWindow {
    /// The window of `qp`: its QPN and granted send depth, nothing in flight.
    pub fn new<Q: QueuePair>(qp: &Q) -> SendWindow {
        SendWindow::with_depth(qp.qpn(), qp.caps().max_send_wr)
    }
    /// A window of `depth` requests for the QP numbered `qpn`.
    pub const fn with_depth(qpn: u32, depth: u32) -> SendWindow {
        SendWindow {
            qpn,
            depth,
            in_flight: 0,
        }
    }
    /// The QP number completions are matched on.
    pub const fn qpn(&self) -> u32 {
        self.qpn
    }
    /// The send depth.
    pub const fn depth(&self) -> u32 {
        self.depth
    }
    /// Requests posted and not yet retired.
    pub const fn in_flight(&self) -> u32 {
        self.in_flight
    }
    /// How many more requests may be posted now.
    #[inline]
    pub const fn room(&self) -> u32 {
        self.depth.saturating_sub(self.in_flight)
    }
    /// Nothing in flight any more: after every request ended (a drain after a fault,
    /// [`crate::recover`]) or a reset of the QP, before it carries requests again.
    pub fn reset(&mut self) {
        self.in_flight = 0;
    }
    /// Counts `n` requests posted (by the caller's own `post` / `post_list`).
    #[inline]
    pub fn posted(&mut self, n: u32) {
        self.in_flight = self.in_flight.saturating_add(n);
    }
    /// Posts `wrs` with one doorbell ([`SendQueue::post_list`]) and counts the requests that
    /// went: all of them, or those before the refused one.
    #[inline]
    pub fn post_list<'s, 'a, S: SendQueue>(
        &mut self,
        sq: &mut S,
        wrs: &'s [SendWr<'a, S::Ah>],
    ) -> Result<(), PostListError<'s, SendWr<'a, S::Ah>>> {
        let r = sq.post_list(wrs);
        self.posted(match &r {
            Ok(()) => wrs.len() as u32,
            Err(e) => e.index as u32,
        });
        r
    }
    /// Retires what `c` reports if it is a send completion of this QP, whatever its status:
    /// `1 + covered` requests (see [`Completion::covered`]: an error or flush ends the one
    /// it names and the ones it covers); false, and nothing changes, for another QP's
    /// completion or a receive's (successful or not: every provider reports a receive's
    /// completion with a receive opcode, errors included).
    #[inline]
    pub fn retire(&mut self, c: &Completion) -> bool {
        if c.qp_num != self.qpn || c.opcode.is_recv() {
            return false;
        }
        self.in_flight = self.in_flight.saturating_sub(1 + c.covered);
        true
    }
}

/// The send windows of several QPs that share a CQ (a fan-out: one QP per peer), found by
/// the completion's QP number. Built once (it allocates then); [`SendWindows::retire`] is a
/// binary search and allocates nothing.
#[derive(Clone, Debug, Default)]
pub struct SendWindows {
    windows: Vec<SendWindow>,
    /// (qpn, index into `windows`), sorted by qpn.
    by_qpn: Vec<(u32, usize)>,
}

impl SendWindows {
    /// No windows yet.
    pub fn new() -> SendWindows {
        SendWindows::default()
    }
    /// Adds the window of `qp`; returns its index (the order of `add` calls).
    pub fn add<Q: QueuePair>(&mut self, qp: &Q) -> usize {
        self.push(SendWindow::new(qp))
    }
    /// Adds `w`; returns its index. A second window for the same QPN replaces the first's
    /// place in the lookup.
    pub fn push(&mut self, w: SendWindow) -> usize {
        let i = self.windows.len();
        self.windows.push(w);
        match self.by_qpn.binary_search_by_key(&w.qpn(), |e| e.0) {
            Ok(at) => self.by_qpn[at].1 = i,
            Err(at) => self.by_qpn.insert(at, (w.qpn(), i)),
        }
        i
    }
    /// How many windows.
    pub fn len(&self) -> usize {
        self.windows.len()
    }
    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.windows.is_empty()
    }
    /// The index of the window of `qpn`.
    #[inline]
    pub fn index_of(&self, qpn: u32) -> Option<usize> {
        self.by_qpn
            .binary_search_by_key(&qpn, |e| e.0)
            .ok()
            .map(|at| self.by_qpn[at].1)
    }
    /// Window `i`.
    pub fn get(&self, i: usize) -> Option<&SendWindow> {
        self.windows.get(i)
    }
    /// Window `i`, to count posts on it.
    pub fn get_mut(&mut self, i: usize) -> Option<&mut SendWindow> {
        self.windows.get_mut(i)
    }
    /// Retires `c` in the window of its QP; returns that window's index, or `None` for a
    /// receive or a QP not in the set.
    #[inline]
    pub fn retire(&mut self, c: &Completion) -> Option<usize> {
        let i = self.index_of(c.qp_num)?;
        self.windows[i].retire(c).then_some(i)
    }
    /// Requests in flight over all windows.
    pub fn in_flight(&self) -> u64 {
        self.windows.iter().map(|w| w.in_flight() as u64).sum()
    }
    /// The smallest room of any window (how many a broadcast to all may post now).
    pub fn min_room(&self) -> u32 {
        self.windows.iter().map(|w| w.room()).min().unwrap_or(0)
    }
}

/// Keeps `slots` receives posted on one receive queue (or SRQ): each consumed receive is
/// posted again, all of those of one poll with one doorbell.
///
/// Receive `i` (`0 <= i < slots`) has wr_id `id_base + i` (`id_base` 0 unless
/// [`RecvReplenisher::with_id_base`] set it: a base above the send ids tells a flushed receive
/// from a flushed send on a CQ both complete into, where only the wr_id of an error
/// completion is meaningful) and, with [`RecvReplenisher::with_buffers`],
/// scatters into `first.length` bytes at `first.addr + i * stride`; with
/// [`RecvReplenisher::new`] it has no SGE, which is all a WRITE WITH IMMEDIATE needs. The
/// loop: [`RecvReplenisher::fill`] once, then per poll [`RecvReplenisher::consumed`] on each
/// completion and [`RecvReplenisher::replenish`] once.
#[derive(Clone, Debug)]
pub struct RecvReplenisher {
    qpn: Option<u32>,
    id_base: u64,
    first: Option<Sge>,
    stride: u64,
    slots: u32,
    /// Slots to (re)post, at most `slots` (the capacity reserved at construction).
    to_post: Vec<u32>,
    /// Receives that ended in error (flushed: the QP is in ERR), not posted again until
    /// [`RecvReplenisher::reset`].
    failed: u32,
}

impl RecvReplenisher {
    /// `slots` receives without SGEs (for WRITE WITH IMMEDIATE).
    pub fn new(slots: u32) -> RecvReplenisher {
        RecvReplenisher {
            qpn: None,
            id_base: 0,
            first: None,
            stride: 0,
            slots,
            to_post: (0..slots).rev().collect(),
            failed: 0,
        }
    }
    /// `slots` receives, slot `i` into `first.length` bytes at `first.addr + i * stride`
    /// (same lkey). The caller makes sure the slots lie in the registered memory of `first`,
    /// e.g. with `RegisteredBuf::sge(0, len)` over a buffer of `slots * stride` bytes.
    pub fn with_buffers(slots: u32, first: Sge, stride: u32) -> RecvReplenisher {
        RecvReplenisher {
            first: Some(first),
            stride: stride as u64,
            ..RecvReplenisher::new(slots)
        }
    }
    /// Only completions of the QP numbered `qpn` count as consumed (when the CQ is shared
    /// with other QPs' receives).
    pub fn for_qp(mut self, qpn: u32) -> RecvReplenisher {
        self.qpn = Some(qpn);
        self
    }
    /// Receive wr_ids are `id_base + slot` (see the type's doc). The base is the caller's
    /// choice (e.g. `1 << 63`, with send ids below it); `id_base + slots` must not overflow
    /// (it saturates, and the slots past `u64::MAX` are then never recognised).
    pub fn with_id_base(mut self, id_base: u64) -> RecvReplenisher {
        self.id_base = id_base;
        self
    }
    /// Whether `wr_id` is one of this replenisher's receives (whatever the completion's
    /// status: this is how a flushed receive is recognised).
    #[inline]
    pub fn owns(&self, wr_id: u64) -> bool {
        wr_id >= self.id_base && wr_id - self.id_base < self.slots as u64
    }
    /// Every receive gone (its QP was reset, or every receive ended in a flush that a drain
    /// polled): the next [`RecvReplenisher::fill`] posts all `slots` again. Allocates nothing.
    pub fn reset(&mut self) {
        self.failed = 0;
        self.to_post.clear();
        self.to_post.extend((0..self.slots).rev());
    }
    /// How many receives are kept posted.
    pub const fn slots(&self) -> u32 {
        self.slots
    }
    /// Receives posted now (slots minus those consumed and not yet replenished, and minus
    /// those that ended in error).
    pub fn posted(&self) -> u32 {
        self.slots - self.to_post.len() as u32 - self.failed
    }
    /// The SGE of slot `i` (`None` for receives without buffers).
    #[inline]
    pub fn sge(&self, i: u32) -> Option<Sge> {
        self.first.map(|f| Sge {
            addr: f.addr + i as u64 * self.stride,
            ..f
        })
    }
    /// Posts every slot not posted yet (all of them the first time) with one doorbell.
    pub fn fill<R: RecvQueue>(&mut self, rq: &mut R) -> crate::Result<u32> {
        self.replenish(rq)
    }
    /// Notes a receive consumed if `c` is a successful receive completion of this
    /// replenisher's slots (and QP, see [`RecvReplenisher::for_qp`]); false otherwise. A
    /// failed completion of one of its receives (recognised by its wr_id alone) is never
    /// re-posted, its QP being in ERR: it is counted as no longer posted (false is returned)
    /// until [`RecvReplenisher::reset`].
    #[inline]
    pub fn consumed(&mut self, c: &Completion) -> bool {
        if !c.is_ok() {
            if self.owns(c.wr_id) && self.qpn.is_none_or(|q| q == c.qp_num) && self.posted() > 0 {
                self.failed += 1;
            }
            return false;
        }
        let mine = c.is_ok()
            && c.opcode.is_recv()
            && self.owns(c.wr_id)
            && self.qpn.is_none_or(|q| q == c.qp_num)
            && self.to_post.len() < self.slots as usize;
        if mine {
            self.to_post.push((c.wr_id - self.id_base) as u32);
        }
        mine
    }
    /// Posts the consumed receives again and rings once; returns how many were posted. On a
    /// refusal of a post the ones before it are rung, the rest stay pending for the next
    /// call, and the error says why; a doorbell the device refuses (verbs) takes receives
    /// back, and those stay pending too (nothing is lost).
    pub fn replenish<R: RecvQueue>(&mut self, rq: &mut R) -> crate::Result<u32> {
        // Slots are posted from the end of `to_post` and dropped from it only once rung.
        let total = self.to_post.len();
        let mut n = 0;
        let mut refused = None;
        for i in (0..total).rev() {
            let slot = self.to_post[i];
            let sge = self.sge(slot);
            let sges = match &sge {
                Some(s) => std::slice::from_ref(s),
                None => &[],
            };
            if let Err(r) = rq.post_recv(RecvWr::new(self.id_base + slot as u64, sges)) {
                refused = Some(r.error);
                break;
            }
            n += 1;
        }
        if n == 0 {
            return match refused {
                Some(e) => Err(e.into()),
                None => Ok(0),
            };
        }
        match rq.try_ring() {
            Ok(()) => {
                self.to_post.truncate(total - n);
                match refused {
                    Some(e) => Err(e.into()),
                    None => Ok(n as u32),
                }
            }
            Err(e) => {
                // The newest `count` staged (the last posted here) were taken back.
                let back = (e.count as usize).min(n);
                self.to_post.truncate(total - (n - back));
                Err(e.into())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{WcOpcode, WcStatus};

    fn recv(wr_id: u64, status: WcStatus) -> Completion {
        Completion {
            wr_id,
            status,
            opcode: WcOpcode::Recv,
            qp_num: 7,
            ..Completion::EMPTY
        }
    }

    #[test]
    fn tagged_receives_are_recognised_flushed_and_reset() {
        let base = 1 << 63;
        let mut r = RecvReplenisher::new(3).with_id_base(base).for_qp(7);
        // Posted as if by `fill`.
        r.to_post.clear();
        assert_eq!(r.posted(), 3);
        assert!(r.owns(base) && r.owns(base + 2));
        assert!(!r.owns(2) && !r.owns(base + 3) && !r.owns(u64::MAX));
        assert!(!r.consumed(&recv(1, WcStatus::Success)), "an untagged id");
        assert!(r.consumed(&recv(base + 1, WcStatus::Success)));
        assert_eq!((r.posted(), r.to_post.as_slice()), (2, &[1][..]));
        // A flush, whatever its opcode says: gone, not to be posted again.
        let mut flushed = recv(base + 2, WcStatus::WrFlushErr);
        flushed.opcode = WcOpcode::Send;
        assert!(!r.consumed(&flushed));
        assert_eq!((r.posted(), r.to_post.len()), (1, 1));
        // Another QP's flush is not ours.
        assert!(!r.consumed(&Completion {
            qp_num: 8,
            ..recv(base, WcStatus::WrFlushErr)
        }));
        assert_eq!(r.posted(), 1);
        r.reset();
        assert_eq!((r.posted(), r.to_post.as_slice()), (0, &[2, 1, 0][..]));
    }

    #[test]
    fn a_window_reset_empties_it() {
        let mut w = SendWindow::with_depth(5, 8);
        w.posted(6);
        assert_eq!(w.room(), 2);
        w.reset();
        assert_eq!((w.in_flight(), w.room()), (0, 8));
    }
}
