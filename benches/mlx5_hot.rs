//! mlx5 hot-path costs on plain memory (the bench plays the device): post + ring per opcode
//! and per batch size, doorbell vs BlueFlame, poll per batch. Measured on plain memory, not
//! hardware: no PCIe write, no write-combining buffer, no device on the other side.
//!
//! `cargo bench --bench mlx5_hot` prints the tables; `BENCH_RUNS` / `BENCH_WARMUP` tune the
//! repetitions. `mlx5_hot --callgrind <workload> <n>` (single, single_wrs, fast, batch32,
//! poll16, poll1, one, poll0, recv16, mixed16, poll16_one, rt, ded_one, ded_poll0, ded16_one,
//! ded_rt, cover16, every1, cover_one) runs one workload for
//! `benches/compare.sh` (instructions counted by callgrind inside `cg_*` functions only).

#[path = "mlx5_hot/drivers.rs"]
mod drivers;
mod harness;
use drivers::{callgrind, time_workload};
use rdma_direct_rig as plain;

use std::hint::black_box;
use std::time::{Duration, Instant};

use plain::{BenchOp, Loopback, Plain};
use rdma_direct::providers::mlx5::AddressVector;
use rdma_direct::providers::mlx5::DoorbellMode;
use rdma_direct::providers::{
    Completion, CompletionQueue, QueuePair, RecvQueue, RecvWr, SendFlags, SendQueue, SendWr, Sge,
};
use rdma_direct::wire::{MLX5_CQE_RESP_SEND, MLX5_CQE_RESP_WR_IMM};

const SQ: u32 = 4096;
/// Requests per run: a multiple of every batch size; at 2 WQEBBs each they fit the SQ.
const RUN: u32 = 960;

/// One run: `RUN` requests of `op` in batches of `batch` (ring after each), the last one of
/// the run signaled; timed: posts and rings only. Then the device completes, untimed.
fn post_run(lb: &mut Loopback, op: BenchOp, size: u32, batch: u32) -> Duration {
    let sge = lb.sge(size);
    let inline = [0x5au8; 256];
    let inline = &inline[..(size as usize).min(256)];
    let mut wrs: Vec<SendWr<'_, AddressVector>> = (0..RUN)
        .map(|i| lb.wr(op, &sge, inline, i as u64))
        .collect();
    wrs[RUN as usize - 1].flags = SendFlags::SIGNALED;
    let t = Instant::now();
    let sq = lb.qp.sq();
    for chunk in wrs.chunks(batch as usize) {
        for wr in chunk {
            if sq.post(black_box(*wr)).is_err() {
                panic!("post refused: the run must fit the SQ");
            }
        }
        sq.ring();
    }
    let d = t.elapsed();
    drop(wrs);
    assert_eq!(lb.drain(), 1);
    d
}

/// One run of `RUN` single inline 8-byte WRITEs through `post_write_inline`, each rung; the
/// last signaled. Timed: posts and rings.
fn fast_run(lb: &mut Loopback) -> Duration {
    let data = [0x5au8; 8];
    let t = Instant::now();
    let sq = lb.qp.sq();
    for i in 0..RUN {
        if sq
            .post_write_inline(u64::from(i), 0x10_0000, 7, black_box(&data), i == RUN - 1)
            .is_err()
        {
            panic!("post refused: the run must fit the SQ");
        }
        sq.ring();
    }
    let d = t.elapsed();
    assert_eq!(lb.drain(), 1);
    d
}

/// One run: 64 signaled SENDs completed by the device (untimed), then polled in batches of
/// `batch` (timed).
fn poll_run(lb: &mut Loopback, batch: usize) -> Duration {
    let sge = lb.sge(8);
    let inline = [0u8; 8];
    for i in 0..64u64 {
        let wr = lb.wr(BenchOp::Send, &sge, &inline, i).signaled();
        lb.qp.sq().post(wr).expect("fits");
    }
    lb.qp.sq().ring();
    lb.dev.complete_sends(&mut lb.dcq);
    let mut out = [Completion::EMPTY; 64];
    let mut got = 0;
    let t = Instant::now();
    while got < 64 {
        got += lb.cq.poll(&mut out[..batch]);
    }
    let d = t.elapsed();
    black_box(&out);
    d
}

/// Callgrind workload: `n` single inline 8-byte WRITEs through the generic `post`, each rung
/// with the 8-byte doorbell. The request is built in the loop from the same inputs the C
/// reference's writer gets (remote address, rkey, the payload pointer), plus a wr_id.
#[inline(never)]
fn cg_single(sq: &mut rdma_direct::providers::mlx5::Mlx5Sq<Plain>, n: u32, data: &[u8; 8]) {
    for i in 0..n {
        let wr = SendWr::write(u64::from(i), &[], 0x10_0000, 7).inline(data);
        let _ = sq.post(wr);
        sq.ring();
    }
}

/// Callgrind workload: the same requests through `SendQueue::post_and_ring` (post and
/// 8-byte doorbell in one call).
#[inline(never)]
fn cg_now(sq: &mut rdma_direct::providers::mlx5::Mlx5Sq<Plain>, n: u32, data: &[u8; 8]) {
    for i in 0..n {
        let wr = SendWr::write(u64::from(i), &[], 0x10_0000, 7).inline(data);
        let _ = sq.post_and_ring(wr);
    }
}

/// Callgrind workload: the same, the requests read from a prepared array (every field a
/// run-time value: op, payload kind and length, flags).
#[inline(never)]
fn cg_single_wrs(
    sq: &mut rdma_direct::providers::mlx5::Mlx5Sq<Plain>,
    wrs: &[SendWr<'_, AddressVector>],
) {
    for wr in wrs {
        let _ = sq.post(*wr);
        sq.ring();
    }
}

/// Callgrind workload: `n` single inline 8-byte WRITEs through the WRITE-inline fast path
/// (`Mlx5Sq::post_write_inline`), each rung with the 8-byte doorbell.
#[inline(never)]
fn cg_fast(sq: &mut rdma_direct::providers::mlx5::Mlx5Sq<Plain>, n: u32, data: &[u8; 8]) {
    for i in 0..n {
        let _ = sq.post_write_inline(u64::from(i), 0x10_0000, 7, data, false);
        sq.ring();
    }
}

/// Callgrind workload: the same WRITEs (generic `post`, built in the loop) in batches of 32,
/// one doorbell per batch.
#[inline(never)]
fn cg_batch32(sq: &mut rdma_direct::providers::mlx5::Mlx5Sq<Plain>, n: u32, data: &[u8; 8]) {
    let mut i = 0;
    while i < n {
        let end = (i + 32).min(n);
        while i < end {
            let wr = SendWr::write(u64::from(i), &[], 0x10_0000, 7).inline(data);
            let _ = sq.post(wr);
            i += 1;
        }
        sq.ring();
    }
}

/// Callgrind workload: poll `n` CQEs in batches of 16.
#[inline(never)]
fn cg_poll16(
    cq: &mut rdma_direct::providers::mlx5::Mlx5Cq<Plain>,
    n: usize,
    out: &mut [Completion; 16],
) -> usize {
    let mut got = 0;
    while got < n {
        let k = cq.poll(out);
        if k == 0 {
            break;
        }
        got += k;
    }
    got
}

/// Callgrind workload: poll `n` CQEs one per call.
#[inline(never)]
fn cg_poll1(cq: &mut rdma_direct::providers::mlx5::Mlx5Cq<Plain>, n: usize) -> usize {
    let mut out = [Completion::EMPTY; 1];
    let mut got = 0;
    while got < n {
        let k = cq.poll(&mut out);
        if k == 0 {
            break;
        }
        got += k;
    }
    black_box(&out);
    got
}

/// Callgrind workload: poll `n` CQEs with `poll_one` (one completion, no slice).
#[inline(never)]
fn cg_one(cq: &mut rdma_direct::providers::mlx5::Mlx5Cq<Plain>, n: usize) -> usize {
    let mut out = Completion::EMPTY;
    let mut got = 0;
    while got < n {
        if !cq.poll_one(&mut out) {
            break;
        }
        got += 1;
    }
    black_box(&out);
    got
}

/// Callgrind workload, the order round trip's post: one inline 8-byte RDMA WRITE WITH
/// IMMEDIATE, signaled, through the generic `post`, rung with the 8-byte doorbell.
#[inline(never)]
fn cg_rt_post(sq: &mut rdma_direct::providers::mlx5::Mlx5Sq<Plain>, id: u64, data: &[u8; 8]) {
    let wr = SendWr::write_imm(id, &[], 0x10_0000, 7, 0x1234)
        .inline(data)
        .signaled();
    let _ = sq.post(wr);
    sq.ring();
}

/// Callgrind workload, the order round trip's polls: its requester CQE and the peer's receive
/// CQE (an incoming WRITE WITH IMMEDIATE), one `poll_one` each.
#[inline(never)]
fn cg_rt_poll(
    cq: &mut rdma_direct::providers::mlx5::Mlx5Cq<Plain>,
    out: &mut [Completion; 2],
) -> usize {
    let [a, b] = out;
    usize::from(cq.poll_one(a)) + usize::from(cq.poll_one(b))
}

/// Callgrind workload: `n` polls of an empty CQ (the busy-poll case), 16 slots each;
/// returns the completions got (0).
#[inline(never)]
fn cg_poll0(
    cq: &mut rdma_direct::providers::mlx5::Mlx5Cq<Plain>,
    n: usize,
    out: &mut [Completion; 16],
) -> usize {
    let mut got = 0;
    for _ in 0..n {
        got += cq.poll(out);
    }
    got
}

/// Selective signaling, the post side: 32 inline 8-byte WRITEs (generic `post`, built in
/// the loop), every `period`-th signaled, one doorbell.
#[inline(always)]
fn sig_post(
    sq: &mut rdma_direct::providers::mlx5::Mlx5Sq<Plain>,
    base: u64,
    period: u32,
    data: &[u8; 8],
) {
    for k in 0..32u32 {
        let wr = SendWr::write(base + u64::from(k), &[], 0x10_0000, 7)
            .inline(data)
            .signaled_if(k % period == period - 1);
        let _ = sq.post(wr);
    }
    sq.ring();
}

/// Selective signaling, the poll side: polls of 16 slots until the `want` CQEs of a round
/// came.
#[inline(always)]
fn sig_poll(
    cq: &mut rdma_direct::providers::mlx5::Mlx5Cq<Plain>,
    want: usize,
    out: &mut [Completion; 16],
) -> usize {
    let mut got = 0;
    while got < want {
        let k = cq.poll(out);
        if k == 0 {
            break;
        }
        got += k;
    }
    got
}

/// Callgrind workload `cover16`, post side: a round of 32 WQEs, one signaled per 16.
#[inline(never)]
fn cg_cover16_post(
    sq: &mut rdma_direct::providers::mlx5::Mlx5Sq<Plain>,
    base: u64,
    data: &[u8; 8],
) {
    sig_post(sq, base, 16, data)
}

/// Callgrind workload `cover16`, poll side: the round's 2 CQEs, each covering 15.
#[inline(never)]
fn cg_cover16_poll(
    cq: &mut rdma_direct::providers::mlx5::Mlx5Cq<Plain>,
    out: &mut [Completion; 16],
) -> usize {
    sig_poll(cq, 2, out)
}

/// Callgrind workload `every1`, post side: the same round, every WQE signaled.
#[inline(never)]
fn cg_every1_post(sq: &mut rdma_direct::providers::mlx5::Mlx5Sq<Plain>, base: u64, data: &[u8; 8]) {
    sig_post(sq, base, 1, data)
}

/// Callgrind workload `every1`, poll side: the round's 32 CQEs.
#[inline(never)]
fn cg_every1_poll(
    cq: &mut rdma_direct::providers::mlx5::Mlx5Cq<Plain>,
    out: &mut [Completion; 16],
) -> usize {
    sig_poll(cq, 32, out)
}

/// Rounds of 32 WQEs (`cover16`: one signaled per 16; `every1`: all), posted, completed by
/// the device (not counted) and polled, until `n` WQEs; checks what the last poll gave.
fn sig_rounds(lb: &mut Loopback, kind: &str, n: u32, data: &[u8; 8]) -> (u32, usize) {
    let mut out = [Completion::EMPTY; 16];
    let (mut posted, mut got) = (0u32, 0usize);
    while posted < n {
        let base = u64::from(posted);
        let k = if kind == "cover16" {
            cg_cover16_post(lb.qp.sq(), base, data);
            lb.dev.complete_sends(&mut lb.dcq);
            let k = cg_cover16_poll(&mut lb.cq, &mut out);
            assert_eq!(k, 2, "a round polls its 2 CQEs");
            assert_eq!(
                (out[1].wr_id, out[1].covered, out[1].covered_from),
                (base + 31, 15, base + 16),
                "{:?}",
                out[1]
            );
            k
        } else {
            cg_every1_post(lb.qp.sq(), base, data);
            lb.dev.complete_sends(&mut lb.dcq);
            let k = cg_every1_poll(&mut lb.cq, &mut out);
            assert_eq!(k, 32, "a round polls its 32 CQEs");
            assert_eq!((out[15].wr_id, out[15].covered), (base + 31, 0));
            k
        };
        posted += 32;
        got += k;
    }
    (posted, got)
}

/// Callgrind workload `cover_one`: `n` CQEs polled with `poll_one`, each covering 15
/// unsignaled SENDs (posted and completed outside it).
#[inline(never)]
fn cg_cover_one(
    cq: &mut rdma_direct::providers::mlx5::Mlx5Cq<Plain>,
    n: usize,
    out: &mut Completion,
) -> usize {
    let mut got = 0;
    while got < n {
        if !cq.poll_one(out) {
            break;
        }
        got += 1;
    }
    got
}

/// CQEs per `cover_one` batch: 16 WQEs each, the batch fits the 4096-WQEBB send queue.
const COVER_BATCH: u32 = 240;

/// One `cover_one` batch: `k` rounds of 15 unsignaled SENDs and a signaled one posted and
/// completed (not counted), then `poll`; returns what it polled.
fn cover_batch(lb: &mut Loopback, k: u32, poll: impl FnOnce(&mut Loopback) -> usize) -> usize {
    let sge = lb.sge(8);
    let payload = [0u8; 8];
    for i in 0..u64::from(k) * 16 {
        let wr = lb
            .wr(BenchOp::Send, &sge, &payload, i)
            .signaled_if(i % 16 == 15);
        lb.qp.sq().post(wr).expect("fits");
    }
    lb.qp.sq().ring();
    lb.dev.complete_sends(&mut lb.dcq);
    poll(lb)
}

/// The QP and CQ owned together ([`Mlx5Dedicated`]: the CQ serves one QP).
type Ded = rdma_direct::providers::mlx5::Mlx5Dedicated<Plain>;

/// Callgrind workload: poll `n` CQEs with the dedicated pair's `poll_one`.
#[inline(never)]
fn cg_ded_one(ded: &mut Ded, n: usize) -> usize {
    let mut out = Completion::EMPTY;
    let mut got = 0;
    while got < n {
        if !ded.poll_one(&mut out) {
            break;
        }
        got += 1;
    }
    black_box(&out);
    got
}

/// Callgrind workload: `n` polls of the dedicated pair's empty CQ, 16 slots each.
#[inline(never)]
fn cg_ded_poll0(ded: &mut Ded, n: usize, out: &mut [Completion; 16]) -> usize {
    let mut got = 0;
    for _ in 0..n {
        got += ded.poll(out);
    }
    got
}

/// Callgrind workload: one poll of 16 slots of the dedicated pair (finding one CQE).
#[inline(never)]
fn cg_ded16_one(ded: &mut Ded, out: &mut [Completion; 16]) -> usize {
    ded.poll(out)
}

/// Callgrind workload, the order round trip's post on the dedicated pair (as `cg_rt_post`).
#[inline(never)]
fn cg_ded_rt_post(ded: &mut Ded, id: u64, data: &[u8; 8]) {
    let wr = SendWr::write_imm(id, &[], 0x10_0000, 7, 0x1234)
        .inline(data)
        .signaled();
    let sq = ded.sq();
    let _ = sq.post(wr);
    sq.ring();
}

/// Callgrind workload, the order round trip's polls on the dedicated pair (as `cg_rt_poll`).
#[inline(never)]
fn cg_ded_rt_poll(ded: &mut Ded, out: &mut [Completion; 2]) -> usize {
    let [a, b] = out;
    usize::from(ded.poll_one(a)) + usize::from(ded.poll_one(b))
}

/// The dedicated-pair workloads (`ded_*`): the same rounds as `one`, `poll0`, `poll16_one` and
/// `rt`, on the QP and CQ owned together.
fn callgrind_dedicated(kind: &str, n: u32) {
    let mut lb = Loopback::new(4096);
    lb.qp.set_doorbell_mode(DoorbellMode::Doorbell);
    let payload = 0x0102_0304_0506_0708u64.to_ne_bytes();
    let sge: [Sge; 1] = lb.sge(8);
    let wr = |i: u64| lb.wr(BenchOp::Send, &sge, &payload, i).signaled();
    let wrs: Vec<_> = (0..u64::from(n)).map(wr).collect();
    let mut l = lb.into_dedicated();
    match kind {
        "ded_one" => {
            for wr in &wrs {
                l.ded.sq().post(*wr).expect("fits");
            }
            l.ded.sq().ring();
            l.dev.complete_sends(&mut l.dcq);
            println!("polled {}", cg_ded_one(&mut l.ded, n as usize));
        }
        "ded_poll0" => {
            let mut out = [Completion::EMPTY; 16];
            println!("polled {}", cg_ded_poll0(&mut l.ded, n as usize, &mut out));
        }
        "ded16_one" => {
            let mut out = [Completion::EMPTY; 16];
            let mut got = 0;
            for wr in &wrs {
                l.ded.sq().post(*wr).expect("fits");
                l.ded.sq().ring();
                l.dev.complete_sends(&mut l.dcq);
                let k = cg_ded16_one(&mut l.ded, &mut out);
                assert_eq!(k, 1, "a round polls its one CQE");
                got += k;
            }
            black_box(&out);
            println!("polled {got}");
        }
        _ => rt_rounds(&mut l, n, &sge, &payload),
    }
}

/// A QP and CQ the order round trip runs on (`rt`: the general CQ; `ded_rt`: the dedicated
/// pair), with the device sides.
trait RoundTrip {
    fn recv(&mut self, wr: RecvWr<'_>);
    /// The counted post (`cg_rt_post` or `cg_ded_rt_post`).
    fn post(&mut self, id: u64, data: &[u8; 8]);
    /// The counted polls (`cg_rt_poll` or `cg_ded_rt_poll`).
    fn poll(&mut self, out: &mut [Completion; 2]) -> usize;
    fn device(&mut self) -> (&mut plain::PlainQp, &mut plain::PlainCq);
}

impl RoundTrip for Loopback {
    fn recv(&mut self, wr: RecvWr<'_>) {
        self.qp.rq().post_recv(wr).expect("fits");
        self.qp.rq().ring();
    }
    fn post(&mut self, id: u64, data: &[u8; 8]) {
        cg_rt_post(self.qp.sq(), id, data);
    }
    fn poll(&mut self, out: &mut [Completion; 2]) -> usize {
        cg_rt_poll(&mut self.cq, out)
    }
    fn device(&mut self) -> (&mut plain::PlainQp, &mut plain::PlainCq) {
        (&mut self.dev, &mut self.dcq)
    }
}

impl RoundTrip for plain::DedicatedLoopback {
    fn recv(&mut self, wr: RecvWr<'_>) {
        self.ded.rq().post_recv(wr).expect("fits");
        self.ded.rq().ring();
    }
    fn post(&mut self, id: u64, data: &[u8; 8]) {
        cg_ded_rt_post(&mut self.ded, id, data);
    }
    fn poll(&mut self, out: &mut [Completion; 2]) -> usize {
        cg_ded_rt_poll(&mut self.ded, out)
    }
    fn device(&mut self) -> (&mut plain::PlainQp, &mut plain::PlainCq) {
        (&mut self.dev, &mut self.dcq)
    }
}

/// `n` order round trips: the QP's own RQ plays the peer's (a receive posted, not counted),
/// the WRITE WITH IMMEDIATE posted, the device's requester CQE and the receive CQE, both
/// polled and checked.
fn rt_rounds(t: &mut impl RoundTrip, n: u32, sge: &[Sge; 1], payload: &[u8; 8]) {
    let mut out = [Completion::EMPTY; 2];
    let mut got = 0;
    for i in 0..n {
        t.recv(RecvWr {
            wr_id: u64::from(i),
            sges: sge,
        });
        t.post(u64::from(i), payload);
        let (dev, dcq) = t.device();
        dev.complete_sends(dcq);
        dcq.push(&plain::Cqe::resp(
            MLX5_CQE_RESP_WR_IMM,
            0x4242,
            i as u16,
            8,
            0x1234,
        ));
        let k = t.poll(&mut out);
        assert_eq!(k, 2, "a round trip polls its two CQEs");
        assert_eq!(
            (out[0].wr_id, out[0].opcode, out[1].wr_id, out[1].imm),
            (
                u64::from(i),
                rdma_direct::providers::WcOpcode::RdmaWrite,
                u64::from(i),
                0x1234
            ),
            "{out:?}"
        );
        got += k;
    }
    println!("round trips {n}, completions {got}");
}

/// Callgrind workload: one poll of up to 16 CQEs (the `recv16` and `mixed16` rounds: the
/// receives and sends are posted and the CQEs written outside it).
#[inline(never)]
fn cg_round16(
    cq: &mut rdma_direct::providers::mlx5::Mlx5Cq<Plain>,
    out: &mut [Completion; 16],
) -> usize {
    cq.poll(out)
}

/// Rounds of 16 CQEs until `n`: `sends` of them requester CQEs of signaled SENDs, the rest
/// responder CQEs (incoming SENDs) of posted receives, interleaved; each round polled once
/// by `cg_round16`.
fn rounds(lb: &mut Loopback, n: u32, sends: u32) -> usize {
    let sge = lb.sge(8);
    let payload = [0u8; 8];
    let mut out = [Completion::EMPTY; 16];
    let (mut got, mut rq_ci, mut id) = (0usize, 0u16, 0u64);
    while got < n as usize {
        for k in 0..16u32 {
            id += 1;
            if k % (16 / sends.max(1)).max(1) == 0 && sends > 0 {
                let wr = lb.wr(BenchOp::Send, &sge, &payload, id).signaled();
                lb.qp.sq().post(wr).expect("fits");
                lb.qp.sq().ring();
                lb.dev.complete_sends(&mut lb.dcq);
            } else {
                lb.qp
                    .rq()
                    .post_recv(RecvWr {
                        wr_id: id,
                        sges: &sge,
                    })
                    .expect("fits");
                lb.qp.rq().ring();
                lb.dcq
                    .push(&plain::Cqe::resp(MLX5_CQE_RESP_SEND, 0x4242, rq_ci, 8, 0));
                rq_ci = rq_ci.wrapping_add(1);
            }
        }
        let k = cg_round16(&mut lb.cq, &mut out);
        assert_eq!(k, 16, "a round polls its 16 CQEs");
        got += k;
    }
    black_box(&out);
    got
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--time") {
        let kind = args.get(i + 1).map(String::as_str).unwrap_or("single");
        let n = args.get(i + 2).and_then(|s| s.parse().ok()).unwrap_or(1000);
        let runs = args.get(i + 3).and_then(|s| s.parse().ok()).unwrap_or(301);
        println!("{:.2}", time_workload(kind, n, runs.max(1)));
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--callgrind") {
        let kind = args.get(i + 1).map(String::as_str).unwrap_or("single");
        let n = args.get(i + 2).and_then(|s| s.parse().ok()).unwrap_or(4000);
        callgrind(kind, n);
        return;
    }
    let note = "measured on plain memory, not hardware (the bench plays the device)";
    let mut lb = Loopback::new(SQ);

    let mut cases = Vec::new();
    lb.qp.set_doorbell_mode(DoorbellMode::Doorbell);
    for (op, size) in [
        (BenchOp::WriteInline, 8),
        (BenchOp::WriteInline, 64),
        (BenchOp::Write, 4096),
        (BenchOp::Send, 4096),
        (BenchOp::SendInline, 64),
        (BenchOp::Read, 4096),
        (BenchOp::FetchAdd, 8),
        (BenchOp::CompareSwap, 8),
    ] {
        for batch in [1u32, 32] {
            let name = format!("{} {}B batch {}", op.name(), size, batch);
            cases.push(harness::measure(&name, RUN as u64, || {
                post_run(&mut lb, op, size, batch)
            }));
        }
    }
    harness::report("mlx5 post+ring per opcode (8-byte doorbell)", note, &cases);

    let mut cases = Vec::new();
    for batch in [1u32, 2, 4, 8, 16, 32, 64] {
        let name = format!("WRITE inline 8B batch {batch}");
        cases.push(harness::measure(&name, RUN as u64, || {
            post_run(&mut lb, BenchOp::WriteInline, 8, batch)
        }));
    }
    harness::report("mlx5 post+ring per WQE by batch size", note, &cases);

    let mut cases = Vec::new();
    for (mode, label) in [
        (DoorbellMode::Doorbell, "doorbell"),
        (DoorbellMode::BlueFlame, "blueflame"),
    ] {
        lb.qp.set_doorbell_mode(mode);
        for (op, size) in [(BenchOp::WriteInline, 8), (BenchOp::SendInline, 64)] {
            let name = format!("{} {}B single, {}", op.name(), size, label);
            cases.push(harness::measure(&name, RUN as u64, || {
                post_run(&mut lb, op, size, 1)
            }));
        }
    }
    lb.qp.set_doorbell_mode(DoorbellMode::Doorbell);
    cases.push(harness::measure(
        "WRITE inline 8B single, fast path, doorbell",
        RUN as u64,
        || fast_run(&mut lb),
    ));
    harness::report(
        "mlx5 doorbell vs BlueFlame (single-WQE posts)",
        note,
        &cases,
    );

    let mut cases = Vec::new();
    for batch in [1usize, 4, 16, 64] {
        let name = format!("poll batch {batch}");
        cases.push(harness::measure(&name, 64, || poll_run(&mut lb, batch)));
    }
    harness::report("mlx5 poll per CQE by batch size", note, &cases);
}
