//! Receive matching: the responder side of a message that consumes a receive (SEND,
//! SEND_IMM, WRITE_IMM; UD datagrams).
//!
//! Reads: the responder's RQ (its `dbrec[0]` and ring) or its SRQ (`dbrec[0]`, the
//! `next_wqe_index` links), the receive WQE's data segments up to the `MLX5_INVALID_LKEY`
//! terminator, the MR table. Writes: the responder's receive buffers (with a 40-byte GRH in
//! front for UD), its RQ index or the SRQ's cursor, the responder CQE through `cqe`, the
//! responder QP's state on error, `EngineStats::bytes`.
//!
//! Invariants: receives are consumed in order (RQ: ring order; SRQ: along the links, the
//! CQE naming the SRQ WQE index as `wqe_counter`); a receive is consumed even when its
//! message then fails (the responder's error CQE names it); no byte is written past the
//! receive's checked capacity.

use super::dma::{copy_list, gather_into, Span, EMPTY_SPAN};
use super::execute::Resp;
use super::fetch::{Wqe, MAX_SEGS, MAX_WQE};
use super::{stream, Engine};
use crate::wire;
use crate::wire::{CqeOpcode, CqeRepr, Opcode, Syndrome};

/// Where the receive for an incoming message comes from.
#[derive(Clone, Copy)]
pub(super) enum RecvLoc {
    Rq { ci: u32 },
    Srq { srqn: u32, index: u16 },
}

impl Engine {
    pub(super) fn find_recv(&self, peer: u32) -> Option<RecvLoc> {
        let p = self.qps.get(&peer)?;
        match p.srqn {
            None => {
                if p.rq_ci & wire::MLX5_WQE_INDEX_MASK == p.rq_posted() {
                    None
                } else {
                    Some(RecvLoc::Rq { ci: p.rq_ci })
                }
            }
            Some(srqn) => {
                let s = self.srqs.get(&srqn)?;
                let posted = s.mem.load_be32(s.dbrec_off + 4 * wire::MLX5_RCV_DBR)
                    & wire::MLX5_WQE_INDEX_MASK;
                if s.consumed & wire::MLX5_WQE_INDEX_MASK == posted {
                    None
                } else {
                    Some(RecvLoc::Srq { srqn, index: s.cur })
                }
            }
        }
    }

    /// Read the data segments of a receive WQE (up to the `MLX5_INVALID_LKEY` terminator),
    /// check them against the MRs of `pd` (LOCAL_WRITE), and return the spans.
    pub(super) fn recv_spans(
        &self,
        loc: RecvLoc,
        peer: u32,
        spans: &mut [Span; MAX_SEGS],
    ) -> Result<(usize, u64), u8> {
        let mut wqe = [0u8; MAX_WQE];
        let (mem, off, stride, srq, pd) = match loc {
            RecvLoc::Rq { ci } => {
                let p = &self.qps[&peer];
                let slot = (ci & (p.rq_cnt - 1)) as usize;
                (
                    &p.mem,
                    p.rq_off + slot * p.rq_stride as usize,
                    p.rq_stride as usize,
                    false,
                    p.pd,
                )
            }
            RecvLoc::Srq { srqn, index } => {
                let s = &self.srqs[&srqn];
                (
                    &s.mem,
                    usize::from(index) * s.stride as usize,
                    s.stride as usize,
                    true,
                    s.pd,
                )
            }
        };
        let stride = stride.min(MAX_WQE);
        mem.read(off, &mut wqe[..stride]);
        let mut n = 0;
        let mut cap = 0u64;
        let slot = &wqe[..stride];
        let units = slot.len() / wire::MLX5_WQE_DS_UNITS;
        // A receive WQE we cannot read as one is a local QP operation error on the responder.
        let sges = if srq {
            // The SRQ's next segment, then the data segments.
            wire::parse_srq_wqe(slot, units.saturating_sub(1)).map(|(_, sges)| sges)
        } else {
            wire::parse_recv_wqe(slot, units)
        }
        .map_err(|_| wire::MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR)?;
        for sge in sges {
            if sge.length == 0 || n == MAX_SEGS {
                continue;
            }
            let len = sge.length & !wire::MLX5_INLINE_SEG;
            spans[n] = self.local_span(pd, sge.addr, len, sge.lkey, true)?;
            cap += u64::from(len);
            n += 1;
        }
        Ok((n, cap))
    }

    pub(super) fn commit_recv(&mut self, peer: u32, loc: RecvLoc) -> u16 {
        match loc {
            RecvLoc::Rq { ci } => {
                if let Some(p) = self.qps.get_mut(&peer) {
                    p.rq_ci = ci.wrapping_add(1);
                }
                ci as u16
            }
            RecvLoc::Srq { srqn, index } => {
                if let Some(s) = self.srqs.get_mut(&srqn) {
                    let mut unit = [0u8; wire::MLX5_WQE_DS_UNITS];
                    s.mem
                        .read(usize::from(index) * s.stride as usize, &mut unit);
                    let next = wire::SrqNextSeg::new_unchecked(&unit[..]).next_wqe_index();
                    s.cur = next & (s.wqe_cnt - 1) as u16;
                    s.consumed = s.consumed.wrapping_add(1);
                }
                index
            }
        }
    }

    /// A message that consumes a receive at `peer` (SEND, SEND_IMM, WRITE_IMM; UD when `ud`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn consume_recv(
        &mut self,
        qpn: u32,
        peer: u32,
        w: &Wqe,
        local: &[Span],
        remote: Span,
        ud: Option<[u8; 16]>,
        torn_ok: bool,
    ) -> Resp {
        let Some(loc) = self.find_recv(peer) else {
            return Resp::Rnr;
        };
        let len = w.len();
        let p = &self.qps[&peer];
        let (recv_cqn, srqn) = (p.recv_cqn, p.srqn.unwrap_or(0));
        let mut spans = [EMPTY_SPAN; MAX_SEGS];
        let scanned = self.recv_spans(loc, peer, &mut spans);
        let counter = self.commit_recv(peer, loc);
        let resp_err = |s: u8| CqeRepr {
            opcode: CqeOpcode::RespErr,
            qpn: peer,
            wqe_counter: counter,
            syndrome: Syndrome::from(s),
            srqn,
            ..Default::default()
        };
        let (n, cap) = match scanned {
            Ok(x) => x,
            Err(s) => {
                // A bad receive WQE: responder LOC_PROT, requester REM_OP (the responder
                // could not complete the operation).
                self.push_cqe(recv_cqn, resp_err(s), stream(peer, true), torn_ok);
                self.responder_error(peer);
                return Resp::Nak(wire::MLX5_CQE_SYNDROME_REMOTE_OP_ERR);
            }
        };
        let grh = ud.is_some();
        let needed = if w.opcode == Opcode::RdmaWriteImm {
            0
        } else {
            len + if grh { wire::IBV_GRH_LEN as u64 } else { 0 }
        };
        if needed > cap {
            // Longer than the receive: responder LOC_LEN, requester REM_INV_REQ (mlx5 and
            // the IBA; rxe, kernel 6.1, reports LOC_QP_OP / REM_OP here instead).
            self.push_cqe(
                recv_cqn,
                resp_err(wire::MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR),
                stream(peer, true),
                torn_ok,
            );
            self.responder_error(peer);
            return Resp::Nak(wire::MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR);
        }
        let spans = &spans[..n];
        match w.opcode {
            Opcode::RdmaWriteImm => {
                // SAFETY: `remote` checked against the responder's MR, `local` against the
                // requester's (or the WQE buffer).
                unsafe { gather_into(local, remote) };
            }
            _ => {
                let src_gid = ud.unwrap_or(self.gid);
                let mut grh_bytes = make_grh(len as u32, &src_gid, &self.gid);
                let mut src = [EMPTY_SPAN; MAX_SEGS + 1];
                let mut ns = 0;
                if grh {
                    src[0] = Span {
                        ptr: grh_bytes.as_mut_ptr(),
                        len: wire::IBV_GRH_LEN,
                    };
                    ns = 1;
                }
                for s in local {
                    src[ns] = *s;
                    ns += 1;
                }
                // SAFETY: source spans are checked requester MRs, the WQE buffer or the GRH
                // array on this stack; destination spans are checked LOCAL_WRITE MRs of the
                // responder; `needed <= cap`.
                unsafe { copy_list(&src[..ns], spans) };
            }
        }
        self.stats.bytes += len;
        let byte_cnt = (len + if grh { wire::IBV_GRH_LEN as u64 } else { 0 }) as u32;
        let done = RecvDone {
            opcode: w.opcode,
            src_qp: qpn,
            byte_cnt,
            imm: w.imm,
            solicited: w.solicited,
            grh,
        };
        self.recv_complete(peer, counter, done, torn_ok);
        Resp::Ok
    }

    /// The responder CQE of a message that consumed receive `counter` of `peer`.
    pub(super) fn recv_complete(&mut self, peer: u32, counter: u16, d: RecvDone, torn_ok: bool) {
        let Some(p) = self.qps.get(&peer) else {
            return;
        };
        let (recv_cqn, srqn) = (p.recv_cqn, p.srqn.unwrap_or(0));
        let (opcode, with_imm) = match d.opcode {
            Opcode::Send => (CqeOpcode::RespSend, false),
            Opcode::SendImm => (CqeOpcode::RespSendImm, true),
            _ => (CqeOpcode::RespWrImm, true),
        };
        let f = CqeRepr {
            opcode,
            qpn: peer,
            wqe_counter: counter,
            byte_cnt: d.byte_cnt,
            imm_inval_pkey: if with_imm {
                u32::from_be_bytes(d.imm)
            } else {
                0
            },
            src_qp: d.src_qp,
            flags: if d.grh {
                wire::MLX5_CQE_FLAGS_GRH_PRESENT
            } else {
                0
            },
            srqn,
            se: d.solicited,
            ..Default::default()
        };
        self.push_cqe(recv_cqn, f, stream(peer, true), torn_ok);
    }

    /// A responder error CQE for receive `counter` of `peer` (the QP then goes to ERR).
    pub(super) fn recv_fail(&mut self, peer: u32, counter: u16, s: u8, torn_ok: bool) {
        let Some(p) = self.qps.get(&peer) else {
            return;
        };
        let (recv_cqn, srqn) = (p.recv_cqn, p.srqn.unwrap_or(0));
        let f = CqeRepr {
            opcode: CqeOpcode::RespErr,
            qpn: peer,
            wqe_counter: counter,
            syndrome: Syndrome::from(s),
            srqn,
            ..Default::default()
        };
        self.push_cqe(recv_cqn, f, stream(peer, true), torn_ok);
        self.responder_error(peer);
    }
}

/// What the CQE of a completed receive says.
#[derive(Clone, Copy)]
pub(super) struct RecvDone {
    /// SEND, SEND WITH IMM or WRITE WITH IMM.
    pub(super) opcode: Opcode,
    pub(super) src_qp: u32,
    pub(super) byte_cnt: u32,
    pub(super) imm: [u8; 4],
    pub(super) solicited: bool,
    pub(super) grh: bool,
}

/// The 40-byte GRH in front of a UD receive: an IPv6-shaped header (version 6, payload
/// length = BTH 12 + DETH 8 + payload + ICRC 4, next header 0x1b = IBA transport, hop limit
/// 64) with the sender's GID as source and the receiving port's as destination (the same
/// GID for a datagram within one device).
pub(super) fn make_grh(payload: u32, src: &[u8; 16], dst: &[u8; 16]) -> [u8; wire::IBV_GRH_LEN] {
    /// The GRH next-header value of an IBA transport header.
    const NEXT_HEADER_IBA: u8 = 0x1b;
    let mut g = [0u8; wire::IBV_GRH_LEN];
    g[0] = 0x60;
    g[4..6].copy_from_slice(&((payload + 12 + 8 + 4) as u16).to_be_bytes());
    g[6] = NEXT_HEADER_IBA;
    g[7] = 64;
    g[8..24].copy_from_slice(src);
    g[24..40].copy_from_slice(dst);
    g
}
