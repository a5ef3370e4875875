//! The sim fabric: sim devices of several processes on one host reach each other through a
//! segment of shared memory, as packets, never as shared pointers.
//!
//! ## Contract
//!
//! - **The segment** is a file under `/dev/shm` (name: `RDMA_DIRECT_SIM_FABRIC`, or
//!   `rdma-direct-sim-fabric-v<layout>-<uid>` by default), created with mode 0600 and refused if
//!   another user owns it, mapped shared with `memmap2`. All-zero bytes are a valid empty
//!   fabric, so whoever creates it first needs no initialisation step (a non-zero magic or
//!   segment size of another layout is refused). The magic names the segment's geometry
//!   (slot table, tail tables, ring offsets, size), and so does the default name (its
//!   [`LAYOUT`] number), so builds of two layouts never meet in a default segment; what
//!   travels in a cell is versioned by the packet
//!   header, so a build with another packet version sharing the segment has its packets
//!   dropped and counted, nothing more.
//! - **Slots.** A device that joins takes one of [`MAX_DEVICES`] slots: it writes its pid,
//!   its GID (the sim's per-process, per-device GID, which names its QPN range too) and a
//!   new generation (`epoch`). A slot whose pid is no longer alive (`kill(pid, 0)` says
//!   ESRCH) is taken over by the next device that joins; a dropped device frees its slot.
//!   Devices join lazily, when a QP of theirs is first connected to another process's
//!   endpoint (both ends of a connection do so) or an address handle names one.
//! - **Inboxes.** One bounded single-producer single-consumer ring per (sender, receiver)
//!   pair of slots, [`CELLS`] cells of one packet each. One ring per pair, not one shared
//!   multi-producer inbox, so a process that stops mid-write or scribbles over its rings
//!   stalls only the rings it produces into: nobody else's traffic waits behind it. Head and
//!   tail run free (wrapping u32) and are masked only at the cell; a producer keeps the
//!   head it last read and reads it again only when the ring looks full. A cell starts on
//!   a cache line with a sequence word (the ring index the packet was put at, plus one),
//!   which the producer stores after the packet and before the tail: a consumer polls the
//!   head cell of a ring that has brought packets before and takes the packet as soon as
//!   that word is there, one cache-line transfer with the packet rather than the tail's line
//!   first and the cell's after it. The tails of a
//!   receiver's rings sit together in one 64-byte line (its tail table, one word per
//!   sender), so a consumer learns which of its other rings hold something new from one
//!   line, without visiting each ring; the head of each ring sits in the ring. While hot
//!   rings keep bringing packets the consumer reads that line only every [`SWEEP_EVERY`]
//!   passes (every producer stores into it after every packet, so reading it on every pass
//!   took it from them about once a packet), and on every pass otherwise
//!   ([`Member::sweep_due`]): what only the tail table shows is seen at most that many
//!   passes late. A full ring
//!   refuses the packet (requests and READ responses wait for room, an ACK is held for a
//!   later pass; any other answer is lost, and the requester's timeout covers it).
//! - **Nothing read from the segment is trusted.** A consumer copies a cell out before
//!   looking at it, a tail more than [`CELLS`] ahead of the head is a corrupt ring (the
//!   cells are discarded and counted), a cell the tail publishes whose sequence word is
//!   wrong is discarded and counted as damaged, a packet whose check word ([`packet::icrc`], written
//!   by the producer after the payload) does not match is discarded and counted (damaged on
//!   the way), and packets are parsed by [`packet::Header::parse`].
//!   Packets from a slot generation other than the current one are dropped.
//!
//! What the engine does with packets (the requester and responder sides of RC) is in
//! `engine/remote.rs`.

pub mod packet;

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// Slots (devices) a fabric holds.
pub const MAX_DEVICES: usize = 16;
/// Cells (packets in flight) of one ring.
pub const CELLS: u32 = 8;
/// The longest message the fabric carries (bytes): 2^31, as mlx5's; longer ones fail with
/// `LOCAL_LENGTH_ERR`.
pub const MAX_MESSAGE: u64 = 1 << 31;
/// The longest packet (header and payload) a cell carries.
pub const PACKET_LEN: usize = packet::HEADER_LEN + packet::MAX_PAYLOAD;
/// Bytes of a packet and its check word (what a consumer copies out of a cell at most).
pub const CELL_LEN: usize = PACKET_LEN + packet::ICRC_LEN;
/// A cell in the ring: its sequence word ([`SEQ_LEN`] bytes), the packet, the check word,
/// padded to whole cache lines (a small packet starts on a line of its own).
const CELL_SPAN: usize = (SEQ_LEN + CELL_LEN).next_multiple_of(64);
/// The sequence word before each cell's packet: the ring index the packet was put at,
/// plus one, stored by the producer after the packet (see "Inboxes" in the module doc).
const SEQ_LEN: usize = 8;

/// While hot rings bring packets, the tail table is read every this many passes
/// ([`Member::sweep_due`]).
pub const SWEEP_EVERY: u32 = 64;

/// The environment variable naming the fabric (a file name under `/dev/shm`).
pub const FABRIC_ENV: &str = "RDMA_DIRECT_SIM_FABRIC";

/// The segment layout's version, in the magic and in the default name.
pub const LAYOUT: u8 = 3;
const _: () = assert!(LAYOUT < 10);
const MAGIC: u64 = u64::from_le_bytes([b'r', b'd', b's', b'i', b'm', b'f', b'b', b'0' + LAYOUT]);
/// Slot table: one 64-byte entry per slot from here (pid, epoch, GID as four words).
const SLOTS_OFF: usize = 64;
const SLOT_LEN: usize = 64;
/// Tail tables from here: one 64-byte line per receiving slot, the tail (a u32 written by
/// the producer) of the ring from sender `s` at byte `4 * s` of it.
const TAILS_OFF: usize = 2048;
/// Rings from here, one per (receiver, sender) pair.
const RINGS_OFF: usize = 4096;
/// A ring: head (consumer) at 0, cells from 64 (its tail is in the receiver's tail table).
const RING_CELLS_OFF: usize = 64;
const RING_LEN: usize = (RING_CELLS_OFF + CELLS as usize * CELL_SPAN).next_multiple_of(4096);
/// The whole segment.
pub const SEGMENT_LEN: usize = RINGS_OFF + MAX_DEVICES * MAX_DEVICES * RING_LEN;
/// A slot being claimed (its pid word while the claimer writes the GID).
const CLAIMING: u32 = u32::MAX;

const _: () = assert!(SLOTS_OFF + MAX_DEVICES * SLOT_LEN <= TAILS_OFF);
const _: () = assert!(TAILS_OFF + MAX_DEVICES * 64 <= RINGS_OFF);
const _: () = assert!(MAX_DEVICES * 4 == 64);
const _: () = assert!(MAX_DEVICES <= 256);

/// The mapped segment.
pub struct Segment {
    map: memmap2::MmapRaw,
    path: std::path::PathBuf,
}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Segment").field("path", &self.path).finish()
    }
}

fn fabric_err(detail: String) -> crate::Error {
    crate::Error::InvalidArgument {
        context: "sim fabric",
        detail,
    }
}

/// True when process `pid` exists (`kill(pid, 0)`; EPERM means it exists as another user).
fn alive(pid: u32) -> bool {
    if pid == 0 || pid == CLAIMING || pid > i32::MAX as u32 {
        return false;
    }
    // SAFETY: signal 0 delivers nothing; it only checks that the process exists.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

impl Segment {
    /// The default fabric name of this user.
    pub fn default_name() -> String {
        // SAFETY: getuid has no preconditions and cannot fail.
        let uid = unsafe { libc::getuid() };
        format!("rdma-direct-sim-fabric-v{LAYOUT}-{uid}")
    }

    /// Open (creating it if needed) the fabric `name` (`None`: `RDMA_DIRECT_SIM_FABRIC` or
    /// the default).
    pub fn open(name: Option<&str>) -> crate::Result<Arc<Segment>> {
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        let name = match name {
            Some(n) => n.to_string(),
            None => std::env::var(FABRIC_ENV).unwrap_or_else(|_| Self::default_name()),
        };
        if name.is_empty() || name.contains('/') || name.starts_with('.') {
            return Err(fabric_err(format!(
                "{FABRIC_ENV}={name:?} is not a file name under /dev/shm: use a plain name \
                 such as {}",
                Self::default_name()
            )));
        }
        let path = std::path::Path::new("/dev/shm").join(&name);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(|e| crate::Error::io("sim fabric: opening the segment in /dev/shm", &e))?;
        let meta = file
            .metadata()
            .map_err(|e| crate::Error::io("sim fabric: fstat of the segment", &e))?;
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if meta.uid() != me || meta.mode() & 0o077 != 0 {
            return Err(fabric_err(format!(
                "{} belongs to uid {} with mode {:o}: a fabric is per user, mode 0600; \
                 remove it or choose another name with {FABRIC_ENV}",
                path.display(),
                meta.uid(),
                meta.mode() & 0o777
            )));
        }
        if meta.len() < SEGMENT_LEN as u64 {
            // Growing only: a concurrent opener doing the same is harmless (tmpfs zero-fills).
            file.set_len(SEGMENT_LEN as u64)
                .map_err(|e| crate::Error::io("sim fabric: sizing the segment", &e))?;
        }
        let map = memmap2::MmapOptions::new()
            .len(SEGMENT_LEN)
            .map_raw(&file)
            .map_err(|e| crate::Error::io("sim fabric: mapping the segment", &e))?;
        let seg = Segment { map, path };
        let magic = seg.u64_at(0);
        match magic.compare_exchange(0, MAGIC, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {}
            Err(m) if m == MAGIC => {}
            Err(m) => {
                return Err(fabric_err(format!(
                    "{} holds another layout (magic {m:#x}): remove it or choose another \
                     name with {FABRIC_ENV}",
                    seg.path.display()
                )))
            }
        }
        // The layout's size beside the magic: a segment of another geometry is refused too.
        let len = seg.u64_at(8);
        match len.compare_exchange(0, SEGMENT_LEN as u64, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {}
            Err(l) if l == SEGMENT_LEN as u64 => {}
            Err(l) => {
                return Err(fabric_err(format!(
                    "{} was laid out for {l} bytes, this build uses {SEGMENT_LEN}: remove it \
                     or choose another name with {FABRIC_ENV}",
                    seg.path.display()
                )))
            }
        }
        Ok(Arc::new(seg))
    }

    /// The segment's file.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    #[inline]
    fn u32_at(&self, off: usize) -> &AtomicU32 {
        assert!(off % 4 == 0 && off + 4 <= SEGMENT_LEN);
        // SAFETY: `off` is in the mapping (which lives as long as `self`) and 4-aligned (the
        // mapping is page-aligned); every process touches these words only atomically.
        unsafe { &*self.map.as_mut_ptr().add(off).cast::<AtomicU32>() }
    }

    fn u64_at(&self, off: usize) -> &AtomicU64 {
        assert!(off % 8 == 0 && off + 8 <= SEGMENT_LEN);
        // SAFETY: as `u32_at`, 8-aligned.
        unsafe { &*self.map.as_mut_ptr().add(off).cast::<AtomicU64>() }
    }

    fn slot_pid(&self, s: usize) -> &AtomicU32 {
        self.u32_at(SLOTS_OFF + s * SLOT_LEN)
    }
    fn slot_epoch(&self, s: usize) -> &AtomicU32 {
        self.u32_at(SLOTS_OFF + s * SLOT_LEN + 4)
    }
    fn slot_gid(&self, s: usize) -> [u8; 16] {
        let mut g = [0u8; 16];
        for (i, c) in g.chunks_mut(4).enumerate() {
            let w = self
                .u32_at(SLOTS_OFF + s * SLOT_LEN + 8 + 4 * i)
                .load(Ordering::Acquire);
            c.copy_from_slice(&w.to_be_bytes());
        }
        g
    }

    /// The GID slot `s` holds (all zero for a slot outside the fabric).
    pub fn gid_of(&self, s: u8) -> [u8; 16] {
        if usize::from(s) >= MAX_DEVICES {
            return [0; 16];
        }
        self.slot_gid(usize::from(s))
    }

    /// The slot and generation of the live device whose GID is `gid`.
    pub fn find(&self, gid: &[u8; 16]) -> Option<(u8, u32)> {
        (0..MAX_DEVICES).find_map(|s| {
            let pid = self.slot_pid(s).load(Ordering::Acquire);
            if pid == 0 || pid == CLAIMING || self.slot_gid(s) != *gid || !alive(pid) {
                return None;
            }
            Some((s as u8, self.slot_epoch(s).load(Ordering::Acquire)))
        })
    }

    #[inline]
    fn ring(&self, to: usize, from: usize) -> usize {
        RINGS_OFF + (to * MAX_DEVICES + from) * RING_LEN
    }

    /// The tail of the ring from `from` to `to` (in `to`'s tail table).
    fn tail(&self, to: usize, from: usize) -> &AtomicU32 {
        &self.tails(to)[from % MAX_DEVICES]
    }

    /// The tail table of slot `to`: the tails of the rings into it, by sending slot.
    fn tails(&self, to: usize) -> &[AtomicU32; MAX_DEVICES] {
        let off = TAILS_OFF + (to % MAX_DEVICES) * 64;
        const _: () = assert!(TAILS_OFF % 64 == 0 && TAILS_OFF + MAX_DEVICES * 64 <= SEGMENT_LEN);
        // SAFETY: the table (64 bytes, 64-aligned) lies in the mapping, which lives as long
        // as `self`; every process touches these words only atomically.
        unsafe {
            &*self
                .map
                .as_mut_ptr()
                .add(off)
                .cast::<[AtomicU32; MAX_DEVICES]>()
        }
    }
}

/// What a member's inboxes saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FabricStats {
    /// Packets sent.
    pub sent: u64,
    /// Packets not sent: the peer's ring was full (a lost packet).
    pub ring_full: u64,
    /// Packets received and accepted by the parser.
    pub received: u64,
    /// Packets dropped: not parseable, of a stale generation, addressed to no QP of this
    /// device or to one not connected to their sender, or out of sequence.
    pub dropped: u64,
    /// Cells discarded from a ring whose indices were corrupt.
    pub corrupt_cells: u64,
    /// Packets discarded because their check word did not match (damaged on the way).
    pub bad_icrc: u64,
}

/// A device's place on the fabric: its slot and generation. Dropping it frees the slot.
pub struct Member {
    seg: Arc<Segment>,
    slot: u8,
    epoch: u32,
    /// The consumer heads of the rings this member produces into, as last read (indexed by
    /// receiving slot). The consumer writes its head on every packet it takes, so reading
    /// it costs a cache line from the other core; a sender reads it again only when the
    /// ring looks full with the cached value (the real head is never behind it).
    heads: [u32; MAX_DEVICES],
    /// The tail of each of this member's inbound rings (indexed by sending slot) when the
    /// consumer last found that ring empty: a ring whose tail in the tail table still
    /// equals it has nothing new ([`Member::pending`]).
    seen: [u32; MAX_DEVICES],
    /// The inbound rings that have brought a packet (bit `s`: from slot `s`): polled at
    /// their head cell every pass ([`Member::hot`]).
    hot: u32,
    /// Passes since the tail table was last read, and since a hot ring last brought a
    /// packet ([`Member::sweep_due`]).
    since_sweep: u32,
    quiet: u32,
    /// Counters of this member.
    pub stats: FabricStats,
}

impl std::fmt::Debug for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Member")
            .field("slot", &self.slot)
            .field("epoch", &self.epoch)
            .finish()
    }
}

impl Member {
    /// Take a free slot (or one whose process is gone) for the device whose GID is `gid`.
    pub fn join(seg: Arc<Segment>, gid: [u8; 16]) -> crate::Result<Member> {
        let me = std::process::id();
        for s in 0..MAX_DEVICES {
            let pid = seg.slot_pid(s);
            let cur = pid.load(Ordering::Acquire);
            if cur == CLAIMING || (cur != 0 && alive(cur)) {
                continue;
            }
            if pid
                .compare_exchange(cur, CLAIMING, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                continue;
            }
            for (i, c) in gid.chunks(4).enumerate() {
                seg.u32_at(SLOTS_OFF + s * SLOT_LEN + 8 + 4 * i).store(
                    u32::from_be_bytes([c[0], c[1], c[2], c[3]]),
                    Ordering::Release,
                );
            }
            let epoch = seg
                .slot_epoch(s)
                .fetch_add(1, Ordering::AcqRel)
                .wrapping_add(1);
            // What the slot's previous holder left in its inboxes is not for this device.
            let mut seen = [0; MAX_DEVICES];
            for (from, t_seen) in seen.iter_mut().enumerate() {
                let t = seg.tail(s, from).load(Ordering::Acquire);
                seg.u32_at(seg.ring(s, from)).store(t, Ordering::Release);
                *t_seen = t;
            }
            pid.store(me, Ordering::Release);
            return Ok(Member {
                seg,
                slot: s as u8,
                epoch,
                heads: [0; MAX_DEVICES],
                seen,
                hot: 0,
                since_sweep: 0,
                quiet: 0,
                stats: FabricStats::default(),
            });
        }
        Err(crate::Error::verb(
            "sim fabric join",
            libc::EBUSY,
            format!(
                "all {MAX_DEVICES} slots of {} are held by live processes: end some, or \
                 give this run its own fabric with {FABRIC_ENV}",
                seg.path.display()
            ),
        ))
    }

    /// This member's slot.
    pub fn slot(&self) -> u8 {
        self.slot
    }
    /// This member's generation.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }
    /// The segment.
    pub fn segment(&self) -> &Arc<Segment> {
        &self.seg
    }

    /// Free cells in the ring from this member to slot `to` (0 for an invalid `to`, or a
    /// ring whose indices are corrupt).
    pub fn space(&mut self, to: u8) -> u32 {
        if usize::from(to) >= MAX_DEVICES {
            return 0;
        }
        let r = self.seg.ring(usize::from(to), usize::from(self.slot));
        let t = self
            .seg
            .tail(usize::from(to), usize::from(self.slot))
            .load(Ordering::Relaxed);
        CELLS.saturating_sub(t.wrapping_sub(self.head(r, to, t)))
    }

    /// The consumer head of ring `r` (to slot `to`, tail `t`): the cached one while it
    /// leaves room, else read again.
    fn head(&mut self, r: usize, to: u8, t: u32) -> u32 {
        let cached = &mut self.heads[usize::from(to)];
        if t.wrapping_sub(*cached) >= CELLS {
            *cached = self.seg.u32_at(r).load(Ordering::Acquire);
        }
        *cached
    }

    /// Put `bytes` (one packet, at most [`PACKET_LEN`]) and its check word into the ring
    /// from this member to slot `to`. False: the ring is full (the packet is lost) or `to` /
    /// `bytes` is invalid.
    pub fn send(&mut self, to: u8, bytes: &[u8]) -> bool {
        self.send_damaged(to, bytes, None)
    }

    /// [`Member::send`], then (fault injection) flip the bits `mask` of byte `at` (modulo
    /// the packet's bytes and check word) in the cell: a packet damaged on the way.
    pub(crate) fn send_damaged(
        &mut self,
        to: u8,
        bytes: &[u8],
        damage: Option<(usize, u8)>,
    ) -> bool {
        self.put(to, None, bytes, damage)
    }

    /// [`Member::send`] of the packet made of `head` and `payload` (at most
    /// [`packet::MAX_PAYLOAD`] bytes): the header goes from the caller's array into the
    /// cell, with no packet buffer in between.
    pub fn send_header(&mut self, to: u8, head: &[u8; packet::HEADER_LEN], payload: &[u8]) -> bool {
        self.put(to, Some(head), payload, None)
    }

    /// Put `head` and `bytes` (one packet) into the ring to `to`, with its check word.
    #[inline]
    fn put(
        &mut self,
        to: u8,
        head: Option<&[u8; packet::HEADER_LEN]>,
        bytes: &[u8],
        damage: Option<(usize, u8)>,
    ) -> bool {
        let len = head.map_or(0, |h| h.len()) + bytes.len();
        if usize::from(to) >= MAX_DEVICES || len > PACKET_LEN {
            return false;
        }
        let r = self.seg.ring(usize::from(to), usize::from(self.slot));
        let t = self
            .seg
            .tail(usize::from(to), usize::from(self.slot))
            .load(Ordering::Relaxed);
        if t.wrapping_sub(self.head(r, to, t)) >= CELLS {
            self.stats.ring_full += 1;
            return false;
        }
        let cell = r + RING_CELLS_OFF + (t % CELLS) as usize * CELL_SPAN;
        let mut st = packet::Icrc::new();
        let mut hlen = 0;
        if let Some(h) = head {
            st.block(packet::block_words(&h[..32].try_into().unwrap_or([0; 32])));
            st.block(packet::block_words(&h[32..].try_into().unwrap_or([0; 32])));
            hlen = h.len();
        }
        let check = st.finish_with(bytes, len).to_be_bytes();
        // SAFETY: `cell + SEQ_LEN .. + len + ICRC_LEN` lies in the mapping (CELL_SPAN bytes
        // per cell, `len <= PACKET_LEN`); this member is the ring's only producer and the
        // consumer reads the cell only after the sequence word below publishes it. A hostile
        // process writing it concurrently can only spoil the bytes, which the consumer
        // checks.
        unsafe {
            let at = self.seg.map.as_mut_ptr().add(cell + SEQ_LEN);
            if let Some(h) = head {
                std::ptr::copy_nonoverlapping(h.as_ptr(), at, hlen);
            }
            if !bytes.is_empty() {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), at.add(hlen), bytes.len());
            }
            std::ptr::copy_nonoverlapping(check.as_ptr(), at.add(len), packet::ICRC_LEN);
            if let Some((off, mask)) = damage {
                let p = at.add(off % (len + packet::ICRC_LEN));
                p.write(p.read() ^ mask);
            }
        }
        // The cell's own word first (what a consumer polling the ring waits for), then the
        // tail (what the tail table shows).
        self.seg
            .u32_at(cell)
            .store(t.wrapping_add(1), Ordering::Release);
        self.seg
            .tail(usize::from(to), usize::from(self.slot))
            .store(t.wrapping_add(1), Ordering::Release);
        self.stats.sent += 1;
        true
    }

    /// The inbound rings whose tail moved since the consumer last found them empty (bit
    /// `s`: the ring from slot `s`): one line of the segment read, the rings themselves not
    /// touched. A ring not in it has nothing to take.
    pub fn pending(&self) -> u32 {
        let tails = self.seg.tails(usize::from(self.slot));
        let mut now = [0u32; MAX_DEVICES];
        // SAFETY: the table is 64 bytes of the mapping (`tails` checked it), copied into our
        // own array in one go (a few vector loads where 16 atomic loads cost 6 instructions
        // each). Producers store into it concurrently (aligned 4-byte atomic stores): the
        // copy is a hint only, a word seen stale or torn makes a ring visited (where its
        // tail is loaded atomically, with Acquire) or visited a pass later, nothing more.
        unsafe {
            std::ptr::copy_nonoverlapping(
                tails.as_ptr().cast::<u32>(),
                now.as_mut_ptr(),
                MAX_DEVICES,
            )
        };
        // Nothing moved (the idle pass): the whole table compared in eight 64-bit words
        // (`==` on the arrays calls memcmp, a loop over the u32s is not vectorized).
        // SAFETY: [u32; 16] and [u64; 8] have the same size and every bit pattern is a
        // valid value of either; the copies are our own.
        let (a, b): ([u64; 8], [u64; 8]) = unsafe {
            (
                std::mem::transmute::<[u32; MAX_DEVICES], [u64; 8]>(now),
                std::mem::transmute::<[u32; MAX_DEVICES], [u64; 8]>(self.seen),
            )
        };
        if a.iter().zip(&b).fold(0, |m, (x, y)| m | (x ^ y)) == 0 {
            return 0;
        }
        let mut bits = 0;
        for (from, (t, seen)) in now.iter().zip(&self.seen).enumerate() {
            bits |= u32::from(t != seen) << from;
        }
        bits
    }

    /// Whether this pass reads the tail table ([`Member::pending`]), told whether its probes
    /// of the hot rings took a packet. Yes while no ring is hot, while the hot rings are
    /// quiet (no packet for [`SWEEP_EVERY`] passes: sporadic traffic sees every ring on
    /// every pass, as before any ring was hot), and otherwise every [`SWEEP_EVERY`]th pass.
    /// While packets flow on hot rings, their head cells bring them; the tail table, which
    /// every producer stores into after every packet, is then read once in a while rather
    /// than on every pass (read on every pass, it kept taking the line from the producers:
    /// about one line transfer a packet). What only the tail table shows (a packet on a
    /// ring that is not hot, a spoiled sequence word, a corrupt ring) is so seen at most
    /// [`SWEEP_EVERY`] passes late.
    pub fn sweep_due(&mut self, took_hot: bool) -> bool {
        self.quiet = if took_hot {
            0
        } else {
            self.quiet.saturating_add(1)
        };
        self.since_sweep = self.since_sweep.saturating_add(1);
        if self.hot == 0 || self.quiet > SWEEP_EVERY || self.since_sweep >= SWEEP_EVERY {
            self.since_sweep = 0;
            return true;
        }
        false
    }

    /// The inbound rings that have brought a packet before (bit `s`: from slot `s`): a
    /// consumer polls their head cells every pass ([`Member::recv_probed`]), so a packet is
    /// seen as soon as its cell is, without waiting for the tail table's line.
    pub fn hot(&self) -> u32 {
        self.hot
    }

    /// Take the next packet from slot `from`'s ring into `out` (a copy: the segment is
    /// never parsed in place). Returns the bytes of the packet (header and the payload its
    /// length field claims, clamped to a cell; the check word follows them in `out`), or
    /// `None` when the ring is empty. Packets whose check word does not match are skipped
    /// and counted (`bad_icrc`), at most a ring's worth per call.
    ///
    /// A cell is taken when its sequence word says the producer put it at the head's
    /// index; otherwise the tail decides: equal to the head (or behind it by the cells
    /// already taken through their words: the producer stores the word before the tail)
    /// is an empty ring, up to [`CELLS`] ahead is a cell published with a spoiled word
    /// (discarded and counted as damaged), further is a corrupt ring.
    pub fn recv(&mut self, from: u8, out: &mut [u8; CELL_LEN]) -> Option<usize> {
        self.recv_probed(from, out, true)
    }

    /// [`Member::recv`]; with `tail_moved` false (the tail table showed nothing new from
    /// `from` this pass) an empty head cell ends it without reading the tail.
    #[inline]
    pub fn recv_probed(
        &mut self,
        from: u8,
        out: &mut [u8; CELL_LEN],
        tail_moved: bool,
    ) -> Option<usize> {
        let from = usize::from(from) % MAX_DEVICES;
        if !tail_moved {
            // The common idle probe, inline: the head cell's word is not there yet.
            let r = self.seg.ring(usize::from(self.slot), from);
            let h = self.seg.u32_at(r).load(Ordering::Relaxed);
            let cell = r + RING_CELLS_OFF + (h % CELLS) as usize * CELL_SPAN;
            if self.seg.u32_at(cell).load(Ordering::Acquire) != h.wrapping_add(1) {
                return None;
            }
        }
        self.take(from, out, tail_moved)
    }

    /// The body of [`Member::recv_probed`] (`from` a slot).
    fn take(&mut self, from: usize, out: &mut [u8; CELL_LEN], tail_moved: bool) -> Option<usize> {
        let r = self.seg.ring(usize::from(self.slot), from);
        let mut look_at_tail = tail_moved;
        for _ in 0..CELLS {
            let h = self.seg.u32_at(r).load(Ordering::Relaxed);
            let cell = r + RING_CELLS_OFF + (h % CELLS) as usize * CELL_SPAN;
            if self.seg.u32_at(cell).load(Ordering::Acquire) != h.wrapping_add(1) {
                if !look_at_tail {
                    return None;
                }
                let t = self
                    .seg
                    .tail(usize::from(self.slot), from)
                    .load(Ordering::Acquire);
                let ahead = t.wrapping_sub(h);
                if ahead == 0 || h.wrapping_sub(t) <= CELLS {
                    self.seen[from] = t;
                    return None;
                }
                if ahead > CELLS {
                    // A producer (or anyone) wrote indices no ring can have: drop what is
                    // there.
                    self.stats.corrupt_cells += u64::from(ahead.min(1 << 20));
                    self.seg.u32_at(r).store(t, Ordering::Release);
                    self.seen[from] = t;
                    return None;
                }
                // The word again: the producer may have stored it and the tail between the
                // two loads above (it stores the word first, so after this tail it is seen).
                if self.seg.u32_at(cell).load(Ordering::Acquire) == h.wrapping_add(1) {
                    continue;
                }
                self.seg
                    .u32_at(r)
                    .store(h.wrapping_add(1), Ordering::Release);
                self.stats.bad_icrc += 1;
                continue;
            }
            self.hot |= 1 << from;
            look_at_tail = true;
            // The tail the producer stores after this word: the tail table need not send
            // the next pass here for it (a tail seen lagging behind it sends it once).
            self.seen[from] = h.wrapping_add(1);
            let src = self.seg.map.as_mut_ptr().wrapping_add(cell + SEQ_LEN);
            // SAFETY: `src` is the packet bytes of a cell of this member's ring.
            let (n, check) = unsafe { copy_out(src, out) };
            self.seg
                .u32_at(r)
                .store(h.wrapping_add(1), Ordering::Release);
            if out[n..]
                .first_chunk::<{ packet::ICRC_LEN }>()
                .map(|c| u64::from_be_bytes(*c))
                == Some(check)
            {
                return Some(n);
            }
            self.stats.bad_icrc += 1;
        }
        None
    }

    /// Overwrite the indices of the ring from this member to slot `to` (tests: a producer
    /// scribbling over its ring).
    #[doc(hidden)]
    pub fn corrupt_ring_to(&self, to: u8, head: u32, tail: u32) {
        let to = usize::from(to) % MAX_DEVICES;
        let r = self.seg.ring(to, usize::from(self.slot));
        self.seg.u32_at(r).store(head, Ordering::Release);
        self.seg
            .tail(to, usize::from(self.slot))
            .store(tail, Ordering::Release);
    }
}

/// Copy the packet in the cell whose packet bytes start at `src` into `out`: the header,
/// then the payload its (copied) length field claims, clamped to [`packet::MAX_PAYLOAD`],
/// then the check word, in whole words. Returns the packet's length and the check word of
/// the bytes copied, computed from the very words stored into `out` (so it is the check
/// word of `out`, whatever a concurrent writer does to the cell).
///
/// # Safety
/// `src` must point at a cell's packet bytes in the mapping (SEQ_LEN bytes into a cell), so
/// that the CELL_LEN bytes from it are readable.
unsafe fn copy_out(src: *const u8, out: &mut [u8; CELL_LEN]) -> (usize, u64) {
    const _: () = assert!(packet::HEADER_LEN == 64 && CELL_LEN % 8 == 0);
    const _: () = assert!(SEQ_LEN + CELL_LEN <= CELL_SPAN && packet::MAX_PAYLOAD % 8 == 0);
    const _: () = assert!(SEQ_LEN % 8 == 0 && CELL_SPAN % 64 == 0 && RING_CELLS_OFF % 64 == 0);
    let src = src.cast::<u64>();
    let dst = out.as_mut_ptr();
    let mut st = packet::Icrc::new();
    // Word `i` of the packet (8 bytes), copied into `out`; its value as loaded.
    // SAFETY (of every use): `8 * (i + 1) <= CELL_LEN`, so the load stays in the cell
    // (CELL_SPAN bytes from a cell's start hold SEQ_LEN + CELL_LEN) and is 8-aligned (a
    // cell starts on a cache line), the store in `out` (unaligned-tolerant). The cell is
    // shared memory a hostile writer may change under us: each word is loaded once
    // (volatile), and that value goes both into `out` and into the check word.
    let word = |i: usize| {
        // SAFETY: see above.
        let raw = unsafe { src.add(i).read_volatile() };
        // SAFETY: see above.
        unsafe { dst.add(8 * i).cast::<u64>().write_unaligned(raw) };
        u64::from_le(raw)
    };
    let block = |st: &mut packet::Icrc, i: usize| {
        st.block([word(i), word(i + 1), word(i + 2), word(i + 3)]);
    };
    block(&mut st, 0);
    block(&mut st, 4);
    let claimed = out
        .first_chunk::<{ packet::HEADER_LEN }>()
        .map_or(0, packet::claimed_len);
    let n = packet::HEADER_LEN + claimed.min(packet::MAX_PAYLOAD);
    let blocks_end = n / 32 * 4;
    let mut i = packet::HEADER_LEN / 8;
    while i < blocks_end {
        block(&mut st, i);
        i += 4;
    }
    // The rest (under 32 bytes) and the check word after it, in whole words:
    // `8 * (i + words) <= (n + ICRC_LEN).next_multiple_of(8) <= CELL_LEN`.
    let rest = n % 32;
    let mut tail = [0u64; 4];
    for k in 0..(rest + packet::ICRC_LEN).div_ceil(8) {
        let w = word(i + k);
        let left = rest.saturating_sub(8 * k);
        if let Some(t) = tail.get_mut(k) {
            *t = if left >= 8 {
                w
            } else {
                w & ((1u64 << (8 * left)) - 1)
            };
        }
    }
    (n, st.finish(&tail, rest, n))
}

impl Drop for Member {
    fn drop(&mut self) {
        let _ = self.seg.slot_pid(usize::from(self.slot)).compare_exchange(
            std::process::id(),
            0,
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
    }
}

#[cfg(test)]
mod tests;
