//! Messages of many packets (path MTU 1024) and many in flight across two processes, on a
//! clean and on a lossy link, and the RNR timer a NAK carries, which the requester waits.

use super::*;

/// Bytes of the large-message peer's buffer: WRITE target, receives, READ source.
const BIG: usize = 1 << 20;
const WRITE_LEN: usize = 200_000;
const SEND_LEN: usize = 100_000;
const IMM_LEN: usize = 20_000;
const READ_LEN: usize = 300_000;

/// The large-message peer: a 1 MiB window (WRITE target at 0, READ source at 512 KiB), a
/// receive of a SEND at 256 KiB and one for a WRITE WITH IMM.
pub(super) fn peer_big(addr: &str) {
    let mut dev = SimDevice::new();
    dev.start_device_thread().unwrap();
    dev.join_fabric(None).unwrap();
    let (pd, mut qp, _scq, mut rcq) = rc_qp(&mut dev);
    let mut buf = dev.alloc_buf(&pd, BIG, Access::ALL, Pages::Normal).unwrap();
    buf.get_mut(BIG / 2, READ_LEN)
        .unwrap()
        .copy_from_slice(&pattern(5, READ_LEN));
    let window = buf.remote(0, BIG).unwrap();
    let mut conn =
        connect_qp_client(&mut dev, &mut qp, addr, &big_opts(), Some(window), STALL).unwrap();
    let into = [buf.sge(BIG / 4, SEND_LEN).unwrap()];
    qp.rq().post_recv(RecvWr::new(1, &into)).unwrap();
    qp.rq().post_recv(RecvWr::new(2, &[])).unwrap();
    qp.rq().ring();
    conn.sync(STALL).unwrap();
    let c = one(&mut dev, &mut rcq);
    assert_eq!(
        (c.status, c.wr_id, c.byte_len, c.opcode),
        (WcStatus::Success, 1, SEND_LEN as u32, WcOpcode::Recv)
    );
    assert!(buf.get(BIG / 4, SEND_LEN).unwrap() == pattern(2, SEND_LEN));
    let c = one(&mut dev, &mut rcq);
    assert_eq!(
        (c.status, c.wr_id, c.byte_len, c.imm, c.opcode),
        (
            WcStatus::Success,
            2,
            IMM_LEN as u32,
            0xbeef,
            WcOpcode::RecvRdmaWithImm
        )
    );
    conn.sync(STALL).unwrap();
    assert!(buf.get(0, WRITE_LEN).unwrap() == pattern(1, WRITE_LEN));
    assert!(buf.get(WRITE_LEN, IMM_LEN).unwrap() == pattern(3, IMM_LEN));
    for i in 0..8 {
        assert_eq!(
            buf.get(BIG / 4 + SEND_LEN + 8 * i, 8).unwrap(),
            [i as u8 + 1; 8]
        );
    }
    println!("peer ok");
}

#[test]
fn messages_of_many_packets_and_many_in_flight_cross_two_processes() {
    big_messages("big", None);
}

/// The same over a link that loses 3% of the packets this side sends (requests): go-back-N
/// and the ACK timeout bring every byte over.
#[test]
fn a_lossy_link_loses_no_byte() {
    let faults = FaultConfig {
        seed: 7,
        packet_drop_ppm: 30_000,
        ..FaultConfig::default()
    };
    let dev = big_messages("lossy", Some(faults));
    assert!(
        dev.fault_stats().packets_dropped > 0,
        "{:?}",
        dev.fault_stats()
    );
}

fn big_messages(test: &str, faults: Option<FaultConfig>) -> SimDevice {
    let name = fabric_name(test);
    let _rm = Removed(name.clone());
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let child = spawn_peer("big", l.local_addr().unwrap(), &name);
    let mut dev = SimDevice::new();
    dev.set_faults(faults);
    dev.join_fabric(Some(&name)).unwrap();
    let (pd, mut qp, mut scq, _rcq) = rc_qp(&mut dev);
    let mut mine = dev
        .alloc_buf(&pd, BIG, Access::LOCAL_WRITE, Pages::Normal)
        .unwrap();
    let mut conn = connect_qp_server(&mut dev, &mut qp, &l, &big_opts(), None, STALL).unwrap();
    let window = conn.remote_mr().expect("the peer shares its window");
    conn.sync(STALL).unwrap();
    mine.get_mut(0, WRITE_LEN)
        .unwrap()
        .copy_from_slice(&pattern(1, WRITE_LEN));
    mine.get_mut(WRITE_LEN, SEND_LEN)
        .unwrap()
        .copy_from_slice(&pattern(2, SEND_LEN));
    mine.get_mut(WRITE_LEN + SEND_LEN, IMM_LEN)
        .unwrap()
        .copy_from_slice(&pattern(3, IMM_LEN));
    for i in 0..8 {
        mine.get_mut(BIG - 64 + 8 * i, 8)
            .unwrap()
            .copy_from_slice(&[i as u8 + 1; 8]);
    }
    // Twelve WQEs rung at once: a WRITE, a SEND and a WRITE WITH IMM of many packets, a
    // READ of many segments, eight 8-byte WRITEs behind it.
    let w = [mine.sge(0, WRITE_LEN).unwrap()];
    let s = [mine.sge(WRITE_LEN, SEND_LEN).unwrap()];
    let m = [mine.sge(WRITE_LEN + SEND_LEN, IMM_LEN).unwrap()];
    let r = [mine.sge(BIG / 2, READ_LEN).unwrap()];
    let sq = qp.sq();
    sq.post(SendWr::write_to(1, &w, window.target(0, WRITE_LEN as u64).unwrap()).signaled())
        .unwrap();
    sq.post(SendWr::send(2, &s).signaled()).unwrap();
    let t = window.target(WRITE_LEN as u64, IMM_LEN as u64).unwrap();
    sq.post(SendWr::write_imm_to(3, &m, t, 0xbeef).signaled())
        .unwrap();
    sq.post(
        SendWr::read_from(
            4,
            &r,
            window.target(BIG as u64 / 2, READ_LEN as u64).unwrap(),
        )
        .signaled(),
    )
    .unwrap();
    let smalls: Vec<[Sge; 1]> = (0..8)
        .map(|i| [mine.sge(BIG - 64 + 8 * i, 8).unwrap()])
        .collect();
    for (i, sge) in smalls.iter().enumerate() {
        let t = window
            .target((BIG / 4 + SEND_LEN + 8 * i) as u64, 8)
            .unwrap();
        sq.post(SendWr::write_to(5 + i as u64, sge, t).signaled())
            .unwrap();
    }
    sq.ring();
    for id in 1..=12 {
        let c = one(&mut dev, &mut scq);
        assert_eq!(
            (c.wr_id, c.status),
            (id, WcStatus::Success),
            "{c:?} {:?}",
            dev.fabric_stats()
        );
    }
    assert!(
        mine.get(BIG / 2, READ_LEN).unwrap() == pattern(5, READ_LEN),
        "the READ's segments in order"
    );
    conn.sync(STALL).unwrap();
    peer_ok(child);
    dev
}

/// The RNR peer: asks its requesters to wait 655 ms after an RNR NAK (`min_rnr_timer` 0),
/// and posts its receive 100 ms after the first SEND reached it.
pub(super) fn peer_late(addr: &str) {
    let mut dev = SimDevice::new();
    dev.start_device_thread().unwrap();
    dev.join_fabric(None).unwrap();
    let (pd, mut qp, _scq, mut rcq) = rc_qp(&mut dev);
    let buf = dev
        .alloc_buf(&pd, 4096, Access::ALL, Pages::Normal)
        .unwrap();
    let o = ConnectOpts {
        min_rnr_timer: 0,
        ..opts()
    };
    let mut conn = connect_qp_client(&mut dev, &mut qp, addr, &o, None, STALL).unwrap();
    conn.sync(STALL).unwrap();
    while dev.fabric_stats().unwrap().2.received == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(100));
    let into = [buf.sge(0, 64).unwrap()];
    qp.rq().post_recv(RecvWr::new(7, &into)).unwrap();
    qp.rq().ring();
    let c = one(&mut dev, &mut rcq);
    assert_eq!((c.status, c.wr_id, c.byte_len), (WcStatus::Success, 7, 5));
    assert_eq!(buf.get(0, 5).unwrap(), b"later");
    conn.sync(STALL).unwrap();
    println!("peer ok");
}

#[test]
fn the_requester_waits_the_rnr_timer_its_nak_carries() {
    let name = fabric_name("late");
    let _rm = Removed(name.clone());
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let child = spawn_peer("late", l.local_addr().unwrap(), &name);
    let mut dev = SimDevice::new();
    dev.join_fabric(Some(&name)).unwrap();
    let (pd, mut qp, mut scq, _rcq) = rc_qp(&mut dev);
    let mut mine = dev
        .alloc_buf(&pd, 4096, Access::LOCAL_WRITE, Pages::Normal)
        .unwrap();
    // One RNR retry: at this side's own timer (0.64 ms) it would be spent long before the
    // receive comes; at the 655 ms the peer's NAK carries, the retry finds it.
    let o = ConnectOpts {
        rnr_retry: 1,
        ..opts()
    };
    let mut conn = connect_qp_server(&mut dev, &mut qp, &l, &o, None, STALL).unwrap();
    conn.sync(STALL).unwrap();
    mine.get_mut(0, 5).unwrap().copy_from_slice(b"later");
    let sge = [mine.sge(0, 5).unwrap()];
    qp.sq().post(SendWr::send(1, &sge).signaled()).unwrap();
    qp.sq().ring();
    let c = one(&mut dev, &mut scq);
    assert_eq!((c.wr_id, c.status), (1, WcStatus::Success));
    conn.sync(STALL).unwrap();
    peer_ok(child);
}
