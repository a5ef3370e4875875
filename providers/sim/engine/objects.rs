//! The device's object tables and the control path on them: PD, MR, CQ, SRQ and QP
//! (creation with the memory `mlx5dv_init_obj` would hand out, the QP state machine,
//! destruction), and the fault injector's installation.
//!
//! Reads and writes only the engine's tables and the new objects' device memory (a new CQ
//! ring with every `op_own` = INVALID << 4, a new SRQ's free list). Invariants: object
//! numbers are never reused while the engine lives; keys never equal `MLX5_INVALID_LKEY`;
//! a QP's state only changes along the transitions `ibv_modify_qp` allows (and to ERR on an
//! error); a QP back in RESET has the device indices and doorbell latch of a new QP and no
//! CQEs held for it.

use std::collections::VecDeque;
use std::sync::Arc;

use super::cqe::Held;
use super::fetch::MAX_SEGS;
use super::{einval, Engine};
use crate::sim::fault::{FaultConfig, FaultInjector, FaultStats};
use crate::sim::mem::DevMem;
use crate::wire;
use crate::{Access, QpState, QpType};

/// Attributes the control path sets on a QP (the sim's `ibv_qp_attr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimQpAttr {
    /// Remote QPN (RC/UC; set on the move to RTR).
    pub remote_qpn: u32,
    /// Path MTU in bytes (UD sends above it fail; RC/UC messages move in one piece on one
    /// device, in packets of this size across processes).
    pub path_mtu: u32,
    /// RNR retries (7 = forever); default 6, as [`crate::ConnectOpts`].
    pub rnr_retry: u8,
    /// Transport retries (7 = seven retries, as mlx5; default 6, as [`crate::ConnectOpts`]).
    pub retry_cnt: u8,
    /// Minimal RNR NAK timer this QP asks its requesters to wait (IBA encoding, 12 = 0.64 ms).
    pub min_rnr_timer: u8,
    /// Local ACK timeout exponent (4.096 µs × 2^timeout) before a transport retry.
    pub timeout: u8,
    /// Remote access rights of the QP.
    pub access: Access,
    /// Q_Key (UD).
    pub qkey: u32,
}

impl Default for SimQpAttr {
    fn default() -> Self {
        SimQpAttr {
            remote_qpn: 0,
            path_mtu: 1024,
            rnr_retry: 6,
            retry_cnt: 6,
            min_rnr_timer: 12,
            timeout: 14,
            access: Access::LOCAL_WRITE,
            qkey: 0,
        }
    }
}

/// The MR table: lkey/rkey to MR, hashed by [`KeyHasher`].
pub(crate) type MrMap = std::collections::HashMap<u32, MrEntry, KeyHash>;

/// Builds [`KeyHasher`]s.
pub(crate) type KeyHash = std::hash::BuildHasherDefault<KeyHasher>;

/// A hasher for tables keyed by a u32 the device itself hands out (MR keys): one multiply
/// by the golden ratio, whose low bits (the bucket) are a bijection of the key's low bits
/// and whose high bits (the tag) mix all of them. Not a defence against flooding, and none
/// is needed: the keys inserted are made by `reg_mr`, a peer's packet only looks one up.
#[derive(Clone, Copy, Default)]
pub(crate) struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u32(u32::from(b));
        }
    }
    #[inline]
    fn write_u32(&mut self, k: u32) {
        self.0 = (self.0.rotate_left(32) ^ u64::from(k)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

pub(crate) struct MrEntry {
    pub(super) pd: u32,
    pub(super) addr: u64,
    pub(super) len: u64,
    pub(super) access: Access,
}

pub(crate) struct CqCtx {
    pub(crate) mem: Arc<DevMem>,
    pub(crate) cqe_cnt: u32,
    pub(crate) cqe_size: u32,
    pub(crate) dbrec_off: usize,
    /// Producer index: CQEs written, free running (the owner bit is its wrap parity).
    pub(super) pi: u32,
    pub(super) overrun: bool,
    /// The host's side of the CQ (the mlx5 provider's shared CQ state), told when the CQ
    /// goes into error, as the driver learns of `IBV_EVENT_CQ_ERR` (set by `create_cq`).
    pub(crate) host: Option<std::sync::Weak<crate::mlx5::shared::CqShared>>,
    pub(super) held: VecDeque<Held>,
    /// What the CQEs carry in their timestamp field (`None`: zero).
    pub(super) ts: Option<crate::clock::TimestampKind>,
    /// Offset of the CQ's UAR stub (the CQ doorbell is at `+ MLX5_CQ_DOORBELL`).
    pub(crate) uar_off: usize,
    /// Arming and the completion channel.
    pub(crate) arm: super::arm::ArmState,
}

pub(crate) struct SrqCtx {
    pub(super) pd: u32,
    pub(crate) mem: Arc<DevMem>,
    pub(crate) wqe_cnt: u32,
    pub(crate) stride: u32,
    pub(crate) dbrec_off: usize,
    /// Index of the next WQE to consume (follows the `next_wqe_index` links).
    pub(super) cur: u16,
    /// Receives consumed, free running (compared with `dbrec[0]` in 16 bits).
    pub(super) consumed: u32,
}

pub(crate) struct QpCtx {
    /// The host's side of the QP (the mlx5 provider's shared QP state), told when the
    /// device moves the QP to ERR outside a CQE (`IBV_EVENT_QP_FATAL`; set by `create_qp`).
    pub(crate) host: Option<std::sync::Weak<crate::mlx5::shared::QpShared>>,
    pub(super) qpn: u32,
    pub(super) qp_type: QpType,
    pub(super) pd: u32,
    pub(crate) mem: Arc<DevMem>,
    pub(crate) sq_cnt: u32,
    pub(crate) rq_off: usize,
    pub(crate) rq_cnt: u32,
    pub(crate) rq_stride: u32,
    pub(crate) dbrec_off: usize,
    pub(crate) uar_off: usize,
    pub(super) send_cqn: u32,
    pub(super) recv_cqn: u32,
    pub(super) srqn: Option<u32>,
    pub(super) state: QpState,
    pub(super) attr: SimQpAttr,
    /// Device SQ index in WQEBBs (free running; compared with `dbrec[1]` in 16 bits).
    pub(super) sq_ci: u32,
    /// Device RQ index (free running; compared with `dbrec[0]` in 16 bits).
    pub(super) rq_ci: u32,
    /// Last UAR words seen in the two BlueFlame halves.
    pub(super) last_db: [u64; 2],
    /// A doorbell was seen and the SQ is not drained yet.
    pub(super) rung: bool,
    /// Deterministic mode: the BlueFlame half last written (its `wqe_idx` and bytes), to
    /// compare with the ring when that WQE executes.
    pub(super) bf_copy: Option<(u16, [u8; wire::MLX5_BF_SIZE as usize])>,
    /// RNR / transport retries left for the WQE at the head of the SQ.
    pub(super) rnr_left: Option<u8>,
    pub(super) retry_left: Option<u8>,
    /// Device-thread mode: the head WQE is not retried before this instant (the RNR timer
    /// or the ACK timeout running).
    pub(super) retry_at: Option<std::time::Instant>,
    /// Connected to a QP of another process's device (through the fabric).
    pub(super) remote: Option<Box<super::remote::RemoteQp>>,
}

impl QpCtx {
    pub(super) fn sq_pi(&self) -> u32 {
        self.mem.load_be32(self.dbrec_off + 4 * wire::MLX5_SND_DBR) & wire::MLX5_WQE_INDEX_MASK
    }
    pub(super) fn rq_posted(&self) -> u32 {
        self.mem.load_be32(self.dbrec_off + 4 * wire::MLX5_RCV_DBR) & wire::MLX5_WQE_INDEX_MASK
    }
}

impl Engine {
    pub(crate) fn alloc_pd(&mut self) -> u32 {
        let pd = self.next_pd;
        self.next_pd += 1;
        pd
    }

    /// Register an MR; lkey == rkey as on mlx5. Keys never equal `MLX5_INVALID_LKEY`.
    pub(crate) fn reg_mr(&mut self, pd: u32, addr: u64, len: u64, access: Access) -> u32 {
        let key = self.next_key;
        // Step by 0x100 plus a varying low byte, so keys of different MRs differ in every
        // nibble a stale-key bug could hide in.
        self.next_key = self.next_key.wrapping_add(0x101);
        if self.next_key & 0xffff_ff00 == wire::MLX5_INVALID_LKEY || self.next_key == 0 {
            self.next_key = 0x1000;
        }
        self.mrs.insert(
            key,
            MrEntry {
                pd,
                addr,
                len,
                access,
            },
        );
        key
    }

    pub(crate) fn dereg_mr(&mut self, key: u32) {
        self.mrs.remove(&key);
    }

    pub(crate) fn create_cq(
        &mut self,
        cqe: u32,
        cqe_size: u32,
        ts: Option<crate::clock::TimestampKind>,
    ) -> crate::Result<u32> {
        if cqe == 0 || cqe > 1 << 22 {
            return Err(einval("sim create_cq", format!("{cqe} entries (1..=4M)")));
        }
        let cnt = cqe.next_power_of_two().max(2);
        if cqe_size != 64 && cqe_size != 128 {
            return Err(einval(
                "sim create_cq",
                format!("CQE size {cqe_size} (64 or 128)"),
            ));
        }
        let ring = cnt as usize * cqe_size as usize;
        // The ring, the doorbell record (64 bytes) and a 64-byte UAR stub holding the CQ
        // doorbell at MLX5_CQ_DOORBELL.
        let mem = Arc::new(DevMem::new(ring + 128)?);
        // A new CQ buffer as libmlx5 and the kernel leave it: every op_own = INVALID << 4
        // (0xF0, owner bit 0), the rest zero (rdma-core `mlx5_alloc_cq_buf`, kernel
        // `init_cq_frag_buf`). With 128-byte CQEs the 64-byte CQE is the second half of the
        // slot.
        for i in 0..cnt {
            let off = wire::cqe64_offset(i, cnt, cqe_size as usize) + wire::offset::cqe64::OP_OWN;
            mem.write(off, &[wire::MLX5_CQE_INVALID_OP_OWN]);
        }
        let cqn = self.next_cqn;
        self.next_cqn += 1;
        self.cqs.insert(
            cqn,
            CqCtx {
                mem,
                cqe_cnt: cnt,
                cqe_size,
                dbrec_off: ring,
                pi: 0,
                overrun: false,
                host: None,
                held: VecDeque::new(),
                ts,
                uar_off: ring + 64,
                arm: Default::default(),
            },
        );
        Ok(cqn)
    }

    pub(crate) fn create_srq(&mut self, pd: u32, max_wr: u32, max_sge: u32) -> crate::Result<u32> {
        if max_wr == 0 || max_wr > 1 << 15 || max_sge == 0 || max_sge as usize >= MAX_SEGS {
            return Err(einval(
                "sim create_srq",
                format!("max_wr {max_wr} (1..=32768), max_sge {max_sge} (1..=63)"),
            ));
        }
        // One entry stays unused as the free-list tail (libmlx5 keeps it so), hence +1.
        let cnt = (max_wr + 1).next_power_of_two();
        // The next segment, then the data segments, one 16-byte unit each.
        let stride = ((1 + max_sge) * wire::MLX5_WQE_DS_UNITS as u32).next_power_of_two();
        let ring = cnt as usize * stride as usize;
        let mem = Arc::new(DevMem::new(ring + 64)?);
        // Free list: entry i links to i + 1 (`next_wqe_index` of the next segment).
        for i in 0..cnt {
            let next = ((i + 1) & (cnt - 1)) as u16;
            let mut unit = [0u8; wire::MLX5_WQE_DS_UNITS];
            wire::SrqNextSeg::new_unchecked(&mut unit[..]).set(next, 0);
            mem.write(i as usize * stride as usize, &unit);
        }
        let srqn = self.next_srqn;
        self.next_srqn += 1;
        self.srqs.insert(
            srqn,
            SrqCtx {
                pd,
                mem,
                wqe_cnt: cnt,
                stride,
                dbrec_off: ring,
                cur: 0,
                consumed: 0,
            },
        );
        Ok(srqn)
    }

    /// Create a QP in RESET. Returns the QPN and the granted capacities
    /// (sq WQEBBs, granted max_send_wr, rq entries, rq stride).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn create_qp(
        &mut self,
        pd: u32,
        qp_type: QpType,
        caps: &crate::QpCaps,
        send_cqn: u32,
        recv_cqn: u32,
        srqn: Option<u32>,
    ) -> crate::Result<(u32, crate::QpCaps, u32)> {
        if !self.cqs.contains_key(&send_cqn) || !self.cqs.contains_key(&recv_cqn) {
            return Err(einval("sim create_qp", "unknown CQ"));
        }
        if let Some(s) = srqn {
            if !self.srqs.contains_key(&s) {
                return Err(einval("sim create_qp", "unknown SRQ"));
            }
        }
        if caps.max_send_wr == 0 || caps.max_send_wr > 1 << 14 {
            return Err(einval(
                "sim create_qp",
                format!("max_send_wr {} (1..=16384)", caps.max_send_wr),
            ));
        }
        if caps.max_send_sge as usize > 16 || caps.max_recv_sge as usize > 16 {
            return Err(einval(
                "sim create_qp",
                "max_send_sge / max_recv_sge above 16",
            ));
        }
        if caps.max_inline_data > 512 {
            return Err(einval(
                "sim create_qp",
                format!(
                    "max_inline_data {} above the sim's 512 bytes of inline data per WQE: \
                     ask for at most 512 (perftest's -I)",
                    caps.max_inline_data
                ),
            ));
        }
        if srqn.is_none() && (caps.max_recv_wr == 0 || caps.max_recv_wr > 1 << 14) {
            return Err(einval(
                "sim create_qp",
                format!("max_recv_wr {} (1..=16384)", caps.max_recv_wr),
            ));
        }
        // Send WQE size, as libmlx5 computes it: ctrl + the largest transport segment
        // (UD: address vector; RC/UC: raddr + atomic) + the larger of the SGE list and the
        // inline data, rounded up to whole WQEBBs.
        let unit = wire::MLX5_WQE_DS_UNITS;
        let xport = match qp_type {
            QpType::Ud => wire::MLX5_AV_LEN,
            _ => 2 * unit,
        };
        let data = (caps.max_send_sge.max(1) as usize * unit).max(
            (caps.max_inline_data as usize + wire::MLX5_WQE_INLINE_SEG_LEN).next_multiple_of(unit),
        );
        let wqe_size = (unit + xport + data).next_multiple_of(wire::MLX5_SEND_WQE_BB);
        let bbs = (wqe_size / wire::MLX5_SEND_WQE_BB) as u32;
        let sq_cnt = (caps.max_send_wr * bbs).next_power_of_two();
        let mut granted = *caps;
        granted.max_send_wr = sq_cnt / bbs;
        granted.max_send_sge = caps.max_send_sge.max(1);
        // Granted exactly as asked (libmlx5 reports the room its WQE size leaves, which can
        // be more): a post-time limit then reads the same on every provider.
        granted.max_inline_data = caps.max_inline_data;
        let (rq_cnt, rq_stride) = if srqn.is_some() {
            granted.max_recv_wr = 0;
            granted.max_recv_sge = 0;
            (0, 0)
        } else {
            // One 16-byte data segment per SGE.
            let seg = wire::MLX5_WQE_DS_UNITS as u32;
            let stride = (caps.max_recv_sge.max(1) * seg).next_power_of_two();
            let cnt = caps.max_recv_wr.next_power_of_two();
            granted.max_recv_wr = cnt;
            granted.max_recv_sge = stride / seg;
            (cnt, stride)
        };
        let sq_len = sq_cnt as usize * wire::MLX5_SEND_WQE_BB;
        let rq_off = sq_len;
        let rq_len = rq_cnt as usize * rq_stride as usize;
        let dbrec_off = (rq_off + rq_len).next_multiple_of(64);
        let uar_off = (dbrec_off + 64).next_multiple_of(4096);
        let mem = Arc::new(DevMem::new(uar_off + 4096)?);
        let qpn = self.next_qpn;
        self.next_qpn += 1;
        self.order_stale = true;
        self.qps.insert(
            qpn,
            QpCtx {
                host: None,
                qpn,
                qp_type,
                pd,
                mem,
                sq_cnt,
                rq_off,
                rq_cnt,
                rq_stride,
                dbrec_off,
                uar_off: uar_off + wire::MLX5_BF_OFFSET,
                send_cqn,
                recv_cqn,
                srqn,
                state: QpState::Reset,
                attr: SimQpAttr::default(),
                sq_ci: 0,
                rq_ci: 0,
                last_db: [0; 2],
                rung: false,
                bf_copy: None,
                rnr_left: None,
                retry_left: None,
                retry_at: None,
                remote: None,
            },
        );
        Ok((qpn, granted, sq_cnt))
    }

    pub(crate) fn qp(&self, qpn: u32) -> Option<&QpCtx> {
        self.qps.get(&qpn)
    }

    pub(crate) fn qp_state(&self, qpn: u32) -> Option<QpState> {
        self.qps.get(&qpn).map(|q| q.state)
    }

    /// `ibv_modify_qp`: the transitions the real state machine allows.
    pub(crate) fn modify_qp(
        &mut self,
        qpn: u32,
        to: QpState,
        attr: Option<SimQpAttr>,
    ) -> crate::Result<()> {
        let Some(q) = self.qps.get_mut(&qpn) else {
            return Err(einval("sim modify_qp", format!("no QP {qpn:#x}")));
        };
        use QpState as S;
        let ok = matches!(
            (q.state, to),
            (_, S::Reset)
                | (_, S::Err)
                | (S::Reset, S::Init)
                | (S::Init, S::Init)
                | (S::Init, S::Rtr)
                | (S::Rtr, S::Rts)
                | (S::Rts, S::Rts)
        );
        if !ok {
            return Err(crate::Error::verb(
                "ibv_modify_qp (sim)",
                libc::EINVAL,
                format!("{} -> {} is not a valid QP transition", q.state, to),
            ));
        }
        if let Some(a) = attr {
            q.attr = a;
        }
        q.state = to;
        q.rnr_left = None;
        q.retry_left = None;
        q.retry_at = None;
        if to == S::Reset {
            // Back to the state of a new QP: the device's indices zero (the host zeroes the
            // dbrec and its own indices, as on hardware), and the doorbell latch cleared: the
            // UAR words are the device's own registers, so the next doorbell is seen.
            q.sq_ci = 0;
            q.rq_ci = 0;
            q.rung = false;
            q.last_db = [0; 2];
            q.bf_copy = None;
            q.mem.store_raw64(q.uar_off, 0);
            q.mem
                .store_raw64(q.uar_off + wire::MLX5_BF_SIZE as usize, 0);
            // CQEs of this QP still held inside the device are dropped with it.
            for cq in self.cqs.values_mut() {
                cq.held.retain(|h| h.stream >> 1 != u64::from(qpn));
            }
        }
        Ok(())
    }

    pub(crate) fn destroy_qp(&mut self, qpn: u32) {
        self.qps.remove(&qpn);
        self.order_stale = true;
        for cq in self.cqs.values_mut() {
            cq.held.retain(|h| h.stream >> 1 != u64::from(qpn));
        }
    }

    pub(crate) fn destroy_cq(&mut self, cqn: u32) {
        self.cqs.remove(&cqn);
    }

    pub(crate) fn destroy_srq(&mut self, srqn: u32) {
        self.srqs.remove(&srqn);
    }

    pub(crate) fn set_faults(&mut self, cfg: Option<FaultConfig>) {
        self.fault = cfg.map(FaultInjector::new);
    }

    pub(crate) fn fault_stats(&self) -> FaultStats {
        self.fault.as_ref().map(|f| f.stats).unwrap_or_default()
    }

    pub(crate) fn cq_in_error(&self, cqn: u32) -> bool {
        self.cqs.get(&cqn).is_some_and(|c| c.overrun)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, Hasher};

    #[test]
    fn mr_keys_spread_over_buckets_and_tags() {
        // Keys as `reg_mr` hands them out: 0x1000 on, 0x101 apart.
        let keys: Vec<u32> = (0..256u32).map(|i| 0x1000 + 0x101 * i).collect();
        let hash = |k: u32| {
            let mut h = KeyHash::default().build_hasher();
            h.write_u32(k);
            h.finish()
        };
        let mut low: Vec<u64> = keys.iter().map(|&k| hash(k) & 0xff).collect();
        low.sort_unstable();
        low.dedup();
        assert_eq!(low.len(), 256, "256 keys, 256 distinct buckets of 256");
        let mut tags: Vec<u64> = keys.iter().map(|&k| hash(k) >> 57).collect();
        tags.sort_unstable();
        tags.dedup();
        assert!(tags.len() > 64, "{} distinct tags of 128", tags.len());
        // The table itself: every key found again, a missing one not.
        let mut m = MrMap::default();
        for &k in &keys {
            m.insert(
                k,
                MrEntry {
                    pd: k,
                    addr: 0,
                    len: 0,
                    access: Access::LOCAL_WRITE,
                },
            );
        }
        assert!(keys.iter().all(|k| m.get(k).is_some_and(|e| e.pd == *k)));
        assert!(!m.contains_key(&0x0fff));
    }
}
