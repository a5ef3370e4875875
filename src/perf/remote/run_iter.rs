//! The measured loops of a two-process run, one method of [`Queues`] per test, as perftest
//! 4.5's `run_iter_lat_write`, `run_iter_lat`, `run_iter_lat_send`, `run_iter_bw` and
//! `run_iter_bw_server` run them; what each side does is the parent module's doc.

use std::sync::atomic::AtomicBool;

use super::super::pingpong::{read_byte, write_byte, Waiter};
use super::super::wire::Side;
use super::super::{perr, Clock, Params, Test, RX_DEPTH, TX_DEPTH};
use super::{RECV_WRID, SEND_LAT_CQ_MOD};
use crate::providers::{
    Completion, CompletionQueue, Provider, QueuePair, RecvQueue, RecvWr, SendOp, SendQueue, SendWr,
};
use crate::Result;

/// This side's queues and buffer halves (`out`: outgoing, `inc`: the peer's target).
pub(super) struct Queues<'a, Q, C, F> {
    pub(super) qp: &'a mut Q,
    pub(super) scq: &'a mut C,
    pub(super) rcq: &'a mut C,
    pub(super) out: usize,
    pub(super) inc: usize,
    pub(super) lkey_sge: F,
    pub(super) raddr: u64,
    pub(super) rkey: u32,
    /// Receives posted for the current size.
    pub(super) posted_recvs: usize,
}

impl<Q: QueuePair, C: CompletionQueue, F: Fn(usize, u32) -> crate::providers::Sge>
    Queues<'_, Q, C, F>
{
    /// Post one signaled request and ring.
    pub(super) fn post(&mut self, wr: SendWr<'_, <Q::Sq as SendQueue>::Ah>) -> Result<()> {
        let sq = self.qp.sq();
        if let Err(r) = sq.post_and_ring(wr) {
            return Err(perr(format!("post {}: {}", wr.op.name(), r.error)));
        }
        Ok(())
    }

    /// Poll `cq` (running `p`) until one completion; a failed one is an error naming `what`.
    /// `w` is the loop's waiter, started anew here (one per loop, not one per wait: starting
    /// a waiter reads the clock).
    pub(super) fn wait_cq<P: Provider>(
        p: &mut P,
        cq: &mut C,
        what: &str,
        w: &mut Waiter<'_>,
    ) -> Result<Completion> {
        w.reset();
        let mut wc = [Completion::EMPTY];
        loop {
            if cq.poll(&mut wc) == 1 {
                let c = wc[0];
                if !c.is_ok() {
                    // The status's own cause first (RETRY_EXC_ERR: the peer is gone), then
                    // the mismatch two tools can have.
                    return Err(perr(format!(
                        "{what}: completion failed: {} (vendor_err {:#x}): {}; or the peer \
                         does not run the same test and sizes",
                        c.status,
                        c.vendor_err,
                        c.status.hint()
                    )));
                }
                return Ok(c);
            }
            p.progress();
            w.tick(what)?;
        }
    }

    /// Post receives for `size` until `min(RX_DEPTH, n)` are outstanding for this size.
    pub(super) fn post_recvs(&mut self, size: u32, n: usize) -> Result<()> {
        self.posted_recvs = 0;
        let first = (RX_DEPTH as usize).min(n);
        for _ in 0..first {
            self.post_recv(size)?;
        }
        Ok(())
    }

    pub(super) fn post_recv(&mut self, size: u32) -> Result<()> {
        let sge = [(self.lkey_sge)(self.inc - self.out, size)];
        let rq = self.qp.rq();
        if let Err(r) = rq.post_recv(RecvWr {
            wr_id: RECV_WRID,
            sges: &sge,
        }) {
            rq.ring();
            return Err(perr(format!("post_recv: {}", r.error)));
        }
        rq.ring();
        self.posted_recvs += 1;
        Ok(())
    }

    pub(super) fn write_lat<P: Provider>(
        &mut self,
        p: &mut P,
        o: &Params,
        size: u32,
        side: Side,
        tposted: &mut [u64],
    ) -> Result<()> {
        let n = o.iters as u64;
        let last = size as usize - 1;
        let (post_at, poll_at) = (self.out + last, self.inc + last);
        let src = [(self.lkey_sge)(0, size)];
        let inline = size <= o.inline;
        let stop = AtomicBool::new(false);
        let mut w = Waiter::new(&stop);
        let clock = Clock::start();
        let (mut scnt, mut ccnt, mut rcnt) = (0u64, 0u64, 0u64);
        while scnt < n || ccnt < n || rcnt < n {
            if rcnt < n && !(scnt < 1 && side == Side::Server) {
                rcnt += 1;
                w.reset();
                while read_byte(poll_at) != rcnt as u8 {
                    p.progress();
                    w.tick("the peer's RDMA WRITE")?;
                }
            }
            if scnt < n {
                tposted[scnt as usize] = clock.ticks().max(1);
                scnt += 1;
                write_byte(post_at, scnt as u8);
                let op = SendOp::Write {
                    raddr: self.raddr,
                    rkey: self.rkey,
                };
                let mut wr = SendWr::new(scnt, op, &src).signaled();
                // SAFETY: the outgoing half [out, out + size) lies inside the run's mapping,
                // alive for the whole run; only this thread writes it (the device reads it).
                let bytes =
                    unsafe { std::slice::from_raw_parts(self.out as *const u8, size as usize) };
                if inline {
                    wr = wr.inline(bytes);
                }
                self.post(wr)?;
            }
            if ccnt < n {
                Self::wait_cq(p, self.scq, "RDMA WRITE completion", &mut w)?;
                ccnt += 1;
            }
        }
        clock.to_ns(tposted);
        Ok(())
    }

    /// `read_lat`, and `atomic_lat` (one FETCH_AND_ADD where `read_lat` posts a READ).
    pub(super) fn read_lat<P: Provider>(
        &mut self,
        p: &mut P,
        o: &Params,
        size: u32,
        tposted: &mut [u64],
    ) -> Result<()> {
        let dst = [(self.lkey_sge)(self.inc - self.out, size)];
        let stop = AtomicBool::new(false);
        let mut w = Waiter::new(&stop);
        let clock = Clock::start();
        for (i, t) in tposted.iter_mut().enumerate().take(o.iters as usize) {
            *t = clock.ticks().max(1);
            let op = if o.test == Test::AtomicLat {
                SendOp::FetchAdd {
                    raddr: self.raddr,
                    rkey: self.rkey,
                    add: 1,
                }
            } else {
                SendOp::Read {
                    raddr: self.raddr,
                    rkey: self.rkey,
                }
            };
            self.post(SendWr::new(i as u64, op, &dst).signaled())?;
            Self::wait_cq(p, self.scq, op.name(), &mut w)?;
        }
        clock.to_ns(tposted);
        Ok(())
    }

    pub(super) fn send_lat<P: Provider>(
        &mut self,
        p: &mut P,
        o: &Params,
        size: u32,
        side: Side,
        tposted: &mut [u64],
    ) -> Result<()> {
        let n = o.iters as u64;
        let src = [(self.lkey_sge)(0, size)];
        // SAFETY: as in `write_lat`: the outgoing half lives as long as the run.
        let bytes = unsafe { std::slice::from_raw_parts(self.out as *const u8, size as usize) };
        let inline = size <= o.inline;
        let stop = AtomicBool::new(false);
        let mut w = Waiter::new(&stop);
        let clock = Clock::start();
        let (mut scnt, mut rcnt) = (0u64, 0u64);
        while scnt < n || rcnt < n {
            if rcnt < n && !(scnt < 1 && side == Side::Client) {
                Self::wait_cq(p, self.rcq, "the peer's SEND", &mut w)?;
                rcnt += 1;
                if self.posted_recvs < n as usize {
                    self.post_recv(size)?;
                }
            }
            if scnt < n {
                tposted[scnt as usize] = clock.ticks().max(1);
                scnt += 1;
                let signaled = scnt % SEND_LAT_CQ_MOD == 0 || scnt == n;
                let mut wr = SendWr::new(scnt, SendOp::Send, &src);
                if signaled {
                    wr = wr.signaled();
                }
                if inline {
                    wr = wr.inline(bytes);
                }
                self.post(wr)?;
                if signaled {
                    Self::wait_cq(p, self.scq, "SEND completion", &mut w)?;
                }
            }
        }
        clock.to_ns(tposted);
        Ok(())
    }

    pub(super) fn bw<P: Provider>(
        &mut self,
        p: &mut P,
        o: &Params,
        size: u32,
        tposted: &mut [u64],
        tcompleted: &mut [u64],
    ) -> Result<()> {
        let n = o.iters as usize;
        let pl = o.post_list as usize;
        let cq_mod = o.cq_mod as usize;
        let inline = size <= o.inline && !o.test.is_read_like();
        let op = match o.test {
            Test::WriteBw => SendOp::Write {
                raddr: self.raddr,
                rkey: self.rkey,
            },
            Test::ReadBw => SendOp::Read {
                raddr: self.raddr,
                rkey: self.rkey,
            },
            _ => SendOp::Send,
        };
        let sges = if o.test == Test::ReadBw {
            [(self.lkey_sge)(self.inc - self.out, size)]
        } else {
            [(self.lkey_sge)(0, size)]
        };
        // SAFETY: as in `write_lat`: the outgoing half lives as long as the run.
        let bytes = unsafe { std::slice::from_raw_parts(self.out as *const u8, size as usize) };
        let mut wcs = [Completion::EMPTY; 16];
        let stop = AtomicBool::new(false);
        let mut w = Waiter::new(&stop);
        tposted.fill(0);
        tcompleted.fill(0);
        let clock = Clock::start();
        let (mut scnt, mut ccnt) = (0usize, 0usize);
        let tx = TX_DEPTH as usize;
        while ccnt < n {
            while scnt < n && scnt - ccnt + pl <= tx {
                tposted[scnt] = clock.ticks().max(1);
                let sq = self.qp.sq();
                let end = (scnt + pl).min(n);
                for k in scnt..end {
                    let mut wr = SendWr::new(k as u64, op, &sges);
                    if (k + 1) % cq_mod == 0 || k + 1 == n {
                        wr = wr.signaled();
                    }
                    if inline {
                        wr = wr.inline(bytes);
                    }
                    if let Err(r) = sq.post(wr) {
                        sq.ring();
                        return Err(perr(format!("post {} #{k}: {}", op.name(), r.error)));
                    }
                }
                sq.ring();
                scnt = end;
            }
            let m = self.scq.poll(&mut wcs);
            if m == 0 {
                p.progress();
                w.tick("bandwidth completions")?;
                continue;
            }
            super::super::loops::stamp_bw_completions(
                &wcs[..m],
                clock.ticks().max(1),
                op,
                "; does the peer run the same test and sizes?",
                &mut ccnt,
                &mut tcompleted[..n],
            )?;
            w.reset();
        }
        clock.to_ns(tposted);
        clock.to_ns(tcompleted);
        Ok(())
    }

    /// `send_bw`'s server: count `n` receives, re-posting; stamp the start in `tposted[0]`
    /// and each receive in `tcompleted`.
    pub(super) fn bw_server<P: Provider>(
        &mut self,
        p: &mut P,
        size: u32,
        n: usize,
        tposted: &mut [u64],
        tcompleted: &mut [u64],
    ) -> Result<()> {
        let mut wcs = [Completion::EMPTY; 16];
        let stop = AtomicBool::new(false);
        let mut w = Waiter::new(&stop);
        tposted.fill(0);
        tcompleted.fill(0);
        let clock = Clock::start();
        tposted[0] = clock.ticks().max(1);
        let mut rcnt = 0usize;
        while rcnt < n {
            let m = self.rcq.poll(&mut wcs);
            if m == 0 {
                p.progress();
                w.tick("the client's SENDs")?;
                continue;
            }
            let now = clock.ticks().max(1);
            for c in &wcs[..m] {
                if !c.is_ok() {
                    return Err(perr(format!(
                        "receive #{rcnt} failed: {} (vendor_err {:#x})",
                        c.status, c.vendor_err
                    )));
                }
                if rcnt < n {
                    tcompleted[rcnt] = now;
                }
                rcnt += 1;
                if self.posted_recvs < n {
                    self.post_recv(size)?;
                }
            }
            w.reset();
        }
        clock.to_ns(tposted);
        clock.to_ns(tcompleted);
        Ok(())
    }
}
