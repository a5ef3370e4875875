//! CQE writing: the only code that stores into a CQ ring.
//!
//! Reads: the CQ's doorbell record (`dbrec[0]`, the consumer index the host publishes) and
//! the fault injector's delay, reorder and torn-write settings. Writes: CQEs into the ring
//! (bytes 0..63 first, then `op_own` with a release store, so the host never sees an owner
//! bit before the body), the CQ's producer index, `EngineStats::cqes` /
//! `EngineStats::cqes_dropped`, and on overrun an [`AsyncEvent::CqOverrun`] plus one
//! [`AsyncEvent::QpFatal`] per QP completing on that CQ (moved to ERR).
//!
//! Invariants: a CQE is never written over one the host has not consumed (the ring being
//! full puts the CQ in error instead, and a CQ in error writes nothing more); the owner bit
//! is the wrap parity of the producer index (`pi & cqe_cnt`); CQEs of one stream (one QP's
//! send or receive side) leave in the order they were pushed, also when the fault injector
//! holds some back.

use super::{AsyncEvent, Engine};
use crate::providers::sim::layout::CqeFields;
use crate::providers::QpState;

/// A CQE the fault injector holds back until engine pass `release_pass`.
pub(super) struct Held {
    pub(super) fields: CqeFields,
    pub(super) stream: u64,
    pub(super) release_pass: u64,
}

impl Engine {
    pub(super) fn push_cqe(&mut self, cqn: u32, f: CqeFields, stream: u64, torn_ok: bool) {
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
        n
    }

    /// Write one CQE: body first, then `op_own` with a release store. Checks for overrun.
    pub(super) fn write_cqe(&mut self, cqn: u32, f: CqeFields, torn_ok: bool) {
        let spins = self.fault.as_ref().map_or(0, |f| f.cfg.torn_write_spins);
        let Some(cq) = self.cqs.get_mut(&cqn) else {
            return;
        };
        if cq.overrun {
            self.stats.cqes_dropped += 1;
            return;
        }
        let ci = cq.mem.load_be32(cq.dbrec_off) & 0xff_ffff;
        if (cq.pi.wrapping_sub(ci) & 0xff_ffff) >= cq.cqe_cnt {
            cq.overrun = true;
            self.stats.cqes_dropped += 1;
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
            return;
        }
        let owner = cq.pi & cq.cqe_cnt != 0;
        let bytes = f.emit(owner);
        let slot = (cq.pi & (cq.cqe_cnt - 1)) as usize;
        let off = slot * cq.cqe_size as usize + (cq.cqe_size as usize - 64);
        cq.mem.write(off, &bytes[..63]);
        if torn_ok {
            for _ in 0..spins {
                std::hint::spin_loop();
            }
        }
        cq.mem.store_u8_release(off + 63, bytes[63]);
        cq.pi = cq.pi.wrapping_add(1);
        self.stats.cqes += 1;
    }
}
