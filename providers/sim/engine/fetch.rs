//! Doorbell and WQE fetch: what the device reads of the host's send queue.
//!
//! Reads: the QP's two BlueFlame halves in its UAR page, the send counter in its doorbell
//! record (`dbrec[1]`, read by the caller only after a doorbell), the SQ ring from the
//! device's index `sq_ci`. Writes: the QP's doorbell latch (`last_db`, `rung`), in
//! deterministic mode the BlueFlame half behind its first word (cleared, so the next 8-byte
//! doorbell is told apart from a BlueFlame copy) and the kept copy (`bf_copy`),
//! `EngineStats::doorbells`. Nothing here touches host data buffers or CQs.
//!
//! Invariants: only a changed UAR word makes the SQ `rung` (a dbrec update alone is not seen,
//! as on hardware); a WQE is parsed from the engine's own copy, never in place, so a host
//! writing the ring concurrently cannot change it mid-check; a malformed WQE is reported as
//! the `LOC_QP_OP` syndrome, never a panic.

use super::dma::{Span, EMPTY_SPAN};
use super::objects::{QpCtx, BF_SIZE};
use super::Engine;
use crate::providers::sim::layout::{be32, op, syndrome, CTRL_CQ_UPDATE, CTRL_SOLICITED, WQEBB};
use crate::providers::QpType;
use crate::wire::{self, DataItem};

/// The largest WQE: `ds` is 6 bits, so 63 × 16 bytes, rounded up to whole WQEBBs.
pub(super) const MAX_WQE: usize = 1024;
/// At most this many data segments fit in the largest WQE (and in a receive WQE we create).
pub(super) const MAX_SEGS: usize = 64;

/// A parsed send WQE (from [`wire::parse_send_wqe`], plus what the device adds).
pub(super) struct Wqe {
    pub(super) opcode: u8,
    pub(super) idx: u16,
    pub(super) signaled: bool,
    pub(super) solicited: bool,
    pub(super) imm: [u8; 4],
    pub(super) raddr: u64,
    pub(super) rkey: u32,
    pub(super) swap_add: u64,
    pub(super) compare: u64,
    pub(super) dqpn: u32,
    pub(super) qkey: u32,
    /// Inline payload: up to two pieces (the WQE may wrap) inside the local WQE copy.
    pub(super) inline: [Span; 2],
    pub(super) ninline: usize,
    /// Data segments: (addr, byte_count, lkey).
    pub(super) segs: [(u64, u32, u32); MAX_SEGS],
    pub(super) nsegs: usize,
}

impl Wqe {
    pub(super) fn len(&self) -> u64 {
        if self.ninline > 0 {
            self.inline[..self.ninline]
                .iter()
                .map(|s| s.len as u64)
                .sum()
        } else {
            self.segs[..self.nsegs]
                .iter()
                .map(|s| u64::from(seg_len(s.1)))
                .sum()
        }
    }
}

/// A data segment's byte count; 0 means 2 GiB in a send WQE (PRM: "byte_count 0 = 2^31").
pub(super) fn seg_len(bc: u32) -> u32 {
    if bc == 0 {
        0x8000_0000
    } else {
        bc & 0x7fff_ffff
    }
}

impl Engine {
    /// Look at the QP's two BlueFlame halves: a word that changed since the last look is a
    /// doorbell (the QP's SQ is then `rung`). Returns false when the QP does not exist.
    pub(super) fn poll_doorbell(&mut self, qpn: u32, torn_ok: bool) -> bool {
        let Some(q) = self.qps.get_mut(&qpn) else {
            return false;
        };
        let halves = if BF_SIZE == 0 { 1 } else { 2 };
        for h in 0..halves {
            let w = q.mem.load_raw64(q.uar_off + h * BF_SIZE as usize);
            if w != q.last_db[h] {
                q.last_db[h] = w;
                q.rung = true;
                self.stats.doorbells += 1;
                if !torn_ok {
                    // Deterministic mode (nothing writes concurrently): keep the half's bytes
                    // and clear the device register behind the first word, so an 8-byte
                    // doorbell next time is told apart from a BlueFlame copy.
                    let off = q.uar_off + h * BF_SIZE as usize;
                    let mut bytes = [0u8; BF_SIZE as usize];
                    q.mem.read(off, &mut bytes);
                    q.mem.write(off + 8, &[0u8; BF_SIZE as usize - 8]);
                    let idx =
                        (u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) >> 8) as u16;
                    q.bf_copy = Some((idx, bytes));
                }
            }
        }
        true
    }

    /// Copy the WQE at the SQ head into `buf`, laid out as a ring of
    /// `min(sq_cnt, 16)` WQEBBs at the same slot (modulo that ring), so the wire parser
    /// follows the same wrap the device ring has. Returns the local ring length in bytes and
    /// the WQE's WQEBB count from its `ds` (at least 1, to step over a `ds = 0` WQE).
    pub(super) fn read_head(q: &QpCtx, buf: &mut [u8; MAX_WQE]) -> (usize, u32) {
        let local_cnt = q.sq_cnt.min((MAX_WQE / WQEBB) as u32);
        let copy = |i: u32, buf: &mut [u8; MAX_WQE]| {
            let s = ((q.sq_ci + i) & (q.sq_cnt - 1)) as usize;
            let d = ((q.sq_ci + i) & (local_cnt - 1)) as usize * WQEBB;
            q.mem.read(s * WQEBB, &mut buf[d..d + WQEBB]);
        };
        copy(0, buf);
        let first = ((q.sq_ci & (local_cnt - 1)) as usize) * WQEBB;
        let ds = buf[first + 7] & 0x3f;
        let nbb = (u32::from(ds) * 16).div_ceil(WQEBB as u32).max(1);
        for i in 1..nbb.min(local_cnt) {
            copy(i, buf);
        }
        (local_cnt as usize * WQEBB, nbb)
    }

    /// Compare a BlueFlame half with the WQE at the head of the ring: `None` when it was a
    /// plain 8-byte doorbell (nothing behind the first word), `Some(matches)` for a copy.
    pub(super) fn compare_bf(
        q: &QpCtx,
        buf: &[u8; MAX_WQE],
        ring_len: usize,
        nbb: u32,
        bf: &[u8; BF_SIZE as usize],
    ) -> Option<bool> {
        let len = (usize::from(buf[((q.sq_ci as usize * WQEBB) & (ring_len - 1)) + 7] & 0x3f) * 16)
            .min(BF_SIZE as usize);
        if bf[8..].iter().all(|&b| b == 0) {
            return None;
        }
        let local_cnt = ring_len / WQEBB;
        let mut same = true;
        for i in 0..(nbb as usize).min(BF_SIZE as usize / WQEBB) {
            let slot = (q.sq_ci as usize + i) & (local_cnt - 1);
            let n = len.saturating_sub(i * WQEBB).min(WQEBB);
            same &= buf[slot * WQEBB..slot * WQEBB + n] == bf[i * WQEBB..i * WQEBB + n];
        }
        Some(same)
    }

    /// Parse and check the layout of a send WQE (no memory access yet). Malformed WQEs are
    /// LOC_QP_OP ("local QP operation error: an internal QP consistency error was detected
    /// while processing this WQE"): ds of zero or past the ring, ds too small for the opcode,
    /// an inline length past ds, a ctrl qpn that is not this QP's, a wqe_idx that is not the
    /// device's index, an opcode the QP type cannot do, an atomic whose data segment is not 8
    /// bytes.
    pub(super) fn parse(q: &QpCtx, buf: &[u8; MAX_WQE], ring_len: usize) -> Result<Wqe, u8> {
        let p = wire::parse_send_wqe(&buf[..ring_len], q.sq_ci, q.qp_type == QpType::Ud)
            .map_err(|_| syndrome::LOC_QP_OP)?;
        if p.qpn != q.qpn || u32::from(p.wqe_idx) != q.sq_ci & 0xffff {
            return Err(syndrome::LOC_QP_OP);
        }
        let opcode = u8::from(p.opcode);
        let ok_for_type = match q.qp_type {
            QpType::Rc => true,
            QpType::Uc => !matches!(opcode, op::RDMA_READ | op::ATOMIC_CS | op::ATOMIC_FA),
            QpType::Ud => matches!(opcode, op::NOP | op::SEND | op::SEND_IMM),
        };
        if !ok_for_type {
            return Err(syndrome::LOC_QP_OP);
        }
        let (raddr, rkey) = p.raddr.unwrap_or((0, 0));
        let (swap_add, compare) = p.atomic.unwrap_or((0, 0));
        let (qkey, dqpn) = match p.av {
            Some(av) => (be32(&av, 0), be32(&av, 8) & 0xff_ffff),
            None => (0, 0),
        };
        let mut w = Wqe {
            opcode,
            idx: p.wqe_idx,
            signaled: p.fm_ce_se & CTRL_CQ_UPDATE != 0,
            solicited: p.fm_ce_se & CTRL_SOLICITED != 0,
            imm: p.imm.to_be_bytes(),
            raddr,
            rkey,
            swap_add,
            compare,
            dqpn,
            qkey,
            inline: [EMPTY_SPAN; 2],
            ninline: 0,
            segs: [(0, 0, 0); MAX_SEGS],
            nsegs: 0,
        };
        let reads = matches!(opcode, op::RDMA_READ | op::ATOMIC_CS | op::ATOMIC_FA);
        for item in p.data_segs() {
            match item {
                DataItem::Inline(d) => {
                    if reads || w.nsegs > 0 || w.ninline > 0 {
                        return Err(syndrome::LOC_QP_OP);
                    }
                    for piece in [d.first, d.second] {
                        if !piece.is_empty() {
                            w.inline[w.ninline] = Span {
                                // Read-only source inside the local copy `buf`.
                                ptr: piece.as_ptr() as *mut u8,
                                len: piece.len(),
                            };
                            w.ninline += 1;
                        }
                    }
                }
                DataItem::Sge(sge) => {
                    if w.ninline > 0 || w.nsegs == MAX_SEGS {
                        return Err(syndrome::LOC_QP_OP);
                    }
                    w.segs[w.nsegs] = (sge.addr, sge.length, sge.lkey);
                    w.nsegs += 1;
                }
            }
        }
        if matches!(opcode, op::ATOMIC_CS | op::ATOMIC_FA) && (w.nsegs != 1 || w.segs[0].1 != 8) {
            return Err(syndrome::LOC_QP_OP);
        }
        Ok(w)
    }
}
