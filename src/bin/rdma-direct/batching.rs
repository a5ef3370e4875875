//! `rdma-direct bench batching`: the doorbell-batching curve in one command.
//!
//! Contract:
//! - A sweep over batch sizes (requests per doorbell, default 1, 2, 4, ..., 64) for every
//!   configuration: doorbell mode x signaling period x payload (inline / one SGE) x message
//!   size. The operation is an RDMA WRITE of `size` bytes.
//! - Where it runs (`--provider`):
//!   - `plain` (the default without `-d`): the mlx5 provider's queues on plain memory with
//!     this program as the device (the bench rig `benches/rig/plain.rs`). The figure is the
//!     driver's own cost per WQE: post (WQE build), ring (dbrec, barriers, doorbell or
//!     BlueFlame store) and the poll of the completions; the rig's "device" work (writing
//!     CQEs) is outside the timed region. With `--instructions` the command re-runs itself
//!     under callgrind to count instructions per WQE instead.
//!   - `sim`: the software mlx5 device with its device thread consuming the doorbells:
//!     end-to-end message rate through the real doorbell path, the doorbells rung per second
//!     and the WQEs per doorbell the device saw (it may see two doorbells as one).
//!   - `verbs` (the default with `-d DEV`): libibverbs on DEV, one `ibv_post_send` with a
//!     linked list per batch (on rxe: one `write()` system call per doorbell).
//!   - `mlx5` (with `-d DEV`): the hand-rolled mlx5 provider on a ConnectX NIC (untested:
//!     no such NIC was available when this was written).
//! - Doorbell modes (mlx5 providers only; verbs has libmlx5's or the kernel's own):
//!   `db8` always the 8-byte doorbell; `bf-single` BlueFlame copy when exactly one WQE is
//!   staged, as libmlx5 does (its rule: `ds > 1` and it fits the BlueFlame half), the 8-byte
//!   doorbell for lists. A BlueFlame copy of the last WQE of a list (`bf-last`) needs a
//!   doorbell mode the mlx5 send queue does not offer; it is refused with that reason.
//! - Sound measurement: warm-up rounds (not recorded), then `--reps` rounds; a round takes
//!   one sample of every point in turn (round-robin, so a slow phase of a busy machine hits
//!   all configurations alike); each sample times many batches (about a thousand WQEs on
//!   plain memory), so the clock read costs well under 1 % of a sample. Per point: median, p10, p90, min, max of ns/WQE, and
//!   the message rate of the median.
//! - Output: one perftest-style table per configuration with the provider named and the line
//!   "plain-memory and sim figures are not hardware figures"; `--json FILE` (one object,
//!   every point with its spread); `--svg FILE` (message rate and ns/WQE against the batch
//!   size, log2 axis, one line per configuration); `--explain` derives the per-doorbell and
//!   per-WQE costs from the measured curve and says where they go.
//!
//! A child module of `bench.rs` (`bench batching`), so it shares that module's copy of the
//! plain-memory rig.

use std::fmt::Write as _;
use std::time::Instant;

use rdma_direct::providers::mlx5::{DoorbellMode, Mlx5Device, Mlx5Qp, Owners};
use rdma_direct::providers::sim::SimDevice;
use rdma_direct::providers::verbs::VerbsDevice;
use rdma_direct::providers::{
    Access, Completion, CompletionQueue, ConnectOpts, MemoryRegion, Provider, QpCaps, QpConfig,
    QpType, QueuePair, SendQueue, SendWr,
};

use super::plain;
use crate::json_value::Value;
use crate::plot::{self, Chart, Point, Series, XKind, YScale};

const USAGE: &str = "\
usage: rdma-direct bench batching [options]

The doorbell-batching curve: RDMA WRITEs posted in batches of 1, 2, 4, ... 64 requests per
doorbell, for every doorbell mode x signaling period x payload x size.

  --provider P         plain (default without -d): the mlx5 driver's own cost on plain
                       memory; sim: the software mlx5 device, device thread consuming;
                       verbs (default with -d): libibverbs on DEV, one ibv_post_send per
                       batch; mlx5: the mlx5 provider on a ConnectX NIC (untested)
  -d, --ib-dev DEV     device for verbs / mlx5
  -i, --ib-port N      port (default 1)
  -x, --gid-index N    GID index (default 0; RoCE on rxe needs the IPv4-mapped one)
  -l, --batches LIST   batch sizes, e.g. 1,2,4 (default 1,2,4,8,16,32,64; each 1..=64)
  -m, --modes LIST     doorbell modes: db8, bf-single (default both; mlx5 providers only)
  -Q, --signal LIST    signaling periods: 1 (every request), 16, batch (once per batch);
                       default 1,16,batch. The last request of a sample is always signaled
  -p, --payload LIST   inline, sge (default inline)
  -s, --size LIST      message sizes in bytes (default 8; inline at most 128)
  -r, --reps N         samples per point (default: plain 101, sim 9, verbs/mlx5 5)
  -w, --warmup N       samples thrown away first (default: plain 20, others 2)
  -n, --wqes N         WQEs per sample (default: plain 1024, sim and verbs/mlx5 2048)
      --json FILE      write the results as JSON
      --svg FILE       plot message rate and ns/WQE against the batch size
      --explain        say where the cost per WQE goes, from the measured curve
      --instructions   plain only: instructions per WQE under callgrind (needs valgrind)
  -h, --help           this text

Plain-memory and sim figures are not hardware figures.
";

/// Largest batch (the send queue depth keeps two batches in flight).
const MAX_BATCH: u32 = 64;
/// Send queue depth on devices.
const DEPTH: u32 = 256;
/// The poster yields its core after waiting this long for a completion (a full window of
/// [`DEPTH`] WQEs takes about 50 µs on the sim when the device thread has its own core).
const YIELD_AFTER_US: u128 = 500;
/// Largest inline payload asked for (fits a 256-byte BlueFlame half with its segments).
const MAX_INLINE: u32 = 128;

/// Where the sweep runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Where {
    /// mlx5 queues on plain memory, this program as the device.
    Plain,
    /// The software mlx5 device, device thread.
    Sim,
    /// libibverbs on a device.
    Verbs,
    /// The mlx5 provider on a NIC.
    Mlx5,
}

impl Where {
    fn name(self) -> &'static str {
        match self {
            Where::Plain => "plain",
            Where::Sim => "sim",
            Where::Verbs => "verbs",
            Where::Mlx5 => "mlx5",
        }
    }
    fn describe(self, dev: Option<&str>) -> String {
        match self {
            Where::Plain => "plain memory (mlx5 driver, this program plays the device)".into(),
            Where::Sim => "sim (software mlx5 device, device thread consuming)".into(),
            Where::Verbs => format!("verbs on {} (libibverbs ibv_post_send)", dev.unwrap_or("?")),
            Where::Mlx5 => format!("mlx5 on {} (hand-rolled mlx5 provider)", dev.unwrap_or("?")),
        }
    }
    fn hardware(self) -> bool {
        matches!(self, Where::Verbs | Where::Mlx5)
    }
}

/// How a batch is announced to the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The 8-byte doorbell, always.
    Db8,
    /// BlueFlame for a single staged WQE (libmlx5's rule), else the 8-byte doorbell.
    BfSingle,
    /// Whatever `ibv_post_send` does (verbs).
    Verbs,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Db8 => "db8",
            Mode::BfSingle => "bf-single",
            Mode::Verbs => "ibv_post_send",
        }
    }
    fn doorbell(self) -> DoorbellMode {
        match self {
            Mode::BfSingle => DoorbellMode::Auto,
            _ => DoorbellMode::Doorbell,
        }
    }
}

/// Which requests ask for a completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// Every `n`-th request (and the last of a sample).
    Every(u32),
    /// The last request of each batch.
    PerBatch,
}

impl Signal {
    fn name(self) -> String {
        match self {
            Signal::Every(1) => "signal every WR".into(),
            Signal::Every(n) => format!("signal every {n}"),
            Signal::PerBatch => "signal once per batch".into(),
        }
    }
    fn key(self) -> String {
        match self {
            Signal::Every(n) => n.to_string(),
            Signal::PerBatch => "batch".into(),
        }
    }
    /// Is request `i` of a sample of `total`, in batches of `batch`, signaled?
    #[inline(always)]
    fn wants(self, i: u32, batch: u32, total: u32) -> bool {
        i + 1 == total
            || match self {
                Signal::Every(n) => (i + 1) % n == 0,
                Signal::PerBatch => (i + 1) % batch == 0,
            }
    }
}

/// Payload kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PayloadKind {
    /// Copied into the WQE.
    Inline,
    /// One scatter/gather entry.
    Sge,
}

impl PayloadKind {
    fn name(self) -> &'static str {
        match self {
            PayloadKind::Inline => "inline",
            PayloadKind::Sge => "sge",
        }
    }
}

/// One line of the curve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    mode: Mode,
    signal: Signal,
    payload: PayloadKind,
    size: u32,
}

/// The parsed command line.
#[derive(Clone, Debug)]
pub struct Opts {
    at: Where,
    device: Option<String>,
    port: u8,
    gid_index: u8,
    batches: Vec<u32>,
    modes: Vec<Mode>,
    signals: Vec<Signal>,
    payloads: Vec<PayloadKind>,
    sizes: Vec<u32>,
    reps: u32,
    warmup: u32,
    wqes: u32,
    json: Option<String>,
    svg: Option<String>,
    explain: bool,
    instructions: bool,
}

/// One measured point.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stat {
    batch: u32,
    wqes: u32,
    reps: u32,
    /// ns per WQE: median, p10, p90, min, max.
    med: f64,
    p10: f64,
    p90: f64,
    min: f64,
    max: f64,
    /// Doorbells rung per second (median sample).
    db_per_s: f64,
    /// WQEs per doorbell the device saw (sim only).
    dev_wqes_per_db: Option<f64>,
}

impl Stat {
    fn mpps(&self) -> f64 {
        1e3 / self.med
    }
}

fn list<T>(flag: &str, v: &str, f: impl Fn(&str) -> Option<T>) -> Result<Vec<T>, String> {
    let out: Option<Vec<T>> = v.split(',').map(|s| f(s.trim())).collect();
    match out {
        Some(o) if !o.is_empty() => Ok(o),
        _ => Err(format!("{flag}: '{v}' is not a valid list")),
    }
}

/// Parse the arguments after `batching`. `Ok(None)`: help asked for.
pub fn parse(args: &[String]) -> Result<Option<Opts>, String> {
    let mut provider: Option<Where> = None;
    let mut o = Opts {
        at: Where::Plain,
        device: None,
        port: 1,
        gid_index: 0,
        batches: vec![1, 2, 4, 8, 16, 32, 64],
        modes: vec![Mode::Db8, Mode::BfSingle],
        signals: vec![Signal::Every(1), Signal::Every(16), Signal::PerBatch],
        payloads: vec![PayloadKind::Inline],
        sizes: vec![8],
        reps: 0,
        warmup: u32::MAX,
        wqes: 0,
        json: None,
        svg: None,
        explain: false,
        instructions: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (flag, attached) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (a.as_str(), None),
        };
        let mut val = || -> Result<String, String> {
            match &attached {
                Some(v) => Ok(v.clone()),
                None => it
                    .next()
                    .cloned()
                    .ok_or_else(|| format!("{flag} needs a value")),
            }
        };
        let num = |v: String| -> Result<u32, String> {
            v.parse::<u32>()
                .map_err(|_| format!("{flag}: '{v}' is not a number"))
        };
        match flag {
            "-h" | "--help" => return Ok(None),
            "--provider" => {
                let v = val()?;
                provider = Some(match v.as_str() {
                    "plain" => Where::Plain,
                    "sim" => Where::Sim,
                    "verbs" => Where::Verbs,
                    "mlx5" => Where::Mlx5,
                    "auto" => {
                        provider = None;
                        continue;
                    }
                    _ => {
                        return Err(format!(
                            "--provider: '{v}' is not plain, sim, verbs, mlx5 or auto"
                        ))
                    }
                });
            }
            "-d" | "--ib-dev" => o.device = Some(val()?),
            "-i" | "--ib-port" => {
                o.port = u8::try_from(num(val()?)?).map_err(|_| "-i: a port is 1..=255")?
            }
            "-x" | "--gid-index" => {
                o.gid_index =
                    u8::try_from(num(val()?)?).map_err(|_| "-x: a GID index is 0..=255")?
            }
            "-l" | "--batches" | "--post_list" => {
                o.batches = list(flag, &val()?, |s| s.parse::<u32>().ok())?
            }
            "-m" | "--modes" => {
                o.modes = list(flag, &val()?, |s| match s {
                    "db8" | "db" => Some(Some(Mode::Db8)),
                    "bf-single" | "bf" | "libmlx5" => Some(Some(Mode::BfSingle)),
                    "bf-last" => Some(None),
                    _ => None,
                })?
                .into_iter()
                .collect::<Option<Vec<Mode>>>()
                .ok_or_else(|| {
                    "-m bf-last: a BlueFlame copy of the last WQE of a list needs a doorbell \
                     mode the mlx5 send queue does not offer (it copies single WQEs only, as \
                     libmlx5 does); use db8 or bf-single"
                        .to_string()
                })?
            }
            "-Q" | "--signal" | "--cq-mod" => {
                o.signals = list(flag, &val()?, |s| match s {
                    "batch" | "b" => Some(Signal::PerBatch),
                    n => n.parse::<u32>().ok().filter(|&n| n >= 1).map(Signal::Every),
                })?
            }
            "-p" | "--payload" => {
                o.payloads = list(flag, &val()?, |s| match s {
                    "inline" => Some(PayloadKind::Inline),
                    "sge" => Some(PayloadKind::Sge),
                    _ => None,
                })?
            }
            "-s" | "--size" => o.sizes = list(flag, &val()?, |s| s.parse::<u32>().ok())?,
            "-r" | "--reps" => o.reps = num(val()?)?,
            "-w" | "--warmup" => o.warmup = num(val()?)?,
            "-n" | "--wqes" => o.wqes = num(val()?)?,
            "--json" => o.json = Some(val()?),
            "--svg" => o.svg = Some(val()?),
            "--explain" => o.explain = true,
            "--instructions" => o.instructions = true,
            other => return Err(format!("unknown option '{other}'")),
        }
    }
    o.at = match (provider, &o.device) {
        (Some(p @ (Where::Plain | Where::Sim)), Some(d)) => {
            return Err(format!(
                "--provider {} runs without a device; drop -d {d}",
                p.name()
            ))
        }
        (Some(p @ (Where::Verbs | Where::Mlx5)), None) => {
            return Err(format!("--provider {} needs -d DEV", p.name()))
        }
        (Some(p), _) => p,
        (None, Some(_)) => Where::Verbs,
        (None, None) => Where::Plain,
    };
    if let Some(&b) = o.batches.iter().find(|&&b| b == 0 || b > MAX_BATCH) {
        return Err(format!("-l {b}: a batch is 1..={MAX_BATCH} requests"));
    }
    o.batches.sort_unstable();
    o.batches.dedup();
    for &s in &o.sizes {
        if o.payloads.contains(&PayloadKind::Inline) && s > MAX_INLINE {
            return Err(format!(
                "-s {s}: inline payloads are at most {MAX_INLINE} bytes here (-p sge for more)"
            ));
        }
        if s > 1 << 20 {
            return Err(format!("-s {s}: at most 1 MiB"));
        }
    }
    if o.at == Where::Verbs {
        o.modes = vec![Mode::Verbs];
    }
    if o.instructions && o.at != Where::Plain {
        return Err(
            "--instructions counts the driver's instructions on plain memory only \
                    (--provider plain)"
                .into(),
        );
    }
    let (reps, warm, wqes) = match o.at {
        Where::Plain => (101, 20, 1024),
        Where::Sim => (9, 2, 2048),
        Where::Verbs | Where::Mlx5 => (5, 2, 2048),
    };
    if o.reps == 0 {
        o.reps = reps;
    }
    if o.warmup == u32::MAX {
        o.warmup = warm;
    }
    if o.wqes == 0 {
        o.wqes = wqes;
    }
    if o.wqes > 1 << 24 {
        return Err(format!(
            "-n {}: at most {} WQEs per sample",
            o.wqes,
            1 << 24
        ));
    }
    Ok(Some(o))
}

impl Opts {
    fn configs(&self) -> Vec<Config> {
        let mut v = Vec::new();
        for &payload in &self.payloads {
            for &size in &self.sizes {
                for &mode in &self.modes {
                    for &signal in &self.signals {
                        v.push(Config {
                            mode,
                            signal,
                            payload,
                            size,
                        });
                    }
                }
            }
        }
        v
    }
    /// WQEs per sample for `batch`: whole batches, at least one.
    fn sample_wqes(&self, batch: u32) -> u32 {
        self.wqes.div_ceil(batch).max(1) * batch
    }
    /// Does the series name need the payload and the size?
    fn many_payloads(&self) -> bool {
        self.payloads.len() * self.sizes.len() > 1
    }
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
    }
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
    fn new(o: &Opts, c: Config, batch: u32) -> Result<PlainPoint, String> {
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
        let mut i = 0u32;
        let mut signaled = 0u32;
        while i < total {
            for _ in 0..batch {
                let mut wr = lb.wr(self.op, &sge, &self.data, u64::from(i));
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
fn plain_sweep(o: &Opts) -> Result<Vec<(Config, Vec<Stat>)>, String> {
    let mut pts = Vec::new();
    for c in o.configs() {
        for &b in &o.batches {
            pts.push(PlainPoint::new(o, c, b)?);
        }
    }
    for round in 0..o.warmup + o.reps {
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
    /// (doorbells seen, WQEs consumed) by the device, when it counts them.
    fn counters(&self) -> Option<(u64, u64)> {
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
    fn counters(&self) -> Option<(u64, u64)> {
        let s = self.stats();
        Some((s.doorbells, s.wqes))
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
    cmr: P::Mr,
    smr: P::Mr,
    _pd: P::Pd,
    _mem: (Vec<u64>, Vec<u64>),
}

fn bed<P: Target>(p: &mut P, o: &Opts, inline: u32, max_size: u32) -> rdma_direct::Result<Bed<P>> {
    let words = (max_size as usize).div_ceil(8).max(8);
    let mut m0 = vec![0u64; words];
    let mut m1 = vec![0u64; words];
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
    // SAFETY: both vectors outlive the MRs (field `_mem`, dropped last) and are not moved
    // (moving a Vec does not move its heap buffer).
    let cmr = unsafe { p.reg_mr(&pd, m0.as_mut_ptr() as *mut u8, words * 8, Access::ALL) }?;
    // SAFETY: as above.
    let smr = unsafe { p.reg_mr(&pd, m1.as_mut_ptr() as *mut u8, words * 8, Access::ALL) }?;
    let ce = p.endpoint(&cqp, &copts)?;
    let se = p.endpoint(&sqp, &copts)?;
    p.connect(&mut cqp, &ce, &se, &copts)?;
    p.connect(&mut sqp, &se, &ce, &copts)?;
    Ok(Bed {
        cqp,
        ccq,
        sqp,
        _scq: scq,
        cmr,
        smr,
        _pd: pd,
        _mem: (m0, m1),
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
    let raddr = b.smr.addr();
    let rkey = b.smr.rkey();
    let sges = [b.cmr.sge(0, c.size)];
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

fn device_sweep<P: Target>(p: &mut P, o: &Opts) -> Result<Vec<(Config, Vec<Stat>)>, String> {
    let max_size = o.sizes.iter().copied().max().unwrap_or(8);
    let inline = if o.payloads.contains(&PayloadKind::Inline) {
        MAX_INLINE
    } else {
        0
    };
    let mut b = bed(p, o, inline, max_size).map_err(|e| e.to_string())?;
    let data = vec![0x5au8; max_size.min(MAX_INLINE) as usize];
    // (config, batch, ns/WQE samples, device WQEs per doorbell samples)
    let mut pts: Vec<(Config, u32, Vec<f64>, Vec<f64>)> = Vec::new();
    for c in o.configs() {
        for &batch in &o.batches {
            pts.push((c, batch, Vec::new(), Vec::new()));
        }
    }
    // Round-robin over the points, as on plain memory.
    for round in 0..o.warmup + o.reps {
        for (c, batch, ns, dev) in pts.iter_mut() {
            P::set_mode(&mut b.cqp, c.mode);
            let total = o.sample_wqes(*batch);
            let data = &data[..c.size.min(MAX_INLINE) as usize];
            let before = p.counters();
            let t = device_sample(p, &mut b, c, *batch, total, data)?;
            if round >= o.warmup {
                ns.push(t / total as f64);
                if let (Some((d0, w0)), Some((d1, w1))) = (before, p.counters()) {
                    if d1 > d0 {
                        dev.push((w1 - w0) as f64 / (d1 - d0) as f64);
                    }
                }
            }
        }
    }
    let mut res: Vec<(Config, Vec<Stat>)> = Vec::new();
    for (c, batch, ns, mut dev) in pts {
        let mut st = summarize(batch, o.sample_wqes(batch), ns);
        if !dev.is_empty() {
            dev.sort_by(|a, b| a.total_cmp(b));
            st.dev_wqes_per_db = Some(dev[dev.len() / 2]);
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

// ---------------------------------------------------------------------------------------
// Output

fn series_name(o: &Opts, c: &Config) -> String {
    let mut s = format!("{}, {}", c.mode.name(), c.signal.name());
    if o.many_payloads() {
        let _ = write!(s, ", {} {} B", c.payload.name(), c.size);
    }
    s
}

fn table(o: &Opts, c: &Config, pts: &[Stat]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        " doorbell: {} | {} | WRITE {} {} B | {} samples of {}+ WQEs per point, {} warm-up",
        c.mode.name(),
        c.signal.name(),
        c.payload.name(),
        c.size,
        o.reps,
        o.wqes,
        o.warmup
    );
    let _ = write!(
        s,
        " {:<7} {:<8} {:<12} {:<12} {:<12} {:<12} {:<12} {:<14} {:<14}",
        "#batch",
        "#WQEs",
        "ns/WQE[med]",
        "ns/WQE[p10]",
        "ns/WQE[p90]",
        "ns/WQE[min]",
        "ns/WQE[max]",
        "MsgRate[Mpps]",
        "Doorbells[M/s]"
    );
    if o.at == Where::Sim {
        let _ = write!(s, " {:<12}", "WQE/db-seen");
    }
    s.push('\n');
    for p in pts {
        let _ = write!(
            s,
            " {:<7} {:<8} {:<12.2} {:<12.2} {:<12.2} {:<12.2} {:<12.2} {:<14.3} {:<14.3}",
            p.batch,
            p.wqes,
            p.med,
            p.p10,
            p.p90,
            p.min,
            p.max,
            p.mpps(),
            p.db_per_s / 1e6
        );
        if let Some(d) = p.dev_wqes_per_db {
            let _ = write!(s, " {d:<12.2}");
        }
        s.push('\n');
    }
    s
}

fn header(o: &Opts) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "---------------------------------------------------------------------------------------"
    );
    let _ = writeln!(s, "                    Doorbell batching: RDMA WRITE, RC");
    let _ = writeln!(s, " provider: {}", o.at.describe(o.device.as_deref()));
    if o.at.hardware() {
        let _ = writeln!(
            s,
            " device figures (on rxe: an emulated device in the kernel, not a NIC)"
        );
    } else {
        let _ = writeln!(s, " plain-memory and sim figures are not hardware figures");
    }
    if o.at == Where::Mlx5 {
        let _ = writeln!(s, " mlx5 on a NIC is untested in this project's CI");
    }
    let _ = writeln!(
        s,
        "---------------------------------------------------------------------------------------"
    );
    s
}

fn title(o: &Opts) -> String {
    let what = match o.at {
        Where::Plain => "plain memory, mlx5 driver cost".to_string(),
        Where::Sim => "sim, device thread".to_string(),
        Where::Verbs | Where::Mlx5 => {
            format!("{} on {}", o.at.name(), o.device.as_deref().unwrap_or("?"))
        }
    };
    format!("Doorbell batching: RDMA WRITE — {what}")
}

fn json(o: &Opts, res: &[(Config, Vec<Stat>)]) -> String {
    let s = |t: &str| Value::Str(t.to_string());
    let n = Value::Num;
    let configs = res
        .iter()
        .map(|(c, pts)| {
            let points = pts
                .iter()
                .map(|p| {
                    let mut kv = vec![
                        ("batch".to_string(), n(p.batch as f64)),
                        ("wqes_per_sample".to_string(), n(p.wqes as f64)),
                        ("samples".to_string(), n(p.reps as f64)),
                        (
                            "ns_per_wqe".to_string(),
                            Value::Obj(vec![
                                ("median".into(), n(p.med)),
                                ("p10".into(), n(p.p10)),
                                ("p90".into(), n(p.p90)),
                                ("min".into(), n(p.min)),
                                ("max".into(), n(p.max)),
                            ]),
                        ),
                        ("mpps".to_string(), n(p.mpps())),
                        ("doorbells_per_s".to_string(), n(p.db_per_s)),
                    ];
                    if let Some(d) = p.dev_wqes_per_db {
                        kv.push(("device_wqes_per_doorbell".to_string(), n(d)));
                    }
                    Value::Obj(kv)
                })
                .collect();
            Value::Obj(vec![
                ("name".into(), s(&series_name(o, c))),
                ("mode".into(), s(c.mode.name())),
                ("signal".into(), s(&c.signal.key())),
                ("payload".into(), s(c.payload.name())),
                ("size".into(), n(c.size as f64)),
                ("points".into(), Value::Arr(points)),
            ])
        })
        .collect();
    let v = Value::Obj(vec![
        ("tool".into(), s("rdma-direct bench batching")),
        ("version".into(), s(env!("CARGO_PKG_VERSION"))),
        ("provider".into(), s(o.at.name())),
        (
            "device".into(),
            o.device.as_deref().map(s).unwrap_or(Value::Null),
        ),
        ("hardware".into(), Value::Bool(o.at.hardware())),
        ("op".into(), s("RDMA WRITE")),
        ("configs".into(), Value::Arr(configs)),
    ]);
    let mut t = v.to_json();
    t.push('\n');
    t
}

fn charts(o: &Opts, res: &[(Config, Vec<Stat>)]) -> Vec<Chart> {
    let sub = if o.at.hardware() {
        format!(
            "{} — median of {} samples",
            o.at.describe(o.device.as_deref()),
            o.reps
        )
    } else {
        format!(
            "{} — median of {} samples; not hardware figures",
            o.at.describe(None),
            o.reps
        )
    };
    let band = res.len() <= plot::MAX_BANDS;
    // A point's value and its band.
    type Pick<'f> = &'f dyn Fn(&Stat) -> (f64, (f64, f64));
    let mk = |y: Pick| -> Vec<Series> {
        res.iter()
            .map(|(c, pts)| Series {
                name: series_name(o, c),
                points: pts
                    .iter()
                    .map(|p| {
                        let (v, b) = y(p);
                        Point {
                            x: p.batch as f64,
                            y: v,
                            band: band.then_some(b),
                        }
                    })
                    .collect(),
            })
            .collect()
    };
    let band_label = band.then(|| "shaded: p10..p90 of the samples".to_string());
    vec![
        Chart {
            title: format!("{} — message rate", title(o)),
            subtitle: sub.clone(),
            x_label: "batch size [WQEs per doorbell]".into(),
            x_kind: XKind::Count,
            y_label: "message rate [Mpps]".into(),
            y_scale: YScale::Auto,
            band_label: band_label.clone(),
            series: mk(&|p| (p.mpps(), (1e3 / p.p90, 1e3 / p.p10))),
        },
        Chart {
            title: format!("{} — cost per WQE", title(o)),
            subtitle: sub,
            x_label: "batch size [WQEs per doorbell]".into(),
            x_kind: XKind::Count,
            y_label: "time per WQE [ns]".into(),
            y_scale: YScale::Auto,
            band_label,
            series: mk(&|p| (p.med, (p.p10, p.p90))),
        },
    ]
}

// ---------------------------------------------------------------------------------------
// Explain

/// Fit `t(b) = w + d / b` through the smallest and the largest batch: `d` the cost per
/// doorbell, `w` the cost per WQE that batching cannot remove.
fn fit(pts: &[Stat]) -> Option<(f64, f64)> {
    let (a, z) = (pts.first()?, pts.last()?);
    if a.batch == z.batch {
        return None;
    }
    let (ia, iz) = (1.0 / a.batch as f64, 1.0 / z.batch as f64);
    let d = (a.med - z.med) / (ia - iz);
    Some((z.med - d * iz, d))
}

fn find(res: &[(Config, Vec<Stat>)], f: impl Fn(&Config) -> bool) -> Option<&(Config, Vec<Stat>)> {
    res.iter().find(|(c, _)| f(c))
}

/// Cost of the two store fences a doorbell takes (`wc_start` + `wc_flush`), measured here.
fn fence_pair_ns() -> f64 {
    let n = 200_000u32;
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..n {
            rdma_direct::barrier::wc_start();
            rdma_direct::barrier::wc_flush();
        }
        best = best.min(t.elapsed().as_nanos() as f64 / n as f64);
    }
    best
}

fn explain(o: &Opts, res: &[(Config, Vec<Stat>)]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\nWhere the cost goes ({}):",
        o.at.describe(o.device.as_deref())
    );
    let base = |m: Mode, sig: Signal| find(res, |c| c.mode == m && c.signal == sig);
    let first_mode = o.modes[0];
    // Per doorbell vs per WQE, from the curve with the fewest completions.
    // A fixed signaling period keeps the completions per WQE constant across the curve;
    // "once per batch" would put one completion into every doorbell's share.
    let lean = o
        .signals
        .iter()
        .find(|&&g| matches!(g, Signal::Every(n) if n > 1))
        .or_else(|| o.signals.first())
        .and_then(|&g| base(first_mode, g))
        .or_else(|| res.first());
    if let Some((c, pts)) = lean {
        if let Some((w, d)) = fit(pts).filter(|&(w, d)| w > 0.0 && d >= 0.0) {
            let _ = writeln!(
                s,
                " - Fitting t(b) = w + d/b to the {} curve ({}): w = {:.2} ns per WQE, \
                 d = {:.2} ns per doorbell.",
                c.mode.name(),
                c.signal.name(),
                w,
                d
            );
            if c.signal == Signal::PerBatch {
                let _ = writeln!(
                    s,
                    "   (Signaled once per batch, d includes one completion per doorbell.)"
                );
            }
            let _ = writeln!(
                s,
                "   At batch 1 the doorbell is {:.0} % of the cost; at batch {} it is {:.0} %.",
                100.0 * d / (w + d).max(1e-9),
                pts.last().map_or(0, |p| p.batch),
                {
                    let b = pts.last().map_or(1, |p| p.batch) as f64;
                    100.0 * (d / b) / (w + d / b).max(1e-9)
                }
            );
        } else {
            let _ = writeln!(
                s,
                " - The {} curve ({}) does not fall as w + d/b: too noisy to split into a \
                 per-WQE and a per-doorbell cost (a busy machine? more -r, -n).",
                c.mode.name(),
                c.signal.name()
            );
        }
    }
    // What batching bought, per configuration.
    for (c, pts) in res {
        if let (Some(a), Some(z)) = (pts.first(), pts.last()) {
            if a.batch != z.batch {
                let _ = writeln!(
                    s,
                    " - {}: batch {} -> {}: {:.2} -> {:.2} Mpps ({:+.0} %).",
                    series_name(o, c),
                    a.batch,
                    z.batch,
                    a.mpps(),
                    z.mpps(),
                    100.0 * (z.mpps() / a.mpps() - 1.0)
                );
            }
        }
    }
    match o.at {
        Where::Plain => {
            let f = fence_pair_ns();
            let _ = writeln!(
                s,
                " - Per WQE (w): building the WQE in the ring — ctrl segment, remote address, \
                 inline data or data segment — and recording its wr_id. No barrier, no \
                 shared store."
            );
            let _ = writeln!(
                s,
                " - Per doorbell (d): the store barrier before the doorbell record (a compiler \
                 barrier on x86_64, dsb st on aarch64), the dbrec store, the two store fences \
                 around the write-combining store (measured here: {f:.2} ns for the pair), and \
                 the 8-byte doorbell or the BlueFlame copy. Batching divides all of it by b."
            );
            if let (Some((_, db)), Some((_, bf))) = (
                base(Mode::Db8, o.signals[0]),
                base(Mode::BfSingle, o.signals[0]),
            ) {
                if let (Some(a), Some(b)) = (db.first(), bf.first()) {
                    let _ = writeln!(
                        s,
                        " - BlueFlame at batch {}: {:.2} ns/WQE vs {:.2} with the 8-byte \
                         doorbell ({:+.2} ns): the CPU copies the whole WQE (64 B here) into \
                         the register instead of 8 bytes. On a NIC that buys latency — the \
                         device has the WQE without a DMA read — so libmlx5 uses it for single \
                         posts only; for a list it rings the 8-byte doorbell, the copy would \
                         cover one WQE of many and the device DMA-reads the list anyway.",
                        a.batch,
                        b.med,
                        a.med,
                        b.med - a.med
                    );
                }
                if let (Some(a), Some(b)) = (db.last(), bf.last()) {
                    let _ = writeln!(
                        s,
                        "   At batch {} both ring the 8-byte doorbell: {:.2} vs {:.2} ns/WQE.",
                        a.batch, a.med, b.med
                    );
                }
            }
        }
        Where::Sim => {
            let _ = writeln!(
                s,
                " - On the sim the device thread, not the driver, sets the rate: it fetches \
                 and executes each WQE in software (tens of ns), while the driver's own cost \
                 is a few ns (--provider plain). Batching removes doorbells; the device needs \
                 fewer still (column WQE/db-seen): once a doorbell woke it, it follows the \
                 doorbell record until the send queue is empty, so while the poster keeps it \
                 busy every later doorbell is a store nobody waits for."
            );
        }
        Where::Verbs => {
            let _ = writeln!(
                s,
                " - On rxe one ibv_post_send is one write() system call; the kernel then \
                 builds, checksums and loops back a packet per WQE and completes it in a \
                 tasklet. Where the per-WQE part w dwarfs the per-call part d (the fit \
                 above), batching barely helps: the emulated device in the kernel, not the \
                 doorbell, is the bottleneck."
            );
        }
        Where::Mlx5 => {
            let _ = writeln!(
                s,
                " - On a ConnectX NIC the doorbell is an uncached MMIO write over PCIe; the \
                 curve shows how much of it batching hides (untested in this project)."
            );
        }
    }
    // Completion handling: every-WR signaling vs the sparsest, at the largest batch.
    let every = base(first_mode, Signal::Every(1));
    let sparse = o
        .signals
        .iter()
        .rev()
        .find(|&&g| g != Signal::Every(1))
        .and_then(|&g| base(first_mode, g));
    if let (Some((_, e)), Some((c, sp))) = (every, sparse) {
        if let (Some(a), Some(b)) = (e.last(), sp.last()) {
            let _ = writeln!(
                s,
                " - Completion handling: at batch {} signaling every WR costs {:.2} ns/WQE, \
                 {} {:.2}: about {:.2} ns per completion polled.",
                a.batch,
                a.med,
                c.signal.name(),
                b.med,
                (a.med - b.med).max(0.0)
            );
        }
    }
    s
}

// ---------------------------------------------------------------------------------------
// Instructions (callgrind)

/// Instructions per WQE for each configuration at each batch: the command runs itself under
/// callgrind, one round per point, counting only inside the post and poll loops
/// (`--toggle-collect`; the rig's device work and the setup are not counted), and divides by
/// the WQEs those loops handled.
fn instructions(o: &Opts) -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let have = std::process::Command::new("valgrind")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !have {
        return Err(
            "--instructions needs valgrind (apt-get install valgrind); without it the \
             ns/WQE table is the measure"
                .into(),
        );
    }
    let run = |c: &Config, batch: u32| -> Result<f64, String> {
        let out = std::process::Command::new("valgrind")
            .args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
            // One pattern for post_all and poll_all: callgrind honours one --toggle-collect.
            .args(["--toggle-collect=*PlainPoint*po??_all*"])
            .arg(&exe)
            .args([
                "bench",
                "batching",
                "--provider",
                "plain",
                "-r",
                "1",
                "-w",
                "0",
            ])
            .args(["-l", &batch.to_string(), "-n", &o.wqes.to_string()])
            .args(["-m", c.mode.name(), "-Q", &c.signal.key()])
            .args(["-p", c.payload.name(), "-s", &c.size.to_string()])
            .output()
            .map_err(|e| format!("valgrind: {e}"))?;
        let err = String::from_utf8_lossy(&out.stderr);
        let collected = err
            .lines()
            .find_map(|l| l.split("Collected :").nth(1))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .ok_or_else(|| format!("valgrind printed no 'Collected :' line:\n{err}"))?;
        let total = o.sample_wqes(batch);
        let warm = (2 * total.next_power_of_two().max(64)).div_ceil(total);
        Ok(collected / f64::from((warm + 1) * total))
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        " instructions per WQE (callgrind, plain memory; post + ring + poll, {} WQEs per \
         sample):",
        o.wqes
    );
    let _ = write!(s, " {:<44}", "configuration");
    for b in &o.batches {
        let _ = write!(s, " {:>8}", format!("b={b}"));
    }
    s.push('\n');
    for c in o.configs() {
        let _ = write!(s, " {:<44}", series_name(o, &c));
        for &b in &o.batches {
            let _ = write!(s, " {:>8.1}", run(&c, b)?);
        }
        s.push('\n');
    }
    Ok(s)
}

fn sweep(o: &Opts) -> Result<Vec<(Config, Vec<Stat>)>, String> {
    match o.at {
        Where::Plain => plain_sweep(o),
        Where::Sim => {
            let mut p = SimDevice::new();
            // Device-thread mode: a thread plays the HCA, polling doorbells, as hardware
            // would; the mlx5 hot path runs against it unchanged.
            p.start_device_thread().map_err(|e| e.to_string())?;
            let r = device_sweep(&mut p, o);
            p.stop_device_thread();
            r
        }
        Where::Verbs => {
            let dev = o.device.as_deref().unwrap_or_default();
            let mut p = VerbsDevice::open(dev).map_err(|e| e.to_string())?;
            device_sweep(&mut p, o)
        }
        Where::Mlx5 => {
            let dev = o.device.as_deref().unwrap_or_default();
            let mut p = Mlx5Device::open(dev).map_err(|e| e.to_string())?;
            device_sweep(&mut p, o)
        }
    }
}

/// `rdma-direct bench batching ...`. Returns the exit code.
pub fn run(args: &[String]) -> i32 {
    let o = match parse(args) {
        Ok(Some(o)) => o,
        Ok(None) => {
            print!("{USAGE}");
            return 0;
        }
        Err(e) => {
            eprintln!("rdma-direct bench batching: {e}\n\n{USAGE}");
            return 2;
        }
    };
    if o.instructions {
        print!("{}", header(&o));
        return match instructions(&o) {
            Ok(t) => {
                print!("{t}");
                0
            }
            Err(e) => {
                eprintln!("rdma-direct bench batching: {e}");
                1
            }
        };
    }
    print!("{}", header(&o));
    let res = match sweep(&o) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rdma-direct bench batching ({}): {e}", o.at.name());
            return 1;
        }
    };
    for (c, pts) in &res {
        print!("{}", table(&o, c, pts));
    }
    if o.at == Where::Sim && res.iter().flat_map(|(_, p)| p).any(|p| p.med > 1000.0) {
        println!(
            " note: some points took over 1 µs per WQE: the device thread and this thread \
             shared a core (a busy machine), so those figures show the scheduler, not the \
             doorbell path. The sim needs two idle cores."
        );
    }
    if o.explain {
        print!("{}", explain(&o, &res));
    }
    let write = |path: &str, text: String, what: &str| -> bool {
        match std::fs::write(path, text) {
            Ok(()) => true,
            Err(e) => {
                eprintln!("rdma-direct bench batching: writing the {what} to {path}: {e}");
                false
            }
        }
    };
    let mut ok = true;
    if let Some(f) = &o.json {
        ok &= write(f, json(&o, &res), "JSON");
    }
    if let Some(f) = &o.svg {
        ok &= write(f, plot::render(&charts(&o, &res)), "SVG");
    }
    if ok {
        0
    } else {
        1
    }
}
