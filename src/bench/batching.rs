//! The doorbell-batching sweep (what `rdma-direct bench batching` measures).
//!
//! Contract:
//! - A sweep ([`sweep`]) over batch sizes (requests per doorbell, 1..=[`MAX_BATCH`]) for every
//!   [`Config`] of [`Params::configs`]: doorbell mode x signaling period x payload (inline /
//!   one SGE) x message size. The operation is an RDMA WRITE of `size` bytes.
//! - Where it runs ([`Where`]): `Plain`, the mlx5 provider's queues on plain memory with the
//!   bench rig as the device (the driver's own cost per WQE: post, ring, poll; the rig's
//!   device work, writing CQEs, is outside the timed region); `Sim`, the software mlx5 device
//!   with its device thread consuming the doorbells (end-to-end message rate through the
//!   real doorbell path, with the WQEs per doorbell and CQEs per WQE the device saw);
//!   `Verbs`, libibverbs on a device (one `ibv_post_send` with a linked list per batch);
//!   `Mlx5`, the hand-rolled mlx5 provider on a ConnectX NIC.
//! - Every point is sampled round-robin (one sample of each point per round, so a slow phase
//!   of a busy machine hits all alike) after [`Params::warmup`] rounds; a sample times whole
//!   batches of [`Params::sample_wqes`] WQEs and yields ns per WQE; [`Stat`] summarizes a
//!   point's samples (median, p10, p90, min, max).
//! - mlx5 providers (plain, sim, mlx5): every point carries [`Counts`](crate::pcie::Counts),
//!   what a ConnectX would move over PCIe per message, counted by replaying the point's post
//!   sequence once, untimed, through the rig's PCIe tap (what the provider wrote, ring by
//!   ring).
//! - Methodology: the measuring thread runs pinned ([`Params::pin`], default: a CPU local
//!   to the device where sysfs says, else the last allowed CPU; see [`crate::bench::cpu`]);
//!   every point keeps its raw samples, their bootstrap 95 % interval of the median
//!   ([`stats`]) and, with [`Params::runs`] > 1, each run's median and the run-to-run
//!   spread. [`Params::window`] bounds the WQEs outstanding for a steady pipeline: on plain
//!   memory the rig consumes the outstanding WQEs whenever the next batch would pass the
//!   bound (its work not timed), on devices posting waits for completions.
//! - Operations ([`Op`]): RDMA WRITE on RC, SEND on UD (devices; the peer receives every
//!   datagram, checked between samples; PCIe counts replayed on a UD queue, the datagram
//!   segment making each WQE 48 bytes longer); [`Params::qps`] client
//!   QPs take the batches in turn (devices), each signaling its own requests (its last of a
//!   sample always), all completing on one CQ.
//! - The verbs baseline ([`Params::verbs_baseline`], mlx5 on a device): the same configs
//!   through libibverbs after the mlx5 points, or one line in [`Sweep::skipped`] where
//!   libibverbs cannot post (the stand-in: `EOPNOTSUPP`). Its points carry no PCIe counts.
//! - Several measuring threads ([`Params::threads`]): each runs the whole sweep side by side
//!   on queues of its own, pinned to a CPU of its own; [`Sweep::threads`] keeps each one's
//!   points and [`Sweep::total_mpps`] sums their median rates per point.
//! - Latency mode ([`Params::latency`]): post one signaled request, ring, poll its
//!   completion, then the next; ns per round trip. On plain memory the rig's consuming the
//!   WQE and writing its CQE is inside the timed region (the device's turnaround); on the sim
//!   the device thread's. Where BlueFlame differs from the 8-byte doorbell on a NIC (no WQE
//!   fetch: one non-posted read round trip less) the PCIe counts show it per message; the sim
//!   reads the WQE from its ring either way, so its measured latency does not.
//! - [`Params::stop`] is asked between rounds; a stopped sweep's points keep the samples
//!   taken ([`Stat::reps`]). Errors are one line naming what failed; nothing here prints.
//! - With feature `report`, the sweep's report as text and values: [`report`] (tables,
//!   notes, JSON, SVG charts), [`explain`] (the cost model fitted to the curve) and
//!   [`summary`] (the Markdown summary of a report directory), all naming runs and series
//!   through [`setup`].

use crate::perf::StopHook;
use crate::providers::mlx5::DoorbellMode;

#[cfg(feature = "report")]
pub mod explain;
mod measure;
#[cfg(feature = "report")]
pub mod report;
#[cfg(feature = "report")]
pub mod setup;
pub mod stats;
#[cfg(feature = "report")]
pub mod summary;

pub use crate::bench::cpu::Pin;
pub use measure::{pcie_counts, sweep, wqebbs, Stat, Sweep, ThreadSweep};

/// Largest batch (the send queue depth keeps two batches in flight).
pub const MAX_BATCH: u32 = 64;
/// Largest inline payload asked for (fits a 256-byte BlueFlame half with its segments).
pub const MAX_INLINE: u32 = 128;

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
    pub fn name(self) -> &'static str {
        match self {
            Where::Plain => "plain",
            Where::Sim => "sim",
            Where::Verbs => "verbs",
            Where::Mlx5 => "mlx5",
        }
    }
    pub fn describe(self, dev: Option<&str>) -> String {
        match self {
            Where::Plain => "plain memory (mlx5 driver, this program plays the device)".into(),
            Where::Sim => "sim (software mlx5 device, device thread consuming)".into(),
            Where::Verbs => format!("verbs on {} (libibverbs ibv_post_send)", dev.unwrap_or("?")),
            Where::Mlx5 => format!("mlx5 on {} (hand-rolled mlx5 provider)", dev.unwrap_or("?")),
        }
    }
    pub fn hardware(self) -> bool {
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
    pub fn name(self) -> &'static str {
        match self {
            Mode::Db8 => "db8",
            Mode::BfSingle => "bf-single",
            Mode::Verbs => "ibv_post_send",
        }
    }
    pub fn doorbell(self) -> DoorbellMode {
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
    pub fn name(self) -> String {
        match self {
            Signal::Every(1) => "signal every WR".into(),
            Signal::Every(n) => format!("signal every {n}"),
            Signal::PerBatch => "signal once per batch".into(),
        }
    }
    pub fn key(self) -> String {
        match self {
            Signal::Every(n) => n.to_string(),
            Signal::PerBatch => "batch".into(),
        }
    }
    /// Is request `i` of a sample of `total`, in batches of `batch`, signaled?
    #[inline(always)]
    pub fn wants(self, i: u32, batch: u32, total: u32) -> bool {
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
    pub fn name(self) -> &'static str {
        match self {
            PayloadKind::Inline => "inline",
            PayloadKind::Sge => "sge",
        }
    }
}

/// The operation measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// RDMA WRITE on RC QPs.
    Write,
    /// SEND on UD QPs, to the peer QP's address handle. The peer holds receives for every
    /// datagram of a sample, posted ahead and taken back between samples (untimed): the
    /// device delivers each datagram while the sender is measured.
    UdSend,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::Write => "write",
            Op::UdSend => "ud-send",
        }
    }
    /// As a perftest table says it.
    pub fn title(self) -> &'static str {
        match self {
            Op::Write => "WRITE",
            Op::UdSend => "UD SEND",
        }
    }
}

/// Most client QPs ([`Params::qps`]).
pub const MAX_QPS: u32 = 16;
/// Most measuring threads ([`Params::threads`]).
pub const MAX_THREADS: u32 = 64;

/// One line of the curve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    pub op: Op,
    pub mode: Mode,
    pub signal: Signal,
    pub payload: PayloadKind,
    pub size: u32,
}

/// What a sweep measures and where.
#[derive(Clone, Debug)]
pub struct Params {
    /// Where the sweep runs.
    pub at: Where,
    /// The device (verbs, mlx5).
    pub device: Option<String>,
    pub port: u8,
    pub gid_index: u8,
    /// Batch sizes (requests per doorbell), each 1..=[`MAX_BATCH`], sorted.
    pub batches: Vec<u32>,
    pub modes: Vec<Mode>,
    pub signals: Vec<Signal>,
    pub payloads: Vec<PayloadKind>,
    pub sizes: Vec<u32>,
    /// Operations ([`Op`]); UD SEND on devices only.
    pub ops: Vec<Op>,
    /// Client QPs (1..=[`MAX_QPS`]; more than 1 on devices only): batches go to them in
    /// turn, each QP connected to a peer QP of its own, all sharing one CQ.
    pub qps: u32,
    /// Recorded samples per point.
    pub reps: u32,
    /// Samples per point thrown away first.
    pub warmup: u32,
    /// WQEs per sample (rounded up to whole batches, [`Params::sample_wqes`]).
    pub wqes: u32,
    /// Times the whole sweep (warm-up included) is repeated; the points pool the samples
    /// and report each run's median ([`Stat::run_medians`]).
    pub runs: u32,
    /// A steady pipeline: at most this many WQEs outstanding (see the module doc); `None`:
    /// plain memory posts a sample's WQEs then polls them all, devices keep up to their
    /// queue depth (256) outstanding.
    pub window: Option<u32>,
    /// Latency mode: one signaled request at a time, posted, rung and its completion
    /// polled before the next (batch 1, window 1); a sample's figure is ns per round trip.
    /// [`Params::latency_params`] sets the batches and signaling it needs.
    pub latency: bool,
    /// Measuring threads (1..=[`MAX_THREADS`]), side by side, each running the whole sweep
    /// on queues of its own, pinned to a CPU of its own: on plain memory its own rig queue;
    /// on the sim its own software device (its own device thread, QP and CQ); on verbs and
    /// mlx5 its own context on the device. [`Sweep::threads`] holds each one's points,
    /// [`Sweep::total_mpps`] their sum.
    pub threads: u32,
    /// With [`Where::Mlx5`]: after the mlx5 points, the same configs through libibverbs
    /// on the same device (one `ibv_post_send` per batch, [`Mode::Verbs`]), rdma-core's own
    /// post path as the baseline; where libibverbs refuses to post, [`Sweep::skipped`]
    /// says so and the mlx5 points stand.
    pub verbs_baseline: bool,
    /// Whether and where the measuring thread is pinned.
    pub pin: Pin,
    /// Asked between rounds: `true` ends the sweep once every point has a recorded sample.
    pub stop: Option<StopHook>,
}

impl Params {
    /// These parameters in latency mode: batch 1, every request signaled.
    pub fn latency_params(mut self) -> Params {
        self.latency = true;
        self.batches = vec![1];
        self.signals = vec![Signal::Every(1)];
        self
    }
    pub fn configs(&self) -> Vec<Config> {
        let mut v = Vec::new();
        for &op in &self.ops {
            for &payload in &self.payloads {
                for &size in &self.sizes {
                    for &mode in &self.modes {
                        for &signal in &self.signals {
                            v.push(Config {
                                op,
                                mode,
                                signal,
                                payload,
                                size,
                            });
                        }
                    }
                }
            }
        }
        v
    }
    /// WQEs per sample for `batch`: whole batches, at least one.
    pub fn sample_wqes(&self, batch: u32) -> u32 {
        self.wqes.div_ceil(batch).max(1) * batch
    }
    /// Does the series name need the payload and the size?
    pub fn many_payloads(&self) -> bool {
        self.payloads.len() * self.sizes.len() > 1
    }
}
