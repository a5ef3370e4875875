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
//! its bytes come from [`CqeRepr::emit`], and every
//! number (opcodes, syndromes, flag bits, offsets) is a `crate::wire` name: this module
//! defines no mlx5 layout fact of its own.

use super::{AsyncEvent, Engine};
use crate::clock::TimestampKind;
use crate::wire::{self, Cqe64, CqeRepr};
use crate::QpState;

/// The bytes of the CQE `r` describes (every byte written, through [`CqeRepr::emit`]). The
/// engine stores bytes 0..63 first and `op_own` last.
fn cqe_bytes(r: &CqeRepr) -> [u8; wire::MLX5_CQE64_LEN] {
    let mut b = [0u8; wire::MLX5_CQE64_LEN];
    r.emit(&mut Cqe64::new_unchecked(&mut b[..]))
        .expect("a 64-byte buffer holds a CQE");
    b
}

/// A CQE the fault injector holds back until engine pass `release_pass`.
pub(super) struct Held {
    pub(super) fields: CqeRepr,
    pub(super) stream: u64,
    pub(super) release_pass: u64,
}

impl Engine {
    pub(super) fn push_cqe(&mut self, cqn: u32, f: CqeRepr, stream: u64, torn_ok: bool) {
        let pass = self.stats.passes;
        let mut delay = 0;
        if let Some(fi) = self.fault.as_mut() {
            if fi.rng.chance(fi.cfg.delay_ppm) {
                fi.stats.delayed += 1;
                delay = 1 + fi.rng.below(u64::from(fi.cfg.max_delay_passes.max(1)));
            }
        }
        let Some(cq) = self.cqs.get_mut(&cqn) else {
            return;
        };
        if delay > 0 || !cq.held.is_empty() {
            self.maybe_held = true;
            cq.held.push_back(Held {
                fields: f,
                stream,
                release_pass: pass + delay,
            });
            return;
        }
        self.write_cqe(cqn, f, torn_ok);
    }

    /// Release held CQEs that are due, keeping each queue's order; with the reorder fault,
    /// a due CQE may overtake older ones of *other* queues.
    pub(super) fn release_held(&mut self, torn_ok: bool) -> usize {
        if !self.maybe_held {
            return 0;
        }
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

    /// Write one CQE: body first, then `op_own` with a release store. Checks for overrun.
    pub(super) fn write_cqe(&mut self, cqn: u32, mut f: CqeRepr, torn_ok: bool) {
        let spins = self.fault.as_ref().map_or(0, |f| f.cfg.torn_write_spins);
        let Some(cq) = self.cqs.get_mut(&cqn) else {
            return;
        };
        if cq.overrun {
            self.stats.cqes_dropped += 1;
            return;
        }
        let ci = cq.mem.load_be32(cq.dbrec_off + 4 * wire::MLX5_CQ_SET_CI) & wire::MLX5_CQ_CI_MASK;
        if (cq.pi.wrapping_sub(ci) & wire::MLX5_CQ_CI_MASK) >= cq.cqe_cnt {
            self.stats.cqes_dropped += 1;
            self.cq_error(cqn);
            return;
        }
        // The time of completion, in the CQ's format (the CQE's timestamp field).
        f.timestamp = match cq.ts {
            None => 0,
            Some(TimestampKind::FreeRunning) => {
                let now = self.clock.cycles();
                self.clock.maybe_refresh(now);
                now
            }
            Some(TimestampKind::RealTime) => self.clock.real_time_raw(),
        };
        f.owner = wire::cqe_owner_for(cq.pi, cq.cqe_cnt);
        let bytes = cqe_bytes(&f);
        let off = wire::cqe64_offset(cq.pi, cq.cqe_cnt, cq.cqe_size as usize);
        let op_own = wire::offset::cqe64::OP_OWN;
        cq.mem.write(off, &bytes[..op_own]);
        if torn_ok {
            for _ in 0..spins {
                std::hint::spin_loop();
            }
        }
        cq.mem.store_u8_release(off + op_own, bytes[op_own]);
        cq.pi = cq.pi.wrapping_add(1);
        self.stats.cqes += 1;
        super::arm::on_cqe(
            cqn,
            &mut cq.arm,
            f.se || f.opcode.is_error(),
            &mut self.stats.events,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{CqeOpcode, Opcode, Syndrome};

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
        let b = cqe_bytes(&f);
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
        let b = cqe_bytes(&f);
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
        let b = cqe_bytes(&f);
        assert_eq!(&b[24..28], &[0x10, 0xab, 0xcd, 0xef]);
        assert_eq!(&b[36..40], &[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(b[63], 0x31);
    }
}
