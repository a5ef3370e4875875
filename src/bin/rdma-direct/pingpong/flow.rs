//! rc_pingpong's loop, written once for every provider: [`Flow`] is one end's loop state
//! (receives kept posted, one send outstanding, an end sends again once its last send and a
//! receive have completed), [`Flow::step`] one turn of the loop; the library's [`Stall`] turns
//! a loop without completions into an error after [`STALL`]. A failed completion hands over
//! to the drain.

use std::time::{Duration, Instant};

use rdma_direct::perf::Away;
pub(super) use rdma_direct::providers::helpers::Stall;
use rdma_direct::providers::{
    Completion, CompletionQueue, MemoryRegion, Provider, QueuePair, RecvQueue, RecvWr, SendQueue,
    SendWr, Sge,
};
use rdma_direct::Result;

use super::args::Args;
use super::bring_up::End;
use super::fail;

/// wr_ids, as rc_pingpong's: bits of [`Flow::pending`].
pub(super) const RECV_WRID: u64 = 1;
pub(super) const SEND_WRID: u64 = 2;
/// A run with no completion for this long has lost its peer (or its device).
pub(super) const STALL: Duration = Duration::from_secs(20);

/// rc_pingpong's loop state of one end.
pub(super) struct Flow {
    /// wr_id bits that must complete before the next send.
    pub(super) pending: u64,
    /// Receives posted.
    pub(super) routs: u32,
    /// Sends posted and not completed.
    pub(super) souts: u32,
    pub(super) scnt: u32,
    pub(super) rcnt: u32,
    pub(super) iters: u32,
    pub(super) rx_depth: u32,
    pub(super) sge: [Sge; 1],
    /// Send times of the measuring end (preallocated; nothing grows in the loop).
    pub(super) stamps: Option<Vec<Instant>>,
    /// `--chk`: messages carry [`chk_byte`] of their sequence number, checked on receipt.
    pub(super) chk: bool,
    /// `--attribute` on the measuring end: each send's [`Away::mark`] (preallocated).
    pub(super) away: Option<(Away, Vec<u64>)>,
    /// The message size: the bytes of the buffer a message fills.
    len: usize,
}

/// The byte every byte of message `seq` (0-based, per direction) holds with `--chk`.
pub(super) fn chk_byte(seq: u32) -> u8 {
    (seq % 251) as u8
}

impl Flow {
    pub(super) fn new<P: Provider>(end: &End<P>, a: &Args, measure: bool) -> Flow {
        Flow {
            pending: RECV_WRID,
            routs: 0,
            souts: 0,
            scnt: 0,
            rcnt: 0,
            iters: a.iters,
            rx_depth: a.rx_depth,
            sge: [end.buf.mr().sge(0, a.size as u32)],
            stamps: measure.then(|| Vec::with_capacity(a.iters as usize + 1)),
            chk: a.chk,
            away: (measure && a.attribute)
                .then(|| (Away::new(), Vec::with_capacity(a.iters as usize + 1))),
            len: a.size,
        }
    }

    pub(super) fn done(&self) -> bool {
        self.rcnt >= self.iters && self.scnt >= self.iters
    }

    /// Post receives until `rx_depth` are up; fails if none more could be posted.
    pub(super) fn fill<Q: QueuePair>(&mut self, qp: &mut Q) -> Result<()> {
        let rq = qp.rq();
        while self.routs < self.rx_depth {
            let wr = RecvWr {
                wr_id: RECV_WRID,
                sges: &self.sge,
            };
            if rq.post_recv(wr).is_err() {
                break;
            }
            self.routs += 1;
        }
        rq.ring();
        if let Some(e) = rq.take_ring_error() {
            return Err(fail(format!("post receive: {e}")));
        }
        if self.routs < self.rx_depth {
            return Err(fail(format!(
                "could only post {} of {} receives",
                self.routs, self.rx_depth
            )));
        }
        Ok(())
    }

    /// Post the next send of `buf` (this end's buffer, which the receives also target).
    fn send<Q: QueuePair>(&mut self, qp: &mut Q, buf: &mut [u8]) -> Result<()> {
        if self.chk {
            buf[..self.len].fill(chk_byte(self.scnt));
        }
        if let Some(s) = &mut self.stamps {
            s.push(Instant::now());
        }
        if let Some((w, v)) = &mut self.away {
            v.push(w.mark());
        }
        let sq = qp.sq();
        sq.post_and_ring(SendWr::send(SEND_WRID, &self.sge).signaled())
            .map_err(|r| fail(format!("post send: {}", r.error)))?;
        if let Some(e) = sq.take_ring_error() {
            return Err(fail(format!("post send: {e}")));
        }
        self.souts += 1;
        self.pending = RECV_WRID | SEND_WRID;
        Ok(())
    }

    /// The client's first send.
    pub(super) fn start<Q: QueuePair>(&mut self, qp: &mut Q, buf: &mut [u8]) -> Result<()> {
        self.send(qp, buf)
    }

    /// One turn of rc_pingpong's loop: poll the CQ once and react to every completion
    /// (`buf`: this end's buffer, checked on receipt with `--chk`). Returns whether anything
    /// completed.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn step<P: Provider>(
        &mut self,
        p: &mut P,
        qp: &mut P::Qp,
        cq: &mut P::Cq,
        buf: &mut [u8],
        wc: &mut [Completion],
        who: &str,
    ) -> Result<bool> {
        if let Some((w, _)) = &mut self.away {
            w.spin();
        }
        let n = cq.poll(wc);
        for (i, c) in wc[..n].iter().enumerate() {
            if !c.is_ok() {
                let drained = self.drain(p, cq, &wc[i..n]);
                return Err(fail(format!(
                    "{who}failed status {} ({}) for wr_id {} (vendor_err {:#x}) after {} sends \
                     and {} receives completed; {drained}",
                    c.status,
                    c.status.to_ibv(),
                    c.wr_id,
                    c.vendor_err,
                    self.scnt,
                    self.rcnt
                )));
            }
            match c.wr_id {
                SEND_WRID => {
                    self.scnt += 1;
                    self.souts -= 1;
                }
                RECV_WRID => {
                    if self.chk {
                        let want = chk_byte(self.rcnt);
                        if let Some(at) = buf[..self.len].iter().position(|&b| b != want) {
                            return Err(fail(format!(
                                "{who}--chk: message {} holds {:#04x} at byte {at}, expected \
                                 {want:#04x} in every byte (is the peer this tool with --chk?)",
                                self.rcnt, buf[at]
                            )));
                        }
                    }
                    self.routs -= 1;
                    if self.routs <= 1 {
                        self.fill(qp)?;
                    }
                    self.rcnt += 1;
                }
                other => return Err(fail(format!("{who}completion for unknown wr_id {other}"))),
            }
            self.pending &= !c.wr_id;
            if self.scnt < self.iters && self.pending == 0 {
                self.send(qp, buf)?;
            }
        }
        Ok(n > 0)
    }
}
