//! CQE writing: the only code that stores into a CQ ring.
//!
//! Reads: the CQ's doorbell record (`dbrec[0]`, the consumer index the host publishes) and
//! the fault injector's delay, reorder and torn-write settings. Writes: CQEs into the ring
//! (bytes 0..63 first, then `op_own` with a release store; a CQ created with a
//! [`TimestampKind`] gets the device clock's time of writing in the timestamp field, so the host never sees an owner
//! bit before the body), the CQ's producer index, `EngineStats::cqes` /
//! `EngineStats::cqes_dropped`, and on overrun an [`AsyncEvent::CqOverrun`] plus one
//! [`AsyncEvent::QpFatal`] per QP completing on that CQ (moved to ERR).
//!
//! Invariants: a CQE is never written over one the host has not consumed (the ring being
//! full puts the CQ in error instead, and a CQ in error writes nothing more); the owner bit
//! is the wrap parity of the producer index (`pi & cqe_cnt`); CQEs of one stream (one QP's
//! send or receive side) leave in the order they were pushed, also when the fault injector
//! holds some back.
//!
//! What a CQE says is a [`CqeRepr`] (the wire layer's, owner bit and timestamp filled in here);
//! its bytes come from [`CqeRepr::to_words`], and every
//! number (opcodes, syndromes, flag bits, offsets) is a `crate::wire` name: this module
//! defines no mlx5 layout fact of its own.

use super::{AsyncEvent, CqCtx, Engine, EngineStats};
use crate::clock::TimestampKind;
use crate::sim::clock::SimClock;
use crate::wire::{self, CqeRepr};
use crate::QpState;

// `DevMem::write64_last_release` stores the last byte last: that byte is `op_own`.
const _: () = assert!(wire::offset::cqe64::OP_OWN == wire::MLX5_CQE64_LEN - 1);

/// A CQE the fault injector holds back until engine pass `release_pass`.
pub(super) struct Held {
    pub(super) fields: CqeRepr,
    pub(super) stream: u64,
    pub(super) release_pass: u64,
}

impl Engine {
    /// Complete `f` on CQ `cqn` (stream `stream`: one QP's send or receive side): written
    /// now, or held back behind the CQ's held CQEs or by the fault injector's delay. Not
    /// inlined: its callers are many and cold next to it, and a profile names it.
    #[inline(never)]
    pub(super) fn push_cqe(&mut self, cqn: u32, f: CqeRepr, stream: u64, torn_ok: bool) {
        if self.fault.is_some() {
            return self.push_cqe_faulty(cqn, f, stream, torn_ok);
        }
        let Some(cq) = self.cqs.get_mut(&cqn) else {
            return;
        };
        if !cq.held.is_empty() {
            return self.hold_cqe(cqn, f, stream, 0);
        }
        if !store_cqe(cqn, cq, f, &self.clock, &mut self.stats, 0, torn_ok) {
            self.cq_error(cqn);
        }
    }

    /// [`Engine::push_cqe`] with the fault injector on (its delay, its torn writes).
    #[cold]
    #[inline(never)]
    fn push_cqe_faulty(&mut self, cqn: u32, f: CqeRepr, stream: u64, torn_ok: bool) {
        let mut delay = 0;
        let mut spins = 0;
        if let Some(fi) = self.fault.as_mut() {
            if fi.rng.chance(fi.cfg.delay_ppm) {
                fi.stats.delayed += 1;
                delay = 1 + fi.rng.below(u64::from(fi.cfg.max_delay_passes.max(1)));
            }
            spins = fi.cfg.torn_write_spins;
        }
        let Some(cq) = self.cqs.get_mut(&cqn) else {
            return;
        };
        if delay > 0 || !cq.held.is_empty() {
            return self.hold_cqe(cqn, f, stream, delay);
        }
        if !store_cqe(cqn, cq, f, &self.clock, &mut self.stats, spins, torn_ok) {
            self.cq_error(cqn);
        }
    }

    /// Hold `f` back on CQ `cqn` (present) until `delay` passes from now, behind the CQEs
    /// it already holds.
    #[cold]
    #[inline(never)]
    fn hold_cqe(&mut self, cqn: u32, f: CqeRepr, stream: u64, delay: u64) {
        let release_pass = self.stats.passes + delay;
        if let Some(cq) = self.cqs.get_mut(&cqn) {
            self.maybe_held = true;
            cq.held.push_back(Held {
                fields: f,
                stream,
                release_pass,
            });
        }
    }

    /// Release held CQEs that are due, keeping each queue's order; with the reorder fault,
    /// a due CQE may overtake older ones of *other* queues.
    ///
    /// Inlined: a pass calls it between QPs, and almost always no CQE is held.
    #[inline]
    pub(super) fn release_held(&mut self, torn_ok: bool) -> usize {
        if !self.maybe_held {
            return 0;
        }
        self.release_due(torn_ok)
    }

    /// [`Engine::release_held`] once some CQ may hold CQEs.
    #[inline(never)]
    fn release_due(&mut self, torn_ok: bool) -> usize {
        let pass = self.stats.passes;
        let cqns: Vec<u32> = self
            .cqs
            .iter()
            .filter(|(_, c)| !c.held.is_empty())
            .map(|(&n, _)| n)
            .collect();
        let mut n = 0;
        for cqn in cqns {
            loop {
                let reorder = match self.fault.as_mut() {
                    Some(f) => f.rng.chance(f.cfg.reorder_ppm),
                    None => false,
                };
                let cq = self.cqs.get_mut(&cqn).expect("present");
                // Candidates: due, and no older held CQE of the same stream.
                let mut pick = None;
                let mut seen: [u64; 8] = [u64::MAX; 8];
                let mut nseen = 0;
                for (i, h) in cq.held.iter().enumerate().take(8) {
                    let blocked = seen[..nseen].contains(&h.stream);
                    if !blocked && h.release_pass <= pass {
                        pick = Some(i);
                        if !reorder || i > 0 {
                            break;
                        }
                    }
                    if nseen < 8 {
                        seen[nseen] = h.stream;
                        nseen += 1;
                    }
                }
                let Some(i) = pick else { break };
                if i > 0 {
                    if let Some(f) = self.fault.as_mut() {
                        f.stats.reordered += 1;
                    }
                }
                let h = cq.held.remove(i).expect("index valid");
                self.write_cqe(cqn, h.fields, torn_ok);
                n += 1;
            }
        }
        self.maybe_held = self.cqs.values().any(|c| !c.held.is_empty());
        n
    }

    /// CQ `cqn` goes into error (an overrun, or an injected fault): it takes no more CQEs,
    /// [`AsyncEvent::CqOverrun`] is raised, the QPs completing on it move to ERR (one
    /// [`AsyncEvent::QpFatal`] each), and the host's CQ state is told (its QPs then refuse
    /// posts naming the CQ, its poll reports the error).
    pub(crate) fn cq_error(&mut self, cqn: u32) {
        let Some(cq) = self.cqs.get_mut(&cqn) else {
            return;
        };
        if cq.overrun {
            return;
        }
        cq.overrun = true;
        let host = cq.host.as_ref().and_then(std::sync::Weak::upgrade);
        self.events.push(AsyncEvent::CqOverrun { cqn });
        // The QPs completing on this CQ cannot go on: move them to ERR.
        let hit: Vec<u32> = self
            .qps
            .values()
            .filter(|q| q.send_cqn == cqn || q.recv_cqn == cqn)
            .map(|q| q.qpn)
            .collect();
        for qpn in hit {
            if let Some(q) = self.qps.get_mut(&qpn) {
                q.state = QpState::Err;
            }
            self.events.push(AsyncEvent::QpFatal { qpn });
        }
        if let Some(h) = host {
            h.fail();
        }
    }

    /// QP `qpn` moves to ERR with [`AsyncEvent::QpFatal`] (an injected local fatal error):
    /// the device flushes what it holds, and the host's QP state is told (posts refused,
    /// `state()` ERR).
    pub(crate) fn qp_fatal(&mut self, qpn: u32) {
        let Some(q) = self.qps.get_mut(&qpn) else {
            return;
        };
        q.state = QpState::Err;
        let host = q.host.as_ref().and_then(std::sync::Weak::upgrade);
        self.events.push(AsyncEvent::QpFatal { qpn });
        if let Some(h) = host {
            h.fail();
        }
    }

    /// Write one CQE on CQ `cqn` (see [`store_cqe`]); a full ring puts the CQ in error.
    pub(super) fn write_cqe(&mut self, cqn: u32, f: CqeRepr, torn_ok: bool) {
        let spins = self.fault.as_ref().map_or(0, |f| f.cfg.torn_write_spins);
        let Some(cq) = self.cqs.get_mut(&cqn) else {
            return;
        };
        if !store_cqe(cqn, cq, f, &self.clock, &mut self.stats, spins, torn_ok) {
            self.cq_error(cqn);
        }
    }
}

/// Write one CQE into `cq` (CQ `cqn`): body first, then `op_own` with a release store (with
/// `torn_ok`, `spins` spin-loop iterations between them). A CQ in error takes nothing more
/// (counted as dropped); a full ring drops the CQE (counted) and returns false, the one case
/// where the caller must put the CQ in error. Stamps the timestamp per the CQ's format and the owner bit per `cq.pi`.
#[inline(always)]
fn store_cqe(
    cqn: u32,
    cq: &mut CqCtx,
    mut f: CqeRepr,
    clock: &SimClock,
    stats: &mut EngineStats,
    spins: u32,
    torn_ok: bool,
) -> bool {
    if cq.overrun {
        stats.cqes_dropped += 1;
        return true;
    }
    let ci = cq.mem.load_be32(cq.dbrec_off + 4 * wire::MLX5_CQ_SET_CI) & wire::MLX5_CQ_CI_MASK;
    if (cq.pi.wrapping_sub(ci) & wire::MLX5_CQ_CI_MASK) >= cq.cqe_cnt {
        stats.cqes_dropped += 1;
        return false;
    }
    // The time of completion, in the CQ's format (the CQE's timestamp field).
    f.timestamp = match cq.ts {
        None => 0,
        Some(TimestampKind::FreeRunning) => {
            let now = clock.cycles();
            clock.maybe_refresh(now);
            now
        }
        Some(TimestampKind::RealTime) => clock.real_time_raw(),
    };
    f.owner = wire::cqe_owner_for(cq.pi, cq.cqe_cnt);
    let words = f.to_words();
    let off = wire::cqe64_offset(cq.pi, cq.cqe_cnt, cq.cqe_size as usize);
    cq.mem.write64_last_release(off, &words, || {
        if torn_ok {
            for _ in 0..spins {
                std::hint::spin_loop();
            }
        }
    });
    cq.pi = cq.pi.wrapping_add(1);
    stats.cqes += 1;
    super::arm::on_cqe(
        cqn,
        &mut cq.arm,
        f.se || f.opcode.is_error(),
        &mut stats.events,
    );
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::mem::DevMem;
    use crate::wire::{Cqe64, CqeOpcode, Opcode, Syndrome};

    /// The bytes the engine stores for `f` (through `DevMem`, at slot 1 of a ring).
    fn bytes_of(f: &CqeRepr) -> [u8; wire::MLX5_CQE64_LEN] {
        let mem = DevMem::new(4096).unwrap();
        mem.write(64, &[0xa5; 64]);
        mem.write64_last_release(64, &f.to_words(), || {});
        let mut b = [0u8; wire::MLX5_CQE64_LEN];
        mem.read(64, &mut b);
        b
    }

    #[test]
    fn stored_bytes_are_the_emitted_ones() {
        let ok = CqeRepr {
            opcode: CqeOpcode::RespSendImm,
            owner: true,
            se: true,
            format: 2,
            s_wqe_opcode: 0x0a,
            qpn: 0xfe_dcba,
            wqe_counter: 0x1234,
            signature: 0x5a,
            byte_cnt: 0x0506_0708,
            imm_inval_pkey: 0x090a_0b0c,
            srqn: 0x0d0e_0f10,
            src_qp: 0x11_1213,
            flags: 0x14,
            slid: 0x1516,
            ml_path: 0x17,
            timestamp: 0x1819_1a1b_1c1d_1e1f,
            ..Default::default()
        };
        let err = CqeRepr {
            opcode: CqeOpcode::ReqErr,
            syndrome: Syndrome::RemAccess,
            vendor_syndrome: 0x88,
            ..ok
        };
        for f in [ok, err, CqeRepr::default()] {
            let mut want = [0xa5u8; wire::MLX5_CQE64_LEN];
            f.emit(&mut Cqe64::new_unchecked(&mut want[..])).unwrap();
            assert_eq!(bytes_of(&f), want, "{f:?}");
        }
    }

    #[test]
    fn the_wire_names_the_engine_matches_on_are_known_to_the_wire_enums() {
        for v in [
            wire::MLX5_OPCODE_NOP,
            wire::MLX5_OPCODE_RDMA_WRITE,
            wire::MLX5_OPCODE_RDMA_WRITE_IMM,
            wire::MLX5_OPCODE_SEND,
            wire::MLX5_OPCODE_SEND_IMM,
            wire::MLX5_OPCODE_RDMA_READ,
            wire::MLX5_OPCODE_ATOMIC_CS,
            wire::MLX5_OPCODE_ATOMIC_FA,
        ] {
            assert!(!matches!(Opcode::from(v), Opcode::Unknown(_)), "{v:#x}");
        }
        for s in [
            wire::MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR,
            wire::MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR,
            wire::MLX5_CQE_SYNDROME_LOCAL_PROT_ERR,
            wire::MLX5_CQE_SYNDROME_WR_FLUSH_ERR,
            wire::MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR,
            wire::MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR,
            wire::MLX5_CQE_SYNDROME_REMOTE_OP_ERR,
            wire::MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR,
            wire::MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR,
        ] {
            assert!(!matches!(Syndrome::from(s), Syndrome::Unknown(_)), "{s:#x}");
        }
    }

    #[test]
    fn requester_cqe_bytes() {
        let f = CqeRepr {
            opcode: CqeOpcode::Req,
            owner: true,
            qpn: 0x12_3456,
            s_wqe_opcode: wire::MLX5_OPCODE_RDMA_READ,
            wqe_counter: 0xbeef,
            byte_cnt: 0x0102_0304,
            ..Default::default()
        };
        let b = bytes_of(&f);
        assert_eq!(&b[44..48], &[1, 2, 3, 4]);
        assert_eq!(&b[56..60], &[0x10, 0x12, 0x34, 0x56]);
        assert_eq!(&b[60..62], &[0xbe, 0xef]);
        assert_eq!(b[63], 0x01);
        assert!(b[..44].iter().all(|&x| x == 0));
    }

    #[test]
    fn error_cqe_bytes() {
        let f = CqeRepr {
            opcode: CqeOpcode::RespErr,
            qpn: 7,
            syndrome: Syndrome::LocLen,
            vendor_syndrome: 0x68,
            wqe_counter: 3,
            byte_cnt: 99, // not written on error CQEs
            ..Default::default()
        };
        let b = bytes_of(&f);
        assert_eq!(b[54], 0x68);
        assert_eq!(b[55], 0x01);
        assert_eq!(&b[44..48], &[0, 0, 0, 0]);
        assert_eq!(b[63], 0xe0);
    }

    #[test]
    fn responder_cqe_grh_and_imm() {
        let f = CqeRepr {
            opcode: CqeOpcode::RespSendImm,
            owner: true,
            qpn: 9,
            src_qp: 0xabcdef,
            flags: wire::MLX5_CQE_FLAGS_GRH_PRESENT,
            imm_inval_pkey: 0xdead_beef,
            byte_cnt: 104,
            ..Default::default()
        };
        let b = bytes_of(&f);
        assert_eq!(&b[24..28], &[0x10, 0xab, 0xcd, 0xef]);
        assert_eq!(&b[36..40], &[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(b[63], 0x31);
    }
}
