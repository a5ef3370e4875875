//! What an error or flush completion retires, on any provider (the sim in
//! tests/recover_helper.rs, rxe in tests/rxe_recovery.rs): one CQ takes a QP's sends and its
//! receives; three unsignaled WRITEs run, a fourth (unsignaled) names a wrong rkey, a fifth
//! (signaled) follows it; the QP fails. The completions must say, and `SendWindow::retire`
//! must count, `Completion::covered`'s one meaning: the error completion names the fourth and
//! covers the three before it (they ran), the fifth is flushed with a completion of its own,
//! each receive is flushed with a receive opcode and covers nothing, and the window counts
//! the five sends and nothing of the receives.

use std::time::{Duration, Instant};

use rdma_direct::prelude::*;

const RECV_BASE: u64 = 1 << 63;
const LIVENESS: Duration = Duration::from_secs(60);

pub fn error_completions_retire_what_covered_says<P: Provider>(p: &mut P, opts: &ConnectOpts) {
    let pd = p.alloc_pd().unwrap();
    let buf = p.alloc_buf(&pd, 4096, Access::ALL, Pages::Normal).unwrap();
    let dst = buf.remote(0, 4096).unwrap();
    let (mut cq, mut pcq) = (p.create_cq(256).unwrap(), p.create_cq(256).unwrap());
    let cfg = QpConfig::new(QpType::Rc);
    let mut a = p.create_qp(&pd, &mut cq, None, None, &cfg).unwrap();
    let mut b = p.create_qp(&pd, &mut pcq, None, None, &cfg).unwrap();
    connect_pair(p, &mut a, &mut b, opts).unwrap();
    let mut window = SendWindow::new(&a);
    let mut recvs = RecvReplenisher::new(2).with_id_base(RECV_BASE);
    recvs.fill(a.rq()).unwrap();
    let bad = dst.rkey ^ 0x5a5a_0000;
    for (id, rkey) in [(0, dst.rkey), (1, dst.rkey), (2, dst.rkey), (3, bad)] {
        a.sq()
            .post(SendWr::write(id, &[], dst.addr, rkey).inline(b"x"))
            .unwrap();
    }
    a.sq()
        .post(
            SendWr::write(4, &[], dst.addr, dst.rkey)
                .inline(b"x")
                .signaled(),
        )
        .unwrap();
    a.sq().ring();
    window.posted(5);
    // Every completion, in the order polled, with what the window returned and held before
    // and after it.
    let mut seen: Vec<(Completion, bool, u32, u32)> = Vec::new();
    let mut wc = [Completion::EMPTY; 8];
    let (t0, mut kicked) = (Instant::now(), None::<Instant>);
    let recv_ends = |seen: &[(Completion, bool, u32, u32)]| {
        seen.iter().filter(|s| recvs.owns(s.0.wr_id)).count()
    };
    while window.in_flight() > 0 || recv_ends(&seen) < 2 {
        assert!(
            t0.elapsed() < LIVENESS,
            "not every request ended: {seen:#?}, {} sends in flight",
            window.in_flight()
        );
        p.progress();
        let n = cq.poll(&mut wc);
        for c in &wc[..n] {
            let before = window.in_flight();
            let sent = window.retire(c);
            seen.push((*c, sent, before, window.in_flight()));
        }
        // The WRITE's error failed the QP: moved to ERR (again after a quiet second: rxe may
        // need it to flush receives posted before the failure) so that everything flushes.
        let failed = seen.iter().any(|s| !s.0.is_ok());
        if failed && kicked.is_none_or(|k| n == 0 && k.elapsed() > Duration::from_secs(1)) {
            kicked = Some(Instant::now());
            p.to_error(&mut a).unwrap();
        }
        std::thread::yield_now();
    }
    type Seen<'a> = Vec<&'a (Completion, bool, u32, u32)>;
    let (recvd, sends): (Seen, Seen) = seen.iter().partition(|s| recvs.owns(s.0.wr_id));
    // The error names the WRITE with the wrong rkey and covers the three that ran before it:
    // the window counts 1 + 3.
    assert_eq!(sends.len(), 2, "{seen:#?}");
    let e = &sends[0].0;
    assert_eq!(
        (e.wr_id, e.covered, e.covered_from, e.qp_num),
        (3, 3, 0, a.qpn()),
        "{seen:#?}"
    );
    assert!(!e.is_ok() && e.status != WcStatus::WrFlushErr, "{e:?}");
    assert!(!e.opcode.is_recv(), "{e:?}");
    assert_eq!(
        (sends[0].1, sends[0].2, sends[0].3),
        (true, 5, 1),
        "{seen:#?}"
    );
    // The signaled one after it: flushed, a completion of its own, nothing covered.
    let f = &sends[1].0;
    assert_eq!(
        (f.wr_id, f.status, f.covered, sends[1].1, sends[1].3),
        (4, WcStatus::WrFlushErr, 0, true, 0),
        "{seen:#?}"
    );
    // Each receive: flushed, a receive opcode, nothing covered; the window leaves it alone.
    assert_eq!(recvd.len(), 2, "{seen:#?}");
    for (c, sent, before, after) in &recvd {
        assert_eq!(
            (c.status, c.opcode, c.covered, c.qp_num),
            (WcStatus::WrFlushErr, WcOpcode::Recv, 0, a.qpn()),
            "{c:?}"
        );
        assert_eq!((*sent, before), (false, after), "{c:?}");
    }
    assert_eq!(window.in_flight(), 0);
    drop((a, b));
}
