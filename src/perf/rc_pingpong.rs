//! One end of rdma-core's `ibv_rc_pingpong`, for any provider: its resources ([`open_end`]:
//! a buffer of the message size filled with 0x7b, registered for local write, a CQ of
//! `rx_depth + 1`, a QP of the asked type with one send and `rx_depth` receives), its
//! address lines ([`ep_line`], [`msg_line`]: LID, QPN, PSN and GID as rc_pingpong prints
//! them), its loop ([`Flow`]: receives kept posted, one send outstanding, an end sends again
//! once its last send and a receive have completed; [`Flow::step`] one turn), and what an end
//! does after a failed completion ([`drain`]). What `rdma-direct pingpong` runs.
//!
//! Contract: nothing here parses a command line or prints; every function returns its
//! resources, text or error. [`drain`] polls until every request outstanding at the first
//! error has completed (the failing one with its error, the others flushed once the QP is in
//! the error state) or nothing completed for its `wait`, and returns one line that says how
//! each completed, so nothing outstanding goes unaccounted for. A loop without completions
//! for [`STALL`] has lost its peer (the caller's [`Stall`] turns that into an error); a
//! failed completion, a refused post or a checked message that differs is
//! [`Error::Failed`] naming the end, the counts so far and, after a failed completion, the
//! drain's line. The loop allocates nothing once started (send times preallocated).

use std::net::Ipv6Addr;
use std::time::{Duration, Instant};

use crate::endpoint::PingpongMsg;
use crate::perf::Away;
use crate::providers::helpers;
pub use crate::providers::helpers::Stall;
use crate::providers::{
    Access, Completion, CompletionQueue, MemoryRegion, Pages, Provider, QpCaps, QpConfig,
    QpEndpoint, QpType, QueuePair, RecvQueue, RecvWr, RegisteredBuf, SendQueue, SendWr, Sge,
    WcStatus,
};
use crate::{Error, Result};

/// One run's loop parameters, both ends alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Loop {
    /// Messages each end sends and receives.
    pub iters: u32,
    /// Receives kept posted.
    pub rx_depth: u32,
    /// Message size in bytes.
    pub size: usize,
    /// Every message carries [`chk_byte`] of its sequence number, checked on receipt.
    pub chk: bool,
    /// The measuring end records each send's [`Away::mark`] (the outliers' attribution).
    pub attribute: bool,
}

/// A transfer this end drove failed (an error completion, a refused post, a checked message
/// that differs).
fn fail(detail: String) -> Error {
    Error::Failed {
        context: "rc_pingpong",
        detail,
    }
}

/// After a failed completion, how long a drain waits for the next completion (a flush).
pub const DRAIN: Duration = Duration::from_secs(10);

/// rc_pingpong's address line: `  local address:  LID 0x0000, QPN 0x000100, ...`.
fn dest_line(which: &str, lid: u16, qpn: u32, psn: u32, gid: &[u8; 16]) -> String {
    format!(
        "  {:<16}LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {}\n",
        format!("{which} address:"),
        lid,
        qpn,
        psn,
        Ipv6Addr::from(*gid)
    )
}

/// The address line of an end (`which`: `local` or `remote`).
pub fn ep_line(which: &str, e: &QpEndpoint) -> String {
    dest_line(which, e.lid, e.qpn, e.psn, &e.gid)
}

/// The address line of an end as rc_pingpong's exchange carried it.
pub fn msg_line(which: &str, m: &PingpongMsg) -> String {
    dest_line(which, m.lid, m.qpn, m.psn, &m.gid)
}

/// One end's resources, as rc_pingpong's `pp_init_ctx`. Field order is drop order: the QP
/// before its CQ, the registered buffer before the PD.
pub struct End<P: Provider> {
    pub qp: P::Qp,
    pub cq: P::Cq,
    /// `size` bytes of page-aligned memory, registered for local write (rc_pingpong's buffer,
    /// filled with 0x7b as its is).
    pub buf: RegisteredBuf<P::Mr>,
    pub _pd: P::Pd,
}

/// Opens one end on `p`: messages of `size` bytes, `rx_depth` receives, a `qp_type` QP in
/// RESET.
pub fn open_end<P: Provider>(
    p: &mut P,
    size: usize,
    rx_depth: u32,
    qp_type: QpType,
) -> Result<End<P>> {
    let pd = p.alloc_pd()?;
    let mut buf = p.alloc_buf(&pd, size, Access::LOCAL_WRITE, Pages::Normal)?;
    buf.as_mut_slice().fill(0x7b);
    let mut cq = p.create_cq(rx_depth + 1)?;
    let cfg = QpConfig {
        qp_type,
        caps: QpCaps {
            max_send_wr: 1,
            max_recv_wr: rx_depth,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        sq_sig_all: false,
    };
    let qp = p.create_qp(&pd, &mut cq, None, None, &cfg)?;
    Ok(End {
        qp,
        cq,
        buf,
        _pd: pd,
    })
}

/// After a failed completion (`first[0]`; the rest of its poll follows it) with `sends`
/// and `recvs` requests outstanding: poll `cq` until each has completed, or nothing
/// completed for `wait`, and say how each completed (counts per status, in order of first
/// appearance).
pub fn drain<P: Provider>(
    p: &mut P,
    cq: &mut P::Cq,
    sends: u32,
    recvs: u32,
    first: &[Completion],
    wait: Duration,
) -> String {
    let outstanding = sends + recvs;
    let mut counts: Vec<(WcStatus, u32)> = Vec::new();
    let tally = |counts: &mut Vec<(WcStatus, u32)>, done: &[Completion]| {
        for c in done {
            match counts.iter_mut().find(|(s, _)| *s == c.status) {
                Some((_, k)) => *k += 1,
                None => counts.push((c.status, 1)),
            }
        }
        done.len() as u32
    };
    let seen = tally(&mut counts, first);
    let t0 = Instant::now();
    // A stall leaves the rest counted as without a completion.
    let _ = helpers::drain(
        p,
        cq,
        outstanding.saturating_sub(seen) as usize,
        wait,
        |c| {
            tally(&mut counts, std::slice::from_ref(c));
        },
    );
    drain_line(outstanding, sends, recvs, &counts, t0.elapsed())
}

/// The drain's report: `drain: N outstanding at the first error (S sends, R receives): 1
/// RETRY_EXC_ERR, 8 WR_FLUSH_ERR, 0 without a completion (0.00 s)`.
fn drain_line(
    outstanding: u32,
    sends: u32,
    recvs: u32,
    counts: &[(WcStatus, u32)],
    took: Duration,
) -> String {
    let seen: u32 = counts.iter().map(|(_, k)| k).sum();
    let mut s = format!(
        "drain: {outstanding} outstanding at the first error ({sends} send{}, {recvs} receive{}):",
        if sends == 1 { "" } else { "s" },
        if recvs == 1 { "" } else { "s" }
    );
    for (st, k) in counts {
        s.push_str(&format!(" {k} {st},"));
    }
    s.push_str(&format!(
        " {} without a completion ({:.2} s)",
        outstanding.saturating_sub(seen),
        took.as_secs_f64()
    ));
    s
}

/// wr_ids, as rc_pingpong's: bits of [`Flow::pending`].
pub const RECV_WRID: u64 = 1;
pub const SEND_WRID: u64 = 2;
/// A run with no completion for this long has lost its peer (or its device).
pub const STALL: Duration = Duration::from_secs(20);

/// rc_pingpong's loop state of one end.
pub struct Flow {
    /// wr_id bits that must complete before the next send.
    pub pending: u64,
    /// Receives posted.
    pub routs: u32,
    /// Sends posted and not completed.
    pub souts: u32,
    pub scnt: u32,
    pub rcnt: u32,
    pub iters: u32,
    pub rx_depth: u32,
    pub sge: [Sge; 1],
    /// Send times of the measuring end (preallocated; nothing grows in the loop).
    pub stamps: Option<Vec<Instant>>,
    /// Messages carry [`chk_byte`] of their sequence number, checked on receipt.
    pub chk: bool,
    /// With [`Loop::attribute`] on the measuring end: each send's [`Away::mark`]
    /// (preallocated).
    pub away: Option<(Away, Vec<u64>)>,
    /// The message size: the bytes of the buffer a message fills.
    len: usize,
}

/// The byte every byte of message `seq` (0-based, per direction) holds when checked.
pub fn chk_byte(seq: u32) -> u8 {
    (seq % 251) as u8
}

impl Flow {
    /// One end's loop over `end` (`measure`: the end whose send times are the table's).
    pub fn new<P: Provider>(end: &End<P>, a: &Loop, measure: bool) -> Flow {
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

    pub fn done(&self) -> bool {
        self.rcnt >= self.iters && self.scnt >= self.iters
    }

    /// Post receives until `rx_depth` are up; fails if none more could be posted.
    pub fn fill<Q: QueuePair>(&mut self, qp: &mut Q) -> Result<()> {
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
    pub fn start<Q: QueuePair>(&mut self, qp: &mut Q, buf: &mut [u8]) -> Result<()> {
        self.send(qp, buf)
    }

    /// One turn of rc_pingpong's loop: poll the CQ once and react to every completion
    /// (`buf`: this end's buffer, checked on receipt with `--chk`). Returns whether anything
    /// completed.
    #[allow(clippy::too_many_arguments)]
    pub fn step<P: Provider>(
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
                                "{who}checked message {} holds {:#04x} at byte {at}, expected \
                                 {want:#04x} in every byte (does the peer fill its messages \
                                 the same way?)",
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

impl Flow {
    /// After a failed completion (`first[0]`; the rest of its poll follows it): the line
    /// that says how every request outstanding at that moment completed ([`drain`]).
    pub fn drain<P: Provider>(&self, p: &mut P, cq: &mut P::Cq, first: &[Completion]) -> String {
        drain(p, cq, self.souts, self.routs, first, DRAIN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flushes come only when the drain runs the (deterministic) device: it polls until
    /// all of them are in.
    #[cfg(feature = "sim")]
    #[test]
    fn the_drain_waits_for_every_outstanding_request() {
        use crate::providers::flow::connect_pair;
        use crate::providers::sim::SimDevice;
        use crate::providers::{ConnectOpts, MemoryRegion, QueuePair, RecvQueue, RecvWr};

        let mut dev = SimDevice::new();
        let mut end = open_end(&mut dev, 4096, 4, QpType::Rc).unwrap();
        let mut peer = open_end(&mut dev, 4096, 4, QpType::Rc).unwrap();
        connect_pair(&mut dev, &mut end.qp, &mut peer.qp, &ConnectOpts::default()).unwrap();
        let sge = [end.buf.mr().sge(0, 4096)];
        for _ in 0..4 {
            let wr = RecvWr {
                wr_id: 1,
                sges: &sge,
            };
            end.qp.rq().post_recv(wr).map_err(|r| r.error).unwrap();
        }
        end.qp.rq().ring();
        // As if a send were outstanding and its error completion the poll's first.
        let first = [Completion {
            status: WcStatus::RetryExcErr,
            ..Completion::EMPTY
        }];
        dev.to_error(&mut end.qp).unwrap();
        let line = drain(&mut dev, &mut end.cq, 1, 4, &first, DRAIN);
        assert!(
            line.starts_with(
                "drain: 5 outstanding at the first error (1 send, 4 receives): \
                 1 RETRY_EXC_ERR, 4 WR_FLUSH_ERR, 0 without a completion"
            ),
            "{line}"
        );
    }

    #[test]
    fn the_drain_line_counts_every_outstanding_request() {
        let counts = [(WcStatus::RetryExcErr, 1), (WcStatus::WrFlushErr, 8)];
        assert_eq!(
            drain_line(9, 1, 8, &counts, Duration::from_millis(20)),
            "drain: 9 outstanding at the first error (1 send, 8 receives): 1 RETRY_EXC_ERR, \
             8 WR_FLUSH_ERR, 0 without a completion (0.02 s)"
        );
        assert_eq!(
            drain_line(3, 0, 3, &counts[..1], Duration::ZERO),
            "drain: 3 outstanding at the first error (0 sends, 3 receives): 1 RETRY_EXC_ERR, \
             2 without a completion (0.00 s)"
        );
    }

    #[test]
    fn the_address_line_is_rc_pingpongs() {
        let mut gid = [0u8; 16];
        gid[10] = 0xff;
        gid[11] = 0xff;
        gid[12..].copy_from_slice(&[10, 0, 2, 15]);
        assert_eq!(
            dest_line("local", 0, 0x11, 0xabcdef, &gid),
            "  local address:  LID 0x0000, QPN 0x000011, PSN 0xabcdef, GID ::ffff:10.0.2.15\n"
        );
    }
}
