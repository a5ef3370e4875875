//! The embedding kit on the software device: errors that compose with `?`, the owned
//! registered buffer and its remote views, the request constructors and batches.

mod common;

use common::SimSide;
use rdma_direct::prelude::*;
use rdma_direct::providers::sim::{SimPd, SimQp};

fn rc_pair(dev: &mut SimDevice, pd: &SimPd, cq_size: u32) -> (SimSide, SimSide) {
    // Each CQ absorbs its QP's queues, half each.
    let cfg = common::qp_cfg(QpType::Rc, cq_size / 2, cq_size / 2);
    common::sim_pair(dev, pd, cq_size, &cfg, &ConnectOpts::default())
}

#[test]
fn errors_display_and_compose_with_question_mark() {
    let r = Rejected {
        wr: 5u64,
        error: PostError::QueueFull { capacity: 4 },
    };
    assert_eq!(
        r.to_string(),
        "post refused: queue full: 4 requests outstanding; poll completions first \
         (unsignaled requests are retired only by a later signaled one: signal at least one \
         in every 4)"
    );
    let e: Box<dyn std::error::Error> = r.into();
    assert_eq!(
        e.to_string(),
        "post refused: queue full: 4 requests outstanding; poll completions first \
         (unsignaled requests are retired only by a later signaled one: signal at least one \
         in every 4)"
    );
    fn post_in_fn() -> Result<()> {
        Err(Rejected {
            wr: (),
            error: PostError::ZeroLengthRead,
        })?;
        Ok(())
    }
    let err = post_in_fn().unwrap_err();
    assert_eq!(err.to_string(), "post refused: zero-length RDMA READ");
    let ring = RingError {
        verb: RingVerb::PostSend,
        errno: libc::EINVAL,
        first_wr_id: 9,
        count: 2,
    };
    let err: Error = ring.into();
    assert_eq!(
        err.to_string(),
        "ibv_post_send: EINVAL: 2 requests from wr_id 9 refused and taken back (not posted, no \
         completion); the device rejected a request's shape (SGE count, inline size, opcode or \
         QP state): check it against the QP's caps"
    );
}

#[test]
fn post_list_names_the_index_and_hands_back_the_rest() {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let ((mut a, _ca), _b) = rc_pair(&mut dev, &pd, 256);
    let cap = a.sq().free_slots() as usize;
    let mut wrs = vec![SendWr::send(0, &[]).inline(b"x"); cap + 3];
    for (i, w) in wrs.iter_mut().enumerate() {
        w.wr_id = i as u64;
    }
    let e = a.sq().post_list(&wrs).unwrap_err();
    assert_eq!(e.index, cap);
    assert_eq!(e.rest.len(), 3);
    assert_eq!(e.rest[0].wr_id, cap as u64);
    assert!(matches!(e.error, PostError::QueueFull { .. }));
    assert!(e.to_string().starts_with(&format!(
        "post list stopped at index {cap} (3 not posted): queue full"
    )));
    let err: Error = e.into();
    assert!(matches!(err, Error::Post { index: Some(i), .. } if i == cap));
    // mlx5 and the sim never refuse a doorbell.
    assert_eq!(a.sq().take_ring_error(), None);
}

#[test]
fn registered_buffer_is_safe_and_bounds_checked() {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let mut buf = dev
        .alloc_buf(&pd, 10_000, Access::ALL, Pages::Normal)
        .unwrap();
    assert_eq!(buf.len(), 10_000);
    assert_eq!(buf.mr().addr() % 4096, 0, "page-aligned");
    assert!(buf.as_slice().iter().all(|&b| b == 0), "zeroed");
    buf.as_mut_slice()[9_999] = 7;
    assert_eq!(buf.get(9_999, 1).unwrap(), &[7]);
    assert!(buf.get(9_999, 2).is_err());
    assert!(buf.get(usize::MAX, 2).is_err());
    assert!(buf.sge(10_000, 1).is_err());
    let sge = buf.sge(100, 64).unwrap();
    assert_eq!(
        (sge.addr, sge.length, sge.lkey),
        (buf.addr() + 100, 64, buf.lkey())
    );
    let w = buf.remote(4096, 4096).unwrap();
    assert_eq!(
        (w.addr, w.len, w.rkey),
        (buf.addr() + 4096, 4096, buf.rkey())
    );
    assert!(buf.remote(8192, 4096).is_err());
    assert!(buf.remote(0, 0).is_err());
    let s = w.slice(64, 64).unwrap();
    assert_eq!((s.addr, s.len), (w.addr + 64, 64));
    assert_eq!(w.slice(4095, 2), None);
    assert_eq!(w.slice(0, 0), None);
    assert_eq!(w.slice(u64::MAX, 2), None);
    assert_eq!(w.addr_at(4088, 8), Some(w.addr + 4088));
    assert_eq!(w.addr_at(4089, 8), None);
    assert!(dev.alloc_buf(&pd, 0, Access::ALL, Pages::Normal).is_err());
    // Huge pages either work or fall back with a note saying how to get them.
    let h = dev
        .alloc_buf(&pd, 4096, Access::ALL, Pages::HugeOrNormal)
        .unwrap();
    assert!(h.huge_pages() || h.note().unwrap().contains("vm.nr_hugepages"));
}

#[test]
fn write_imm_into_a_registered_buffer_with_a_batch() {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let mut src = dev
        .alloc_buf(&pd, 4096, Access::LOCAL_WRITE, Pages::Normal)
        .unwrap();
    let dst = dev
        .alloc_buf(&pd, 4096, Access::ALL, Pages::Normal)
        .unwrap();
    let ((mut a, mut ca), (mut b, mut cb)) = rc_pair(&mut dev, &pd, 64);
    for (i, x) in src.as_mut_slice()[..64 * 4].iter_mut().enumerate() {
        *x = i as u8;
    }
    let window = dst.remote(0, 4096).unwrap();
    let sges: Vec<[Sge; 1]> = (0..4).map(|i| [src.sge(i * 64, 64).unwrap()]).collect();
    let mut batch = SendBatch::<_, 4>::new();
    for (i, s) in sges.iter().enumerate() {
        let at = window.addr_at(i as u64 * 64, 64).unwrap();
        let wr = SendWr::write_imm(i as u64, s, at, window.rkey, 100 + i as u32);
        batch.push(wr.signaled_if(i == 3)).unwrap();
    }
    assert!(batch.is_full());
    assert!(batch.push(SendWr::send(9, &[])).is_err());
    for i in 0..4 {
        b.rq().post_recv(RecvWr::new(i, &[])).unwrap();
    }
    b.rq().ring();
    a.sq().post_list(batch.as_slice()).unwrap();
    let mut got = Vec::new();
    let mut wc = [Completion::EMPTY; 8];
    for _ in 0..1000 {
        dev.progress();
        let n = cb.poll(&mut wc);
        got.extend_from_slice(&wc[..n]);
        if got.len() == 4 {
            break;
        }
    }
    assert_eq!(got.len(), 4);
    let imms: Vec<u32> = got.iter().map(|c| c.imm).collect();
    assert_eq!(imms, vec![100, 101, 102, 103]);
    assert_eq!(dst.get(0, 256).unwrap(), src.get(0, 256).unwrap());
    let mut n = 0;
    for _ in 0..1000 {
        dev.progress();
        n += ca.poll(&mut wc);
        if n == 1 {
            break;
        }
    }
    assert_eq!(n, 1, "one signaled completion covers the batch");
}

/// A fake server that accepts, then sends one byte of a valid endpoint message every
/// `gap`, `bytes` bytes at most; returns how many it managed to send.
fn dripping_peer(
    listener: std::net::TcpListener,
    gap: std::time::Duration,
    bytes: usize,
) -> std::thread::JoinHandle<usize> {
    use std::io::{Read, Write};
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut sink = [0u8; 256];
        let _ = s.set_read_timeout(Some(std::time::Duration::from_millis(50)));
        let _ = s.read(&mut sink);
        let msg = endpoint(1).encode().unwrap();
        let mut sent = 0;
        for b in msg.iter().take(bytes) {
            std::thread::sleep(gap);
            if s.write_all(&[*b]).is_err() {
                break;
            }
            sent += 1;
        }
        // Hold the connection open until the other side gives up and closes it.
        let _ = s.set_read_timeout(None);
        while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
        sent
    })
}

fn endpoint(qpn: u32) -> QpEndpoint {
    QpEndpoint {
        lid: 0,
        gid: [0; 16],
        gid_index: 0,
        qpn,
        psn: 1,
        mtu: Mtu::Mtu1024,
        mr: None,
    }
}

fn timed_out(r: Result<(QpEndpoint, std::net::TcpStream)>) -> String {
    match r {
        Err(Error::Io { kind, detail, .. }) => {
            assert_eq!(kind, std::io::ErrorKind::TimedOut, "{detail}");
            detail
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
}

#[test]
fn a_dripping_peer_cannot_stretch_the_deadline() {
    use rdma_direct::endpoint::exchange_client;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // 40 bytes at 20 ms each would finish after 0.8 s; the deadline is 0.2 s. With a
    // timeout per read() the exchange succeeded (each byte arrived well within 0.2 s).
    let total = endpoint(1).encode().unwrap().len();
    let peer = dripping_peer(listener, std::time::Duration::from_millis(20), total);
    let r = exchange_client(addr, &endpoint(2), std::time::Duration::from_millis(200));
    let d = timed_out(r);
    assert_eq!(d, "timed out after 0.2 s waiting for the peer's endpoint");
    let sent = peer.join().unwrap();
    assert!(
        sent < total,
        "the exchange gave up before the message was complete"
    );
}

#[test]
fn a_silent_peer_is_a_timeout_not_eagain() {
    use rdma_direct::endpoint::exchange_client;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = dripping_peer(listener, std::time::Duration::from_millis(1), 0);
    let r = exchange_client(addr, &endpoint(2), std::time::Duration::from_millis(100));
    let d = timed_out(r);
    assert_eq!(d, "timed out after 0.1 s waiting for the peer's endpoint");
    assert_eq!(peer.join().unwrap(), 0);
}

#[test]
fn receive_sges_count_like_send_sges_empty_ones_included() {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let (_a, (mut b, _cb)) = rc_pair(&mut dev, &pd, 64);
    let max = b.caps().max_recv_sge as usize;
    let empties = vec![Sge::default(); max + 1];
    // Before: only non-empty SGEs were counted, so max + 1 empty SGEs were accepted.
    let r = b.qp_rq_post(&empties);
    assert!(
        matches!(r, Err(PostError::TooManySges { n, max: m }) if n as usize == max + 1 && m as usize == max),
        "{r:?}"
    );
    assert_eq!(b.qp_rq_post(&empties[..max]), Ok(()));
}

trait PostRecvSges {
    fn qp_rq_post(&mut self, sges: &[Sge]) -> std::result::Result<(), PostError>;
}

impl PostRecvSges for SimQp {
    fn qp_rq_post(&mut self, sges: &[Sge]) -> std::result::Result<(), PostError> {
        self.rq()
            .post_recv(RecvWr::new(1, sges))
            .map_err(|r| r.error)
    }
}

#[test]
fn poll_helpers_drain_and_name_a_stall() {
    use std::time::Duration;
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let buf = dev
        .alloc_buf(&pd, 4096, Access::ALL, Pages::Normal)
        .unwrap();
    let ((mut a, mut ca), (_b, mut cb)) = rc_pair(&mut dev, &pd, 64);
    let w = buf.remote(0, 4096).unwrap();
    let sge = [buf.sge(0, 8).unwrap()];
    for i in 0..3 {
        a.sq()
            .post(SendWr::write(i, &sge, w.addr + 64, w.rkey).signaled())
            .unwrap();
    }
    a.sq().ring();
    let mut ids = Vec::new();
    drain(&mut dev, &mut ca, 3, Duration::from_secs(5), |c| {
        assert!(c.is_ok());
        ids.push(c.wr_id)
    })
    .unwrap();
    assert_eq!(ids, vec![0, 1, 2]);
    // Nothing will ever arrive on b's CQ: a stall is an error naming what is missing.
    let mut wc = [Completion::EMPTY; 4];
    let stall = Duration::from_millis(20);
    let e = poll_wait(&mut dev, &mut cb, &mut wc, stall).unwrap_err();
    assert_eq!(
        e,
        Error::Stalled {
            context: "poll",
            waited: stall,
            owed: "1 completion".into()
        }
    );
    let e = drain(&mut dev, &mut cb, 2, stall, |_| {}).unwrap_err();
    assert_eq!(
        e,
        Error::Stalled {
            context: "drain",
            waited: stall,
            owed: "2 requests".into()
        }
    );
    assert!(
        e.to_string()
            .starts_with("drain: no completion for 0.02 s while owed 2 requests (a receive"),
        "{e}"
    );
}

#[test]
fn cpu_lists_and_pinning() {
    use rdma_direct::providers::helpers::parse_cpulist;
    assert_eq!(
        parse_cpulist("0-3,8,10-11\n"),
        Some(vec![0, 1, 2, 3, 8, 10, 11])
    );
    assert_eq!(parse_cpulist("3-1"), None);
    assert_eq!(parse_cpulist("x"), None);
    let dev = SimDevice::new();
    let cpus = local_cpus(&dev).unwrap();
    assert!(!cpus.is_empty(), "the sim is local to every online CPU");
    assert!(pin_current_thread(100_000).is_err());
    // Pin this test thread (it ends with the test) to a CPU the sim calls local.
    // (Some online CPUs may lie outside this process's cpuset: one must accept.)
    assert!(cpus.iter().any(|&c| pin_current_thread(c).is_ok()));
}
