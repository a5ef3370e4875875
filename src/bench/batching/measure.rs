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
use crate::providers::mlx5::{Mlx5Device, Mlx5Qp, Owners};
use crate::providers::sim::SimDevice;
use crate::providers::verbs::VerbsDevice;
use crate::providers::{
    Access, Completion, CompletionQueue, ConnectOpts, MemoryRegion, Pages, Provider, QpCaps,
    QpConfig, QpType, QueuePair, RegisteredBuf, SendQueue, SendWr,
};

use super::{Config, Mode, Params, PayloadKind, Where, MAX_INLINE};
use rdma_direct_rig as plain;

/// Send queue depth on devices.
const DEPTH: u32 = 256;
/// The poster yields its core after waiting this long for a completion (a full window of
/// [`DEPTH`] WQEs takes about 50 µs on the sim when the device thread has its own core).
const YIELD_AFTER_US: u128 = 500;

/// One measured point.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stat {
    pub batch: u32,
    pub wqes: u32,
    pub reps: u32,
    /// ns per WQE: median, p10, p90, min, max.
    pub med: f64,
    pub p10: f64,
    pub p90: f64,
    pub min: f64,
    pub max: f64,
    /// Doorbells rung per second (median sample).
    pub db_per_s: f64,
    /// WQEs per doorbell the device saw (sim only).
    pub dev_wqes_per_db: Option<f64>,
    /// CQEs the device wrote per WQE (sim only): a check of the PCIe replay's CQE count.
    pub dev_cqes_per_wqe: Option<f64>,
    /// What a ConnectX would move over PCIe for this point's requests (mlx5 providers).
    pub pcie: Option<Counts>,
}

impl Stat {
    pub fn mpps(&self) -> f64 {
        1e3 / self.med
    }
}

/// Whether the sweep ends before `round`: a stop was asked for ([`Params::stop`]: a caught
/// Ctrl-C, say) and every point has at least one recorded sample. The points then carry
/// the samples taken ([`Stat::reps`], the `samples` of the JSON).
fn stop_after(o: &Params, round: u32) -> bool {
    round > o.warmup && o.stop.is_some_and(|s| s.requested())
}

/// Sorted samples (ns/WQE) into a [`Stat`].
fn summarize(batch: u32, wqes: u32, mut ns: Vec<f64>) -> Stat {
    ns.sort_by(|a, b| a.total_cmp(b));
    let n = ns.len();
    let at = |p: f64| ns[((p * (n - 1) as f64).round() as usize).min(n - 1)];
    let med = at(0.5);
    Stat {
        batch,
        wqes,
        reps: n as u32,
        med,
        p10: at(0.1),
        p90: at(0.9),
        min: ns[0],
        max: ns[n - 1],
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
    // Room for the replay with WQEs of up to 4 WQEBBs (inline payloads up to MAX_INLINE).
    let mut lb = plain::Loopback::new((4 * total).next_power_of_two().max(256));
    lb.qp.set_doorbell_mode(c.mode.doorbell());
    let mut tap = plain::tap::Tap::new(&lb.dev, 16, 64);
    let sge = lb.sge(c.size);
    let data = vec![0x5au8; c.size.min(MAX_INLINE) as usize];
    let op = match c.payload {
        PayloadKind::Inline => plain::BenchOp::WriteInline,
        PayloadKind::Sge => plain::BenchOp::Write,
    };
    let mut i = 0u32;
    while i < total {
        for _ in 0..batch {
            let mut wr = lb.wr(op, &sge, &data, u64::from(i));
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
    op: plain::BenchOp,
    data: Vec<u8>,
    samples: Vec<f64>,
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
        // samples before each timed one leave every line it touches in the cache.
        let sq = total.next_power_of_two().max(64);
        let mut lb = plain::Loopback::new(sq);
        lb.qp.set_doorbell_mode(c.mode.doorbell());
        Ok(PlainPoint {
            lb,
            c,
            batch,
            total,
            op: match c.payload {
                PayloadKind::Inline => plain::BenchOp::WriteInline,
                PayloadKind::Sge => plain::BenchOp::Write,
            },
            data: vec![0x5au8; c.size.min(MAX_INLINE) as usize],
            samples: Vec::with_capacity(o.reps as usize),
        })
    }

    /// One sample: post and ring `total` WQEs (timed), let the rig write the CQEs (not
    /// timed: the device's work), poll them (timed). Returns ns per WQE.
    fn sample(&mut self) -> Result<f64, String> {
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
        let mut out = [Completion::EMPTY; 64];
        let mut got = 0u32;
        while got < signaled {
            let k = self.lb.cq.poll(&mut out);
            if k == 0 {
                return Err(format!("the CQ ran dry after {got} of {signaled}"));
            }
            got += k as u32;
        }
        Ok(())
    }

    /// Untimed samples taken before each timed one (see [`plain_sweep`]).
    fn warm_samples(&self) -> u32 {
        (2 * self.total.next_power_of_two().max(64)).div_ceil(self.total)
    }
}

/// Every point of the sweep, sampled round-robin (one sample of each point per round), so
/// that a slow phase of a busy machine hits all configurations alike.
fn plain_sweep(o: &Params) -> Result<Vec<(Config, Vec<Stat>)>, String> {
    let mut pts = Vec::new();
    for c in o.configs() {
        for &b in &o.batches {
            pts.push(PlainPoint::new(o, c, b)?);
        }
    }
    for round in 0..o.warmup + o.reps {
        if stop_after(o, round) {
            break;
        }
        for p in pts.iter_mut() {
            // Each point has its own queues: untimed samples over the whole SQ and CQ ring
            // bring them back into the cache the other points used, as a steady stream of
            // posts would keep them.
            for _ in 0..p.warm_samples() {
                p.sample()?;
            }
            let ns = p.sample()?;
            if round >= o.warmup {
                p.samples.push(ns);
            }
        }
    }
    let mut res: Vec<(Config, Vec<Stat>)> = Vec::new();
    for p in pts {
        let st = summarize(p.batch, p.total, p.samples);
        match res.last_mut() {
            Some((c, v)) if *c == p.c => v.push(st),
            _ => res.push((p.c, vec![st])),
        }
    }
    Ok(res)
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

/// Two connected RC QPs and their memory. Field order is drop order: QPs and MRs before
/// the PD, the memory last.
struct Bed<P: Provider> {
    cqp: P::Qp,
    ccq: P::Cq,
    sqp: P::Qp,
    _scq: P::Cq,
    /// The client's memory (the WRITEs' source) and the server's (their target).
    cmem: RegisteredBuf<P::Mr>,
    smem: RegisteredBuf<P::Mr>,
    _pd: P::Pd,
}

fn bed<P: Target>(p: &mut P, o: &Params, inline: u32, max_size: u32) -> crate::Result<Bed<P>> {
    let len = (max_size as usize).max(64);
    let pd = p.alloc_pd()?;
    let caps = QpCaps {
        max_send_wr: DEPTH,
        max_recv_wr: 1,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: inline,
    };
    let cfg = QpConfig {
        qp_type: QpType::Rc,
        caps,
        sq_sig_all: false,
    };
    let copts = ConnectOpts {
        port: o.port,
        gid_index: o.gid_index,
        ..ConnectOpts::default()
    };
    // Each CQ absorbs its QP's queues (max_send_wr + max_recv_wr), as create_qp requires.
    let mut ccq = p.create_cq(2 * DEPTH)?;
    let mut scq = p.create_cq(2 * DEPTH)?;
    let mut cqp = p.create_qp(&pd, &mut ccq, None, None, &cfg)?;
    let mut sqp = p.create_qp(&pd, &mut scq, None, None, &cfg)?;
    let cmem = p.alloc_buf(&pd, len, Access::ALL, Pages::Normal)?;
    let smem = p.alloc_buf(&pd, len, Access::ALL, Pages::Normal)?;
    connect_pair(p, &mut cqp, &mut sqp, &copts)?;
    Ok(Bed {
        cqp,
        ccq,
        sqp,
        _scq: scq,
        cmem,
        smem,
        _pd: pd,
    })
}

/// One sample: `total` WRITEs in batches of `batch`, at most [`DEPTH`] outstanding, until
/// all completed. Returns the elapsed ns.
fn device_sample<P: Target>(
    p: &mut P,
    b: &mut Bed<P>,
    c: &Config,
    batch: u32,
    total: u32,
    data: &[u8],
) -> Result<f64, String> {
    let raddr = b.smem.addr();
    let rkey = b.smem.rkey();
    let sges = [b.cmem.mr().sge(0, c.size)];
    let mut wcs = [Completion::EMPTY; 32];
    let (mut posted, mut done) = (0u32, 0u32);
    let t0 = Instant::now();
    let mut idle_since: Option<Instant> = None;
    let mut spins = 0u32;
    while done < total {
        while posted < total && posted - done + batch <= DEPTH {
            let sq = b.cqp.sq();
            for _ in 0..batch {
                let mut wr = SendWr::write(u64::from(posted), &sges, raddr, rkey);
                if c.payload == PayloadKind::Inline {
                    wr = wr.inline(data);
                }
                if c.signal.wants(posted, batch, total) {
                    wr = wr.signaled();
                }
                if let Err(r) = sq.post(wr) {
                    sq.ring();
                    return Err(format!("post WRITE #{posted}: {}", r.error));
                }
                posted += 1;
            }
            sq.ring();
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
                    "no completion for 10 s ({done} of {total} WRITEs completed)"
                ));
            }
            continue;
        }
        idle_since = None;
        spins = 0;
        for w in &wcs[..m] {
            if !w.is_ok() {
                return Err(format!(
                    "WRITE #{} failed: {} (vendor_err {:#x})",
                    w.wr_id, w.status, w.vendor_err
                ));
            }
            // In order: the completion of request j retires every request up to j.
            done = done.max(w.wr_id as u32 + 1);
        }
    }
    Ok(t0.elapsed().as_nanos() as f64)
}

fn device_sweep<P: Target>(p: &mut P, o: &Params) -> Result<Vec<(Config, Vec<Stat>)>, String> {
    let max_size = o.sizes.iter().copied().max().unwrap_or(8);
    let inline = if o.payloads.contains(&PayloadKind::Inline) {
        MAX_INLINE
    } else {
        0
    };
    let mut b = bed(p, o, inline, max_size).map_err(|e| e.to_string())?;
    let data = vec![0x5au8; max_size.min(MAX_INLINE) as usize];
    // (config, batch, ns/WQE samples, device WQEs per doorbell samples, device CQEs per
    // WQE samples)
    type Samples = (Config, u32, Vec<f64>, Vec<f64>, Vec<f64>);
    let mut pts: Vec<Samples> = Vec::new();
    for c in o.configs() {
        for &batch in &o.batches {
            pts.push((c, batch, Vec::new(), Vec::new(), Vec::new()));
        }
    }
    // Round-robin over the points, as on plain memory.
    for round in 0..o.warmup + o.reps {
        if stop_after(o, round) {
            break;
        }
        for (c, batch, ns, dev, cqes) in pts.iter_mut() {
            P::set_mode(&mut b.cqp, c.mode);
            let total = o.sample_wqes(*batch);
            let data = &data[..c.size.min(MAX_INLINE) as usize];
            let before = p.counters();
            let t = device_sample(p, &mut b, c, *batch, total, data)?;
            if round >= o.warmup {
                ns.push(t / total as f64);
                if let (Some((d0, w0, c0)), Some((d1, w1, c1))) = (before, p.counters()) {
                    if d1 > d0 {
                        dev.push((w1 - w0) as f64 / (d1 - d0) as f64);
                    }
                    cqes.push((c1 - c0) as f64 / f64::from(total));
                }
            }
        }
    }
    let mut res: Vec<(Config, Vec<Stat>)> = Vec::new();
    for (c, batch, ns, mut dev, mut cqes) in pts {
        let mut st = summarize(batch, o.sample_wqes(batch), ns);
        if !dev.is_empty() {
            dev.sort_by(|a, b| a.total_cmp(b));
            st.dev_wqes_per_db = Some(dev[dev.len() / 2]);
        }
        if !cqes.is_empty() {
            cqes.sort_by(|a, b| a.total_cmp(b));
            st.dev_cqes_per_wqe = Some(cqes[cqes.len() / 2]);
        }
        match res.last_mut() {
            Some((k, v)) if *k == c => v.push(st),
            _ => res.push((c, vec![st])),
        }
    }
    // The server QP only receives WRITEs: nothing to poll.
    let _ = &b.sqp;
    Ok(res)
}

pub fn sweep(o: &Params) -> Result<Vec<(Config, Vec<Stat>)>, String> {
    match o.at {
        Where::Plain => with_pcie(o, plain_sweep(o)?),
        Where::Sim => {
            let mut p = SimDevice::new();
            // Device-thread mode: a thread plays the HCA, polling doorbells, as hardware
            // would; the mlx5 hot path runs against it unchanged.
            p.start_device_thread().map_err(|e| e.to_string())?;
            let r = device_sweep(&mut p, o);
            p.stop_device_thread();
            with_pcie(o, r?)
        }
        Where::Verbs => {
            let dev = o.device.as_deref().unwrap_or_default();
            let mut p = VerbsDevice::open(dev).map_err(|e| e.to_string())?;
            device_sweep(&mut p, o)
        }
        Where::Mlx5 => {
            let dev = o.device.as_deref().unwrap_or_default();
            let mut p = Mlx5Device::open(dev).map_err(|e| e.to_string())?;
            with_pcie(o, device_sweep(&mut p, o)?)
        }
    }
}
