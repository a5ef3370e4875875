//! The fabric's packet: a 64-byte versioned header and up to [`MAX_PAYLOAD`] bytes of
//! payload, in network byte order, with no pointer or process-local value in it (a UDP
//! wire between hosts could carry the same bytes).
//!
//! Layout (offsets in bytes, big-endian integers):
//!
//! | off | len | field                                                          |
//! |-----|-----|----------------------------------------------------------------|
//! | 0   | 1   | version ([`VERSION`])                                          |
//! | 1   | 1   | opcode ([`Op`]: requests 1..=7, responses 16..=20)             |
//! | 2   | 1   | NAK code (NakErr: [`NakCode`]) or RNR timer (NakRnr, IBA code)   |
//! | 3   | 1   | flags: bit 0 solicited event, bits 1-2 [`Seg`]                 |
//! | 4   | 1   | source slot                                                    |
//! | 5   | 1   | destination slot                                               |
//! | 6   | 2   | reserved, zero                                                 |
//! | 8   | 4   | source epoch (the sender's slot generation)                    |
//! | 12  | 4   | destination epoch (the generation the sender addresses)       |
//! | 16  | 4   | source QPN                                                     |
//! | 20  | 4   | destination QPN                                                |
//! | 24  | 4   | PSN (24 bits)                                                  |
//! | 28  | 4   | rkey                                                           |
//! | 32  | 8   | remote address                                                 |
//! | 40  | 4   | payload length                                                 |
//! | 44  | 4   | immediate (READ request: the response segment size)            |
//! | 48  | 8   | compare (CAS)                                                  |
//! | 56  | 8   | swap (CAS) / add (FAA)                                         |
//!
//! The payload is followed by an [`ICRC_LEN`]-byte check word ([`icrc`] of header and
//! payload, big-endian), as the IBA's invariant CRC ends a packet: the fabric's ring writes
//! it and checks it before the header is parsed, so a packet damaged on the way is dropped
//! and counted, never acted on. It is a check against damage, not a defence against a
//! hostile sender (who can compute it): that defence is the parser and the responder's
//! checks.
//!
//! A message longer than the path MTU travels as several packets with consecutive PSNs,
//! marked FIRST, MIDDLE.., LAST ([`Seg`]; one packet: ONLY), each WRITE packet with its own
//! remote address (the message's plus the bytes before it) and rkey. A request's payload is
//! its piece of the SEND / WRITE data. A READ request carries the length to read in `len`,
//! the segment size of its responses in `imm`, and no payload ([`Header::payload_len`]); it
//! takes one PSN per response segment ([`read_packets`]), each answered by a READ response
//! with that PSN and the segment's data. An atomic is answered by an ATOMIC ACK carrying
//! the original value (8 bytes). An ACK acknowledges every PSN up to its own (cumulative); a
//! NAK names the PSN it refuses, after which the requester resends (RNR, PSN sequence error)
//! or fails the request.
//!
//! Contract: [`Header::parse`] is the only way bytes from the shared segment become a
//! header; it checks the version, the opcode, the reserved bytes, the slot numbers, the
//! 24-bit QPNs and PSN, and that the payload fits both [`MAX_PAYLOAD`] and the bytes given.
//! It never panics, whatever the input.

#![forbid(unsafe_code)]

/// The header version this code writes and accepts.
pub const VERSION: u8 = 3;
/// Header length in bytes.
pub const HEADER_LEN: usize = 64;
/// The largest payload of one packet (the sim port's MTU).
pub const MAX_PAYLOAD: usize = 4096;
/// Length of the check word after the payload.
pub const ICRC_LEN: usize = 8;

/// The check word of a packet's bytes (header and payload): four lanes of 64-bit
/// xor-multiply-rotate over the little-endian 8-byte words (word `j` into lane `j % 4`, the
/// tail zero-padded), folded with the length. Each step is a bijection of the lane, so any
/// damage confined to one 8-byte word always changes the result; other damage goes unseen
/// with odds near 2^-64. Four lanes keep four multiplications in flight (a 4 KiB payload
/// costs about as much as copying it twice).
pub fn icrc(bytes: &[u8]) -> u64 {
    Icrc::new().finish_with(bytes, bytes.len())
}

/// The words of the last bytes of a packet (fewer than 32), the last zero-padded.
#[inline(always)]
pub fn tail_words(rest: &[u8]) -> [u64; 4] {
    let mut tail = [0u64; 4];
    let mut words = rest.chunks_exact(8);
    for (t, w) in tail.iter_mut().zip(&mut words) {
        if let Ok(w) = w.try_into() {
            *t = u64::from_le_bytes(w);
        }
    }
    let last = words.remainder();
    if !last.is_empty() {
        tail[rest.len() / 8 % 4] = last.iter().rev().fold(0, |x, &b| (x << 8) | u64::from(b));
    }
    tail
}

/// The four little-endian words of a 32-byte block.
#[inline(always)]
pub fn block_words(b: &[u8; 32]) -> [u64; 4] {
    let w = |i: usize| {
        let mut x = [0u8; 8];
        x.copy_from_slice(&b[8 * i..8 * i + 8]);
        u64::from_le_bytes(x)
    };
    [w(0), w(1), w(2), w(3)]
}

/// [`icrc`] fed a block at a time (the fabric's ring computes it while it copies a packet
/// into or out of a cell, so each word is loaded once).
#[derive(Clone, Copy, Debug)]
pub struct Icrc([u64; 4]);

impl Default for Icrc {
    fn default() -> Self {
        Self::new()
    }
}

impl Icrc {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;

    #[inline(always)]
    fn step(s: u64, w: u64) -> u64 {
        (s ^ w).wrapping_mul(Self::K).rotate_left(29)
    }

    /// The state before any byte.
    pub const fn new() -> Icrc {
        Icrc([1, 2, 3, 4])
    }

    /// The next 32 bytes of the packet, as four little-endian words.
    #[inline(always)]
    pub fn block(&mut self, w: [u64; 4]) {
        let l = &mut self.0;
        *l = [
            Self::step(l[0], w[0]),
            Self::step(l[1], w[1]),
            Self::step(l[2], w[2]),
            Self::step(l[3], w[3]),
        ];
    }

    /// The check word of a packet of `len` bytes whose bytes after those fed so far (whole
    /// blocks) are `bytes`.
    #[inline(always)]
    pub fn finish_with(mut self, bytes: &[u8], len: usize) -> u64 {
        let mut blocks = bytes.chunks_exact(32);
        for b in &mut blocks {
            if let Ok(b) = b.try_into() {
                self.block(block_words(b));
            }
        }
        let rest = blocks.remainder();
        self.finish(&tail_words(rest), rest.len(), len)
    }

    /// The check word of a packet of `len` bytes whose last `rest` bytes (fewer than 32,
    /// after the whole blocks) are the words of `tail`, the last one zero-padded (the words
    /// past `rest` are not looked at).
    #[inline(always)]
    pub fn finish(mut self, tail: &[u64; 4], rest: usize, len: usize) -> u64 {
        let l = &mut self.0;
        for (i, w) in tail.iter().enumerate() {
            if 8 * i < rest {
                l[i] = Self::step(l[i], *w);
            }
        }
        let mut s = Self::step(l[0], len as u64);
        for x in &l[1..] {
            s = Self::step(s, *x);
        }
        s
    }
}

/// What a packet is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// SEND (consumes a receive).
    Send,
    /// SEND WITH IMMEDIATE.
    SendImm,
    /// RDMA WRITE.
    Write,
    /// RDMA WRITE WITH IMMEDIATE (consumes a receive).
    WriteImm,
    /// RDMA READ request (`len` bytes at `raddr`).
    Read,
    /// Compare and swap (8 bytes at `raddr`).
    Cas,
    /// Fetch and add (8 bytes at `raddr`).
    Faa,
    /// Positive acknowledgement of every PSN up to this one.
    Ack,
    /// Receiver not ready: retry the same PSN after the timer in byte 2.
    NakRnr,
    /// Negative acknowledgement with a [`NakCode`] in byte 2.
    NakErr,
    /// One segment of a READ's data.
    ReadResp,
    /// An atomic's original value (8 bytes, big-endian).
    AtomicAck,
}

impl Op {
    fn code(self) -> u8 {
        match self {
            Op::Send => 1,
            Op::SendImm => 2,
            Op::Write => 3,
            Op::WriteImm => 4,
            Op::Read => 5,
            Op::Cas => 6,
            Op::Faa => 7,
            Op::Ack => 16,
            Op::NakRnr => 17,
            Op::NakErr => 18,
            Op::ReadResp => 19,
            Op::AtomicAck => 20,
        }
    }
    fn from_code(c: u8) -> Option<Op> {
        Some(match c {
            1 => Op::Send,
            2 => Op::SendImm,
            3 => Op::Write,
            4 => Op::WriteImm,
            5 => Op::Read,
            6 => Op::Cas,
            7 => Op::Faa,
            16 => Op::Ack,
            17 => Op::NakRnr,
            18 => Op::NakErr,
            19 => Op::ReadResp,
            20 => Op::AtomicAck,
            _ => return None,
        })
    }
    /// True for the ACKs, NAKs and READ responses (what a requester receives).
    pub fn is_response(self) -> bool {
        matches!(
            self,
            Op::Ack | Op::NakRnr | Op::NakErr | Op::ReadResp | Op::AtomicAck
        )
    }
}

/// Where a packet sits in its message (flags bits 1-2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seg {
    /// The whole message.
    Only,
    /// The first of several packets.
    First,
    /// Neither first nor last.
    Middle,
    /// The last of several packets.
    Last,
}

impl Seg {
    fn bits(self) -> u8 {
        match self {
            Seg::Only => 0,
            Seg::First => 1,
            Seg::Middle => 2,
            Seg::Last => 3,
        }
    }
    fn from_bits(b: u8) -> Seg {
        match b & 3 {
            0 => Seg::Only,
            1 => Seg::First,
            2 => Seg::Middle,
            _ => Seg::Last,
        }
    }
    /// The packet of a message of `len` bytes that starts at byte `off`, `n` bytes long.
    pub fn of(off: u64, n: u64, len: u64) -> Seg {
        match (off == 0, off + n >= len) {
            (true, true) => Seg::Only,
            (true, false) => Seg::First,
            (false, false) => Seg::Middle,
            (false, true) => Seg::Last,
        }
    }
    /// True for FIRST and ONLY.
    pub fn starts(self) -> bool {
        matches!(self, Seg::Only | Seg::First)
    }
    /// True for LAST and ONLY.
    pub fn ends(self) -> bool {
        matches!(self, Seg::Only | Seg::Last)
    }
}

/// The PSNs a READ of `len` bytes takes with response segments of `mtu` bytes (one at least).
pub fn read_packets(len: u64, mtu: u64) -> u32 {
    len.div_ceil(mtu.max(1)).max(1).min(u64::from(MASK24 / 2)) as u32
}

/// The segment sizes a READ request may ask for (a path MTU of the IBA, 256..=4096).
pub fn valid_segment(mtu: u32) -> bool {
    mtu.is_power_of_two() && (256..=MAX_PAYLOAD as u32).contains(&mtu)
}

/// The NAK codes of the IBA's AETH, which a NakErr carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NakCode {
    /// PSN sequence error.
    PsnSeq = 0,
    /// Invalid request (a SEND longer than the receive, a misaligned atomic).
    InvalidRequest = 1,
    /// Remote access error (rkey, bounds, rights).
    RemoteAccess = 2,
    /// Remote operational error (the responder could not complete it).
    RemoteOp = 3,
}

impl NakCode {
    /// The code in byte 2 of a NakErr (an unknown code reads as a remote operational error).
    pub fn from_byte(b: u8) -> NakCode {
        match b {
            0 => NakCode::PsnSeq,
            1 => NakCode::InvalidRequest,
            2 => NakCode::RemoteAccess,
            _ => NakCode::RemoteOp,
        }
    }
}

/// Why bytes are not a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadPacket {
    /// Fewer bytes than a header.
    Short,
    /// A version this code does not speak.
    Version(u8),
    /// An unknown opcode.
    Opcode(u8),
    /// Reserved bytes not zero, or flags outside bits 0-2.
    Reserved,
    /// A slot number outside the fabric.
    Slot,
    /// A QPN or PSN wider than 24 bits.
    Width,
    /// A payload longer than [`MAX_PAYLOAD`] or than the bytes given.
    Length,
}

/// A checked packet header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// What the packet is.
    pub op: Op,
    /// NakErr: the [`NakCode`]; NakRnr: the responder's `min_rnr_timer`; otherwise 0.
    pub nak: u8,
    /// Solicited event (SEND / WRITE WITH IMM).
    pub solicited: bool,
    /// Where the packet sits in its message.
    pub seg: Seg,
    /// The sender's slot.
    pub src_slot: u8,
    /// The receiver's slot.
    pub dst_slot: u8,
    /// The sender's slot generation.
    pub src_epoch: u32,
    /// The receiver's slot generation, as the sender knows it.
    pub dst_epoch: u32,
    /// The sending QP.
    pub src_qpn: u32,
    /// The receiving QP.
    pub dst_qpn: u32,
    /// Packet sequence number (24 bits).
    pub psn: u32,
    /// Remote key (WRITE, READ, atomics).
    pub rkey: u32,
    /// Remote address (WRITE, READ, atomics).
    pub raddr: u64,
    /// Payload length (READ request: the length to read).
    pub len: u32,
    /// Immediate data (as the application posted it: the CQE carries it unchanged).
    pub imm: u32,
    /// CAS compare value.
    pub compare: u64,
    /// CAS swap / FAA add value.
    pub swap_add: u64,
}

/// The largest QPN / PSN (24 bits).
const MASK24: u32 = 0xff_ffff;

impl Header {
    /// A header with every field zero but `op`.
    pub fn new(op: Op) -> Header {
        Header {
            op,
            nak: 0,
            solicited: false,
            seg: Seg::Only,
            src_slot: 0,
            dst_slot: 0,
            src_epoch: 0,
            dst_epoch: 0,
            src_qpn: 0,
            dst_qpn: 0,
            psn: 0,
            rkey: 0,
            raddr: 0,
            len: 0,
            imm: 0,
            compare: 0,
            swap_add: 0,
        }
    }

    /// The payload bytes that follow the header (a READ request has none).
    pub fn payload_len(&self) -> usize {
        if self.op == Op::Read {
            0
        } else {
            self.len as usize
        }
    }

    /// Write the header into the first [`HEADER_LEN`] bytes of `out` (which must be at
    /// least that long).
    pub fn write(&self, out: &mut [u8]) {
        if let Ok(h) = <&mut [u8; HEADER_LEN]>::try_from(&mut out[..HEADER_LEN]) {
            self.fill(h);
        }
    }

    /// The header's [`HEADER_LEN`] bytes.
    #[inline]
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        self.fill(&mut h);
        h
    }

    /// Every byte of `h`, the reserved ones zero.
    #[inline]
    fn fill(&self, h: &mut [u8; HEADER_LEN]) {
        h[at::VERSION] = VERSION;
        h[at::OP] = self.op.code();
        h[at::NAK] = self.nak;
        h[at::FLAGS] = u8::from(self.solicited) | (self.seg.bits() << 1);
        h[at::SRC_SLOT] = self.src_slot;
        h[at::DST_SLOT] = self.dst_slot;
        h[at::RESERVED] = 0;
        h[at::RESERVED + 1] = 0;
        put32(h, at::SRC_EPOCH, self.src_epoch);
        put32(h, at::DST_EPOCH, self.dst_epoch);
        put32(h, at::SRC_QPN, self.src_qpn);
        put32(h, at::DST_QPN, self.dst_qpn);
        put32(h, at::PSN, self.psn);
        put32(h, at::RKEY, self.rkey);
        put64(h, at::RADDR, self.raddr);
        put32(h, at::LEN, self.len);
        put32(h, at::IMM, self.imm);
        put64(h, at::COMPARE, self.compare);
        put64(h, at::SWAP_ADD, self.swap_add);
    }

    /// Parse and check the header at the start of `buf` (header and payload: `buf` must
    /// hold the whole packet). `slots` is the fabric's slot count.
    pub fn parse(buf: &[u8], slots: usize) -> Result<Header, BadPacket> {
        let Some((h, _)) = buf.split_first_chunk::<HEADER_LEN>() else {
            return Err(BadPacket::Short);
        };
        if h[at::VERSION] != VERSION {
            return Err(BadPacket::Version(h[at::VERSION]));
        }
        let Some(op) = Op::from_code(h[at::OP]) else {
            return Err(BadPacket::Opcode(h[at::OP]));
        };
        if (h[at::FLAGS] & !7) | h[at::RESERVED] | h[at::RESERVED + 1] != 0 {
            return Err(BadPacket::Reserved);
        }
        if usize::from(h[at::SRC_SLOT].max(h[at::DST_SLOT])) >= slots {
            return Err(BadPacket::Slot);
        }
        let hdr = Header {
            op,
            nak: h[at::NAK],
            solicited: h[at::FLAGS] & 1 != 0,
            seg: Seg::from_bits(h[at::FLAGS] >> 1),
            src_slot: h[at::SRC_SLOT],
            dst_slot: h[at::DST_SLOT],
            src_epoch: get32(h, at::SRC_EPOCH),
            dst_epoch: get32(h, at::DST_EPOCH),
            src_qpn: get32(h, at::SRC_QPN),
            dst_qpn: get32(h, at::DST_QPN),
            psn: get32(h, at::PSN),
            rkey: get32(h, at::RKEY),
            raddr: get64(h, at::RADDR),
            len: get32(h, at::LEN),
            imm: get32(h, at::IMM),
            compare: get64(h, at::COMPARE),
            swap_add: get64(h, at::SWAP_ADD),
        };
        if (hdr.src_qpn | hdr.dst_qpn | hdr.psn) > MASK24 {
            return Err(BadPacket::Width);
        }
        if hdr.payload_len() > MAX_PAYLOAD
            || hdr.len > 1 << 31
            || HEADER_LEN + hdr.payload_len() > buf.len()
        {
            return Err(BadPacket::Length);
        }
        Ok(hdr)
    }
}

/// The payload length a raw header claims (its `len` field, unchecked; 0 for a READ
/// request, whose `len` is the length to read): how much of a cell a consumer copies before
/// the check word.
pub fn claimed_len(header: &[u8; HEADER_LEN]) -> usize {
    if header[at::OP] == Op::Read.code() {
        0
    } else {
        get32(header, at::LEN) as usize
    }
}

/// Byte offsets of the header fields (the table in the module doc).
mod at {
    pub(super) const VERSION: usize = 0;
    pub(super) const OP: usize = 1;
    pub(super) const NAK: usize = 2;
    pub(super) const FLAGS: usize = 3;
    pub(super) const SRC_SLOT: usize = 4;
    pub(super) const DST_SLOT: usize = 5;
    pub(super) const RESERVED: usize = 6;
    pub(super) const SRC_EPOCH: usize = 8;
    pub(super) const DST_EPOCH: usize = 12;
    pub(super) const SRC_QPN: usize = 16;
    pub(super) const DST_QPN: usize = 20;
    pub(super) const PSN: usize = 24;
    pub(super) const RKEY: usize = 28;
    pub(super) const RADDR: usize = 32;
    pub(super) const LEN: usize = 40;
    pub(super) const IMM: usize = 44;
    pub(super) const COMPARE: usize = 48;
    pub(super) const SWAP_ADD: usize = 56;
}

// The offsets are constants inside the header: inlined, these index without a check.
#[inline(always)]
fn put32(h: &mut [u8; HEADER_LEN], off: usize, v: u32) {
    h[off..off + 4].copy_from_slice(&v.to_be_bytes());
}
#[inline(always)]
fn put64(h: &mut [u8; HEADER_LEN], off: usize, v: u64) {
    h[off..off + 8].copy_from_slice(&v.to_be_bytes());
}
#[inline(always)]
fn get32(h: &[u8; HEADER_LEN], off: usize) -> u32 {
    u32::from_be_bytes([h[off], h[off + 1], h[off + 2], h[off + 3]])
}
#[inline(always)]
fn get64(h: &[u8; HEADER_LEN], off: usize) -> u64 {
    (u64::from(get32(h, off)) << 32) | u64::from(get32(h, off + 4))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_check_word_sees_every_flipped_bit_and_every_length() {
        let bytes: Vec<u8> = (0..HEADER_LEN + 77).map(|i| (i * 37 + 5) as u8).collect();
        let good = icrc(&bytes);
        assert_eq!(good, icrc(&bytes.clone()), "deterministic");
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut b = bytes.clone();
                b[i] ^= 1 << bit;
                assert_ne!(icrc(&b), good, "byte {i} bit {bit}");
            }
        }
        for n in 0..bytes.len() {
            assert_ne!(icrc(&bytes[..n]), good, "length {n}");
        }
        // A tail of zeros is not the same packet as a shorter one.
        assert_ne!(icrc(&[0u8; 8]), icrc(&[0u8; 7]));
    }

    /// The check word as documented, one 8-byte word at a time (word `j` into lane
    /// `j % 4`, the last zero-padded): the blockwise [`icrc`] and [`Icrc`] must agree with
    /// it, and with values pinned from the first implementation (the word on the wire).
    #[test]
    fn the_check_word_is_the_documented_function() {
        fn reference(bytes: &[u8]) -> u64 {
            let step = |s: u64, w: u64| (s ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
            let mut lane = [1u64, 2, 3, 4];
            for (j, c) in bytes.chunks(8).enumerate() {
                let mut w = [0u8; 8];
                w[..c.len()].copy_from_slice(c);
                lane[j % 4] = step(lane[j % 4], u64::from_le_bytes(w));
            }
            let mut s = step(lane[0], bytes.len() as u64);
            for l in &lane[1..] {
                s = step(s, *l);
            }
            s
        }
        let bytes: Vec<u8> = (0..300).map(|i| (i * 37 + 5) as u8).collect();
        for n in 0..bytes.len() {
            assert_eq!(icrc(&bytes[..n]), reference(&bytes[..n]), "length {n}");
        }
        for (n, v) in [
            (0, 0xdaaa_9ad1_260b_3fff),
            (1, 0xf1a9_ae3b_fb9b_ec3f),
            (7, 0x1adf_5c7c_6885_5343),
            (8, 0xdc62_bdd1_db41_7428),
            (31, 0xe470_dd8c_f08a_fc66),
            (32, 0xa353_93d6_99b2_d0ab),
            (64, 0xe1ca_062c_bd5c_fe30),
            (72, 0xf2f5_14cb_9dab_535c),
            (77, 0x08d0_9e63_ca11_5331),
            (96, 0x4c9e_ae30_e6a0_6e00),
            (127, 0x344f_c9e2_b821_3e0f),
            (200, 0x6e4c_6570_7b7c_98a7),
        ] {
            assert_eq!(icrc(&bytes[..n]), v, "length {n}");
        }
    }

    use super::*;

    fn sample() -> Header {
        Header {
            op: Op::WriteImm,
            nak: 0,
            solicited: true,
            seg: Seg::Last,
            src_slot: 3,
            dst_slot: 5,
            src_epoch: 0x0102_0304,
            dst_epoch: 0x0506_0708,
            src_qpn: 0x12_3456,
            dst_qpn: 0xab_cdef,
            psn: 0x00_0007,
            rkey: 0x1101,
            raddr: 0x1122_3344_5566_7788,
            len: 4,
            imm: 0xdead_beef,
            compare: 0,
            swap_add: 0,
        }
    }

    #[test]
    fn header_bytes_are_the_documented_layout() {
        let mut b = [0u8; HEADER_LEN + 4];
        sample().write(&mut b);
        assert_eq!(&b[..8], &[3, 4, 0, 7, 3, 5, 0, 0]);
        assert_eq!(&b[8..16], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&b[16..24], &[0, 0x12, 0x34, 0x56, 0, 0xab, 0xcd, 0xef]);
        assert_eq!(&b[24..32], &[0, 0, 0, 7, 0, 0, 0x11, 0x01]);
        assert_eq!(
            &b[32..40],
            &[0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88]
        );
        assert_eq!(&b[40..48], &[0, 0, 0, 4, 0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(Header::parse(&b, 16), Ok(sample()));
        // Every header byte is written, whatever the buffer held.
        let mut dirty = [0xa5u8; HEADER_LEN + 4];
        sample().write(&mut dirty);
        assert_eq!(dirty[..HEADER_LEN], b[..HEADER_LEN]);
        assert_eq!(sample().to_bytes()[..], b[..HEADER_LEN]);
    }

    #[test]
    fn parse_refuses_what_is_not_a_packet() {
        let mut b = [0u8; HEADER_LEN + 4];
        sample().write(&mut b);
        assert_eq!(Header::parse(&b[..10], 16), Err(BadPacket::Short));
        // The payload (4 bytes) is not all there.
        assert_eq!(
            Header::parse(&b[..HEADER_LEN + 3], 16),
            Err(BadPacket::Length)
        );
        assert_eq!(Header::parse(&b, 4), Err(BadPacket::Slot));
        let bad = |i: usize, v: u8| {
            let mut c = b;
            c[i] = v;
            Header::parse(&c, 16)
        };
        assert_eq!(bad(0, 1), Err(BadPacket::Version(1)));
        assert_eq!(bad(1, 0x33), Err(BadPacket::Opcode(0x33)));
        assert_eq!(bad(3, 8), Err(BadPacket::Reserved));
        assert_eq!(bad(6, 1), Err(BadPacket::Reserved));
        assert_eq!(bad(16, 1), Err(BadPacket::Width));
        assert_eq!(bad(24, 1), Err(BadPacket::Width));
        assert_eq!(bad(41, 0x20), Err(BadPacket::Length));
    }

    #[test]
    fn a_read_request_carries_no_payload() {
        let mut h = sample();
        h.op = Op::Read;
        h.seg = Seg::Only;
        h.len = 1 << 20;
        let mut b = [0u8; HEADER_LEN];
        h.write(&mut b);
        assert_eq!(Header::parse(&b, 16), Ok(h));
        // Longer than one packet is fine for a READ request, not for a payload.
        h.op = Op::Write;
        h.write(&mut b);
        assert_eq!(Header::parse(&b, 16), Err(BadPacket::Length));
    }

    #[test]
    fn segments_and_read_packets() {
        let segs: Vec<Seg> = (0..3).map(|i| Seg::of(i * 1024, 1024, 3000)).collect();
        assert_eq!(segs, [Seg::First, Seg::Middle, Seg::Last]);
        assert_eq!(Seg::of(0, 8, 8), Seg::Only);
        assert_eq!(Seg::of(0, 0, 0), Seg::Only);
        assert_eq!(read_packets(0, 1024), 1);
        assert_eq!(read_packets(1024, 1024), 1);
        assert_eq!(read_packets(1025, 1024), 2);
        assert_eq!(read_packets(1 << 20, 4096), 256);
        for (s, bits) in [
            (Seg::Only, 0),
            (Seg::First, 2),
            (Seg::Middle, 4),
            (Seg::Last, 6),
        ] {
            let mut h = Header::new(Op::Send);
            h.seg = s;
            let mut b = [0u8; HEADER_LEN];
            h.write(&mut b);
            assert_eq!(b[3], bits);
            assert_eq!(Header::parse(&b, 16).map(|h| h.seg), Ok(s));
        }
        assert!(valid_segment(256) && valid_segment(4096));
        assert!(!valid_segment(0) && !valid_segment(1000) && !valid_segment(8192));
    }
}
