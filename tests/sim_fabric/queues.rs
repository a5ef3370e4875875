//! Other queues across processes: SENDs into another process's SRQ, and UD datagrams (one
//! with a wrong Q_Key is dropped).

use super::*;

/// Sizes of the SENDs into the SRQ peer: one packet, several, a receive's worth.
const SRQ_SENDS: [usize; 3] = [8, 5000, 8192];

/// The SRQ peer: its QP takes its receives from an SRQ (three of 8 KiB).
pub(super) fn peer_srq(addr: &str) {
    let mut dev = SimDevice::new();
    dev.start_device_thread().unwrap();
    dev.join_fabric(None).unwrap();
    let pd = dev.alloc_pd().unwrap();
    let mut srq = dev.create_srq(&pd, 8, 1).unwrap();
    let mut cfg = QpConfig::new(QpType::Rc);
    (cfg.caps.max_send_wr, cfg.caps.max_recv_wr) = (16, 16);
    let mut scq = dev.create_cq(64).unwrap();
    let mut rcq = dev.create_cq(64).unwrap();
    let mut qp = dev
        .create_qp(&pd, &mut scq, Some(&mut rcq), Some(&mut srq), &cfg)
        .unwrap();
    let buf = dev
        .alloc_buf(&pd, 3 * 8192, Access::ALL, Pages::Normal)
        .unwrap();
    let mut conn = connect_qp_client(&mut dev, &mut qp, addr, &big_opts(), None, STALL).unwrap();
    for i in 0..3 {
        let into = [buf.sge(i * 8192, 8192).unwrap()];
        srq.post_recv(RecvWr::new(100 + i as u64, &into)).unwrap();
    }
    srq.ring();
    conn.sync(STALL).unwrap();
    for (i, &len) in SRQ_SENDS.iter().enumerate() {
        let c = one(&mut dev, &mut rcq);
        assert_eq!(
            (c.status, c.wr_id, c.byte_len, c.opcode),
            (
                WcStatus::Success,
                100 + i as u64,
                len as u32,
                WcOpcode::Recv
            )
        );
        assert!(buf.get(i * 8192, len).unwrap() == pattern(10 + i as u8, len));
    }
    conn.sync(STALL).unwrap();
    println!("peer ok");
}

#[test]
fn sends_into_an_srq_of_another_process() {
    let name = fabric_name("srq");
    let _rm = Removed(name.clone());
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let child = spawn_peer("srq", l.local_addr().unwrap(), &name);
    let mut dev = SimDevice::new();
    dev.join_fabric(Some(&name)).unwrap();
    let (pd, mut qp, mut scq, _rcq) = rc_qp(&mut dev);
    let mut mine = dev
        .alloc_buf(&pd, 3 * 8192, Access::LOCAL_WRITE, Pages::Normal)
        .unwrap();
    let mut conn = connect_qp_server(&mut dev, &mut qp, &l, &big_opts(), None, STALL).unwrap();
    conn.sync(STALL).unwrap();
    for (i, &len) in SRQ_SENDS.iter().enumerate() {
        mine.get_mut(i * 8192, len)
            .unwrap()
            .copy_from_slice(&pattern(10 + i as u8, len));
        let sge = [mine.sge(i * 8192, len).unwrap()];
        qp.sq()
            .post(SendWr::send(i as u64, &sge).signaled())
            .unwrap();
    }
    qp.sq().ring();
    for i in 0..3 {
        let c = one(&mut dev, &mut scq);
        assert_eq!((c.wr_id, c.status), (i, WcStatus::Success), "{c:?}");
    }
    conn.sync(STALL).unwrap();
    peer_ok(child);
}

fn ud_qp(dev: &mut SimDevice) -> (SimPd, SimQp, SimCq) {
    let pd = dev.alloc_pd().unwrap();
    let mut cfg = QpConfig::new(QpType::Ud);
    (cfg.caps.max_send_wr, cfg.caps.max_recv_wr) = (16, 16);
    let mut cq = dev.create_cq(64).unwrap();
    let qp = dev.create_qp(&pd, &mut cq, None, None, &cfg).unwrap();
    (pd, qp, cq)
}

/// The UD peer: two receives; the datagram with the wrong Q_Key never reaches them.
pub(super) fn peer_ud(addr: &str) {
    let mut dev = SimDevice::new();
    dev.start_device_thread().unwrap();
    dev.join_fabric(None).unwrap();
    let (pd, mut qp, mut cq) = ud_qp(&mut dev);
    let buf = dev
        .alloc_buf(&pd, 4096, Access::LOCAL_WRITE, Pages::Normal)
        .unwrap();
    let conn = connect_qp_client(&mut dev, &mut qp, addr, &opts(), None, STALL).unwrap();
    let mut conn = conn;
    for i in 0..2 {
        let into = [buf.sge(i * 1024, 40 + 256).unwrap()];
        qp.rq()
            .post_recv(RecvWr::new(20 + i as u64, &into))
            .unwrap();
    }
    qp.rq().ring();
    conn.sync(STALL).unwrap();
    let c = one(&mut dev, &mut cq);
    assert_eq!(
        (c.status, c.wr_id, c.byte_len, c.src_qp),
        (WcStatus::Success, 20, 40 + 32, conn.remote.qpn)
    );
    assert!(c.flags.contains(WcFlags::GRH));
    // The GRH: the sender's GID as source, this device's as destination.
    let grh = buf.get(0, 40).unwrap();
    assert_eq!(&grh[..8], &[0x60, 0, 0, 0, 0, 56, 0x1b, 64]);
    assert_eq!(&grh[8..24], &conn.remote.gid);
    assert_eq!(&grh[24..40], &dev.gid());
    assert_eq!(buf.get(40, 32).unwrap(), &[0xd6; 32]);
    conn.sync(STALL).unwrap();
    // Only one datagram arrived (the one with the wrong Q_Key was dropped).
    let mut wc = [Completion::EMPTY; 2];
    assert_eq!(cq.poll(&mut wc), 0);
    println!("peer ok");
}

#[test]
fn a_datagram_crosses_to_another_process_and_a_wrong_qkey_does_not() {
    let name = fabric_name("ud");
    let _rm = Removed(name.clone());
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let child = spawn_peer("ud", l.local_addr().unwrap(), &name);
    let mut dev = SimDevice::new();
    dev.join_fabric(Some(&name)).unwrap();
    let (pd, mut qp, mut cq) = ud_qp(&mut dev);
    let mut mine = dev
        .alloc_buf(&pd, 4096, Access::LOCAL_WRITE, Pages::Normal)
        .unwrap();
    let mut conn = connect_qp_server(&mut dev, &mut qp, &l, &opts(), None, STALL).unwrap();
    let ah = dev.create_ah(&pd, &conn.remote, &opts()).unwrap();
    conn.sync(STALL).unwrap();
    mine.get_mut(0, 32).unwrap().fill(0xd6);
    let sge = [mine.sge(0, 32).unwrap()];
    for (id, qkey) in [(1, opts().qkey ^ 1), (2, opts().qkey)] {
        let dest = UdDest {
            ah: &ah,
            remote_qpn: conn.remote.qpn,
            remote_qkey: qkey,
        };
        qp.sq()
            .post(SendWr::send(id, &sge).to(dest).signaled())
            .unwrap();
        qp.sq().ring();
        let c = one(&mut dev, &mut cq);
        assert_eq!((c.wr_id, c.status), (id, WcStatus::Success));
    }
    conn.sync(STALL).unwrap();
    peer_ok(child);
}
