//! `Mlx5Dedicated` (a QP and the CQ it alone completes into, owned together) on plain memory,
//! the test writing CQEs as the device would: every poll gives what the CQ's general poll
//! gives a twin (completions field for field, consumer index, doorbell record, dropped
//! count), hostile CQEs included; what it refuses to own; a reset's stale CQEs never complete
//! a new request.

use rdma_direct_rig as plain;

use plain::{Cqe, Plain, PlainCq, PlainQp};
use rdma_direct::providers::mlx5::{AddressVector, Mlx5Cq, Mlx5Dedicated, Mlx5Qp};
use rdma_direct::providers::{
    Completion, CompletionQueue, QpState, QueuePair, RecvQueue, RecvWr, SendQueue, SendWr, WcStatus,
};
use rdma_direct::wire::{MLX5_CQE_RESP_SEND_IMM, MLX5_CQE_RESP_WR_IMM};

fn qp_on(
    cq: &mut Mlx5Cq<Plain>,
    recv_cq: Option<&mut Mlx5Cq<Plain>>,
    qpn: u32,
) -> (Mlx5Qp<Plain>, PlainQp) {
    plain::test_qp(cq, recv_cq, qpn, None)
}

use plain::{test_cq as cq, TEST_SGE as SGE};

/// A dedicated pair and a twin QP on a CQ of its own polled the general way, each with its
/// device side.
struct Twins {
    ded: Mlx5Dedicated<Plain>,
    dd: PlainCq,
    dq: PlainQp,
    qp: Mlx5Qp<Plain>,
    cq: Mlx5Cq<Plain>,
    td: PlainCq,
    tq: PlainQp,
}

fn twins(cqe_cnt: u32, size: u32, qpn: u32) -> Twins {
    let (mut c1, dd) = cq(cqe_cnt, size);
    let (q1, dq) = qp_on(&mut c1, None, qpn);
    let (mut cq, td) = cq(cqe_cnt, size);
    let (qp, tq) = qp_on(&mut cq, None, qpn);
    Twins {
        ded: Mlx5Dedicated::new(q1, c1).unwrap(),
        dd,
        dq,
        qp,
        cq,
        td,
        tq,
    }
}

impl Twins {
    fn post(&mut self, wrs: &[SendWr<'static, AddressVector>], ring: bool) {
        for wr in wrs {
            self.ded.sq().post(*wr).unwrap();
            self.qp.sq().post(*wr).unwrap();
        }
        if ring {
            self.ded.sq().ring();
            self.qp.sq().ring();
        }
    }
    fn recv(&mut self, wr_id: u64) {
        for rq in [self.ded.rq(), self.qp.rq()] {
            rq.post_recv(RecvWr { wr_id, sges: &SGE }).unwrap();
            rq.ring();
        }
    }
    fn push(&mut self, c: &Cqe) {
        self.dd.push(c);
        self.td.push(c);
    }
    /// `poll_one` on the pair against a one-slot `poll` on the twin until both are empty;
    /// the (wr_id, status) pairs polled.
    fn drain_one(&mut self, what: &str) -> Vec<(u64, WcStatus)> {
        let mut seen = Vec::new();
        loop {
            let mut one = Completion::EMPTY;
            let mut slot = [Completion::EMPTY];
            let got1 = self.ded.poll_one(&mut one);
            let got2 = self.cq.poll(&mut slot) == 1;
            assert_eq!(got1, got2, "{what}");
            if !got1 {
                break;
            }
            assert_eq!(format!("{one:?}"), format!("{:?}", slot[0]), "{what}");
            seen.push((one.wr_id, one.status));
        }
        self.same_state(what);
        seen
    }
    /// 16-slot polls on both until empty, compared poll by poll.
    fn drain16(&mut self, what: &str) -> Vec<(u64, WcStatus)> {
        let mut seen = Vec::new();
        loop {
            let mut a = [Completion::EMPTY; 16];
            let mut b = [Completion::EMPTY; 16];
            let n1 = self.ded.poll(&mut a);
            let n2 = self.cq.poll(&mut b);
            assert_eq!(n1, n2, "{what}");
            if n1 == 0 {
                break;
            }
            assert_eq!(
                format!("{:?}", &a[..n1]),
                format!("{:?}", &b[..n2]),
                "{what}"
            );
            seen.extend(a[..n1].iter().map(|c| (c.wr_id, c.status)));
        }
        self.same_state(what);
        seen
    }
    fn same_state(&self, what: &str) {
        let c = self.ded.cq();
        assert_eq!(
            (c.ci(), self.dd.dbrec_ci(), c.bogus_cqes(), c.reserved()),
            (
                self.cq.ci(),
                self.td.dbrec_ci(),
                self.cq.bogus_cqes(),
                self.cq.reserved()
            ),
            "{what}"
        );
    }
}

/// The requester CQEs of every kind, one per poll: each opcode (the dedicated way for SEND
/// and WRITE, the general one for READ and atomics), a covered request, a CQE of a WQE
/// written but not rung (dropped) and then rung, a CQE naming another QP (dropped), a CQE
/// naming a WQE that is not the oldest (dropped), the ring's wrap (4 entries: the owner
/// parity flips every fourth CQE), an error and its flush; 64- and 128-byte CQEs; then a
/// reset and a reconnect.
#[test]
fn poll_one_gives_what_the_general_poll_gives() {
    for size in [64, 128] {
        let mut t = twins(4, size, 0x81);
        assert!(t.ded.is_open());
        let mut ids = Vec::new();
        let mut pos = 0u16;
        for round in 0..6u64 {
            let op = [0x0a, 0x08, 0x09, 0x0a, 0x10, 0x12][round as usize];
            let wr = match op {
                0x08 => SendWr::write(round, &SGE, 0x10, 1),
                0x09 => SendWr::write_imm(round, &SGE, 0x10, 1, 7),
                0x10 => SendWr::read(round, &SGE, 0x10, 1),
                0x12 => SendWr::faa(round, &SGE, 0x10, 1, 1),
                _ => SendWr::send(round, &SGE),
            };
            t.post(&[wr.signaled()], true);
            t.push(&Cqe::req(0x81, pos, op, 5));
            pos += 1;
            ids.extend(t.drain_one("opcodes"));
        }
        // Two unsignaled, one signaled: one CQE covers them.
        t.post(
            &[
                SendWr::send(20, &SGE),
                SendWr::send(21, &SGE),
                SendWr::send(22, &SGE).signaled(),
            ],
            true,
        );
        t.push(&Cqe::req(0x81, pos + 2, 0x0a, 0));
        pos += 3;
        ids.extend(t.drain_one("covered"));
        // Written, not rung: its CQE is dropped; after the ring a CQE takes it.
        t.post(&[SendWr::send(30, &SGE).signaled()], false);
        t.push(&Cqe::req(0x81, pos, 0x0a, 0));
        ids.extend(t.drain_one("not rung"));
        t.post(&[], true);
        // Another QP's number, then a WQE that is not the oldest: both dropped.
        t.push(&Cqe::req(0x82, pos, 0x0a, 0));
        t.push(&Cqe::req(0x81, pos + 1, 0x0a, 0));
        ids.extend(t.drain_one("hostile"));
        t.push(&Cqe::req(0x81, pos, 0x0a, 0));
        pos += 1;
        ids.extend(t.drain_one("rung"));
        // Plain requester CQEs across the ring's wraps.
        for id in 40..47u64 {
            t.post(&[SendWr::send(id, &SGE).signaled()], true);
            t.push(&Cqe::req(0x81, pos, 0x0a, 0));
            pos += 1;
            ids.extend(t.drain_one("wrap"));
        }
        // An error, then the flush of the next request.
        t.post(
            &[
                SendWr::send(50, &SGE).signaled(),
                SendWr::send(51, &SGE).signaled(),
            ],
            true,
        );
        t.push(&Cqe::err(0x0d, 0x81, pos, 0x04, 0));
        t.push(&Cqe::err(0x0d, 0x81, pos + 1, 0x05, 0));
        ids.extend(t.drain_one("error"));
        let wr_ids: Vec<u64> = ids.iter().map(|s| s.0).collect();
        assert_eq!(
            wr_ids,
            [0, 1, 2, 3, 4, 5, 22, 30, 40, 41, 42, 43, 44, 45, 46, 50, 51],
            "size {size}"
        );
        assert_eq!(ids[15].1, WcStatus::LocProtErr);
        assert_eq!(ids[16].1, WcStatus::WrFlushErr);
        assert_eq!(t.ded.cq().bogus_cqes(), 3);
        // Error polled: posts refused, on the pair as on the QP.
        assert!(t.ded.sq().post(SendWr::send(60, &SGE)).is_err());
        assert_eq!(t.ded.state(), QpState::Err);
    }
}

/// Receives one per poll (SEND, SEND WITH IMMEDIATE, WRITE WITH IMMEDIATE with GRH and source
/// QP), one with no receive posted (dropped), mixed with requester CQEs, and the same rounds
/// with 16-slot polls, including bursts that the general poll takes after the first CQE.
#[test]
fn receives_and_bursts_match_the_general_poll() {
    let mut t = twins(8, 64, 0x91);
    let mut seen = Vec::new();
    let mut spos = 0u16;
    let mut rpos = 0u16;
    for round in 0..24u32 {
        let kind = round % 6;
        let cqe = match kind {
            0 => Cqe::resp(2, 0x91, rpos, 10 + round, 0),
            1 => Cqe::resp(MLX5_CQE_RESP_SEND_IMM, 0x91, rpos, 20, 0xabcd_0000 | round),
            2 => Cqe::resp(MLX5_CQE_RESP_WR_IMM, 0x91, rpos, 30, 0x1234_0000 | round)
                .with_src(0x77, true),
            3 => Cqe::resp(MLX5_CQE_RESP_WR_IMM, 0x91, rpos, 8, 1),
            _ => Cqe::req(0x91, spos, 0x0a, 0),
        };
        match kind {
            0..=2 => {
                t.recv(500 + u64::from(round));
                rpos += 1;
            }
            3 => {}
            _ => {
                t.post(&[SendWr::send(u64::from(round), &SGE).signaled()], true);
                spos += 1;
            }
        }
        t.push(&cqe);
        if round < 12 {
            seen.extend(t.drain_one(&format!("round {round}")));
        } else {
            seen.extend(t.drain16(&format!("round {round}")));
        }
    }
    assert_eq!(seen.len(), 20, "{seen:?}");
    assert_eq!(t.ded.cq().bogus_cqes(), 4);
    // Bursts: 6 CQEs at once (sends and receives mixed), polled 16 slots at a time; then
    // three at once one per poll.
    for burst in 0..3u64 {
        for k in 0..6u64 {
            if k % 2 == 0 {
                t.post(
                    &[SendWr::send(1000 + 10 * burst + k, &SGE).signaled()],
                    true,
                );
                t.push(&Cqe::req(0x91, spos, 0x0a, 0));
                spos += 1;
            } else {
                t.recv(2000 + 10 * burst + k);
                t.push(&Cqe::resp(2, 0x91, rpos, 4, 0));
                rpos += 1;
            }
        }
        let got = if burst == 2 {
            t.drain_one("burst, one per poll")
        } else {
            t.drain16("burst")
        };
        assert_eq!(got.len(), 6);
    }
    assert!(t.ded.is_open());
}

/// The pair refuses a CQ another QP also uses, and a QP whose send side completes elsewhere,
/// handing both back with the reason; the parts come back apart, consistent.
#[test]
fn refuses_what_it_cannot_own() {
    let (mut shared_cq, _d) = cq(16, 64);
    let (a, _da) = qp_on(&mut shared_cq, None, 0x21);
    let (b, _db) = qp_on(&mut shared_cq, None, 0x22);
    let e = Mlx5Dedicated::new(a, shared_cq).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("Mlx5Dedicated::new") && text.contains("serves other QPs"),
        "{text}"
    );
    assert_eq!(e.qp.qpn(), 0x21);
    drop(b);

    let (mut send_cq, mut ds) = cq(16, 64);
    let (mut recv_cq, mut dr) = cq(16, 64);
    let (qp, _dq) = qp_on(&mut send_cq, Some(&mut recv_cq), 0x23);
    let e = Mlx5Dedicated::new(qp, recv_cq).unwrap_err();
    assert!(e.to_string().contains("sends into another CQ"), "{e}");
    let mut recv_cq = e.cq;
    // The send CQ with its receives elsewhere is fine.
    let mut ded = Mlx5Dedicated::new(e.qp, send_cq).unwrap();
    // A receive CQE written into the pair's CQ (a lying device) completes nothing there; the
    // receive completes on its own CQ.
    ded.rq()
        .post_recv(RecvWr {
            wr_id: 9,
            sges: &SGE,
        })
        .unwrap();
    ded.rq().ring();
    let lie = Cqe::resp(MLX5_CQE_RESP_WR_IMM, 0x23, 0, 8, 1);
    ds.push(&lie);
    let mut c = Completion::EMPTY;
    assert!(!ded.poll_one(&mut c), "{c:?}");
    assert_eq!(ded.cq().bogus_cqes(), 1);
    dr.push(&lie);
    assert!(recv_cq.poll_one(&mut c));
    assert_eq!((c.wr_id, c.imm), (9, 1));
    let (qp, cq) = ded.into_parts();
    assert_eq!((qp.qpn(), cq.ci()), (0x23, 1));
}

/// A reset with an unpolled CQE leaves it in the ring; the reconnected QP's first WQE has the
/// same `wqe_counter` (0). The stale CQE is discarded, never completes the new request, and
/// the way reopens once it is gone.
#[test]
fn a_reset_s_stale_cqe_never_completes_a_new_request() {
    let mut t = twins(8, 64, 0x31);
    t.post(&[SendWr::send(1, &SGE).signaled()], true);
    t.push(&Cqe::req(0x31, 0, 0x0a, 0));
    for s in [QpState::Reset, QpState::Init, QpState::Rtr, QpState::Rts] {
        t.ded.qp_mut().set_state(s);
        t.qp.set_state(s);
    }
    assert!(!t.ded.is_open(), "handing the QP out closes the way");
    t.post(&[SendWr::send(2, &SGE).signaled()], true);
    let mut one = Completion::EMPTY;
    assert!(!t.ded.poll_one(&mut one), "the stale CQE completes nothing");
    assert!(t.cq.poll(&mut [Completion::EMPTY]) == 0);
    t.same_state("stale discarded");
    t.push(&Cqe::req(0x31, 0, 0x0a, 0));
    assert_eq!(t.drain_one("after the reset"), [(2, WcStatus::Success)]);
    assert!(
        t.ded.is_open(),
        "the way reopens once the stale CQE is gone"
    );
    t.post(&[SendWr::send(3, &SGE).signaled()], true);
    t.push(&Cqe::req(0x31, 1, 0x0a, 0));
    assert_eq!(t.drain_one("open again"), [(3, WcStatus::Success)]);
}

/// A seeded random walk over both twins, held equal after every step: sends (signaled or
/// not, rung or not), receives, the device's CQEs for them, hostile CQEs (another QP, a WQE
/// that is not the oldest, a receive with none posted, an error on a random WQE), resets and
/// reconnects with CQEs still in the ring, and polls of one and of 16 slots.
#[test]
fn a_random_walk_keeps_the_pair_equal_to_the_general_poll() {
    use rdma_direct::wire::MLX5_CQE_RESP_SEND;
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut t = twins(64, 64, 0x51);
    let (mut id, mut rposted, mut rdone, mut polled) = (0u64, 0u16, 0u16, 0usize);
    for step in 0..30_000u32 {
        let what = format!("step {step}");
        // What the device has written and nobody has polled yet: hostile CQEs only while
        // the ring has room for them beside every request the posts reserved.
        let in_ring = t.dd.pi.wrapping_sub(t.ded.cq().ci());
        match next(10) {
            0 | 1 => {
                let k = 1 + next(3);
                for j in 0..k {
                    id += 1;
                    let wr = SendWr::send(id, &SGE);
                    let wr = if j == k - 1 || next(2) == 0 {
                        wr.signaled()
                    } else {
                        wr
                    };
                    let a = t.ded.sq().post(wr).map_err(|r| r.error);
                    let b = t.qp.sq().post(wr).map_err(|r| r.error);
                    assert_eq!(format!("{a:?}"), format!("{b:?}"), "{what}");
                }
                if next(5) != 0 {
                    t.ded.sq().ring();
                    t.qp.sq().ring();
                }
            }
            2 => {
                id += 1;
                let a = t.ded.rq().post_recv(RecvWr {
                    wr_id: id,
                    sges: &SGE,
                });
                let b = t.qp.rq().post_recv(RecvWr {
                    wr_id: id,
                    sges: &SGE,
                });
                assert_eq!(a.is_ok(), b.is_ok(), "{what}");
                if a.is_ok() {
                    rposted = rposted.wrapping_add(1);
                }
                t.ded.rq().ring();
                t.qp.rq().ring();
            }
            3 => {
                let a = t.dq.complete_sends(&mut t.dd);
                let b = t.tq.complete_sends(&mut t.td);
                assert_eq!(a, b, "{what}");
            }
            4 if rdone != rposted => {
                t.push(&Cqe::resp(MLX5_CQE_RESP_SEND, 0x51, rdone, 8, 0));
                rdone = rdone.wrapping_add(1);
            }
            5 if in_ring < 8 => {
                let c = match next(10) {
                    0..=2 => Cqe::req(0x52, next(16) as u16, 0x0a, 0),
                    3..=5 => Cqe::req(0x51, next(1 << 16) as u16, 0x0a, 0),
                    6..=8 => Cqe::resp(MLX5_CQE_RESP_SEND, 0x51, rdone.wrapping_add(7), 8, 0),
                    // An error (the QP goes to ERR until the next reset).
                    _ => Cqe::err(0x0d, 0x51, next(1 << 16) as u16, 0x05, 0),
                };
                t.push(&c);
            }
            6 if next(8) == 0 => {
                for s in [QpState::Reset, QpState::Init, QpState::Rtr, QpState::Rts] {
                    t.ded.qp_mut().set_state(s);
                    t.qp.set_state(s);
                }
                // The device starts the queues again from zero too.
                t.dq.dev_sq_pi = 0;
                t.tq.dev_sq_pi = 0;
                (rposted, rdone) = (0, 0);
            }
            7 => polled += t.drain_one(&what).len(),
            8 => {
                // The pair's CQ polled the general way (what a CqWaiter does).
                let mut a = [Completion::EMPTY; 4];
                let mut b = [Completion::EMPTY; 4];
                let n = t.ded.cq_mut().poll(&mut a);
                assert_eq!(n, t.cq.poll(&mut b), "{what}");
                assert_eq!(format!("{:?}", &a[..n]), format!("{:?}", &b[..n]), "{what}");
                polled += n;
            }
            _ => polled += t.drain16(&what).len(),
        }
        t.same_state(&what);
    }
    polled += t.drain16("the end").len();
    assert!(polled > 4000, "the walk completed requests ({polled})");
    eprintln!(
        "random walk: {polled} completions, {} CQEs dropped",
        t.ded.cq().bogus_cqes()
    );
    assert!(t.ded.cq().bogus_cqes() > 100, "hostile CQEs were dropped");
}

/// `Provider::own_pair` on the sim: a QP and a CQ of its own become the dedicated pair; a CQ
/// another QP uses is refused with EINVAL naming the fix; generic code reaches the pair's QP
/// for the control path and polls the pair as a CQ.
#[test]
fn own_pair_through_the_provider_trait() {
    use rdma_direct::providers::flow::connect_pair;
    use rdma_direct::providers::sim::SimDevice;
    use rdma_direct::providers::{
        Access, ConnectOpts, OwnedPair, Pages, Provider, QpConfig, QpType,
    };

    fn pairs<P: Provider>(p: &mut P, pd: &P::Pd) -> rdma_direct::Result<(P::Pair, P::Pair)> {
        let cfg = QpConfig::new(QpType::Rc);
        let (mut ca, mut cb) = (p.create_cq(256)?, p.create_cq(256)?);
        let qa = p.create_qp(pd, &mut ca, None, None, &cfg)?;
        let qb = p.create_qp(pd, &mut cb, None, None, &cfg)?;
        let (mut a, mut b) = (p.own_pair(qa, ca)?, p.own_pair(qb, cb)?);
        connect_pair(p, a.qp_mut(), b.qp_mut(), &ConnectOpts::default())?;
        Ok((a, b))
    }
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let (mut a, mut b) = pairs(&mut dev, &pd).unwrap();
    let inbox = dev
        .alloc_buf(&pd, 64, Access::LOCAL_WRITE, Pages::Normal)
        .unwrap();
    b.rq()
        .post_recv(RecvWr {
            wr_id: 5,
            sges: &[inbox.sge(0, 64).unwrap()],
        })
        .unwrap();
    b.rq().ring();
    a.sq()
        .post(SendWr::send(4, &[]).inline(b"order").signaled())
        .unwrap();
    a.sq().ring();
    let (mut sent, mut got) = (Completion::EMPTY, Completion::EMPTY);
    let (mut s, mut g) = (false, false);
    for _ in 0..10_000 {
        dev.progress();
        s |= a.poll_one(&mut sent);
        g |= b.poll_one(&mut got);
        if s && g {
            break;
        }
    }
    assert!(s && g, "both completions arrived");
    assert!(sent.is_ok() && got.is_ok(), "{sent:?} {got:?}");
    assert_eq!((sent.wr_id, got.wr_id, got.byte_len), (4, 5, 5));
    assert_eq!(inbox.get(0, 5).unwrap(), b"order");

    // A CQ two QPs use: refused, naming the fix.
    let cfg = QpConfig::new(QpType::Rc);
    let mut cq = dev.create_cq(512).unwrap();
    let q1 = dev.create_qp(&pd, &mut cq, None, None, &cfg).unwrap();
    let _q2 = dev.create_qp(&pd, &mut cq, None, None, &cfg).unwrap();
    let e = dev.own_pair(q1, cq).unwrap_err();
    assert_eq!(e.errno(), Some(libc::EINVAL), "{e}");
    assert!(e.to_string().contains("give the QP a CQ of its own"), "{e}");
}
