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
use super::objects::QpCtx;
use super::Engine;
use crate::wire::{self, DataItem, DatagramSeg, Opcode};
use crate::{QpState, QpType};

/// The largest WQE: `ds` is 6 bits, so 63 × 16 bytes, rounded up to whole WQEBBs (1024).
pub(super) const MAX_WQE: usize =
    (wire::MAX_DS * wire::MLX5_WQE_DS_UNITS).next_multiple_of(wire::MLX5_SEND_WQE_BB);
/// At most this many data segments fit in the largest WQE (and in a receive WQE we create).
pub(super) const MAX_SEGS: usize = 64;

/// A parsed send WQE (from [`wire::parse_send_wqe`], plus what the device adds).
pub(super) struct Wqe {
    pub(super) opcode: Opcode,
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
    /// UD: the destination GID of the address vector (another process's device: the
    /// datagram crosses the fabric).
    pub(super) dgid: [u8; 16],
    /// Inline payload: up to two pieces (the WQE may wrap) inside the local WQE copy.
    pub(super) inline: [Span; 2],
    pub(super) ninline: usize,
    /// Data segments: (addr, byte_count, lkey).
    pub(super) segs: [(u64, u32, u32); MAX_SEGS],
    pub(super) nsegs: usize,
}

impl Wqe {
    /// A WQE with nothing in it (what a [`Scratch`] starts with).
    pub(super) const EMPTY: Wqe = Wqe {
        opcode: Opcode::Nop,
        idx: 0,
        signaled: false,
        solicited: false,
        imm: [0; 4],
        raddr: 0,
        rkey: 0,
        swap_add: 0,
        compare: 0,
        dqpn: 0,
        qkey: 0,
        dgid: [0; 16],
        inline: [EMPTY_SPAN; 2],
        ninline: 0,
        segs: [(0, 0, 0); MAX_SEGS],
        nsegs: 0,
    };

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

/// What executing the head WQE needs besides the engine's tables: the WQE's copy, its
/// parse and its checked local spans, about 3 KiB. The engine keeps one and lends it to each
/// WQE it executes ([`Engine::exec_head`]), so a WQE costs neither zeroing nor moving
/// those kilobytes; the spans in it are meaningful only during that WQE.
pub(super) struct Scratch {
    pub(super) buf: [u8; MAX_WQE],
    pub(super) wqe: Wqe,
    pub(super) local: [Span; MAX_SEGS],
}

impl Scratch {
    pub(super) fn new() -> Box<Scratch> {
        Box::new(Scratch {
            buf: [0; MAX_WQE],
            wqe: Wqe::EMPTY,
            local: [EMPTY_SPAN; MAX_SEGS],
        })
    }
}

// SAFETY: the raw pointers in a Scratch's spans are addresses only: they are written and
// then dereferenced within one `exec_head` call, by the thread running the engine (which
// holds the engine, and so the scratch, exclusively), and never read again before being
// written anew. Moving the scratch to another thread with the engine moves no access.
unsafe impl Send for Scratch {}

/// A data segment's byte count; 0 means 2 GiB in a send WQE (PRM: "byte_count 0 = 2^31").
/// The top bit (`MLX5_INLINE_SEG`) is not part of a data segment's length.
pub(super) fn seg_len(bc: u32) -> u32 {
    if bc == 0 {
        1 << 31
    } else {
        bc & !wire::MLX5_INLINE_SEG
    }
}

/// The size in bytes a WQE's ctrl segment (at the start of `ctrl`) declares: `ds` (its low
/// 6 bits) in 16-byte units.
fn ds_bytes(ctrl: &[u8]) -> usize {
    let ds = wire::CtrlSeg::new_unchecked(ctrl).ds() & wire::MLX5_WQE_CTRL_DS_MASK as u8;
    usize::from(ds) * wire::MLX5_WQE_DS_UNITS
}

impl Engine {
    /// Look at the QP's two BlueFlame halves: a word that changed since the last look is a
    /// doorbell (the QP's SQ is then `rung`). Returns false when the QP does not exist, or
    /// when it has nothing for this pass: no SQ rung and not in ERR (whose receives a pass
    /// flushes), so the caller looks no further (the common idle case, one map lookup).
    pub(super) fn poll_doorbell(&mut self, qpn: u32, torn_ok: bool) -> bool {
        let Some(q) = self.qps.get_mut(&qpn) else {
            return false;
        };
        let halves = if wire::MLX5_BF_SIZE == 0 { 1 } else { 2 };
        for h in 0..halves {
            let w = q
                .mem
                .load_raw64(q.uar_off + h * wire::MLX5_BF_SIZE as usize);
            if w != q.last_db[h] {
                q.last_db[h] = w;
                q.rung = true;
                self.stats.doorbells += 1;
                if !torn_ok {
                    // Deterministic mode (nothing writes concurrently): keep the half's bytes
                    // and clear the device register behind the first word, so an 8-byte
                    // doorbell next time is told apart from a BlueFlame copy.
                    let off = q.uar_off + h * wire::MLX5_BF_SIZE as usize;
                    // Read in place (the copy is kept whole, not built on the stack and
                    // moved in).
                    let (idx, bytes) = q
                        .bf_copy
                        .get_or_insert((0, [0u8; wire::MLX5_BF_SIZE as usize]));
                    q.mem.read(off, bytes);
                    q.mem.zero(off + 8, wire::MLX5_BF_SIZE as usize - 8);
                    *idx = wire::CtrlSeg::new_unchecked(&bytes[..]).wqe_idx();
                }
            }
        }
        q.rung || q.state == QpState::Err
    }

    /// Copy the WQE at the SQ head into `buf` (see [`Engine::read_wqe`]).
    pub(super) fn read_head(q: &QpCtx, buf: &mut [u8; MAX_WQE]) -> (usize, u32) {
        Self::read_wqe(q, q.sq_ci, buf)
    }

    /// Copy the WQE at SQ index `at` (WQEBBs, free running) into `buf`, laid out as a ring
    /// of `min(sq_cnt, 16)` WQEBBs at the same slot (modulo that ring), so the wire parser
    /// follows the same wrap the device ring has. Returns the local ring length in bytes and
    /// the WQE's WQEBB count from its `ds` (at least 1, to step over a `ds = 0` WQE).
    pub(super) fn read_wqe(q: &QpCtx, at: u32, buf: &mut [u8; MAX_WQE]) -> (usize, u32) {
        let local_cnt = q.sq_cnt.min((MAX_WQE / wire::MLX5_SEND_WQE_BB) as u32);
        let copy = |i: u32, buf: &mut [u8; MAX_WQE]| {
            let s = ((at + i) & (q.sq_cnt - 1)) as usize;
            let d = ((at + i) & (local_cnt - 1)) as usize * wire::MLX5_SEND_WQE_BB;
            q.mem.read(
                s * wire::MLX5_SEND_WQE_BB,
                &mut buf[d..d + wire::MLX5_SEND_WQE_BB],
            );
        };
        copy(0, buf);
        let first = ((at & (local_cnt - 1)) as usize) * wire::MLX5_SEND_WQE_BB;
        let nbb = ds_bytes(&buf[first..])
            .div_ceil(wire::MLX5_SEND_WQE_BB)
            .max(1) as u32;
        for i in 1..nbb.min(local_cnt) {
            copy(i, buf);
        }
        (local_cnt as usize * wire::MLX5_SEND_WQE_BB, nbb)
    }

    /// Compare a BlueFlame half with the WQE at the head of the ring: `None` when it was a
    /// plain 8-byte doorbell (nothing behind the first word), `Some(matches)` for a copy.
    pub(super) fn compare_bf(
        q: &QpCtx,
        buf: &[u8; MAX_WQE],
        ring_len: usize,
        nbb: u32,
        bf: &[u8; wire::MLX5_BF_SIZE as usize],
    ) -> Option<bool> {
        let head = (q.sq_ci as usize * wire::MLX5_SEND_WQE_BB) & (ring_len - 1);
        let len = ds_bytes(&buf[head..]).min(wire::MLX5_BF_SIZE as usize);
        // An 8-byte doorbell writes the first 8 bytes of the ctrl segment only.
        if bf[8..].iter().all(|&b| b == 0) {
            return None;
        }
        let local_cnt = ring_len / wire::MLX5_SEND_WQE_BB;
        let mut same = true;
        for i in 0..(nbb as usize).min(wire::MLX5_BF_SIZE as usize / wire::MLX5_SEND_WQE_BB) {
            let slot = (q.sq_ci as usize + i) & (local_cnt - 1);
            let n = len
                .saturating_sub(i * wire::MLX5_SEND_WQE_BB)
                .min(wire::MLX5_SEND_WQE_BB);
            same &= buf[slot * wire::MLX5_SEND_WQE_BB..slot * wire::MLX5_SEND_WQE_BB + n]
                == bf[i * wire::MLX5_SEND_WQE_BB..i * wire::MLX5_SEND_WQE_BB + n];
        }
        Some(same)
    }

    /// Parse and check the layout of a send WQE (no memory access yet). Malformed WQEs are
    /// LOC_QP_OP ("local QP operation error: an internal QP consistency error was detected
    /// while processing this WQE"): ds of zero or past the ring, ds too small for the opcode,
    /// an inline length past ds, a ctrl qpn that is not this QP's, a wqe_idx that is not the
    /// device's index, an opcode the QP type cannot do, an atomic whose data segment is not 8
    /// bytes. `at` is the WQE's SQ index (the head's, `sq_ci`, but for the fabric's
    /// requester, which sends WQEs behind the head too).
    pub(super) fn parse(
        q: &QpCtx,
        at: u32,
        buf: &[u8; MAX_WQE],
        ring_len: usize,
    ) -> Result<Wqe, u8> {
        let mut w = Wqe::EMPTY;
        Self::parse_into(q, at, buf, ring_len, &mut w)?;
        Ok(w)
    }

    /// [`Engine::parse`] into `w` (every field set; the data segments past `w.nsegs` are
    /// left as they were). The small inline WRITE takes [`small_write`]'s short way.
    pub(super) fn parse_into(
        q: &QpCtx,
        at: u32,
        buf: &[u8; MAX_WQE],
        ring_len: usize,
        w: &mut Wqe,
    ) -> Result<(), u8> {
        if small_write(q.qpn, q.qp_type, at, buf, ring_len, w) {
            return Ok(());
        }
        parse_general(q.qpn, q.qp_type, at, buf, ring_len, w)
    }
}

/// The general parse of [`Engine::parse_into`], for QP `qpn` of type `qp_type`.
fn parse_general(
    qpn: u32,
    qp_type: QpType,
    at: u32,
    buf: &[u8; MAX_WQE],
    ring_len: usize,
    w: &mut Wqe,
) -> Result<(), u8> {
    let p = wire::parse_send_wqe(&buf[..ring_len], at, qp_type == QpType::Ud)
        .map_err(|_| wire::MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR)?;
    if p.qpn != qpn || u32::from(p.wqe_idx) != at & wire::MLX5_WQE_INDEX_MASK {
        return Err(wire::MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR);
    }
    let opcode = p.opcode;
    let ok_for_type = match qp_type {
        QpType::Rc => true,
        QpType::Uc => !matches!(
            opcode,
            Opcode::RdmaRead | Opcode::AtomicCs | Opcode::AtomicFa
        ),
        QpType::Ud => matches!(opcode, Opcode::Nop | Opcode::Send | Opcode::SendImm),
    };
    if !ok_for_type {
        return Err(wire::MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR);
    }
    let (raddr, rkey) = p.raddr.unwrap_or((0, 0));
    let (swap_add, compare) = p.atomic.unwrap_or((0, 0));
    let (qkey, dqpn, dgid) = match p.av {
        Some(av) => {
            let av = DatagramSeg::new_unchecked(&av[..]);
            (av.qkey(), av.dqpn(), av.rgid())
        }
        None => (0, 0, [0; 16]),
    };
    w.opcode = opcode;
    w.idx = p.wqe_idx;
    w.signaled = p.fm_ce_se & wire::MLX5_WQE_CTRL_CQ_UPDATE != 0;
    w.solicited = p.fm_ce_se & wire::MLX5_WQE_CTRL_SOLICITED != 0;
    w.imm = p.imm.to_be_bytes();
    w.raddr = raddr;
    w.rkey = rkey;
    w.swap_add = swap_add;
    w.compare = compare;
    w.dqpn = dqpn;
    w.qkey = qkey;
    w.dgid = dgid;
    w.inline = [EMPTY_SPAN; 2];
    w.ninline = 0;
    w.nsegs = 0;
    let reads = matches!(
        opcode,
        Opcode::RdmaRead | Opcode::AtomicCs | Opcode::AtomicFa
    );
    for item in p.data_segs() {
        match item {
            DataItem::Inline(d) => {
                if reads || w.nsegs > 0 || w.ninline > 0 {
                    return Err(wire::MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR);
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
                    return Err(wire::MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR);
                }
                w.segs[w.nsegs] = (sge.addr, sge.length, sge.lkey);
                w.nsegs += 1;
            }
        }
    }
    if matches!(opcode, Opcode::AtomicCs | Opcode::AtomicFa) && (w.nsegs != 1 || w.segs[0].1 != 8) {
        return Err(wire::MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR);
    }
    Ok(())
}

/// The ctrl, raddr and one inline unit of the small inline WRITE: `ds` 3.
const SMALL_DS: u8 = 3;
/// The most inline bytes one unit holds after its 4-byte header.
const SMALL_INLINE_MAX: usize = wire::MLX5_WQE_DS_UNITS - wire::offset::inline::DATA;

/// The WQE shape of nearly every latency-bound request, an RDMA WRITE (with or without
/// immediate) of 1 to 12 bytes inline on an RC or UC QP (ctrl, raddr and one inline unit:
/// `ds` 3, within one WQEBB), parsed into `w` without the general walk. False when the WQE
/// is not exactly that or not valid (wrong QPN or index): [`parse_general`] then decides, so
/// what this takes is what the general parse accepts, with the same fields (the test below
/// holds the two against each other).
fn small_write(
    qpn: u32,
    qp_type: QpType,
    at: u32,
    buf: &[u8; MAX_WQE],
    ring_len: usize,
    w: &mut Wqe,
) -> bool {
    if qp_type == QpType::Ud || ring_len < wire::MLX5_SEND_WQE_BB {
        return false;
    }
    let local_cnt = ring_len / wire::MLX5_SEND_WQE_BB;
    let slot = at as usize & (local_cnt - 1);
    let Some(wqe) = buf.get(slot * wire::MLX5_SEND_WQE_BB..(slot + 1) * wire::MLX5_SEND_WQE_BB)
    else {
        return false;
    };
    let units = |i: usize| &wqe[i * wire::MLX5_WQE_DS_UNITS..(i + 1) * wire::MLX5_WQE_DS_UNITS];
    let c = wire::CtrlSeg::new_unchecked(units(0));
    let opcode = c.opcode();
    let idx = c.wqe_idx();
    if c.ds() != SMALL_DS
        || !matches!(opcode, Opcode::RdmaWrite | Opcode::RdmaWriteImm)
        || usize::from(idx) & (local_cnt - 1) != slot
        || u32::from(idx) != at & wire::MLX5_WQE_INDEX_MASK
        || c.qpn() != qpn
    {
        return false;
    }
    let bc = wire::DataSeg::new_unchecked(units(2)).byte_count();
    let len = (bc & !wire::MLX5_INLINE_SEG) as usize;
    if bc & wire::MLX5_INLINE_SEG == 0 || len == 0 || len > SMALL_INLINE_MAX {
        return false;
    }
    let r = wire::RaddrSeg::new_unchecked(units(1));
    let fm_ce_se = c.fm_ce_se();
    w.opcode = opcode;
    w.idx = idx;
    w.signaled = fm_ce_se & wire::MLX5_WQE_CTRL_CQ_UPDATE != 0;
    w.solicited = fm_ce_se & wire::MLX5_WQE_CTRL_SOLICITED != 0;
    w.imm = c.imm().to_be_bytes();
    w.raddr = r.raddr();
    w.rkey = r.rkey();
    w.swap_add = 0;
    w.compare = 0;
    w.dqpn = 0;
    w.qkey = 0;
    w.dgid = [0; 16];
    w.inline = [
        Span {
            // Read-only source inside the local copy `buf`, as the general parse's.
            ptr: units(2)[wire::offset::inline::DATA..].as_ptr() as *mut u8,
            len,
        },
        EMPTY_SPAN,
    ];
    w.ninline = 1;
    w.nsegs = 0;
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fields of a parsed WQE, the inline bytes by value.
    fn fields(w: &Wqe) -> String {
        let inline: Vec<Vec<u8>> = w.inline[..w.ninline]
            .iter()
            // SAFETY: the spans point into the test's `buf`, alive here.
            .map(|s| unsafe { std::slice::from_raw_parts(s.ptr, s.len) }.to_vec())
            .collect();
        format!(
            "{:?} {} {} {} {:?} {:#x} {:#x} {} {} {} {} {:?} {:?} {:?}",
            w.opcode,
            w.idx,
            w.signaled,
            w.solicited,
            w.imm,
            w.raddr,
            w.rkey,
            w.swap_add,
            w.compare,
            w.dqpn,
            w.qkey,
            w.dgid,
            inline,
            &w.segs[..w.nsegs]
        )
    }

    /// WQEs in and around the small inline WRITE's shape (random opcodes, `ds`, indices,
    /// QPNs, inline flags and lengths, flags and fields), on every QP type and two ring
    /// sizes: whatever the short way takes, the general parse takes too, with the same
    /// fields; and the short way takes the valid small WRITEs.
    #[test]
    fn the_short_way_parses_as_the_general_one() {
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut taken, mut valid_small) = (0, 0);
        for i in 0..20_000u32 {
            let qp_type = [QpType::Rc, QpType::Uc, QpType::Ud][i as usize % 3];
            let ring_len = [4, 16][(rnd() % 2) as usize] * wire::MLX5_SEND_WQE_BB;
            let at = rnd() as u32;
            let qpn = 0x12_3400 | (rnd() as u32 & 3);
            let mut buf = [0u8; MAX_WQE];
            for b in buf[..ring_len].iter_mut() {
                *b = rnd() as u8;
            }
            let slot = at as usize & (ring_len / wire::MLX5_SEND_WQE_BB - 1);
            let wqe = &mut buf[slot * 64..slot * 64 + 64];
            let opcode: u8 = [0x08, 0x09, 0x0a, 0x10, 0x00, 0x11][(rnd() % 6) as usize];
            let idx = if rnd() % 8 == 0 {
                rnd() as u16
            } else {
                at as u16
            };
            wqe[0] = 0;
            wqe[1..3].copy_from_slice(&idx.to_be_bytes());
            wqe[3] = opcode;
            let ctrl_qpn = if rnd() % 8 == 0 { qpn ^ 1 } else { qpn };
            let ds = [3u8, 3, 3, 2, 4][(rnd() % 5) as usize];
            wqe[4..8].copy_from_slice(&(ctrl_qpn << 8 | u32::from(ds)).to_be_bytes());
            let len = (rnd() % 16) as u32;
            let flag = if rnd() % 8 == 0 {
                0
            } else {
                wire::MLX5_INLINE_SEG
            };
            wqe[32..36].copy_from_slice(&(flag | len).to_be_bytes());
            let mut general = Wqe::EMPTY;
            let g = parse_general(qpn, qp_type, at, &buf, ring_len, &mut general);
            let mut short = Wqe::EMPTY;
            if small_write(qpn, qp_type, at, &buf, ring_len, &mut short) {
                taken += 1;
                assert_eq!(g, Ok(()), "case {i}: the general parse refuses it");
                assert_eq!(fields(&short), fields(&general), "case {i}");
            }
            let small_shape = qp_type != QpType::Ud
                && matches!(opcode, 0x08 | 0x09)
                && ds == 3
                && idx == at as u16
                && ctrl_qpn == qpn
                && flag != 0
                && (1..=12).contains(&len);
            if small_shape {
                valid_small += 1;
                let mut w = Wqe::EMPTY;
                assert!(
                    small_write(qpn, qp_type, at, &buf, ring_len, &mut w),
                    "case {i}"
                );
            }
        }
        assert_eq!(
            taken, valid_small,
            "the short way took exactly the valid small WRITEs"
        );
        assert!(taken > 1000, "{taken}");
    }
}
