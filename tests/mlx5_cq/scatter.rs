//! Data in the CQE: scatter-to-CQE of a receive, of READ and atomic results (and the 64-byte
//! form), and 128-byte CQEs using their second half.

use super::*;

#[test]
fn scatter_to_cqe_data_lands_in_the_receive_buffer() {
    let (mut cq, mut d) = cq(16, 64);
    let (mut qp, _dq) = qp_on(&mut cq, 0x80, None);
    let mut buf = vec![0u8; 40];
    let sge = [Sge {
        addr: buf.as_mut_ptr() as u64,
        length: 40,
        lkey: 1,
    }];
    qp.rq()
        .post_recv(RecvWr {
            wr_id: 7,
            sges: &sge,
        })
        .unwrap();
    qp.rq().ring();
    // 20 bytes in CQE bytes 0..32 (op_own bit 0x4).
    let mut c = Cqe::resp(2, 0x80, 0, 20, 0);
    for i in 0..20 {
        c.0[i] = 0xc0 + i as u8;
    }
    c.0[63] |= 0x4;
    d.push(&c);
    let out = poll_all(&mut cq);
    assert_eq!((out[0].wr_id, out[0].byte_len), (7, 20));
    let want: Vec<u8> = (0..20).map(|i| 0xc0 + i as u8).collect();
    assert_eq!(&buf[..20], &want[..]);
    assert_eq!(&buf[20..], &[0u8; 20]);
}

#[test]
fn cqe128_uses_the_second_half() {
    let (mut cq, mut d) = cq(8, 128);
    let (mut qp, _dq) = qp_on(&mut cq, 0x90, None);
    qp.sq().post(SendWr::send(4, &SGE).signaled()).unwrap();
    qp.sq().ring();
    // Garbage in the first half must not matter.
    d.mem.fill(0, 64, 0xee);
    d.push(&Cqe::req(0x90, 0, 0x0a, 0));
    let c = poll_all(&mut cq);
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].wr_id, 4);
}

#[test]
fn scatter_to_cqe_of_read_and_atomic_results_and_the_64_byte_form() {
    // READ and atomic results scattered into the CQE (op_own 0x4) land in the local SGE the
    // WQE named.
    let (mut cq, mut d) = cq(16, 64);
    let (mut qp, _dq) = qp_on(&mut cq, 0xa0, None);
    let mut read_buf = vec![0u8; 24];
    let mut old = 0u64;
    let rs = [Sge {
        addr: read_buf.as_mut_ptr() as u64,
        length: 24,
        lkey: 1,
    }];
    let os = [Sge {
        addr: &mut old as *mut u64 as u64,
        length: 8,
        lkey: 1,
    }];
    qp.sq()
        .post(SendWr::read(1, &rs, 0x1000, 2).signaled())
        .unwrap();
    let fa = rdma_direct::providers::SendOp::FetchAdd {
        raddr: 0x2000,
        rkey: 2,
        add: 1,
    };
    qp.sq().post(SendWr::new(2, fa, &os).signaled()).unwrap();
    qp.sq().ring();
    let mut c = Cqe::req(0xa0, 0, 0x10, 24);
    for i in 0..24 {
        c.0[i] = 0x30 + i as u8;
    }
    c.0[63] |= 0x4;
    d.push(&c);
    let mut c = Cqe::req(0xa0, 1, 0x12, 8);
    c.0[..8].copy_from_slice(&0x1122_3344_5566_7788u64.to_ne_bytes());
    c.0[63] |= 0x4;
    d.push(&c);
    let out = poll_all(&mut cq);
    assert_eq!(out.len(), 2);
    assert_eq!((out[0].opcode, out[0].byte_len), (WcOpcode::RdmaRead, 24));
    assert_eq!((out[1].opcode, out[1].byte_len), (WcOpcode::FetchAdd, 8));
    let want: Vec<u8> = (0..24).map(|i| 0x30 + i as u8).collect();
    assert_eq!(read_buf, want);
    assert_eq!(old, 0x1122_3344_5566_7788);

    // 128-byte CQEs, op_own 0x8: up to 64 bytes in the first half of the slot, spread over
    // two receive SGEs.
    let (mut cq2, mut d) = self::cq(8, 128);
    let (mut qp, _dq) = qp_on(&mut cq2, 0xa1, None);
    let mut a = vec![0u8; 16];
    let mut b = vec![0u8; 48];
    let sges = [
        Sge {
            addr: a.as_mut_ptr() as u64,
            length: 16,
            lkey: 1,
        },
        Sge {
            addr: b.as_mut_ptr() as u64,
            length: 48,
            lkey: 1,
        },
    ];
    qp.rq()
        .post_recv(RecvWr {
            wr_id: 5,
            sges: &sges,
        })
        .unwrap();
    qp.rq().ring();
    let data: Vec<u8> = (0..50).map(|i| 0x80 + i as u8).collect();
    d.mem.write(0, &data); // first half of slot 0
    let mut c = Cqe::resp(2, 0xa1, 0, 50, 0);
    c.0[63] |= 0x8;
    d.push(&c);
    let out = poll_all(&mut cq2);
    assert_eq!((out[0].wr_id, out[0].byte_len), (5, 50));
    assert_eq!(&a[..], &data[..16]);
    assert_eq!(&b[..34], &data[16..]);
    assert_eq!(&b[34..], &[0u8; 14]);
}
