//! The measuring loops of `bench batching`, one per kind of provider: plain memory (the mlx5
//! queues with the bench rig as the device) and devices (sim, verbs, mlx5), and [`sweep`],
//! which picks one for [`Params::at`].
//!
//! Contract: every point of the sweep is sampled round-robin after warm-up rounds; a sample
//! times many batches and yields ns per WQE; [`Stat`] summarizes a point's samples. The
//! timed regions hold only the post, the ring and the poll (the rig's device work is
//! outside them); nothing here prints. A wait for completions that sees none for [`STALL`]
//! ends the sweep with the library's [`Error::Stalled`] (what waited, how long, what was
//! owed); every other failure is an [`Error::Failed`] saying what and where.

use std::time::Duration;

use crate::error::{Error, Result};

use crate::pcie::Counts;
use crate::providers::helpers::poll_wait;
use crate::providers::mlx5::Mlx5Device;
use crate::providers::sim::SimDevice;
use crate::providers::verbs::VerbsDevice;
use crate::providers::{Completion, MemoryRegion, QueuePair, SendQueue, SendWr};

use super::stats::{bootstrap_median_ci, median, quantile, spread, BOOTSTRAP_RESAMPLES};
use super::{Config, Mode, Op, Params, PayloadKind, Where, MAX_INLINE};
use crate::bench::cpu::{self, Chosen};
use rdma_direct_rig as plain;

mod device;
mod plain_memory;

use device::{bed, device_sweep};
use plain_memory::plain_sweep;

/// A wait for completions (a sample's, its UD receives', the verbs baseline's first post)
/// that sees none for this long ends the sweep: the device or the peer is gone.
pub const STALL: Duration = Duration::from_secs(10);

/// A failure of the sweep that is no stall, as the library's error.
fn failed(detail: impl Into<String>) -> Error {
    Error::Failed {
        context: "sweep",
        detail: detail.into(),
    }
}

/// `e` said to come from `what` (`verbs baseline`, `thread 1`): a stall stays one, `what`
/// joining what it owed; anything else becomes a failure whose text says `what` first.
fn within(what: &str, e: Error) -> Error {
    match e {
        Error::Stalled {
            context,
            waited,
            owed,
        } => Error::Stalled {
            context,
            waited,
            owed: format!("{owed} ({what})"),
        },
        Error::Failed {
            context: "sweep",
            detail,
        } => failed(format!("{what}: {detail}")),
        e => failed(format!("{what}: {e}")),
    }
}

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
pub fn pcie_counts(o: &Params, c: &Config, batch: u32) -> std::result::Result<Counts, String> {
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
fn with_pcie(o: &Params, mut res: Vec<(Config, Vec<Stat>)>) -> Result<Vec<(Config, Vec<Stat>)>> {
    for (c, pts) in res.iter_mut() {
        for p in pts.iter_mut() {
            p.pcie = Some(pcie_counts(o, c, p.batch).map_err(failed)?);
        }
    }
    Ok(res)
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

/// Pin the calling thread to `cpu` (when chosen).
fn pin(cpu: &Option<Chosen>) -> Result<()> {
    match cpu {
        Some(c) => crate::providers::helpers::pin_current_thread(c.cpu).map_err(|e| {
            failed(format!(
                "pinning the measuring thread to CPU {} ({}): {e}; pin to another (Pin::Cpu) or \
                 run unpinned (Pin::Off)",
                c.cpu, c.why
            ))
        }),
        None => Ok(()),
    }
}

/// The sweep of `o`, on a thread of its own pinned to the CPU [`cpu::choose`] picks for
/// [`Params::pin`] (the caller's thread keeps its affinity). On the sim the device thread is
/// started before the pinning, so it does not inherit the measuring thread's CPU. With
/// [`Params::threads`] > 1, that many measuring threads side by side, each pinned to a CPU
/// of its own ([`cpu::choose_n`]) and running the whole sweep on queues of its own.
pub fn sweep(o: &Params) -> Result<Sweep> {
    let dev = match o.at {
        Where::Verbs | Where::Mlx5 => o.device.as_deref(),
        Where::Plain | Where::Sim => None,
    };
    let n = o.threads.max(1) as usize;
    let chosen = cpu::choose_n(o.pin, dev, n).map_err(failed)?;
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
                    .unwrap_or_else(|_| Err(failed("the measuring thread panicked")))
                    .map_err(|e| {
                        if n > 1 {
                            within(&format!("thread {i}"), e)
                        } else {
                            e
                        }
                    })?;
                Ok(ThreadSweep {
                    points,
                    cpu: c.clone(),
                    runs,
                    skipped,
                })
            })
            .collect::<Result<_>>()
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

fn with_pcie_runs(o: &Params, r: Measured) -> Result<Measured> {
    Ok((with_pcie(o, r.0)?, r.1))
}

/// The verbs baseline of an mlx5 sweep ([`Params::verbs_baseline`]): the same configs with
/// one `ibv_post_send` per batch on the same device, after the mlx5 points. A device whose
/// verbs data path refuses to post (`EOPNOTSUPP`: the stand-in models the direct path only)
/// gives one line saying so instead of points. Each point set is sampled round-robin within
/// itself; the two sets run one after the other.
fn verbs_baseline(o: &Params, res: &mut Measured) -> Result<Vec<String>> {
    let baseline = |e| within("verbs baseline", e);
    let dev = o.device.as_deref().unwrap_or_default();
    let mut p = VerbsDevice::open(dev).map_err(baseline)?;
    let mut v = o.clone();
    v.at = Where::Verbs;
    v.modes = vec![Mode::Verbs];
    // One signaled WRITE first: does libibverbs post at all here?
    {
        let mut b = bed(&mut p, &v, Op::Write, 0, 8).map_err(baseline)?;
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
        poll_wait(&mut p, &mut b.ccq, &mut wcs, STALL).map_err(baseline)?;
    }
    let (pts, runs) = device_sweep(&mut p, &v).map_err(baseline)?;
    res.0.extend(pts);
    res.1 = res.1.min(runs);
    Ok(Vec::new())
}

fn measure(o: &Params, cpu: &Option<Chosen>) -> Result<(Measured, Vec<String>)> {
    if o.verbs_baseline && o.at == Where::Mlx5 {
        let mut r = measure_one(o, cpu)?;
        let skipped = verbs_baseline(o, &mut r)?;
        return Ok((r, skipped));
    }
    Ok((measure_one(o, cpu)?, Vec::new()))
}

fn measure_one(o: &Params, cpu: &Option<Chosen>) -> Result<Measured> {
    match o.at {
        Where::Plain => {
            pin(cpu)?;
            with_pcie_runs(o, plain_sweep(o).map_err(failed)?)
        }
        Where::Sim => {
            let mut p = SimDevice::new();
            // Device-thread mode: a thread plays the HCA, polling doorbells, as hardware
            // would; the mlx5 hot path runs against it unchanged. Started before the pin.
            p.start_device_thread()?;
            let r = pin(cpu).and_then(|()| device_sweep(&mut p, o));
            p.stop_device_thread();
            with_pcie_runs(o, r?)
        }
        Where::Verbs => {
            pin(cpu)?;
            let dev = o.device.as_deref().unwrap_or_default();
            let mut p = VerbsDevice::open(dev)?;
            device_sweep(&mut p, o)
        }
        Where::Mlx5 => {
            pin(cpu)?;
            let dev = o.device.as_deref().unwrap_or_default();
            let mut p = Mlx5Device::open(dev)?;
            with_pcie_runs(o, device_sweep(&mut p, o)?)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::batching::Signal;

    /// Where a sweep's error came from joins it: a stall stays a stall (the place joins what
    /// was owed), a failure says the place once, first.
    #[test]
    fn within_keeps_a_stall_and_says_where() {
        let waited = STALL;
        let stall = Error::Stalled {
            context: "sample",
            waited,
            owed: "3 of 8 WRITEs (5 completed)".into(),
        };
        match within("thread 1", stall) {
            Error::Stalled {
                context: "sample",
                waited: w,
                owed,
            } => assert_eq!(
                (w, owed.as_str()),
                (waited, "3 of 8 WRITEs (5 completed) (thread 1)")
            ),
            e => panic!("not a stall: {e:?}"),
        }
        let e = within("verbs baseline", failed("the CQ ran dry"));
        assert_eq!(e.to_string(), "sweep: verbs baseline: the CQ ran dry");
    }

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
