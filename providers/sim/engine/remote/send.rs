//! The requester's send path over the fabric (see `remote` for the protocol): taking the
//! head WQE of a QP's SQ through its flight (a NAK heard for it, every PSN acknowledged, a
//! resend after a timeout or a NAK, parking when nothing may go), and sending the packets of
//! the WQEs from `send_at` on as the window, the ring to the peer and the READ fence allow.
//! Reads: the QP's SQ (WQEs at and behind the head) and checked local spans, the requester's
//! fabric state; writes: that state (`RemoteQp`: flight, PSNs, parking), READ / atomic
//! destination spans of the head, packets to the peer's ring, the port's counters. A WQE that
//! does not parse or whose spans fail their check is not sent (`execute` fails it at the head).

use std::time::Instant;

use super::super::dma::{copy_list, gather_at, Span, EMPTY_SPAN};
use super::super::execute::Resp;
use super::super::fetch::{Wqe, MAX_SEGS, MAX_WQE};
use super::super::Engine;
use super::{
    ack_timeout, nak_syndrome, psn_diff, psn_lt, segment, wire_op, wire_send, Answer, Flight, Kind,
    Parked, Port, PARK_CLOCK_EVERY, PSN_MASK, WINDOW,
};
use crate::sim::fabric::packet::{read_packets, Header, Op, Seg, HEADER_LEN};
use crate::sim::fabric::MAX_MESSAGE;
use crate::wire;
use crate::QpType;

impl Engine {
    /// Requester: the head WQE `w` of `qpn` (its local spans checked) over the fabric, and
    /// the WQEs behind it as the window allows. `None`: in flight, nothing to report yet.
    pub(in super::super) fn fabric_send(
        &mut self,
        qpn: u32,
        w: &Wqe,
        local: &[Span],
        nbb: u32,
    ) -> Option<Resp> {
        let mut port = self.port.take()?;
        let r = self.fabric_step(&mut port, qpn, w, local, nbb);
        self.port = Some(port);
        r
    }

    fn fabric_step(
        &mut self,
        port: &mut Port,
        qpn: u32,
        w: &Wqe,
        local: &[Span],
        nbb: u32,
    ) -> Option<Resp> {
        let q = self.qps.get_mut(&qpn)?;
        let head = q.sq_ci;
        let timeout = q.attr.timeout;
        let r = q.remote.as_deref_mut()?;
        let mine = r.nflight > 0 && r.flight[0].idx == head;
        if !mine && wire_op(w.opcode).is_none() {
            return Some(Resp::Ok);
        }
        // 1. A NAK for the head (one for a later PSN waits: the head completes first).
        if let Some(a) = r.answer {
            let psn = match a {
                Answer::Rnr { psn } | Answer::Nak { psn, .. } => psn,
            };
            if !mine || r.flight[0].contains(psn) {
                r.answer = None;
                return Some(match a {
                    Answer::Rnr { psn } => {
                        r.rewind(psn);
                        Resp::Rnr
                    }
                    Answer::Nak { code, .. } => {
                        r.nflight = 0;
                        Resp::Nak(nak_syndrome(code))
                    }
                });
            }
        }
        // 2. The head done: every PSN acknowledged (and an atomic's value in).
        if mine {
            let f = r.flight[0];
            if !psn_lt(r.una, f.end()) && (f.kind != Kind::Atomic || f.value.is_some()) {
                r.flight.copy_within(1..r.nflight, 0);
                r.nflight -= 1;
                let mut len = w.len();
                if let Some(v) = f.value {
                    // The original value in host byte order, as on one device.
                    let mut b = v.to_ne_bytes();
                    let src = Span {
                        ptr: b.as_mut_ptr(),
                        len: 8,
                    };
                    // SAFETY: `local` was checked against the requester's MRs with
                    // LOCAL_WRITE (8 bytes, `parse` checked); `src` is on this stack.
                    unsafe { copy_list(&[src], local) };
                    len = 8;
                }
                self.stats.bytes += len;
                return Some(Resp::Ok);
            }
        } else {
            if w.len() > MAX_MESSAGE {
                return Some(Resp::Nak(wire::MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR));
            }
            if r.nflight == 0 && (head.wrapping_sub(r.send_at) as i32) > 0 {
                // WQEs completed without packets (NOPs) at the head.
                r.send_at = head;
                r.send_off = 0;
            }
        }
        // 3. No progress within the ACK timeout: lost; the transport retry counts it. The
        // same for a head that found no room in the ring to the peer for as long.
        if r.nflight == 0 {
            if let Some(t) = r.blocked {
                if t.elapsed() >= ack_timeout(timeout) {
                    r.blocked = None;
                    r.peer = None;
                    return Some(Resp::NoPeer);
                }
            }
        } else {
            if let Some(t) = r.progress {
                if t.elapsed() >= ack_timeout(timeout) {
                    let una = r.una;
                    r.rewind(una);
                    r.regap = None;
                    r.peer = None;
                    return Some(Resp::NoPeer);
                }
            }
        }
        // 4. Send what the window allows; park the head if nothing but an answer, a
        // doorbell or the ACK timeout can move it now.
        let settled = self.fabric_pump(port, qpn, Some((w, local, nbb)));
        if let Some(q) = self.qps.get_mut(&qpn) {
            let pi = q.sq_pi();
            let r = q.remote.as_deref_mut()?;
            r.parked = match r.progress {
                Some(t) if settled && r.answer.is_none() && !r.head_done(head) && r.nflight > 0 => {
                    Some(Parked {
                        pi,
                        until: t + ack_timeout(timeout),
                        skip: PARK_CLOCK_EVERY - 1,
                    })
                }
                _ => None,
            };
        }
        None
    }

    /// Requester: send the packets of `qpn`'s WQEs from `send_at` on while the window, the
    /// ring to the peer and the fence after a multi-segment READ allow. A WQE that does not
    /// parse or whose local spans fail their check is not sent: at the head, `execute`
    /// fails it. True when it stopped because nothing more may go before an answer or a
    /// doorbell (the window, the READ fence, the end of the posted WQEs); false when it
    /// stopped for another reason (the ring to the peer full, a WQE it could not send).
    fn fabric_pump(
        &mut self,
        port: &mut Port,
        qpn: u32,
        head: Option<(&Wqe, &[Span], u32)>,
    ) -> bool {
        for _ in 0..WINDOW * 2 {
            // Scratch for a WQE behind the head, made (zeroed) only when one is read: the
            // head comes parsed and checked from `execute`.
            let mut buf: [u8; MAX_WQE];
            let mut spans: [Span; MAX_SEGS];
            let Some(q) = self.qps.get(&qpn) else {
                return false;
            };
            let Some(r) = q.remote.as_deref() else {
                return false;
            };
            let at = r.send_at;
            if at & wire::MLX5_WQE_INDEX_MASK == q.sq_pi() || psn_diff(r.next_psn, r.una) >= WINDOW
            {
                return true;
            }
            // A WQE sent before (all or part): its record stays, its PSNs are the same.
            let resumed = r.flight[..r.nflight].iter().position(|f| f.idx == at);
            if resumed.is_none() {
                if r.nflight == WINDOW as usize {
                    return true;
                }
                if let Some(l) = r.flight[..r.nflight].last() {
                    if l.kind == Kind::Read && l.npkts > 1 && psn_lt(r.una, l.end()) {
                        return true;
                    }
                }
            }
            let parsed: Wqe;
            let (w, nbb) = match head {
                // The head as `execute` parsed it (and checked its spans) this pass.
                Some((hw, _, hn)) if at == q.sq_ci => (hw, hn),
                _ => {
                    buf = [0u8; MAX_WQE];
                    let (ring_len, nbb) = Self::read_wqe(q, at, &mut buf);
                    let Ok(w) = Self::parse(q, at, &buf, ring_len) else {
                        return false;
                    };
                    parsed = w;
                    (&parsed, nbb)
                }
            };
            let Some(op) = wire_op(w.opcode) else {
                // Nothing to send (a NOP): completed when it reaches the head.
                let r = self.qps.get_mut(&qpn).and_then(|q| q.remote.as_deref_mut());
                if let Some(r) = r {
                    r.send_at = at.wrapping_add(nbb);
                    r.send_off = 0;
                }
                continue;
            };
            let len = w.len();
            if len > MAX_MESSAGE {
                return false;
            }
            let (opcode, wqe_idx, signaled) = (w.opcode, w.idx, w.signaled);
            let local: &[Span] = match head {
                Some((_, hl, _)) if at == q.sq_ci => hl,
                _ => match self.local_spans(q.pd, w, {
                    spans = [EMPTY_SPAN; MAX_SEGS];
                    &mut spans
                }) {
                    Ok(n) => &spans[..n],
                    Err(_) => return false,
                },
            };
            let unreliable = q.qp_type == QpType::Uc;
            let peer = r.peer.or_else(|| port.member.segment().find(&r.gid));
            if let Some((slot, _)) = peer {
                if port.member.space(slot) == 0 {
                    let r = self.qps.get_mut(&qpn).and_then(|q| q.remote.as_deref_mut());
                    if let Some(r) = r.filter(|r| r.nflight == 0) {
                        r.blocked.get_or_insert_with(Instant::now);
                    }
                    return false;
                }
            }
            let mtu = match resumed {
                Some(i) => r.flight[i].mtu,
                None => segment(q.attr.path_mtu),
            };
            let off = if resumed.is_some() { r.send_off } else { 0 };
            let psn = r.next_psn;
            let mut h = Header::new(op);
            h.src_slot = port.member.slot();
            h.src_epoch = port.member.epoch();
            h.src_qpn = qpn;
            h.dst_qpn = q.attr.remote_qpn;
            h.psn = psn;
            h.rkey = w.rkey;
            h.raddr = w.raddr.wrapping_add(off);
            let (kind, npkts, taken, n) = match op {
                Op::Read => {
                    h.len = (len - off) as u32;
                    h.imm = mtu;
                    let all = read_packets(len, u64::from(mtu));
                    (Kind::Read, all, read_packets(len - off, u64::from(mtu)), 0)
                }
                Op::Cas | Op::Faa => {
                    h.compare = w.compare;
                    h.swap_add = w.swap_add;
                    (Kind::Atomic, 1, 1, 0)
                }
                _ => {
                    let n = (len - off).min(u64::from(mtu));
                    h.seg = Seg::of(off, n, len);
                    h.len = n as u32;
                    if h.seg.ends() {
                        h.solicited = w.solicited;
                        h.imm = u32::from_be_bytes(w.imm);
                    }
                    let all = read_packets(len, u64::from(mtu));
                    (Kind::Plain, all, 1, n)
                }
            };
            if let Some((slot, epoch)) = peer {
                h.dst_slot = slot;
                h.dst_epoch = epoch;
                h.write(&mut port.out[..]);
                if n > 0 {
                    let dst = Span {
                        ptr: port.out[HEADER_LEN..].as_mut_ptr(),
                        len: n as usize,
                    };
                    // SAFETY: `local` are the requester's checked spans (or the WQE's inline
                    // bytes in `buf`); `dst` is the port's own buffer, `n` bytes at most the
                    // MTU.
                    unsafe { gather_at(local, off as usize, dst) };
                }
                wire_send(
                    &mut self.fault,
                    &mut port.member,
                    slot,
                    &port.out[..HEADER_LEN + n as usize],
                );
            }
            // Nobody there (not joined, gone): as a packet lost on the link.
            let Some(r) = self.qps.get_mut(&qpn).and_then(|q| q.remote.as_deref_mut()) else {
                return false;
            };
            r.peer = peer;
            r.blocked = None;
            if resumed.is_none() {
                r.flight[r.nflight] = Flight {
                    idx: at,
                    nbb,
                    psn,
                    npkts,
                    mtu,
                    kind,
                    opcode,
                    wqe_idx,
                    signaled,
                    len,
                    value: None,
                };
                r.nflight += 1;
            }
            r.next_psn = (psn + taken) & PSN_MASK;
            if psn_lt(r.sent_to, r.next_psn) {
                r.sent_to = r.next_psn;
            }
            if unreliable {
                // UC: nothing comes back; a packet sent is a packet done.
                r.una = r.next_psn;
            }
            if kind == Kind::Plain && off + n < len {
                r.send_off = off + n;
            } else {
                r.send_at = at.wrapping_add(nbb);
                r.send_off = 0;
            }
            if r.progress.is_none() {
                r.progress = Some(Instant::now());
            }
        }
        false
    }
}
