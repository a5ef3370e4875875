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
//! last window's worth) has its original value sent again. READ responses land in PSN
//! order and acknowledge the requests before their READ; one after a gap (responses lost,
//! damaged or late) makes the requester ask for the READ again from the first missing
//! PSN at once, once per gap (a READ request that is a duplicate is read again from
//! there). No progress within the ACK
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
//!
//! Layout: this file holds the QPs' fabric state, the wire (with the fault injector on the
//! way out) and the requester's parking and completion of its head; `send` the requester's
//! send path, `inbound` the dispatch of inbound packets and the requester's handling of
//! answers, `responder` the responder.

mod inbound;
mod responder;
mod send;

use std::time::{Duration, Instant};

use super::recv::RecvLoc;
use super::Engine;
use crate::sim::fabric::packet::{valid_segment, Header, NakCode, Op, ICRC_LEN, MAX_PAYLOAD};
use crate::sim::fabric::{Member, CELLS, CELL_LEN, PACKET_LEN};
use crate::sim::fault::{FaultInjector, HeldPacket};
use crate::wire::{self, Opcode};
use crate::QpState;

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
    /// What its completion needs (`execute` completes a done head from these, without
    /// reading the WQE again): its opcode, WQE counter, CQ_UPDATE and message length.
    opcode: Opcode,
    wqe_idx: u16,
    signaled: bool,
    len: u64,
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
    opcode: Opcode::Nop,
    wqe_idx: 0,
    signaled: false,
    len: 0,
    value: None,
};

/// A requester head WQE whose every packet is acknowledged: what its completion needs.
pub(super) struct DoneHead {
    pub(super) opcode: Opcode,
    pub(super) wqe_idx: u16,
    pub(super) signaled: bool,
    pub(super) nbb: u32,
    pub(super) len: u64,
}

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
    /// Requester: the PSN a READ was last asked again from because a later response of it
    /// came first (once per gap; an ACK timeout clears it).
    regap: Option<u32>,
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
    /// Requester: the head is in flight and only an answer, a doorbell past `pi` (more
    /// WQEs to send) or the ACK timeout at `until` can move it; until one of them, a pass
    /// skips the head instead of parsing it again (see `Engine::fabric_parked`).
    parked: Option<Parked>,
}

/// See [`RemoteQp::parked`].
#[derive(Clone, Copy)]
struct Parked {
    /// The SQ producer index (as `QpCtx::sq_pi`) when the head was parked.
    pi: u32,
    /// When the ACK timeout of the oldest PSN not acknowledged runs out.
    until: Instant,
    /// Passes left before the clock is read again (see [`PARK_CLOCK_EVERY`]).
    skip: u32,
}

/// A parked head reads the clock once every this many passes (a clock read costs more
/// than the rest of an idle pass): its ACK timeout is seen at most this many passes late,
/// a few microseconds against timeouts of 4 µs × 2^timeout.
const PARK_CLOCK_EVERY: u32 = 32;

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
            regap: None,
            rnr_timer: 12,
            epsn: 0,
            nak_sent: false,
            rx: None,
            read: None,
            ack_due: None,
            atomics: [None; WINDOW as usize],
            next_atomic: 0,
            parked: None,
        }
    }

    /// True when the WQE at the head of the SQ (index `head`) is in flight and has every
    /// answer it waits for: the next pass completes it.
    fn head_done(&self, head: u32) -> bool {
        let f = &self.flight[0];
        self.nflight > 0
            && f.idx == head
            && !psn_lt(self.una, f.end())
            && (f.kind != Kind::Atomic || f.value.is_some())
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

    /// Requester: true when the head of `qpn` is parked (in flight, nothing new posted, no
    /// answer since, its ACK timeout not run out): the pass leaves it alone. A doorbell
    /// past the parked producer index or a clock past the timeout unparks it here; an
    /// answer does in `fabric_answer`.
    pub(super) fn fabric_parked(&mut self, qpn: u32) -> bool {
        let Some(q) = self.qps.get_mut(&qpn) else {
            return false;
        };
        if q.remote.as_ref().is_none_or(|r| r.parked.is_none()) {
            return false;
        }
        let live = q.state == QpState::Rts && q.retry_at.is_none();
        let pi = q.sq_pi();
        let Some(r) = q.remote.as_deref_mut() else {
            return false;
        };
        if !live {
            r.parked = None;
            return false;
        }
        match r.parked.as_mut() {
            Some(p) if p.pi == pi && p.skip > 0 => {
                p.skip -= 1;
                true
            }
            Some(p) if p.pi == pi && Instant::now() < p.until => {
                p.skip = PARK_CLOCK_EVERY - 1;
                true
            }
            Some(_) => {
                r.parked = None;
                false
            }
            None => false,
        }
    }

    /// Requester: the head of `qpn` taken off its flight if every packet of it is
    /// acknowledged and it needs nothing but its CQE (not an atomic, whose value goes to
    /// local memory; no NAK heard; no fault injector, which may fail any WQE `execute`
    /// reads): the pass completes it without reading and parsing the WQE again.
    pub(super) fn fabric_head_done(&mut self, qpn: u32) -> Option<DoneHead> {
        if self.fault.is_some() {
            return None;
        }
        let q = self.qps.get_mut(&qpn)?;
        let head = q.sq_ci;
        let r = q.remote.as_deref_mut()?;
        if r.answer.is_some() || !r.head_done(head) || r.flight[0].kind == Kind::Atomic {
            return None;
        }
        let f = r.flight[0];
        r.flight.copy_within(1..r.nflight, 0);
        r.nflight -= 1;
        self.stats.bytes += f.len;
        Some(DoneHead {
            opcode: f.opcode,
            wqe_idx: f.wqe_idx,
            signaled: f.signaled,
            nbb: f.nbb,
            len: f.len,
        })
    }
}
