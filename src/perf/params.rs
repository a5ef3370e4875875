//! What to measure: the tests ([`Test`]), their parameters with perftest's defaults
//! ([`Params`]) and limits (the constants), and perftest's rules on them ([`Params::check`]).
//!
//! Contract: [`Params::new`] gives perftest's defaults for a test; [`Params::check`] enforces
//! the rules the parent module's doc lists, refusing with an `InvalidArgument` that names
//! the parameter; nothing here touches a device.

use crate::providers::{ProviderKind, QpType};
use crate::Result;

use super::bad_opt;
use super::stats::BwUnit;

/// The tests [`Run`](super::Run) measures.
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
/// Most iterations per size: the sample buffers (four `u64` per iteration, allocated
/// before the first stamp) stay within 512 MiB.
pub const MAX_ITERS: u32 = 1 << 24;
/// Default inline size of the WRITE/SEND latency tests.
pub const DEFAULT_LAT_INLINE: u32 = 220;
/// Largest inline size asked of a QP.
pub const MAX_INLINE: u32 = 1024;
/// Bytes of GRH in front of every UD receive.
pub(super) const GRH: u32 = 40;

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
    /// ([`Provider::create_cq_ts`](crate::providers::Provider::create_cq_ts)); see
    /// [`NicTime`](super::NicTime).
    pub hw_ts: bool,
    /// Two processes: connect the QPs through the RDMA CM (perftest: `-R`) instead of by the
    /// exchanged endpoints. The client's value is the server's address, the server's the
    /// address it listens on; the CM port is the TCP port, as perftest's.
    pub rdma_cm: Option<std::net::SocketAddr>,
    /// Two processes: asked after each size; `true` ends the sweep there, the sizes
    /// reported so far being the run (see [`remote::run`](super::remote::run)). `None`:
    /// every size is measured.
    pub stop: Option<StopHook>,
    /// Latency tests: a sample above this many times the median is an outlier
    /// ([`Outliers`](super::Outliers)); default [`DEFAULT_OUTLIER_X`].
    pub outlier_x: u32,
    /// Latency tests in one process: a delay put inside chosen samples, to show what
    /// [`Outliers`](super::Outliers) makes of a host's interruption and of a late answer.
    /// `None` (the default) in any real measurement.
    pub inject: Option<Inject>,
}

/// The default of [`Params::outlier_x`]: an outlier is a sample above 10x the median.
pub const DEFAULT_OUTLIER_X: u32 = 10;

/// A delay inside the samples of iterations `i` with `i % every == every - 1`, right after
/// the client stamps them ([`Params::inject`]). `off_cpu`: the thread sleeps (it leaves the
/// CPU, as when the host takes it away); else it keeps polling for the delay (as when an
/// answer is late).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inject {
    /// One iteration in this many (at least 2).
    pub every: u32,
    /// How long.
    pub delay: std::time::Duration,
    /// Sleep (off the CPU) rather than poll.
    pub off_cpu: bool,
}

impl Inject {
    /// Whether iteration `i` gets the delay.
    #[inline]
    pub fn hits(&self, i: u32) -> bool {
        self.every >= 2 && i % self.every == self.every - 1
    }
}

/// A caller's "stop the sweep" (a caught Ctrl-C, say), asked between sizes, never inside
/// a measured loop. Two hooks are equal when they are the same function.
#[derive(Clone, Copy)]
pub struct StopHook(pub fn() -> bool);

impl StopHook {
    /// Whether the caller asks the sweep to stop.
    pub fn requested(&self) -> bool {
        (self.0)()
    }
}

impl std::fmt::Debug for StopHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StopHook(..)")
    }
}

impl PartialEq for StopHook {
    fn eq(&self, other: &StopHook) -> bool {
        // The functions' addresses (`std::ptr::fn_addr_eq` is newer than the MSRV).
        self.0 as usize == other.0 as usize
    }
}

impl Eq for StopHook {}

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
            rdma_cm: None,
            stop: None,
            outlier_x: DEFAULT_OUTLIER_X,
            inject: None,
        }
    }

    /// perftest's sizes of `-a`: 2^1 .. 2^23.
    pub fn all_sizes() -> Vec<u32> {
        (1..=23).map(|k| 1u32 << k).collect()
    }

    /// Check the parameters against perftest's rules (see the module doc). The message names
    /// the field (`Params::post_list`, ...); a command line maps it to its own flag.
    pub fn check(&self) -> Result<()> {
        let t = self.test.name();
        if self.port == 0 {
            return Err(bad_opt("Params::port 0: ports are numbered from 1"));
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
                "{t}: Params::inline is not possible for READ and atomics"
            )));
        }
        if self.inline > MAX_INLINE {
            return Err(bad_opt(format!(
                "Params::inline: at most {MAX_INLINE} bytes"
            )));
        }
        if self.test.is_lat() && (self.post_list != 1 || self.cq_mod != DEFAULT_CQ_MOD) {
            return Err(bad_opt(format!(
                "{t}: Params::post_list and Params::cq_mod are bandwidth parameters"
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
                    "Params::sizes {s}: out of range 1..={MAX_SIZE}"
                )));
            }
        }
        if self.test.is_lat() && self.iters < 4 {
            return Err(bad_opt(
                "Params::iters: latency needs at least 4 iterations (3 samples; the 2 largest are dropped)",
            ));
        }
        if self.iters == 0 {
            return Err(bad_opt("Params::iters: at least 1 iteration"));
        }
        if self.iters > MAX_ITERS {
            return Err(bad_opt(format!(
                "Params::iters {}: at most {MAX_ITERS} (the timestamps of every iteration \
                 are kept in memory, 32 bytes each, allocated before the run)",
                self.iters
            )));
        }
        if self.post_list == 0 || self.post_list > TX_DEPTH {
            return Err(bad_opt(format!(
                "Params::post_list {}: out of range 1..={TX_DEPTH}",
                self.post_list
            )));
        }
        if self.cq_mod == 0 {
            return Err(bad_opt("Params::cq_mod: at least 1"));
        }
        if self.post_list > 1 && self.post_list % self.cq_mod != 0 {
            return Err(bad_opt(format!(
                "Params::post_list {} must be a multiple of Params::cq_mod {}",
                self.post_list, self.cq_mod
            )));
        }
        if self.hw_ts && !matches!(self.test, Test::WriteLat | Test::ReadLat | Test::AtomicLat) {
            return Err(bad_opt(format!(
                "{t}: Params::hw_ts needs a signaled request per iteration: write_lat, read_lat or \
                 atomic_lat (send_lat signals every 64th send)"
            )));
        }
        if self.outlier_x < 2 {
            return Err(bad_opt(
                "Params::outlier_x: at least 2 (an outlier is above that many times the median)",
            ));
        }
        if matches!(self.threads, Some(n) if n != 1 && n != 2) {
            return Err(bad_opt("Params::threads: 1 or 2"));
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
