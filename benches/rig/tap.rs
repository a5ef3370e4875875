//! The PCIe tap: what a ConnectX would move over PCIe for the requests the mlx5 provider
//! posted on a [`PlainQp`], counted ring by ring from what the provider actually wrote.
//!
//! Contract: the caller brackets every `ring()` with [`Tap::arm`] (before) and [`Tap::observe`]
//! (after). `arm` fills both BlueFlame halves with a poison byte; `observe` then reads what the
//! ring stored there (an 8-byte doorbell, or BlueFlame 64-byte chunks), whether the send
//! doorbell record moved, and walks every WQE between the last doorbell record and the new
//! one: its WQEBBs, `CQ_UPDATE` (a CQE write), its segments (a data segment is a payload DMA
//! read of its byte count, an inline segment none) and what the responder does for its opcode
//! (a payload write for WRITE and SEND, a receive-WQE read and a CQE for SEND and WRITE with
//! immediate; RDMA READ and atomics are refused). WQEBBs the NIC got by BlueFlame are not
//! fetched; the others are, in one read per contiguous run (two when the run wraps the ring).
//! RC and UC requests by default; [`Tap::datagram`] for a UD queue: each request then carries
//! the 48-byte datagram segment (the address vector) after its ctrl segment, which the WQEBB
//! count takes from the ctrl segment's `ds` like any other, and the responder scatters the
//! 40-byte GRH before the payload (a UD receive buffer's first 40 bytes; always present on
//! RoCE, so counted).
//! The result is [`rdma_direct_core::pcie::Counts`]; nothing here is configuration: a doorbell
//! the provider skipped, or a BlueFlame copy it made, shows up as such. Untimed: it reads the
//! rings with allocating helpers.

use rdma_direct_core::pcie::{Counts, BF_CHUNK, DOORBELL_BYTES};
use rdma_direct_core::wire::{
    CtrlSeg, IBV_GRH_LEN, MLX5_AV_LEN, MLX5_INLINE_SEG, MLX5_OPCODE_RDMA_WRITE,
    MLX5_OPCODE_RDMA_WRITE_IMM, MLX5_OPCODE_SEND, MLX5_OPCODE_SEND_IMM, MLX5_SEND_WQE_BB,
    MLX5_WQE_CTRL_CQ_UPDATE, MLX5_WQE_DS_UNITS, MLX5_WQE_INDEX_MASK,
};

use crate::PlainQp;

/// The byte the BlueFlame halves hold before a ring (no ctrl segment starts with it: its
/// first byte, opmod, is 0 for every request the provider writes).
const POISON: u8 = 0xee;

/// Counts of what the provider wrote, ring by ring.
#[derive(Debug)]
pub struct Tap {
    /// The send doorbell record at the last observation.
    dbrec: u32,
    /// Receive WQE size on the responder (bytes a receive-WQE read fetches).
    recv_wqe: u32,
    /// A UD queue ([`Tap::datagram`]).
    ud: bool,
    counts: Counts,
}

impl Tap {
    /// Start counting on `dev` (from its current doorbell record); the responder's receive
    /// WQEs are `recv_wqe` bytes, its CQEs and the requester's are `cqe_size` bytes.
    pub fn new(dev: &PlainQp, recv_wqe: u32, cqe_size: u32) -> Tap {
        Tap {
            dbrec: dev.dbrec()[1] & MLX5_WQE_INDEX_MASK,
            recv_wqe,
            ud: false,
            counts: Counts {
                cqe_size,
                ..Counts::default()
            },
        }
    }

    /// The queue tapped is UD (see the module doc).
    pub fn datagram(mut self) -> Tap {
        self.ud = true;
        self
    }

    /// The counts so far.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// Before a ring: poison both BlueFlame halves.
    pub fn arm(&self, dev: &PlainQp) {
        dev.mem.fill(dev.bf_off, self.bf_len(dev), POISON);
    }

    fn bf_len(&self, dev: &PlainQp) -> usize {
        (2 * dev.dv.bf_size as usize).max(MLX5_SEND_WQE_BB)
    }

    /// After a ring: count what it wrote. Returns an error naming what the tap cannot read
    /// (an opcode it does not know).
    pub fn observe(&mut self, dev: &PlainQp) -> Result<(), String> {
        // MMIO: which 64-byte chunks of the halves changed, and in the first changed chunk
        // how far the change reaches.
        let bf = dev.mem.read(dev.bf_off, self.bf_len(dev));
        let changed: Vec<&[u8]> = bf
            .chunks(BF_CHUNK as usize)
            .filter(|c| c.iter().any(|&b| b != POISON))
            .collect();
        let bluefame = match changed.as_slice() {
            [] => false,
            [one] if one[DOORBELL_BYTES as usize..].iter().all(|&b| b == POISON) => {
                self.counts.doorbells += 1;
                false
            }
            many => {
                self.counts.bf_chunks += many.len() as u64;
                true
            }
        };
        let now = dev.dbrec()[1] & MLX5_WQE_INDEX_MASK;
        if now == self.dbrec {
            return Ok(());
        }
        self.counts.dbrec_updates += 1;
        let staged = now.wrapping_sub(self.dbrec) & MLX5_WQE_INDEX_MASK;
        let mut idx = self.dbrec;
        while idx != self.dbrec.wrapping_add(staged) {
            idx = idx.wrapping_add(self.request(dev, idx)?);
        }
        if !bluefame {
            let cnt = dev.dv.sq_wqe_cnt;
            self.counts.wqe_reads += if (self.dbrec & (cnt - 1)) + staged > cnt {
                2
            } else {
                1
            };
            self.counts.wqe_read_bbs += u64::from(staged);
        }
        self.dbrec = now;
        Ok(())
    }

    /// Count the request at WQEBB `idx`; returns its WQEBBs.
    fn request(&mut self, dev: &PlainQp, idx: u32) -> Result<u32, String> {
        let first = dev.wqebb(idx);
        let ctrl = CtrlSeg::new_unchecked(&first[..MLX5_WQE_DS_UNITS]);
        let ds = u32::from(ctrl.ds());
        let bbs = (ds * MLX5_WQE_DS_UNITS as u32)
            .div_ceil(MLX5_SEND_WQE_BB as u32)
            .max(1);
        let op = u8::from(ctrl.opcode());
        let wqe = dev.wqe(idx, bbs);
        let end = (ds as usize * MLX5_WQE_DS_UNITS).min(wqe.len());
        let c = &mut self.counts;
        c.messages += 1;
        if ctrl.fm_ce_se() & MLX5_WQE_CTRL_CQ_UPDATE != 0 {
            c.cqe_writes += 1;
        }
        let (remote, recv) = match op {
            MLX5_OPCODE_RDMA_WRITE => (true, false),
            MLX5_OPCODE_RDMA_WRITE_IMM => (true, true),
            MLX5_OPCODE_SEND | MLX5_OPCODE_SEND_IMM => (false, true),
            _ => {
                return Err(format!(
                    "PCIe tap: WQE {idx} has opcode {op:#04x}; the tap reads RDMA WRITE and \
                     SEND"
                ))
            }
        };
        // Segments after the ctrl segment (and the datagram or remote address segment).
        let mut off = MLX5_WQE_DS_UNITS * (1 + usize::from(remote));
        let mut bytes = 0u64;
        if self.ud {
            if remote {
                return Err(format!(
                    "PCIe tap: WQE {idx} is an RDMA WRITE on a UD queue; UD carries SEND only"
                ));
            }
            off += MLX5_AV_LEN;
            bytes += IBV_GRH_LEN as u64;
        }
        while off + 4 <= end {
            let bc = u32::from_be_bytes(wqe[off..off + 4].try_into().expect("4 bytes"));
            if bc & MLX5_INLINE_SEG != 0 {
                let len = bc & !MLX5_INLINE_SEG;
                bytes += u64::from(len);
                off += (4 + len as usize).div_ceil(MLX5_WQE_DS_UNITS) * MLX5_WQE_DS_UNITS;
            } else {
                c.payload_reads += 1;
                c.payload_read_bytes += u64::from(bc);
                bytes += u64::from(bc);
                off += MLX5_WQE_DS_UNITS;
            }
        }
        c.resp_writes += 1;
        c.resp_write_bytes += bytes;
        if recv {
            c.recv_wqe_reads += 1;
            c.recv_wqe_bytes += u64::from(self.recv_wqe);
            c.resp_cqe_writes += 1;
        }
        Ok(bbs)
    }
}
