//! The PCIe tap of the plain-memory rig (`rdma_direct_rig::tap`) against hand counts: what a
//! ConnectX would move over PCIe for requests the mlx5 provider really posted and rang,
//! BlueFlame vs the 8-byte doorbell, inline vs gathered, signaling every 1 and 16, batch 1 and
//! 64, WQEs of several WQEBBs and a run that wraps the ring.

use rdma_direct::pcie::Counts;
use rdma_direct::providers::mlx5::DoorbellMode;
use rdma_direct::providers::{QueuePair, SendQueue};
use rdma_direct_rig as plain;

use plain::tap::Tap;
use plain::{BenchOp, Loopback};

/// Post `n` requests of `op` with `size` bytes in batches of `batch`, signaling every
/// `every`-th (counting from 1), one ring per batch, each ring tapped. The queue is drained
/// after each batch so any `n` fits.
fn run(mode: DoorbellMode, op: BenchOp, size: u32, n: u32, batch: u32, every: u32) -> Counts {
    run_on(false, mode, op, size, n, batch, every)
}

/// As [`run`], SENDs on a UD queue (each to the rig's UD destination).
fn run_ud(mode: DoorbellMode, op: BenchOp, size: u32, n: u32, batch: u32, every: u32) -> Counts {
    run_on(true, mode, op, size, n, batch, every)
}

fn run_on(
    ud: bool,
    mode: DoorbellMode,
    op: BenchOp,
    size: u32,
    n: u32,
    batch: u32,
    every: u32,
) -> Counts {
    // A UD SEND takes two WQEBBs or more: room for a batch of 64.
    let mut lb = if ud {
        Loopback::ud(256)
    } else {
        Loopback::new(64)
    };
    lb.qp.set_doorbell_mode(mode);
    let mut tap = Tap::new(&lb.dev, 16, 64);
    if ud {
        tap = tap.datagram();
    }
    let sge = lb.sge(size);
    let data = vec![0x5au8; size as usize];
    let mut i = 0;
    while i < n {
        for _ in 0..batch.min(n - i) {
            let mut wr = lb.wr(op, &sge, &data, u64::from(i));
            if ud {
                wr = wr.to(plain::ud_dest());
            }
            if (i + 1) % every == 0 {
                wr = wr.signaled();
            }
            assert!(lb.qp.sq().post(wr).is_ok(), "post {i}");
            i += 1;
        }
        tap.arm(&lb.dev);
        lb.qp.sq().ring();
        tap.observe(&lb.dev).expect("the tap reads WRITE and SEND");
        lb.drain();
    }
    tap.counts()
}

fn expect(messages: u64) -> Counts {
    Counts {
        messages,
        cqe_size: 64,
        resp_writes: messages,
        ..Counts::default()
    }
}

#[test]
fn one_blueflame_inline_write() {
    // libmlx5's rule: one staged WQE with ds 3 (ctrl, raddr, 8 inline bytes): BlueFlame.
    let c = run(DoorbellMode::Auto, BenchOp::WriteInline, 8, 1, 1, 1);
    let want = Counts {
        bf_chunks: 1,
        dbrec_updates: 1,
        cqe_writes: 1,
        resp_write_bytes: 8,
        ..expect(1)
    };
    assert_eq!(c, want);
}

#[test]
fn one_doorbell_inline_write() {
    let c = run(DoorbellMode::Doorbell, BenchOp::WriteInline, 8, 1, 1, 1);
    let want = Counts {
        doorbells: 1,
        dbrec_updates: 1,
        wqe_reads: 1,
        wqe_read_bbs: 1,
        cqe_writes: 1,
        resp_write_bytes: 8,
        ..expect(1)
    };
    assert_eq!(c, want);
}

#[test]
fn thirty_two_under_one_doorbell() {
    for mode in [DoorbellMode::Doorbell, DoorbellMode::Auto] {
        let c = run(mode, BenchOp::WriteInline, 8, 32, 32, 1);
        let want = Counts {
            doorbells: 1,
            dbrec_updates: 1,
            wqe_reads: 1,
            wqe_read_bbs: 32,
            cqe_writes: 32,
            resp_write_bytes: 32 * 8,
            ..expect(32)
        };
        assert_eq!(c, want, "{mode:?}");
    }
}

#[test]
fn gathered_payload_is_read_inline_is_not() {
    // One data segment of 64 bytes: one payload read of 64, BlueFlame for the WQE (ds 3).
    let c = run(DoorbellMode::Auto, BenchOp::Write, 64, 1, 1, 1);
    let want = Counts {
        bf_chunks: 1,
        dbrec_updates: 1,
        payload_reads: 1,
        payload_read_bytes: 64,
        cqe_writes: 1,
        resp_write_bytes: 64,
        ..expect(1)
    };
    assert_eq!(c, want);
    // Batch 64 of gathered WRITEs, signaled every 16th: one doorbell, 64 WQEBBs fetched.
    let c = run(DoorbellMode::Doorbell, BenchOp::Write, 64, 64, 64, 16);
    let want = Counts {
        doorbells: 1,
        dbrec_updates: 1,
        wqe_reads: 1,
        wqe_read_bbs: 64,
        payload_reads: 64,
        payload_read_bytes: 64 * 64,
        cqe_writes: 4,
        resp_write_bytes: 64 * 64,
        ..expect(64)
    };
    assert_eq!(c, want);
}

#[test]
fn batch_one_rings_every_request_signaling_every_sixteen() {
    // 64 requests at batch 1: 64 BlueFlame copies, no WQE fetched, 4 CQEs.
    let c = run(DoorbellMode::Auto, BenchOp::WriteInline, 8, 64, 1, 16);
    let want = Counts {
        bf_chunks: 64,
        dbrec_updates: 64,
        cqe_writes: 4,
        resp_write_bytes: 64 * 8,
        ..expect(64)
    };
    assert_eq!(c, want);
    // The same with the 8-byte doorbell: 64 doorbells, 64 fetches of one WQEBB each.
    let c = run(DoorbellMode::Doorbell, BenchOp::WriteInline, 8, 64, 1, 16);
    let want = Counts {
        doorbells: 64,
        dbrec_updates: 64,
        wqe_reads: 64,
        wqe_read_bbs: 64,
        cqe_writes: 4,
        resp_write_bytes: 64 * 8,
        ..expect(64)
    };
    assert_eq!(c, want);
}

#[test]
fn a_three_wqebb_wqe_is_three_blueflame_chunks() {
    // 100 inline bytes: ctrl 16 + raddr 16 + (4 + 100 rounded to 112) = 144 B, 3 WQEBBs.
    let c = run(DoorbellMode::Auto, BenchOp::WriteInline, 100, 1, 1, 1);
    assert_eq!((c.bf_chunks, c.wqe_reads, c.doorbells), (3, 0, 0));
    let c = run(DoorbellMode::Doorbell, BenchOp::WriteInline, 100, 2, 2, 1);
    assert_eq!((c.doorbells, c.wqe_reads, c.wqe_read_bbs), (1, 1, 6));
}

#[test]
fn send_costs_the_responder_a_receive_wqe_and_a_cqe() {
    let c = run(DoorbellMode::Doorbell, BenchOp::SendInline, 8, 4, 4, 4);
    let want = Counts {
        doorbells: 1,
        dbrec_updates: 1,
        wqe_reads: 1,
        wqe_read_bbs: 4,
        cqe_writes: 1,
        resp_write_bytes: 4 * 8,
        recv_wqe_reads: 4,
        recv_wqe_bytes: 4 * 16,
        resp_cqe_writes: 4,
        ..expect(4)
    };
    assert_eq!(c, want);
}

#[test]
fn a_run_across_the_ring_end_is_two_fetches() {
    // 64-WQEBB ring: 48 then 32 requests; the second run covers slots 48..63 and 0..15.
    let mut lb = Loopback::new(64);
    lb.qp.set_doorbell_mode(DoorbellMode::Doorbell);
    let mut tap = Tap::new(&lb.dev, 16, 64);
    let sge = lb.sge(8);
    let data = [1u8; 8];
    for (k, n) in [48u32, 32].into_iter().enumerate() {
        for i in 0..n {
            let wr = lb
                .wr(BenchOp::WriteInline, &sge, &data, u64::from(i))
                .signaled();
            assert!(lb.qp.sq().post(wr).is_ok(), "run {k} post {i}");
        }
        tap.arm(&lb.dev);
        lb.qp.sq().ring();
        tap.observe(&lb.dev).unwrap();
        lb.drain();
    }
    let c = tap.counts();
    assert_eq!((c.doorbells, c.wqe_reads, c.wqe_read_bbs), (2, 3, 80));
}

#[test]
fn a_ring_with_nothing_staged_counts_nothing() {
    let mut lb = Loopback::new(64);
    let mut tap = Tap::new(&lb.dev, 16, 64);
    tap.arm(&lb.dev);
    lb.qp.sq().ring();
    tap.observe(&lb.dev).unwrap();
    assert_eq!(
        tap.counts(),
        Counts {
            cqe_size: 64,
            ..Counts::default()
        }
    );
}

// UD SEND: ctrl 16 + datagram segment 48 + the payload's segments; the responder takes a
// receive WQE (16 bytes, one SGE), writes the 40-byte GRH then the payload, and a CQE.

#[test]
fn one_ud_send_inline_is_two_wqebbs() {
    // 16 + 48 + (4 + 8 -> 16) = 80 B: two WQEBBs, two BlueFlame chunks, nothing fetched.
    let c = run_ud(DoorbellMode::Auto, BenchOp::SendInline, 8, 1, 1, 1);
    let want = Counts {
        bf_chunks: 2,
        dbrec_updates: 1,
        cqe_writes: 1,
        resp_write_bytes: 40 + 8,
        recv_wqe_reads: 1,
        recv_wqe_bytes: 16,
        resp_cqe_writes: 1,
        ..expect(1)
    };
    assert_eq!(c, want);
    // The doorbell instead: one 8-byte write, one fetch of both WQEBBs.
    let c = run_ud(DoorbellMode::Doorbell, BenchOp::SendInline, 8, 1, 1, 1);
    let want = Counts {
        doorbells: 1,
        wqe_reads: 1,
        wqe_read_bbs: 2,
        ..want
    };
    let want = Counts {
        bf_chunks: 0,
        ..want
    };
    assert_eq!(c, want);
}

#[test]
fn ud_sends_batched_gathered_and_large_inline() {
    // Batch 64 gathered UD SENDs of 64 B, signaled every 16th: 16 + 48 + 16 = 80 B, two
    // WQEBBs each, 128 fetched under one doorbell; 64 payload reads.
    let c = run_ud(DoorbellMode::Doorbell, BenchOp::Send, 64, 64, 64, 16);
    let want = Counts {
        doorbells: 1,
        dbrec_updates: 1,
        wqe_reads: 1,
        wqe_read_bbs: 128,
        payload_reads: 64,
        payload_read_bytes: 64 * 64,
        cqe_writes: 4,
        resp_write_bytes: 64 * (40 + 64),
        recv_wqe_reads: 64,
        recv_wqe_bytes: 64 * 16,
        resp_cqe_writes: 64,
        ..expect(64)
    };
    assert_eq!(c, want);
    // 76 inline bytes: 16 + 48 + (4 + 76 = 80) = 144 B, three WQEBBs (an RC WRITE of the
    // same payload takes two: 16 + 16 + 80 = 112).
    let c = run_ud(DoorbellMode::Auto, BenchOp::SendInline, 76, 1, 1, 1);
    assert_eq!((c.bf_chunks, c.wqe_reads, c.doorbells), (3, 0, 0));
    let c = run(DoorbellMode::Auto, BenchOp::WriteInline, 76, 1, 1, 1);
    assert_eq!((c.bf_chunks, c.wqe_reads, c.doorbells), (2, 0, 0));
    let c = run_ud(DoorbellMode::Doorbell, BenchOp::SendInline, 76, 4, 4, 4);
    assert_eq!((c.doorbells, c.wqe_reads, c.wqe_read_bbs), (1, 1, 12));
    assert_eq!(c.resp_write_bytes, 4 * (40 + 76));
}

#[test]
fn a_write_on_a_ud_queue_is_refused_by_the_post() {
    // The provider refuses it before the tap could misread it.
    let mut lb = Loopback::ud(64);
    let sge = lb.sge(8);
    let wr = lb.wr(BenchOp::Write, &sge, &[], 1).to(plain::ud_dest());
    assert!(lb.qp.sq().post(wr).is_err());
}
