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

mod pingpong;
pub mod remote;
pub mod stats;
pub mod wire;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use memmap2::MmapMut;

use crate::providers::{
    Access, Completion, CompletionQueue, ConnectOpts, MemoryRegion, Provider, ProviderKind, QpCaps,
    QpConfig, QpEndpoint, QpType, QueuePair, RecvQueue, RecvWr, SendOp, SendQueue, SendWr, Sge,
    UdDest,
};
use crate::{Error, Result};
use pingpong::{Kind, Waiter, RECV_WRID};
use stats::{BwRow, BwUnit, LatRow};

/// The tests [`Run`] measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Test {
    /// RDMA WRITE ping-pong latency.
    WriteLat,
    /// SEND ping-pong latency.
    SendLat,
    /// RDMA READ latency (full round trip).
    ReadLat,
    /// Fetch-and-add latency (full round trip).
    AtomicLat,
    /// RDMA WRITE bandwidth.
    WriteBw,
    /// SEND bandwidth.
    SendBw,
    /// RDMA READ bandwidth.
    ReadBw,
}

impl Test {
    /// Every test, latency tests first.
    pub const ALL: [Test; 7] = [
        Test::WriteLat,
        Test::SendLat,
        Test::ReadLat,
        Test::AtomicLat,
        Test::WriteBw,
        Test::SendBw,
        Test::ReadBw,
    ];
    /// The test's name (`write_lat`, ...), as perftest's tools are named without `ib_`.
    pub fn name(self) -> &'static str {
        match self {
            Test::WriteLat => "write_lat",
            Test::SendLat => "send_lat",
            Test::ReadLat => "read_lat",
            Test::AtomicLat => "atomic_lat",
            Test::WriteBw => "write_bw",
            Test::SendBw => "send_bw",
            Test::ReadBw => "read_bw",
        }
    }
    /// Parse [`Test::name`].
    pub fn from_name(s: &str) -> Option<Test> {
        Test::ALL.into_iter().find(|t| t.name() == s)
    }
    /// True for the latency tests.
    pub fn is_lat(self) -> bool {
        matches!(
            self,
            Test::WriteLat | Test::SendLat | Test::ReadLat | Test::AtomicLat
        )
    }
    /// True for READ and atomics (the requester's memory is written; no inline, no UC/UD).
    pub fn is_read_like(self) -> bool {
        matches!(self, Test::ReadLat | Test::ReadBw | Test::AtomicLat)
    }
    /// True for the SEND tests (the only ones UD can run).
    pub fn is_send(self) -> bool {
        matches!(self, Test::SendLat | Test::SendBw)
    }
    /// 2 for ping-pong tests (half the round trip), 1 for READ and atomics.
    pub fn rtt_factor(self) -> u32 {
        if self.is_read_like() {
            1
        } else {
            2
        }
    }
}

/// Largest message size (2^23 = 8 MiB, the last size of perftest's `-a`).
pub const MAX_SIZE: u32 = 1 << 23;
/// perftest's default message size of the bandwidth tests (`DEF_SIZE_BW`); a peer that is
/// perftest sends this much unless told otherwise, so a server must take it.
pub const DEFAULT_BW_SIZE: u32 = 65536;
/// perftest's default `cq_mod`.
pub const DEFAULT_CQ_MOD: u32 = 100;
/// Outstanding requests in the bandwidth tests (perftest's default `tx_depth`); also the
/// largest post list.
pub const TX_DEPTH: u32 = 128;
/// Receives kept posted for the SEND tests.
pub const RX_DEPTH: u32 = 512;
/// Most iterations per size: the sample buffers (three `u64` per iteration, allocated
/// before the first stamp) stay within 384 MiB.
pub const MAX_ITERS: u32 = 1 << 24;
/// Default inline size of the WRITE/SEND latency tests.
pub const DEFAULT_LAT_INLINE: u32 = 220;
/// Largest inline size asked of a QP.
pub const MAX_INLINE: u32 = 1024;
/// Bytes of GRH in front of every UD receive.
const GRH: u32 = 40;

/// The parameters of one measurement (with the perftest flag of each).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Params {
    /// The test.
    pub test: Test,
    /// Port (1-based) (perftest: `-i`).
    pub port: u8,
    /// GID index for the GRH (perftest: `-x`).
    pub gid_index: u8,
    /// Message sizes, measured in this order (perftest: `-s`, or every power of two of `-a`).
    pub sizes: Vec<u32>,
    /// On UD, drop the sizes above the path MTU instead of refusing them (perftest's `-a`).
    pub clip_to_mtu: bool,
    /// Iterations per size (perftest: `-n`).
    pub iters: u32,
    /// Messages up to this size are sent inline (perftest: `-I`).
    pub inline: u32,
    /// Bandwidth: requests per doorbell (perftest: `-l`).
    pub post_list: u32,
    /// Bandwidth: every this many requests is signaled (and the last) (perftest: `-Q`).
    pub cq_mod: u32,
    /// Transport (perftest: `-c`).
    pub qp_type: QpType,
    /// Unit of the bandwidth columns (perftest: `--report_gbits`).
    pub unit: BwUnit,
    /// How many threads drive `write_lat` / `send_lat`: 1 or 2; `None` = [`two_threads`]'s
    /// default.
    pub threads: Option<u8>,
    /// Latency tests: also measure in the device's time, from completion timestamps
    /// ([`Provider::create_cq_ts`]); see [`NicTime`].
    pub hw_ts: bool,
}

impl Params {
    /// perftest's defaults for `test`: size 2 for latency, 65536 for bandwidth (atomics 8),
    /// 5000 iterations for `write_bw` and 1000 for every other test, inline
    /// [`DEFAULT_LAT_INLINE`] for WRITE/SEND latency and none otherwise, post list 1,
    /// `cq_mod` [`DEFAULT_CQ_MOD`], RC, port 1, GID index 0, MiB/s.
    pub fn new(test: Test) -> Params {
        Params {
            test,
            port: 1,
            gid_index: 0,
            sizes: vec![match test {
                Test::AtomicLat => 8,
                t if t.is_lat() => 2,
                _ => DEFAULT_BW_SIZE,
            }],
            clip_to_mtu: false,
            // perftest: DEF_ITERS_WB for write_bw, DEF_ITERS otherwise (a server that is
            // perftest counts exactly this many SENDs).
            iters: if test == Test::WriteBw { 5000 } else { 1000 },
            inline: match test {
                Test::WriteLat | Test::SendLat => DEFAULT_LAT_INLINE,
                _ => 0,
            },
            post_list: 1,
            cq_mod: DEFAULT_CQ_MOD,
            qp_type: QpType::Rc,
            unit: BwUnit::MiBps,
            threads: None,
            hw_ts: false,
        }
    }

    /// perftest's sizes of `-a`: 2^1 .. 2^23.
    pub fn all_sizes() -> Vec<u32> {
        (1..=23).map(|k| 1u32 << k).collect()
    }

    /// Check the parameters against perftest's rules (see the module doc). The message names
    /// the parameter, with perftest's flag.
    pub fn check(&self) -> Result<()> {
        let t = self.test.name();
        if self.port == 0 {
            return Err(bad_opt("port (-i): ports are numbered from 1"));
        }
        match self.qp_type {
            QpType::Uc if self.test.is_read_like() => {
                return Err(bad_opt(format!("{t}: UC has no READ or atomics (use RC)")))
            }
            QpType::Ud if !self.test.is_send() => {
                return Err(bad_opt(format!("{t}: UD only does SEND (use RC or UC)")))
            }
            _ => {}
        }
        if self.inline > 0 && self.test.is_read_like() {
            return Err(bad_opt(format!(
                "{t}: inline (-I) is not possible for READ and atomics"
            )));
        }
        if self.inline > MAX_INLINE {
            return Err(bad_opt(format!("inline (-I): at most {MAX_INLINE} bytes")));
        }
        if self.test.is_lat() && (self.post_list != 1 || self.cq_mod != DEFAULT_CQ_MOD) {
            return Err(bad_opt(format!(
                "{t}: post list (-l) and cq_mod (-Q) are bandwidth parameters"
            )));
        }
        if self.sizes.is_empty() {
            return Err(bad_opt("no message size"));
        }
        for &s in &self.sizes {
            if self.test == Test::AtomicLat && s != 8 {
                return Err(bad_opt("atomic_lat: atomics always move 8 bytes"));
            }
            if s == 0 || s > MAX_SIZE {
                return Err(bad_opt(format!(
                    "size (-s) {s}: out of range 1..={MAX_SIZE}"
                )));
            }
        }
        if self.test.is_lat() && self.iters < 4 {
            return Err(bad_opt(
                "iterations (-n): latency needs at least 4 iterations (3 samples; the 2 largest are dropped)",
            ));
        }
        if self.iters == 0 {
            return Err(bad_opt("iterations (-n): at least 1 iteration"));
        }
        if self.iters > MAX_ITERS {
            return Err(bad_opt(format!(
                "iterations (-n) {}: at most {MAX_ITERS} (the timestamps of every iteration \
                 are kept in memory, 24 bytes each, allocated before the run)",
                self.iters
            )));
        }
        if self.post_list == 0 || self.post_list > TX_DEPTH {
            return Err(bad_opt(format!(
                "post list (-l) {}: out of range 1..={TX_DEPTH}",
                self.post_list
            )));
        }
        if self.cq_mod == 0 {
            return Err(bad_opt("cq_mod (-Q): at least 1"));
        }
        if self.post_list > 1 && self.post_list % self.cq_mod != 0 {
            return Err(bad_opt(format!(
                "post list (-l) {} must be a multiple of cq_mod (-Q) {}",
                self.post_list, self.cq_mod
            )));
        }
        if self.hw_ts && !matches!(self.test, Test::WriteLat | Test::ReadLat | Test::AtomicLat) {
            return Err(bad_opt(format!(
                "{t}: --hw-ts needs a signaled request per iteration: write_lat, read_lat or \
                 atomic_lat (send_lat signals every 64th send)"
            )));
        }
        if matches!(self.threads, Some(n) if n != 1 && n != 2) {
            return Err(bad_opt("threads: 1 or 2"));
        }
        Ok(())
    }
}

/// True when the ping-pong of `o` runs client and server on a thread each: `o.threads` if
/// set, else 2 on a real device and 1 on the sim (see the module doc).
pub fn two_threads(kind: ProviderKind, o: &Params) -> bool {
    match o.threads {
        Some(t) => t == 2,
        None => kind != ProviderKind::Sim,
    }
}

/// One result row.
// A latency row carries its histogram inline (Copy, no allocation): rows are few (one per
// size) and made after the measured loop, so their size costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Row {
    /// A latency test's row.
    Lat(LatRow),
    /// A bandwidth test's row.
    Bw(BwRow),
}

impl Row {
    /// The message size of the row.
    pub fn bytes(&self) -> u64 {
        match self {
            Row::Lat(r) => r.bytes,
            Row::Bw(r) => r.bytes,
        }
    }
}

/// What a run set up: the facts a report of it states besides its rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Info {
    /// Which provider ran.
    pub provider: ProviderKind,
    /// Its device name.
    pub device: String,
    /// Path MTU in bytes.
    pub mtu: u32,
    /// Inline bytes the QPs grant.
    pub max_inline: u32,
    /// Client and server each on its own thread (`write_lat` / `send_lat`).
    pub two_threads: bool,
    /// The client QP's endpoint (the measuring side).
    pub client: QpEndpoint,
    /// The server QP's endpoint.
    pub server: QpEndpoint,
    /// The sizes that will be measured, in order (on UD with [`Params::clip_to_mtu`]: those
    /// that fit the path MTU).
    pub sizes: Vec<u32>,
}

/// The result of [`run`]: the setup and one row per size.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// What was set up.
    pub info: Info,
    /// One row per size of [`Info::sizes`].
    pub rows: Vec<Row>,
    /// With [`Params::hw_ts`]: the device-time figures of each row, in the same order.
    pub nic: Vec<NicTime>,
}

/// The device-time figures of one latency row ([`Params::hw_ts`]).
///
/// A sample is the time between the client's send completions of two consecutive iterations
/// as the device stamped them: one round trip (the request, the peer's answer, the client's
/// next post), halved for `write_lat` as the software figure is. The breakdown puts the
/// host's post stamp on the device's real-time scale (host `CLOCK_REALTIME` at the start
/// plus the loop clock's offset): on the sim the device clock is the host's
/// `CLOCK_REALTIME`, so it holds to the loop clock's conversion (well under a microsecond
/// over a run); on hardware only as far as the NIC clock follows the host's (PTP / phc2sys).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NicTime {
    /// perftest's statistics of the device-time samples.
    pub row: LatRow,
    /// Median time from the client's post to its send completion's timestamp, ns.
    pub post_to_cqe_ns: u64,
}

/// Measure `o` on `p`: every size, then the report. See [`Run`] for a row at a time.
pub fn run<P: Provider>(p: &mut P, o: &Params) -> Result<Report>
where
    P::Qp: Send,
    P::Cq: Send,
{
    let mut r = Run::new(p, o)?;
    let mut rows = Vec::with_capacity(r.info.sizes.len());
    let mut nic = Vec::new();
    while let Some(row) = r.next() {
        rows.push(row?);
        nic.extend(r.nic_time());
    }
    Ok(Report {
        info: r.info,
        rows,
        nic,
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
                "--hw-ts: a send completion carried no timestamp (the CQ was not created for them)",
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
    Error::Protocol {
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

/// One side: its QP, CQ, MR, and buffer halves (`[0, half)` outgoing, `[half, 2 half)`
/// incoming).
struct Side<P: Provider> {
    qp: P::Qp,
    cq: P::Cq,
    mr: P::Mr,
    ep: QpEndpoint,
    base: *mut u8,
    /// Receives still posted (SEND tests).
    routs: u32,
}

/// Everything a run sets up. Field order is drop order: AHs and QPs (inside the sides)
/// before the PD, the memory last.
struct Bed<P: Provider> {
    ahs: Option<(P::Ah, P::Ah)>,
    client: Side<P>,
    server: Side<P>,
    _pd: P::Pd,
    _mem: (MmapMut, MmapMut),
    half: usize,
    max_inline: u32,
    mtu: u32,
}

fn setup<P: Provider>(p: &mut P, o: &Params, max_size: u32) -> Result<Bed<P>> {
    let grh = if o.qp_type == QpType::Ud { GRH } else { 0 };
    // Each half holds one message (plus the GRH on UD), 64-byte aligned.
    let half = ((max_size + grh) as usize).next_multiple_of(64).max(64);
    let map = || {
        MmapMut::map_anon(2 * half).map_err(|e| Error::Io {
            context: format!("perf: mmap of {} B", 2 * half),
            kind: e.kind(),
            detail: e.to_string(),
        })
    };
    let (mut m0, mut m1) = (map()?, map()?);
    let pd = p.alloc_pd()?;
    let send = o.test.is_send();
    let caps = QpCaps {
        max_send_wr: TX_DEPTH,
        max_recv_wr: if send { RX_DEPTH } else { 1 },
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: o.inline,
    };
    let cfg = QpConfig {
        qp_type: o.qp_type,
        caps,
        sq_sig_all: false,
    };
    let copts = connect_opts(o);
    let mk = |p: &mut P, m: &mut MmapMut| -> Result<Side<P>> {
        let cqe = caps.max_send_wr + caps.max_recv_wr + 1;
        let mut cq = if o.hw_ts {
            p.create_cq_ts(cqe)?
        } else {
            p.create_cq(cqe)?
        };
        let qp = p.create_qp(&pd, &mut cq, None, None, &cfg)?;
        let base = m.as_mut_ptr();
        // SAFETY: `base` points to the `2 * half` bytes of the anonymous mapping `m`, which
        // the bed keeps (field `_mem`, dropped last) until after the MR is dropped.
        let mr = unsafe { p.reg_mr(&pd, base, 2 * half, Access::ALL) }?;
        let ep = p.endpoint(&qp, &copts)?;
        Ok(Side {
            qp,
            cq,
            mr,
            ep,
            base,
            routs: 0,
        })
    };
    let mut client = mk(p, &mut m0)?;
    let mut server = mk(p, &mut m1)?;
    let (ce, se) = (client.ep, server.ep);
    p.connect(&mut client.qp, &ce, &se, &copts)?;
    p.connect(&mut server.qp, &se, &ce, &copts)?;
    let ahs = if o.qp_type == QpType::Ud {
        Some((
            p.create_ah(&pd, &se, &copts)?,
            p.create_ah(&pd, &ce, &copts)?,
        ))
    } else {
        None
    };
    let mtu = ce.mtu.min(se.mtu).bytes();
    let max_inline = client
        .qp
        .caps()
        .max_inline_data
        .min(server.qp.caps().max_inline_data);
    let mut bed = Bed {
        ahs,
        client,
        server,
        _pd: pd,
        _mem: (m0, m1),
        half,
        max_inline,
        mtu,
    };
    if send {
        for s in [&mut bed.client, &mut bed.server] {
            refill_recvs(s, half, max_size + grh)?;
        }
    }
    Ok(bed)
}

fn connect_opts(o: &Params) -> ConnectOpts {
    let rd = if o.test.is_read_like() { 16 } else { 1 };
    ConnectOpts {
        port: o.port,
        gid_index: o.gid_index,
        max_rd_atomic: rd,
        max_dest_rd_atomic: rd,
        // perftest's: the receiver re-posts as it consumes, a sender ahead of it waits.
        rnr_retry: 7,
        ..ConnectOpts::default()
    }
}

/// Post receives until the queue holds [`RX_DEPTH`] (one ring).
fn refill_recvs<P: Provider>(s: &mut Side<P>, half: usize, len: u32) -> Result<()> {
    let sge = [s.mr.sge(half, len)];
    let rq = s.qp.rq();
    let mut added = 0;
    while s.routs < RX_DEPTH {
        if let Err(r) = rq.post_recv(RecvWr {
            wr_id: RECV_WRID,
            sges: &sge,
        }) {
            rq.ring();
            return Err(perr(format!("post_recv: {}", r.error)));
        }
        s.routs += 1;
        added += 1;
    }
    if added > 0 {
        rq.ring();
    }
    Ok(())
}

/// The clock of the measured loops: the time-stamp counter on x86-64 (as perftest's
/// `get_cycles`), [`Instant`] elsewhere. Stamps are raw ticks; [`Clock::to_ns`] turns them
/// into nanoseconds since the start with the tick rate measured against [`Instant`] over the
/// whole run (perftest takes the rate from the CPU's MHz instead). Reading `Instant` in the
/// loop would cost an emulated HPET access per stamp in the TCG guest (microseconds).
struct Clock {
    t0: Instant,
    tick0: u64,
    /// Host `CLOCK_REALTIME` at `t0`, ns since the epoch.
    real0: u64,
}

impl Clock {
    fn start() -> Clock {
        let real0 = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let t0 = Instant::now();
        let mut c = Clock {
            t0,
            tick0: 0,
            real0,
        };
        c.tick0 = c.ticks();
        c
    }

    #[inline]
    fn ticks(&self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: RDTSC has no memory effects and exists on every x86-64 CPU; it is only
            // `unsafe` on older toolchains.
            #[allow(unused_unsafe)]
            unsafe {
                std::arch::x86_64::_rdtsc()
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self.t0.elapsed().as_nanos() as u64
        }
    }

    /// Rewrite `stamps` (ticks) as nanoseconds since [`Clock::start`]. Call once, right after
    /// the loop. Entries never stamped (0) stay 0.
    fn to_ns(&self, stamps: &mut [u64]) {
        let ticks = self.ticks().wrapping_sub(self.tick0);
        let ns = self.t0.elapsed().as_nanos() as f64;
        let per_tick = if ticks == 0 { 0.0 } else { ns / ticks as f64 };
        for s in stamps.iter_mut() {
            if *s != 0 {
                *s = (s.wrapping_sub(self.tick0) as f64 * per_tick) as u64;
            }
        }
    }
}

/// Poll `cq` until one completion arrives; it must be a success.
fn wait_one<P: Provider>(
    p: &mut P,
    cq: &mut P::Cq,
    wc: &mut [Completion; 1],
    ts: Option<&mut u64>,
    w: &mut Waiter<'_>,
    what: &str,
) -> Result<Completion> {
    w.reset();
    let mut ns = [0u64];
    loop {
        let got = match ts {
            Some(_) => cq.poll_ts(wc, &mut ns),
            None => cq.poll(wc),
        };
        if got == 1 {
            if let Some(t) = ts {
                *t = ns[0];
            }
            let c = wc[0];
            if !c.is_ok() {
                return Err(perr(format!(
                    "{what}: completion wr_id {} failed: {} (vendor_err {:#x})",
                    c.wr_id, c.status, c.vendor_err
                )));
            }
            return Ok(c);
        }
        p.progress();
        w.tick(what)?;
    }
}

fn post_one<P: Provider>(s: &mut Side<P>, wr: SendWr<'_, P::Ah>) -> Result<()> {
    let sq = s.qp.sq();
    if let Err(r) = sq.post(wr) {
        return Err(perr(format!("post {}: {}", wr.op.name(), r.error)));
    }
    sq.ring();
    Ok(())
}

fn lat_loop<P: Provider>(
    p: &mut P,
    o: &Params,
    bed: &mut Bed<P>,
    size: u32,
    tposted: &mut [u64],
    cqe_ns: &mut [u64],
    two_threads: bool,
) -> Result<u64>
where
    P::Qp: Send,
    P::Cq: Send,
{
    let n = o.iters as usize;
    let half = bed.half;
    let use_inline = size <= o.inline && !o.test.is_read_like();
    let grh = if o.qp_type == QpType::Ud { GRH } else { 0 };
    let (c_rkey, s_rkey) = (bed.client.mr.rkey(), bed.server.mr.rkey());
    let (c_base, s_base) = (bed.client.base as usize, bed.server.base as usize);
    let (c_qpn, s_qpn) = (bed.client.ep.qpn, bed.server.ep.qpn);
    let c_src = [bed.client.mr.sge(0, size)];
    let s_src = [bed.server.mr.sge(0, size)];
    // READ lands in the client's incoming half; the atomic's old value too (8 bytes).
    let c_dst = [bed.client.mr.sge(half, size)];
    let last = size as usize - 1;
    // The incoming bytes start at 0: the first expected value is 1.
    for at in [c_base + half + last, s_base + half + last] {
        pingpong::write_byte(at, 0);
    }
    let stop = AtomicBool::new(false);
    let mut w = Waiter::new(&stop);
    let mut wc = [Completion::EMPTY];
    tposted.fill(0);
    cqe_ns.fill(0);
    let clock = Clock::start();
    let stamp = || clock.ticks().max(1);
    match o.test {
        Test::WriteLat | Test::SendLat => {
            let qkey = ConnectOpts::default().qkey;
            let (d_server, d_client) = match bed.ahs.as_ref() {
                Some((to_s, to_c)) => (
                    Some(UdDest {
                        ah: to_s,
                        remote_qpn: s_qpn,
                        remote_qkey: qkey,
                    }),
                    Some(UdDest {
                        ah: to_c,
                        remote_qpn: c_qpn,
                        remote_qkey: qkey,
                    }),
                ),
                None => (None, None),
            };
            let write = o.test == Test::WriteLat;
            // Inline payloads are copied into the WQE at post time, so they come from
            // ordinary memory, prepared before the clock starts.
            let inline = vec![0u8; if use_inline { size as usize } else { 0 }];
            let (cl, sv) = (&mut bed.client, &mut bed.server);
            let mut ce = pingpong::End {
                kind: if write {
                    Kind::Write {
                        raddr: (s_base + half) as u64,
                        rkey: s_rkey,
                    }
                } else {
                    Kind::Send
                },
                src: c_src,
                recv: [cl.mr.sge(half, size + grh)],
                inline: inline.clone(),
                out_last: c_base + last,
                in_last: c_base + half + last,
                dest: d_server,
                iters: o.iters,
                pending: 0,
                routs: cl.routs,
                early: 0,
                rx_depth: RX_DEPTH,
                qp: &mut cl.qp,
                cq: &mut cl.cq,
                cqe_ns: &mut *cqe_ns,
            };
            let mut se = pingpong::End {
                kind: if write {
                    Kind::Write {
                        raddr: (c_base + half) as u64,
                        rkey: c_rkey,
                    }
                } else {
                    Kind::Send
                },
                src: s_src,
                recv: [sv.mr.sge(half, size + grh)],
                inline,
                out_last: s_base + last,
                in_last: s_base + half + last,
                dest: d_client,
                iters: o.iters,
                pending: 0,
                routs: sv.routs,
                early: 0,
                rx_depth: RX_DEPTH,
                qp: &mut sv.qp,
                cq: &mut sv.cq,
                cqe_ns: &mut [],
            };
            let res = if two_threads {
                std::thread::scope(|sc| {
                    let h = sc.spawn(|| {
                        let r = pingpong::server(&mut se, o.iters, &stop);
                        if r.is_err() {
                            stop.store(true, Ordering::Relaxed);
                        }
                        r
                    });
                    let rc = pingpong::client(&mut ce, tposted, &stamp, &stop, &mut || {});
                    if rc.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    let rs = h
                        .join()
                        .unwrap_or_else(|_| Err(perr("the server thread panicked")));
                    rc.and(rs)
                })
            } else {
                pingpong::alternate(&mut ce, &mut se, tposted, &stamp, &mut || p.progress())
            };
            let (c_routs, s_routs) = (ce.routs + ce.early, se.routs + se.early);
            drop((ce, se));
            bed.client.routs = c_routs;
            bed.server.routs = s_routs;
            res?;
        }
        Test::ReadLat | Test::AtomicLat => {
            let ts = !cqe_ns.is_empty();
            for (i, t) in tposted.iter_mut().enumerate().take(n) {
                *t = stamp();
                let op = if o.test == Test::ReadLat {
                    SendOp::Read {
                        raddr: s_base as u64,
                        rkey: s_rkey,
                    }
                } else {
                    SendOp::FetchAdd {
                        raddr: s_base as u64,
                        rkey: s_rkey,
                        add: 1,
                    }
                };
                post_one(
                    &mut bed.client,
                    SendWr::new(i as u64, op, &c_dst).signaled(),
                )?;
                let at = if ts { cqe_ns.get_mut(i) } else { None };
                wait_one(p, &mut bed.client.cq, &mut wc, at, &mut w, op.name())?;
            }
        }
        _ => return Err(bad_opt("not a latency test")),
    }
    clock.to_ns(tposted);
    Ok(clock.real0)
}

fn bw_loop<P: Provider>(
    p: &mut P,
    o: &Params,
    bed: &mut Bed<P>,
    size: u32,
    tposted: &mut [u64],
    tcompleted: &mut [u64],
) -> Result<()> {
    let n = o.iters as usize;
    let half = bed.half;
    let pl = o.post_list as usize;
    let cq_mod = o.cq_mod as usize;
    let use_inline = size <= o.inline && !o.test.is_read_like();
    let grh = if o.qp_type == QpType::Ud { GRH } else { 0 };
    let s_rkey = bed.server.mr.rkey();
    let s_base = bed.server.base as u64;
    let c_src = [bed.client.mr.sge(0, size)];
    let c_dst = [bed.client.mr.sge(half, size)];
    // Inline payload: copied into the WQE at post time, so ordinary memory will do.
    let inline_bytes = vec![0u8; if use_inline { size as usize } else { 0 }];
    let dest = bed.ahs.as_ref().map(|(to_s, _)| UdDest {
        ah: to_s,
        remote_qpn: bed.server.ep.qpn,
        remote_qkey: ConnectOpts::default().qkey,
    });
    let op = match o.test {
        Test::WriteBw => SendOp::Write {
            raddr: s_base + half as u64,
            rkey: s_rkey,
        },
        Test::ReadBw => SendOp::Read {
            raddr: s_base,
            rkey: s_rkey,
        },
        Test::SendBw => SendOp::Send,
        _ => return Err(bad_opt("not a bandwidth test")),
    };
    let sges: &[Sge] = if o.test == Test::ReadBw {
        &c_dst
    } else {
        &c_src
    };
    let mut wcs = [Completion::EMPTY; 16];
    let stop = AtomicBool::new(false);
    let mut w = Waiter::new(&stop);
    tposted.fill(0);
    tcompleted.fill(0);
    let clock = Clock::start();
    let stamp = || clock.ticks().max(1);
    let (mut scnt, mut ccnt, mut received) = (0usize, 0usize, 0usize);
    let tx = TX_DEPTH as usize;
    while ccnt < n {
        while scnt < n && scnt - ccnt + pl <= tx {
            tposted[scnt] = stamp();
            let sq = bed.client.qp.sq();
            let end = (scnt + pl).min(n);
            for k in scnt..end {
                let mut wr = SendWr::new(k as u64, op, sges);
                if (k + 1) % cq_mod == 0 || k + 1 == n {
                    wr = wr.signaled();
                }
                if use_inline {
                    wr = wr.inline(&inline_bytes);
                }
                if let Some(d) = dest {
                    wr = wr.to(d);
                }
                if let Err(r) = sq.post(wr) {
                    sq.ring();
                    return Err(perr(format!("post {} #{k}: {}", op.name(), r.error)));
                }
            }
            sq.ring();
            scnt = end;
        }
        if o.test == Test::SendBw {
            let m = bed.server.cq.poll(&mut wcs);
            for c in &wcs[..m] {
                if !c.is_ok() {
                    return Err(perr(format!("server receive failed: {}", c.status)));
                }
            }
            bed.server.routs -= m as u32;
            received += m;
            if bed.server.routs < RX_DEPTH / 2 {
                refill_recvs(&mut bed.server, half, size + grh)?;
            }
        }
        let m = bed.client.cq.poll(&mut wcs);
        if m == 0 {
            p.progress();
            w.tick("bandwidth completions")?;
            continue;
        }
        let now = stamp();
        for c in &wcs[..m] {
            if !c.is_ok() {
                return Err(perr(format!(
                    "{} #{} failed: {} (vendor_err {:#x})",
                    op.name(),
                    c.wr_id,
                    c.status,
                    c.vendor_err
                )));
            }
            // Completions are in order: the one of request j retires every request <= j.
            let j = c.wr_id as usize;
            if j >= n || j < ccnt {
                return Err(perr(format!("unexpected completion wr_id {}", c.wr_id)));
            }
            tcompleted[j] = now;
            ccnt = j + 1;
        }
        w.reset();
    }
    clock.to_ns(tposted);
    clock.to_ns(tcompleted);
    // send_bw on RC: every completed SEND consumed a receive; collect all of them so the
    // next size starts with a full receive queue. (UC/UD may drop messages: what is left
    // over is counted in the next size's loop.)
    if o.test == Test::SendBw {
        if o.qp_type == QpType::Rc {
            w.reset();
            while received < n {
                let m = bed.server.cq.poll(&mut wcs);
                received += m;
                bed.server.routs -= m as u32;
                if m == 0 {
                    p.progress();
                    w.tick("the server's receives")?;
                }
            }
        }
        refill_recvs(&mut bed.server, half, size + grh)?;
    }
    Ok(())
}
