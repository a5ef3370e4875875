//! The responder's side of the fabric (see `remote` for the protocol): executing the request
//! whose PSN is expected (RC and UC), answering duplicates again, NAKs for sequence gaps,
//! missing receives and IBA errors, streaming READ responses as the ring allows, and sending
//! the ACKs a full ring held back. Reads: the request packet and its payload, the MR table
//! and receive queue (checked spans only); writes: registered memory, receive CQEs, the
//! responder's fabric state, the port's counters. Nothing is written outside a checked span.

use super::super::dma::{copy_list, copy_list_at, Span, EMPTY_SPAN};
use super::super::execute::Resp;
use super::super::fetch::{Wqe, MAX_SEGS};
use super::super::recv::{RecvDone, RecvLoc};
use super::super::Engine;
use super::{
    nak_code, psn_diff, psn_lt, reply_to, wire_send, Port, ReadOut, Reply, Rx, PSN_MASK, WINDOW,
};
use crate::sim::fabric::packet::{
    read_packets, valid_segment, Header, NakCode, Op, Seg, HEADER_LEN,
};
use crate::sim::fault::FaultInjector;
use crate::wire::{self, Opcode};
use crate::{Access, QpState, QpType};

impl Engine {
    /// Send answer `a` (with `n` payload bytes already in `port.out`) if the ring has room.
    /// False: it did not (a NAK or response lost so is covered by the requester's timeout;
    /// an ACK is kept and sent by a later pass). Without a fault injector the header goes
    /// from the stack straight into the ring; with one, through `port.out` and `wire_send`.
    fn answer(fault: &mut Option<FaultInjector>, port: &mut Port, a: &Header, n: usize) -> bool {
        if fault.is_none() {
            let payload = &port.out[HEADER_LEN..HEADER_LEN + n];
            return port.member.send_header(a.dst_slot, &a.to_bytes(), payload);
        }
        a.write(&mut port.out[..]);
        let to = a.dst_slot;
        wire_send(fault, &mut port.member, to, &port.out[..HEADER_LEN + n])
    }

    /// Responder: send the ACKs a full ring held back, as the rings allow.
    pub(super) fn flush_acks(&mut self, port: &mut Port) {
        let mut left = 0;
        for q in self.qps.values_mut() {
            let Some(r) = q.remote.as_deref_mut() else {
                continue;
            };
            if let Some(a) = r.ack_due {
                if Self::answer(&mut self.fault, port, &a, 0) {
                    r.ack_due = None;
                } else {
                    left += 1;
                }
            }
        }
        // Counted anew (a QP destroyed or connected again took its ACK with it).
        port.acks = left;
    }

    /// Responder: request `h` (payload in `port.inb`): executed if its PSN is the one
    /// expected, answered again if it is a duplicate, a sequence NAK if it is ahead.
    pub(super) fn fabric_respond(&mut self, port: &mut Port, h: &Header, torn_ok: bool) -> bool {
        let qpn = h.dst_qpn;
        let Some(q) = self.qps.get_mut(&qpn) else {
            return false;
        };
        if q.qp_type == QpType::Ud {
            return self.fabric_datagram_in(port, h, torn_ok);
        }
        if !Self::fabric_peer(q, port, h) || !matches!(q.state, QpState::Rtr | QpState::Rts) {
            return false;
        }
        if q.qp_type == QpType::Uc {
            return self.uc_respond(port, qpn, h, torn_ok);
        }
        let r = q.remote.as_deref().expect("checked by fabric_peer");
        let (epsn, reading, rx) = (r.epsn, r.read.is_some(), r.rx);
        let d = psn_diff(h.psn, epsn);
        if d == 0 {
            if reading {
                // Still answering a READ: a request behind it waits for the resend.
                return false;
            }
            let reply = self.fabric_execute(port, qpn, h, torn_ok, true, rx);
            let r = self.qps.get_mut(&qpn).and_then(|q| q.remote.as_deref_mut());
            let r = r.expect("checked by fabric_peer");
            match reply {
                Reply::Ack => {
                    r.epsn = (epsn + 1) & PSN_MASK;
                    r.nak_sent = false;
                    // Cumulative: one ACK per message, and one every half window inside a
                    // long one (the requester's window never waits for a LAST).
                    let half = WINDOW / 2;
                    if h.seg.ends() || h.psn % half == half - 1 {
                        let a = reply_to(h, Op::Ack);
                        if !Self::answer(&mut self.fault, port, &a, 0) {
                            if r.ack_due.is_none() {
                                port.acks += 1;
                            }
                            r.ack_due = Some(a);
                        } else if r.ack_due.take().is_some() {
                            port.acks -= 1;
                        }
                    }
                }
                Reply::Read(n) => {
                    r.epsn = (epsn + n) & PSN_MASK;
                    r.nak_sent = false;
                    r.read = Some(ReadOut {
                        req: *h,
                        off: 0,
                        psn: h.psn,
                    });
                    port.reads += 1;
                    // Answered at once as far as the ring allows: a READ of one segment
                    // is done before the request behind it in the ring is looked at.
                    self.serve_read(port, qpn);
                }
                Reply::Atomic(v) => {
                    r.epsn = (epsn + 1) & PSN_MASK;
                    r.nak_sent = false;
                    r.atomics[r.next_atomic] = Some((h.psn, v));
                    r.next_atomic = (r.next_atomic + 1) % WINDOW as usize;
                    port.out[HEADER_LEN..HEADER_LEN + 8].copy_from_slice(&v.to_be_bytes());
                    let mut a = reply_to(h, Op::AtomicAck);
                    a.len = 8;
                    Self::answer(&mut self.fault, port, &a, 8);
                }
                Reply::Rnr(t) => {
                    let mut a = reply_to(h, Op::NakRnr);
                    a.nak = t;
                    Self::answer(&mut self.fault, port, &a, 0);
                }
                Reply::Nak(c) => {
                    let mut a = reply_to(h, Op::NakErr);
                    a.nak = c as u8;
                    Self::answer(&mut self.fault, port, &a, 0);
                }
            }
        } else if d >= 1 << 23 {
            // A duplicate: answered again, not executed again.
            match h.op {
                Op::Read => {
                    let q = &self.qps[&qpn];
                    let ok = valid_segment(h.imm)
                        && (h.len == 0
                            || self
                                .remote_span(
                                    q,
                                    h.raddr,
                                    u64::from(h.len),
                                    h.rkey,
                                    Access::REMOTE_READ,
                                )
                                .is_ok());
                    if !ok {
                        return false;
                    }
                    let r = self.qps.get_mut(&qpn).and_then(|q| q.remote.as_deref_mut());
                    let r = r.expect("checked by fabric_peer");
                    match r.read {
                        Some(ro) => {
                            // Still answering an earlier READ: one after it waits for the
                            // resend (taking it now would drop the earlier one's remaining
                            // responses); one within it is the requester going back, answered
                            // from there instead.
                            let n = read_packets(u64::from(ro.req.len), u64::from(ro.req.imm));
                            if !psn_lt(h.psn, (ro.req.psn + n) & PSN_MASK) {
                                return false;
                            }
                        }
                        None => port.reads += 1,
                    }
                    r.read = Some(ReadOut {
                        req: *h,
                        off: 0,
                        psn: h.psn,
                    });
                    // Answered at once as far as the ring allows, as a READ executed the
                    // first time is: the duplicates behind it find it done.
                    self.serve_read(port, qpn);
                }
                Op::Cas | Op::Faa => {
                    let r = self.qps[&qpn].remote.as_deref();
                    let r = r.expect("checked by fabric_peer");
                    let found = r.atomics.iter().flatten().find(|&&(p, _)| p == h.psn);
                    let Some(&(psn, v)) = found else {
                        return false;
                    };
                    port.out[HEADER_LEN..HEADER_LEN + 8].copy_from_slice(&v.to_be_bytes());
                    let mut a = reply_to(h, Op::AtomicAck);
                    a.psn = psn;
                    a.len = 8;
                    Self::answer(&mut self.fault, port, &a, 8);
                }
                _ => {
                    let mut a = reply_to(h, Op::Ack);
                    a.psn = epsn.wrapping_sub(1) & PSN_MASK;
                    Self::answer(&mut self.fault, port, &a, 0);
                }
            }
        } else {
            // Ahead of the expected PSN (one lost before it): ask for it, once.
            let r = self.qps.get_mut(&qpn).and_then(|q| q.remote.as_deref_mut());
            let r = r.expect("checked by fabric_peer");
            if r.nak_sent {
                return false;
            }
            r.nak_sent = true;
            let mut a = reply_to(h, Op::NakErr);
            a.psn = epsn;
            a.nak = NakCode::PsnSeq as u8;
            Self::answer(&mut self.fault, port, &a, 0);
        }
        true
    }

    /// Responder, UC: no answers. A packet after a gap in the PSNs abandons the message in
    /// progress (its receive goes back to the queue) and is taken only if it starts a
    /// message; a message the QP cannot take (no receive, a bad rkey) is dropped whole.
    fn uc_respond(&mut self, port: &mut Port, qpn: u32, h: &Header, torn_ok: bool) -> bool {
        if !matches!(h.op, Op::Send | Op::SendImm | Op::Write | Op::WriteImm) {
            return false;
        }
        let r = self.qps.get_mut(&qpn).and_then(|q| q.remote.as_deref_mut());
        let r = r.expect("checked by fabric_peer");
        let gap = h.psn != r.epsn;
        r.epsn = (h.psn + 1) & PSN_MASK;
        if gap {
            if let Some(Rx {
                loc: Some(RecvLoc::Rq { ci }),
                ..
            }) = r.rx.take()
            {
                if let Some(q) = self.qps.get_mut(&qpn) {
                    q.rq_ci = ci;
                }
            }
            if !h.seg.starts() {
                return false;
            }
        }
        let rx = self.qps[&qpn].remote.as_ref().and_then(|r| r.rx);
        match self.fabric_execute(port, qpn, h, torn_ok, false, rx) {
            Reply::Ack => true,
            _ => {
                // The rest of the message goes with it.
                let r = self.qps.get_mut(&qpn).and_then(|q| q.remote.as_deref_mut());
                if let Some(r) = r {
                    r.rx = None;
                }
                false
            }
        }
    }

    /// Responder: send READ responses while the rings allow; returns how many were sent.
    pub(super) fn serve_reads(&mut self, port: &mut Port) -> usize {
        let (mut sent, mut left) = (0, 0);
        let mut next = 0u32;
        loop {
            let found = self
                .qps
                .range_from(next)
                .find(|(_, q)| q.remote.as_ref().is_some_and(|r| r.read.is_some()))
                .map(|(&qpn, _)| qpn);
            let Some(qpn) = found else { break };
            next = qpn + 1;
            sent += self.serve_read(port, qpn);
            if self.qps[&qpn]
                .remote
                .as_ref()
                .is_some_and(|r| r.read.is_some())
            {
                left += 1;
            }
        }
        // Counted anew (a QP destroyed or connected again took its READ with it).
        port.reads = left;
        sent
    }

    fn serve_read(&mut self, port: &mut Port, qpn: u32) -> usize {
        let mut sent = 0;
        loop {
            let q = &self.qps[&qpn];
            let Some(ro) = q.remote.as_ref().and_then(|r| r.read) else {
                return sent;
            };
            let h = ro.req;
            let mut done = !matches!(q.state, QpState::Rtr | QpState::Rts);
            if !done {
                if port.member.space(h.src_slot) == 0 {
                    return sent;
                }
                let len = u64::from(h.len);
                let n = (len - ro.off).min(u64::from(h.imm));
                let span = if n == 0 {
                    Ok(EMPTY_SPAN)
                } else {
                    self.remote_span(q, h.raddr + ro.off, n, h.rkey, Access::REMOTE_READ)
                };
                let mut a = reply_to(&h, Op::ReadResp);
                a.psn = ro.psn;
                match span {
                    Ok(s) => {
                        let dst = Span {
                            ptr: port.out[HEADER_LEN..].as_mut_ptr(),
                            len: n as usize,
                        };
                        // SAFETY: `s` was checked with REMOTE_READ just now; `dst` is the
                        // port's own buffer, `n` at most a valid segment (<= MAX_PAYLOAD).
                        unsafe { copy_list(&[s], &[dst]) };
                        a.seg = Seg::of(ro.off, n, len);
                        a.len = n as u32;
                        self.stats.bytes += n;
                        Self::answer(&mut self.fault, port, &a, n as usize);
                        done = ro.off + n >= len;
                    }
                    Err(s) => {
                        // The MR went away mid-READ.
                        a.op = Op::NakErr;
                        a.nak = nak_code(s) as u8;
                        Self::answer(&mut self.fault, port, &a, 0);
                        self.responder_error(qpn);
                        done = true;
                    }
                }
                sent += 1;
                let r = self.qps.get_mut(&qpn).and_then(|q| q.remote.as_deref_mut());
                let r = r.expect("holds the READ");
                if let Some(ro) = r.read.as_mut() {
                    ro.off += n;
                    ro.psn = (ro.psn + 1) & PSN_MASK;
                }
            }
            if done {
                let r = self.qps.get_mut(&qpn).and_then(|q| q.remote.as_deref_mut());
                if let Some(r) = r {
                    r.read = None;
                }
                return sent;
            }
        }
    }

    /// Responder: execute request `h` (payload in `port.inb`) on QP `qpn`, the PSN the
    /// one expected. An error puts the QP in ERR (and writes the responder's CQE where the
    /// IBA has one) before the NAK goes out.
    ///
    /// `reliable`: the QP is RC (UC drops a packet it cannot take silently; RC NAKs it and
    /// the QP goes to ERR); `rx`: the message the QP is in the middle of.
    fn fabric_execute(
        &mut self,
        port: &mut Port,
        qpn: u32,
        h: &Header,
        torn_ok: bool,
        reliable: bool,
        rx: Option<Rx>,
    ) -> Reply {
        let fail = |e: &mut Engine, s: u8| {
            if reliable {
                e.responder_error(qpn);
            }
            Reply::Nak(nak_code(s))
        };
        // The packets of a message in order: FIRST, MIDDLE.., LAST of one opcode.
        let in_order = match (rx, h.seg.starts()) {
            (None, true) => true,
            (Some(m), false) => m.op == h.op,
            _ => false,
        };
        let segmentable = matches!(h.op, Op::Send | Op::SendImm | Op::Write | Op::WriteImm);
        if !in_order || (!segmentable && h.seg != Seg::Only) {
            return fail(self, wire::MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR);
        }
        let len = u64::from(h.len);
        // The remote range the request names, with the right it needs (none: no range).
        let range = match h.op {
            Op::Write | Op::WriteImm | Op::Read if len == 0 => None,
            Op::Write | Op::WriteImm => Some((len, Access::REMOTE_WRITE)),
            Op::Read => Some((len, Access::REMOTE_READ)),
            Op::Cas | Op::Faa => {
                if h.raddr % 8 != 0 {
                    return fail(self, wire::MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR);
                }
                Some((8, Access::REMOTE_ATOMIC))
            }
            _ => None,
        };
        let remote = match range {
            None => Ok(EMPTY_SPAN),
            Some((n, need)) => self.remote_span(&self.qps[&qpn], h.raddr, n, h.rkey, need),
        };
        let remote = match remote {
            Ok(s) => s,
            Err(s) => return fail(self, s),
        };
        let payload = Span {
            ptr: port.inb[HEADER_LEN..].as_mut_ptr(),
            len: h.payload_len(),
        };
        let total = rx.map_or(0, |m| m.total) + len;
        let set_rx = |e: &mut Engine, v: Option<Rx>| {
            if let Some(r) = e.qps.get_mut(&qpn).and_then(|q| q.remote.as_deref_mut()) {
                r.rx = v;
            }
        };
        match h.op {
            Op::Read => {
                if !valid_segment(h.imm) {
                    return fail(self, wire::MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR);
                }
                Reply::Read(read_packets(len, u64::from(h.imm)))
            }
            Op::Cas | Op::Faa => {
                let target = remote.ptr.cast::<u64>();
                // SAFETY: `remote` is an 8-byte, 8-aligned range of a registered MR with
                // REMOTE_ATOMIC, modelled as a read-modify-write as on one device.
                let old = unsafe {
                    let old = std::ptr::read_volatile(target);
                    let new = match h.op {
                        Op::Cas if old == h.compare => h.swap_add,
                        Op::Cas => old,
                        _ => old.wrapping_add(h.swap_add),
                    };
                    std::ptr::write_volatile(target, new);
                    old
                };
                self.stats.bytes += 8;
                Reply::Atomic(old)
            }
            Op::Write => {
                // SAFETY: `remote` was checked against an MR of the responder's PD with
                // REMOTE_WRITE; `payload` is the port's own copy of the packet.
                unsafe { copy_list(&[payload], &[remote]) };
                self.stats.bytes += len;
                let more = (!h.seg.ends()).then_some(Rx {
                    op: h.op,
                    loc: None,
                    counter: 0,
                    total,
                });
                if more.is_some() || rx.is_some() {
                    set_rx(self, more);
                }
                Reply::Ack
            }
            Op::Send | Op::SendImm | Op::WriteImm if h.seg == Seg::Only => {
                let mut w = Wqe {
                    opcode: match h.op {
                        Op::Send => Opcode::Send,
                        Op::SendImm => Opcode::SendImm,
                        _ => Opcode::RdmaWriteImm,
                    },
                    idx: 0,
                    signaled: false,
                    solicited: h.solicited,
                    imm: h.imm.to_be_bytes(),
                    raddr: h.raddr,
                    rkey: h.rkey,
                    swap_add: 0,
                    compare: 0,
                    dqpn: 0,
                    qkey: 0,
                    dgid: [0; 16],
                    inline: [payload, EMPTY_SPAN],
                    ninline: 0,
                    segs: [(0, 0, 0); MAX_SEGS],
                    nsegs: 0,
                };
                if payload.len > 0 {
                    w.ninline = 1;
                }
                match self.consume_recv(h.src_qpn, qpn, &w, &[payload], remote, None, torn_ok) {
                    Resp::Ok => Reply::Ack,
                    Resp::Rnr => Reply::Rnr(self.qps[&qpn].attr.min_rnr_timer),
                    Resp::Nak(s) => Reply::Nak(nak_code(s)),
                    Resp::NoPeer | Resp::Dropped => {
                        fail(self, wire::MLX5_CQE_SYNDROME_REMOTE_OP_ERR)
                    }
                }
            }
            Op::WriteImm => {
                // A WRITE WITH IMMEDIATE of several packets: the data of each as a WRITE,
                // the receive consumed by the last.
                if h.seg.ends() && self.find_recv(qpn).is_none() {
                    return Reply::Rnr(self.qps[&qpn].attr.min_rnr_timer);
                }
                // SAFETY: as for WRITE.
                unsafe { copy_list(&[payload], &[remote]) };
                self.stats.bytes += len;
                if !h.seg.ends() {
                    let more = Rx {
                        op: h.op,
                        loc: None,
                        counter: 0,
                        total,
                    };
                    set_rx(self, Some(more));
                    return Reply::Ack;
                }
                set_rx(self, None);
                let loc = self.find_recv(qpn).expect("checked above");
                let mut spans = [EMPTY_SPAN; MAX_SEGS];
                let scanned = self.recv_spans(loc, qpn, &mut spans);
                let counter = self.commit_recv(qpn, loc);
                if let Err(s) = scanned {
                    self.recv_fail(qpn, counter, s, torn_ok);
                    return Reply::Nak(NakCode::RemoteOp);
                }
                self.finish_recv(qpn, counter, h, total, torn_ok);
                Reply::Ack
            }
            _ => {
                // A SEND of several packets: the receive taken by the first, filled in
                // order, completed by the last.
                let loc = match rx.and_then(|m| m.loc) {
                    Some(l) => l,
                    None => match self.find_recv(qpn) {
                        Some(l) => l,
                        None => return Reply::Rnr(self.qps[&qpn].attr.min_rnr_timer),
                    },
                };
                let mut spans = [EMPTY_SPAN; MAX_SEGS];
                let scanned = self.recv_spans(loc, qpn, &mut spans);
                let counter = match rx {
                    Some(m) => m.counter,
                    None => self.commit_recv(qpn, loc),
                };
                let (n, cap) = match scanned {
                    Ok(x) => x,
                    Err(s) => {
                        set_rx(self, None);
                        self.recv_fail(qpn, counter, s, torn_ok);
                        return Reply::Nak(NakCode::RemoteOp);
                    }
                };
                if total > cap {
                    // Longer than the receive: responder LOC_LEN, requester REM_INV_REQ.
                    set_rx(self, None);
                    let s = wire::MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
                    self.recv_fail(qpn, counter, s, torn_ok);
                    return Reply::Nak(NakCode::InvalidRequest);
                }
                // SAFETY: `spans` are the receive's checked LOCAL_WRITE spans, `total`
                // bytes of them fit (checked); `payload` is the port's copy of the packet.
                unsafe { copy_list_at(&[payload], &spans[..n], (total - len) as usize) };
                self.stats.bytes += len;
                if h.seg.ends() {
                    set_rx(self, None);
                    self.finish_recv(qpn, counter, h, total, torn_ok);
                } else {
                    let more = Rx {
                        op: h.op,
                        loc: Some(loc),
                        counter,
                        total,
                    };
                    set_rx(self, Some(more));
                }
                Reply::Ack
            }
        }
    }

    /// The responder CQE of a message of several packets whose last is `h`.
    fn finish_recv(&mut self, qpn: u32, counter: u16, h: &Header, total: u64, torn_ok: bool) {
        let done = RecvDone {
            opcode: match h.op {
                Op::Send => Opcode::Send,
                Op::SendImm => Opcode::SendImm,
                _ => Opcode::RdmaWriteImm,
            },
            src_qp: h.src_qpn,
            byte_cnt: total as u32,
            imm: h.imm.to_be_bytes(),
            solicited: h.solicited,
            grh: false,
        };
        self.recv_complete(qpn, counter, done, torn_ok);
    }
}
