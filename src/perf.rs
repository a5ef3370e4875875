//! perftest-style latency and bandwidth runs over any provider: `rdma-direct perf`.
//!
//! `rdma-direct perf <test> [opts]` runs one of `write_lat`, `send_lat`, `read_lat`,
//! `atomic_lat` (fetch-and-add), `write_bw`, `send_bw`, `read_bw` with perftest's flags and
//! statistics ([`stats`]), **in one process**: a client QP and a server QP on the same device,
//! connected to each other (loopback), where perftest runs two processes.
//!
//! ## Providers
//!
//! - without `-d`: the software mlx5 device ([`SimDevice`]) in device-thread mode, driven
//!   by the production mlx5 hot path. Its figures are a software model's ("sim: software mlx5
//!   device, not hardware"): the device thread answers a doorbell no faster than a cross-core
//!   cache-line round trip.
//! - `-d DEV`: the verbs provider ([`VerbsDevice`]) on that device, i.e. libibverbs'
//!   `ibv_post_send` / `ibv_poll_cq` (rxe: a `write()` system call per doorbell).
//!
//! ## Threads
//!
//! `read_lat`, `atomic_lat` and the bandwidth tests have one active side: the client's
//! thread does everything (`send_bw` re-posts the server's receives in between).
//!
//! `write_lat` and `send_lat` have two active sides. With `-d` (a real verbs device) each
//! side gets its own thread, as perftest's two processes: on rxe the kernel does a whole
//! transfer inside the posting `ibv_post_send` (request, delivery, ACK, completion), and a
//! peer on another CPU sees the data before that call returns; one thread serving both sides
//! would wait for every ACK tail and measured about twice perftest's half round trip in the
//! TCG guest (18 us against 10). On the sim one thread alternates between the sides: the
//! device thread needs the second core of a 2-core machine, and a third spinning thread would
//! measure the scheduler. `--threads 1|2` overrides either default; a sample then includes
//! the server's turn-around in the same thread, as it does in perftest's server process.
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
//! - `*_bw`: the client keeps up to `tx_depth` (128) requests outstanding, posts `-l` at a
//!   time with one doorbell, signals every `-Q`-th request and the last, and stamps posts and
//!   completions for [`stats::bw_row`]. `send_bw` re-posts the server's receives as they
//!   complete.
//!
//! The measured loops allocate nothing: timestamp arrays, SGEs, inline payloads and
//! completion buffers are prepared before the first stamp.
//!
//! ## Flags (perftest's)
//!
//! `-d dev -i port -x gid_index -s size -n iters -a (sizes 2^1 .. 2^23) -I inline
//! -l post_list -Q cq_mod -c RC|UC|UD --report_gbits --json`. As in perftest: `-I` is refused
//! for READ and atomics; `-l` and `-Q` are bandwidth options (`-Q` default 100; with `-l` and
//! no `-Q`, `cq_mod` = `post_list`; with both, `post_list` must be a multiple of `cq_mod`; when
//! the iterations are not a multiple of `post_list` the last list is shorter, where perftest
//! 4.5 refuses "Number of iterations must be a multiple of post list size"); UC refuses READ
//! and atomics; UD allows only SEND (with `-a`: sizes up to the path MTU); atomics always
//! move 8 bytes. Inline defaults to 220 bytes for the WRITE/SEND latency
//! tests and to none for the bandwidth tests (perftest's defaults for rxe-class devices).

//! ## Measured (2026-12-02; none of this is hardware)
//!
//! **rxe in the TCG guest** (`tests/guest/run --release`, one boot, perftest 4.5 as two
//! processes on 127.0.0.1 against `rdma-direct perf -d rxe0 -x 1`, t_typical / MsgRate, three
//! rounds):
//!
//! ```text
//! ib_write_lat -s 2 -n 1000           9.06  9.89  18.26 us
//! perf write_lat -s 2 -n 1000         9.66 15.98   9.27 us   (--threads 1: 18.3 32.2 17.8)
//! ib_send_lat -s 2 -n 1000           10.11 10.24 us
//! perf send_lat -s 2 -n 1000         10.10 13.77 us          (--threads 1: 18.6 18.4)
//! ib_read_lat -s 2 -n 1000           27.95 us;  perf read_lat 29.84 us; perf atomic_lat 18.18 us
//! ib_write_bw -s 64 -n 2000          0.0535 0.0515 0.0499 Mpps
//! perf write_bw -s 64 -n 2000        0.0456 0.0514 0.0441 Mpps
//! ib_write_bw -s 64 -n 2048 -l 32    0.0544 0.0457 0.0670 Mpps  (-n 2000 -l 32: refused)
//! perf write_bw -s 64 -n 2000 -l 32  0.0669 0.0632 0.0657 Mpps
//! ```
//!
//! **sim** (release build on the 2-vCPU build machine, shared with other jobs; device-thread
//! mode, one application thread): t_typical 0.37-0.46 us write_lat, 0.43-0.66 us send_lat,
//! 0.43-0.58 us read_lat, 0.40-0.60 us atomic_lat; 64 B write_bw 4.2-5.5 Mpps (-l 32: 4.3-5.3),
//! send_bw 2.4-3.4 Mpps, read_bw 0.8-5.6 Mpps (the spread is other jobs on the machine).

mod pingpong;
pub mod stats;

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use memmap2::MmapMut;

use crate::providers::rxe::VerbsDevice;
use crate::providers::sim::SimDevice;
use crate::providers::{
    Access, AddressHandle, Completion, CompletionQueue, ConnectOpts, MemoryRegion, Provider,
    ProviderKind, QpCaps, QpConfig, QpEndpoint, QpType, QueuePair, RecvQueue, RecvWr, SendOp,
    SendQueue, SendWr, Sge, UdDest,
};
use crate::{Error, Result};
use pingpong::{Kind, Waiter, RECV_WRID};
use stats::{BwRow, BwUnit, LatRow};

/// The tests `rdma-direct perf` runs.
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
    /// Every test, in the order of the usage text.
    pub const ALL: [Test; 7] = [
        Test::WriteLat,
        Test::SendLat,
        Test::ReadLat,
        Test::AtomicLat,
        Test::WriteBw,
        Test::SendBw,
        Test::ReadBw,
    ];
    /// The command-line name (`write_lat`, ...).
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
    /// The verb, as perftest's banner names it.
    fn verb(self) -> &'static str {
        match self {
            Test::WriteLat | Test::WriteBw => "RDMA_Write",
            Test::SendLat | Test::SendBw => "Send",
            Test::ReadLat | Test::ReadBw => "RDMA_Read",
            Test::AtomicLat => "Atomic (FETCH_AND_ADD)",
        }
    }
    fn is_read_like(self) -> bool {
        matches!(self, Test::ReadLat | Test::ReadBw | Test::AtomicLat)
    }
    fn is_send(self) -> bool {
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

/// Largest size of `-a` (2^23 = 8 MiB).
pub const MAX_ALL_SIZE: u32 = 1 << 23;
/// perftest's default `cq_mod`.
pub const DEFAULT_CQ_MOD: u32 = 100;
/// Outstanding requests in the bandwidth tests (perftest's default `tx_depth`).
pub const TX_DEPTH: u32 = 128;
/// Receives kept posted for the SEND tests.
pub const RX_DEPTH: u32 = 512;
/// Default inline size of the WRITE/SEND latency tests.
pub const DEFAULT_LAT_INLINE: u32 = 220;
/// Bytes of GRH in front of every UD receive.
const GRH: u32 = 40;

/// Options of one `rdma-direct perf` run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Opts {
    /// The test.
    pub test: Test,
    /// `-d`: a verbs device; `None` = the sim.
    pub device: Option<String>,
    /// `-i`: port (1-based).
    pub port: u8,
    /// `-x`: GID index (verbs only; default 0).
    pub gid_index: Option<u8>,
    /// `-s` (default 2), or every size of `-a`.
    pub sizes: Vec<u32>,
    /// `-a` was given (on UD the sizes then stop at the path MTU, as in perftest).
    pub all: bool,
    /// `-n` (default 1000 for latency, 5000 for bandwidth, as perftest).
    pub iters: u32,
    /// `-I`: inline threshold; messages up to this size are sent inline.
    pub inline: u32,
    /// `-l`.
    pub post_list: u32,
    /// `-Q` (after perftest's post-list rule).
    pub cq_mod: u32,
    /// `-c`.
    pub qp_type: QpType,
    /// `--report_gbits`.
    pub report_gbits: bool,
    /// `--json`: one JSON line per size after the table.
    pub json: bool,
    /// `--threads 1|2`: how many threads drive `write_lat` / `send_lat`; `None` = 2 on a
    /// real device, 1 on the sim (see the module doc).
    pub threads: Option<u8>,
}

/// True when the ping-pong of `o` runs client and server on a thread each.
pub fn two_threads(kind: ProviderKind, o: &Opts) -> bool {
    match o.threads {
        Some(t) => t == 2,
        None => kind != ProviderKind::Sim,
    }
}

/// The usage text.
pub const HELP: &str = "\
usage: rdma-direct perf <test> [options]
tests: write_lat send_lat read_lat atomic_lat write_bw send_bw read_bw
  Client and server QPs in this process, on one device (loopback), one thread.
  -d, --ib-dev <dev>     verbs device (e.g. rxe0); without it: the software mlx5 device (sim)
  -i, --ib-port <n>      port (default 1)
  -x, --gid-index <n>    GID index (default 0; RoCE on rxe needs the IPv4-mapped one)
  -s, --size <n>         message size (default 2; atomics are always 8)
  -n, --iters <n>        iterations (default 1000 latency, 5000 bandwidth)
  -a, --all              every size 2^1 .. 2^23
  -I, --inline_size <n>  send up to n bytes inline (default 220 for write/send latency, 0
                         for bandwidth; refused for READ and atomics)
  -l, --post_list <n>    bandwidth: requests per doorbell (default 1)
  -Q, --cq-mod <n>       bandwidth: signal every n-th request (default 100; with -l: = -l)
  -c, --connection <t>   RC (default), UC, UD
      --report_gbits     bandwidth in Gb/sec instead of MiB/sec
      --json             also one JSON line per size
      --threads <1|2>    write_lat/send_lat: one thread alternating between client and
                         server, or one each (default: 2 with -d, 1 on the sim)
";

fn num<T: std::str::FromStr>(flag: &str, v: &str) -> std::result::Result<T, String> {
    v.parse::<T>()
        .map_err(|_| format!("{flag}: '{v}' is not a valid number"))
}

/// Parse the arguments after `perf`. `Ok(None)` = help was asked for.
pub fn parse(args: &[String]) -> std::result::Result<Option<Opts>, String> {
    let mut it = args.iter();
    let Some(first) = it.next() else {
        return Err(
            "which test? (write_lat, send_lat, read_lat, atomic_lat, write_bw, send_bw, read_bw)"
                .into(),
        );
    };
    if first == "-h" || first == "--help" || first == "help" {
        return Ok(None);
    }
    let test = Test::from_name(first).ok_or_else(|| format!("unknown test '{first}'"))?;
    let mut device = None;
    let mut port = 1u8;
    let mut gid_index = None;
    let mut size: Option<u32> = None;
    let mut all = false;
    let mut iters: Option<u32> = None;
    let mut inline: Option<u32> = None;
    let mut post_list: Option<u32> = None;
    let mut cq_mod: Option<u32> = None;
    let mut qp_type = QpType::Rc;
    let mut report_gbits = false;
    let mut json = false;
    let mut threads = None;
    while let Some(a) = it.next() {
        let (flag, attached) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (a.as_str(), None),
        };
        let mut val = || -> std::result::Result<String, String> {
            match &attached {
                Some(v) => Ok(v.clone()),
                None => it
                    .next()
                    .cloned()
                    .ok_or_else(|| format!("{flag} needs a value")),
            }
        };
        match flag {
            "-h" | "--help" => return Ok(None),
            "-d" | "--ib-dev" => device = Some(val()?),
            "-i" | "--ib-port" => port = num(flag, &val()?)?,
            "-x" | "--gid-index" => gid_index = Some(num(flag, &val()?)?),
            "-s" | "--size" => size = Some(num(flag, &val()?)?),
            "-n" | "--iters" => iters = Some(num(flag, &val()?)?),
            "-a" | "--all" => all = true,
            "-I" | "--inline_size" => inline = Some(num(flag, &val()?)?),
            "-l" | "--post_list" => post_list = Some(num(flag, &val()?)?),
            "-Q" | "--cq-mod" => cq_mod = Some(num(flag, &val()?)?),
            "-c" | "--connection" => {
                let v = val()?;
                qp_type = match v.to_ascii_uppercase().as_str() {
                    "RC" => QpType::Rc,
                    "UC" => QpType::Uc,
                    "UD" => QpType::Ud,
                    _ => return Err(format!("-c: '{v}' is not RC, UC or UD")),
                };
            }
            "--report_gbits" => report_gbits = true,
            "--json" => json = true,
            "--threads" => {
                let t: u8 = num(flag, &val()?)?;
                if t != 1 && t != 2 {
                    return Err(format!("--threads {t}: 1 or 2"));
                }
                threads = Some(t);
            }
            other => return Err(format!("unknown option '{other}'")),
        }
    }
    if port == 0 {
        return Err("-i: ports are numbered from 1".into());
    }
    // Test vs transport.
    match qp_type {
        QpType::Uc if test.is_read_like() => {
            return Err(format!(
                "{}: UC has no READ or atomics (use RC)",
                test.name()
            ))
        }
        QpType::Ud if !test.is_send() => {
            return Err(format!("{}: UD only does SEND (use RC or UC)", test.name()))
        }
        _ => {}
    }
    if inline.is_some() && test.is_read_like() {
        return Err(format!(
            "{}: -I (inline) is not possible for READ and atomics",
            test.name()
        ));
    }
    if test.is_lat() && (post_list.is_some() || cq_mod.is_some()) {
        return Err(format!("{}: -l and -Q are bandwidth options", test.name()));
    }
    if inline.is_some_and(|i| i > 1024) {
        return Err("-I: at most 1024 bytes".into());
    }
    let sizes: Vec<u32> = if test == Test::AtomicLat {
        if all || size.is_some_and(|s| s != 8) {
            return Err(
                "atomic_lat: atomics always move 8 bytes (no -s other than 8, no -a)".into(),
            );
        }
        vec![8]
    } else if all {
        if size.is_some() {
            return Err("-a and -s exclude each other".into());
        }
        (1..=23).map(|k| 1u32 << k).collect()
    } else {
        let s = size.unwrap_or(2);
        if s == 0 || s > MAX_ALL_SIZE {
            return Err(format!("-s {s}: out of range 1..={MAX_ALL_SIZE}"));
        }
        vec![s]
    };
    let iters = iters.unwrap_or(if test.is_lat() { 1000 } else { 5000 });
    if test.is_lat() && iters < 4 {
        return Err(
            "-n: latency needs at least 4 iterations (3 samples; the 2 largest are dropped)".into(),
        );
    }
    if iters == 0 {
        return Err("-n: at least 1 iteration".into());
    }
    let post_list = post_list.unwrap_or(1);
    if post_list == 0 || post_list > TX_DEPTH {
        return Err(format!("-l {post_list}: out of range 1..={TX_DEPTH}"));
    }
    let cq_mod = match cq_mod {
        Some(0) => return Err("-Q: at least 1".into()),
        Some(q) if post_list > 1 && post_list % q != 0 => {
            return Err(format!("-l {post_list} must be a multiple of -Q {q}"))
        }
        Some(q) => q.min(TX_DEPTH),
        None if post_list > 1 => post_list,
        None => DEFAULT_CQ_MOD,
    };
    let inline = inline.unwrap_or(match test {
        Test::WriteLat | Test::SendLat => DEFAULT_LAT_INLINE,
        _ => 0,
    });
    Ok(Some(Opts {
        test,
        device,
        port,
        gid_index,
        sizes,
        all,
        iters,
        inline,
        post_list,
        cq_mod,
        qp_type,
        report_gbits,
        json,
        threads,
    }))
}

/// One result row.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Row {
    /// A latency test's row.
    Lat(LatRow),
    /// A bandwidth test's row.
    Bw(BwRow),
}

impl Row {
    /// The table line.
    pub fn line(&self) -> String {
        match self {
            Row::Lat(r) => r.line(),
            Row::Bw(r) => r.line(),
        }
    }
    /// The JSON line (with the test and provider added by the caller of [`run`]).
    pub fn json(&self) -> String {
        match self {
            Row::Lat(r) => r.json(),
            Row::Bw(r) => r.json(),
        }
    }
}

/// `rdma-direct perf ...`: parse, run on the sim or `-d DEV`, print. Returns the exit code.
pub fn main(args: &[String]) -> i32 {
    let o = match parse(args) {
        Ok(Some(o)) => o,
        Ok(None) => {
            print!("{HELP}");
            return 0;
        }
        Err(e) => {
            eprintln!("rdma-direct perf: {e}\n\n{HELP}");
            return 2;
        }
    };
    let mut print = |s: &str| {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(s.as_bytes());
        let _ = out.flush();
    };
    let res = match &o.device {
        Some(d) => VerbsDevice::open(d).and_then(|mut p| run(&mut p, &o, &mut print)),
        None => {
            // Device-thread mode: a thread plays the HCA, polling doorbells, as hardware
            // would; the mlx5 hot path runs against it unchanged.
            let mut p = SimDevice::new();
            p.start_device_thread()
                .and_then(|()| run(&mut p, &o, &mut print))
        }
    };
    match res {
        Ok(_) => 0,
        Err(e) => {
            eprintln!("rdma-direct perf {}: {e}", o.test.name());
            1
        }
    }
}

/// How a provider is described in the header.
pub fn provider_label(kind: ProviderKind, dev: &str) -> String {
    match kind {
        ProviderKind::Sim => format!("sim: software mlx5 device ({dev}), not hardware"),
        ProviderKind::Verbs => format!("{dev} via libibverbs (verbs provider)"),
        ProviderKind::Mlx5 => format!("{dev}: direct mlx5 WQE writing"),
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
    ahs: Option<(AddressHandle, AddressHandle)>,
    client: Side<P>,
    server: Side<P>,
    _pd: P::Pd,
    _mem: (MmapMut, MmapMut),
    half: usize,
    max_inline: u32,
    mtu: u32,
}

/// Run `o` on `p`, handing the text to `out` as it is produced (header, then one table line
/// per size, then the JSON lines). Returns the rows. `o.device` is not looked at: `p` is the
/// device.
///
/// One-thread loops call [`Provider::progress`] while they wait, so a sim in deterministic
/// mode works; with two threads ([`two_threads`]) the server's thread cannot, so the sim
/// must run its device thread (a deterministic sim would stop after 10 s with "no
/// progress").
pub fn run<P: Provider>(p: &mut P, o: &Opts, out: &mut dyn FnMut(&str)) -> Result<Vec<Row>>
where
    P::Qp: Send,
    P::Cq: Send,
{
    let max_size = *o.sizes.iter().max().ok_or_else(|| bad_opt("no size"))?;
    let mut bed = setup(p, o, max_size)?;
    if bed.max_inline < o.inline && o.inline > 0 {
        return Err(bad_opt(format!(
            "inline {} B requested, the QP grants {} B",
            o.inline, bed.max_inline
        )));
    }
    // UD carries one MTU at most: `-a` stops there, an explicit larger `-s` is refused.
    let sizes: Vec<u32> = if o.qp_type == QpType::Ud && o.all {
        o.sizes.iter().copied().filter(|&s| s <= bed.mtu).collect()
    } else {
        o.sizes.clone()
    };
    if o.qp_type == QpType::Ud && max_size > bed.mtu && !o.all {
        return Err(bad_opt(format!(
            "UD: {max_size} B does not fit the path MTU of {} B",
            bed.mtu
        )));
    }
    out(&header(p, o, &bed));
    let unit = if o.report_gbits {
        BwUnit::Gbps
    } else {
        BwUnit::MiBps
    };
    out(&format!(
        "{}\n",
        if o.test.is_lat() {
            stats::lat_header()
        } else {
            stats::bw_header(unit)
        }
    ));
    let n = o.iters as usize;
    // Preallocated for every size: the loops write into these only.
    let mut tposted = vec![0u64; n];
    let mut tcompleted = vec![0u64; n];
    let mut samples = vec![0u64; n.saturating_sub(1)];
    let mut rows = Vec::with_capacity(o.sizes.len());
    for &size in &sizes {
        let row = if o.test.is_lat() {
            lat_loop(p, o, &mut bed, size, &mut tposted, two_threads(p.kind(), o))?;
            for i in 0..n - 1 {
                samples[i] = tposted[i + 1].saturating_sub(tposted[i]);
            }
            let r = stats::lat_row(u64::from(size), n as u64, &samples, o.test.rtt_factor())
                .map_err(|e| perr(e.to_string()))?;
            Row::Lat(r)
        } else {
            bw_loop(p, o, &mut bed, size, &mut tposted, &mut tcompleted)?;
            let r = stats::bw_row(
                u64::from(size),
                n,
                o.post_list as usize,
                o.cq_mod as usize,
                &tposted,
                &tcompleted,
                unit,
            )
            .map_err(|e| perr(e.to_string()))?;
            Row::Bw(r)
        };
        out(&format!("{}\n", row.line()));
        rows.push(row);
    }
    out(&format!("{}\n", stats::RULE));
    if o.json {
        for r in &rows {
            let body = r.json();
            out(&format!(
                "{{\"test\":\"{}\",\"provider\":\"{}\",\"device\":\"{}\",\"transport\":\"{}\",{}\n",
                o.test.name(),
                p.kind(),
                p.device_name(),
                o.qp_type,
                &body[1..]
            ));
        }
    }
    Ok(rows)
}

fn header<P: Provider>(p: &P, o: &Opts, bed: &Bed<P>) -> String {
    let mut h = String::new();
    let kind = if o.test.is_lat() { "Latency" } else { "BW" };
    let _ = writeln!(h, "{}", stats::RULE);
    let _ = writeln!(h, "                    {} {} Test", o.test.verb(), kind);
    let _ = writeln!(
        h,
        " Provider        : {}",
        provider_label(p.kind(), p.device_name())
    );
    let _ = writeln!(h, " Device          : {}", p.device_name());
    let _ = writeln!(h, " Test            : {}", o.test.name());
    let _ = writeln!(
        h,
        " Connection type : {}   (client and server QPs in this process, loopback)",
        o.qp_type
    );
    let _ = writeln!(h, " Number of qps   : 1 pair");
    if matches!(o.test, Test::WriteLat | Test::SendLat) {
        let _ = writeln!(
            h,
            " Threads         : {}",
            if two_threads(p.kind(), o) {
                "2 (client and server each on its own thread)"
            } else {
                "1 (alternating between client and server)"
            }
        );
    }
    if o.test.is_lat() {
        let _ = writeln!(
            h,
            " Latency         : {}",
            if o.test.rtt_factor() == 2 {
                "half the round trip"
            } else {
                "full round trip"
            }
        );
    } else {
        let _ = writeln!(h, " TX depth        : {TX_DEPTH}");
        let _ = writeln!(h, " Post list       : {}", o.post_list);
        let _ = writeln!(h, " CQ Moderation   : {}", o.cq_mod);
    }
    let _ = writeln!(h, " Mtu             : {}[B]", bed.mtu);
    let _ = writeln!(
        h,
        " Inline data     : {}",
        if o.inline > 0 {
            format!("up to {} B", o.inline)
        } else {
            "not used".into()
        }
    );
    if p.kind() == ProviderKind::Verbs {
        let _ = writeln!(h, " GID index       : {}", o.gid_index.unwrap_or(0));
    }
    for (name, s) in [("local ", &bed.client), ("remote", &bed.server)] {
        let _ = writeln!(
            h,
            " {name} address: LID {:#06x} QPN {:#08x} PSN {:#08x} GID {}",
            s.ep.lid,
            s.ep.qpn,
            s.ep.psn,
            gid_text(&s.ep.gid)
        );
    }
    let _ = writeln!(h, "{}", stats::RULE);
    h
}

fn gid_text(g: &[u8; 16]) -> String {
    let mut s = String::new();
    for (i, b) in g.iter().enumerate() {
        if i > 0 && i % 2 == 0 {
            s.push(':');
        }
        let _ = write!(s, "{b:02x}");
    }
    s
}

fn setup<P: Provider>(p: &mut P, o: &Opts, max_size: u32) -> Result<Bed<P>> {
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
        let mut cq = p.create_cq(caps.max_send_wr + caps.max_recv_wr + 1)?;
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

fn connect_opts(o: &Opts) -> ConnectOpts {
    let rd = if o.test.is_read_like() { 16 } else { 1 };
    ConnectOpts {
        port: o.port,
        gid_index: o.gid_index.unwrap_or(0),
        max_rd_atomic: rd,
        max_dest_rd_atomic: rd,
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
}

impl Clock {
    fn start() -> Clock {
        let t0 = Instant::now();
        let mut c = Clock { t0, tick0: 0 };
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
    w: &mut Waiter<'_>,
    what: &str,
) -> Result<Completion> {
    w.reset();
    loop {
        if cq.poll(wc) == 1 {
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

fn post_one<P: Provider>(s: &mut Side<P>, wr: SendWr<'_>) -> Result<()> {
    let sq = s.qp.sq();
    if let Err(r) = sq.post(wr) {
        return Err(perr(format!("post {}: {}", wr.op.name(), r.error)));
    }
    sq.ring();
    Ok(())
}

fn lat_loop<P: Provider>(
    p: &mut P,
    o: &Opts,
    bed: &mut Bed<P>,
    size: u32,
    tposted: &mut [u64],
    two_threads: bool,
) -> Result<()>
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
                wait_one(p, &mut bed.client.cq, &mut wc, &mut w, op.name())?;
            }
        }
        _ => return Err(bad_opt("not a latency test")),
    }
    clock.to_ns(tposted);
    Ok(())
}

fn bw_loop<P: Provider>(
    p: &mut P,
    o: &Opts,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> std::result::Result<Option<Opts>, String> {
        let v: Vec<String> = s.split_whitespace().map(String::from).collect();
        parse(&v)
    }
    fn ok(s: &str) -> Opts {
        p(s).unwrap().unwrap()
    }
    fn err(s: &str) -> String {
        p(s).unwrap_err()
    }

    #[test]
    fn defaults() {
        let o = ok("write_lat");
        assert_eq!(o.threads, None);
        assert!(two_threads(ProviderKind::Verbs, &o));
        assert!(!two_threads(ProviderKind::Sim, &o));
        assert_eq!(ok("write_lat --threads 2").threads, Some(2));
        assert!(two_threads(ProviderKind::Sim, &ok("send_lat --threads=2")));
        assert!(!two_threads(
            ProviderKind::Verbs,
            &ok("send_lat --threads 1")
        ));
        assert!(err("write_lat --threads 3").contains("1 or 2"));
        assert_eq!(o.sizes, vec![2]);
        assert_eq!(
            (o.iters, o.inline, o.post_list),
            (1000, DEFAULT_LAT_INLINE, 1)
        );
        assert_eq!(
            (o.qp_type, o.device.as_deref(), o.port),
            (QpType::Rc, None, 1)
        );
        let o = ok("write_bw");
        assert_eq!((o.iters, o.inline, o.cq_mod), (5000, 0, DEFAULT_CQ_MOD));
        assert_eq!(ok("atomic_lat").sizes, vec![8]);
        assert!(p("--help").unwrap().is_none());
        assert!(p("write_bw -h").unwrap().is_none());
    }

    #[test]
    fn perftest_flags() {
        let o = ok("write_bw -d rxe0 -i 1 -x 3 -s 64 -n 2000 -l 32 -c UC --report_gbits --json");
        assert_eq!(o.device.as_deref(), Some("rxe0"));
        assert_eq!((o.gid_index, o.sizes[0], o.iters), (Some(3), 64, 2000));
        // -l without -Q: cq_mod = post_list.
        assert_eq!((o.post_list, o.cq_mod), (32, 32));
        assert_eq!(o.qp_type, QpType::Uc);
        assert!(o.report_gbits && o.json);
        assert_eq!(ok("write_bw -l 32 -Q 8").cq_mod, 8);
        assert_eq!(ok("send_bw --size=128").sizes, vec![128]);
        let a = ok("read_bw -a");
        assert_eq!(a.sizes.first(), Some(&2));
        assert_eq!(a.sizes.last(), Some(&(1 << 23)));
        assert_eq!(a.sizes.len(), 23);
    }

    #[test]
    fn refusals() {
        assert!(err("read_lat -I 16").contains("inline"));
        assert!(err("atomic_lat -I 8").contains("inline"));
        assert!(err("read_bw -c UC").contains("UC"));
        assert!(err("atomic_lat -c UC").contains("UC"));
        assert!(err("write_lat -c UD").contains("UD"));
        assert!(err("read_bw -c UD").contains("UD"));
        assert!(err("write_lat -l 4").contains("bandwidth"));
        assert!(err("send_lat -Q 4").contains("bandwidth"));
        assert!(err("write_bw -l 32 -Q 5").contains("multiple"));
        assert!(err("write_bw -Q 0").contains("-Q"));
        assert!(err("write_bw -l 0").contains("-l"));
        assert!(err("atomic_lat -s 64").contains("8 bytes"));
        assert!(err("write_lat -n 3").contains("4 iterations"));
        assert!(err("write_bw -s 0").contains("-s"));
        assert!(err("write_bw -s 16777216").contains("-s"));
        assert!(err("write_bw -a -s 4").contains("-a"));
        assert!(err("write_bw -n x").contains("not a valid number"));
        assert!(err("write_bw -n").contains("needs a value"));
        assert!(err("flood").contains("unknown test"));
        assert!(err("write_bw --bogus").contains("unknown option"));
        assert!(err("").contains("which test"));
        assert!(err("write_bw -i 0").contains("-i"));
        assert!(err("write_bw -c XRC").contains("XRC"));
    }
}
