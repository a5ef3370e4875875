//! perftest-style latency and bandwidth measurement over any provider.
//!
//! [`Run`] measures one of `write_lat`, `send_lat`, `read_lat`, `atomic_lat` (fetch-and-add),
//! `write_bw`, `send_bw`, `read_bw` ([`Test`]) with perftest's parameters ([`Params`]) and
//! returns perftest's statistics ([`stats`]) as plain rows ([`Row`]), one per message size,
//! **in one process**: a client QP and a server QP on the same device, connected to each
//! other (loopback). [`remote`] measures one side of perftest's two-process model instead,
//! against a peer process (this tool or perftest 4.5) over perftest's TCP exchange
//! ([`wire`]). Nothing here parses arguments or prints; `rdma-direct perf` does both.
//!
//! ## Providers
//!
//! Any [`Provider`]. On the software mlx5 device the figures are a software model's, not
//! hardware's: in device-thread mode the device thread answers a doorbell no faster than a
//! cross-core cache-line round trip. On the verbs provider they are libibverbs'
//! `ibv_post_send` / `ibv_poll_cq` (rxe: a `write()` system call per doorbell).
//!
//! ## Threads
//!
//! `read_lat`, `atomic_lat` and the bandwidth tests have one active side: the client's
//! thread does everything (`send_bw` re-posts the server's receives in between).
//!
//! `write_lat` and `send_lat` have two active sides ([`two_threads`]). On a real device each
//! side gets its own thread, as perftest's two processes: on rxe the kernel does a whole
//! transfer inside the posting `ibv_post_send` (request, delivery, ACK, completion), and a
//! peer on another CPU sees the data before that call returns; one thread serving both sides
//! would wait for every ACK tail and measures about twice perftest's half round trip on rxe.
//! On the sim one thread alternates between the sides: the device thread needs the second
//! core of a 2-core machine, and a third spinning thread would measure the scheduler.
//! [`Params::threads`] overrides either default; a sample then includes the server's
//! turn-around in the same thread, as it does in perftest's server process.
//!
//! What each test does (perftest's `run_iter_lat_write`, `run_iter_lat_send`,
//! `run_iter_lat`, `run_iter_bw`, restated):
//! - `write_lat`: the client stamps the time, sets the last byte of its outgoing message to
//!   the iteration number and posts a signaled RDMA WRITE into the server's buffer; the server
//!   sees that byte change in its memory and writes back the same way; the client waits for
//!   the byte in its own memory. Every WRITE is signaled, as in perftest; completions are
//!   reaped without blocking after each post and waited for only when 32 are outstanding
//!   (and at the end), so a side never sits on its ACK while its peer waits for data (in
//!   perftest each process blocks on its own, but in parallel with its peer). Half the round
//!   trip.
//! - `send_lat`: SEND ping-pong; receives are posted in advance and re-posted as they
//!   complete; sends are signaled every 64th and on the last (perftest: every `cq_mod`-th),
//!   reaped like write_lat's. Half the round trip.
//! - `read_lat`, `atomic_lat`: the client posts one signaled READ (or 8-byte fetch-and-add)
//!   and waits for its completion; the server is passive. The full round trip.
//! - `*_bw`: the client keeps up to `tx_depth` ([`TX_DEPTH`]) requests outstanding, posts
//!   [`Params::post_list`] at a time with one doorbell, signals every
//!   [`Params::cq_mod`]-th request and the last, and stamps posts and completions for
//!   [`stats::bw_row`]. `send_bw` re-posts the server's receives as they complete.
//!
//! ## Device time (`--hw-ts`)
//!
//! With [`Params::hw_ts`] (`write_lat`, `read_lat`, `atomic_lat`) the CQs come from
//! [`Provider::create_cq_ts`] (the sim and mlx5; verbs refuses before any QP is made) and the
//! client's send completions are polled with their device time. [`NicTime`] gives perftest's
//! statistics of those stamps beside the software row, and the median post → send CQE on one
//! scale (its bound is stated there). `send_lat` signals too few sends for a sample per
//! iteration and is refused.
//!
//! The measured loops allocate nothing: timestamp arrays, SGEs, inline payloads and
//! completion buffers are prepared before the first stamp.
//!
//! ## Parameters (perftest's)
//!
//! [`Params::new`] gives perftest's defaults for a test; [`Params::check`] enforces
//! perftest's rules, and [`Run::new`] refuses parameters that break them: inline is refused
//! for READ and atomics; a post list and `cq_mod` are bandwidth parameters, and with a post
//! list longer than 1 it must be a multiple of `cq_mod` (when the iterations are not a
//! multiple of the post list the last list is shorter, where perftest 4.5 refuses "Number of
//! iterations must be a multiple of post list size"); UC refuses READ and atomics; UD allows
//! only SEND (and a message must fit the path MTU); atomics always move 8 bytes. Inline
//! defaults to 220 bytes for the WRITE/SEND latency tests and to none for the bandwidth
//! tests (perftest's defaults on the devices it knows, ConnectX among them; on a device it
//! does not know, rxe among them, perftest 4.5 turns inline off, `-I` included). The default
//! message size is 2 bytes for latency and 65536 for bandwidth, as perftest's.
//!
//! ## Layout
//!
//! This file holds the entry points ([`run`], [`Run`]); the public items of the private
//! parts are re-exported here: `params` (what to measure: [`Test`], [`Params`], the limits),
//! `report` (what a run returns: [`Row`], [`Info`], [`Report`], [`NicTime`]), `bed` (the
//! QPs and memory of a run), `loops` (the measured loops), `clock` (their clock) and
//! `pingpong` (the two-sided latency tests' ends); [`outliers`] finds a latency row's
//! outliers and whether the polling CPU was taken away during each; [`host`] says what machine a report ran on; [`fit`] fits cost models by least squares.

mod bed;
mod clock;
pub mod cm_channel;
pub mod fit;
pub mod host;
mod loops;
pub mod outliers;
mod params;
mod pingpong;
pub mod rc_pingpong;
pub mod remote;
mod report;
pub mod rping;
pub mod stats;
pub mod wire;

pub use outliers::{Away, Outlier, Outliers};
pub use params::{
    two_threads, Inject, Params, StopHook, Test, DEFAULT_BW_SIZE, DEFAULT_CQ_MOD,
    DEFAULT_LAT_INLINE, DEFAULT_OUTLIER_X, MAX_INLINE, MAX_ITERS, MAX_SIZE, RX_DEPTH, TX_DEPTH,
};
pub use report::{Info, NicTime, Report, Row};

use crate::providers::{Provider, ProviderKind, QpType};
use crate::{Error, Result};
use bed::{setup, Bed};
// `remote` takes the loops' clock from here.
use clock::Clock;
use loops::{bw_loop, lat_loop};

/// Measure `o` on `p`: every size, then the report. See [`Run`] for a row at a time.
pub fn run<P: Provider>(p: &mut P, o: &Params) -> Result<Report>
where
    P::Qp: Send,
    P::Cq: Send,
{
    let mut r = Run::new(p, o)?;
    let mut rows = Vec::with_capacity(r.info.sizes.len());
    let mut nic = Vec::new();
    let mut outliers = Vec::new();
    while let Some(row) = r.next() {
        rows.push(row?);
        nic.extend(r.nic_time());
        outliers.extend(r.outliers.take());
    }
    Ok(Report {
        info: r.info,
        rows,
        nic,
        outliers,
    })
}

/// One measurement in progress: QPs connected, buffers and timestamp arrays allocated. An
/// iterator over the rows, one size at a time (the first error ends it).
///
/// One-thread loops call [`Provider::progress`] while they wait, so a sim in deterministic
/// mode works; with two threads ([`two_threads`]) the server's thread cannot, so the sim
/// must run its device thread (a deterministic sim would stop after 10 s with "no
/// progress").
pub struct Run<'p, P: Provider> {
    p: &'p mut P,
    o: Params,
    bed: Bed<P>,
    info: Info,
    next: usize,
    failed: bool,
    // Preallocated for every size: the loops write into these only.
    tposted: Vec<u64>,
    tcompleted: Vec<u64>,
    samples: Vec<u64>,
    /// [`Params::hw_ts`]: the device time of each iteration's send completion (else empty).
    cqe_ns: Vec<u64>,
    nic_samples: Vec<u64>,
    nic: Option<NicTime>,
    /// Latency: each sample's longest stretch without a spin of the polling loop.
    away: Vec<u64>,
    outliers: Option<Outliers>,
}

impl<'p, P: Provider> Run<'p, P>
where
    P::Qp: Send,
    P::Cq: Send,
{
    /// Check `o`, create and connect the client and server QPs on `p`, and allocate
    /// everything the loops use.
    pub fn new(p: &'p mut P, o: &Params) -> Result<Run<'p, P>> {
        o.check()?;
        if o.hw_ts && p.kind() == ProviderKind::Verbs {
            return Err(crate::providers::verbs::no_completion_timestamps());
        }
        let max_size = *o.sizes.iter().max().ok_or_else(|| bad_opt("no size"))?;
        let bed = setup(p, o, max_size)?;
        if bed.max_inline < o.inline && o.inline > 0 {
            return Err(bad_opt(format!(
                "inline {} B requested, the QP grants {} B",
                o.inline, bed.max_inline
            )));
        }
        // UD carries one MTU at most: clipped sizes stop there, a larger one is refused.
        let sizes: Vec<u32> = if o.qp_type == QpType::Ud && o.clip_to_mtu {
            o.sizes.iter().copied().filter(|&s| s <= bed.mtu).collect()
        } else {
            o.sizes.clone()
        };
        if o.qp_type == QpType::Ud && max_size > bed.mtu && !o.clip_to_mtu {
            return Err(bad_opt(format!(
                "UD: {max_size} B does not fit the path MTU of {} B",
                bed.mtu
            )));
        }
        let info = Info {
            provider: p.kind(),
            device: p.device_name().to_string(),
            mtu: bed.mtu,
            max_inline: bed.max_inline,
            two_threads: two_threads(p.kind(), o),
            client: bed.client.ep,
            server: bed.server.ep,
            sizes,
        };
        let n = o.iters as usize;
        Ok(Run {
            p,
            o: o.clone(),
            bed,
            info,
            next: 0,
            failed: false,
            tposted: vec![0u64; n],
            tcompleted: vec![0u64; n],
            samples: vec![0u64; n.saturating_sub(1)],
            cqe_ns: vec![0u64; if o.hw_ts { n } else { 0 }],
            nic_samples: vec![0u64; if o.hw_ts { n.saturating_sub(1) } else { 0 }],
            nic: None,
            away: vec![
                0u64;
                if o.test.is_lat() {
                    n.saturating_sub(1)
                } else {
                    0
                }
            ],
            outliers: None,
        })
    }

    /// What was set up.
    pub fn info(&self) -> &Info {
        &self.info
    }

    /// With [`Params::hw_ts`]: the device-time figures of the row last returned.
    pub fn nic_time(&self) -> Option<NicTime> {
        self.nic
    }

    /// Latency tests: the outliers of the row last returned ([`Outliers`]).
    pub fn outliers(&self) -> Option<&Outliers> {
        self.outliers.as_ref()
    }

    /// Measure one size.
    fn measure(&mut self, size: u32) -> Result<Row> {
        let o = &self.o;
        let n = o.iters as usize;
        if o.test.is_lat() {
            let two = self.info.two_threads;
            let real0 = lat_loop(
                self.p,
                o,
                &mut self.bed,
                size,
                &mut self.tposted,
                &mut self.away,
                &mut self.cqe_ns,
                two,
            )?;
            for i in 0..n - 1 {
                self.samples[i] = self.tposted[i + 1].saturating_sub(self.tposted[i]);
            }
            let r = stats::lat_row(
                u64::from(size),
                n as u64,
                &self.samples,
                o.test.rtt_factor(),
            )
            .map_err(|e| perr(e.to_string()))?;
            let f = o.test.rtt_factor();
            let table: Vec<u64> = self.samples.iter().map(|&s| s / u64::from(f)).collect();
            self.outliers = Some(Outliers::find(
                u64::from(size),
                &table,
                &self.away,
                o.outlier_x,
                f,
            ));
            self.nic = None;
            if o.hw_ts {
                self.nic = Some(self.nic_time_of(size, real0)?);
            }
            Ok(Row::Lat(r))
        } else {
            bw_loop(
                self.p,
                o,
                &mut self.bed,
                size,
                &mut self.tposted,
                &mut self.tcompleted,
            )?;
            let r = stats::bw_row(
                u64::from(size),
                n,
                o.post_list as usize,
                o.cq_mod as usize,
                &self.tposted,
                &self.tcompleted,
                o.unit,
            )
            .map_err(|e| perr(e.to_string()))?;
            Ok(Row::Bw(r))
        }
    }
}

impl<P: Provider> Run<'_, P> {
    /// The device-time figures from [`Run::cqe_ns`] (see [`NicTime`]); `real0` is the host's
    /// real time of the loop clock's start.
    fn nic_time_of(&mut self, size: u32, real0: u64) -> Result<NicTime> {
        let n = self.o.iters as usize;
        let c = &self.cqe_ns;
        if c.contains(&0) {
            return Err(perr(
                "hw_ts: a send completion carried no timestamp (the CQ was not created for them)",
            ));
        }
        for i in 0..n - 1 {
            self.nic_samples[i] = c[i + 1].saturating_sub(c[i]);
        }
        let row = stats::lat_row(
            u64::from(size),
            n as u64,
            &self.nic_samples,
            self.o.test.rtt_factor(),
        )
        .map_err(|e| perr(e.to_string()))?;
        for ((d, &cqe), &post) in self.nic_samples.iter_mut().zip(c).zip(&self.tposted) {
            *d = cqe.saturating_sub(real0 + post);
        }
        self.nic_samples.sort_unstable();
        let post_to_cqe_ns = self.nic_samples[(n - 1) / 2];
        Ok(NicTime {
            row,
            post_to_cqe_ns,
        })
    }
}

impl<P: Provider> Iterator for Run<'_, P>
where
    P::Qp: Send,
    P::Cq: Send,
{
    type Item = Result<Row>;

    fn next(&mut self) -> Option<Result<Row>> {
        if self.failed {
            return None;
        }
        let size = *self.info.sizes.get(self.next)?;
        self.next += 1;
        let r = self.measure(size);
        self.failed = r.is_err();
        Some(r)
    }
}

fn perr(detail: impl Into<String>) -> Error {
    Error::Failed {
        context: "perf",
        detail: detail.into(),
    }
}

fn bad_opt(detail: impl Into<String>) -> Error {
    Error::InvalidArgument {
        context: "perf",
        detail: detail.into(),
    }
}
