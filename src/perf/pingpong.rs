//! The two-sided latency tests (`write_lat`, `send_lat`): one [`End`] per side, driven by one
//! thread alternating between them or by one thread each.
//!
//! An end is generic over the queue types only (not the provider), so the server's end can
//! move to its own thread without the provider. Memory written by the device is read with
//! volatile loads through plain addresses.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::outliers::Away;
use super::params::Inject;
use crate::providers::helpers::Stall;
use crate::providers::{
    Completion, CompletionQueue, QueuePair, RecvQueue, RecvWr, SendQueue, SendWr, Sge, UdDest,
};
use crate::{Error, Result};

/// Signaled WRITEs an end may have outstanding before it waits for them.
pub(super) const MAX_WRITES_OUTSTANDING: u32 = 32;
/// In send_lat, every this many sends is signaled (and the last one).
pub(super) const SEND_SIGNAL_EVERY: u32 = 64;
/// wr_id of every receive.
pub(super) const RECV_WRID: u64 = u64::MAX;
/// Give up on a wait that makes no progress for this long.
pub(super) const STALL: Duration = Duration::from_secs(10);

fn perr(detail: impl Into<String>) -> Error {
    Error::Failed {
        context: "perf",
        detail: detail.into(),
    }
}

/// Spin-wait bookkeeping: a [`Stall`] (which reads the clock only every
/// [`Stall::CHECK_EVERY`] idle spins, so no latency sample pays for a clock read) and the
/// run's `stop` flag, raised by whichever thread fails so that its peer gives up at once
/// instead of after [`STALL`]; the flag is looked at, and the CPU yielded, when the clock is.
///
/// It also keeps the longest stretch between two consecutive spins of each sample
/// ([`Away`]), in ticks of the loops' clock: a stretch far longer than a spin is the
/// polling thread losing its CPU (an interrupt, another task), or work done between the waits
/// (a post, the sim's engine in deterministic mode). One tick-counter read a spin, no system
/// call.
pub(super) struct Waiter<'s> {
    stall: Stall,
    stop: &'s AtomicBool,
    /// The longest stretch without a spin, per sample.
    away: Away,
}

impl<'s> Waiter<'s> {
    pub(super) fn new(stop: &'s AtomicBool) -> Waiter<'s> {
        Waiter {
            stall: Stall::new(STALL),
            stop,
            away: Away::new(),
        }
    }

    /// One spin of a wait for `what`.
    #[inline]
    pub(super) fn tick(&mut self, what: &str) -> Result<()> {
        self.away.spin();
        if self.stall.idle("perf", || what.to_string())? {
            if self.stop.load(Ordering::Relaxed) {
                return Err(perr(format!(
                    "stopped while waiting for {what}: the other side failed"
                )));
            }
            std::thread::yield_now();
        }
        Ok(())
    }

    /// Start a new wait.
    #[inline]
    pub(super) fn reset(&mut self) {
        self.stall.progressed();
    }
}

#[inline]
pub(super) fn read_byte(at: usize) -> u8 {
    // SAFETY: `at` lies inside a mapping the run keeps alive until every end is gone; the
    // device writes it concurrently, hence the volatile read (a plain load could be hoisted
    // out of the spin loop).
    unsafe { std::ptr::read_volatile(at as *const u8) }
}

#[inline]
pub(super) fn write_byte(at: usize, v: u8) {
    // SAFETY: as in `read_byte`; the byte lies in a mapping the run keeps alive, and no
    // reference to it exists (all access is through these two functions).
    unsafe { std::ptr::write_volatile(at as *mut u8, v) }
}

/// Which test an end plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// RDMA WRITE into the peer's incoming half; the peer watches its last byte.
    Write {
        /// Peer's incoming half.
        raddr: u64,
        /// Peer's rkey.
        rkey: u32,
    },
    /// SEND; the peer's receive completion is the arrival.
    Send,
}

/// One side of a ping-pong.
pub(super) struct End<'a, Q: QueuePair, C: CompletionQueue> {
    pub(super) qp: &'a mut Q,
    pub(super) cq: &'a mut C,
    pub(super) kind: Kind,
    /// The outgoing message (first half of the buffer).
    pub(super) src: [Sge; 1],
    /// Where receives land (second half), `size` (+ GRH on UD) bytes.
    pub(super) recv: [Sge; 1],
    /// Inline copy of the outgoing message (empty = not inline).
    pub(super) inline: Vec<u8>,
    /// Address of the last byte of the outgoing message.
    pub(super) out_last: usize,
    /// Address of the last byte of the incoming message.
    pub(super) in_last: usize,
    pub(super) dest: Option<UdDest<'a, <Q::Sq as SendQueue>::Ah>>,
    /// Messages per run (to signal the last send).
    pub(super) iters: u32,
    /// Signaled sends not yet completed.
    pub(super) outstanding: u32,
    /// Receives posted and not yet completed.
    pub(super) routs: u32,
    /// Receives polled while reaping sends, not yet consumed by [`End::wait`].
    pub(super) early: u32,
    /// Receive queue depth to keep.
    pub(super) rx_depth: u32,
    /// Device time of each send completion, by wr_id (empty: the CQ is polled without
    /// timestamps).
    pub(super) cqe_ns: &'a mut [u64],
}

impl<Q: QueuePair, C: CompletionQueue> End<'_, Q, C> {
    /// Post message `i` (value `v` in its last byte).
    #[inline]
    pub(super) fn send(
        &mut self,
        i: u32,
        w: &mut Waiter<'_>,
        progress: &mut dyn FnMut(),
    ) -> Result<()> {
        let v = (i + 1) as u8;
        write_byte(self.out_last, v);
        let (mut wr, signaled) = match self.kind {
            Kind::Write { raddr, rkey } => {
                (SendWr::write(u64::from(i), &self.src, raddr, rkey), true)
            }
            Kind::Send => (
                SendWr::send(u64::from(i), &self.src),
                (i + 1) % SEND_SIGNAL_EVERY == 0 || i + 1 == self.iters,
            ),
        };
        if signaled {
            wr = wr.signaled();
        }
        if !self.inline.is_empty() {
            let last = self.inline.len() - 1;
            self.inline[last] = v;
            wr = wr.inline(&self.inline);
        }
        if let Some(d) = self.dest {
            wr = wr.to(d);
        }
        if let Err(r) = self.qp.sq().post_and_ring(wr) {
            return Err(perr(format!("post {}: {}", wr.op.name(), r.error)));
        }
        if signaled {
            self.outstanding += 1;
        }
        // Reap what has completed; wait only when too many are outstanding.
        self.reap(MAX_WRITES_OUTSTANDING, None, w, progress)
            .map(|_| ())
    }

    /// Wait for message `i` from the peer.
    #[inline]
    pub(super) fn wait(
        &mut self,
        i: u32,
        w: &mut Waiter<'_>,
        progress: &mut dyn FnMut(),
    ) -> Result<()> {
        match self.kind {
            Kind::Write { .. } => {
                let v = (i + 1) as u8;
                w.reset();
                while read_byte(self.in_last) != v {
                    progress();
                    w.tick("the peer's WRITE")?;
                }
                // Reap without waiting.
                self.reap(u32::MAX, None, w, progress).map(|_| ())
            }
            Kind::Send => {
                let mut got = false;
                if self.early > 0 {
                    self.early -= 1;
                    got = true;
                } else {
                    self.reap(u32::MAX, Some(&mut got), w, progress)?;
                }
                if !got {
                    return Err(perr("internal: receive wait ended without a receive"));
                }
                self.routs -= 1;
                if self.routs < self.rx_depth / 2 {
                    self.refill()?;
                }
                Ok(())
            }
        }
    }

    /// Poll the CQ: count send completions off `outstanding`; with `recv`, wait until one receive
    /// has completed (and note it), else until at most `keep` sends are outstanding.
    fn reap(
        &mut self,
        keep: u32,
        mut recv: Option<&mut bool>,
        w: &mut Waiter<'_>,
        progress: &mut dyn FnMut(),
    ) -> Result<()> {
        let mut wc = [Completion::EMPTY];
        let mut ns = [0u64];
        let ts = !self.cqe_ns.is_empty();
        w.reset();
        loop {
            while if ts {
                self.cq.poll_ts(&mut wc, &mut ns) == 1
            } else {
                self.cq.poll(&mut wc) == 1
            } {
                let c = wc[0];
                if ts && c.wr_id != RECV_WRID {
                    if let Some(t) = self.cqe_ns.get_mut(c.wr_id as usize) {
                        *t = ns[0];
                    }
                }
                if !c.is_ok() {
                    return Err(perr(format!(
                        "completion wr_id {:#x} failed: {} (vendor_err {:#x})",
                        c.wr_id, c.status, c.vendor_err
                    )));
                }
                if c.wr_id == RECV_WRID {
                    match recv.as_deref_mut() {
                        Some(got) if !*got => *got = true,
                        // The peer's next message, polled while reaping sends.
                        _ => self.early += 1,
                    }
                } else {
                    self.outstanding = self
                        .outstanding
                        .checked_sub(1)
                        .ok_or_else(|| perr(format!("unexpected send completion {}", c.wr_id)))?;
                }
                if recv.as_deref().is_some_and(|g| *g) {
                    return Ok(());
                }
            }
            let done = match recv.as_deref() {
                Some(got) => *got,
                None => self.outstanding <= keep,
            };
            if done {
                return Ok(());
            }
            progress();
            w.tick(if recv.is_some() {
                "a receive"
            } else {
                "send completions"
            })?;
        }
    }

    /// Wait for every signaled send.
    pub(super) fn finish(&mut self, w: &mut Waiter<'_>, progress: &mut dyn FnMut()) -> Result<()> {
        self.reap(0, None, w, progress)
    }

    /// Post receives until [`End::rx_depth`] are outstanding (one ring).
    pub(super) fn refill(&mut self) -> Result<()> {
        let rq = self.qp.rq();
        let mut added = 0;
        let mut n = self.routs;
        while n < self.rx_depth {
            if let Err(r) = rq.post_recv(RecvWr {
                wr_id: RECV_WRID,
                sges: &self.recv,
            }) {
                rq.ring();
                self.routs = n;
                return Err(perr(format!("post_recv: {}", r.error)));
            }
            n += 1;
            added += 1;
        }
        self.routs = n;
        if added > 0 {
            if let Err(e) = rq.try_ring() {
                self.routs -= e.count.min(self.routs);
                return Err(perr(format!("post_recv: {e}")));
            }
        }
        Ok(())
    }
}

/// At the stamp of iteration `i`: the longest stretch without a spin of sample `i - 1`
/// (which ends here) into `away[i - 1]` (ticks), when `away` has room for it.
#[inline]
pub(super) fn sample_mark(away: &mut [u64], i: usize, w: &mut Waiter<'_>) {
    let a = w.away.mark();
    if let Some(slot) = i.checked_sub(1).and_then(|j| away.get_mut(j)) {
        *slot = a;
    }
}

/// [`Params::inject`](super::Params::inject)'s delay, when iteration `i` is one of its.
#[inline]
pub(super) fn injected(
    inject: Option<Inject>,
    i: u32,
    w: &mut Waiter<'_>,
    progress: &mut dyn FnMut(),
) {
    let Some(inj) = inject.filter(|j| j.hits(i)) else {
        return;
    };
    if inj.off_cpu {
        std::thread::sleep(inj.delay);
    } else {
        // Polled as a late answer would be, without the waits' yield (a test's delay
        // should not hand the CPU away itself).
        let t0 = Instant::now();
        while t0.elapsed() < inj.delay {
            progress();
            w.away.spin();
        }
    }
}

/// The client's loop: stamp, send, wait for the answer.
pub(super) fn client<Q: QueuePair, C: CompletionQueue>(
    end: &mut End<'_, Q, C>,
    tposted: &mut [u64],
    away: &mut [u64],
    stamp: &dyn Fn() -> u64,
    inject: Option<Inject>,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(),
) -> Result<()> {
    let mut w = Waiter::new(stop);
    for (i, t) in tposted.iter_mut().enumerate() {
        *t = stamp();
        sample_mark(away, i, &mut w);
        injected(inject, i as u32, &mut w, progress);
        end.send(i as u32, &mut w, progress)?;
        end.wait(i as u32, &mut w, progress)?;
    }
    end.finish(&mut w, progress)
}

/// The server's loop: wait, answer.
pub(super) fn server<Q: QueuePair, C: CompletionQueue>(
    end: &mut End<'_, Q, C>,
    iters: u32,
    stop: &AtomicBool,
) -> Result<()> {
    let mut w = Waiter::new(stop);
    let progress = &mut || {};
    for i in 0..iters {
        end.wait(i, &mut w, progress)?;
        end.send(i, &mut w, progress)?;
    }
    end.finish(&mut w, progress)
}

/// Both loops in this thread: client send, server wait and answer, client wait.
#[allow(clippy::too_many_arguments)]
pub(super) fn alternate<Q: QueuePair, C: CompletionQueue>(
    c: &mut End<'_, Q, C>,
    s: &mut End<'_, Q, C>,
    tposted: &mut [u64],
    away: &mut [u64],
    stamp: &dyn Fn() -> u64,
    inject: Option<Inject>,
    progress: &mut dyn FnMut(),
) -> Result<()> {
    let stop = AtomicBool::new(false);
    let mut w = Waiter::new(&stop);
    for (k, t) in tposted.iter_mut().enumerate() {
        let i = k as u32;
        *t = stamp();
        sample_mark(away, k, &mut w);
        injected(inject, i, &mut w, progress);
        c.send(i, &mut w, progress)?;
        s.wait(i, &mut w, progress)?;
        s.send(i, &mut w, progress)?;
        c.wait(i, &mut w, progress)?;
    }
    c.finish(&mut w, progress)?;
    s.finish(&mut w, progress)
}
