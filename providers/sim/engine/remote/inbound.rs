//! The requester's and the dispatcher's side of the fabric (see `remote` for the protocol):
//! UD datagrams out and in, the poll of the port's inbound rings that routes each packet to
//! the responder (requests) or to the requester (ACKs, NAKs, READ responses, ATOMIC ACKs),
//! and the requester's handling of those answers. Reads: the port's inbound packets and the
//! QPs' fabric state; writes: the requester's fabric state (`RemoteQp`), READ /
//! atomic destination spans, UD receives, the port's counters. A packet that does not name
//! a connected QP of this device is dropped and counted, never a panic.

use super::super::dma::{copy_list, copy_list_at, Span, EMPTY_SPAN};
use super::super::execute::Resp;
use super::super::fetch::{Wqe, MAX_SEGS, MAX_WQE};
use super::super::{Engine, QpCtx};
use super::{psn_diff, release_packets, wire_send, Answer, Kind, Port, RemoteQp, PSN_MASK};
use crate::sim::fabric::packet::{Header, NakCode, Op, Seg, HEADER_LEN};
use crate::sim::fabric::{CELLS, CELL_LEN, MAX_DEVICES};
use crate::wire::Opcode;
use crate::{QpState, QpType};

impl Engine {
    /// UD requester: datagram `w` of `qpn` to the device of another process its address
    /// vector names (the Q_Key resolved here, carried in the rkey field). A datagram
    /// nobody takes is lost, as on a link; `None`: the ring to that device is full.
    pub(in super::super) fn fabric_datagram(
        &mut self,
        qpn: u32,
        w: &Wqe,
        local: &[Span],
    ) -> Option<Resp> {
        /// The high-order bit of a request's Q_Key (IBA): use the sending QP's own Q_Key.
        const QKEY_USE_OWN: u32 = 0x8000_0000;
        let mut port = self.port.take()?;
        let own = self.qps.get(&qpn).map_or(0, |q| q.attr.qkey);
        let r = match port.member.segment().find(&w.dgid) {
            None => Some(Resp::Dropped),
            Some((slot, _)) if port.member.space(slot) == 0 => None,
            Some((slot, epoch)) => {
                let len = w.len() as usize;
                let mut h = Header::new(if w.opcode == Opcode::SendImm {
                    Op::SendImm
                } else {
                    Op::Send
                });
                h.solicited = w.solicited;
                h.src_slot = port.member.slot();
                h.src_epoch = port.member.epoch();
                h.dst_slot = slot;
                h.dst_epoch = epoch;
                h.src_qpn = qpn;
                h.dst_qpn = w.dqpn & PSN_MASK;
                h.rkey = if w.qkey & QKEY_USE_OWN != 0 {
                    own
                } else {
                    w.qkey
                };
                h.len = len as u32;
                h.imm = u32::from_be_bytes(w.imm);
                h.write(&mut port.out[..]);
                let dst = Span {
                    ptr: port.out[HEADER_LEN..].as_mut_ptr(),
                    len,
                };
                // SAFETY: `local` are checked requester spans (or the WQE's inline bytes) of
                // `len` bytes, at most the path MTU (`execute` checked), so at most
                // MAX_PAYLOAD; `dst` is the port's own buffer.
                unsafe { copy_list(local, &[dst]) };
                wire_send(
                    &mut self.fault,
                    &mut port.member,
                    slot,
                    &port.out[..HEADER_LEN + len],
                );
                self.stats.bytes += len as u64;
                Some(Resp::Dropped)
            }
        };
        self.port = Some(port);
        r
    }

    /// UD responder: datagram `h` into QP `h.dst_qpn` if it is a UD QP ready to receive
    /// with the Q_Key `h` carries; dropped otherwise (no receive posted included). The GRH
    /// names the sending device's GID.
    pub(super) fn fabric_datagram_in(
        &mut self,
        port: &mut Port,
        h: &Header,
        torn_ok: bool,
    ) -> bool {
        let Some(q) = self.qps.get(&h.dst_qpn) else {
            return false;
        };
        if q.qp_type != QpType::Ud
            || !matches!(q.state, QpState::Rtr | QpState::Rts)
            || q.attr.qkey != h.rkey
            || !matches!(h.op, Op::Send | Op::SendImm)
            || h.seg != Seg::Only
        {
            return false;
        }
        let src_gid = port.member.segment().gid_of(h.src_slot);
        let payload = Span {
            ptr: port.inb[HEADER_LEN..].as_mut_ptr(),
            len: h.payload_len(),
        };
        let w = Wqe {
            opcode: if h.op == Op::SendImm {
                Opcode::SendImm
            } else {
                Opcode::Send
            },
            idx: 0,
            signaled: false,
            solicited: h.solicited,
            imm: h.imm.to_be_bytes(),
            raddr: 0,
            rkey: 0,
            swap_add: 0,
            compare: 0,
            dqpn: h.dst_qpn,
            qkey: h.rkey,
            dgid: [0; 16],
            inline: [payload, EMPTY_SPAN],
            ninline: usize::from(payload.len > 0),
            segs: [(0, 0, 0); MAX_SEGS],
            nsegs: 0,
        };
        let qpn = h.dst_qpn;
        matches!(
            self.consume_recv(
                h.src_qpn,
                qpn,
                &w,
                &[payload],
                EMPTY_SPAN,
                Some(src_gid),
                torn_ok
            ),
            Resp::Ok
        )
    }

    /// Take what the fabric brought: the hot rings by their head cells, then, when the
    /// member's tail table is due (`Member::sweep_due`), every ring whose tail moved; at most
    /// one ring's worth of packets from a ring each time it is looked at (so a hot ring gives
    /// up to two on a pass that reads the table). Then READ responses as the rings allow, and
    /// the ACKs held back.
    pub(in super::super) fn poll_fabric(&mut self, torn_ok: bool) -> usize {
        let Some(mut port) = self.port.take() else {
            return 0;
        };
        let mut work = 0;
        if self.fault.is_some() && release_packets(&mut self.fault, &mut port.member) {
            // Packets still held are work to come, as held CQEs are.
            work += 1;
        }
        let (me, epoch) = (port.member.slot(), port.member.epoch());
        // The hot rings' head cells first (tail not read), then, when the member says a
        // sweep is due, every ring whose tail moved (tail read: spoiled words, corrupt rings).
        let mut pending = port.member.hot();
        let (mut moved, mut swept, mut took_hot) = (0, false, false);
        loop {
            if pending == 0 {
                if swept || !port.member.sweep_due(took_hot) {
                    break;
                }
                swept = true;
                moved = port.member.pending();
                pending = moved;
                continue;
            }
            let from = pending.trailing_zeros() as u8;
            pending &= pending - 1;
            let tail_moved = moved & (1 << from) != 0;
            for _ in 0..CELLS {
                let Some(n) = port.member.recv_probed(from, &mut port.inb, tail_moved) else {
                    break;
                };
                work += 1;
                took_hot |= !swept;
                let ok = match Header::parse(&port.inb[..n], MAX_DEVICES) {
                    Ok(h) if h.src_slot == from && h.dst_slot == me && h.dst_epoch == epoch => {
                        port.member.stats.received += 1;
                        if h.op.is_response() {
                            self.fabric_answer(&port, &h)
                        } else {
                            // UD datagrams included (`fabric_respond` hands them on).
                            self.fabric_respond(&mut port, &h, torn_ok)
                        }
                    }
                    _ => false,
                };
                if !ok {
                    port.member.stats.dropped += 1;
                }
            }
        }
        if port.reads > 0 {
            work += self.serve_reads(&mut port);
        }
        if port.acks > 0 {
            self.flush_acks(&mut port);
        }
        self.port = Some(port);
        work
    }

    /// True when QP `q` (the one `h` names) is connected over the fabric to exactly `h`'s
    /// sender.
    pub(super) fn fabric_peer(q: &mut QpCtx, port: &Port, h: &Header) -> bool {
        if !matches!(q.qp_type, QpType::Rc | QpType::Uc) || q.attr.remote_qpn != h.src_qpn {
            return false;
        }
        let Some(r) = q.remote.as_mut() else {
            return false;
        };
        if r.peer.is_none() {
            r.peer = port.member.segment().find(&r.gid);
        }
        r.peer == Some((h.src_slot, h.src_epoch))
    }

    /// Requester: an answer for a PSN of `h.dst_qpn` in flight. False: not one it waits for.
    /// An answer that moves the oldest PSN not acknowledged on restarts the transport
    /// retry count (the peer is there).
    fn fabric_answer(&mut self, port: &Port, h: &Header) -> bool {
        let qpn = h.dst_qpn;
        let Some(q) = self.qps.get_mut(&qpn) else {
            return false;
        };
        if !Self::fabric_peer(q, port, h) {
            return false;
        }
        let Some(r) = q.remote.as_deref_mut() else {
            return false;
        };
        let before = r.una;
        let p = h.psn;
        let ok = if psn_diff(p, r.una) >= psn_diff(r.sent_to, r.una) {
            // Not in flight: an old answer (a duplicate's), or a forged one.
            false
        } else if h.op == Op::ReadResp {
            let ok = self.read_response(port, qpn, h);
            let Some(q) = self.qps.get_mut(&qpn) else {
                return ok;
            };
            if q.remote.as_ref().map(|r| r.una) != Some(before) {
                q.retry_left = None;
            }
            if let Some(r) = q.remote.as_deref_mut() {
                // The head may move: the next pass looks at it again.
                r.parked = None;
            }
            return ok;
        } else {
            r.take_answer(&port.inb, h)
        };
        // The head may move: the next pass looks at it again.
        r.parked = None;
        if r.una != before {
            q.retry_left = None;
        }
        ok
    }

    /// Requester: READ response `h` (its data in `port.inb`) into the READ's local spans.
    /// It acknowledges every request before its READ (an implied ACK). Responses land in
    /// PSN order only: one that comes after a gap (responses lost, damaged or late) is
    /// dropped, and the READ is asked again at once from the first missing PSN (once per
    /// gap, as the responder's sequence NAK does for requests); a lost last response is
    /// found by the ACK timeout.
    fn read_response(&mut self, port: &Port, qpn: u32, h: &Header) -> bool {
        let p = h.psn;
        let Some(r) = self.qps.get_mut(&qpn).and_then(|q| q.remote.as_deref_mut()) else {
            return false;
        };
        let Some(f) = r.flight[..r.nflight]
            .iter()
            .find(|f| f.contains(p))
            .copied()
        else {
            return false;
        };
        if f.kind != Kind::Read {
            return false;
        }
        r.ack_to(f.psn);
        if p != r.una {
            let una = r.una;
            if f.contains(una) && psn_diff(p, una) < f.npkts && r.regap != Some(una) {
                r.regap = Some(una);
                r.rewind(una);
            }
            return false;
        }
        let q = &self.qps[&qpn];
        let mut buf = [0u8; MAX_WQE];
        let (ring_len, _) = Self::read_wqe(q, f.idx, &mut buf);
        let Ok(w) = Self::parse(q, f.idx, &buf, ring_len) else {
            return false;
        };
        let len = w.len();
        let off = u64::from(psn_diff(p, f.psn)) * u64::from(f.mtu);
        let want = len.saturating_sub(off).min(u64::from(f.mtu));
        if u64::from(h.len) != want {
            return false;
        }
        let mut local = [EMPTY_SPAN; MAX_SEGS];
        let Ok(nlocal) = self.local_spans(q.pd, &w, &mut local) else {
            return false;
        };
        let src = Span {
            ptr: port.inb[HEADER_LEN..].as_ptr() as *mut u8,
            len: want as usize,
        };
        // SAFETY: `local` was checked against the requester's MRs with LOCAL_WRITE and
        // holds `len` bytes, `off + want <= len`; `src` is the port's copy of the packet
        // (read only).
        unsafe { copy_list_at(&[src], &local[..nlocal], off as usize) };
        let r = self.qps.get_mut(&qpn).and_then(|q| q.remote.as_deref_mut());
        let r = r.expect("found above");
        r.moved_to((p + 1) & PSN_MASK);
        true
    }
}

impl RemoteQp {
    /// Requester: ACK, NAK or ATOMIC ACK `h` (its payload in `inb`) for a PSN in flight.
    /// False: not one it waits for.
    fn take_answer(&mut self, inb: &[u8; CELL_LEN], h: &Header) -> bool {
        let r = self;
        let p = h.psn;
        match h.op {
            Op::Ack => r.ack_to((p + 1) & PSN_MASK),
            Op::NakRnr | Op::NakErr => {
                r.ack_to(p);
                if r.una != p {
                    return false;
                }
                let code = NakCode::from_byte(h.nak);
                if h.op == Op::NakRnr {
                    r.rnr_timer = h.nak;
                    r.answer = Some(Answer::Rnr { psn: p });
                } else if code == NakCode::PsnSeq {
                    r.rewind(p);
                } else {
                    r.answer = Some(Answer::Nak { psn: p, code });
                }
            }
            Op::AtomicAck => {
                let Some(i) = r.flight[..r.nflight].iter().position(|f| f.contains(p)) else {
                    return false;
                };
                if p != r.una || r.flight[i].kind != Kind::Atomic || h.len != 8 {
                    return false;
                }
                let mut b = [0u8; 8];
                b.copy_from_slice(&inb[HEADER_LEN..HEADER_LEN + 8]);
                r.flight[i].value = Some(u64::from_be_bytes(b));
                r.moved_to((p + 1) & PSN_MASK);
            }
            _ => return false,
        }
        true
    }
}
