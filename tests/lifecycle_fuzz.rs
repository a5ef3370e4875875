//! The lifecycle fuzzer: seeded random create / connect / post / ring / poll / `to_error` /
//! reset / reconnect / drop / device-thread on-off / injected device faults on the software
//! mlx5 device (the production mlx5 provider), checked by a ledger kept independently of the
//! provider's own accounting.
//!
//! The bed: eight QPs in four pairs — two RC pairs, a UC pair and a UD pair (sending to each
//! other's current QPN through one address handle), one QP of the second RC pair receiving
//! through an SRQ — each pair sending into a CQ of its own, sized exactly by the CQ-room rule
//! (2 x `max_send_wr` 8 on 16 entries: a reset that handed back room the ring does not have
//! would overrun it), all receiving into one shared CQ. A pair's send CQ is also dropped
//! while its QPs still use it (the QPs keep the CQ's memory alive; their reset and drop scan
//! it after the handle is gone), and a new one takes its place.
//!
//! The ledger records every request the provider accepted, per queue, in posting order,
//! with its signaled flag, and every receive. Each completion polled must retire requests of
//! the queue it names, oldest first: `covered` unsignaled ones (`covered_from` the oldest),
//! then the one named; receives of an RQ in order, of the SRQ each once. A request ends in
//! exactly one of: its own completion (success or error), coverage, a flush, the documented
//! exception (an unsignaled request that had executed when the QP moved to ERR: no completion;
//! counted when the QP is quiesced), or a reset / drop the fuzzer chose while it was
//! outstanding (counted: a reset discards the queues and the CQEs still unpolled).
//! Violations:
//! - a completion retiring nothing outstanding, out of order, or covering a signaled
//!   request; a completion of a QP that was reset or dropped before its CQE was polled;
//! - a CQ overrun (`CQ_ERR`) or a QP fatal the fuzzer did not inject, a CQ-error completion;
//! - a post refused for CQ room (`CqFull`) while no reset / dropped QP's CQEs can be in the
//!   ring (the CQ-room rule says it never happens otherwise), or refused for a reason the
//!   request does not have;
//! - a request accepted that never ends: after `to_error` and a drain, a signaled request or
//!   a receive still outstanding;
//! - a drain that does not go quiet within its step budget (no sleeps: engine passes).
//!
//! `cargo test` runs a short run; `RDMA_DIRECT_FUZZ_STEPS=N RDMA_DIRECT_FUZZ_SEEDS=S cargo
//! test --release --test lifecycle_fuzz -- --nocapture` a long one (`.ci/run` does 32 seeds
//! of 160,000 steps). Each seed prints its figures; a violation names the seed and the step.
//!
//! Across processes (`lifecycle_fuzz_with_peers_in_another_process`): a fifth pair of QPs,
//! an RC and a UC one, whose peers live in a child process on its own sim device, reached
//! over the sim fabric (a fabric of the run's own). The child answers (its device thread is
//! the responder: WRITE, READ and atomics land in a window it shares, SENDs in receives it
//! keeps posted); every connect of such a QP, first or again, tells the child over a TCP
//! control connection to connect its QP again too (`connect_qp_server` /
//! `connect_qp_client`: both start from PSN 0). The fuzzer's fault injection also loses,
//! damages, delays and duplicates those QPs' packets. The ledger is the same; the child
//! exits when the control connection closes. `RDMA_DIRECT_FUZZ_FABRIC_STEPS` /
//! `RDMA_DIRECT_FUZZ_FABRIC_SEEDS` set its length.

use std::collections::{HashSet, VecDeque};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rdma_direct::endpoint::{connect_qp_client, connect_qp_server};
use rdma_direct::providers::mlx5::AddressVector;
use rdma_direct::providers::sim::fault::SplitMix64;
use rdma_direct::providers::sim::{
    AsyncEvent, FaultConfig, SimCq, SimDevice, SimMr, SimPd, SimQp, SimSrq,
};
use rdma_direct::providers::{
    Access, Completion, CompletionQueue, ConnectOpts, MemoryRegion, Pages, PostError, Provider,
    QpConfig, QpState, QpType, QueuePair, RecvQueue, RecvWr, RegisteredBuf, RemoteMr, SendQueue,
    SendWr, UdDest, WcFlags, WcStatus,
};

#[path = "lifecycle_fuzz/steps.rs"]
mod steps;

const RECV: u64 = 1 << 62;
/// QP pairs, each with a send CQ of its own; CQ index `PAIRS` is the shared receive CQ. The
/// last pair is the one whose peers are in a child process (only in the run across
/// processes).
const PAIRS: usize = 5;
const RCQ: usize = PAIRS;
const MAX_WR: u32 = 8;
const SRQ_DEPTH: u32 = 16;
const BUF: usize = 1 << 16;
/// Engine passes and polls a drain may take before it counts as a hang.
const DRAIN_BUDGET: usize = 10_000;
/// The child process of the run across processes (its role: `addr`).
const PEER_ENV: &str = "RDMA_DIRECT_FUZZ_PEER";
const FABRIC_ENV: &str = "RDMA_DIRECT_SIM_FABRIC";
/// The liveness bound of one connect across processes (a hang becomes a failure).
const STALL: Duration = Duration::from_secs(30);
/// The window the child shares.
const PEER_BUF: usize = 1 << 16;
/// Slots whose peers are in the child (an RC and a UC QP).
const REMOTE_SLOTS: [usize; 2] = [8, 9];

#[derive(Default, Debug, Clone, Copy)]
struct Figures {
    steps: u64,
    posted: u64,
    received_posted: u64,
    completed: u64,
    covered: u64,
    flushed: u64,
    errors: u64,
    unsignaled_exception: u64,
    discarded_by_reset: u64,
    resets: u64,
    drops: u64,
    quiesces: u64,
    injected: u64,
    cq_full: u64,
    qps_created: u64,
    cq_drops: u64,
    /// Receives completed successfully on the UD pair (datagrams delivered).
    ud_delivered: u64,
    /// Successful completions of the QPs whose peers are in the child process.
    remote_completed: u64,
    /// Connects of those QPs (each one the child's too).
    remote_connects: u64,
}

struct Slot {
    qp: Option<SimQp>,
    ty: QpType,
    /// The peer slot (`usize::MAX`: the peer is the child process's QP of the same index).
    peer: usize,
    on_srq: bool,
    /// Accepted send requests not yet retired: (wr_id, signaled).
    sends: VecDeque<(u64, bool)>,
    /// Receives of its own RQ not yet completed.
    recvs: VecDeque<u64>,
    /// An injected QP fatal is expected for this QPN.
    fatal_ok: bool,
}

struct Fuzz {
    seed: u64,
    rng: SplitMix64,
    dev: SimDevice,
    pd: SimPd,
    buf: RegisteredBuf<SimMr>,
    /// The send CQ of each pair.
    scq: [SimCq; PAIRS],
    rcq: SimCq,
    /// The address handle of the UD pair's sends (one device: one GID for every QP).
    ah: AddressVector,
    srq: SimSrq,
    srq_out: HashSet<u64>,
    slots: Vec<Slot>,
    next_id: u64,
    /// Per CQ (the three send CQs, the receive CQ): a reset or dropped QP may have left
    /// CQEs in its ring, so `CqFull` is allowed until a poll drains it.
    stale: [bool; PAIRS + 1],
    step: u64,
    /// Swarm testing: some seeds rarely poll, so CQs fill up with unpolled CQEs before the
    /// resets and drops that follow.
    poll_shy: bool,
    /// Print each step from this one on (`RDMA_DIRECT_FUZZ_TRACE`).
    trace_from: u64,
    /// The child process holding the peers of the last pair (the run across processes).
    child: Option<Peer>,
    f: Figures,
}

/// The child process and how to reach it.
struct Peer {
    proc: Child,
    /// Control: one byte per connect (the slot), the child connects its QP of that slot.
    ctl: TcpStream,
    /// Where the child connects for each exchange.
    listener: TcpListener,
    /// The child's window.
    window: Option<RemoteMr>,
    fabric: String,
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.proc.kill();
        let _ = self.proc.wait();
        let _ = std::fs::remove_file(std::path::Path::new("/dev/shm").join(&self.fabric));
    }
}

const REMOTE: usize = usize::MAX;

fn cfg(ty: QpType) -> QpConfig {
    let mut c = QpConfig::new(ty);
    c.caps.max_send_wr = MAX_WR;
    c.caps.max_recv_wr = MAX_WR;
    c.caps.max_send_sge = 2;
    c.caps.max_recv_sge = 2;
    c.caps.max_inline_data = 64;
    c
}

impl Fuzz {
    fn new(seed: u64, across: bool) -> Fuzz {
        let mut dev = SimDevice::new();
        let child = across.then(|| {
            let fabric = format!("rdma-direct-test-{}-lifecycle-{seed:x}", std::process::id());
            dev.join_fabric(Some(&fabric)).unwrap();
            let ctl = TcpListener::bind("127.0.0.1:0").unwrap();
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let proc = Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "lifecycle_peer", "--ignored", "--nocapture"])
                .env(
                    PEER_ENV,
                    format!(
                        "{} {}",
                        ctl.local_addr().unwrap(),
                        listener.local_addr().unwrap()
                    ),
                )
                .env(FABRIC_ENV, &fabric)
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap();
            let (ctl, _) = ctl.accept().unwrap();
            Peer {
                proc,
                ctl,
                listener,
                window: None,
                fabric,
            }
        });
        let pd = dev.alloc_pd().unwrap();
        let buf = dev.alloc_buf(&pd, BUF, Access::ALL, Pages::Normal).unwrap();
        let scq = [0; PAIRS].map(|_| dev.create_cq(2 * MAX_WR).unwrap());
        assert!(scq.iter().all(|c| c.cqe() == 2 * MAX_WR));
        let rcq = dev.create_cq(128).unwrap();
        let srq = dev.create_srq(&pd, SRQ_DEPTH, 2).unwrap();
        let ah = {
            let mut c = dev.create_cq(2 * MAX_WR).unwrap();
            let q = dev
                .create_qp(&pd, &mut c, None, None, &cfg(QpType::Ud))
                .unwrap();
            let ep = dev.endpoint(&q, &ConnectOpts::default()).unwrap();
            dev.create_ah(&pd, &ep, &ConnectOpts::default()).unwrap()
        };
        let mut f = Fuzz {
            seed,
            rng: SplitMix64::new(seed),
            dev,
            pd,
            buf,
            scq,
            rcq,
            ah,
            srq,
            srq_out: HashSet::new(),
            slots: Vec::new(),
            next_id: 1,
            stale: [false; PAIRS + 1],
            step: 0,
            poll_shy: false,
            trace_from: env("RDMA_DIRECT_FUZZ_TRACE", u64::MAX),
            child,
            f: Figures::default(),
        };
        for (i, (ty, srq)) in [
            (QpType::Rc, false),
            (QpType::Rc, false),
            (QpType::Rc, false),
            (QpType::Rc, true),
            (QpType::Uc, false),
            (QpType::Uc, false),
            (QpType::Ud, false),
            (QpType::Ud, false),
        ]
        .into_iter()
        .enumerate()
        {
            f.slots.push(Slot {
                qp: None,
                ty,
                peer: i ^ 1,
                on_srq: srq,
                sends: VecDeque::new(),
                recvs: VecDeque::new(),
                fatal_ok: false,
            });
            f.create(i);
        }
        if across {
            for (i, ty) in REMOTE_SLOTS.into_iter().zip([QpType::Rc, QpType::Uc]) {
                f.slots.push(Slot {
                    qp: None,
                    ty,
                    peer: REMOTE,
                    on_srq: false,
                    sends: VecDeque::new(),
                    recvs: VecDeque::new(),
                    fatal_ok: false,
                });
                f.create(i);
            }
        }
        for i in (0..f.slots.len() / 2).map(|p| 2 * p) {
            f.connect_pair(i);
        }
        f.poll_shy = f.rng.below(2) == 0;
        f
    }

    fn fail(&self, what: impl std::fmt::Display) -> ! {
        panic!(
            "ledger violation, seed {:#x} step {}: {what}\nfigures so far: {:?}",
            self.seed, self.step, self.f
        );
    }

    fn create(&mut self, i: usize) {
        let s = &self.slots[i];
        let c = cfg(s.ty);
        let srq = if s.on_srq { Some(&mut self.srq) } else { None };
        let qp = self
            .dev
            .create_qp(&self.pd, &mut self.scq[i / 2], Some(&mut self.rcq), srq, &c)
            .unwrap_or_else(|e| self.fail(format!("create_qp: {e}")));
        self.slots[i].qp = Some(qp);
        self.f.qps_created += 1;
    }

    /// Forget what the ledger holds for slot `i`: the fuzzer reset or dropped it while these
    /// were outstanding (a reset discards them with any unpolled CQE).
    fn discard(&mut self, i: usize) {
        let s = &mut self.slots[i];
        self.f.discarded_by_reset += (s.sends.len() + s.recvs.len()) as u64;
        s.sends.clear();
        s.recvs.clear();
        s.fatal_ok = false;
        self.stale[i / 2] = true;
        self.stale[RCQ] = true;
    }

    /// (Re)connect slot `i` towards its peer (through RESET when it is not there).
    fn connect(&mut self, i: usize) {
        let p = self.slots[i].peer;
        if p == REMOTE {
            return self.connect_remote(i);
        }
        let opts = ConnectOpts::default();
        let peer_ep = self
            .dev
            .endpoint(self.slots[p].qp.as_ref().unwrap(), &opts)
            .unwrap();
        if self.slots[i].qp.as_ref().unwrap().state() != QpState::Reset {
            self.discard(i);
            self.f.resets += 1;
        }
        let qp = self.slots[i].qp.as_mut().unwrap();
        let ep = self.dev.endpoint(qp, &opts).unwrap();
        if let Err(e) = self.dev.connect(qp, &ep, &peer_ep, &opts) {
            self.fail(format!("connect: {e}"));
        }
    }

    fn connect_pair(&mut self, i: usize) {
        self.connect(i);
        if self.slots[i].peer == REMOTE {
            self.connect(i + 1);
        } else {
            self.connect(self.slots[i].peer);
        }
    }

    /// (Re)connect slot `i` to its peer in the child, which connects its QP again too.
    fn connect_remote(&mut self, i: usize) {
        if self.slots[i].qp.as_ref().unwrap().state() != QpState::Reset {
            self.discard(i);
            self.f.resets += 1;
        }
        let peer = self.child.as_mut().unwrap();
        if let Err(e) = peer.ctl.write_all(&[i as u8]) {
            self.fail(format!("the child process is gone: {e}"));
        }
        let qp = self.slots[i].qp.as_mut().unwrap();
        match connect_qp_server(&mut self.dev, qp, &peer.listener, &opts(), None, STALL) {
            Ok(c) => peer.window = c.remote_mr(),
            Err(e) => self.fail(format!("connect across processes: {e}")),
        }
        self.f.remote_connects += 1;
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn post_send(&mut self, i: usize) {
        let n = 1 + self.rng.below(4) as usize;
        let ty = self.slots[i].ty;
        let (base, peer_qpn) = if self.slots[i].peer == REMOTE {
            let w = self.child.as_ref().and_then(|c| c.window).unwrap();
            (w, 0)
        } else {
            let peer = &self.slots[self.slots[i].peer];
            (
                self.buf.remote(0, BUF).unwrap(),
                peer.qp.as_ref().unwrap().qpn(),
            )
        };
        let ops = match ty {
            QpType::Rc => 7,
            QpType::Uc => 4,
            _ => 2, // UD: SEND, SEND WITH IMMEDIATE
        };
        let mut ids = Vec::new();
        let mut sigs = Vec::new();
        let mut specs = Vec::new();
        for _ in 0..n {
            let id = self.id();
            let signaled = self.rng.below(10) < 4;
            let op = self.rng.below(ops);
            let off = 8 * self.rng.below((BUF.min(PEER_BUF) / 2 / 8) as u64);
            let inline = self.rng.below(2) == 0;
            ids.push(id);
            sigs.push(signaled);
            specs.push((op, off, inline));
        }
        let data = [0x5au8; 32];
        let sge_local = [self.buf.mr().sge(BUF / 2, 32)];
        let sge_atomic = [self.buf.mr().sge(BUF / 2 + 64, 8)];
        let mut wrs = Vec::new();
        for (k, &(op, off, inline)) in specs.iter().enumerate() {
            let raddr = base.addr + off;
            let wr = match op {
                0 => SendWr::send(ids[k], &sge_local),
                1 => SendWr::send_imm(ids[k], &sge_local, ids[k] as u32),
                2 => SendWr::write(ids[k], &sge_local, raddr, base.rkey),
                3 => SendWr::write_imm(ids[k], &sge_local, raddr, base.rkey, 7),
                4 => SendWr::read(ids[k], &sge_local, raddr, base.rkey),
                5 => SendWr::faa(ids[k], &sge_atomic, raddr, base.rkey, 1),
                _ => SendWr::cas(ids[k], &sge_atomic, raddr, base.rkey, 0, 1),
            };
            let wr = if inline && op < 4 {
                wr.inline(&data)
            } else {
                wr
            };
            let wr = if ty == QpType::Ud {
                wr.to(UdDest {
                    ah: &self.ah,
                    remote_qpn: peer_qpn,
                    remote_qkey: ConnectOpts::default().qkey,
                })
            } else {
                wr
            };
            wrs.push(wr.signaled_if(sigs[k]));
        }
        let qp = self.slots[i].qp.as_mut().unwrap();
        let state = qp.state();
        let ring_now = self.rng.below(3) != 0;
        let (accepted, err) = if n == 1 || !ring_now {
            let mut acc = 0;
            let mut err = None;
            for wr in &wrs {
                match qp.sq().post(*wr) {
                    Ok(()) => acc += 1,
                    Err(r) => {
                        err = Some(r.error);
                        break;
                    }
                }
            }
            if ring_now {
                qp.sq().ring();
            }
            (acc, err)
        } else {
            match qp.sq().post_list(&wrs) {
                Ok(()) => (n, None),
                Err(e) => (e.index, Some(e.error)),
            }
        };
        for k in 0..accepted {
            self.slots[i].sends.push_back((ids[k], sigs[k]));
        }
        self.f.posted += accepted as u64;
        if let Some(e) = err {
            self.refusal(i, e, state, true);
        }
    }

    fn refusal(&mut self, i: usize, e: PostError, state: QpState, send: bool) {
        match e {
            PostError::QueueFull { .. } => {}
            PostError::BadState { .. } => {
                let ok = if send {
                    state != QpState::Rts
                } else {
                    !matches!(state, QpState::Init | QpState::Rtr | QpState::Rts)
                };
                if !ok {
                    self.fail(format!("slot {i}: BadState while {state}"));
                }
            }
            PostError::CqFull { .. } => {
                self.f.cq_full += 1;
                if !self.stale[if send { i / 2 } else { RCQ }] {
                    self.fail(format!(
                        "slot {i}: refused for CQ room with no reset/dropped QP's CQE in the ring"
                    ));
                }
            }
            e => self.fail(format!("slot {i}: refused: {e}")),
        }
    }

    fn post_recv(&mut self, i: usize) {
        let n = 1 + self.rng.below(3) as usize;
        let ids: Vec<u64> = (0..n).map(|_| self.id() | RECV).collect();
        let off = (BUF / 2 + 1024) + 256 * self.rng.below(64) as usize;
        let sge = [self.buf.mr().sge(off, 256)];
        let wrs: Vec<RecvWr> = ids.iter().map(|&id| RecvWr::new(id, &sge)).collect();
        if self.slots[i].on_srq {
            let r = self.srq.post_recv_list(&wrs);
            let acc = r.as_ref().map_or_else(|e| e.index, |()| n);
            self.srq_out.extend(&ids[..acc]);
            self.f.received_posted += acc as u64;
            if let Err(e) = r {
                if !matches!(e.error, PostError::QueueFull { .. }) {
                    self.fail(format!("SRQ refused: {}", e.error));
                }
            }
            return;
        }
        let qp = self.slots[i].qp.as_mut().unwrap();
        let state = qp.state();
        let r = qp.rq().post_recv_list(&wrs);
        let acc = r.as_ref().map_or_else(|e| e.index, |()| n);
        self.slots[i].recvs.extend(&ids[..acc]);
        self.f.received_posted += acc as u64;
        if let Err(e) = r {
            self.refusal(i, e.error, state, false);
        }
    }

    fn slot_of(&self, qpn: u32) -> Option<usize> {
        self.slots
            .iter()
            .position(|s| s.qp.as_ref().is_some_and(|q| q.qpn() == qpn))
    }
}

fn run(seed: u64, steps: u64) -> Figures {
    run_on(seed, steps, false)
}

fn run_on(seed: u64, steps: u64, across: bool) -> Figures {
    let mut f = Fuzz::new(seed, across);
    for _ in 0..steps {
        f.step();
    }
    f.finish()
}

/// The connection options across processes: an ACK timeout of 4.096 µs × 2^12 ≈ 17 ms,
/// seven retries.
fn opts() -> ConnectOpts {
    ConnectOpts {
        timeout: 12,
        retry_cnt: 7,
        ..ConnectOpts::default()
    }
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn lifecycle_fuzz_keeps_the_ledger() {
    let steps = env("RDMA_DIRECT_FUZZ_STEPS", 20_000);
    let seeds = env("RDMA_DIRECT_FUZZ_SEEDS", 4);
    let first = env("RDMA_DIRECT_FUZZ_SEED", 0x5eed);
    let mut total = Figures::default();
    let mut seeder = SplitMix64::new(first);
    for _ in 0..seeds {
        let seed = seeder.next_u64();
        let f = run(seed, steps);
        println!("seed {seed:#018x}: {f:?}");
        total.steps += f.steps;
        total.posted += f.posted;
        total.received_posted += f.received_posted;
        total.completed += f.completed;
        total.covered += f.covered;
        total.flushed += f.flushed;
        total.errors += f.errors;
        total.unsignaled_exception += f.unsignaled_exception;
        total.discarded_by_reset += f.discarded_by_reset;
        total.resets += f.resets;
        total.drops += f.drops;
        total.quiesces += f.quiesces;
        total.injected += f.injected;
        total.cq_full += f.cq_full;
        total.qps_created += f.qps_created;
        total.cq_drops += f.cq_drops;
        total.ud_delivered += f.ud_delivered;
        // The run did what it is for: requests went all the ways they can end.
        assert!(f.completed > 0 && f.flushed > 0 && f.covered > 0, "{f:?}");
        assert!(f.resets > 0 && f.drops > 0 && f.quiesces > 0, "{f:?}");
        assert!(f.cq_drops > 0 && f.ud_delivered > 0, "{f:?}");
    }
    println!(
        "lifecycle fuzz: {} steps over {seeds} seeds, {} QPs at a time ({} created), 0 ledger \
         violations: {total:?}",
        total.steps,
        2 * PAIRS,
        total.qps_created
    );
}

/// A seed the fuzzer found early on the commit before the CQ-room fix (a reset QP handed back
/// the CQ entries of its unpolled CQEs): with that fix reverted, this run overruns the CQ of
/// a pair at step 500 (`CqOverrun`); with it, the ledger holds. Kept so `cargo test` alone
/// catches that regression, whatever the random seeds above draw.
#[test]
fn the_seed_that_found_the_reset_overrun_keeps_the_ledger() {
    let f = run(0xb346_6f8a_7b81_a989, 2_000);
    assert!(f.resets > 0 && f.completed > 0, "{f:?}");
}

/// The lifecycle fuzzer with the peers of one pair (an RC and a UC QP) in a child process,
/// over the sim fabric: every connect of theirs is the child's too, the fuzzer's injected
/// faults lose, damage, delay and duplicate their packets, and the ledger holds.
/// `RDMA_DIRECT_FUZZ_FABRIC_STEPS` (default 3,000) and `RDMA_DIRECT_FUZZ_FABRIC_SEEDS`
/// (default 1) set the length.
#[test]
fn lifecycle_fuzz_with_peers_in_another_process() {
    let steps = env("RDMA_DIRECT_FUZZ_FABRIC_STEPS", 3_000);
    let seeds = env("RDMA_DIRECT_FUZZ_FABRIC_SEEDS", 1);
    let mut seeder = SplitMix64::new(env("RDMA_DIRECT_FUZZ_SEED", 0xfab));
    for _ in 0..seeds {
        let seed = seeder.next_u64();
        let f = run_on(seed, steps, true);
        println!("seed {seed:#018x} across processes: {f:?}");
        // Requests crossed to the child and came back, and the pair was connected again.
        assert!(f.remote_completed > 0 && f.remote_connects > 2, "{f:?}");
        assert!(f.completed > 0 && f.flushed > 0 && f.resets > 0, "{f:?}");
    }
}

/// The child process of the run across processes: an RC and a UC QP on its own sim device
/// (device thread: it answers on its own), a shared window, receives kept posted; connects
/// its QP of a slot whenever the control connection names that slot, until it closes.
#[test]
#[ignore = "the child process of the lifecycle fuzzer across processes"]
fn lifecycle_peer() {
    let Ok(v) = std::env::var(PEER_ENV) else {
        println!("skipped: the child process of the lifecycle fuzzer");
        return;
    };
    let (ctl_addr, addr) = v.split_once(' ').unwrap();
    let mut ctl = TcpStream::connect(ctl_addr).unwrap();
    let mut dev = SimDevice::new();
    dev.start_device_thread().unwrap();
    dev.join_fabric(None).unwrap();
    let pd = dev.alloc_pd().unwrap();
    let buf = dev
        .alloc_buf(&pd, PEER_BUF, Access::ALL, Pages::Normal)
        .unwrap();
    let window = buf.remote(0, PEER_BUF).unwrap();
    let mut scq = dev.create_cq(2 * MAX_WR).unwrap();
    let mut rcq = dev.create_cq(4 * MAX_WR).unwrap();
    let mut qps: Vec<SimQp> = [QpType::Rc, QpType::Uc]
        .into_iter()
        .map(|ty| {
            dev.create_qp(&pd, &mut scq, Some(&mut rcq), None, &cfg(ty))
                .unwrap()
        })
        .collect();
    let mut posted = [0u32; 2];
    let sge = [buf.mr().sge(PEER_BUF / 2, 256)];
    ctl.set_nonblocking(true).unwrap();
    let mut id = 0u64;
    loop {
        let mut b = [0u8; 1];
        let busy = match ctl.read(&mut b) {
            Ok(0) => break,
            Ok(_) => {
                let k = usize::from(b[0]) - REMOTE_SLOTS[0];
                connect_qp_client(&mut dev, &mut qps[k], addr, &opts(), Some(window), STALL)
                    .unwrap();
                posted[k] = 0;
                true
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("control connection: {e}"),
        };
        let mut wc = [Completion::EMPTY; 16];
        let n = rcq.poll(&mut wc);
        for c in &wc[..n] {
            if let Some(k) = qps.iter().position(|q| q.qpn() == c.qp_num) {
                posted[k] = posted[k].saturating_sub(1);
            }
        }
        for (k, qp) in qps.iter_mut().enumerate() {
            if qp.state() != QpState::Rts || posted[k] >= MAX_WR {
                continue;
            }
            while posted[k] < MAX_WR {
                id += 1;
                if qp.rq().post_recv(RecvWr::new(id, &sge)).is_err() {
                    break;
                }
                posted[k] += 1;
            }
            qp.rq().ring();
        }
        if !busy && n == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    println!("peer ok");
}
