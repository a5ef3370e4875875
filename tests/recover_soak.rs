//! A soak of the recovery helper on the sim: an order stream over RC with acknowledgements,
//! faults injected at random, every order acknowledged exactly once.
//!
//! A gateway streams numbered orders (WRITE WITH IMMEDIATE, the order number the immediate;
//! one signaled in four) to an exchange, which executes each order once (it dedupes by the
//! order number, its state surviving its restarts) and acknowledges every order it receives
//! (SEND WITH IMMEDIATE, the number again); the gateway books each acknowledgement once (it
//! dedupes by the number) and sends again, after a recovery, every order sent and not yet
//! acknowledged. Both ends are `RcLink`s with the default `ConnectOpts`. Faults, drawn from a
//! seeded generator every few hundred orders on average: the exchange's QP moved to ERR; the
//! exchange restarted (its link dropped with traffic in flight, a new one in its place); one
//! end's QP failed by the device (`QP_FATAL`, noticed through `recover::link_events`); and
//! throughout, the sim's fault injector (error CQEs on sends, completions delayed and
//! reordered across queues). Whichever end sees the fault first (an error completion, a
//! refused post, an asynchronous event that fails its link, or an idle gateway's liveness
//! probe unanswered) starts the recovery of both:
//! the exchange's link drained (`RcLink::drain_polled`, a restarted one has nothing to drain),
//! the gateway's recovered on the same QP (`RcLink::recover`) towards the exchange's QP, which
//! the reconnect takes from ERR (or RESET) to RTS.
//!
//! Checked: every drain accounts for every request outstanding (`missing` 0, windows empty
//! after); every order executed exactly once and acknowledged exactly once; no hang (a
//! liveness timeout turns one into a failure). Printed: orders, faults by kind, recoveries,
//! recovery time (from the fault noticed to both ends connected again) p50 and max.
//!
//! `RDMA_DIRECT_SOAK_ORDERS=N` sets the manual-progress run's orders (default 3,000);
//! `RDMA_DIRECT_SOAK_SEED` its seed.

use std::collections::{BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use rdma_direct::prelude::*;
use rdma_direct::providers::sim::{FaultConfig, SimPd};

/// Receives carry ids from here up (above every order number and the helper's own ids' low
/// range).
const RECV_BASE: u64 = 1 << 62;
/// The gateway's orders in flight at most.
const WINDOW: u32 = 16;
/// A drain that sees nothing for this long fails the test.
const STALL: Duration = Duration::from_secs(30);
/// No acknowledgement for this long is a hang.
const LIVENESS: Duration = Duration::from_secs(60);

/// The gateway: its link, what it still has to send, what it sent unacknowledged, and the
/// acknowledgements it booked per order.
struct Gateway {
    link: RcLink<SimDevice>,
    todo: VecDeque<u64>,
    unacked: BTreeSet<u64>,
    acked: Vec<u8>,
    booked: u64,
    duplicate_acks: u64,
}

/// The exchange: its link (replaced on a restart), its executions per order (kept across
/// restarts, as a state file would) and the acknowledgements it has yet to send.
struct Exchange {
    link: RcLink<SimDevice>,
    executed: Vec<u8>,
    duplicate_orders: u64,
    acks: VecDeque<u64>,
}

/// The gateway's booking of acknowledgements, apart from its link (a drain of the link
/// books through it).
struct AckBook<'a> {
    unacked: &'a mut BTreeSet<u64>,
    acked: &'a mut [u8],
    booked: &'a mut u64,
    duplicate_acks: &'a mut u64,
}

impl AckBook<'_> {
    /// Books acknowledgement `c` once; true the first time.
    fn ack(&mut self, c: &Completion) -> bool {
        let id = u64::from(c.imm);
        if self.acked[id as usize] == 0 {
            self.acked[id as usize] = 1;
            *self.booked += 1;
            self.unacked.remove(&id);
            true
        } else {
            *self.duplicate_acks += 1;
            false
        }
    }
}

impl Gateway {
    fn split(&mut self) -> (&mut RcLink<SimDevice>, AckBook<'_>) {
        let book = AckBook {
            unacked: &mut self.unacked,
            acked: &mut self.acked,
            booked: &mut self.booked,
            duplicate_acks: &mut self.duplicate_acks,
        };
        (&mut self.link, book)
    }

    fn book_ack(&mut self, c: &Completion) -> bool {
        self.split().1.ack(c)
    }
}

/// The exchange's execution of orders, apart from its link (as [`AckBook`]).
struct OrderBook<'a> {
    executed: &'a mut [u8],
    duplicate_orders: &'a mut u64,
    acks: &'a mut VecDeque<u64>,
}

impl OrderBook<'_> {
    /// Executes order `c` once and queues its acknowledgement (every time).
    fn order(&mut self, c: &Completion) {
        let id = u64::from(c.imm);
        match self.executed.get_mut(id as usize) {
            Some(e) if *e == 0 => *e = 1,
            Some(_) => *self.duplicate_orders += 1,
            None => panic!("an order the gateway never sent: {c:?}"),
        }
        self.acks.push_back(id);
    }
}

impl Exchange {
    fn split(&mut self) -> (&mut RcLink<SimDevice>, OrderBook<'_>) {
        let book = OrderBook {
            executed: &mut self.executed,
            duplicate_orders: &mut self.duplicate_orders,
            acks: &mut self.acks,
        };
        (&mut self.link, book)
    }

    fn book_order(&mut self, c: &Completion) {
        self.split().1.order(c)
    }
}

#[derive(Default)]
struct Figures {
    responder_err: u64,
    restarts: u64,
    qp_fatal: u64,
    by_event: u64,
    recoveries: u64,
    probes: u64,
    /// Orders (at the exchange) and acknowledgements (at the gateway) a drain delivered.
    delivered: u64,
    times: Vec<Duration>,
}

/// Both ends signal one send in four and post bursts of random length, so a burst often ends
/// unsignaled: a drain of a QP already in ERR then ends those sends by its flush marker
/// (`SendQueue::post_flush_marker`).
fn new_link(dev: &mut SimDevice, pd: &SimPd, sends: u32, recvs: u32) -> RcLink<SimDevice> {
    let mut l = RcLink::new(dev, pd, sends, recvs, RECV_BASE, STALL).unwrap();
    l.qp.sq().set_signal_every(4);
    l
}

/// What one poll of an end saw: `Some(i)` when completion `i` of `wc` failed (the fault).
fn first_error(wc: &[Completion]) -> Option<usize> {
    wc.iter().position(|c| !c.is_ok())
}

fn soak(orders: u64, seed: u64, threaded: bool) {
    let mut dev = SimDevice::new();
    if threaded {
        dev.start_device_thread().unwrap();
    }
    let injector = FaultConfig {
        seed,
        error_ppm: 500,
        delay_ppm: 20_000,
        max_delay_passes: 3,
        reorder_ppm: 50_000,
        torn_write_spins: 0,
        packet_drop_ppm: 0,
        packet_corrupt_ppm: 0,
        packet_delay_ppm: 0,
        packet_duplicate_ppm: 0,
    };
    dev.set_faults(Some(injector));
    let pd = dev.alloc_pd().unwrap();
    let book = dev.alloc_buf(&pd, 64, Access::ALL, Pages::Normal).unwrap();
    let dst = book.remote(0, 64).unwrap();
    let opts = ConnectOpts::default();
    let mut gw = Gateway {
        link: new_link(&mut dev, &pd, WINDOW, 2 * WINDOW),
        todo: (0..orders).collect(),
        unacked: BTreeSet::new(),
        acked: vec![0; orders as usize],
        booked: 0,
        duplicate_acks: 0,
    };
    let mut ex = Exchange {
        link: new_link(&mut dev, &pd, WINDOW, 2 * WINDOW),
        executed: vec![0; orders as usize],
        duplicate_orders: 0,
        acks: VecDeque::new(),
    };
    connect_pair(&mut dev, &mut gw.link.qp, &mut ex.link.qp, &opts).unwrap();
    gw.link.recvs.fill(gw.link.qp.rq()).unwrap();
    ex.link.recvs.fill(ex.link.qp.rq()).unwrap();
    let mut rng = rdma_direct::providers::sim::fault::SplitMix64::new(seed ^ 0x5eed);
    let mean_gap = 200;
    let mut sent = 0u64;
    let mut next_fault = rng.below(2 * mean_gap) + 1;
    let mut f = Figures::default();
    let mut wc = [Completion::EMPTY; 32];
    let mut last_ack = Instant::now();
    let mut idle_since = Instant::now();
    let (mut probe_out, mut idle_polls) = (false, 0u32);
    // A scheduled fault not recovered from yet (the next waits for its recovery).
    let mut fault_pending = false;
    let t_run = Instant::now();
    while gw.booked < orders {
        assert!(
            last_ack.elapsed() < LIVENESS,
            "hang: {} of {orders} acknowledged, {} in flight, {} unacknowledged",
            gw.booked,
            gw.link.window.in_flight(),
            gw.unacked.len()
        );
        let mut gw_fault: Option<Vec<Completion>> = None;
        let mut ex_fault: Option<Vec<Completion>> = None;
        // The gateway posts what its window allows, in a burst of random length (a seeded
        // draw; the exchange's acknowledgements too), so bursts end unsignaled at random.
        let mut burst = rng.below(u64::from(WINDOW)) + 1;
        while gw.link.window.room() > 0 && burst > 0 {
            burst -= 1;
            let Some(id) = gw.todo.pop_front() else { break };
            if gw.acked[id as usize] > 0 {
                continue;
            }
            let mut wr = SendWr::write_imm(id, &[], dst.addr, dst.rkey, id as u32);
            if gw.todo.is_empty() {
                wr = wr.signaled();
            }
            if let Err(r) = gw.link.qp.sq().post(wr) {
                assert!(matches!(r.error, PostError::BadState { .. }), "{}", r.error);
                gw.todo.push_front(id);
                gw_fault = Some(Vec::new());
                break;
            }
            gw.link.window.posted(1);
            gw.unacked.insert(id);
            sent += 1;
        }
        gw.link.qp.sq().try_ring().unwrap();
        // A fault of the schedule, once the stream is past its point.
        if sent >= next_fault && !fault_pending {
            fault_pending = true;
            next_fault = sent + rng.below(2 * mean_gap) + 1;
            let kind = rng.below(3);
            if kind == 0 {
                f.responder_err += 1;
                dev.to_error(&mut ex.link.qp).unwrap();
            } else if kind == 2 {
                // The device fails one end's QP on its own: QP_FATAL, its requests flushed.
                f.qp_fatal += 1;
                let end = if rng.below(2) == 0 {
                    &gw.link
                } else {
                    &ex.link
                };
                dev.fail_qp(end.qp.qpn());
            } else {
                // Its acknowledgements not sent yet die with it.
                f.restarts += 1;
                ex.link = new_link(&mut dev, &pd, WINDOW, 2 * WINDOW);
                ex.acks.clear();
            }
        }
        dev.progress();
        // The device's asynchronous events: one that fails either end is a fault like an
        // error completion (the CQs are then left to the drains).
        let mut by_event = false;
        for ev in link_events(&mut dev).unwrap() {
            by_event |= gw.link.failed_by(&ev) || ex.link.failed_by(&ev);
        }
        f.by_event += u64::from(by_event);
        // The exchange: executes each order once, acknowledges every one it receives.
        let n = if by_event {
            0
        } else {
            ex.link.cq.poll(&mut wc)
        };
        let stop = first_error(&wc[..n]);
        for c in &wc[..stop.unwrap_or(n)] {
            if ex.link.take(c) {
                ex.book_order(c);
            }
        }
        if let Some(i) = stop {
            ex_fault = Some(wc[i..n].to_vec());
        } else if ex.link.qp.state() != QpState::Reset {
            // (A restarted exchange waits for the gateway to connect it.) A refusal here is
            // the QP the device just failed, a fault as any other.
            if let Err(e) = ex.link.recvs.fill(ex.link.qp.rq()) {
                assert_eq!(ex.link.qp.state(), QpState::Err, "{e}");
                ex_fault = Some(Vec::new());
            }
            let mut burst = rng.below(u64::from(WINDOW)) + 1;
            while ex_fault.is_none() && ex.link.window.room() > 0 && burst > 0 {
                burst -= 1;
                let Some(&id) = ex.acks.front() else { break };
                let wr = SendWr::send_imm(id, &[], id as u32);
                if let Err(r) = ex.link.qp.sq().post(wr) {
                    assert!(matches!(r.error, PostError::BadState { .. }), "{}", r.error);
                    ex_fault = Some(Vec::new());
                    break;
                }
                ex.acks.pop_front();
                ex.link.window.posted(1);
            }
            ex.link.qp.sq().try_ring().unwrap();
        }
        dev.progress();
        // The gateway: books each acknowledgement once.
        let n = if by_event {
            0
        } else {
            gw.link.cq.poll(&mut wc)
        };
        let stop = first_error(&wc[..n]);
        for c in &wc[..stop.unwrap_or(n)] {
            if c.wr_id == rdma_direct::providers::recover::PROBE_WR_ID {
                probe_out = false;
            }
            if gw.link.take(c) && gw.book_ack(c) {
                last_ack = Instant::now();
            }
        }
        if let Some(i) = stop {
            gw_fault = gw_fault.or(Some(wc[i..n].to_vec()));
        } else if let Err(e) = gw.link.recvs.fill(gw.link.qp.rq()) {
            assert_eq!(gw.link.qp.state(), QpState::Err, "{e}");
            gw_fault = gw_fault.or(Some(Vec::new()));
        }
        // An idle gateway waiting for acknowledgements probes its peer: a restarted
        // exchange acknowledges nothing, and only a request in flight can tell.
        let idle = n == 0 && gw.link.window.in_flight() == 0 && !gw.unacked.is_empty();
        idle_polls = if idle { idle_polls + 1 } else { 0 };
        if !idle {
            idle_since = Instant::now();
        }
        let quiet = if threaded {
            idle_since.elapsed() > Duration::from_millis(20)
        } else {
            idle_polls > 4
        };
        let fault = by_event || gw_fault.is_some() || ex_fault.is_some();
        if quiet && !probe_out && !fault {
            probe(&mut gw.link.qp, &mut gw.link.window).unwrap();
            (probe_out, idle_polls) = (true, 0);
            f.probes += 1;
        }
        if !fault {
            continue;
        }
        // The fault noticed: both ends recover.
        let t0 = Instant::now();
        let ex_polled = ex_fault.unwrap_or_default();
        // What the drains poll successfully is booked as the ends' own polls book it: an
        // order that arrived is executed and acknowledged, an acknowledgement counts.
        if ex.link.qp.state() != QpState::Reset {
            let (link, mut book) = ex.split();
            let r = link
                .drain_polled(&mut dev, &ex_polled, |c| {
                    if c.wr_id >= RECV_BASE {
                        book.order(c);
                        f.delivered += 1;
                    }
                })
                .unwrap();
            assert_eq!(r.missing(), 0, "exchange: {r}");
        }
        let gw_polled = gw_fault.unwrap_or_default();
        let peer = &mut ex.link.qp;
        let (link, mut book) = gw.split();
        let r = link
            .recover(
                &mut dev,
                &gw_polled,
                |c| {
                    if c.wr_id >= RECV_BASE && book.ack(c) {
                        f.delivered += 1;
                    }
                },
                |p, qp| connect_pair(p, qp, peer, &opts).map(drop),
            )
            .unwrap();
        assert_eq!(r.missing(), 0, "gateway: {r}");
        ex.link.recvs.fill(ex.link.qp.rq()).unwrap();
        f.times.push(t0.elapsed());
        f.recoveries += 1;
        assert_eq!(
            (gw.link.window.in_flight(), ex.link.window.in_flight()),
            (0, 0),
            "a drain left a request outstanding"
        );
        assert_eq!(
            (gw.link.qp.state(), ex.link.qp.state()),
            (QpState::Rts, QpState::Rts)
        );
        // Every order sent and not acknowledged goes again, oldest first; the exchange
        // dedupes the ones it already executed, the gateway the acknowledgements.
        for &id in gw.unacked.iter().rev() {
            gw.todo.push_front(id);
        }
        gw.unacked.clear();
        (probe_out, fault_pending) = (false, false);
        last_ack = Instant::now();
    }
    let injected = dev.fault_stats();
    let mut times = f.times.clone();
    times.sort();
    let p50 = times.get(times.len() / 2).copied().unwrap_or_default();
    let max = times.last().copied().unwrap_or_default();
    println!(
        "recover soak ({}): {orders} orders, {sent} sends, faults: {} responder ERR, {} \
         restarts, {} QP_FATAL ({} noticed by the event), {} injected error CQEs ({} delayed, {} \
         reordered); {} recoveries, {} probes, \
         recovery time p50 {:.1} us max {:.1} us; {} orders and acknowledgements delivered by \
         a drain; {} orders received again, {} acknowledgements again (deduped); {:.2} s",
        if threaded {
            "device thread"
        } else {
            "manual progress"
        },
        f.responder_err,
        f.restarts,
        f.qp_fatal,
        f.by_event,
        injected.errors,
        injected.delayed,
        injected.reordered,
        f.recoveries,
        f.probes,
        p50.as_secs_f64() * 1e6,
        max.as_secs_f64() * 1e6,
        f.delivered,
        ex.duplicate_orders,
        gw.duplicate_acks,
        t_run.elapsed().as_secs_f64()
    );
    assert!(
        gw.acked.iter().all(|&a| a == 1),
        "an order never acknowledged"
    );
    assert!(
        ex.executed.iter().all(|&e| e == 1),
        "an order never executed"
    );
    assert!(gw.unacked.is_empty() && gw.todo.iter().all(|&id| gw.acked[id as usize] == 1));
    assert!(
        f.responder_err + f.restarts + f.qp_fatal > 0
            && f.recoveries >= f.responder_err + f.restarts + f.qp_fatal,
        "every scheduled fault needs a recovery: {} recoveries",
        f.recoveries
    );
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.replace('_', "").parse().ok())
        .unwrap_or(default)
}

#[test]
fn every_order_is_acknowledged_once_through_random_faults_manual_progress() {
    soak(
        env_u64("RDMA_DIRECT_SOAK_ORDERS", 3_000),
        env_u64("RDMA_DIRECT_SOAK_SEED", 0x35),
        false,
    );
}

#[test]
fn every_order_is_acknowledged_once_through_random_faults_device_thread() {
    soak(600, 0x36, true);
}
