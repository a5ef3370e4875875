//! The measuring loops of `bench batching`, one per kind of provider: plain memory (the mlx5
//! queues with the bench rig as the device) and devices (sim, verbs, mlx5), and [`sweep`],
//! which picks one for [`Params::at`].
//!
//! Contract: every point of the sweep is sampled round-robin after warm-up rounds; a sample
//! times many batches and yields ns per WQE; [`Stat`] summarizes a point's samples. The
//! timed regions hold only the post, the ring and the poll (the rig's device work is
//! outside them); nothing here prints.

use std::time::Instant;

use crate::pcie::Counts;
use crate::providers::flow::connect_pair;
use crate::providers::mlx5::{Mlx5Cq, Mlx5Device, Mlx5Qp, Owners};
use crate::providers::sim::SimDevice;
use crate::providers::verbs::VerbsDevice;
use crate::providers::{
    Access, Completion, CompletionQueue, ConnectOpts, MemoryRegion, Pages, Provider, QpCaps,
    QpConfig, QpType, QueuePair, RecvQueue, RecvWr, RegisteredBuf, SendQueue, SendWr, UdDest,
};

use super::stats::{bootstrap_median_ci, median, quantile, spread, BOOTSTRAP_RESAMPLES};
use super::{Config, Mode, Op, Params, PayloadKind, Where, MAX_INLINE, MAX_QPS};
use crate::bench::cpu::{self, Chosen};
use rdma_direct_rig as plain;

/// Send queue depth on devices.
const DEPTH: u32 = 256;
/// Most receives a UD server QP holds (the sim's receive queue limit; rxe's is the same).
const MAX_RECVS: u32 = 1 << 14;
/// Bytes a UD receive buffer gives the GRH before the payload.
const GRH: u32 = crate::wire::IBV_GRH_LEN as u32;
/// The poster yields its core after waiting this long for a completion (a full window of
/// [`DEPTH`] WQEs takes about 50 µs on the sim when the device thread has its own core).
const YIELD_AFTER_US: u128 = 500;

/// One measured point.
#[derive(Clone, Debug, Default)]
pub struct Stat {
    pub batch: u32,
    pub wqes: u32,
    /// Samples recorded (over all runs).
    pub reps: u32,
    /// ns per WQE: median, p10, p90, min, max (over all runs' samples).
    pub med: f64,
    pub p10: f64,
    pub p90: f64,
    pub min: f64,
    pub max: f64,
    /// Percentile-bootstrap 95 % interval of the median (ns per WQE); `None` under 2 samples.
    pub med_ci95: Option<(f64, f64)>,
    /// The raw samples (ns per WQE), in the order taken, run after run.
    pub samples: Vec<f64>,
    /// Each run's median (one entry per run of [`Params::runs`]).
    pub run_medians: Vec<f64>,
    /// Run-to-run spread: the largest of [`Stat::run_medians`] over the smallest, minus 1.
    pub run_spread: f64,
    /// Doorbells rung per second (median sample).
    pub db_per_s: f64,
    /// WQEs per doorbell the device saw (sim only).
    pub dev_wqes_per_db: Option<f64>,
    /// CQEs the device wrote per WQE (sim only), the receivers' included (one per UD
    /// datagram): a check of the PCIe replay's CQE counts (requester and responder).
    pub dev_cqes_per_wqe: Option<f64>,
    /// What a ConnectX would move over PCIe for this point's requests (mlx5 providers).
    pub pcie: Option<Counts>,
}

impl Stat {
    pub fn mpps(&self) -> f64 {
        1e3 / self.med
    }
}

/// A sweep's outcome.
#[derive(Clone, Debug, Default)]
pub struct Sweep {
    /// Every configuration with its points, one per batch size.
    pub points: Vec<(Config, Vec<Stat>)>,
    /// The CPU the measuring thread ran pinned to (`None`: not pinned).
    pub cpu: Option<Chosen>,
    /// Runs completed (fewer than [`Params::runs`] when a stop cut the sweep short).
    pub runs: u32,
    /// With [`Params::threads`] > 1: every measuring thread's own sweep, in thread order
    /// ([`Sweep::points`] and [`Sweep::cpu`] are the first's); empty with one thread.
    pub threads: Vec<ThreadSweep>,
    /// Point sets asked for and not measured, one line each saying why (a verbs baseline
    /// on a device whose libibverbs cannot post).
    pub skipped: Vec<String>,
}

/// A batch size and a rate (Mpps) at it.
pub type BatchMpps = (u32, f64);

/// One measuring thread's sweep (see [`Params::threads`]).
#[derive(Clone, Debug, Default)]
pub struct ThreadSweep {
    /// Its points, as [`Sweep::points`].
    pub points: Vec<(Config, Vec<Stat>)>,
    /// The CPU it ran pinned to.
    pub cpu: Option<Chosen>,
    /// Runs it completed.
    pub runs: u32,
    /// As [`Sweep::skipped`].
    pub skipped: Vec<String>,
}

impl Sweep {
    /// The threads' total rate per point: for every configuration and batch size, the sum
    /// over the threads of each one's median Mpps ([`Stat::mpps`]); `None` with one thread.
    /// (The threads ran side by side over the same span; each one's median is its own
    /// steady rate.)
    pub fn total_mpps(&self) -> Option<Vec<(Config, Vec<BatchMpps>)>> {
        let (first, others) = self.threads.split_first()?;
        Some(
            first
                .points
                .iter()
                .enumerate()
                .map(|(i, (c, pts))| {
                    let sums = pts
                        .iter()
                        .enumerate()
                        .map(|(j, p)| {
                            let rest: f64 = others
                                .iter()
                                .filter_map(|t| t.points.get(i)?.1.get(j))
                                .map(Stat::mpps)
                                .sum();
                            (p.batch, p.mpps() + rest)
                        })
                        .collect();
                    (*c, sums)
                })
                .collect(),
        )
    }
}

/// The points of a sweep and the runs it completed.
type Measured = (Vec<(Config, Vec<Stat>)>, u32);

/// Whether the sweep ends before `round` of `run`: a stop was asked for ([`Params::stop`]: a
/// caught Ctrl-C, say) and every point has at least one recorded sample. The points then
/// carry the samples taken ([`Stat::reps`], the `samples` of the JSON).
fn stop_after(o: &Params, run: u32, round: u32) -> bool {
    (run > 0 || round > o.warmup) && o.stop.is_some_and(|s| s.requested())
}

/// A point's samples (ns/WQE, in order; `runs[k]` of them from run `k`) into a [`Stat`].
fn summarize(batch: u32, wqes: u32, ns: Vec<f64>, runs: &[usize]) -> Stat {
    let mut sorted = ns.clone();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let n = sorted.len();
    let med = quantile(&sorted, 0.5);
    let mut run_medians = Vec::new();
    let mut at = 0;
    for &k in runs.iter().filter(|&&k| k > 0) {
        run_medians.push(median(&ns[at..at + k]));
        at += k;
    }
    // Seeded by the point, so a point's interval does not depend on the sweep's order.
    let seed = u64::from(batch) << 32 | u64::from(wqes);
    Stat {
        batch,
        wqes,
        reps: n as u32,
        med,
        p10: quantile(&sorted, 0.1),
        p90: quantile(&sorted, 0.9),
        min: sorted[0],
        max: sorted[n - 1],
        med_ci95: bootstrap_median_ci(&ns, BOOTSTRAP_RESAMPLES, seed),
        run_spread: spread(&run_medians),
        run_medians,
        samples: ns,
        db_per_s: 1e9 / (med * batch as f64),
        dev_wqes_per_db: None,
        dev_cqes_per_wqe: None,
        pcie: None,
    }
}

// ---------------------------------------------------------------------------------------
// PCIe counts

/// Requests the PCIe tap follows per point (whole batches): the counts per message repeat
/// with the batch and the signaling period, so a sample longer than this adds nothing.
const TAP_MAX: u32 = 4096;

/// What a ConnectX would move over PCIe for one point: the point's post sequence (its
/// requests, batches, signaling, doorbell mode, payload) replayed once, untimed, on a
/// plain-memory queue with the rig's PCIe tap reading what the mlx5 provider wrote at every
/// ring. The sim and a ConnectX run the same provider code, so the counts hold for them too.
/// The ring holds the whole replay (drained after each batch), so a fetch split by the ring's
/// end (one more read per wrap) is counted where the replay wraps, not where the measured
/// run did.
pub fn pcie_counts(o: &Params, c: &Config, batch: u32) -> Result<Counts, String> {
    let total = o.sample_wqes(batch).min(TAP_MAX / batch * batch);
    // Room for the whole replay.
    let slots = (wqebbs(c) * total).next_power_of_two().max(256);
    let (mut lb, op) = match (c.op, c.payload) {
        (Op::Write, PayloadKind::Inline) => {
            (plain::Loopback::new(slots), plain::BenchOp::WriteInline)
        }
        (Op::Write, PayloadKind::Sge) => (plain::Loopback::new(slots), plain::BenchOp::Write),
        (Op::UdSend, PayloadKind::Inline) => {
            (plain::Loopback::ud(slots), plain::BenchOp::SendInline)
        }
        (Op::UdSend, PayloadKind::Sge) => (plain::Loopback::ud(slots), plain::BenchOp::Send),
    };
    lb.qp.set_doorbell_mode(c.mode.doorbell());
    let mut tap = plain::tap::Tap::new(&lb.dev, 16, 64);
    if c.op == Op::UdSend {
        tap = tap.datagram();
    }
    let sge = lb.sge(c.size);
    let data = vec![0x5au8; c.size.min(MAX_INLINE) as usize];
    let mut i = 0u32;
    while i < total {
        for _ in 0..batch {
            let mut wr = lb.wr(op, &sge, &data, u64::from(i));
            if c.op == Op::UdSend {
                wr = wr.to(plain::ud_dest());
            }
            if c.signal.wants(i, batch, total) {
                wr = wr.signaled();
            }
            if let Err(r) = lb.qp.sq().post(wr) {
                return Err(format!("PCIe tap: post refused: {}", r.error));
            }
            i += 1;
        }
        tap.arm(&lb.dev);
        lb.qp.sq().ring();
        tap.observe(&lb.dev)?;
        lb.drain();
    }
    Ok(tap.counts())
}

/// Attach the PCIe counts to every point of an mlx5 provider's sweep.
fn with_pcie(
    o: &Params,
    mut res: Vec<(Config, Vec<Stat>)>,
) -> Result<Vec<(Config, Vec<Stat>)>, String> {
    for (c, pts) in res.iter_mut() {
        for p in pts.iter_mut() {
            p.pcie = Some(pcie_counts(o, c, p.batch)?);
        }
    }
    Ok(res)
}

// ---------------------------------------------------------------------------------------
// Plain memory

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

/// WQEBBs (64-byte send queue slots) one request of `c` takes: the control segment (16
/// bytes), the remote-address segment (16, RDMA WRITE) or the datagram segment (48, UD SEND),
/// then one data segment (16 bytes) or the inline header (4 bytes) with the payload, padded
/// to 16 bytes.
pub fn wqebbs(c: &Config) -> u32 {
    let addr = match c.op {
        Op::Write => 16,
        Op::UdSend => 48,
    };
    let data = match c.payload {
        PayloadKind::Inline => (4 + c.size).next_multiple_of(16),
        PayloadKind::Sge => 16,
    };
    (16 + addr + data).div_ceil(64)
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
fn plain_sweep(o: &Params) -> Result<Measured, String> {
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

// ---------------------------------------------------------------------------------------
// Devices (sim, verbs, mlx5)

/// What the sweep needs from a provider beyond [`Provider`].
trait Target: Provider {
    /// Apply the doorbell mode (mlx5 queues); verbs has none.
    fn set_mode(qp: &mut Self::Qp, m: Mode);
    /// (doorbells seen, WQEs consumed, CQEs written) by the device, when it counts them.
    fn counters(&self) -> Option<(u64, u64, u64)> {
        None
    }
}

fn set_mlx5_mode<D: Owners>(qp: &mut Mlx5Qp<D>, m: Mode) {
    qp.set_doorbell_mode(m.doorbell());
}

impl Target for SimDevice {
    fn set_mode(qp: &mut Mlx5Qp<SimDevice>, m: Mode) {
        set_mlx5_mode(qp, m)
    }
    fn counters(&self) -> Option<(u64, u64, u64)> {
        let s = self.stats();
        Some((s.doorbells, s.wqes, s.cqes))
    }
}

impl Target for Mlx5Device {
    fn set_mode(qp: &mut Mlx5Qp, m: Mode) {
        set_mlx5_mode(qp, m)
    }
}

impl Target for VerbsDevice {
    fn set_mode(_: &mut Self::Qp, _: Mode) {}
}

/// `qps` client QPs, each connected to a server QP of its own (RC for WRITE, UD for SEND
/// with an address handle towards its peer), and their memory. Field order is drop order:
/// QPs and AHs before their CQs and the PD, the memory last.
///
/// UD: each server QP holds receives for its whole share of the largest sample, posted
/// ahead ([`recvs_per_qp`]), so no datagram is dropped; between samples (untimed)
/// [`receive_sample`] takes their completions, checks every datagram arrived, and posts
/// them again. The device does the receiver's work (receive WQE read, GRH and payload
/// scatter, CQE) while the sender is timed; the host's polling of the receives is not timed.
struct Bed<P: Provider> {
    cqps: Vec<P::Qp>,
    sqps: Vec<P::Qp>,
    /// UD: the address handle towards each client QP's peer, and the peer's QPN.
    ahs: Vec<(P::Ah, u32)>,
    ccq: P::Cq,
    scq: P::Cq,
    /// The client's memory (the source) and the server's (the WRITEs' target).
    cmem: RegisteredBuf<P::Mr>,
    smem: RegisteredBuf<P::Mr>,
    /// The path MTU in bytes (a UD SEND carries at most one).
    mtu: u32,
    _pd: P::Pd,
}

/// Receives each UD server QP holds: its share of the largest sample (batches go to the
/// QPs in turn).
fn recvs_per_qp(o: &Params) -> u32 {
    let n = o.qps.max(1);
    o.batches
        .iter()
        .map(|&b| (o.sample_wqes(b) / b).div_ceil(n) * b)
        .max()
        .unwrap_or(1)
}

/// After a UD sample of `total` datagrams: take the server QPs' receive completions until
/// all `total` arrived, check each, and post each receive again on its QP (its wr_id).
fn receive_sample<P: Target>(
    p: &mut P,
    b: &mut Bed<P>,
    size: u32,
    total: u32,
) -> Result<(), String> {
    let sges = [b.smem.mr().sge(0, size + GRH)];
    let mut wcs = [Completion::EMPTY; 32];
    let mut got = 0u32;
    let mut idle_since: Option<Instant> = None;
    while got < total {
        let m = b.scq.poll(&mut wcs);
        if m == 0 {
            p.progress();
            let now = Instant::now();
            if now.duration_since(*idle_since.get_or_insert(now)).as_secs() >= 10 {
                return Err(format!(
                    "UD SEND: the receivers got {got} of {total} datagrams (none for 10 s)"
                ));
            }
            std::thread::yield_now();
            continue;
        }
        idle_since = None;
        for w in &wcs[..m] {
            if !w.is_ok() || w.byte_len != size + GRH {
                return Err(format!(
                    "UD SEND: a receive on server QP {} completed with {} and {} bytes \
                     (expected {} = the {GRH}-byte GRH and {size} payload bytes)",
                    w.wr_id,
                    w.status,
                    w.byte_len,
                    size + GRH
                ));
            }
            let q = (w.wr_id as usize).min(b.sqps.len() - 1);
            if let Err(r) = b.sqps[q].rq().post_recv(RecvWr::new(w.wr_id, &sges)) {
                return Err(format!("UD SEND: posting a receive again: {}", r.error));
            }
        }
        got += m as u32;
    }
    for sqp in b.sqps.iter_mut() {
        sqp.rq().ring();
    }
    Ok(())
}

fn bed<P: Target>(
    p: &mut P,
    o: &Params,
    op: Op,
    inline: u32,
    max_size: u32,
) -> crate::Result<Bed<P>> {
    // Room for a WRITE's target or a datagram's GRH and payload.
    let len = (max_size + GRH) as usize;
    let recvs = match op {
        Op::Write => 1,
        Op::UdSend => recvs_per_qp(o),
    };
    let pd = p.alloc_pd()?;
    let caps = QpCaps {
        max_send_wr: DEPTH,
        max_recv_wr: 1,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: inline,
    };
    let cfg = QpConfig {
        qp_type: match op {
            Op::Write => QpType::Rc,
            Op::UdSend => QpType::Ud,
        },
        caps,
        sq_sig_all: false,
    };
    let scfg = QpConfig {
        caps: QpCaps {
            max_recv_wr: recvs,
            ..caps
        },
        ..cfg
    };
    let copts = ConnectOpts {
        port: o.port,
        gid_index: o.gid_index,
        ..ConnectOpts::default()
    };
    let n = o.qps.max(1);
    // Each CQ absorbs its QPs' queues (max_send_wr + max_recv_wr), as create_qp requires.
    let mut ccq = p.create_cq(2 * DEPTH * n)?;
    let mut scq = p.create_cq((DEPTH + recvs) * n)?;
    let (mut cqps, mut sqps, mut ahs) = (Vec::new(), Vec::new(), Vec::new());
    let mut mtu = u32::MAX;
    for _ in 0..n {
        let mut cqp = p.create_qp(&pd, &mut ccq, None, None, &cfg)?;
        let mut sqp = p.create_qp(&pd, &mut scq, None, None, &scfg)?;
        let (ce, se) = connect_pair(p, &mut cqp, &mut sqp, &copts)?;
        mtu = mtu.min(ce.mtu.min(se.mtu).bytes());
        if op == Op::UdSend {
            ahs.push((p.create_ah(&pd, &se, &copts)?, se.qpn));
        }
        cqps.push(cqp);
        sqps.push(sqp);
    }
    let cmem = p.alloc_buf(&pd, len, Access::ALL, Pages::Normal)?;
    let smem = p.alloc_buf(&pd, len, Access::ALL, Pages::Normal)?;
    if op == Op::UdSend {
        // Every receive scatters into the same bytes: the payload is not looked at.
        let sges = [smem.mr().sge(0, max_size + GRH)];
        for (q, sqp) in sqps.iter_mut().enumerate() {
            let rq = sqp.rq();
            for _ in 0..recvs {
                if let Err(r) = rq.post_recv(RecvWr::new(q as u64, &sges)) {
                    return Err(r.error.into());
                }
            }
            rq.ring();
        }
    }
    Ok(Bed {
        cqps,
        sqps,
        ahs,
        ccq,
        scq,
        cmem,
        smem,
        mtu,
        _pd: pd,
    })
}

/// One sample: `total` requests in batches of `batch`, batch k on client QP k mod qps, at
/// most `window` outstanding (posted, not yet completed) and never more than [`DEPTH`],
/// until all completed. Each QP signals by its own count (its last of the sample always).
/// A request's wr_id is its QP in the high 32 bits and its index on that QP in the low ones.
/// Returns the elapsed ns.
fn device_sample<P: Target>(
    p: &mut P,
    b: &mut Bed<P>,
    c: &Config,
    batch: u32,
    total: u32,
    window: u32,
    data: &[u8],
) -> Result<f64, String> {
    let raddr = b.smem.addr();
    let rkey = b.smem.rkey();
    let qkey = ConnectOpts::default().qkey;
    let sges = [b.cmem.mr().sge(0, c.size)];
    let mut wcs = [Completion::EMPTY; 32];
    let n = b.cqps.len() as u32;
    let batches = total / batch;
    // Requests QP q takes in this sample: its batches q, q + n, ...
    let mut share = [0u32; MAX_QPS as usize];
    let (mut posted_q, mut done_q) = ([0u32; MAX_QPS as usize], [0u32; MAX_QPS as usize]);
    for (q, s) in share.iter_mut().enumerate().take(n as usize) {
        *s = (batches + n - 1 - q as u32) / n * batch;
    }
    let (mut posted, mut done) = (0u32, 0u32);
    let what = c.op.title();
    let t0 = Instant::now();
    let mut idle_since: Option<Instant> = None;
    let mut spins = 0u32;
    while done < total {
        while posted < total && posted - done + batch <= window {
            let q = ((posted / batch) % n) as usize;
            let dest = b.ahs.get(q).map(|(ah, qpn)| UdDest {
                ah,
                remote_qpn: *qpn,
                remote_qkey: qkey,
            });
            let sq = b.cqps[q].sq();
            for _ in 0..batch {
                let i = posted_q[q];
                let id = (q as u64) << 32 | u64::from(i);
                let mut wr = match dest {
                    Some(d) => SendWr::send(id, &sges).to(d),
                    None => SendWr::write(id, &sges, raddr, rkey),
                };
                if c.payload == PayloadKind::Inline {
                    wr = wr.inline(data);
                }
                if c.signal.wants(i, batch, share[q]) {
                    wr = wr.signaled();
                }
                if let Err(r) = sq.post(wr) {
                    sq.ring();
                    return Err(format!("post {what} #{posted}: {}", r.error));
                }
                posted_q[q] += 1;
                posted += 1;
            }
            // A refused doorbell (libibverbs' ibv_post_send) took its requests back: say so
            // now rather than wait for completions that cannot come.
            if let Err(e) = sq.try_ring() {
                return Err(format!(
                    "ring after {what} #{}: {e}",
                    posted.saturating_sub(1)
                ));
            }
        }
        let m = b.ccq.poll(&mut wcs);
        if m == 0 {
            p.progress();
            let now = Instant::now();
            let since = *idle_since.get_or_insert(now);
            spins += 1;
            if spins > 64 && now.duration_since(since).as_micros() >= YIELD_AFTER_US {
                // No completion for longer than a full window takes: a device thread may
                // share this core (the sim on a busy machine); let it run.
                std::thread::yield_now();
            }
            if now.duration_since(since).as_secs() >= 10 {
                return Err(format!(
                    "no completion for 10 s ({done} of {total} {what}s completed)"
                ));
            }
            continue;
        }
        idle_since = None;
        spins = 0;
        for w in &wcs[..m] {
            if !w.is_ok() {
                return Err(format!(
                    "{what} #{} on QP {} failed: {} (vendor_err {:#x})",
                    w.wr_id & 0xffff_ffff,
                    w.wr_id >> 32,
                    w.status,
                    w.vendor_err
                ));
            }
            // In order on each QP: the completion of its request j retires every one of its
            // requests up to j.
            let q = ((w.wr_id >> 32) as usize).min(MAX_QPS as usize - 1);
            let upto = (w.wr_id as u32).wrapping_add(1).max(done_q[q]);
            done += upto - done_q[q];
            done_q[q] = upto;
        }
    }
    Ok(t0.elapsed().as_nanos() as f64)
}

fn device_sweep<P: Target>(p: &mut P, o: &Params) -> Result<Measured, String> {
    let max_size = o.sizes.iter().copied().max().unwrap_or(8);
    let inline = if o.payloads.contains(&PayloadKind::Inline) {
        MAX_INLINE
    } else {
        0
    };
    let ops = |op: Op| o.configs().iter().any(|c| c.op == op);
    let mut rc = match ops(Op::Write) {
        true => Some(bed(p, o, Op::Write, inline, max_size).map_err(|e| e.to_string())?),
        false => None,
    };
    if ops(Op::UdSend) && recvs_per_qp(o) > MAX_RECVS {
        return Err(format!(
            "Params::wqes {}: UD SEND posts each server QP's receives for a whole sample \
             ahead, at most {MAX_RECVS} per QP; fewer WQEs per sample or more QPs \
             (Params::qps) fit",
            o.wqes
        ));
    }
    let mut ud = match ops(Op::UdSend) {
        true => Some(bed(p, o, Op::UdSend, inline, max_size).map_err(|e| e.to_string())?),
        false => None,
    };
    if let Some(b) = &ud {
        if max_size > b.mtu {
            return Err(format!(
                "-s {max_size}: a UD SEND carries one MTU at most ({} bytes here)",
                b.mtu
            ));
        }
    }
    let data = vec![0x5au8; max_size.min(MAX_INLINE) as usize];
    let window = if o.latency {
        1
    } else {
        o.window.unwrap_or(DEPTH).min(DEPTH)
    };
    struct Point {
        c: Config,
        batch: u32,
        /// ns/WQE samples, and how many each run recorded.
        ns: Vec<f64>,
        runs: Vec<usize>,
        /// Device WQEs per doorbell and CQEs per WQE, per sample (sim).
        dev: Vec<f64>,
        cqes: Vec<f64>,
    }
    let mut pts: Vec<Point> = Vec::new();
    for c in o.configs() {
        for &batch in &o.batches {
            pts.push(Point {
                c,
                batch,
                ns: Vec::new(),
                runs: Vec::new(),
                dev: Vec::new(),
                cqes: Vec::new(),
            });
        }
    }
    // Round-robin over the points, as on plain memory.
    let mut runs = 0;
    'runs: for run in 0..o.runs {
        for pt in pts.iter_mut() {
            pt.runs.push(0);
        }
        runs = run + 1;
        for round in 0..o.warmup + o.reps {
            if stop_after(o, run, round) {
                break 'runs;
            }
            for pt in pts.iter_mut() {
                let c = pt.c;
                let b = match c.op {
                    Op::Write => rc.as_mut(),
                    Op::UdSend => ud.as_mut(),
                }
                .expect("a bed for every op of the configs");
                for qp in b.cqps.iter_mut() {
                    P::set_mode(qp, c.mode);
                }
                let total = o.sample_wqes(pt.batch);
                let data = &data[..c.size.min(MAX_INLINE) as usize];
                let before = p.counters();
                let t = device_sample(p, b, &c, pt.batch, total, window, data)?;
                if c.op == Op::UdSend {
                    receive_sample(p, b, c.size, total)?;
                }
                if round >= o.warmup {
                    pt.ns.push(t / total as f64);
                    *pt.runs.last_mut().expect("a run begun") += 1;
                    if let (Some((d0, w0, c0)), Some((d1, w1, c1))) = (before, p.counters()) {
                        if d1 > d0 {
                            pt.dev.push((w1 - w0) as f64 / (d1 - d0) as f64);
                        }
                        pt.cqes.push((c1 - c0) as f64 / f64::from(total));
                    }
                }
            }
        }
    }
    let mut res: Vec<(Config, Vec<Stat>)> = Vec::new();
    for pt in pts {
        let mut st = summarize(pt.batch, o.sample_wqes(pt.batch), pt.ns, &pt.runs);
        if !pt.dev.is_empty() {
            st.dev_wqes_per_db = Some(median(&pt.dev));
        }
        if !pt.cqes.is_empty() {
            st.dev_cqes_per_wqe = Some(median(&pt.cqes));
        }
        match res.last_mut() {
            Some((k, v)) if *k == pt.c => v.push(st),
            _ => res.push((pt.c, vec![st])),
        }
    }
    // The RC server QPs only take WRITEs: nothing to poll.
    let _ = rc.as_ref().map(|b| &b.sqps);
    Ok((res, runs))
}

/// Pin the calling thread to `cpu` (when chosen).
fn pin(cpu: &Option<Chosen>) -> Result<(), String> {
    match cpu {
        Some(c) => crate::providers::helpers::pin_current_thread(c.cpu).map_err(|e| {
            format!(
                "pinning the measuring thread to CPU {} ({}): {e}; pin to another (Pin::Cpu) or \
                 run unpinned (Pin::Off)",
                c.cpu, c.why
            )
        }),
        None => Ok(()),
    }
}

/// The sweep of `o`, on a thread of its own pinned to the CPU [`cpu::choose`] picks for
/// [`Params::pin`] (the caller's thread keeps its affinity). On the sim the device thread is
/// started before the pinning, so it does not inherit the measuring thread's CPU. With
/// [`Params::threads`] > 1, that many measuring threads side by side, each pinned to a CPU
/// of its own ([`cpu::choose_n`]) and running the whole sweep on queues of its own.
pub fn sweep(o: &Params) -> Result<Sweep, String> {
    let dev = match o.at {
        Where::Verbs | Where::Mlx5 => o.device.as_deref(),
        Where::Plain | Where::Sim => None,
    };
    let n = o.threads.max(1) as usize;
    let chosen = cpu::choose_n(o.pin, dev, n)?;
    let mut done: Vec<ThreadSweep> = std::thread::scope(|s| {
        let handles: Vec<_> = chosen
            .iter()
            .map(|c| s.spawn(move || measure(o, c)))
            .collect();
        handles
            .into_iter()
            .zip(&chosen)
            .enumerate()
            .map(|(i, (h, c))| {
                let ((points, runs), skipped) = h
                    .join()
                    .unwrap_or_else(|_| Err("the measuring thread panicked".into()))
                    .map_err(|e| if n > 1 { format!("thread {i}: {e}") } else { e })?;
                Ok(ThreadSweep {
                    points,
                    cpu: c.clone(),
                    runs,
                    skipped,
                })
            })
            .collect::<Result<_, String>>()
    })?;
    let first = done[0].clone();
    if n == 1 {
        done.clear();
    }
    Ok(Sweep {
        points: first.points,
        cpu: first.cpu,
        runs: done.iter().map(|t| t.runs).min().unwrap_or(first.runs),
        skipped: first.skipped,
        threads: done,
    })
}

fn with_pcie_runs(o: &Params, r: Measured) -> Result<Measured, String> {
    Ok((with_pcie(o, r.0)?, r.1))
}

/// The verbs baseline of an mlx5 sweep ([`Params::verbs_baseline`]): the same configs with
/// one `ibv_post_send` per batch on the same device, after the mlx5 points. A device whose
/// verbs data path refuses to post (`EOPNOTSUPP`: the stand-in models the direct path only)
/// gives one line saying so instead of points. Each point set is sampled round-robin within
/// itself; the two sets run one after the other.
fn verbs_baseline(o: &Params, res: &mut Measured) -> Result<Vec<String>, String> {
    let dev = o.device.as_deref().unwrap_or_default();
    let mut p = VerbsDevice::open(dev).map_err(|e| format!("verbs baseline: {e}"))?;
    let mut v = o.clone();
    v.at = Where::Verbs;
    v.modes = vec![Mode::Verbs];
    // One signaled WRITE first: does libibverbs post at all here?
    {
        let mut b = bed(&mut p, &v, Op::Write, 0, 8).map_err(|e| format!("verbs baseline: {e}"))?;
        let sges = [b.cmem.mr().sge(0, 8)];
        let (raddr, rkey) = (b.smem.addr(), b.smem.rkey());
        let sq = b.cqps[0].sq();
        let refused = match sq.post(SendWr::write(0, &sges, raddr, rkey).signaled()) {
            Err(r) => Some(r.error.to_string()),
            Ok(()) => sq.try_ring().err().map(|e| e.to_string()),
        };
        if let Some(e) = refused {
            return Ok(vec![format!(
                "verbs baseline on {dev} not measured: the first post was refused ({e}); \
                 libibverbs cannot post on this device, the other points stand"
            )]);
        }
        // Its completion, before the bed goes.
        let mut wcs = [Completion::EMPTY; 4];
        let t0 = Instant::now();
        while b.ccq.poll(&mut wcs) == 0 {
            p.progress();
            if t0.elapsed().as_secs() >= 10 {
                return Err("verbs baseline: no completion for 10 s after the first post".into());
            }
        }
    }
    let (pts, runs) = device_sweep(&mut p, &v).map_err(|e| format!("verbs baseline: {e}"))?;
    res.0.extend(pts);
    res.1 = res.1.min(runs);
    Ok(Vec::new())
}

fn measure(o: &Params, cpu: &Option<Chosen>) -> Result<(Measured, Vec<String>), String> {
    if o.verbs_baseline && o.at == Where::Mlx5 {
        let mut r = measure_one(o, cpu)?;
        let skipped = verbs_baseline(o, &mut r)?;
        return Ok((r, skipped));
    }
    Ok((measure_one(o, cpu)?, Vec::new()))
}

fn measure_one(o: &Params, cpu: &Option<Chosen>) -> Result<Measured, String> {
    match o.at {
        Where::Plain => {
            pin(cpu)?;
            with_pcie_runs(o, plain_sweep(o)?)
        }
        Where::Sim => {
            let mut p = SimDevice::new();
            // Device-thread mode: a thread plays the HCA, polling doorbells, as hardware
            // would; the mlx5 hot path runs against it unchanged. Started before the pin.
            p.start_device_thread().map_err(|e| e.to_string())?;
            let r = pin(cpu).and_then(|()| device_sweep(&mut p, o));
            p.stop_device_thread();
            with_pcie_runs(o, r?)
        }
        Where::Verbs => {
            pin(cpu)?;
            let dev = o.device.as_deref().unwrap_or_default();
            let mut p = VerbsDevice::open(dev).map_err(|e| e.to_string())?;
            device_sweep(&mut p, o)
        }
        Where::Mlx5 => {
            pin(cpu)?;
            let dev = o.device.as_deref().unwrap_or_default();
            let mut p = Mlx5Device::open(dev).map_err(|e| e.to_string())?;
            with_pcie_runs(o, device_sweep(&mut p, o)?)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::batching::Signal;

    #[test]
    fn wqebbs_of_a_write_and_a_ud_send_by_hand() {
        let ud = |payload, size| Config {
            op: Op::UdSend,
            mode: Mode::Db8,
            signal: Signal::Every(1),
            payload,
            size,
        };
        // ctrl 16 + datagram 48 + (4 + 8 -> 16) = 80 bytes: two WQEBBs.
        assert_eq!(wqebbs(&ud(PayloadKind::Inline, 8)), 2);
        // 64 + (4 + 60 = 64) = 128: two; 64 + (4 + 76 = 80) = 144: three.
        assert_eq!(wqebbs(&ud(PayloadKind::Inline, 60)), 2);
        assert_eq!(wqebbs(&ud(PayloadKind::Inline, 76)), 3);
        // 64 + one data segment 16 = 80: two, whatever the size.
        assert_eq!(wqebbs(&ud(PayloadKind::Sge, 4096)), 2);
        let c = |payload, size| Config {
            op: Op::Write,
            mode: Mode::Db8,
            signal: Signal::Every(1),
            payload,
            size,
        };
        // ctrl 16 + raddr 16 + (4 + 8 -> 16) = 48 bytes: one WQEBB.
        assert_eq!(wqebbs(&c(PayloadKind::Inline, 8)), 1);
        // 32 + (4 + 28 -> 32) = 64: still one.
        assert_eq!(wqebbs(&c(PayloadKind::Inline, 28)), 1);
        // 32 + (4 + 64 -> 80) = 112: two.
        assert_eq!(wqebbs(&c(PayloadKind::Inline, 64)), 2);
        // 32 + (4 + 128 -> 144) = 176: three.
        assert_eq!(wqebbs(&c(PayloadKind::Inline, 128)), 3);
        // 32 + one data segment 16 = 48: one, whatever the size.
        assert_eq!(wqebbs(&c(PayloadKind::Sge, 4096)), 1);
    }
}
