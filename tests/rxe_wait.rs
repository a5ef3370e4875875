//! Device test (run in the guest on rxe0): a thread sleeps on an armed CQ (completion
//! channel, `ibv_req_notify_cq`, `ibv_get_cq_event`) and wakes on exactly the completion
//! another thread posts; poll-arm-poll over many cycles loses no wake-up.

mod common;

use std::os::fd::AsRawFd;

use rdma_direct::control::{CompChannel, Context, Cq, Mr, Pd, Qp};
use rdma_direct::ffi::{self, ibv_send_wr, ibv_sge, ibv_wc};
use rdma_direct::providers::{
    Access, ConnectOpts, MemoryRegion, QpCaps, QpConfig, QpEndpoint, QpType,
};

#[test]
#[ignore = "device test: needs RDMA_DIRECT_DEVICE (tests/guest/run)"]
fn rxe_waiter_wakes_on_the_completion_another_thread_posts() {
    let dev = common::device();
    let ctx = Context::open(&dev).unwrap_or_else(|e| panic!("open {dev}: {e}"));
    let gid_index = common::gid_index()
        .unwrap_or_else(|| ctx.default_gid_index(1).unwrap_or_else(|e| panic!("{e}")));
    let opts = ConnectOpts {
        gid_index,
        ..ConnectOpts::default()
    };
    let ch = CompChannel::new(&ctx).unwrap();
    assert!(ch.as_raw_fd() >= 0);
    let cq = Cq::with_channel(&ctx, 16, &ch).unwrap();
    let pcq = Cq::new(&ctx, 16).unwrap();
    let pd = Pd::new(&ctx).unwrap();
    let mut buf = memmap2::MmapMut::map_anon(4096).unwrap();
    // SAFETY: `buf` outlives the MR (dropped at the end of the test, after it).
    let mr = unsafe { Mr::register(&pd, buf.as_mut_ptr(), 4096, Access::ALL) }.unwrap();
    let cfg = QpConfig {
        qp_type: QpType::Rc,
        caps: QpCaps {
            max_send_wr: 16,
            max_recv_wr: 1,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        sq_sig_all: false,
    };
    let mut a = Qp::new(&pd, &cq, &cq, None, &cfg).unwrap();
    let mut b = Qp::new(&pd, &pcq, &pcq, None, &cfg).unwrap();
    let port = ctx.query_port(opts.port).unwrap();
    let gid = ctx.query_gid(opts.port, u32::from(opts.gid_index)).unwrap();
    let ep = |qpn: u32, psn: u32| QpEndpoint {
        lid: port.lid,
        gid: gid.0,
        gid_index: opts.gid_index,
        qpn,
        psn,
        mtu: port.active_mtu().expect("port active"),
        mr: None,
    };
    let (ea, eb) = (ep(a.qpn(), 0x1234), ep(b.qpn(), 0x5678));
    a.connect(&ea, &eb, &opts).unwrap();
    b.connect(&eb, &ea, &opts).unwrap();
    let rounds = 2000u64;
    let (tx, rx) = std::sync::mpsc::channel::<u64>();
    let (qp_addr, laddr, lkey, rkey) = (a.as_ptr() as usize, mr.addr(), mr.lkey(), mr.rkey());
    let poster = std::thread::spawn(move || {
        for i in 0..rounds {
            let mut sge = ibv_sge {
                addr: laddr,
                length: 8,
                lkey,
            };
            let mut wr = ibv_send_wr::zeroed();
            wr.wr_id = i;
            wr.sg_list = &mut sge;
            wr.num_sge = 1;
            wr.opcode = ffi::IBV_WR_RDMA_WRITE;
            wr.send_flags = ffi::IBV_SEND_SIGNALED;
            wr.wr.rdma = ffi::ibv_send_wr_rdma {
                remote_addr: laddr + 2048,
                rkey,
            };
            let mut bad = std::ptr::null_mut();
            // SAFETY: the QP lives until after this thread is joined; the SGE is registered.
            let rc = unsafe { ffi::ops::post_send(qp_addr as *mut _, &mut wr, &mut bad) };
            assert_eq!(rc, 0);
            assert_eq!(rx.recv().unwrap(), i);
        }
    });
    let mut wc = [ibv_wc::default(); 4];
    let mut sleeps = 0u64;
    for i in 0..rounds {
        let n = loop {
            // SAFETY: a live CQ and a writable array of 4.
            let n = unsafe { ffi::ops::poll_cq(cq.as_ptr(), 4, wc.as_mut_ptr()) };
            if n != 0 {
                break n;
            }
            cq.req_notify(false).unwrap();
            // SAFETY: as above.
            let n = unsafe { ffi::ops::poll_cq(cq.as_ptr(), 4, wc.as_mut_ptr()) };
            if n != 0 {
                break n;
            }
            if let Some(c) = ch.get_event(true).unwrap() {
                assert_eq!(c, cq.as_ptr() as usize);
                sleeps += 1;
            }
        };
        assert_eq!(n, 1, "round {i}");
        assert_eq!((wc[0].wr_id, wc[0].status), (i, 0), "round {i}");
        tx.send(i).unwrap();
    }
    poster.join().unwrap();
    assert!(sleeps > 0);
    drop((a, b, mr));
}
