//! The flush marker and refused doorbells through the library: the marker on mlx5 and on
//! verbs, a refused `ring` returned by the call that rings or by the next call on the queue or
//! its CQ.

use rdma_direct::providers::mlx5::Mlx5Device;
use rdma_direct::providers::{
    Completion, CompletionQueue, ConnectOpts, Provider, QpConfig, QpType, QueuePair, RecvQueue,
    RecvWr, SendQueue, SendWr,
};

use super::common;

type Verbs = rdma_direct::providers::verbs::VerbsDevice;

/// The stand-in's non-mlx5 device (`rxe_standin0`, the verbs provider): two RC QPs on one CQ,
/// connected to each other (the PD and the CQ returned with them, to outlive them).
fn verbs_pair() -> (
    Verbs,
    <Verbs as Provider>::Pd,
    <Verbs as Provider>::Cq,
    <Verbs as Provider>::Qp,
    <Verbs as Provider>::Qp,
) {
    let mut p = Verbs::open("rxe_standin0").unwrap();
    let pd = p.alloc_pd().unwrap();
    let mut cq = p.create_cq(512).unwrap();
    let cfg = QpConfig::new(QpType::Rc);
    let mut a = p.create_qp(&pd, &mut cq, None, None, &cfg).unwrap();
    let mut b = p.create_qp(&pd, &mut cq, None, None, &cfg).unwrap();
    rdma_direct::providers::flow::connect_pair(&mut p, &mut a, &mut b, &ConnectOpts::default())
        .unwrap();
    (p, pd, cq, a, b)
}

/// The drain's flush marker and a drain of a QP already in ERR (tests/common/marker.rs) on
/// the mlx5 provider through the stand-in (the sim behind it, its device thread running).
#[test]
fn the_flush_marker_on_mlx5_through_the_standin() {
    standin_or_skip!();
    let mut p = Mlx5Device::open("mlx5_0").unwrap();
    common::marker::marker_ends_what_ran_before_it(&mut p, &ConnectOpts::default(), true);
    common::marker::drain_of_a_qp_already_in_err(&mut p, &ConnectOpts::default(), true);
}

/// The flush marker on the verbs provider: refused in RTS by the provider; in ERR handed to
/// `ibv_post_send`, whose refusal (the stand-in's non-mlx5 device: EOPNOTSUPP) is the
/// marker's error, nothing left staged.
#[test]
fn the_flush_marker_on_verbs_returns_the_device_refusal() {
    use rdma_direct::providers::{PostError, QpState, RingVerb};
    let _dir = standin_or_skip!();
    let (mut p, _pd, _cq, mut a, _b) = verbs_pair();
    assert_eq!(
        a.sq().post_flush_marker(1),
        Err(PostError::BadState {
            state: QpState::Rts
        })
    );
    p.to_error(&mut a).unwrap();
    assert_eq!(
        a.sq().post_flush_marker(1),
        Err(PostError::Device {
            verb: RingVerb::PostSend,
            errno: libc::EOPNOTSUPP,
            count: 1
        })
    );
    assert_eq!((a.sq().staged(), a.sq().take_ring_error()), (0, None));
}

/// The stand-in's non-mlx5 device refuses every `ibv_post_send` / `ibv_post_recv`
/// (EOPNOTSUPP): the call that rings returns the refusal with the verb, the errno and which
/// requests were taken back; nothing waits in `take_ring_error` afterwards.
#[test]
fn a_refused_doorbell_on_verbs_is_returned_by_the_call_that_rings() {
    use rdma_direct::providers::{PostError, RingError, RingVerb};
    let _dir = standin_or_skip!();
    let (_p, _pd, _cq, mut a, _b) = verbs_pair();
    let refused = |first_wr_id, count| RingError {
        verb: RingVerb::PostSend,
        errno: libc::EOPNOTSUPP,
        first_wr_id,
        count,
    };
    let free = a.sq().free_slots();
    // post_and_ring hands the request back with the device's refusal.
    let w = SendWr::send(7, &[]).inline(b"x").signaled();
    let r = a.sq().post_and_ring(w).unwrap_err();
    assert_eq!(r.wr.wr_id, 7);
    assert_eq!(r.error, refused(7, 1).into());
    assert!(
        r.to_string()
            .contains("ibv_post_send: EOPNOTSUPP: 1 request refused"),
        "{r}"
    );
    // try_ring after posts: every staged request came back, and the queue has its room.
    a.sq().post(SendWr::send(8, &[]).inline(b"x")).unwrap();
    a.sq().post(SendWr::send(9, &[]).inline(b"x")).unwrap();
    assert_eq!(a.sq().try_ring(), Err(refused(8, 2)));
    assert_eq!(a.sq().take_ring_error(), None);
    assert_eq!(a.sq().free_slots(), free);
    // post_list: the whole list back, from index 0.
    let wrs: Vec<_> = (10..13)
        .map(|i| SendWr::send(i, &[]).inline(b"x"))
        .collect();
    let e = a.sq().post_list(&wrs).unwrap_err();
    assert_eq!((e.index, e.rest.len()), (0, 3));
    assert_eq!(e.error, refused(10, 3).into());
    // Receives: the same through ibv_post_recv.
    let recvs = [RecvWr::new(20, &[])];
    let e = a.rq().post_recv_list(&recvs).unwrap_err();
    assert!(
        matches!(
            e.error,
            PostError::Device {
                verb: RingVerb::PostRecv,
                errno: libc::EOPNOTSUPP,
                count: 1
            }
        ),
        "{e}"
    );
    assert_eq!(a.rq().take_ring_error(), None);
    // The replenisher keeps the receives the doorbell took back, to post again.
    let mut r = rdma_direct::providers::flow::RecvReplenisher::new(3);
    let e = r.fill(a.rq()).unwrap_err();
    assert!(e.to_string().contains("ibv_post_recv: EOPNOTSUPP"), "{e}");
    assert_eq!(r.posted(), 0, "none of the three is posted, none is lost");
}

/// A bare `ring` the device refuses (the stand-in's EOPNOTSUPP) is not parked out of band: the
/// next call on that queue returns it (`post`, `post_list`, `try_ring`, `post_recv`), or, when
/// the application polls first, its CQ's empty poll returns it as a completion flagged
/// `REFUSED` naming the verb, the errno and the requests taken back; whichever comes first
/// reports it, once.
#[test]
fn a_refused_bare_ring_surfaces_at_the_next_call_on_the_queue_or_its_cq() {
    use rdma_direct::providers::{PostError, RingError, RingVerb, WcFlags, WcOpcode, WcStatus};
    let _dir = standin_or_skip!();
    let (_p, _pd, mut cq, mut a, _b) = verbs_pair();
    let refused = |verb, first_wr_id, count| RingError {
        verb,
        errno: libc::EOPNOTSUPP,
        first_wr_id,
        count,
    };
    let send = |id| SendWr::send(id, &[]).inline(b"x");
    let free = a.sq().free_slots();
    let mut wc = [Completion::EMPTY; 4];
    // The next post: handed back, unposted, with the refusal of the ring before it.
    a.sq().post(send(30)).unwrap();
    a.sq().ring();
    let r = a.sq().post(send(31)).unwrap_err();
    assert_eq!(
        (r.wr.wr_id, r.error),
        (31, refused(RingVerb::PostSend, 30, 1).into())
    );
    assert!(r.to_string().contains("ibv_post_send: EOPNOTSUPP"), "{r}");
    assert_eq!(a.sq().take_ring_error(), None, "reported once");
    assert_eq!(cq.poll(&mut wc), 0, "reported once: not by the CQ too");
    assert_eq!(a.sq().free_slots(), free, "the queue has its room");
    // try_ring with nothing staged.
    a.sq().post(send(40)).unwrap();
    a.sq().ring();
    assert_eq!(a.sq().try_ring(), Err(refused(RingVerb::PostSend, 40, 1)));
    // post_list: the refusal before the list, the list handed back whole.
    a.sq().post(send(50)).unwrap();
    a.sq().post(send(51)).unwrap();
    a.sq().ring();
    let wrs = [send(60)];
    let e = a.sq().post_list(&wrs).unwrap_err();
    assert_eq!((e.index, e.rest.len()), (0, 1));
    assert_eq!(e.error, refused(RingVerb::PostSend, 50, 2).into());
    // The application polls before it posts again: its CQ says so.
    a.sq().post(send(70)).unwrap();
    a.sq().ring();
    assert_eq!(cq.poll(&mut wc), 1);
    let c = wc[0];
    assert_eq!(
        (
            c.wr_id,
            c.byte_len,
            c.qp_num,
            c.status,
            c.opcode,
            c.vendor_err
        ),
        (
            70,
            1,
            a.qpn(),
            WcStatus::GeneralErr,
            WcOpcode::Send,
            libc::EOPNOTSUPP as u32
        )
    );
    assert!(c.flags.contains(WcFlags::REFUSED) && c.covered == 0);
    assert_eq!(c.refusal(), Some(refused(RingVerb::PostSend, 70, 1)));
    assert_eq!(cq.poll(&mut wc), 0, "reported once");
    assert_eq!(a.sq().take_ring_error(), None, "reported once");
    assert_eq!(Completion::EMPTY.refusal(), None);
    // Receives: the same through ibv_post_recv, by the CQ and by the next post_recv.
    a.rq().post_recv(RecvWr::new(90, &[])).unwrap();
    a.rq().ring();
    assert_eq!(cq.poll(&mut wc), 1);
    assert_eq!(wc[0].refusal(), Some(refused(RingVerb::PostRecv, 90, 1)));
    assert_eq!(wc[0].opcode, WcOpcode::Recv);
    a.rq().post_recv(RecvWr::new(95, &[])).unwrap();
    a.rq().ring();
    let r = a.rq().post_recv(RecvWr::new(96, &[])).unwrap_err();
    assert_eq!(r.wr.wr_id, 96);
    assert!(
        matches!(
            r.error,
            PostError::Device {
                verb: RingVerb::PostRecv,
                errno: libc::EOPNOTSUPP,
                count: 1
            }
        ),
        "{r}"
    );
    assert_eq!(cq.poll(&mut wc), 0);
}
