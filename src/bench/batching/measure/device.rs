//! The device loop of `bench batching` (sim, verbs, mlx5): client QPs connected to server
//! QPs of their own (RC for WRITE, UD for SEND). Contract: [`device_sweep`] samples every
//! point round-robin after warm-up rounds; the timed region holds only the post, the ring and
//! the poll (UD receives are checked and posted again between samples, untimed); [`Target`]
//! is what a provider gives beyond [`Provider`] (doorbell mode, device counters). A wait
//! that sees no completion for its stall time ([`super::STALL`] in a sweep) is the library's
//! [`crate::Error::Stalled`], counted by [`Stall`].

use std::time::{Duration, Instant};

use crate::error::Result;
use crate::providers::helpers::Stall;

use crate::providers::flow::connect_pair;
use crate::providers::mlx5::{Mlx5Device, Mlx5Qp, Owners};
use crate::providers::sim::SimDevice;
use crate::providers::verbs::VerbsDevice;
use crate::providers::{
    Access, Completion, CompletionQueue, ConnectOpts, MemoryRegion, Pages, Provider, QpCaps,
    QpConfig, QpType, QueuePair, RecvQueue, RecvWr, RegisteredBuf, SendQueue, SendWr, UdDest,
};

use super::super::stats::median;
use super::super::{Config, Mode, Op, Params, PayloadKind, MAX_INLINE, MAX_QPS};
use super::{failed, stop_after, summarize, Measured, Stat, STALL};

/// Send queue depth on devices.
const DEPTH: u32 = 256;
/// Most receives a UD server QP holds (the sim's receive queue limit; rxe's is the same).
const MAX_RECVS: u32 = 1 << 14;
/// Bytes a UD receive buffer gives the GRH before the payload.
const GRH: u32 = crate::wire::IBV_GRH_LEN as u32;
/// The poster yields its core after waiting this long for a completion (a full window of
/// [`DEPTH`] WQEs takes about 50 µs on the sim when the device thread has its own core).
const YIELD_AFTER_US: u128 = 500;

/// What the sweep needs from a provider beyond [`Provider`].
pub(super) trait Target: Provider {
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
pub(super) struct Bed<P: Provider> {
    pub(super) cqps: Vec<P::Qp>,
    sqps: Vec<P::Qp>,
    /// UD: the address handle towards each client QP's peer, and the peer's QPN.
    ahs: Vec<(P::Ah, u32)>,
    pub(super) ccq: P::Cq,
    scq: P::Cq,
    /// The client's memory (the source) and the server's (the WRITEs' target).
    pub(super) cmem: RegisteredBuf<P::Mr>,
    pub(super) smem: RegisteredBuf<P::Mr>,
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
/// all `total` arrived, check each, and post each receive again on its QP (its wr_id). None
/// for `stall`: [`crate::Error::Stalled`] (`UD receives`, owed the datagrams not arrived).
fn receive_sample<P: Target>(
    p: &mut P,
    b: &mut Bed<P>,
    size: u32,
    total: u32,
    stall: Duration,
) -> Result<()> {
    let sges = [b.smem.mr().sge(0, size + GRH)];
    let mut wcs = [Completion::EMPTY; 32];
    let mut got = 0u32;
    let mut stalled = Stall::new(stall);
    while got < total {
        let m = b.scq.poll(&mut wcs);
        if m == 0 {
            p.progress();
            if stalled.idle("UD receives", || {
                format!("{} of {total} datagrams", total - got)
            })? {
                std::thread::yield_now();
            }
            continue;
        }
        stalled.progressed();
        for w in &wcs[..m] {
            if !w.is_ok() || w.byte_len != size + GRH {
                return Err(failed(format!(
                    "UD SEND: a receive on server QP {} completed with {} and {} bytes \
                     (expected {} = the {GRH}-byte GRH and {size} payload bytes)",
                    w.wr_id,
                    w.status,
                    w.byte_len,
                    size + GRH
                )));
            }
            let q = (w.wr_id as usize).min(b.sqps.len() - 1);
            if let Err(r) = b.sqps[q].rq().post_recv(RecvWr::new(w.wr_id, &sges)) {
                return Err(failed(format!(
                    "UD SEND: posting a receive again: {}",
                    r.error
                )));
            }
        }
        got += m as u32;
    }
    for sqp in b.sqps.iter_mut() {
        sqp.rq().ring();
    }
    Ok(())
}

pub(super) fn bed<P: Target>(
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
/// Returns the elapsed ns. No completion for `stall`: [`crate::Error::Stalled`] (`sample`,
/// owed the requests not completed).
#[allow(clippy::too_many_arguments)]
fn device_sample<P: Target>(
    p: &mut P,
    b: &mut Bed<P>,
    c: &Config,
    batch: u32,
    total: u32,
    window: u32,
    data: &[u8],
    stall: Duration,
) -> Result<f64> {
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
    let mut stalled = Stall::new(stall);
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
                    return Err(failed(format!("post {what} #{posted}: {}", r.error)));
                }
                posted_q[q] += 1;
                posted += 1;
            }
            // A refused doorbell (libibverbs' ibv_post_send) took its requests back: say so
            // now rather than wait for completions that cannot come.
            if let Err(e) = sq.try_ring() {
                return Err(failed(format!(
                    "ring after {what} #{}: {e}",
                    posted.saturating_sub(1)
                )));
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
            stalled.idle("sample", || {
                format!("{} of {total} {what}s ({done} completed)", total - done)
            })?;
            continue;
        }
        idle_since = None;
        spins = 0;
        stalled.progressed();
        for w in &wcs[..m] {
            if !w.is_ok() {
                return Err(failed(format!(
                    "{what} #{} on QP {} failed: {} (vendor_err {:#x})",
                    w.wr_id & 0xffff_ffff,
                    w.wr_id >> 32,
                    w.status,
                    w.vendor_err
                )));
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

pub(super) fn device_sweep<P: Target>(p: &mut P, o: &Params) -> Result<Measured> {
    let max_size = o.sizes.iter().copied().max().unwrap_or(8);
    let inline = if o.payloads.contains(&PayloadKind::Inline) {
        MAX_INLINE
    } else {
        0
    };
    let ops = |op: Op| o.configs().iter().any(|c| c.op == op);
    let mut rc = match ops(Op::Write) {
        true => Some(bed(p, o, Op::Write, inline, max_size)?),
        false => None,
    };
    if ops(Op::UdSend) && recvs_per_qp(o) > MAX_RECVS {
        return Err(failed(format!(
            "Params::wqes {}: UD SEND posts each server QP's receives for a whole sample \
             ahead, at most {MAX_RECVS} per QP; fewer WQEs per sample or more QPs \
             (Params::qps) fit",
            o.wqes
        )));
    }
    let mut ud = match ops(Op::UdSend) {
        true => Some(bed(p, o, Op::UdSend, inline, max_size)?),
        false => None,
    };
    if let Some(b) = &ud {
        if max_size > b.mtu {
            return Err(failed(format!(
                "-s {max_size}: a UD SEND carries one MTU at most ({} bytes here)",
                b.mtu
            )));
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
                let t = device_sample(p, b, &c, pt.batch, total, window, data, STALL)?;
                if c.op == Op::UdSend {
                    receive_sample(p, b, c.size, total, STALL)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::batching::{Signal, Where};
    use crate::bench::cpu::Pin;
    use crate::Error;

    fn ud_params() -> Params {
        Params {
            at: Where::Sim,
            device: None,
            port: 1,
            gid_index: 0,
            batches: vec![1],
            modes: vec![Mode::Db8],
            signals: vec![Signal::Every(1)],
            payloads: vec![PayloadKind::Inline],
            sizes: vec![8],
            ops: vec![Op::UdSend],
            qps: 1,
            reps: 1,
            warmup: 0,
            wqes: 4,
            runs: 1,
            window: None,
            latency: false,
            threads: 1,
            verbs_baseline: false,
            pin: Pin::Off,
            stop: None,
        }
    }

    /// Receives owed that never arrive (no datagram was sent) end the wait with the
    /// library's stall error, naming who waited, how long and what was owed; as the CLI
    /// prints it.
    #[test]
    fn receives_that_never_arrive_are_a_stall() {
        let o = ud_params();
        let mut p = SimDevice::new();
        let mut b = bed(&mut p, &o, Op::UdSend, MAX_INLINE, 8).unwrap();
        let stall = Duration::from_millis(20);
        let e = receive_sample(&mut p, &mut b, 8, 3, stall).unwrap_err();
        match &e {
            Error::Stalled {
                context,
                waited,
                owed,
            } => assert_eq!(
                (*context, *waited, owed.as_str()),
                ("UD receives", stall, "3 of 3 datagrams")
            ),
            e => panic!("not a stall: {e:?}"),
        }
        assert!(
            e.to_string()
                .starts_with("UD receives: no completion for 0.02 s while owed 3 of 3 datagrams"),
            "{e}"
        );
    }

    /// A sample whose completions never come (here a window of 0 lets no request out) is a
    /// stall too, owed every request; the same bed with a window completes.
    #[test]
    fn a_sample_whose_completions_never_come_is_a_stall() {
        let mut o = ud_params();
        o.ops = vec![Op::Write];
        let mut p = SimDevice::new();
        let mut b = bed(&mut p, &o, Op::Write, MAX_INLINE, 8).unwrap();
        let c = o.configs()[0];
        let stall = Duration::from_millis(20);
        let e = device_sample(&mut p, &mut b, &c, 1, 4, 0, &[0; 8], stall).unwrap_err();
        assert!(
            e.to_string().starts_with(
                "sample: no completion for 0.02 s while owed 4 of 4 WRITEs (0 completed)"
            ),
            "{e}"
        );
        assert!(
            matches!(
                e,
                Error::Stalled {
                    context: "sample",
                    ..
                }
            ),
            "{e:?}"
        );
        device_sample(&mut p, &mut b, &c, 1, 4, 4, &[0; 8], stall).unwrap();
    }
}
