//! The sim fabric against the floor of a cross-process handoff on this machine.
//!
//! Two rows, measured in the same run, rounds alternating, each side of each row pinned to
//! its own CPU (`taskset -c`, CPUs from `FLOOR_CPUS`, default `0,1`):
//!
//! - **sim**: the half round trip of an 8-byte RDMA WRITE ping-pong between two processes
//!   on the sim, over the sim fabric: `rdma-direct perf write_lat -s 8 -n N -p PORT`
//!   (server) and `... 127.0.0.1` (client), both in deterministic mode (each side's loop
//!   polls and runs its own engine; no device thread). Its figures are the client's row:
//!   `t_typical` (median) and `t_min` of the per-iteration half round trips.
//! - **raw shared memory**: two processes (this bench run again as the ping and the pong
//!   side) map one file under `/dev/shm` and hand a counter back and forth on two cache
//!   lines (ping stores `i` on its line and spins until the pong's line says `i`; the pong
//!   spins on the ping's line and stores it back). Timed as perftest times `write_lat`: a
//!   timestamp before each hand-over, the half of each consecutive difference, median and
//!   minimum. This is the least a handoff between two processes costs here: one cache line
//!   each way, no protocol.
//! - **sim, one process**: the device model's own floor, no handoff at all: the sim row's
//!   exchange (each side: wait for the peer's byte, post a signaled 8-byte inline RDMA WRITE,
//!   wait for its completion, as `perf write_lat`'s two-process loop does) between two RC QPs
//!   of one sim device in one thread, deterministic mode (the loop runs the engine), pinned to
//!   the first CPU. Every hop does the sim row's work but the packets and the transfer: the
//!   same posts, doorbells, WQE checks, responder checks, CQEs and polls. Timed as the raw row
//!   (this bench run again as `FLOOR_ROLE=local`).
//!
//! Output: one line per round and row, then the medians over the rounds and their ratios to
//! the raw row, and a `JSON ` line. Environment: `FLOOR_ROUNDS` (5), `FLOOR_ITERS` (10000), `FLOOR_CPUS`
//! (`0,1`). The roles of the raw row are selected by `FLOOR_ROLE` (`ping`/`pong`) and
//! `FLOOR_SHM` (the file), the one-process row by `FLOOR_ROLE=local`, when this program runs
//! itself again.
//!
//! Run: `cargo bench --bench fabric_floor`. Figures: benches/README.md.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rdma_direct::prelude::*;

const RDMA_DIRECT: &str = env!("CARGO_BIN_EXE_rdma-direct");
/// The raw row's hand-overs before the timed ones.
const WARMUP: u64 = 1000;
/// Offsets of the ping's and the pong's counters: a cache line each (128 bytes apart, so
/// an adjacent-line prefetcher does not pair them).
const PING_OFF: usize = 0;
const PONG_OFF: usize = 128;
/// A side that stops hearing from the other for this long gives up (liveness only).
const STALL: Duration = Duration::from_secs(30);

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The counters of the mapped file.
struct Lines {
    map: memmap2::MmapRaw,
}

impl Lines {
    fn open(path: &Path) -> Lines {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        f.set_len(4096).expect("size the shared file");
        let map = memmap2::MmapRaw::map_raw(&f).expect("map the shared file");
        Lines { map }
    }

    fn at(&self, off: usize) -> &AtomicU64 {
        assert!(off + 8 <= self.map.len() && off % 8 == 0);
        // SAFETY: `off` is 8-aligned and inside the mapping (checked above; the mapping is
        // page-aligned), which lives as long as `self`; the file's bytes are only ever
        // accessed as atomics, by this process and its peer.
        unsafe { &*(self.map.as_mut_ptr().add(off) as *const AtomicU64) }
    }
}

/// Spin until `line` holds `want`; false if the peer went quiet for [`STALL`].
fn wait_for(line: &AtomicU64, want: u64) -> bool {
    let mut spins = 0u32;
    let mut since = None;
    while line.load(Ordering::Acquire) != want {
        std::hint::spin_loop();
        spins = spins.wrapping_add(1);
        if spins % 65536 == 0 && since.get_or_insert_with(Instant::now).elapsed() > STALL {
            return false;
        }
    }
    true
}

/// The pong side: answer every hand-over until `total`.
fn pong(lines: &Lines, total: u64) {
    let (ping, pong) = (lines.at(PING_OFF), lines.at(PONG_OFF));
    for i in 1..=total {
        if !wait_for(ping, i) {
            eprintln!("pong: no hand-over {i}");
            std::process::exit(1);
        }
        pong.store(i, Ordering::Release);
    }
}

/// The ping side: `WARMUP` then `iters` timed hand-overs ([`timed`]).
fn ping(lines: &Lines, iters: u64) {
    let (ping, pong) = (lines.at(PING_OFF), lines.at(PONG_OFF));
    timed(iters, |i| {
        ping.store(i, Ordering::Release);
        if !wait_for(pong, i) {
            eprintln!("ping: no answer {i}");
            std::process::exit(1);
        }
    });
}

/// `WARMUP` then `iters` timed round trips (`round_trip(i)`, `i` from 1): a timestamp before
/// each; prints "median_ns min_ns" of the half round trips (half of each difference).
fn timed(iters: u64, mut round_trip: impl FnMut(u64)) {
    let total = WARMUP + iters;
    let mut stamps = Vec::with_capacity(iters as usize + 1);
    let t0 = Instant::now();
    for i in 1..=total + 1 {
        if i > WARMUP {
            stamps.push(t0.elapsed().as_nanos() as u64);
        }
        if i > total {
            break;
        }
        round_trip(i);
    }
    let (m, n) = halves(&stamps);
    println!("{m} {n}");
}

/// Half of each consecutive difference of `stamps`: (median, min).
fn halves(stamps: &[u64]) -> (f64, f64) {
    let mut half: Vec<f64> = stamps
        .windows(2)
        .map(|w| (w[1] - w[0]) as f64 / 2.0)
        .collect();
    half.sort_by(f64::total_cmp);
    (half[half.len() / 2], half[0])
}

/// The one-process row's side: its QP, CQ, buffer (outgoing byte at `last`, incoming at
/// `half + last`) and the peer's incoming window.
struct End {
    qp: SimQp,
    cq: SimCq,
    buf: RegisteredBuf<<SimDevice as Provider>::Mr>,
    to: RemoteMr,
}

const LOCAL_HALF: usize = 64;
const LOCAL_LAST: usize = 7;

impl End {
    /// The byte the peer's WRITE lands last.
    fn incoming(&self) -> u8 {
        let p = self.buf.as_slice()[LOCAL_HALF + LOCAL_LAST..].as_ptr();
        // SAFETY: `p` points into this end's registered buffer, alive as long as `self`; the
        // device (this thread's engine, inside `progress`) writes it through its own pointer,
        // hence the volatile load (a plain one could be hoisted out of the wait).
        unsafe { std::ptr::read_volatile(p) }
    }

    /// Post message `v` (its last byte) and wait for its completion.
    fn send(&mut self, dev: &mut SimDevice, v: u8) {
        let mut msg = [0u8; LOCAL_LAST + 1];
        msg[LOCAL_LAST] = v;
        let wr = SendWr::write(u64::from(v), &[], self.to.addr, self.to.rkey).inline(&msg);
        self.qp.sq().post_and_ring(wr.signaled()).expect("post");
        let mut wc = [Completion::EMPTY];
        let mut spins = 0u64;
        while self.cq.poll(&mut wc) == 0 {
            dev.progress();
            spins += 1;
            assert!(spins < 1 << 32, "no completion");
        }
        wc[0].check().expect("completion");
    }

    /// Wait for the peer's message `v`.
    fn wait(&self, dev: &mut SimDevice, v: u8) {
        let mut spins = 0u64;
        while self.incoming() != v {
            dev.progress();
            spins += 1;
            assert!(spins < 1 << 32, "no message {v}");
        }
    }
}

/// The one-process row: `WARMUP` then `iters` timed round trips ([`timed`]).
fn local(iters: u64) {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().expect("pd");
    let cfg = QpConfig::new(QpType::Rc);
    let mut ends = Vec::new();
    for _ in 0..2 {
        let buf = dev
            .alloc_buf(&pd, 2 * LOCAL_HALF, Access::ALL, Pages::Normal)
            .expect("buffer");
        let mut cq = dev.create_cq(256).expect("cq");
        let qp = dev.create_qp(&pd, &mut cq, None, None, &cfg).expect("qp");
        let to = buf.remote(LOCAL_HALF, LOCAL_HALF).expect("window");
        ends.push(End { qp, cq, buf, to });
    }
    let (mut s, mut c) = (ends.pop().expect("two"), ends.pop().expect("two"));
    connect_pair(&mut dev, &mut c.qp, &mut s.qp, &ConnectOpts::default()).expect("connect");
    // Each end writes into the other's incoming half.
    std::mem::swap(&mut c.to, &mut s.to);
    timed(iters, |i| {
        let v = (i % 255 + 1) as u8;
        c.send(&mut dev, v);
        s.wait(&mut dev, v);
        s.send(&mut dev, v);
        c.wait(&mut dev, v);
    });
}

/// This bench run again as `role` on `cpu` (`FLOOR_SHM` the raw row's file).
fn side(role: &str, cpu: &str, shm: &Path, iters: u64) -> Command {
    let mut c = Command::new("taskset");
    c.args(["-c", cpu])
        .arg(std::env::current_exe().expect("current_exe"))
        .env("FLOOR_ROLE", role)
        .env("FLOOR_SHM", shm)
        .env("FLOOR_ITERS", iters.to_string())
        .stdout(Stdio::piped());
    c
}

/// The "median_ns min_ns" a timed side printed.
fn figures(out: &std::process::Output, what: &str) -> (f64, f64) {
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{what} failed: {text}");
    let v: Vec<f64> = text
        .split_whitespace()
        .filter_map(|s| s.parse().ok())
        .collect();
    assert_eq!(v.len(), 2, "{what} printed {text:?}");
    (v[0], v[1])
}

/// The one-process row, one round: (median, min) ns.
fn local_round(cpu: &str, iters: u64) -> (f64, f64) {
    let out = side("local", cpu, Path::new("-"), iters)
        .output()
        .expect("spawn the one-process row (taskset installed?)");
    figures(&out, "the one-process row")
}

/// The raw row, one round: (median, min) ns.
fn raw_round(cpus: &[String; 2], iters: u64) -> (f64, f64) {
    let path = PathBuf::from(format!("/dev/shm/rdma-direct-floor-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let _lines = Lines::open(&path); // created zeroed before either side starts
    let spawn = |role: &str, cpu: &str| {
        side(role, cpu, &path, iters)
            .spawn()
            .expect("spawn a side (taskset installed?)")
    };
    let pong = spawn("pong", &cpus[1]);
    let ping = spawn("ping", &cpus[0]);
    let out = ping.wait_with_output().expect("ping");
    let pong_ok = pong.wait_with_output().expect("pong").status.success();
    let _ = std::fs::remove_file(&path);
    assert!(pong_ok, "the pong side of the raw row failed");
    figures(&out, "the ping side of the raw row")
}

/// The sim row, one round: the client's (t_typical, t_min) in ns.
fn sim_round(cpus: &[String; 2], iters: u64, round: u64) -> (f64, f64) {
    let fabric = format!("rdma-direct-floor-{}-{round}", std::process::id());
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
        .to_string();
    let n = iters.to_string();
    let side = |cpu: &str, host: Option<&str>| {
        let mut c = Command::new("taskset");
        c.args(["-c", cpu, RDMA_DIRECT, "perf", "write_lat", "-s", "8"])
            .args(["-n", n.as_str(), "-p", port.as_str()])
            .args(host)
            .env("RDMA_DIRECT_SIM_FABRIC", &fabric)
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        c.spawn().expect("spawn rdma-direct perf")
    };
    let server = side(&cpus[0], None);
    let client = side(&cpus[1], Some("127.0.0.1"));
    let out = client.wait_with_output().expect("client");
    let server_ok = server.wait_with_output().expect("server").status.success();
    let _ = std::fs::remove_file(Path::new("/dev/shm").join(&fabric));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && server_ok,
        "sim round failed:\n{text}"
    );
    // The row: "8  N  t_min  t_max  t_typical ..." (usec).
    let row: Vec<f64> = text
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() > 4 && f[0] == "8" && f[1] == n)
        .map(|f| f.iter().filter_map(|s| s.parse().ok()).collect())
        .unwrap_or_else(|| panic!("no 8-byte row in:\n{text}"));
    (row[4] * 1000.0, row[2] * 1000.0)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let iters = env_num("FLOOR_ITERS", 10_000).max(2);
    if let (Ok(role), Ok(shm)) = (std::env::var("FLOOR_ROLE"), std::env::var("FLOOR_SHM")) {
        if role == "local" {
            local(iters);
            return;
        }
        let lines = Lines::open(Path::new(&shm));
        match role.as_str() {
            "ping" => ping(&lines, iters),
            _ => pong(&lines, WARMUP + iters),
        }
        return;
    }
    // `cargo bench` passes `--bench`; nothing else is taken.
    let rounds = env_num("FLOOR_ROUNDS", 5).max(1);
    let cpus_s = std::env::var("FLOOR_CPUS").unwrap_or_else(|_| "0,1".into());
    let mut it = cpus_s.split(',').map(str::to_string);
    let cpus = [
        it.next().unwrap_or_else(|| "0".into()),
        it.next().unwrap_or_else(|| "1".into()),
    ];
    println!(
        "fabric_floor: {rounds} rounds, -n {iters}, sides on CPUs {} and {}; half round trip, ns",
        cpus[0], cpus[1]
    );
    let (mut raw_med, mut raw_min, mut sim_med, mut sim_min) = (vec![], vec![], vec![], vec![]);
    let (mut one_med, mut one_min) = (vec![], vec![]);
    for r in 0..rounds {
        let (a, b) = raw_round(&cpus, iters);
        println!("  round {r}: raw shared memory  median {a:9.1}  min {b:9.1}");
        raw_med.push(a);
        raw_min.push(b);
        let (a, b) = sim_round(&cpus, iters, r);
        println!("  round {r}: sim fabric WRITE   median {a:9.1}  min {b:9.1}");
        sim_med.push(a);
        sim_min.push(b);
        let (a, b) = local_round(&cpus[0], iters);
        println!("  round {r}: sim, one process  median {a:9.1}  min {b:9.1}");
        one_med.push(a);
        one_min.push(b);
    }
    let (rm, rn) = (median(&mut raw_med), median(&mut raw_min));
    let (sm, sn) = (median(&mut sim_med), median(&mut sim_min));
    let (om, on) = (median(&mut one_med), median(&mut one_min));
    println!("| row | half round trip, median of rounds' medians (ns) | of rounds' minima (ns) |");
    println!("|---|---|---|");
    println!("| raw shared memory, two processes | {rm:.1} | {rn:.1} |");
    println!("| sim fabric, 8-byte RDMA WRITE (perf write_lat -s 8) | {sm:.1} | {sn:.1} |");
    println!(
        "| ratio sim fabric / raw | {:.1}x | {:.1}x |",
        sm / rm,
        sn / rn
    );
    println!("| sim, one process, no fabric (the same exchange, one thread) | {om:.1} | {on:.1} |");
    println!(
        "| ratio sim one process / raw | {:.1}x | {:.1}x |",
        om / rm,
        on / rn
    );
    println!(
        "JSON {{\"bench\":\"fabric_floor\",\"rounds\":{rounds},\"iters\":{iters},\
         \"raw_median_ns\":{rm:.1},\"raw_min_ns\":{rn:.1},\"sim_median_ns\":{sm:.1},\
         \"sim_min_ns\":{sn:.1},\"one_process_median_ns\":{om:.1},\"one_process_min_ns\":{on:.1}}}"
    );
}
