//! RC across the fabric: the requester and responder sides of a QP whose peer is a sim
//! device of another process (see `sim/fabric` for the segment, slots and rings).
//!
//! Reads: the fabric port's inbound rings, the requester's checked local spans, the
//! responder's MR table and receive queue (through `execute`'s `remote_span` and `recv`'s
//! `consume_recv`, the same checks as on one device). Writes: the responder's registered
//! memory and CQEs, the requester's READ / atomic destination spans, the QPs' fabric state
//! ([`RemoteQp`]), the port's counters.
//!
//! Protocol (stop and wait, one request in flight per QP): the requester sends the head
//! WQE as one request packet with its PSN and keeps it at the head of the SQ; the
//! responder executes a request whose PSN is the one it expects, answers ACK (with READ
//! data or the atomic's original value), NAK RNR (no receive; the PSN stays expected) or
//! NAK with an IBA code (remote access, invalid request, remote operational error), and
//! answers a duplicate of the last PSN again without executing it twice (a READ is read
//! again). No answer within the ACK timeout (4.096 µs × 2^timeout) is a lost packet: the
//! execute step's transport retry counts it and the request is sent again with the same
//! PSN, so a peer that is gone (killed, device dropped, not yet joined) ends the request in
//! `RETRY_EXC_ERR` after `retry_cnt` retries. Both ends start at PSN 0 on connect.
//!
//! Invariants: a packet is acted on only if it parses, is addressed to this slot's
//! generation, names a QP of this device connected to the sending slot's generation and
//! QPN, and carries the expected PSN; anything else is dropped and counted
//! (`FabricStats::dropped`), never a panic, never a write outside a checked span.
//! Limits of this slice: RC only, messages up to one packet ([`MAX_PAYLOAD`], the port
//! MTU; longer ones fail with `LOCAL_LENGTH_ERR`), one request in flight per QP, no fault
//! injector across processes; the requester waits its default RNR timer, not the one the
//! NAK carries; with the device thread a transport retry waits the ACK timeout twice (here,
//! then `execute`'s timer).

use std::time::{Duration, Instant};

use super::dma::{copy_list, Span, EMPTY_SPAN};
use super::execute::Resp;
use super::fetch::{Wqe, MAX_SEGS};
use super::Engine;
use crate::sim::fabric::packet::{Header, NakCode, Op, HEADER_LEN, MAX_PAYLOAD};
use crate::sim::fabric::{Member, CELLS, CELL_LEN, MAX_DEVICES};
use crate::wire::{self, Opcode};
use crate::{Access, QpState, QpType};

/// A device's attachment to the fabric: its slot and two packet buffers (in and out).
pub(crate) struct Port {
    pub(crate) member: Member,
    inb: Box<[u8; CELL_LEN]>,
    out: Box<[u8; CELL_LEN]>,
}

impl Port {
    pub(crate) fn new(member: Member) -> Port {
        Port {
            member,
            inb: Box::new([0; CELL_LEN]),
            out: Box::new([0; CELL_LEN]),
        }
    }
}

/// What the requester heard for its request in flight.
#[derive(Clone, Copy)]
enum Answer {
    /// ACK with this many payload bytes (in `RemoteQp::data`).
    Ack(usize),
    Rnr,
    Nak(NakCode),
}

/// The reply to the last request executed (answered again for a duplicate).
#[derive(Clone, Copy)]
struct Reply {
    op: Op,
    nak: u8,
    atomic: Option<u64>,
}

/// The fabric state of a QP connected to another process's device.
pub(crate) struct RemoteQp {
    /// The peer device's GID.
    gid: [u8; 16],
    /// Its slot and generation, once found.
    peer: Option<(u8, u32)>,
    /// Requester: the PSN of the head request.
    psn: u32,
    /// Requester: when the head request was last sent (`None`: not in flight).
    sent: Option<Instant>,
    answer: Option<Answer>,
    /// Requester: READ data / atomic value of the answer.
    data: Box<[u8; MAX_PAYLOAD]>,
    /// Responder: the PSN expected next.
    epsn: u32,
    last: Option<Reply>,
}

impl RemoteQp {
    pub(crate) fn new(gid: [u8; 16]) -> RemoteQp {
        RemoteQp {
            gid,
            peer: None,
            psn: 0,
            sent: None,
            answer: None,
            data: Box::new([0; MAX_PAYLOAD]),
            epsn: 0,
            last: None,
        }
    }
}

const PSN_MASK: u32 = 0xff_ffff;

fn nak_code(syndrome: u8) -> NakCode {
    match syndrome {
        wire::MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR => NakCode::RemoteAccess,
        wire::MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR => NakCode::InvalidRequest,
        _ => NakCode::RemoteOp,
    }
}

fn nak_syndrome(code: NakCode) -> u8 {
    match code {
        NakCode::RemoteAccess => wire::MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR,
        NakCode::InvalidRequest => wire::MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR,
        NakCode::PsnSeq | NakCode::RemoteOp => wire::MLX5_CQE_SYNDROME_REMOTE_OP_ERR,
    }
}

fn wire_op(op: Opcode) -> Option<Op> {
    Some(match op {
        Opcode::Send => Op::Send,
        Opcode::SendImm => Op::SendImm,
        Opcode::RdmaWrite => Op::Write,
        Opcode::RdmaWriteImm => Op::WriteImm,
        Opcode::RdmaRead => Op::Read,
        Opcode::AtomicCs => Op::Cas,
        Opcode::AtomicFa => Op::Faa,
        _ => return None,
    })
}

/// The local ACK timeout of an IBA `timeout` exponent.
fn ack_timeout(exp: u8) -> Duration {
    Duration::from_nanos(4096u64 << exp.min(31))
}

impl Engine {
    /// Connect (`Some`) or disconnect (`None`) QP `qpn` to the fabric peer whose GID is
    /// `gid`: fresh PSNs on both sides.
    pub(crate) fn set_remote(&mut self, qpn: u32, gid: Option<[u8; 16]>) {
        if let Some(q) = self.qps.get_mut(&qpn) {
            q.remote = gid.map(|g| Box::new(RemoteQp::new(g)));
        }
    }

    /// Requester: the head WQE `w` of `qpn` (its local spans checked) over the fabric.
    /// `None`: in flight, nothing to report yet.
    pub(super) fn fabric_send(&mut self, qpn: u32, w: &Wqe, local: &[Span]) -> Option<Resp> {
        let mut port = self.port.take()?;
        let r = self.fabric_send_with(&mut port, qpn, w, local);
        self.port = Some(port);
        r
    }

    fn fabric_send_with(
        &mut self,
        port: &mut Port,
        qpn: u32,
        w: &Wqe,
        local: &[Span],
    ) -> Option<Resp> {
        let q = self.qps.get_mut(&qpn)?;
        let timeout = q.attr.timeout;
        let remote_qpn = q.attr.remote_qpn;
        let r = q.remote.as_mut()?;
        let len = w.len();
        if let Some(a) = r.answer.take() {
            r.sent = None;
            return Some(match a {
                Answer::Ack(n) => {
                    r.psn = (r.psn + 1) & PSN_MASK;
                    match w.opcode {
                        Opcode::RdmaRead | Opcode::AtomicCs | Opcode::AtomicFa => {
                            let want = if w.opcode == Opcode::RdmaRead { len } else { 8 };
                            if n as u64 != want {
                                return Some(Resp::Nak(wire::MLX5_CQE_SYNDROME_REMOTE_OP_ERR));
                            }
                            if w.opcode != Opcode::RdmaRead {
                                // The original value in host byte order, as on one device.
                                let mut b = [0u8; 8];
                                b.copy_from_slice(&r.data[..8]);
                                r.data[..8].copy_from_slice(&u64::from_be_bytes(b).to_ne_bytes());
                            }
                            let src = Span {
                                ptr: r.data.as_mut_ptr(),
                                len: n,
                            };
                            // SAFETY: `local` was checked against the requester's MRs with
                            // LOCAL_WRITE; `src` is this QP's own buffer of `n` bytes, which
                            // is the spans' total (checked above).
                            unsafe { copy_list(&[src], local) };
                        }
                        _ => {}
                    }
                    self.stats.bytes += len;
                    Resp::Ok
                }
                Answer::Rnr => Resp::Rnr,
                Answer::Nak(c) => {
                    r.psn = (r.psn + 1) & PSN_MASK;
                    Resp::Nak(nak_syndrome(c))
                }
            });
        }
        if let Some(t) = r.sent {
            if t.elapsed() < ack_timeout(timeout) {
                return None;
            }
            // Lost: the transport retry counts it; the next attempt finds the peer anew.
            r.sent = None;
            r.peer = None;
            return Some(Resp::NoPeer);
        }
        let Some(op) = wire_op(w.opcode) else {
            return Some(Resp::Ok);
        };
        if len > MAX_PAYLOAD as u64 {
            return Some(Resp::Nak(wire::MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR));
        }
        r.sent = Some(Instant::now());
        if r.peer.is_none() {
            r.peer = port.member.segment().find(&r.gid);
        }
        let Some((slot, epoch)) = r.peer else {
            // Nobody there: as a packet lost on the link.
            return None;
        };
        let mut h = Header::new(op);
        h.solicited = w.solicited;
        h.src_slot = port.member.slot();
        h.dst_slot = slot;
        h.src_epoch = port.member.epoch();
        h.dst_epoch = epoch;
        h.src_qpn = qpn;
        h.dst_qpn = remote_qpn;
        h.psn = r.psn;
        h.rkey = w.rkey;
        h.raddr = w.raddr;
        h.len = len as u32;
        h.imm = u32::from_be_bytes(w.imm);
        h.compare = w.compare;
        h.swap_add = w.swap_add;
        h.write(&mut port.out[..]);
        let n = h.payload_len();
        if n > 0 {
            let dst = Span {
                ptr: port.out[HEADER_LEN..].as_mut_ptr(),
                len: n,
            };
            // SAFETY: `local` are checked requester spans (or the WQE's inline bytes) of
            // `n` bytes in total; `dst` is the port's own buffer, `n <= MAX_PAYLOAD`.
            unsafe { copy_list(local, &[dst]) };
        }
        port.member.send(slot, &port.out[..HEADER_LEN + n]);
        None
    }

    /// Take what the fabric brought: at most one ring's worth of packets from each sender.
    pub(super) fn poll_fabric(&mut self, torn_ok: bool) -> usize {
        let Some(mut port) = self.port.take() else {
            return 0;
        };
        let mut work = 0;
        let (me, epoch) = (port.member.slot(), port.member.epoch());
        for from in 0..MAX_DEVICES as u8 {
            for _ in 0..CELLS {
                let Some(n) = port.member.recv(from, &mut port.inb) else {
                    break;
                };
                work += 1;
                let ok = match Header::parse(&port.inb[..n], MAX_DEVICES) {
                    Ok(h) if h.src_slot == from && h.dst_slot == me && h.dst_epoch == epoch => {
                        port.member.stats.received += 1;
                        if h.op.is_response() {
                            self.fabric_answer(&port, &h)
                        } else {
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
        self.port = Some(port);
        work
    }

    /// The QP `h` is for, if it is connected over the fabric to exactly `h`'s sender.
    fn fabric_qp(&mut self, port: &Port, h: &Header) -> Option<u32> {
        let q = self.qps.get_mut(&h.dst_qpn)?;
        if q.qp_type != QpType::Rc || q.attr.remote_qpn != h.src_qpn {
            return None;
        }
        let r = q.remote.as_mut()?;
        if r.peer.is_none() {
            r.peer = port.member.segment().find(&r.gid);
        }
        (r.peer == Some((h.src_slot, h.src_epoch))).then_some(h.dst_qpn)
    }

    /// Requester: an answer for `h.dst_qpn`'s request in flight.
    fn fabric_answer(&mut self, port: &Port, h: &Header) -> bool {
        let Some(qpn) = self.fabric_qp(port, h) else {
            return false;
        };
        let r = self.qps.get_mut(&qpn).and_then(|q| q.remote.as_mut());
        let Some(r) = r else { return false };
        // An answer for the head request's PSN counts even when it comes after the ACK
        // timeout (the request is resent with the same PSN; a late answer is as good).
        if r.answer.is_some() || h.psn != r.psn {
            return false;
        }
        r.answer = Some(match h.op {
            Op::Ack => {
                let n = h.payload_len();
                r.data[..n].copy_from_slice(&port.inb[HEADER_LEN..HEADER_LEN + n]);
                Answer::Ack(n)
            }
            Op::NakRnr => Answer::Rnr,
            _ => Answer::Nak(NakCode::from_byte(h.nak)),
        });
        true
    }

    /// Responder: execute request `h` (payload in `port.inb`) and answer it.
    fn fabric_respond(&mut self, port: &mut Port, h: &Header, torn_ok: bool) -> bool {
        let Some(qpn) = self.fabric_qp(port, h) else {
            return false;
        };
        let q = &self.qps[&qpn];
        if !matches!(q.state, QpState::Rtr | QpState::Rts) {
            return false;
        }
        let r = q.remote.as_ref().expect("checked by fabric_qp");
        let (epsn, last) = (r.epsn, r.last);
        let duplicate = h.psn == (epsn.wrapping_sub(1) & PSN_MASK);
        let reply = if h.psn == epsn || (duplicate && h.op == Op::Read) {
            let reply = self.fabric_execute(port, qpn, h, torn_ok);
            if reply.op != Op::NakRnr && !duplicate {
                let r = self.qps.get_mut(&qpn).and_then(|q| q.remote.as_mut());
                let r = r.expect("checked by fabric_qp");
                r.epsn = (epsn + 1) & PSN_MASK;
                r.last = Some(reply);
            }
            reply
        } else if let (true, Some(l)) = (duplicate, last) {
            if let Some(v) = l.atomic {
                port.out[HEADER_LEN..HEADER_LEN + 8].copy_from_slice(&v.to_be_bytes());
            }
            l
        } else {
            return false;
        };
        let mut a = Header::new(reply.op);
        a.nak = reply.nak;
        a.src_slot = h.dst_slot;
        a.dst_slot = h.src_slot;
        a.src_epoch = h.dst_epoch;
        a.dst_epoch = h.src_epoch;
        a.src_qpn = h.dst_qpn;
        a.dst_qpn = h.src_qpn;
        a.psn = h.psn;
        a.len = match (reply.op, h.op) {
            (Op::Ack, Op::Read) => h.len,
            (Op::Ack, Op::Cas | Op::Faa) => 8,
            _ => 0,
        };
        a.write(&mut port.out[..]);
        let n = HEADER_LEN + a.payload_len();
        let to = h.src_slot;
        port.member.send(to, &port.out[..n]);
        true
    }

    /// Execute request `h` on responder QP `qpn`; READ data or the atomic's original value
    /// goes into `port.out`'s payload.
    fn fabric_execute(&mut self, port: &mut Port, qpn: u32, h: &Header, torn_ok: bool) -> Reply {
        let ack = Reply {
            op: Op::Ack,
            nak: 0,
            atomic: None,
        };
        let nak = |s: u8| Reply {
            op: Op::NakErr,
            nak: nak_code(s) as u8,
            atomic: None,
        };
        let len = u64::from(h.len);
        let p = &self.qps[&qpn];
        let remote = match h.op {
            Op::Write | Op::WriteImm | Op::Read if len == 0 => Ok(EMPTY_SPAN),
            Op::Write | Op::WriteImm => {
                self.remote_span(p, h.raddr, len, h.rkey, Access::REMOTE_WRITE)
            }
            Op::Read => self.remote_span(p, h.raddr, len, h.rkey, Access::REMOTE_READ),
            Op::Cas | Op::Faa => {
                if h.raddr % 8 != 0 {
                    self.responder_error(qpn);
                    return nak(wire::MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR);
                }
                self.remote_span(p, h.raddr, 8, h.rkey, Access::REMOTE_ATOMIC)
            }
            _ => Ok(EMPTY_SPAN),
        };
        let remote = match remote {
            Ok(s) => s,
            Err(s) => {
                self.responder_error(qpn);
                return nak(s);
            }
        };
        let payload = Span {
            ptr: port.inb[HEADER_LEN..].as_mut_ptr(),
            len: h.payload_len(),
        };
        match h.op {
            Op::Write => {
                // SAFETY: `remote` was checked against an MR of the responder's PD with
                // REMOTE_WRITE; `payload` is the port's own copy of the packet.
                unsafe { copy_list(&[payload], &[remote]) };
                self.stats.bytes += len;
                ack
            }
            Op::Read => {
                let dst = Span {
                    ptr: port.out[HEADER_LEN..].as_mut_ptr(),
                    len: remote.len,
                };
                // SAFETY: `remote` was checked with REMOTE_READ; `dst` is the port's own
                // buffer and `len <= MAX_PAYLOAD` (the parser's bound).
                unsafe { copy_list(&[remote], &[dst]) };
                self.stats.bytes += len;
                ack
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
                port.out[HEADER_LEN..HEADER_LEN + 8].copy_from_slice(&old.to_be_bytes());
                self.stats.bytes += 8;
                Reply {
                    op: Op::Ack,
                    nak: 0,
                    atomic: Some(old),
                }
            }
            Op::Send | Op::SendImm | Op::WriteImm => {
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
                    inline: [payload, EMPTY_SPAN],
                    ninline: 0,
                    segs: [(0, 0, 0); MAX_SEGS],
                    nsegs: 0,
                };
                if payload.len > 0 {
                    w.ninline = 1;
                }
                match self.consume_recv(h.src_qpn, qpn, &w, &[payload], remote, None, torn_ok) {
                    Resp::Ok => ack,
                    Resp::Rnr => Reply {
                        op: Op::NakRnr,
                        nak: self.qps.get(&qpn).map_or(12, |q| q.attr.min_rnr_timer),
                        atomic: None,
                    },
                    Resp::Nak(s) => nak(s),
                    Resp::NoPeer | Resp::Dropped => nak(wire::MLX5_CQE_SYNDROME_REMOTE_OP_ERR),
                }
            }
            _ => nak(wire::MLX5_CQE_SYNDROME_REMOTE_OP_ERR),
        }
    }
}
