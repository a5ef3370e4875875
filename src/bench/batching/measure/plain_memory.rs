//! The plain-memory loop of `bench batching`: the mlx5 queues with the bench rig's loopback
//! as the device, one RC QP. Contract: [`plain_sweep`] samples every point round-robin
//! (untimed warm samples over the whole SQ and CQ ring before each timed one), times only
//! the post, the ring and the poll, and returns the points with the runs done; it refuses
//! UD SEND and several QPs (those run on a device).

use std::time::Instant;

use crate::providers::mlx5::Mlx5Cq;
use crate::providers::{Completion, CompletionQueue, QueuePair, SendQueue};

use super::super::{Config, Op, Params, PayloadKind, MAX_INLINE};
use super::{stop_after, summarize, wqebbs, Measured, Stat};
use rdma_direct_rig as plain;

/// One point's loopback and what its samples need.
struct PlainPoint {
    lb: plain::Loopback,
    c: Config,
    batch: u32,
    total: u32,
    /// The steady pipeline's bound ([`Params::window`]); `None`: post all, then poll all.
    window: Option<u32>,
    /// [`Params::latency`]: one request at a time.
    latency: bool,
    op: plain::BenchOp,
    data: Vec<u8>,
    samples: Vec<f64>,
    /// Samples recorded per run.
    runs: Vec<usize>,
}

impl PlainPoint {
    fn new(o: &Params, c: Config, batch: u32) -> Result<PlainPoint, String> {
        let total = o.sample_wqes(batch);
        if total > 2048 {
            return Err(format!(
                "-n {}: plain memory holds at most 2048 WQEs per sample",
                o.wqes
            ));
        }
        // A ring that one sample fills (the CQ has twice its entries), so the untimed
        // samples before each timed one leave every line it touches in the cache. Sized in
        // WQEBBs: an inline WQE of 64 bytes takes two.
        let sq = (total * wqebbs(&c)).next_power_of_two().max(64);
        let mut lb = plain::Loopback::new(sq);
        lb.qp.set_doorbell_mode(c.mode.doorbell());
        Ok(PlainPoint {
            lb,
            c,
            batch,
            total,
            window: o.window,
            latency: o.latency,
            op: match c.payload {
                PayloadKind::Inline => plain::BenchOp::WriteInline,
                PayloadKind::Sge => plain::BenchOp::Write,
            },
            data: vec![0x5au8; c.size.min(MAX_INLINE) as usize],
            samples: Vec::with_capacity((o.reps * o.runs) as usize),
            runs: Vec::with_capacity(o.runs as usize),
        })
    }

    /// One sample: post and ring `total` WQEs (timed), let the rig write the CQEs (not
    /// timed: the device's work), poll them (timed). Returns ns per WQE.
    fn sample(&mut self) -> Result<f64, String> {
        if self.latency {
            return self.sample_latency();
        }
        if let Some(w) = self.window {
            return self.sample_steady(w);
        }
        let t0 = Instant::now();
        let signaled = self.post_all()?;
        let posted = t0.elapsed();
        // The device's part (writing the CQEs) is not the driver's cost: not timed.
        self.lb.dev.complete_sends(&mut self.lb.dcq);
        let t1 = Instant::now();
        self.poll_all(signaled)?;
        let ns = (posted + t1.elapsed()).as_nanos() as f64;
        Ok(ns / self.total as f64)
    }

    /// One sample as a steady pipeline: batches are posted while at most `window` WQEs are
    /// outstanding (posted, not yet consumed by the device); when the next batch would pass
    /// the bound, the rig consumes every outstanding WQE and writes their CQEs (not timed)
    /// and the driver polls the signaled ones (timed) before posting on. The clock pauses
    /// around the rig's work, so each pause adds one clock read pair to the timed region.
    fn sample_steady(&mut self, window: u32) -> Result<f64, String> {
        let (c, batch, total) = (self.c, self.batch, self.total);
        let lb = &mut self.lb;
        let sge = lb.sge(c.size);
        let proto = lb.wr(self.op, &sge, &self.data, 0);
        let mut timed = std::time::Duration::ZERO;
        let (mut i, mut outstanding, mut pending) = (0u32, 0u32, 0u32);
        let mut t = Instant::now();
        while i < total {
            if outstanding + batch > window {
                timed += t.elapsed();
                lb.dev.complete_sends(&mut lb.dcq);
                t = Instant::now();
                poll_cq(&mut lb.cq, pending)?;
                (outstanding, pending) = (0, 0);
            }
            for _ in 0..batch {
                let mut wr = proto;
                wr.wr_id = u64::from(i);
                if c.signal.wants(i, batch, total) {
                    wr = wr.signaled();
                    pending += 1;
                }
                if let Err(r) = lb.qp.sq().post(wr) {
                    return Err(format!("post refused: {}", r.error));
                }
                i += 1;
            }
            lb.qp.sq().ring();
            outstanding += batch;
        }
        timed += t.elapsed();
        lb.dev.complete_sends(&mut lb.dcq);
        let t = Instant::now();
        poll_cq(&mut lb.cq, pending)?;
        timed += t.elapsed();
        Ok(timed.as_nanos() as f64 / f64::from(total))
    }

    /// One latency sample: `total` times, post one signaled request, ring, let the rig
    /// consume it and write its CQE, poll that completion; all of it timed (the rig's
    /// turnaround is the "device" part of a round trip here). Returns ns per request.
    fn sample_latency(&mut self) -> Result<f64, String> {
        let (c, total) = (self.c, self.total);
        let lb = &mut self.lb;
        let sge = lb.sge(c.size);
        let proto = lb.wr(self.op, &sge, &self.data, 0).signaled();
        let t = Instant::now();
        for i in 0..total {
            let mut wr = proto;
            wr.wr_id = u64::from(i);
            if let Err(r) = lb.qp.sq().post(wr) {
                return Err(format!("post refused: {}", r.error));
            }
            lb.qp.sq().ring();
            lb.dev.complete_sends(&mut lb.dcq);
            poll_cq(&mut lb.cq, 1)?;
        }
        Ok(t.elapsed().as_nanos() as f64 / f64::from(total))
    }

    /// Post the sample's WQEs, ringing once per batch. Returns how many were signaled.
    /// Out of line: `--instructions` counts what runs inside it and [`Self::poll_all`].
    #[inline(never)]
    fn post_all(&mut self) -> Result<u32, String> {
        let (c, batch, total) = (self.c, self.batch, self.total);
        let lb = &mut self.lb;
        let sge = lb.sge(c.size);
        // The request built once (as `bench post` builds its requests before the clock):
        // each WQE takes its wr_id and signaling from it.
        let proto = lb.wr(self.op, &sge, &self.data, 0);
        let mut i = 0u32;
        let mut signaled = 0u32;
        while i < total {
            for _ in 0..batch {
                let mut wr = proto;
                wr.wr_id = u64::from(i);
                if c.signal.wants(i, batch, total) {
                    wr = wr.signaled();
                    signaled += 1;
                }
                if let Err(r) = lb.qp.sq().post(wr) {
                    return Err(format!("post refused: {}", r.error));
                }
                i += 1;
            }
            lb.qp.sq().ring();
        }
        Ok(signaled)
    }

    /// Poll the `signaled` completions.
    #[inline(never)]
    fn poll_all(&mut self, signaled: u32) -> Result<(), String> {
        poll_cq(&mut self.lb.cq, signaled)
    }

    /// Untimed samples taken before each timed one (see [`plain_sweep`]).
    fn warm_samples(&self) -> u32 {
        (2 * self.total.next_power_of_two().max(64)).div_ceil(self.total)
    }
}

/// Poll `signaled` completions from `cq`.
fn poll_cq(cq: &mut Mlx5Cq<plain::Plain>, signaled: u32) -> Result<(), String> {
    let mut out = [Completion::EMPTY; 64];
    let mut got = 0u32;
    while got < signaled {
        let k = cq.poll(&mut out);
        if k == 0 {
            return Err(format!("the CQ ran dry after {got} of {signaled}"));
        }
        got += k as u32;
    }
    Ok(())
}

/// Every point of the sweep, sampled round-robin (one sample of each point per round), so
/// that a slow phase of a busy machine hits all configurations alike; the whole sweep
/// (warm-up rounds included) [`Params::runs`] times. Returns the points and the runs done.
pub(super) fn plain_sweep(o: &Params) -> Result<Measured, String> {
    if o.qps > 1 || o.ops.contains(&Op::UdSend) {
        return Err(
            "plain memory runs one RC QP (the rig's): UD SEND and several QPs run on a \
             device (the sim, for one)"
                .into(),
        );
    }
    let mut pts = Vec::new();
    for c in o.configs() {
        for &b in &o.batches {
            pts.push(PlainPoint::new(o, c, b)?);
        }
    }
    let mut runs = 0;
    'runs: for run in 0..o.runs {
        for p in pts.iter_mut() {
            p.runs.push(0);
        }
        runs = run + 1;
        for round in 0..o.warmup + o.reps {
            if stop_after(o, run, round) {
                break 'runs;
            }
            for p in pts.iter_mut() {
                // Each point has its own queues: untimed samples over the whole SQ and CQ
                // ring bring them back into the cache the other points used, as a steady
                // stream of posts would keep them.
                for _ in 0..p.warm_samples() {
                    p.sample()?;
                }
                let ns = p.sample()?;
                if round >= o.warmup {
                    p.samples.push(ns);
                    *p.runs.last_mut().expect("a run begun") += 1;
                }
            }
        }
    }
    let mut res: Vec<(Config, Vec<Stat>)> = Vec::new();
    for p in pts {
        let st = summarize(p.batch, p.total, p.samples, &p.runs);
        match res.last_mut() {
            Some((c, v)) if *c == p.c => v.push(st),
            _ => res.push((p.c, vec![st])),
        }
    }
    Ok((res, runs))
}
