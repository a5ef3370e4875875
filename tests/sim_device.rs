//! The software mlx5 device at the byte level: its memory as `mlx5dv_init_obj` hands it out,
//! the doorbell protocol, and WQEs deliberately built wrong, written here with the wire
//! encoder (not the mlx5 provider, which cannot build a bad WQE) and read back as raw CQEs.

use rdma_direct::providers::mlx5::{DvCq, DvQp};
use rdma_direct::providers::sim::{AsyncEvent, SimDevice, SimQpAttr};
use rdma_direct::providers::{Access, MemoryRegion, QpCaps, QpConfig, QpState, QpType};
use rdma_direct::wire::{self, Cqe64, CqeOpcode, CqeRepr, Opcode, Payload, SendWqe, Sge, Syndrome};

/// A send queue driven by hand: WQE bytes from the wire encoder, dbrec, 8-byte doorbell.
struct RawSq {
    dv: DvQp,
    pi: u32,
    bf_off: u32,
    last_ctrl: [u8; 8],
}

impl RawSq {
    fn ring_bytes(&self) -> usize {
        self.dv.sq_wqe_cnt as usize * 64
    }
    /// Encode `w` (its wqe_idx is set to the current pi unless `keep_idx`) into the ring.
    fn post(&mut self, mut w: SendWqe<'_>, keep_idx: bool) {
        if !keep_idx {
            w.wqe_idx = self.pi as u16;
        }
        let mut ring = vec![0u8; self.ring_bytes()];
        let size = wire::emit_send_wqe(&mut ring, &w).expect("encodable");
        let slot = (w.wqe_idx as usize) & (self.dv.sq_wqe_cnt as usize - 1);
        self.copy_in(&ring, slot, size.wqebbs as usize);
        self.pi = self.pi.wrapping_add(size.wqebbs as u32);
    }
    /// Copy raw WQEBBs from a ring image into device memory (following the wrap) and
    /// remember the first 8 bytes as the doorbell word.
    fn copy_in(&mut self, ring: &[u8], slot: usize, wqebbs: usize) {
        let cnt = self.dv.sq_wqe_cnt as usize;
        for i in 0..wqebbs {
            let s = (slot + i) & (cnt - 1);
            for b in 0..64 {
                // SAFETY: `s < sq_wqe_cnt`, so the byte lies in the SQ ring the sim handed
                // out; the device reads it only after the doorbell below.
                unsafe {
                    std::ptr::write_volatile(self.dv.sq_buf.add(s * 64 + b), ring[s * 64 + b])
                };
            }
        }
        self.last_ctrl
            .copy_from_slice(&ring[slot * 64..slot * 64 + 8]);
    }
    /// Write raw bytes as one WQE at pi (for layouts the encoder refuses to produce).
    fn post_raw(&mut self, bytes: &[u8; 64]) {
        let mut ring = vec![0u8; self.ring_bytes()];
        let slot = self.pi as usize & (self.dv.sq_wqe_cnt as usize - 1);
        ring[slot * 64..slot * 64 + 64].copy_from_slice(bytes);
        self.copy_in(&ring, slot, 1);
        self.pi = self.pi.wrapping_add(1);
    }
    fn dbrec_only(&mut self) {
        // SAFETY: dbrec points at the QP's two 32-bit doorbell record words.
        unsafe { std::ptr::write_volatile(self.dv.dbrec.add(1), (self.pi & 0xffff).to_be()) };
    }
    /// BlueFlame: the whole last WQE (one WQEBB here) into the BF half, 8 bytes at a time,
    /// with `flip` XORed into byte 20 (0 = a faithful copy).
    fn blueflame(&mut self, flip: u8) {
        self.dbrec_only();
        let slot = (self.pi.wrapping_sub(1) as usize) & (self.dv.sq_wqe_cnt as usize - 1);
        let mut wqe = [0u8; 64];
        for (b, x) in wqe.iter_mut().enumerate() {
            // SAFETY: inside the SQ ring.
            *x = unsafe { std::ptr::read_volatile(self.dv.sq_buf.add(slot * 64 + b)) };
        }
        wqe[20] ^= flip;
        for (k, chunk) in wqe.chunks_exact(8).enumerate() {
            let w = u64::from_ne_bytes(chunk.try_into().unwrap());
            // SAFETY: within the 256-byte BlueFlame half at bf_reg + bf_off, 8-aligned.
            unsafe {
                std::ptr::write_volatile(
                    self.dv.bf_reg.add(self.bf_off as usize + k * 8) as *mut u64,
                    w,
                )
            };
        }
        self.bf_off ^= self.dv.bf_size;
    }
    fn doorbell(&mut self) {
        self.dbrec_only();
        let w = u64::from_ne_bytes(self.last_ctrl);
        // SAFETY: bf_reg + bf_off is one of the two 8-aligned BlueFlame halves of this QP.
        unsafe {
            std::ptr::write_volatile(self.dv.bf_reg.add(self.bf_off as usize) as *mut u64, w)
        };
        self.bf_off ^= self.dv.bf_size;
    }
}

/// A CQ read by hand.
struct RawCq {
    dv: DvCq,
    ci: u32,
}

impl RawCq {
    fn op_own(&self, i: u32) -> u8 {
        let off = wire::cqe64_offset(i, self.dv.cqe_cnt, self.dv.cqe_size as usize);
        // SAFETY: offset inside the CQ ring.
        unsafe { std::ptr::read_volatile(self.dv.buf.add(off + 63)) }
    }
    fn poll(&mut self) -> Option<CqeRepr> {
        if !wire::cqe_sw_owned(self.op_own(self.ci), self.ci, self.dv.cqe_cnt) {
            return None;
        }
        let off = wire::cqe64_offset(self.ci, self.dv.cqe_cnt, self.dv.cqe_size as usize);
        let mut b = [0u8; 64];
        for (i, x) in b.iter_mut().enumerate() {
            // SAFETY: inside the CQ ring; the CQE is software owned (checked above).
            *x = unsafe { std::ptr::read_volatile(self.dv.buf.add(off + i)) };
        }
        self.ci += 1;
        // SAFETY: dbrec[0] of the CQ.
        unsafe { std::ptr::write_volatile(self.dv.dbrec, (self.ci & 0xff_ffff).to_be()) };
        Some(CqeRepr::parse(&Cqe64::new_unchecked(&b[..])).unwrap())
    }
    fn drain(&mut self) -> Vec<CqeRepr> {
        std::iter::from_fn(|| self.poll()).collect()
    }
}

struct Rig {
    dev: SimDevice,
    sq: RawSq,
    cq: RawCq,
    qpn: u32,
    peer: u32,
    pd: u32,
    _owners: Vec<rdma_direct::providers::sim::SimOwner>,
}

/// Two RC QPs in RTS, looped to each other; `a` is driven raw.
fn rig(cqe: u32, rnr_retry: u8) -> Rig {
    let dev = SimDevice::new();
    let pd = dev.alloc_pd_raw();
    let (cq, cq_o) = dev.create_cq_dv(cqe).unwrap();
    let (cq2, cq2_o) = dev.create_cq_dv(64).unwrap();
    let cfg = QpConfig {
        qp_type: QpType::Rc,
        caps: QpCaps {
            max_send_wr: 8,
            ..QpCaps::default()
        },
        sq_sig_all: false,
    };
    let (qa, _, qa_o) = dev.create_qp_dv(pd, &cfg, cq.cqn, cq.cqn, None).unwrap();
    let (qb, _, qb_o) = dev.create_qp_dv(pd, &cfg, cq2.cqn, cq2.cqn, None).unwrap();
    for (me, other) in [(qa.qpn, qb.qpn), (qb.qpn, qa.qpn)] {
        let attr = SimQpAttr {
            remote_qpn: other,
            rnr_retry,
            retry_cnt: 3,
            access: Access::ALL,
            ..SimQpAttr::default()
        };
        for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
            dev.modify_qp(me, s, Some(attr)).unwrap();
        }
    }
    Rig {
        dev,
        sq: RawSq {
            dv: qa,
            pi: 0,
            bf_off: 0,
            last_ctrl: [0; 8],
        },
        cq: RawCq { dv: cq, ci: 0 },
        qpn: qa.qpn,
        peer: qb.qpn,
        pd,
        _owners: vec![cq_o, cq2_o, qa_o, qb_o],
    }
}

fn write_wqe<'a>(qpn: u32, sge: &'a [Sge], raddr: u64, rkey: u32) -> SendWqe<'a> {
    SendWqe {
        fm_ce_se: wire::MLX5_WQE_CTRL_CQ_UPDATE,
        raddr: Some((raddr, rkey)),
        data: Payload::Sges(sge),
        ..SendWqe::new(Opcode::RdmaWrite, 0, qpn)
    }
}

#[test]
fn device_memory_is_laid_out_as_mlx5dv_init_obj_gives_it() {
    let dev = SimDevice::new();
    let (cq, _o) = dev.create_cq_dv(100).unwrap();
    assert_eq!(cq.cqe_cnt, 128);
    assert_eq!(cq.cqe_size, 64);
    assert_eq!(cq.buf as usize % 4096, 0);
    for i in 0..cq.cqe_cnt as usize {
        for b in 0..64 {
            // SAFETY: inside the CQ ring.
            let v = unsafe { std::ptr::read_volatile(cq.buf.add(i * 64 + b)) };
            // A new CQ: op_own = INVALID << 4, owner 0 (rdma-core mlx5_alloc_cq_buf); the rest 0.
            assert_eq!(v, if b == 63 { 0xf0 } else { 0 }, "cqe {i} byte {b}");
        }
    }
    // SAFETY: the CQ dbrec (two words).
    assert_eq!(
        unsafe {
            (
                std::ptr::read_volatile(cq.dbrec),
                std::ptr::read_volatile(cq.dbrec.add(1)),
            )
        },
        (0, 0)
    );
    let pd = dev.alloc_pd_raw();
    let cfg = QpConfig {
        qp_type: QpType::Rc,
        caps: QpCaps {
            max_send_wr: 10,
            max_recv_wr: 5,
            max_send_sge: 2,
            max_recv_sge: 3,
            max_inline_data: 60,
        },
        sq_sig_all: false,
    };
    let (qp, caps, _q) = dev.create_qp_dv(pd, &cfg, cq.cqn, cq.cqn, None).unwrap();
    assert_eq!(qp.sq_stride, 64);
    assert!(qp.sq_wqe_cnt.is_power_of_two());
    assert!(
        caps.max_send_wr >= 10 && caps.max_inline_data >= 60,
        "{caps:?}"
    );
    assert_eq!((qp.rq_wqe_cnt, qp.rq_stride), (8, 64));
    assert_eq!((caps.max_recv_wr, caps.max_recv_sge), (8, 4));
    assert_eq!(qp.bf_size, 256);
    assert_eq!(
        qp.bf_reg as usize % 4096,
        0x800,
        "first bfreg of the UAR page"
    );
    assert_eq!(qp.sq_buf as usize % 4096, 0);
}

#[test]
fn a_dbrec_update_without_a_uar_write_is_not_a_doorbell() {
    let mut r = rig(16, 7);
    let mut mem = vec![0u8; 256];
    // SAFETY: `mem` outlives the MR.
    let mr = unsafe {
        r.dev
            .reg_sim_mr(&pd_of(&r), mem.as_mut_ptr(), 256, Access::ALL)
    }
    .unwrap();
    mem[..8].copy_from_slice(b"abcdefgh");
    let sge = [mr.sge(0, 8).into()];
    r.sq.post(write_wqe(r.qpn, &sge, mr.addr() + 128, mr.rkey()), false);
    r.sq.dbrec_only();
    assert_eq!(r.dev.run_until_idle(), 0);
    assert!(r.cq.drain().is_empty());
    r.sq.doorbell();
    r.dev.run_until_idle();
    let c = r.cq.drain();
    assert_eq!(c.len(), 1);
    assert_eq!(
        (c[0].opcode, c[0].qpn, c[0].wqe_counter, c[0].s_wqe_opcode),
        (CqeOpcode::Req, r.qpn, 0, 0x08)
    );
    assert_eq!(&mem[128..136], b"abcdefgh");
}

fn pd_of(r: &Rig) -> rdma_direct::providers::sim::SimPd {
    // The raw PD number wrapped for reg_sim_mr.
    rdma_direct::providers::sim::SimPd::from_raw(r.pd)
}

fn expect_err(c: &CqeRepr, qpn: u32, idx: u16, syn: Syndrome) {
    assert_eq!(c.opcode, CqeOpcode::ReqErr, "{c:?}");
    assert_eq!(c.qpn, qpn);
    assert_eq!(c.wqe_counter, idx);
    assert_eq!(c.syndrome, syn, "{c:?}");
}

#[test]
fn bad_ds_is_loc_qp_op_then_the_rest_is_flushed() {
    let mut r = rig(16, 7);
    let mut mem = vec![0u8; 256];
    // SAFETY: `mem` outlives the MR.
    let mr = unsafe {
        r.dev
            .reg_sim_mr(&pd_of(&r), mem.as_mut_ptr(), 256, Access::ALL)
    }
    .unwrap();
    let sge = [mr.sge(0, 8).into()];
    // A WRITE whose ctrl says ds = 1: no room for its raddr and data segments.
    let mut ring = vec![0u8; r.sq.ring_bytes()];
    wire::emit_send_wqe(
        &mut ring,
        &write_wqe(r.qpn, &sge, mr.addr() + 64, mr.rkey()),
    )
    .unwrap();
    let mut bad = [0u8; 64];
    bad.copy_from_slice(&ring[..64]);
    bad[7] = (bad[7] & !0x3f) | 1;
    r.sq.post_raw(&bad);
    // A good, unsignaled WRITE after it: flushed anyway (one flush CQE per WQE).
    let mut w = write_wqe(r.qpn, &sge, mr.addr() + 64, mr.rkey());
    w.fm_ce_se = 0;
    r.sq.post(w, false);
    r.sq.doorbell();
    r.dev.run_until_idle();
    let c = r.cq.drain();
    assert_eq!(c.len(), 2, "{c:?}");
    expect_err(&c[0], r.qpn, 0, Syndrome::LocQpOp);
    expect_err(&c[1], r.qpn, 1, Syndrome::WrFlush);
    assert_eq!(r.dev.qp_state(r.qpn), Some(QpState::Err));
    assert!(mem[64..72].iter().all(|&b| b == 0), "nothing was written");
    // ds = 0 on a fresh QP: same syndrome.
    let mut r = rig(16, 7);
    let mut zero = bad;
    zero[7] &= !0x3f;
    r.sq.post_raw(&zero);
    r.sq.doorbell();
    r.dev.run_until_idle();
    expect_err(&r.cq.drain()[0], r.qpn, 0, Syndrome::LocQpOp);
}

#[test]
fn wrong_qpn_in_ctrl_is_loc_qp_op() {
    let mut r = rig(16, 7);
    let mut mem = vec![0u8; 256];
    // SAFETY: `mem` outlives the MR.
    let mr = unsafe {
        r.dev
            .reg_sim_mr(&pd_of(&r), mem.as_mut_ptr(), 256, Access::ALL)
    }
    .unwrap();
    let sge = [mr.sge(0, 8).into()];
    r.sq.post(write_wqe(r.peer, &sge, mr.addr() + 64, mr.rkey()), false);
    r.sq.doorbell();
    r.dev.run_until_idle();
    let c = r.cq.drain();
    assert_eq!(c.len(), 1);
    expect_err(&c[0], r.qpn, 0, Syndrome::LocQpOp);
}

#[test]
fn wrong_wqe_index_is_loc_qp_op() {
    let mut r = rig(16, 7);
    let mut mem = vec![0u8; 256];
    // SAFETY: `mem` outlives the MR.
    let mr = unsafe {
        r.dev
            .reg_sim_mr(&pd_of(&r), mem.as_mut_ptr(), 256, Access::ALL)
    }
    .unwrap();
    let sge = [mr.sge(0, 8).into()];
    let mut w = write_wqe(r.qpn, &sge, mr.addr() + 64, mr.rkey());
    // Same slot, but a wqe_idx one lap ahead: the device expects 0.
    w.wqe_idx = r.sq.dv.sq_wqe_cnt as u16;
    r.sq.post(w, true);
    r.sq.pi = 1;
    r.sq.doorbell();
    r.dev.run_until_idle();
    expect_err(&r.cq.drain()[0], r.qpn, 0, Syndrome::LocQpOp);
}

#[test]
fn lkey_of_another_pd_is_loc_prot() {
    let mut r = rig(16, 7);
    let other_pd = r.dev.alloc_sim_pd();
    let mut mine = vec![0u8; 256];
    let mut theirs = vec![7u8; 256];
    // SAFETY: both vectors outlive their MRs.
    let mr = unsafe {
        r.dev
            .reg_sim_mr(&pd_of(&r), mine.as_mut_ptr(), 256, Access::ALL)
    }
    .unwrap();
    // SAFETY: as above.
    let foreign = unsafe {
        r.dev
            .reg_sim_mr(&other_pd, theirs.as_mut_ptr(), 256, Access::ALL)
    }
    .unwrap();
    let sge = [foreign.sge(0, 8).into()];
    r.sq.post(write_wqe(r.qpn, &sge, mr.addr(), mr.rkey()), false);
    r.sq.doorbell();
    r.dev.run_until_idle();
    expect_err(&r.cq.drain()[0], r.qpn, 0, Syndrome::LocProt);
    assert!(mine.iter().all(|&b| b == 0));
    // An SGE past the end of its own MR: LOC_PROT too.
    let mut r = rig(16, 7);
    // SAFETY: `mine` outlives the MR.
    let mr = unsafe {
        r.dev
            .reg_sim_mr(&pd_of(&r), mine.as_mut_ptr(), 256, Access::ALL)
    }
    .unwrap();
    let sge = [Sge {
        addr: mr.addr() + 250,
        length: 8,
        lkey: mr.lkey(),
    }];
    r.sq.post(write_wqe(r.qpn, &sge, mr.addr(), mr.rkey()), false);
    r.sq.doorbell();
    r.dev.run_until_idle();
    expect_err(&r.cq.drain()[0], r.qpn, 0, Syndrome::LocProt);
    drop(theirs);
}

#[test]
fn rkey_out_of_bounds_is_rem_access() {
    let mut r = rig(16, 7);
    let mut mem = vec![0u8; 256];
    // SAFETY: `mem` outlives the MR.
    let mr = unsafe {
        r.dev
            .reg_sim_mr(&pd_of(&r), mem.as_mut_ptr(), 256, Access::ALL)
    }
    .unwrap();
    let sge = [mr.sge(0, 16).into()];
    r.sq.post(write_wqe(r.qpn, &sge, mr.addr() + 250, mr.rkey()), false);
    r.sq.doorbell();
    r.dev.run_until_idle();
    expect_err(&r.cq.drain()[0], r.qpn, 0, Syndrome::RemAccess);
    assert_eq!(
        r.dev.qp_state(r.peer),
        Some(QpState::Err),
        "responder in ERR too"
    );
}

/// A zero-length RDMA WRITE carries no address or rkey the responder checks (IBA C9-88, as
/// rxe): with an rkey that names nothing it completes.
#[test]
fn a_zero_length_write_checks_no_rkey() {
    let mut r = rig(16, 7);
    r.sq.post(write_wqe(r.qpn, &[], 0, 0xdead), false);
    r.sq.doorbell();
    r.dev.run_until_idle();
    let c = r.cq.drain();
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].opcode, CqeOpcode::Req, "{:?}", c[0]);
    assert_eq!(r.dev.qp_state(r.peer), Some(QpState::Rts));
}

#[test]
fn inline_length_past_ds_is_loc_qp_op() {
    let mut r = rig(16, 7);
    let mut mem = vec![0u8; 256];
    // SAFETY: `mem` outlives the MR.
    let mr = unsafe {
        r.dev
            .reg_sim_mr(&pd_of(&r), mem.as_mut_ptr(), 256, Access::ALL)
    }
    .unwrap();
    let data = [1u8; 8];
    let w = SendWqe {
        fm_ce_se: wire::MLX5_WQE_CTRL_CQ_UPDATE,
        raddr: Some((mr.addr(), mr.rkey())),
        data: Payload::Inline(&data),
        ..SendWqe::new(Opcode::RdmaWrite, 0, r.qpn)
    };
    let mut ring = vec![0u8; r.sq.ring_bytes()];
    wire::emit_send_wqe(&mut ring, &w).unwrap();
    let mut bad = [0u8; 64];
    bad.copy_from_slice(&ring[..64]);
    // The inline header (at byte 32) claims 200 bytes in a ds = 3 WQE.
    bad[32..36].copy_from_slice(&(0x8000_0000u32 | 200).to_be_bytes());
    r.sq.post_raw(&bad);
    r.sq.doorbell();
    r.dev.run_until_idle();
    expect_err(&r.cq.drain()[0], r.qpn, 0, Syndrome::LocQpOp);
    assert!(mem.iter().all(|&b| b == 0));
}

#[test]
fn unsignaled_success_writes_no_cqe_and_the_next_signaled_names_its_index() {
    let mut r = rig(16, 7);
    let mut mem = vec![0u8; 256];
    // SAFETY: `mem` outlives the MR.
    let mr = unsafe {
        r.dev
            .reg_sim_mr(&pd_of(&r), mem.as_mut_ptr(), 256, Access::ALL)
    }
    .unwrap();
    let sge = [mr.sge(0, 8).into()];
    for i in 0..3 {
        let mut w = write_wqe(r.qpn, &sge, mr.addr() + 64, mr.rkey());
        if i < 2 {
            w.fm_ce_se = 0;
        }
        r.sq.post(w, false);
    }
    r.sq.doorbell();
    r.dev.run_until_idle();
    let c = r.cq.drain();
    assert_eq!(c.len(), 1);
    assert_eq!((c[0].opcode, c[0].wqe_counter), (CqeOpcode::Req, 2));
}

#[test]
fn cq_overrun_is_reported_not_overwritten() {
    let mut r = rig(2, 7);
    let mut mem = vec![0u8; 256];
    // SAFETY: `mem` outlives the MR.
    let mr = unsafe {
        r.dev
            .reg_sim_mr(&pd_of(&r), mem.as_mut_ptr(), 256, Access::ALL)
    }
    .unwrap();
    let sge = [mr.sge(0, 8).into()];
    for _ in 0..3 {
        r.sq.post(write_wqe(r.qpn, &sge, mr.addr() + 64, mr.rkey()), false);
    }
    r.sq.doorbell();
    r.dev.run_until_idle();
    // Nobody consumed: two CQEs fit, the third would overwrite the first.
    assert_eq!(r.cq.op_own(0) >> 4, 0, "first CQE intact");
    assert_eq!(r.cq.op_own(1) >> 4, 0);
    assert!(r.dev.cq_in_error(r.cq.dv.cqn));
    let ev = r.dev.take_events();
    assert!(
        ev.contains(&AsyncEvent::CqOverrun { cqn: r.cq.dv.cqn }),
        "{ev:?}"
    );
    assert_eq!(r.dev.qp_state(r.qpn), Some(QpState::Err));
    let c = r.cq.drain();
    assert_eq!(c.iter().map(|c| c.wqe_counter).collect::<Vec<_>>(), [0, 1]);
}

#[test]
fn rnr_with_retries_fails_and_rnr_7_waits_for_a_receive() {
    // rnr_retry = 1: a SEND with no receive posted fails with RNR_RETRY_EXC.
    let mut r = rig(16, 1);
    let mut mem = vec![0u8; 256];
    // SAFETY: `mem` outlives the MR.
    let mr = unsafe {
        r.dev
            .reg_sim_mr(&pd_of(&r), mem.as_mut_ptr(), 256, Access::ALL)
    }
    .unwrap();
    let sge = [mr.sge(0, 8).into()];
    let send = SendWqe {
        fm_ce_se: wire::MLX5_WQE_CTRL_CQ_UPDATE,
        data: Payload::Sges(&sge),
        ..SendWqe::new(Opcode::Send, 0, r.qpn)
    };
    r.sq.post(send, false);
    r.sq.doorbell();
    r.dev.run_until_idle();
    expect_err(&r.cq.drain()[0], r.qpn, 0, Syndrome::RnrRetryExc);
    // rnr_retry = 7: it waits, as long as it takes.
    let mut r = rig(16, 7);
    // SAFETY: `mem` outlives the MR.
    let mr = unsafe {
        r.dev
            .reg_sim_mr(&pd_of(&r), mem.as_mut_ptr(), 256, Access::ALL)
    }
    .unwrap();
    let sge = [mr.sge(0, 8).into()];
    let send = SendWqe {
        fm_ce_se: wire::MLX5_WQE_CTRL_CQ_UPDATE,
        data: Payload::Sges(&sge),
        ..SendWqe::new(Opcode::Send, 0, r.qpn)
    };
    r.sq.post(send, false);
    r.sq.doorbell();
    for _ in 0..100 {
        r.dev.process();
    }
    assert!(r.cq.drain().is_empty());
    assert_eq!(r.dev.qp_state(r.qpn), Some(QpState::Rts));
}

#[test]
fn invalid_transitions_are_refused_and_reset_clears_the_doorbell_state() {
    let r = rig(16, 7);
    let e = r.dev.modify_qp(r.qpn, QpState::Rtr, None).unwrap_err();
    assert!(e.to_string().contains("RTS -> RTR"), "{e}");
    r.dev.modify_qp(r.qpn, QpState::Reset, None).unwrap();
    assert!(r.dev.modify_qp(r.qpn, QpState::Rts, None).is_err());
    // SAFETY: the QP's dbrec and bf words.
    unsafe {
        assert_eq!(std::ptr::read_volatile(r.sq.dv.dbrec.add(1)), 0);
        assert_eq!(std::ptr::read_volatile(r.sq.dv.bf_reg as *const u64), 0);
    }
}

#[test]
fn blueflame_copies_are_compared_with_the_ring_in_deterministic_mode() {
    let mut r = rig(16, 7);
    let mut mem = vec![0u8; 256];
    // SAFETY: `mem` outlives the MR.
    let mr = unsafe {
        r.dev
            .reg_sim_mr(&pd_of(&r), mem.as_mut_ptr(), 256, Access::ALL)
    }
    .unwrap();
    let sge = [mr.sge(0, 8).into()];
    r.sq.post(write_wqe(r.qpn, &sge, mr.addr() + 64, mr.rkey()), false);
    r.sq.blueflame(0);
    r.dev.run_until_idle();
    let st = r.dev.stats();
    assert_eq!((st.bf_copies, st.bf_mismatches), (1, 0));
    r.sq.post(write_wqe(r.qpn, &sge, mr.addr() + 64, mr.rkey()), false);
    r.sq.blueflame(0x40);
    r.dev.run_until_idle();
    let st = r.dev.stats();
    assert_eq!((st.bf_copies, st.bf_mismatches), (1, 1));
    // A plain 8-byte doorbell after a BlueFlame copy on the same half is not a copy.
    r.sq.post(write_wqe(r.qpn, &sge, mr.addr() + 64, mr.rkey()), false);
    r.sq.doorbell();
    r.dev.run_until_idle();
    r.sq.post(write_wqe(r.qpn, &sge, mr.addr() + 64, mr.rkey()), false);
    r.sq.doorbell();
    r.dev.run_until_idle();
    let st = r.dev.stats();
    assert_eq!((st.bf_copies, st.bf_mismatches, st.doorbells), (1, 1, 4));
    assert_eq!(r.cq.drain().len(), 4);
}

#[test]
fn a_128_byte_cq_keeps_the_cqe_in_the_second_half() {
    let mut dev = SimDevice::new();
    assert!(dev.set_cqe_size(96).is_err());
    dev.set_cqe_size(128).unwrap();
    let (cq, _o) = dev.create_cq_dv(4).unwrap();
    assert_eq!((cq.cqe_cnt, cq.cqe_size), (4, 128));
    for i in 0..4usize {
        for b in 0..128 {
            // SAFETY: inside the CQ ring.
            let v = unsafe { std::ptr::read_volatile(cq.buf.add(i * 128 + b)) };
            assert_eq!(v, if b == 127 { 0xf0 } else { 0 }, "slot {i} byte {b}");
        }
    }
}
