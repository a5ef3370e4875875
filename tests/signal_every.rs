//! `SendQueue::set_signal_every` on the software device, through the trait only: with n = 4,
//! unsignaled requests complete once per 4 posts, each completion retiring the ones before.

mod common;

use rdma_direct::prelude::*;

struct Pair {
    p: SimDevice,
    a: <SimDevice as Provider>::Qp,
    ca: <SimDevice as Provider>::Cq,
    buf: RegisteredBuf<<SimDevice as Provider>::Mr>,
    _b: <SimDevice as Provider>::Qp,
    _cb: <SimDevice as Provider>::Cq,
}

fn pair() -> Pair {
    let mut p = SimDevice::new();
    let pd = p.alloc_pd().unwrap();
    let buf = p.alloc_buf(&pd, 128, Access::ALL, Pages::Normal).unwrap();
    // The CQ (32) absorbs both queues.
    let cfg = common::qp_cfg(QpType::Rc, 16, 16);
    let ((a, ca), (b, cb)) = common::sim_pair(&mut p, &pd, 32, &cfg, &ConnectOpts::default());
    Pair {
        p,
        a,
        ca,
        buf,
        _b: b,
        _cb: cb,
    }
}

/// Posts WRITEs `ids` (signaled when listed in `signaled`), rings, and returns the wr_ids
/// of all completions.
fn post_and_collect(t: &mut Pair, ids: std::ops::Range<u64>, signaled: &[u64]) -> Vec<u64> {
    let from = [t.buf.sge(0, 64).unwrap()];
    let to = t.buf.remote(64, 64).unwrap();
    for id in ids {
        let wr = SendWr::write(id, &from, to.addr, to.rkey).signaled_if(signaled.contains(&id));
        assert_eq!(t.a.sq().post(wr).map_err(|r| r.error), Ok(()));
    }
    t.a.sq().ring();
    let mut got = Vec::new();
    let mut wc = [Completion::EMPTY; 16];
    for _ in 0..100 {
        t.p.progress();
        let n = t.ca.poll(&mut wc);
        for c in &wc[..n] {
            assert!(c.is_ok(), "{c:?}");
            assert_eq!(c.opcode, WcOpcode::RdmaWrite);
            got.push(c.wr_id);
        }
    }
    got
}

#[test]
fn signal_every_4_completes_once_per_4_unsignaled_posts() {
    let mut t = pair();
    let full = t.a.sq().free_slots();
    t.a.sq().set_signal_every(4);
    assert_eq!(post_and_collect(&mut t, 0..12, &[]), vec![3, 7, 11]);
    // Each completion retired the three unsignaled requests before it.
    assert_eq!(t.a.sq().free_slots(), full);
}

#[test]
fn an_explicitly_signaled_request_restarts_the_count() {
    let mut t = pair();
    t.a.sq().set_signal_every(4);
    assert_eq!(post_and_collect(&mut t, 0..7, &[1]), vec![1, 5]);
}

#[test]
fn signal_every_0_turns_the_policy_off() {
    let mut t = pair();
    let full = t.a.sq().free_slots();
    t.a.sq().set_signal_every(4);
    t.a.sq().set_signal_every(0);
    assert_eq!(post_and_collect(&mut t, 0..8, &[7]), vec![7]);
    assert_eq!(t.a.sq().free_slots(), full);
}
