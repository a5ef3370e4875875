//! End-to-end hot path on the software mlx5 device: the production mlx5 provider posts,
//! the sim executes, the provider polls. Deterministic mode (`progress()` runs the device).

mod common;

use rdma_direct::providers::sim::{SimCq, SimDevice, SimQp};
use rdma_direct::providers::{
    Access, Completion, CompletionQueue, ConnectOpts, MemoryRegion, Provider, QpConfig, QpState,
    QpType, QueuePair, RecvQueue, RecvWr, SendFlags, SendOp, SendQueue, SendWr, Sge, UdDest,
    WcFlags, WcOpcode, WcStatus,
};

struct Side {
    qp: SimQp,
    cq: SimCq,
}

fn poll_n(dev: &mut SimDevice, cq: &mut SimCq, n: usize) -> Vec<Completion> {
    let mut out = Vec::new();
    let mut buf = [Completion::EMPTY; 16];
    for _ in 0..1000 {
        dev.progress();
        let k = cq.poll(&mut buf);
        out.extend_from_slice(&buf[..k]);
        if out.len() >= n {
            break;
        }
    }
    out
}

fn pair(
    dev: &mut SimDevice,
    pd: &rdma_direct::providers::sim::SimPd,
    t: QpType,
    opts: &ConnectOpts,
) -> (Side, Side) {
    // The CQ absorbs both queues.
    let cfg = common::qp_cfg(t, 32, 32);
    let ((qa, ca), (qb, cb)) = common::sim_pair(dev, pd, 64, &cfg, opts);
    (Side { qp: qa, cq: ca }, Side { qp: qb, cq: cb })
}

#[test]
fn rc_send_recv_write_read_atomics() {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let mut mem = vec![0u8; 8192];
    // SAFETY: `mem` outlives the MR (dropped at the end of the test, after the MR).
    let mr = unsafe { dev.reg_mr(&pd, mem.as_mut_ptr(), mem.len(), Access::ALL) }.unwrap();
    let opts = ConnectOpts::default();
    let (mut a, mut b) = pair(&mut dev, &pd, QpType::Rc, &opts);
    assert_eq!(a.qp.state(), QpState::Rts);

    // SEND 100 bytes from [0..100) into a receive at [4096..).
    for (i, x) in mem[..100].iter_mut().enumerate() {
        *x = i as u8 + 1;
    }
    b.qp.rq()
        .post_recv(RecvWr {
            wr_id: 7,
            sges: &[mr.sge(4096, 1024)],
        })
        .unwrap();
    b.qp.rq().ring();
    let sge = [mr.sge(0, 100)];
    a.qp.sq().post(SendWr::send(1, &sge).signaled()).unwrap();
    a.qp.sq().ring();
    let ca = poll_n(&mut dev, &mut a.cq, 1);
    let cb = poll_n(&mut dev, &mut b.cq, 1);
    assert_eq!(ca.len(), 1);
    assert_eq!(ca[0].wr_id, 1);
    assert_eq!(ca[0].status, WcStatus::Success);
    assert_eq!(ca[0].opcode, WcOpcode::Send);
    assert_eq!(cb.len(), 1);
    assert_eq!(cb[0].wr_id, 7);
    assert_eq!(cb[0].opcode, WcOpcode::Recv);
    assert_eq!(cb[0].byte_len, 100);
    assert_eq!(cb[0].qp_num, b.qp.qpn());
    assert_eq!(&mem[4096..4196], &mem[..100].to_vec()[..]);

    // WRITE WITH IMM (inline) into [6000..), consuming a zero-SGE receive.
    b.qp.rq()
        .post_recv(RecvWr {
            wr_id: 8,
            sges: &[],
        })
        .unwrap();
    b.qp.rq().ring();
    let data = *b"inline-bytes!";
    let raddr = mr.addr() + 6000;
    let wr = SendWr::new(
        2,
        SendOp::WriteImm {
            raddr,
            rkey: mr.rkey(),
            imm: 0xdead_beef,
        },
        &[],
    )
    .inline(&data)
    .signaled();
    a.qp.sq().post(wr).unwrap();
    a.qp.sq().ring();
    let ca = poll_n(&mut dev, &mut a.cq, 1);
    let cb = poll_n(&mut dev, &mut b.cq, 1);
    assert_eq!(ca[0].opcode, WcOpcode::RdmaWrite);
    assert_eq!(cb[0].opcode, WcOpcode::RecvRdmaWithImm);
    assert_eq!(cb[0].imm, 0xdead_beef);
    assert!(cb[0].flags.contains(WcFlags::WITH_IMM));
    assert_eq!(cb[0].byte_len, data.len() as u32);
    assert_eq!(&mem[6000..6000 + data.len()], &data);

    // READ [6000..6013) back into [7000..).
    let sge = [mr.sge(7000, data.len() as u32)];
    a.qp.sq()
        .post(SendWr::read(3, &sge, raddr, mr.rkey()).signaled())
        .unwrap();
    a.qp.sq().ring();
    let ca = poll_n(&mut dev, &mut a.cq, 1);
    assert_eq!(ca[0].opcode, WcOpcode::RdmaRead);
    assert_eq!(ca[0].byte_len, data.len() as u32);
    assert_eq!(&mem[7000..7000 + data.len()], &data);

    // CAS then FAA on [7168..7176): old values land in host byte order.
    mem[7168..7176].copy_from_slice(&5u64.to_ne_bytes());
    let res = [mr.sge(7200, 8)];
    let cas = SendOp::CompareSwap {
        raddr: mr.addr() + 7168,
        rkey: mr.rkey(),
        compare: 5,
        swap: 9,
    };
    a.qp.sq()
        .post(SendWr::new(4, cas, &res).signaled())
        .unwrap();
    a.qp.sq().ring();
    let ca = poll_n(&mut dev, &mut a.cq, 1);
    assert_eq!(ca[0].opcode, WcOpcode::CompSwap);
    assert_eq!(u64::from_ne_bytes(mem[7200..7208].try_into().unwrap()), 5);
    assert_eq!(u64::from_ne_bytes(mem[7168..7176].try_into().unwrap()), 9);
    let faa = SendOp::FetchAdd {
        raddr: mr.addr() + 7168,
        rkey: mr.rkey(),
        add: 0x100,
    };
    a.qp.sq()
        .post(SendWr::new(5, faa, &res).signaled())
        .unwrap();
    a.qp.sq().ring();
    let ca = poll_n(&mut dev, &mut a.cq, 1);
    assert_eq!(ca[0].opcode, WcOpcode::FetchAdd);
    assert_eq!(ca[0].byte_len, 8);
    assert_eq!(u64::from_ne_bytes(mem[7200..7208].try_into().unwrap()), 9);
    assert_eq!(
        u64::from_ne_bytes(mem[7168..7176].try_into().unwrap()),
        0x109
    );
    drop(mr);
}

#[test]
fn rc_remote_access_error_flushes_and_errors_both_sides() {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let mut mem = vec![0u8; 4096];
    // SAFETY: `mem` outlives the MR.
    let mr = unsafe { dev.reg_mr(&pd, mem.as_mut_ptr(), mem.len(), Access::LOCAL_WRITE) }.unwrap();
    let (mut a, mut b) = pair(&mut dev, &pd, QpType::Rc, &ConnectOpts::default());
    b.qp.rq()
        .post_recv(RecvWr {
            wr_id: 70,
            sges: &[mr.sge(2048, 64)],
        })
        .unwrap();
    b.qp.rq().ring();
    let sge = [mr.sge(0, 16)];
    // MR without REMOTE_WRITE: REM_ACCESS; the unsignaled WRITE after it is flushed.
    let w1 = SendWr::write(1, &sge, mr.addr() + 1024, mr.rkey()).signaled();
    let w2 = SendWr::write(2, &sge, mr.addr() + 1024, mr.rkey());
    a.qp.sq().post_list(&[w1, w2]).unwrap();
    let ca = poll_n(&mut dev, &mut a.cq, 2);
    assert_eq!(ca.len(), 2, "{ca:?}");
    assert_eq!((ca[0].wr_id, ca[0].status), (1, WcStatus::RemAccessErr));
    assert_eq!(ca[0].vendor_err & 0xff, 0x13);
    assert_eq!((ca[1].wr_id, ca[1].status), (2, WcStatus::WrFlushErr));
    let cb = poll_n(&mut dev, &mut b.cq, 1);
    assert_eq!((cb[0].wr_id, cb[0].status), (70, WcStatus::WrFlushErr));
    assert_eq!(dev.qp_state(a.qp.qpn()), Some(QpState::Err));
    assert_eq!(dev.qp_state(b.qp.qpn()), Some(QpState::Err));
    assert!(mem[1024..1040].iter().all(|&x| x == 0));
    drop(mr);
}

#[test]
fn ud_send_has_grh_space_and_source_qpn() {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let mut mem = vec![0u8; 4096];
    // SAFETY: `mem` outlives the MR.
    let mr = unsafe { dev.reg_mr(&pd, mem.as_mut_ptr(), mem.len(), Access::LOCAL_WRITE) }.unwrap();
    let opts = ConnectOpts::default();
    let (mut a, mut b) = pair(&mut dev, &pd, QpType::Ud, &opts);
    let eb = dev.endpoint(&b.qp, &opts).unwrap();
    let ah = dev.create_ah(&pd, &eb, &opts).unwrap();
    b.qp.rq()
        .post_recv(RecvWr {
            wr_id: 9,
            sges: &[mr.sge(1024, 40 + 256)],
        })
        .unwrap();
    b.qp.rq().ring();
    mem[..32].copy_from_slice(&[0x5a; 32]);
    let sge = [mr.sge(0, 32)];
    let dest = UdDest {
        ah: &ah,
        remote_qpn: b.qp.qpn(),
        remote_qkey: opts.qkey,
    };
    a.qp.sq()
        .post(SendWr::send(1, &sge).to(dest).signaled())
        .unwrap();
    a.qp.sq().ring();
    let ca = poll_n(&mut dev, &mut a.cq, 1);
    assert_eq!(ca[0].status, WcStatus::Success);
    let cb = poll_n(&mut dev, &mut b.cq, 1);
    assert_eq!(cb[0].byte_len, 32 + 40);
    assert!(cb[0].flags.contains(WcFlags::GRH));
    assert_eq!(cb[0].src_qp, a.qp.qpn());
    // The GRH: version 6, payload length BTH + DETH + 32 + ICRC, next header 0x1b, the
    // device port's GID as source and destination.
    assert_eq!(mem[1024], 0x60, "GRH version nibble");
    assert_eq!(&mem[1028..1032], &[0, 56, 0x1b, 64]);
    assert_eq!(&mem[1032..1048], &dev.gid());
    assert_eq!(&mem[1048..1064], &dev.gid());
    assert_eq!(&mem[1064..1096], &[0x5a; 32]);
    // A wrong Q_Key is dropped silently: the sender completes, the receiver sees nothing.
    b.qp.rq()
        .post_recv(RecvWr {
            wr_id: 10,
            sges: &[mr.sge(2048, 296)],
        })
        .unwrap();
    b.qp.rq().ring();
    let dest = UdDest {
        ah: &ah,
        remote_qpn: b.qp.qpn(),
        remote_qkey: opts.qkey ^ 1,
    };
    a.qp.sq()
        .post(
            SendWr::send(2, &sge)
                .to(dest)
                .with_flags(SendFlags::SIGNALED),
        )
        .unwrap();
    a.qp.sq().ring();
    let ca = poll_n(&mut dev, &mut a.cq, 1);
    assert_eq!((ca[0].wr_id, ca[0].status), (2, WcStatus::Success));
    assert!(poll_n(&mut dev, &mut b.cq, 1).is_empty());
    let _ = Sge::default();
    drop(mr);
}

#[test]
fn send_longer_than_the_receive_is_loc_len_and_rem_inv_req() {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let mut mem = vec![0u8; 4096];
    // SAFETY: `mem` outlives the MR.
    let mr = unsafe { dev.reg_mr(&pd, mem.as_mut_ptr(), mem.len(), Access::ALL) }.unwrap();
    let (mut a, mut b) = pair(&mut dev, &pd, QpType::Rc, &ConnectOpts::default());
    b.qp.rq()
        .post_recv(RecvWr {
            wr_id: 30,
            sges: &[mr.sge(2048, 16)],
        })
        .unwrap();
    b.qp.rq().ring();
    let sge = [mr.sge(0, 17)];
    a.qp.sq().post(SendWr::send(3, &sge).signaled()).unwrap();
    a.qp.sq().ring();
    let ca = poll_n(&mut dev, &mut a.cq, 1);
    let cb = poll_n(&mut dev, &mut b.cq, 1);
    // mlx5 and the IBA: responder LOC_LEN, requester REM_INV_REQ (rxe reports LOC_QP_OP / REM_OP).
    assert_eq!(
        (ca[0].wr_id, ca[0].status, ca[0].vendor_err & 0xff),
        (3, WcStatus::RemInvReqErr, 0x12)
    );
    assert_eq!(
        (cb[0].wr_id, cb[0].status, cb[0].vendor_err & 0xff),
        (30, WcStatus::LocLenErr, 0x01)
    );
    assert_eq!(dev.qp_state(b.qp.qpn()), Some(QpState::Err));
    drop(mr);
}

#[test]
fn uc_drops_silently_without_acks() {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let mut mem = vec![0u8; 4096];
    // SAFETY: `mem` outlives the MR.
    let mr = unsafe { dev.reg_mr(&pd, mem.as_mut_ptr(), mem.len(), Access::ALL) }.unwrap();
    let (mut a, mut b) = pair(&mut dev, &pd, QpType::Uc, &ConnectOpts::default());
    mem[..8].copy_from_slice(b"ucwrite!");
    let sge = [mr.sge(0, 8)];
    // No receive posted: the SEND is lost, the sender completes anyway (no acks on UC).
    a.qp.sq().post(SendWr::send(1, &sge).signaled()).unwrap();
    // A wrong rkey: dropped too.
    a.qp.sq()
        .post(SendWr::write(2, &sge, mr.addr() + 512, mr.rkey() ^ 0x40).signaled())
        .unwrap();
    // A good WRITE lands.
    a.qp.sq()
        .post(SendWr::write(3, &sge, mr.addr() + 1024, mr.rkey()).signaled())
        .unwrap();
    a.qp.sq().ring();
    let ca = poll_n(&mut dev, &mut a.cq, 3);
    assert_eq!(
        ca.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(),
        [
            (1, WcStatus::Success),
            (2, WcStatus::Success),
            (3, WcStatus::Success)
        ]
    );
    assert!(poll_n(&mut dev, &mut b.cq, 1).is_empty());
    assert!(mem[512..520].iter().all(|&x| x == 0));
    assert_eq!(&mem[1024..1032], b"ucwrite!");
    assert_eq!(dev.qp_state(b.qp.qpn()), Some(QpState::Rts));
    drop(mr);
}

#[test]
fn srq_receives_are_consumed_in_arrival_order_across_qps() {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let mut mem = vec![0u8; 8192];
    // SAFETY: `mem` outlives the MR.
    let mr = unsafe { dev.reg_mr(&pd, mem.as_mut_ptr(), mem.len(), Access::ALL) }.unwrap();
    let opts = ConnectOpts::default();
    let mut srq = dev.create_srq(&pd, 8, 1).unwrap();
    let mut rcq = dev.create_cq(64).unwrap();
    let mut scq = dev.create_cq(64).unwrap();
    let mut cfg = QpConfig::new(QpType::Rc);
    // Each CQ absorbs the queues completing on it (two QPs, and the SRQ once).
    (cfg.caps.max_send_wr, cfg.caps.max_recv_wr) = (16, 16);
    let mut r1 = dev
        .create_qp(&pd, &mut rcq, None, Some(&mut srq), &cfg)
        .unwrap();
    let mut r2 = dev
        .create_qp(&pd, &mut rcq, None, Some(&mut srq), &cfg)
        .unwrap();
    let mut s1 = dev.create_qp(&pd, &mut scq, None, None, &cfg).unwrap();
    let mut s2 = dev.create_qp(&pd, &mut scq, None, None, &cfg).unwrap();
    for (s, r) in [(&mut s1, &mut r1), (&mut s2, &mut r2)] {
        let es = dev.endpoint(s, &opts).unwrap();
        let er = dev.endpoint(r, &opts).unwrap();
        dev.connect(s, &es, &er, &opts).unwrap();
        dev.connect(r, &er, &es, &opts).unwrap();
    }
    for i in 0..4u64 {
        srq.post_recv(RecvWr {
            wr_id: 100 + i,
            sges: &[mr.sge(4096 + i as usize * 512, 512)],
        })
        .unwrap();
    }
    srq.ring();
    // s2, s1, s2, s1: the SRQ hands its receives out in posted order, whoever asks.
    for k in 0..4usize {
        let s = if k % 2 == 0 { &mut s2 } else { &mut s1 };
        mem[k * 8..k * 8 + 8].fill(k as u8 + 1);
        let sge = [mr.sge(k * 8, 8)];
        s.sq()
            .post(SendWr::send(k as u64, &sge).signaled())
            .unwrap();
        s.sq().ring();
        dev.progress();
    }
    let c = poll_n(&mut dev, &mut rcq, 4);
    let got: Vec<(u64, u32)> = c.iter().map(|c| (c.wr_id, c.qp_num)).collect();
    assert_eq!(
        got,
        [
            (100, r2.qpn()),
            (101, r1.qpn()),
            (102, r2.qpn()),
            (103, r1.qpn())
        ]
    );
    for k in 0..4 {
        assert!(mem[4096 + k * 512..4096 + k * 512 + 8]
            .iter()
            .all(|&x| x == k as u8 + 1));
    }
    assert_eq!(poll_n(&mut dev, &mut scq, 4).len(), 4);
    drop((r1, r2, s1, s2));
    drop(mr);
}

#[test]
fn the_fault_injector_is_reproducible_by_seed() {
    use rdma_direct::providers::sim::FaultConfig;
    let run = |seed: u64| {
        let mut dev = SimDevice::new();
        dev.set_faults(Some(FaultConfig {
            seed,
            error_ppm: 50_000,
            delay_ppm: 300_000,
            max_delay_passes: 4,
            reorder_ppm: 300_000,
            torn_write_spins: 0,
            packet_drop_ppm: 0,
            packet_corrupt_ppm: 0,
            packet_delay_ppm: 0,
            packet_duplicate_ppm: 0,
        }));
        let pd = dev.alloc_pd().unwrap();
        let mut mem = vec![0u8; 4096];
        // SAFETY: `mem` outlives the MR.
        let mr = unsafe { dev.reg_mr(&pd, mem.as_mut_ptr(), mem.len(), Access::ALL) }.unwrap();
        let (mut a, _b) = pair(&mut dev, &pd, QpType::Rc, &ConnectOpts::default());
        let sge = [mr.sge(0, 8)];
        let mut log = Vec::new();
        for i in 0..40u64 {
            if a.qp
                .sq()
                .post(SendWr::write(i, &sge, mr.addr() + 64, mr.rkey()).signaled())
                .is_ok()
            {
                a.qp.sq().ring();
            }
            let mut wc = [Completion::EMPTY; 4];
            dev.process();
            let n = a.cq.poll(&mut wc);
            log.extend(wc[..n].iter().map(|c| (c.wr_id, c.status)));
        }
        log.extend(
            poll_n(&mut dev, &mut a.cq, 64)
                .iter()
                .map(|c| (c.wr_id, c.status)),
        );
        drop(mr);
        (log, dev.fault_stats())
    };
    let (l1, f1) = run(11);
    let (l2, f2) = run(11);
    let (l3, _) = run(12);
    assert_eq!(l1, l2);
    assert_eq!(f1, f2);
    assert!(f1.delayed > 0, "{f1:?}");
    assert_ne!(l1, l3, "another seed, another run");
}

#[test]
fn uc_send_longer_than_the_receive_fails_only_at_the_responder() {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let mut mem = vec![0u8; 4096];
    // SAFETY: `mem` outlives the MR.
    let mr = unsafe { dev.reg_mr(&pd, mem.as_mut_ptr(), mem.len(), Access::ALL) }.unwrap();
    let (mut a, mut b) = pair(&mut dev, &pd, QpType::Uc, &ConnectOpts::default());
    b.qp.rq()
        .post_recv(RecvWr {
            wr_id: 40,
            sges: &[mr.sge(2048, 8)],
        })
        .unwrap();
    b.qp.rq().ring();
    let sge = [mr.sge(0, 9)];
    a.qp.sq().post(SendWr::send(4, &sge).signaled()).unwrap();
    a.qp.sq().ring();
    let ca = poll_n(&mut dev, &mut a.cq, 1);
    let cb = poll_n(&mut dev, &mut b.cq, 1);
    assert_eq!(
        (ca[0].wr_id, ca[0].status),
        (4, WcStatus::Success),
        "no acks on UC"
    );
    assert_eq!((cb[0].wr_id, cb[0].status), (40, WcStatus::LocLenErr));
    assert_eq!(dev.qp_state(a.qp.qpn()), Some(QpState::Rts));
    drop(mr);
}

#[test]
fn device_thread_waits_the_rnr_timer_between_retries() {
    let mut dev = SimDevice::new();
    dev.start_device_thread().unwrap();
    let pd = dev.alloc_pd().unwrap();
    let mut mem = vec![0u8; 4096];
    // SAFETY: `mem` outlives the MR.
    let mr = unsafe { dev.reg_mr(&pd, mem.as_mut_ptr(), mem.len(), Access::ALL) }.unwrap();
    // rnr_retry 2 and a responder min_rnr_timer of 14 (1.28 ms): the error cannot come
    // before two timer periods have passed.
    let opts = ConnectOpts {
        rnr_retry: 2,
        min_rnr_timer: 14,
        ..ConnectOpts::default()
    };
    let (mut a, _b) = pair(&mut dev, &pd, QpType::Rc, &opts);
    let sge = [mr.sge(0, 8)];
    let t0 = std::time::Instant::now();
    a.qp.sq().post(SendWr::send(1, &sge).signaled()).unwrap();
    a.qp.sq().ring();
    let mut wc = [Completion::EMPTY; 1];
    while a.cq.poll(&mut wc) == 0 {
        assert!(t0.elapsed().as_secs() < 20, "no RNR error");
        std::hint::spin_loop();
    }
    assert_eq!(wc[0].status, WcStatus::RnrRetryExcErr);
    assert!(
        t0.elapsed() >= std::time::Duration::from_micros(2 * 1280),
        "{:?}",
        t0.elapsed()
    );
    dev.stop_device_thread();
    drop(mr);
}
