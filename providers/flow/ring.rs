//! The WRITE-into-the-peer's-ring pattern: the writer RDMA-WRITEs (usually WITH IMMEDIATE)
//! message `seq` into slot `seq % slots` of a ring in the reader's memory; the reader tells
//! the writer how far it has read, and the writer never runs more than `slots` messages
//! ahead of that, so it never overwrites a slot the reader has not read.
//!
//! The acknowledgement is a plain count (messages `0..upto` read). How it travels is the
//! application's choice; the simplest that the writer learns of by a completion is a
//! zero-length SEND WITH IMMEDIATE carrying the count's low 32 bits
//! ([`RingWriter::ack_low32`]), which consumes one of the writer's receives. (An 8-byte WRITE
//! into a word of the writer's memory raises no completion there: the writer would read a word
//! the device may be writing.) [`RingReader::consume`] says when one is due.

use crate::error::{Error, Result};
use crate::types::RemoteTarget;

/// The writer's side: slot targets in the peer's ring and the credit left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingWriter {
    ring: RemoteTarget,
    slot_size: u32,
    slots: u32,
    next: u64,
    acked: u64,
}

impl RingWriter {
    /// A writer into `ring` (the peer's ring, a target checked against its window), cut into
    /// slots of `slot_size` bytes: as many as fit. An error when not one fits.
    pub fn new(ring: RemoteTarget, slot_size: u32) -> Result<RingWriter> {
        if slot_size == 0 || ring.len() < slot_size {
            return Err(Error::InvalidArgument {
                context: "RingWriter::new",
                detail: format!(
                    "a ring of {} B holds no slot of {slot_size} B; share a larger ring or use \
                     smaller slots",
                    ring.len()
                ),
            });
        }
        Ok(RingWriter {
            ring,
            slot_size,
            slots: ring.len() / slot_size,
            next: 0,
            acked: 0,
        })
    }
    /// Slots in the ring.
    pub const fn slots(&self) -> u32 {
        self.slots
    }
    /// Bytes per slot.
    pub const fn slot_size(&self) -> u32 {
        self.slot_size
    }
    /// The sequence number the next message gets (= messages written so far).
    pub const fn written(&self) -> u64 {
        self.next
    }
    /// Messages the reader has acknowledged.
    pub const fn acked(&self) -> u64 {
        self.acked
    }
    /// How many more messages may be written before the reader acknowledges more.
    #[inline]
    pub const fn room(&self) -> u32 {
        self.slots - (self.next - self.acked) as u32
    }
    /// The slot message `seq` goes to (its whole `slot_size` bytes).
    #[inline]
    pub fn slot(&self, seq: u64) -> RemoteTarget {
        let index = seq % self.slots as u64;
        // Inside the ring: index < slots and slots * slot_size <= ring.len() (checked by
        // `new`), so `sub` cannot refuse.
        match self.ring.sub(index as u32 * self.slot_size, self.slot_size) {
            Some(t) => t,
            None => unreachable!("slot {index} outside a ring checked by RingWriter::new"),
        }
    }
    /// The index (`0..slots`) of message `seq`'s slot: what an immediate carries when the
    /// reader is to find the message by its slot.
    #[inline]
    pub const fn slot_index(&self, seq: u64) -> u32 {
        (seq % self.slots as u64) as u32
    }
    /// Starts the stream again at message `seq`, every message before it acknowledged: after
    /// a reconnect, at the sequence both sides agreed on (the reader's
    /// [`RingReader::expected`], exchanged out of band). The ring's geometry is kept.
    pub fn reset(&mut self, seq: u64) {
        self.next = seq;
        self.acked = seq;
    }
    /// Claims the next message: its sequence number and slot; `None` when the writer is
    /// `slots` ahead of the reader's acknowledgement (wait for [`RingWriter::ack`]).
    #[inline]
    pub fn claim(&mut self) -> Option<(u64, RemoteTarget)> {
        if self.room() == 0 {
            return None;
        }
        let seq = self.next;
        self.next += 1;
        Some((seq, self.slot(seq)))
    }
    /// As [`RingWriter::ack`], from the low 32 bits of the count (an acknowledgement carried
    /// as an immediate): widened to the count nearest above the last acknowledged one.
    #[inline]
    pub fn ack_low32(&mut self, low: u32) -> bool {
        let delta = low.wrapping_sub(self.acked as u32) as u64;
        self.ack(self.acked + delta)
    }
    /// The reader has read messages `0..upto`. True when that moved the credit; false (and
    /// nothing changes) for an acknowledgement older than the last one, or one of messages
    /// not written yet (a confused reader: the writer keeps its own count).
    #[inline]
    pub fn ack(&mut self, upto: u64) -> bool {
        if upto <= self.acked || upto > self.next {
            return false;
        }
        self.acked = upto;
        true
    }
}

/// The reader's side: where message `seq` lies in the local ring and when to acknowledge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingReader {
    slot_size: u32,
    slots: u32,
    ack_every: u32,
    next: u64,
    acked: u64,
}

impl RingReader {
    /// A reader of `slots` slots of `slot_size` bytes (the ring it shared), acknowledging
    /// every `ack_every` messages (1 ..= slots; half the ring keeps the writer streaming).
    pub fn new(slots: u32, slot_size: u32, ack_every: u32) -> Result<RingReader> {
        if slots == 0 || slot_size == 0 || ack_every == 0 || ack_every > slots {
            return Err(Error::InvalidArgument {
                context: "RingReader::new",
                detail: format!(
                    "{slots} slots of {slot_size} B acknowledged every {ack_every}: slots and \
                     slot size must be > 0 and ack_every in 1..=slots (the writer stops after \
                     slots unacknowledged messages)"
                ),
            });
        }
        Ok(RingReader {
            slot_size,
            slots,
            ack_every,
            next: 0,
            acked: 0,
        })
    }
    /// The sequence number of the next message to read.
    pub const fn expected(&self) -> u64 {
        self.next
    }
    /// The byte offset of message `seq`'s slot in the local ring.
    #[inline]
    pub const fn offset(&self, seq: u64) -> usize {
        (seq % self.slots as u64) as usize * self.slot_size as usize
    }
    /// The offset of the next message's slot.
    #[inline]
    pub const fn next_offset(&self) -> usize {
        self.offset(self.next)
    }
    /// Marks the next message read (its slot may be overwritten once acknowledged); returns
    /// the count to acknowledge when one is due (every `ack_every` messages).
    #[inline]
    pub fn consume(&mut self) -> Option<u64> {
        self.next += 1;
        if self.next - self.acked >= self.ack_every as u64 {
            self.acked = self.next;
            Some(self.next)
        } else {
            None
        }
    }
    /// Starts reading again at message `seq` (see [`RingWriter::reset`]), every message
    /// before it counted as read and acknowledged.
    pub fn reset(&mut self, seq: u64) {
        self.next = seq;
        self.acked = seq;
    }
    /// Acknowledges everything read so far now (e.g. before going quiet); `None` when
    /// nothing is unacknowledged.
    pub fn flush_ack(&mut self) -> Option<u64> {
        (self.next > self.acked).then(|| {
            self.acked = self.next;
            self.next
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_writer_stops_slots_ahead_and_resumes_on_ack() {
        let window = crate::RemoteMr {
            addr: 0x10_000,
            len: 4 * 64 + 10,
            rkey: 0x77,
        };
        let ring = window.target(0, window.len).unwrap();
        let mut w = RingWriter::new(ring, 64).unwrap();
        assert_eq!((w.slots(), w.room()), (4, 4));
        let got: Vec<_> = std::iter::from_fn(|| w.claim()).collect();
        let addrs: Vec<_> = got.iter().map(|(s, t)| (*s, t.addr(), t.len())).collect();
        assert_eq!(
            addrs,
            [
                (0, 0x10_000, 64),
                (1, 0x10_040, 64),
                (2, 0x10_080, 64),
                (3, 0x10_0c0, 64)
            ]
        );
        assert_eq!(w.room(), 0);
        assert!(!w.ack(5), "an ack of unwritten messages is refused");
        assert!(w.ack(2));
        assert!(!w.ack(1), "an older ack changes nothing");
        assert_eq!((w.acked(), w.room()), (2, 2));
        let (s, t) = w.claim().unwrap();
        assert_eq!(
            (s, t.addr(), t.rkey()),
            (4, 0x10_000, 0x77),
            "wraps to slot 0"
        );
        // From an immediate's 32 bits, across the 2^32 boundary.
        let mut far = RingWriter {
            next: (1 << 32) + 3,
            acked: (1 << 32) - 1,
            ..w
        };
        assert!(far.ack_low32(2));
        assert_eq!(far.acked(), (1 << 32) + 2);
        assert!(!far.ack_low32(9), "beyond what was written");
        assert!(RingWriter::new(ring, 300).is_err());
        assert!(RingWriter::new(ring, 0).is_err());
    }

    #[test]
    fn writer_and_reader_restart_at_an_agreed_sequence() {
        let window = crate::RemoteMr {
            addr: 0x10_000,
            len: 4 * 64,
            rkey: 0x77,
        };
        let mut w = RingWriter::new(window.target(0, window.len).unwrap(), 64).unwrap();
        let mut r = RingReader::new(4, 64, 2).unwrap();
        for _ in 0..3 {
            w.claim().unwrap();
        }
        assert_eq!(r.consume(), None);
        // The link failed after the reader read one message: both resume at 1.
        w.reset(r.expected());
        r.reset(r.expected());
        assert_eq!((w.written(), w.acked(), w.room()), (1, 1, 4));
        let (seq, t) = w.claim().unwrap();
        assert_eq!((seq, w.slot_index(seq), t.addr()), (1, 1, 0x10_040));
        assert_eq!((r.expected(), r.next_offset()), (1, 64));
        assert_eq!(
            r.flush_ack(),
            None,
            "everything before 1 counts as acknowledged"
        );
        assert_eq!(w.slot_index(6), 2);
    }

    #[test]
    fn the_reader_acknowledges_every_n_and_on_flush() {
        let mut r = RingReader::new(4, 64, 2).unwrap();
        assert_eq!((r.next_offset(), r.consume()), (0, None));
        assert_eq!((r.next_offset(), r.consume()), (64, Some(2)));
        assert_eq!((r.offset(5), r.expected()), (64, 2));
        assert_eq!(r.consume(), None);
        assert_eq!(r.flush_ack(), Some(3));
        assert_eq!(r.flush_ack(), None);
        assert!(RingReader::new(4, 64, 5).is_err());
        assert!(RingReader::new(0, 64, 1).is_err());
    }
}
