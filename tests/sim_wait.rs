//! Blocking waits on the sim: the mlx5 provider arms a CQ by hand (the arm word in the
//! doorbell record and the 8-byte CQ doorbell) and sleeps on the completion channel; the sim
//! fires one event per arm.

use std::os::fd::AsRawFd;

use rdma_direct::providers::sim::{SimCq as Mlx5Cq, SimQp as Mlx5Qp};
use rdma_direct::providers::sim::{SimDevice, SimMr};
use rdma_direct::providers::{
    Access, Completion, CompletionQueue, ConnectOpts, MemoryRegion, Provider, QpConfig, QpType,
    QueuePair, SendQueue, SendWr,
};

struct Rig {
    dev: SimDevice,
    qp: Mlx5Qp,
    cq: Mlx5Cq,
    _peer: (Mlx5Qp, Mlx5Cq),
    mr: SimMr,
    _mem: Vec<u8>,
}

fn rig() -> Rig {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let mut mem = vec![0u8; 64];
    // SAFETY: `mem` lives in the rig next to the MR, which is dropped first.
    let mr = unsafe { dev.reg_mr(&pd, mem.as_mut_ptr(), mem.len(), Access::ALL) }.unwrap();
    let opts = ConnectOpts::default();
    let mut cq = dev.create_cq(64).unwrap();
    let mut pcq = dev.create_cq(64).unwrap();
    let mut cfg = QpConfig::new(QpType::Rc);
    // The CQ (64) absorbs both queues.
    (cfg.caps.max_send_wr, cfg.caps.max_recv_wr) = (32, 32);
    let mut qp = dev.create_qp(&pd, &mut cq, None, None, &cfg).unwrap();
    let mut peer = dev.create_qp(&pd, &mut pcq, None, None, &cfg).unwrap();
    let ea = dev.endpoint(&qp, &opts).unwrap();
    let eb = dev.endpoint(&peer, &opts).unwrap();
    dev.connect(&mut qp, &ea, &eb, &opts).unwrap();
    dev.connect(&mut peer, &eb, &ea, &opts).unwrap();
    Rig {
        dev,
        qp,
        cq,
        _peer: (peer, pcq),
        mr,
        _mem: mem,
    }
}

fn post(qp: &mut Mlx5Qp, mr: &SimMr, wr_id: u64) {
    let sge = [mr.sge(0, 8)];
    qp.sq()
        .post(SendWr::write(wr_id, &sge, mr.addr() + 32, mr.rkey()).signaled())
        .unwrap();
    qp.sq().ring();
}

fn readable(fd: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, zero timeout.
    unsafe { libc::poll(&mut p, 1, 0) == 1 }
}

#[test]
fn an_arm_fires_once_on_the_next_completion_and_never_when_disarmed() {
    let mut r = rig();
    let ch = r.dev.create_comp_channel().unwrap();
    let mut w = r.dev.cq_waiter(&r.cq, ch).unwrap();
    let fd = w.channel().as_raw_fd();
    let mut out = [Completion::EMPTY; 4];
    // Not armed: a completion sends no event.
    post(&mut r.qp, &r.mr, 1);
    r.dev.run_until_idle();
    assert_eq!(r.cq.poll(&mut out), 1);
    assert!(!readable(fd));
    // Armed: the next completion fires exactly one event.
    w.arm(&r.cq, false);
    r.dev.run_until_idle();
    assert!(!readable(fd), "no completion yet");
    post(&mut r.qp, &r.mr, 2);
    post(&mut r.qp, &r.mr, 3);
    r.dev.run_until_idle();
    assert!(w.take_event().unwrap());
    assert!(!w.take_event().unwrap(), "one arm, one event");
    assert_eq!(r.cq.poll(&mut out), 2);
    // Armed behind unconsumed CQEs: fires at once.
    post(&mut r.qp, &r.mr, 4);
    r.dev.run_until_idle();
    w.arm(&r.cq, false);
    r.dev.run_until_idle();
    assert!(w.take_event().unwrap());
    // Solicited-only: a plain completion does not fire it.
    assert_eq!(r.cq.poll(&mut out), 1);
    w.arm(&r.cq, true);
    r.dev.run_until_idle();
    post(&mut r.qp, &r.mr, 5);
    r.dev.run_until_idle();
    assert!(!readable(fd));
    let s = r.dev.stats();
    assert_eq!((s.arms, s.stale_arms, s.events), (3, 0, 2));
}

#[test]
fn an_arm_with_a_stale_sequence_number_is_ignored() {
    let mut r = rig();
    let ch = r.dev.create_comp_channel().unwrap();
    let mut w = r.dev.cq_waiter(&r.cq, ch).unwrap();
    let mut out = [Completion::EMPTY; 4];
    w.arm(&r.cq, false);
    post(&mut r.qp, &r.mr, 1);
    r.dev.run_until_idle();
    // Event sent (sn 0 -> device count 1); the host has not taken it: arming again carries
    // sn 0, which the device now calls stale.
    assert_eq!(r.cq.poll(&mut out), 1);
    w.arm(&r.cq, false);
    r.dev.run_until_idle();
    assert_eq!(r.dev.stats().stale_arms, 1);
    // Taking the event counts it; the next arm is good.
    assert!(w.take_event().unwrap());
    w.arm(&r.cq, false);
    post(&mut r.qp, &r.mr, 2);
    r.dev.run_until_idle();
    assert!(w.take_event().unwrap());
    assert_eq!(r.dev.stats().stale_arms, 1);
}

/// The poll-arm-poll sequence against every place a completion can land, 100,000 times in
/// deterministic mode: each cycle yields its completion and exactly one event, and the
/// host's sequence number never falls out of step with the device's.
#[test]
fn no_lost_wakeup_over_100000_arm_cycles() {
    let mut r = rig();
    let ch = r.dev.create_comp_channel().unwrap();
    let mut w = r.dev.cq_waiter(&r.cq, ch).unwrap();
    let mut out = [Completion::EMPTY; 4];
    for i in 0..100_000u64 {
        assert_eq!(r.cq.poll(&mut out), 0);
        let early = i % 3 == 0;
        if early {
            // Lands between the first poll and the arm.
            post(&mut r.qp, &r.mr, i);
            r.dev.process();
        }
        w.arm(&r.cq, false);
        let mut got = r.cq.poll(&mut out);
        if !early {
            // Lands after the arm (i % 3 == 1: before the device saw the arm).
            post(&mut r.qp, &r.mr, i);
            if i % 3 == 2 {
                r.dev.process();
            }
        }
        r.dev.process();
        r.dev.process();
        assert!(w.take_event().unwrap(), "cycle {i}: lost wake-up");
        assert!(!w.take_event().unwrap(), "cycle {i}: two events");
        got += r.cq.poll(&mut out[got..]);
        assert_eq!(got, 1, "cycle {i}");
        assert_eq!(out[0].wr_id, i);
    }
    let s = r.dev.stats();
    assert_eq!((s.stale_arms, s.events), (0, 100_000));
    assert_eq!(w.sleeps(), 100_000);
}

/// A thread sleeps in `wait` on an armed CQ and wakes on exactly the completion another
/// thread posts (device thread running).
#[test]
fn a_sleeping_waiter_wakes_on_the_completion_another_thread_posts() {
    let mut r = rig();
    r.dev.start_device_thread().unwrap();
    let ch = r.dev.create_comp_channel().unwrap();
    let mut w = r.dev.cq_waiter(&r.cq, ch).unwrap();
    let rounds = if cfg!(debug_assertions) { 200 } else { 100_000 };
    let (tx, rx) = std::sync::mpsc::channel::<u64>();
    let (mut qp, mr) = (r.qp, r.mr);
    let poster = std::thread::spawn(move || {
        for i in 0..rounds {
            post(&mut qp, &mr, i);
            // Next only once the waiter has it: every round starts with an empty CQ.
            assert_eq!(rx.recv().unwrap(), i);
        }
        (qp, mr)
    });
    let mut out = [Completion::EMPTY; 4];
    for i in 0..rounds {
        let n = w.wait(&mut r.cq, &mut out).unwrap();
        assert_eq!(n, 1);
        assert_eq!(out[0].wr_id, i);
        assert!(out[0].is_ok());
        tx.send(i).unwrap();
    }
    let _keep = poster.join().unwrap();
    assert!(w.sleeps() > 0);
}
