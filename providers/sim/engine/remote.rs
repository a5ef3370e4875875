//! RC across the fabric: the requester and responder sides of a QP whose peer is a sim
//! device of another process (see `sim/fabric` for the segment, slots and rings, and
//! `fabric/packet` for the packet).
//!
//! Reads: the fabric port's inbound rings, the requester's SQ (WQEs at and behind the head)
//! and checked local spans, the responder's MR table and receive queue (through
//! `execute`'s `remote_span` and `recv`'s receive matching, the same checks as on one
//! device). Writes: the responder's registered memory and CQEs, the requester's READ /
//! atomic destination spans, the QPs' fabric state ([`RemoteQp`]), the port's counters.
//!
//! Protocol (go-back-N, as RC): the requester sends the packets of the WQEs from the head
//! of its SQ on, up to [`WINDOW`] PSNs it has not heard an answer for, each message cut
//! into packets of the path MTU (FIRST, MIDDLE.., LAST), a READ as one request taking one
//! PSN per response segment; nothing follows a READ of several segments until its data is
//! all in (a fence, so the responder serves one READ at a time). The responder executes the
//! packet whose PSN it expects and answers: ACK (cumulative: every PSN up to this one), READ
//! responses (streamed as its ring to the requester has room), ATOMIC ACK (the original
//! value), NAK RNR (no receive; the PSN stays expected, the NAK carries the responder's
//! `min_rnr_timer`, which the requester waits before resending from that PSN), NAK PSN
//! sequence error (a packet ahead of the expected PSN, once: the requester goes back to
//! that PSN) or NAK with an IBA error code (remote access, invalid request, remote
//! operational error: the request fails). A duplicate (a PSN already executed) is not
//! executed again: it is acknowledged again, a READ is read again, an atomic (one of the
//! last window's worth) has its original value sent again. No progress within the ACK
//! timeout (4.096 µs × 2^timeout) is a lost packet: the execute step's transport retry
//! counts it and the requester goes back to the oldest
//! PSN not acknowledged, so a peer that is gone (killed, device dropped, not yet joined)
//! ends the request in `RETRY_EXC_ERR` after `retry_cnt` retries. A head that finds no
//! room in the ring to its peer for an ACK timeout (nothing of it sent: a peer that died
//! with its inbox full) counts as a lost packet the same way. Both ends start at PSN 0
//! on connect. A WQE completes (its CQE written by `execute`) when every PSN of it is
//! acknowledged, in SQ order.
//!
//! Invariants: a packet is acted on only if it parses, is addressed to this slot's
//! generation, names a QP of this device connected to the sending slot's generation and
//! QPN, and carries a PSN the QP can take; anything else is dropped and counted
//! (`FabricStats::dropped`), never a panic, never a write outside a checked span (every
//! WRITE packet's range, every READ segment and every receive is checked when it is used).
//! UC takes the same packets without answers: the requester completes a WQE once its
//! packets are sent, the responder drops a message it cannot take (no receive, a bad rkey)
//! and abandons one cut short by a gap in the PSNs.
//!
//! UD: a datagram whose address vector names another process's device goes as one SEND
//! packet (the Q_Key in the rkey field) to the QP it names there, which takes it if its
//! Q_Key matches and a receive is posted (the GRH naming the sender's GID), and drops it
//! otherwise; the sender completes it once sent.
//!
//! The fault injector loses, damages, delays and duplicates packets this device sends
//! (`packet_drop_ppm`, `packet_corrupt_ppm`, `packet_delay_ppm`, `packet_duplicate_ppm`); a
//! damaged one is dropped by the receiving ring's check word, so each looks to the protocol
//! as on a link: a loss, a reordering, a duplicate.
//!
//! Limits: messages up to 2^31 bytes; the fault injector's CQE faults stay within the
//! device.

use std::time::{Duration, Instant};

use super::dma::{copy_list, copy_list_at, sub_spans, Span, EMPTY_SPAN};
use super::execute::Resp;
use super::fetch::{Wqe, MAX_SEGS, MAX_WQE};
use super::recv::{RecvDone, RecvLoc};
use super::Engine;
use crate::sim::fabric::packet::{
    read_packets, valid_segment, Header, NakCode, Op, Seg, HEADER_LEN, ICRC_LEN, MAX_PAYLOAD,
};
use crate::sim::fabric::{Member, CELLS, CELL_LEN, MAX_DEVICES, MAX_MESSAGE, PACKET_LEN};
use crate::sim::fault::{FaultInjector, HeldPacket};
use crate::wire::{self, Opcode};
use crate::{Access, QpState, QpType};

/// PSNs a requester sends ahead of the last one acknowledged (one ring of packets).
pub const WINDOW: u32 = CELLS;

/// A device's attachment to the fabric: its slot and two packet buffers (in and out).
pub(crate) struct Port {
    pub(crate) member: Member,
    inb: Box<[u8; CELL_LEN]>,
    out: Box<[u8; CELL_LEN]>,
    /// Responder QPs with READ responses still to send.
    reads: u32,
    /// Responder QPs with an ACK a full ring held back.
    acks: u32,
}

impl Port {
    pub(crate) fn new(member: Member) -> Port {
        Port {
            member,
            inb: Box::new([0; CELL_LEN]),
            out: Box::new([0; CELL_LEN]),
            reads: 0,
            acks: 0,
        }
    }
}

const PSN_MASK: u32 = 0xff_ffff;

/// `a - b` in PSN space (24 bits).
fn psn_diff(a: u32, b: u32) -> u32 {
    a.wrapping_sub(b) & PSN_MASK
}

/// True when `a` comes before `b` (within half the PSN space).
fn psn_lt(a: u32, b: u32) -> bool {
    let d = psn_diff(b, a);
    d != 0 && d < 1 << 23
}

/// What a WQE in flight waits for besides ACKs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// SEND, WRITE (ACKs).
    Plain,
    /// READ: a response per PSN.
    Read,
    /// CAS, FAA: the ATOMIC ACK.
    Atomic,
}

/// A WQE whose packets the requester has sent (some or all).
#[derive(Clone, Copy)]
struct Flight {
    /// Its SQ index (WQEBBs, free running) and size.
    idx: u32,
    nbb: u32,
    /// Its first PSN and how many it takes.
    psn: u32,
    npkts: u32,
    /// The segment size it was cut with.
    mtu: u32,
    kind: Kind,
    /// An atomic's original value, once heard.
    value: Option<u64>,
}

impl Flight {
    fn end(&self) -> u32 {
        (self.psn + self.npkts) & PSN_MASK
    }
    fn contains(&self, psn: u32) -> bool {
        psn_diff(psn, self.psn) < self.npkts
    }
}

const NO_FLIGHT: Flight = Flight {
    idx: 0,
    nbb: 0,
    psn: 0,
    npkts: 0,
    mtu: 0,
    kind: Kind::Plain,
    value: None,
};

/// A NAK the requester heard, for the WQE holding its PSN.
#[derive(Clone, Copy)]
enum Answer {
    Rnr { psn: u32 },
    Nak { psn: u32, code: NakCode },
}

/// A message the responder is in the middle of (its FIRST packet taken).
#[derive(Clone, Copy)]
struct Rx {
    op: Op,
    /// The receive it consumed (SEND).
    loc: Option<RecvLoc>,
    counter: u16,
    /// Bytes taken so far.
    total: u64,
}

/// A READ the responder is answering: the request, the next segment's offset and PSN.
#[derive(Clone, Copy)]
struct ReadOut {
    req: Header,
    off: u64,
    psn: u32,
}

/// The fabric state of a QP connected to another process's device.
pub(crate) struct RemoteQp {
    /// The peer device's GID.
    gid: [u8; 16],
    /// Its slot and generation, once found.
    peer: Option<(u8, u32)>,
    /// Requester: the oldest PSN not acknowledged, the next PSN to send, one past the
    /// highest PSN sent (answers up to there count, after a go-back too).
    una: u32,
    next_psn: u32,
    sent_to: u32,
    /// Requester: the SQ index of the WQE the next packet comes from, and its bytes sent.
    send_at: u32,
    send_off: u64,
    /// Requester: the WQEs in flight, oldest (the SQ head) first.
    flight: [Flight; WINDOW as usize],
    nflight: usize,
    /// Requester: when the oldest PSN not acknowledged was sent or last moved on.
    progress: Option<Instant>,
    /// Requester, nothing in flight: since when the head has waited for room in the ring
    /// to the peer (a peer that died with its inbox full never makes room: after the ACK
    /// timeout this counts as a lost packet, so the transport retry ends it).
    blocked: Option<Instant>,
    answer: Option<Answer>,
    /// Requester: the timer of the last RNR NAK (IBA encoding).
    rnr_timer: u8,
    /// Responder: the PSN expected next.
    epsn: u32,
    /// Responder: a PSN sequence NAK was sent for `epsn`.
    nak_sent: bool,
    rx: Option<Rx>,
    read: Option<ReadOut>,
    /// Responder: an ACK the ring to the requester had no room for.
    ack_due: Option<Header>,
    /// Responder: the PSNs and original values of the last atomics, one window's worth
    /// (a duplicate of any of them is answered again), and where the next one goes.
    atomics: [Option<(u32, u64)>; WINDOW as usize],
    next_atomic: usize,
}

impl RemoteQp {
    pub(crate) fn new(gid: [u8; 16], sq_ci: u32) -> RemoteQp {
        RemoteQp {
            gid,
            peer: None,
            una: 0,
            next_psn: 0,
            sent_to: 0,
            send_at: sq_ci,
            send_off: 0,
            flight: [NO_FLIGHT; WINDOW as usize],
            nflight: 0,
            progress: None,
            blocked: None,
            answer: None,
            rnr_timer: 12,
            epsn: 0,
            nak_sent: false,
            rx: None,
            read: None,
            ack_due: None,
            atomics: [None; WINDOW as usize],
            next_atomic: 0,
        }
    }

    /// Acknowledge every PSN before `end`, but not past a READ or atomic whose answer is
    /// not in (their PSNs are acknowledged by their responses only).
    fn ack_to(&mut self, end: u32) {
        let span = psn_diff(self.sent_to, self.una);
        let d = psn_diff(end, self.una);
        if d == 0 || d > span {
            return;
        }
        let mut to = end;
        for f in &self.flight[..self.nflight] {
            if f.kind != Kind::Plain && psn_lt(self.una, f.end()) {
                let stop = if psn_lt(self.una, f.psn) {
                    f.psn
                } else {
                    self.una
                };
                if psn_lt(stop, to) {
                    to = stop;
                }
                break;
            }
        }
        if to != self.una {
            self.moved_to(to);
        }
    }

    /// The oldest PSN not acknowledged is now `una` (it moved on).
    fn moved_to(&mut self, una: u32) {
        self.una = una;
        self.progress = Some(Instant::now());
        if psn_lt(self.next_psn, una) {
            // Answers to packets sent before a go-back: no need to send them again.
            self.seek(una);
        }
    }

    /// Go back to PSN `to`: the packets from there on are sent again.
    fn rewind(&mut self, to: u32) {
        self.seek(to);
        self.progress = None;
    }

    /// Put the send position at PSN `to` (of a WQE in flight, or the end of the last).
    fn seek(&mut self, to: u32) {
        for f in self.flight[..self.nflight].iter().copied() {
            if f.contains(to) {
                // The WQEs behind it keep their records: their packets go again from here.
                self.send_at = f.idx;
                self.send_off = u64::from(psn_diff(to, f.psn)) * u64::from(f.mtu);
                self.next_psn = to;
                return;
            }
        }
        if let Some(f) = self.flight[..self.nflight].last() {
            if f.end() == to {
                self.send_at = f.idx.wrapping_add(f.nbb);
                self.send_off = 0;
                self.next_psn = to;
            }
        }
    }
}

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

/// The segment size of a QP whose path MTU is `mtu` bytes.
fn segment(mtu: u32) -> u32 {
    if valid_segment(mtu) {
        mtu
    } else {
        MAX_PAYLOAD as u32
    }
}

/// Put a packet on the wire to slot `to`: into its ring, or (as the fault injector says)
/// lost, held back for later passes, damaged or sent twice on the way (true then for a
/// lost or held one: the sender cannot tell). False: the ring is full.
fn wire_send(fault: &mut Option<FaultInjector>, member: &mut Member, to: u8, b: &[u8]) -> bool {
    let Some(f) = fault.as_mut() else {
        return member.send(to, b);
    };
    if f.rng.chance(f.cfg.packet_drop_ppm) {
        f.stats.packets_dropped += 1;
        return true;
    }
    if f.rng.chance(f.cfg.packet_delay_ppm) && b.len() <= PACKET_LEN {
        if let Some(mut bytes) = f.spare.pop() {
            bytes[..b.len()].copy_from_slice(b);
            let passes = 1 + f.rng.below(u64::from(f.cfg.max_delay_passes.max(1))) as u32;
            f.held.push(HeldPacket {
                to,
                passes,
                len: b.len(),
                bytes,
            });
            f.stats.packets_delayed += 1;
            return true;
        }
    }
    let damage = f.rng.chance(f.cfg.packet_corrupt_ppm).then(|| {
        let at = f.rng.below((b.len() + ICRC_LEN) as u64) as usize;
        (at, 1u8 << f.rng.below(8))
    });
    if !member.send_damaged(to, b, damage) {
        return false;
    }
    if damage.is_some() {
        f.stats.packets_corrupted += 1;
    }
    if f.rng.chance(f.cfg.packet_duplicate_ppm) && member.send(to, b) {
        f.stats.packets_duplicated += 1;
    }
    true
}

/// Put the packets the fault injector held back whose passes are over on the wire (a full
/// ring keeps one for the next pass). True while any is held.
fn release_packets(fault: &mut Option<FaultInjector>, member: &mut Member) -> bool {
    let Some(f) = fault.as_mut() else {
        return false;
    };
    let mut i = 0;
    while i < f.held.len() {
        let p = &mut f.held[i];
        p.passes = p.passes.saturating_sub(1);
        if p.passes == 0 && member.send(p.to, &p.bytes[..p.len]) {
            let p = f.held.remove(i);
            f.spare.push(p.bytes);
        } else {
            i += 1;
        }
    }
    !f.held.is_empty()
}

/// The header of an answer of kind `op` to request `h`, with `h`'s PSN.
fn reply_to(h: &Header, op: Op) -> Header {
    let mut a = Header::new(op);
    a.src_slot = h.dst_slot;
    a.dst_slot = h.src_slot;
    a.src_epoch = h.dst_epoch;
    a.dst_epoch = h.src_epoch;
    a.src_qpn = h.dst_qpn;
    a.dst_qpn = h.src_qpn;
    a.psn = h.psn;
    a
}

/// What the responder answers to a request it executed.
#[derive(Clone, Copy)]
enum Reply {
    /// ACK (the request took one PSN).
    Ack,
    /// A READ was accepted: its responses follow (it took this many PSNs).
    Read(u32),
    /// ATOMIC ACK with the original value.
    Atomic(u64),
    /// RNR NAK with the responder's timer.
    Rnr(u8),
    /// NAK with an error code (the responder QP is in ERR).
    Nak(NakCode),
}

impl Engine {
    /// Connect (`Some`) or disconnect (`None`) QP `qpn` to the fabric peer whose GID is
    /// `gid`: fresh PSNs on both sides.
    pub(crate) fn set_remote(&mut self, qpn: u32, gid: Option<[u8; 16]>) {
        if let Some(q) = self.qps.get_mut(&qpn) {
            let sq_ci = q.sq_ci;
            q.remote = gid.map(|g| Box::new(RemoteQp::new(g, sq_ci)));
        }
    }

    /// The timer of the last RNR NAK `qpn` heard from its fabric peer (IBA encoding).
    pub(super) fn fabric_rnr_timer(&self, qpn: u32) -> u8 {
        self.qps
            .get(&qpn)
            .and_then(|q| q.remote.as_ref())
            .map_or(12, |r| r.rnr_timer)
    }

    /// Requester: the head WQE `w` of `qpn` (its local spans checked) over the fabric, and
    /// the WQEs behind it as the window allows. `None`: in flight, nothing to report yet.
    pub(super) fn fabric_send(
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
                    r.peer = None;
                    return Some(Resp::NoPeer);
                }
            }
        }
        // 4. Send what the window allows.
        self.fabric_pump(port, qpn, Some((w, local, nbb)));
        None
    }

    /// Requester: send the packets of `qpn`'s WQEs from `send_at` on while the window, the
    /// ring to the peer and the fence after a multi-segment READ allow. A WQE that does not
    /// parse or whose local spans fail their check is not sent: at the head, `execute`
    /// fails it.
    fn fabric_pump(&mut self, port: &mut Port, qpn: u32, head: Option<(&Wqe, &[Span], u32)>) {
        let mut buf = [0u8; MAX_WQE];
        let mut spans = [EMPTY_SPAN; MAX_SEGS];
        let mut piece = [EMPTY_SPAN; MAX_SEGS];
        for _ in 0..WINDOW * 2 {
            let Some(q) = self.qps.get(&qpn) else { return };
            let Some(r) = q.remote.as_deref() else { return };
            let at = r.send_at;
            if at & wire::MLX5_WQE_INDEX_MASK == q.sq_pi() || psn_diff(r.next_psn, r.una) >= WINDOW
            {
                return;
            }
            // A WQE sent before (all or part): its record stays, its PSNs are the same.
            let resumed = r.flight[..r.nflight].iter().position(|f| f.idx == at);
            if resumed.is_none() {
                if r.nflight == WINDOW as usize {
                    return;
                }
                if let Some(l) = r.flight[..r.nflight].last() {
                    if l.kind == Kind::Read && l.npkts > 1 && psn_lt(r.una, l.end()) {
                        return;
                    }
                }
            }
            let parsed: Wqe;
            let (w, nbb) = match head {
                // The head as `execute` parsed it (and checked its spans) this pass.
                Some((hw, _, hn)) if at == q.sq_ci => (hw, hn),
                _ => {
                    let (ring_len, nbb) = Self::read_wqe(q, at, &mut buf);
                    let Ok(w) = Self::parse(q, at, &buf, ring_len) else {
                        return;
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
                return;
            }
            let local: &[Span] = match head {
                Some((_, hl, _)) if at == q.sq_ci => hl,
                _ => match self.local_spans(q.pd, w, &mut spans) {
                    Ok(n) => &spans[..n],
                    Err(_) => return,
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
                    return;
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
                    let k = sub_spans(local, off as usize, n as usize, &mut piece);
                    let dst = Span {
                        ptr: port.out[HEADER_LEN..].as_mut_ptr(),
                        len: n as usize,
                    };
                    // SAFETY: `piece` lies in the requester's checked spans (or the WQE's
                    // inline bytes in `buf`); `dst` is the port's own buffer, `n` bytes
                    // at most the MTU.
                    unsafe { copy_list(&piece[..k], &[dst]) };
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
                return;
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
    }

    /// UD requester: datagram `w` of `qpn` to the device of another process its address
    /// vector names (the Q_Key resolved here, carried in the rkey field). A datagram
    /// nobody takes is lost, as on a link; `None`: the ring to that device is full.
    pub(super) fn fabric_datagram(&mut self, qpn: u32, w: &Wqe, local: &[Span]) -> Option<Resp> {
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
    fn fabric_datagram_in(&mut self, port: &mut Port, h: &Header, torn_ok: bool) -> bool {
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

    /// Take what the fabric brought: at most one ring's worth of packets from each sender;
    /// then READ responses as the rings allow.
    pub(super) fn poll_fabric(&mut self, torn_ok: bool) -> usize {
        let Some(mut port) = self.port.take() else {
            return 0;
        };
        let mut work = 0;
        if release_packets(&mut self.fault, &mut port.member) {
            // Packets still held are work to come, as held CQEs are.
            work += 1;
        }
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
                        } else if self.qps.get(&h.dst_qpn).map(|q| q.qp_type) == Some(QpType::Ud) {
                            self.fabric_datagram_in(&mut port, &h, torn_ok)
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
        if port.reads > 0 {
            work += self.serve_reads(&mut port);
        }
        if port.acks > 0 {
            self.flush_acks(&mut port);
        }
        self.port = Some(port);
        work
    }

    /// The QP `h` is for, if it is connected over the fabric to exactly `h`'s sender.
    fn fabric_qp(&mut self, port: &Port, h: &Header) -> Option<u32> {
        let q = self.qps.get_mut(&h.dst_qpn)?;
        if !matches!(q.qp_type, QpType::Rc | QpType::Uc) || q.attr.remote_qpn != h.src_qpn {
            return None;
        }
        let r = q.remote.as_mut()?;
        if r.peer.is_none() {
            r.peer = port.member.segment().find(&r.gid);
        }
        (r.peer == Some((h.src_slot, h.src_epoch))).then_some(h.dst_qpn)
    }

    /// Requester: an answer for a PSN of `h.dst_qpn` in flight. False: not one it waits for.
    /// An answer that moves the oldest PSN not acknowledged on restarts the transport
    /// retry count (the peer is there).
    fn fabric_answer(&mut self, port: &Port, h: &Header) -> bool {
        let Some(qpn) = self.fabric_qp(port, h) else {
            return false;
        };
        let before = self.qps[&qpn].remote.as_ref().map(|r| r.una);
        let ok = self.take_answer(port, qpn, h);
        if let Some(q) = self.qps.get_mut(&qpn) {
            if q.remote.as_ref().map(|r| r.una) != before {
                q.retry_left = None;
            }
        }
        ok
    }

    fn take_answer(&mut self, port: &Port, qpn: u32, h: &Header) -> bool {
        let Some(r) = self.qps.get_mut(&qpn).and_then(|q| q.remote.as_deref_mut()) else {
            return false;
        };
        let p = h.psn;
        if psn_diff(p, r.una) >= psn_diff(r.sent_to, r.una) {
            // Not in flight: an old answer (a duplicate's), or a forged one.
            return false;
        }
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
                b.copy_from_slice(&port.inb[HEADER_LEN..HEADER_LEN + 8]);
                r.flight[i].value = Some(u64::from_be_bytes(b));
                r.moved_to((p + 1) & PSN_MASK);
            }
            Op::ReadResp => return self.read_response(port, qpn, h),
            _ => return false,
        }
        true
    }

    /// Requester: READ response `h` (its data in `port.inb`) into the READ's local spans.
    fn read_response(&mut self, port: &Port, qpn: u32, h: &Header) -> bool {
        let q = &self.qps[&qpn];
        let Some(r) = q.remote.as_deref() else {
            return false;
        };
        let p = h.psn;
        let Some(f) = r.flight[..r.nflight]
            .iter()
            .find(|f| f.contains(p))
            .copied()
        else {
            return false;
        };
        // In order only: a response after a lost one waits for the resend.
        if p != r.una || f.kind != Kind::Read {
            return false;
        }
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

    /// Send answer `a` (with `n` payload bytes already in `port.out`) if the ring has room.
    /// False: it did not (a NAK or response lost so is covered by the requester's timeout;
    /// an ACK is kept and sent by a later pass).
    fn answer(fault: &mut Option<FaultInjector>, port: &mut Port, a: &Header, n: usize) -> bool {
        a.write(&mut port.out[..]);
        let to = a.dst_slot;
        wire_send(fault, &mut port.member, to, &port.out[..HEADER_LEN + n])
    }

    /// Responder: send the ACKs a full ring held back, as the rings allow.
    fn flush_acks(&mut self, port: &mut Port) {
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
    fn fabric_respond(&mut self, port: &mut Port, h: &Header, torn_ok: bool) -> bool {
        let Some(qpn) = self.fabric_qp(port, h) else {
            return false;
        };
        let q = &self.qps[&qpn];
        if !matches!(q.state, QpState::Rtr | QpState::Rts) {
            return false;
        }
        if q.qp_type == QpType::Uc {
            return self.uc_respond(port, qpn, h, torn_ok);
        }
        let r = q.remote.as_deref().expect("checked by fabric_qp");
        let (epsn, atomics, reading) = (r.epsn, r.atomics, r.read.is_some());
        let d = psn_diff(h.psn, epsn);
        if d == 0 {
            if reading {
                // Still answering a READ: a request behind it waits for the resend.
                return false;
            }
            let reply = self.fabric_execute(port, qpn, h, torn_ok);
            let r = self.qps.get_mut(&qpn).and_then(|q| q.remote.as_deref_mut());
            let r = r.expect("checked by fabric_qp");
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
                    let r = r.expect("checked by fabric_qp");
                    if !reading {
                        port.reads += 1;
                    }
                    r.read = Some(ReadOut {
                        req: *h,
                        off: 0,
                        psn: h.psn,
                    });
                }
                Op::Cas | Op::Faa => {
                    let Some((psn, v)) =
                        atomics.iter().flatten().copied().find(|&(p, _)| p == h.psn)
                    else {
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
            let r = r.expect("checked by fabric_qp");
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
        let r = r.expect("checked by fabric_qp");
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
        match self.fabric_execute(port, qpn, h, torn_ok) {
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
    fn serve_reads(&mut self, port: &mut Port) -> usize {
        let (mut sent, mut left) = (0, 0);
        let mut next = 0u32;
        loop {
            let found = self
                .qps
                .range(next..)
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
    fn fabric_execute(&mut self, port: &mut Port, qpn: u32, h: &Header, torn_ok: bool) -> Reply {
        // UC drops a packet it cannot take silently; RC NAKs it and the QP goes to ERR.
        let reliable = self.qps[&qpn].qp_type == QpType::Rc;
        let fail = |e: &mut Engine, s: u8| {
            if reliable {
                e.responder_error(qpn);
            }
            Reply::Nak(nak_code(s))
        };
        let rx = self.qps[&qpn].remote.as_ref().and_then(|r| r.rx);
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
        let p = &self.qps[&qpn];
        let remote = match h.op {
            Op::Write | Op::WriteImm | Op::Read if len == 0 => Ok(EMPTY_SPAN),
            Op::Write | Op::WriteImm => {
                self.remote_span(p, h.raddr, len, h.rkey, Access::REMOTE_WRITE)
            }
            Op::Read => self.remote_span(p, h.raddr, len, h.rkey, Access::REMOTE_READ),
            Op::Cas | Op::Faa => {
                if h.raddr % 8 != 0 {
                    return fail(self, wire::MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR);
                }
                self.remote_span(p, h.raddr, 8, h.rkey, Access::REMOTE_ATOMIC)
            }
            _ => Ok(EMPTY_SPAN),
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
