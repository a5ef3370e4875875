//! Selective signaling on the mlx5 poller, plain memory, the test writing CQEs as the device
//! would: a completion naming a WQE past the oldest outstanding one retires the unsignaled
//! requests before it (`covered`, `covered_from`), on every way a CQE is taken (polls of many
//! slots, polls of one slot, `poll_one`). Checked byte for byte against a model of the send
//! queue (what each completion must say, from what was posted) over random signaling
//! patterns, WQEs of 1 to 4 WQEBBs, the ring's wrap and resets mid-run; and CQEs naming no
//! WQE start (outside the outstanding range, inside a multi-WQEBB WQE, an entry left from an
//! earlier lap or from before a reset) are dropped and counted, nothing retired.

use rdma_direct_rig as plain;

use plain::{send_qp, test_cq, Cqe, Plain, PlainCq, PlainQp, Rng, TEST_SGE as SGE};
use rdma_direct::providers::mlx5::{Mlx5Cq, Mlx5Qp};
use rdma_direct::providers::{
    Completion, CompletionQueue, QpCaps, QpState, QpType, QueuePair, SendQueue, SendWr, WcOpcode,
    WcStatus,
};

const QPN: u32 = 0x3c;
/// WQEBBs of the send ring.
const WQE_CNT: u32 = 64;
/// CQE opcode bytes (CQE byte 56 = the WQE's opcode): SEND, RDMA WRITE.
const OP_SEND: u8 = 0x0a;
const OP_WRITE: u8 = 0x08;

fn caps() -> QpCaps {
    QpCaps {
        max_send_wr: WQE_CNT,
        max_recv_wr: 16,
        max_send_sge: 2,
        max_recv_sge: 2,
        max_inline_data: 200,
    }
}

/// A CQ of 256 CQEs and an RC QP of a 64-WQEBB send ring on it.
fn rig() -> (Mlx5Cq<Plain>, PlainCq, Mlx5Qp<Plain>, PlainQp) {
    let (mut cq, d) = test_cq(256, 64);
    let (qp, dq) = send_qp(&mut cq, QPN, QpType::Rc, WQE_CNT, 0, caps());
    (cq, d, qp, dq)
}

/// One posted request as the model keeps it.
struct Posted {
    wr_id: u64,
    /// WQEBB position of its first WQEBB (free-running).
    pos: u32,
    nbb: u32,
    signaled: bool,
    op: u8,
}

/// The send queue as the test (the device and the model) sees it.
struct Model {
    /// Requests posted and not yet completed, oldest first.
    out: std::collections::VecDeque<Posted>,
    /// The next WQE's position.
    pi: u32,
    next_id: u64,
}

impl Model {
    fn new() -> Model {
        Model {
            out: Default::default(),
            pi: 0,
            next_id: 1000,
        }
    }
    fn used(&self) -> u32 {
        self.out.iter().map(|p| p.nbb).sum()
    }
}

static DATA: [u8; 200] = [0x5a; 200];

/// Post one request of `nbb` WQEBBs (1: an 8-byte inline WRITE, the fast path, or a SEND of
/// one SGE; 2..=4: an inline SEND of that size), signaled or not.
fn post(qp: &mut Mlx5Qp<Plain>, m: &mut Model, nbb: u32, signaled: bool, fast: bool) {
    let id = m.next_id;
    m.next_id += 1;
    // Inline SEND: the ctrl segment (16 bytes), then the inline header (4) and data rounded
    // up to 16 bytes.
    let len = match nbb {
        1 => 8,
        2 => 80,
        3 => 140,
        _ => 200,
    };
    let (wr, op) = if nbb == 1 && fast {
        (
            SendWr::write(id, &[], 0x9000, 7).inline(&DATA[..len]),
            OP_WRITE,
        )
    } else if nbb == 1 {
        (SendWr::send(id, &SGE), OP_SEND)
    } else {
        (SendWr::send(id, &[]).inline(&DATA[..len]), OP_SEND)
    };
    let before = qp.sq().pi();
    qp.sq().post(wr.signaled_if(signaled)).expect("post");
    assert_eq!(qp.sq().pi().wrapping_sub(before), nbb, "WQE size");
    m.out.push_back(Posted {
        wr_id: id,
        pos: before,
        nbb,
        signaled,
        op,
    });
    m.pi = m.pi.wrapping_add(nbb);
}

/// The device completes every signaled request outstanding: one CQE each (naming its first
/// WQEBB); returns the completions the poller must give, in order.
fn complete(d: &mut PlainCq, m: &mut Model) -> Vec<Completion> {
    let mut want = Vec::new();
    let mut covered: Vec<u64> = Vec::new();
    while let Some(p) = m.out.front() {
        if !p.signaled {
            covered.push(p.wr_id);
            m.out.pop_front();
            continue;
        }
        let p = m.out.pop_front().unwrap();
        d.push(&Cqe::req(QPN, p.pos as u16, p.op, 0));
        want.push(Completion {
            wr_id: p.wr_id,
            qp_num: QPN,
            opcode: if p.op == OP_WRITE {
                WcOpcode::RdmaWrite
            } else {
                WcOpcode::Send
            },
            status: WcStatus::Success,
            covered: covered.len() as u32,
            covered_from: covered.first().copied().unwrap_or(0),
            ..Completion::EMPTY
        });
        covered.clear();
    }
    assert!(covered.is_empty(), "the batch ends with a signaled request");
    want
}

/// Put the unsignaled tail back (`complete` took the whole queue): the requests after the
/// last signaled one are still outstanding.
fn complete_keep_tail(d: &mut PlainCq, m: &mut Model) -> Vec<Completion> {
    let last_sig = m.out.iter().rposition(|p| p.signaled);
    let tail: Vec<Posted> = match last_sig {
        Some(i) => m.out.drain(i + 1..).collect(),
        None => m.out.drain(..).collect(),
    };
    let want = complete(d, m);
    m.out.extend(tail);
    want
}

/// Poll until `n` completions came, each poll of a random way: a poll of 1 to 16 slots or
/// `poll_one`.
fn poll_n(cq: &mut Mlx5Cq<Plain>, rng: &mut Rng, n: usize) -> Vec<Completion> {
    let mut got = Vec::new();
    let mut idle = 0;
    while got.len() < n {
        let k = if rng.below(4) == 0 {
            let mut c = Completion::EMPTY;
            let took = cq.poll_one(&mut c);
            if took {
                got.push(c);
            }
            usize::from(took)
        } else {
            let slots = 1 + rng.below(16) as usize;
            let mut out = [Completion::EMPTY; 16];
            let k = cq.poll(&mut out[..slots]);
            got.extend_from_slice(&out[..k]);
            k
        };
        if k == 0 {
            idle += 1;
            assert!(
                idle < 1000,
                "the poller stopped short: {} of {n}",
                got.len()
            );
        }
    }
    got
}

/// Signaled or not, by pattern: every `period` requests, or at random (`period` 0).
fn signal(rng: &mut Rng, period: u64, i: u64) -> bool {
    if period == 0 {
        rng.below(5) == 0
    } else {
        i % period == period - 1
    }
}

fn run(seed: u64, period: u64, rounds: u32, reset_every: u32) {
    let (mut cq, mut d, mut qp, _dq) = rig();
    let mut m = Model::new();
    let mut rng = Rng(seed);
    let mut i = 0u64;
    for round in 0..rounds {
        if reset_every != 0 && round % reset_every == reset_every - 1 {
            // Reset mid-run: everything outstanding is dropped (its CQEs, none written, never
            // come); the queue starts from 0.
            qp.set_state(QpState::Reset);
            for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
                qp.set_state(s);
            }
            m.out.clear();
            m.pi = 0;
            assert_eq!(qp.sq().pi(), 0);
        }
        // A batch: as many requests as fit (room in the ring, requests allowed).
        let batch = 1 + rng.below(40);
        for _ in 0..batch {
            let nbb = match rng.below(8) {
                0 => 2,
                1 => 3,
                2 => 4,
                _ => 1,
            };
            if m.used() + nbb > WQE_CNT || m.out.len() as u32 + 1 > WQE_CNT {
                break;
            }
            let sig = signal(&mut rng, period, i);
            let fast = rng.below(2) == 0;
            post(&mut qp, &mut m, nbb, sig, fast);
            i += 1;
        }
        qp.sq().ring();
        let want = complete_keep_tail(&mut d, &mut m);
        let got = poll_n(&mut cq, &mut rng, want.len());
        assert_eq!(
            got, want,
            "seed {seed} period {period} round {round}: the completions, byte for byte"
        );
        assert_eq!(cq.bogus_cqes(), 0);
        // What is retired is what the model retired: the unsignaled tail stays outstanding.
        assert_eq!(
            qp.sq().free_slots(),
            WQE_CNT - m.used(),
            "seed {seed} period {period} round {round}: requests outstanding"
        );
    }
    // One signaled request more covers the unsignaled tail, if any.
    if m.used() < WQE_CNT && (m.out.len() as u32) < WQE_CNT {
        post(&mut qp, &mut m, 1, true, false);
        qp.sq().ring();
        let want = complete_keep_tail(&mut d, &mut m);
        let got = poll_n(&mut cq, &mut rng, want.len());
        assert_eq!(
            got, want,
            "seed {seed} period {period}: the last completion"
        );
    }
    if m.out.is_empty() {
        // Every CQ entry given back: only the posting budget stays reserved.
        assert_eq!(
            cq.reserved(),
            qp.sq().cq_budget(),
            "seed {seed} period {period}"
        );
    }
}

#[test]
fn covered_completions_match_the_model_for_every_signaling_period() {
    for period in 1..=64u64 {
        run(0x9e37_79b9 ^ period, period, 30, 0);
    }
}

#[test]
fn covered_completions_match_the_model_with_random_signaling_wrap_and_resets() {
    for seed in 1..=40u64 {
        run(seed * 0x2545_f491, 0, 60, if seed % 2 == 0 { 7 } else { 0 });
    }
}

/// Post `sizes` (WQEBBs each; the last signaled) and ring.
fn post_sizes(qp: &mut Mlx5Qp<Plain>, m: &mut Model, sizes: &[u32]) {
    for (k, &n) in sizes.iter().enumerate() {
        post(qp, m, n, k + 1 == sizes.len(), false);
    }
    qp.sq().ring();
}

/// How a hostile CQE is polled.
#[derive(Clone, Copy, Debug)]
enum Way {
    Many,
    One,
    PollOne,
}

fn poll_way(cq: &mut Mlx5Cq<Plain>, way: Way) -> Vec<Completion> {
    let mut out = [Completion::EMPTY; 16];
    match way {
        Way::Many => {
            let n = cq.poll(&mut out);
            out[..n].to_vec()
        }
        Way::One => {
            let n = cq.poll(&mut out[..1]);
            out[..n].to_vec()
        }
        Way::PollOne => {
            if cq.poll_one(&mut out[0]) {
                vec![out[0]]
            } else {
                vec![]
            }
        }
    }
}

/// A CQE at `wc` is dropped and counted (nothing retired); then the true CQE completes the
/// whole batch, covering what it must.
fn refused_then_true(
    cq: &mut Mlx5Cq<Plain>,
    d: &mut PlainCq,
    qp: &mut Mlx5Qp<Plain>,
    m: &mut Model,
    wc: u16,
    way: Way,
) {
    let bogus = cq.bogus_cqes();
    let free = qp.sq().free_slots();
    d.push(&Cqe::req(QPN, wc, OP_SEND, 0));
    assert!(
        poll_way(cq, way).is_empty(),
        "{way:?}: a CQE naming position {wc} completes nothing"
    );
    assert_eq!(cq.bogus_cqes(), bogus + 1, "{way:?}: counted");
    assert_eq!(qp.sq().free_slots(), free, "{way:?}: nothing retired");
    let want = complete(d, m);
    let got = poll_way(cq, way);
    assert_eq!(got, want, "{way:?}: the true CQE after it");
}

#[test]
fn hostile_wqe_counters_are_refused_as_before() {
    for way in [Way::Many, Way::One, Way::PollOne] {
        let (mut cq, mut d, mut qp, _dq) = rig();
        let mut m = Model::new();
        // A first batch makes the QP the CQ's hot one: the CQEs below reach the fast path.
        post_sizes(&mut qp, &mut m, &[1, 1]);
        let want = complete(&mut d, &mut m);
        assert_eq!(poll_way(&mut cq, way), want);
        // Positions 2, 3 (2 WQEBBs), 5 (2), 7; published up to 8.
        post_sizes(&mut qp, &mut m, &[1, 2, 2, 1]);
        // Past the published producer position.
        refused_then_true(&mut cq, &mut d, &mut qp, &mut m, 8, way);
        // Positions 8, 9 (4 WQEBBs: 9..12), 13, 14; a CQE naming WQEBB 11 (inside the
        // 4-WQEBB WQE: its entry never written) or 4 (retired: before the oldest
        // outstanding).
        post_sizes(&mut qp, &mut m, &[1, 4, 1, 1]);
        refused_then_true(&mut cq, &mut d, &mut qp, &mut m, 11, way);
        post_sizes(&mut qp, &mut m, &[1, 1, 1]);
        refused_then_true(&mut cq, &mut d, &mut qp, &mut m, 4, way);
        // Far outside the outstanding range (the 16-bit counter's other half).
        post_sizes(&mut qp, &mut m, &[2, 1]);
        refused_then_true(&mut cq, &mut d, &mut qp, &mut m, 0x8010, way);
        assert_eq!(cq.bogus_cqes(), 4);
    }
}

#[test]
fn an_entry_left_from_an_earlier_lap_is_no_wqe_start() {
    for way in [Way::Many, Way::One, Way::PollOne] {
        let (mut cq, mut d, mut qp, _dq) = rig();
        let mut m = Model::new();
        // Lap 0: one-WQEBB WQEs everywhere (each slot's entry a WQE start of that lap).
        for _ in 0..4 {
            post_sizes(&mut qp, &mut m, &[1; 16]);
            let want = complete(&mut d, &mut m);
            assert_eq!(poll_way(&mut cq, Way::Many), want);
        }
        // Lap 1: a 4-WQEBB WQE over slots 1..4 (position 65); slot 2's entry is lap 0's.
        post_sizes(&mut qp, &mut m, &[1, 4, 1, 1]);
        refused_then_true(&mut cq, &mut d, &mut qp, &mut m, 66, way);
        assert_eq!(cq.bogus_cqes(), 1);
    }
}

#[test]
fn an_entry_left_from_before_a_reset_is_no_wqe_start() {
    for way in [Way::Many, Way::One, Way::PollOne] {
        let (mut cq, mut d, mut qp, _dq) = rig();
        let mut m = Model::new();
        // Before the reset: one-WQEBB WQEs at 0..6, completed.
        post_sizes(&mut qp, &mut m, &[1; 6]);
        let want = complete(&mut d, &mut m);
        assert_eq!(poll_way(&mut cq, Way::Many), want);
        qp.set_state(QpState::Reset);
        for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
            qp.set_state(s);
        }
        m.pi = 0;
        // After it: 1 WQEBB at 0, completed (the QP's CQEs take the fast path again once the
        // reset's purge mark is passed); then 4 at 1..4 and 1 at 5. A CQE naming 3 (inside
        // the 4-WQEBB WQE; its entry, from before the reset, said "the 4th request", which
        // would pass for 2 covered requests).
        post_sizes(&mut qp, &mut m, &[1]);
        let want = complete(&mut d, &mut m);
        assert_eq!(poll_way(&mut cq, way), want);
        post_sizes(&mut qp, &mut m, &[4, 1]);
        refused_then_true(&mut cq, &mut d, &mut qp, &mut m, 3, way);
        assert_eq!(cq.bogus_cqes(), 1);
    }
}
