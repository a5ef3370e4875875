//! Reading a clock-info page another thread updates: [`ClockInfoSource`] is anything that
//! holds one, [`ClockInfoReader`] takes a consistent snapshot with the kernel's seqlock rule
//! and a bounded number of tries, [`SharedClockInfo`] is a page in memory with the kernel's
//! layout and update rule (the sim publishes through it), and [`ClockInfoBytes`] a read-only
//! view of a page's bytes.

use std::ops::Deref;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

use super::{page, ClockInfo, ClockInfoError, CLOCK_INFO_KERNEL_UPDATING, CLOCK_INFO_READ_TRIES};

/// Something that holds a clock-info page: the sign word and the six fields, read without a
/// lock while a writer may be changing them. [`ClockInfoReader`] makes a consistent snapshot.
pub trait ClockInfoSource {
    /// Loads the sign word with `order` (the reader asks for `Acquire` first, then `Relaxed`
    /// after an acquire fence). A source over the kernel's read-only mapping may serve
    /// `Acquire` as a relaxed load followed by `fence(Acquire)`: Rust promises only relaxed,
    /// register-sized atomic loads to work on read-only memory.
    fn load_sign(&self, order: Ordering) -> u32;
    /// Loads the six fields with relaxed (or volatile) loads; the result may be torn, the
    /// reader's sign check rejects it then.
    fn load_fields(&self) -> ClockInfo;
}

impl<T: ClockInfoSource + ?Sized> ClockInfoSource for &T {
    fn load_sign(&self, order: Ordering) -> u32 {
        (**self).load_sign(order)
    }
    fn load_fields(&self) -> ClockInfo {
        (**self).load_fields()
    }
}

impl<T: ClockInfoSource + ?Sized> ClockInfoSource for std::sync::Arc<T> {
    fn load_sign(&self, order: Ordering) -> u32 {
        self.deref().load_sign(order)
    }
    fn load_fields(&self) -> ClockInfo {
        self.deref().load_fields()
    }
}

/// Reads a consistent [`ClockInfo`] from a page another thread (the kernel, the sim) updates.
///
/// One read: load `sign` (acquire); if the update bit is set, try again; load the fields; an
/// acquire fence; load `sign` again; if it changed, try again. After `tries` failed reads it
/// returns [`ClockInfoError::Busy`]. rdma-core's `mlx5dv_get_clock_info` does the same but
/// counts only reads that saw the update bit (10) and retries a changed sign without limit;
/// the kernel updates every few minutes, so a bound on both changes nothing in practice and
/// keeps a dead writer from hanging the reader.
#[derive(Clone, Debug)]
pub struct ClockInfoReader<S> {
    source: S,
    tries: u32,
}

impl<S: ClockInfoSource> ClockInfoReader<S> {
    /// A reader that tries [`CLOCK_INFO_READ_TRIES`] times.
    pub fn new(source: S) -> Self {
        Self::with_tries(source, CLOCK_INFO_READ_TRIES)
    }

    /// A reader that tries `tries` times (at least once).
    pub fn with_tries(source: S, tries: u32) -> Self {
        ClockInfoReader {
            source,
            tries: tries.max(1),
        }
    }

    /// The page this reader reads.
    pub fn source(&self) -> &S {
        &self.source
    }

    /// A consistent snapshot with the sign it was read under (even).
    pub fn read_with_sign(&self) -> Result<(ClockInfo, u32), ClockInfoError> {
        for _ in 0..self.tries {
            let before = self.source.load_sign(Ordering::Acquire);
            if before & CLOCK_INFO_KERNEL_UPDATING != 0 {
                std::hint::spin_loop();
                continue;
            }
            let info = self.source.load_fields();
            // Orders the field loads before the second sign load: if any field load saw a
            // store of a later update, the sign load below sees that update's sign or a later
            // one (the writer's release fence pairs with this).
            fence(Ordering::Acquire);
            let after = self.source.load_sign(Ordering::Relaxed);
            if before == after {
                return Ok((info, before));
            }
            std::hint::spin_loop();
        }
        Err(ClockInfoError::Busy { tries: self.tries })
    }

    /// A consistent snapshot.
    pub fn read(&self) -> Result<ClockInfo, ClockInfoError> {
        self.read_with_sign().map(|(info, _)| info)
    }

    /// Whether the page changed since a snapshot read under `sign` (one relaxed load; a
    /// cheap test before paying for a full read).
    pub fn changed_since(&self, sign: u32) -> bool {
        self.source.load_sign(Ordering::Relaxed) != sign
    }
}

/// A clock-info page in memory with the kernel's layout (`struct mlx5_ib_clock_info`, 56
/// bytes, native byte order), made of atomics so that one writer and any number of readers
/// may share it; the sim's device clock publishes through it. [`update`](Self::update) is the
/// kernel's update rule.
#[repr(C)]
#[derive(Debug)]
pub struct SharedClockInfo {
    sign: AtomicU32,
    resv: AtomicU32,
    nsec: AtomicU64,
    cycles: AtomicU64,
    frac: AtomicU64,
    mult: AtomicU32,
    shift: AtomicU32,
    mask: AtomicU64,
    overflow_period: AtomicU64,
}

static_assertions::const_assert_eq!(std::mem::size_of::<SharedClockInfo>(), page::LEN);
static_assertions::const_assert_eq!(std::mem::offset_of!(SharedClockInfo, sign), page::SIGN);
static_assertions::const_assert_eq!(std::mem::offset_of!(SharedClockInfo, resv), page::RESV);
static_assertions::const_assert_eq!(std::mem::offset_of!(SharedClockInfo, nsec), page::NSEC);
static_assertions::const_assert_eq!(std::mem::offset_of!(SharedClockInfo, cycles), page::CYCLES);
static_assertions::const_assert_eq!(std::mem::offset_of!(SharedClockInfo, frac), page::FRAC);
static_assertions::const_assert_eq!(std::mem::offset_of!(SharedClockInfo, mult), page::MULT);
static_assertions::const_assert_eq!(std::mem::offset_of!(SharedClockInfo, shift), page::SHIFT);
static_assertions::const_assert_eq!(std::mem::offset_of!(SharedClockInfo, mask), page::MASK);
static_assertions::const_assert_eq!(
    std::mem::offset_of!(SharedClockInfo, overflow_period),
    page::OVERFLOW_PERIOD
);

impl SharedClockInfo {
    /// A page holding `info` and `overflow_period`, sign 0 (what the kernel's
    /// `mlx5_init_clock_info` writes into its zeroed page).
    pub fn new(info: ClockInfo, overflow_period: u64) -> Self {
        SharedClockInfo {
            sign: AtomicU32::new(0),
            resv: AtomicU32::new(0),
            nsec: AtomicU64::new(info.nsec),
            cycles: AtomicU64::new(info.last_cycles),
            frac: AtomicU64::new(info.frac),
            mult: AtomicU32::new(info.mult),
            shift: AtomicU32::new(info.shift),
            mask: AtomicU64::new(info.mask),
            overflow_period: AtomicU64::new(overflow_period),
        }
    }

    /// Publishes `info`'s `last_cycles`, `mult`, `nsec` and `frac` with the kernel's rule
    /// (`mlx5_update_clock_info_page`): set the update bit in `sign`, store the four fields,
    /// then store the old sign + 2. `shift` and `mask` are fixed when the page is made, as in
    /// the kernel, and are not written. Concurrent calls are serialised on the update bit.
    pub fn update(&self, info: &ClockInfo) {
        let mut sign = self.sign.load(Ordering::Relaxed);
        loop {
            if sign & CLOCK_INFO_KERNEL_UPDATING != 0 {
                std::hint::spin_loop();
                sign = self.sign.load(Ordering::Relaxed);
                continue;
            }
            match self.sign.compare_exchange_weak(
                sign,
                sign | CLOCK_INFO_KERNEL_UPDATING,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(now) => sign = now,
            }
        }
        // Orders the odd sign before the field stores: a reader whose field load sees one of
        // them sees the odd (or a later) sign after its acquire fence.
        fence(Ordering::Release);
        self.cycles.store(info.last_cycles, Ordering::Relaxed);
        self.mult.store(info.mult, Ordering::Relaxed);
        self.nsec.store(info.nsec, Ordering::Relaxed);
        self.frac.store(info.frac, Ordering::Relaxed);
        self.sign.store(
            sign.wrapping_add(2 * CLOCK_INFO_KERNEL_UPDATING),
            Ordering::Release,
        );
    }

    /// The page's `overflow_period` (the kernel's refresh period in jiffies).
    pub fn overflow_period(&self) -> u64 {
        self.overflow_period.load(Ordering::Relaxed)
    }
}

impl ClockInfoSource for SharedClockInfo {
    fn load_sign(&self, order: Ordering) -> u32 {
        self.sign.load(order)
    }
    fn load_fields(&self) -> ClockInfo {
        ClockInfo {
            nsec: self.nsec.load(Ordering::Relaxed),
            last_cycles: self.cycles.load(Ordering::Relaxed),
            frac: self.frac.load(Ordering::Relaxed),
            mult: self.mult.load(Ordering::Relaxed),
            shift: self.shift.load(Ordering::Relaxed),
            mask: self.mask.load(Ordering::Relaxed),
        }
    }
}

/// A view of a clock-info page's bytes (native byte order), e.g. a copy read from the device
/// or built by a test. As a [`ClockInfoSource`] it never changes, so every read succeeds
/// unless the copy caught the update bit.
#[derive(Clone, Copy, Debug)]
pub struct ClockInfoBytes<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ClockInfoBytes<T> {
    /// Wraps `buffer` after checking it holds the page's 56 bytes.
    pub fn new_checked(buffer: T) -> Result<Self, ClockInfoError> {
        let len = buffer.as_ref().len();
        if len < page::LEN {
            return Err(ClockInfoError::Truncated(len));
        }
        Ok(ClockInfoBytes { buffer })
    }

    fn u32_at(&self, off: usize) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_ne_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
    }

    fn u64_at(&self, off: usize) -> u64 {
        let b = self.buffer.as_ref();
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[off..off + 8]);
        u64::from_ne_bytes(w)
    }

    /// `sign`.
    pub fn sign(&self) -> u32 {
        self.u32_at(page::SIGN)
    }

    /// `overflow_period` (jiffies).
    pub fn overflow_period(&self) -> u64 {
        self.u64_at(page::OVERFLOW_PERIOD)
    }

    /// The six fields.
    pub fn info(&self) -> ClockInfo {
        ClockInfo {
            nsec: self.u64_at(page::NSEC),
            last_cycles: self.u64_at(page::CYCLES),
            frac: self.u64_at(page::FRAC),
            mult: self.u32_at(page::MULT),
            shift: self.u32_at(page::SHIFT),
            mask: self.u64_at(page::MASK),
        }
    }
}

impl<T: AsRef<[u8]>> ClockInfoSource for ClockInfoBytes<T> {
    fn load_sign(&self, _order: Ordering) -> u32 {
        self.sign()
    }
    fn load_fields(&self) -> ClockInfo {
        self.info()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::clock_156;
    use super::*;
    use std::cell::Cell;

    /// A page whose sign follows a script (one entry per load), to drive the reader.
    struct Scripted {
        signs: Vec<u32>,
        at: Cell<usize>,
        info: ClockInfo,
    }

    impl ClockInfoSource for Scripted {
        fn load_sign(&self, _order: Ordering) -> u32 {
            let i = self.at.get();
            self.at.set(i + 1);
            self.signs.get(i).copied().unwrap_or(u32::MAX)
        }
        fn load_fields(&self) -> ClockInfo {
            self.info
        }
    }

    #[test]
    fn reader_retries_while_updating_or_changed_and_gives_up() {
        let info = clock_156();
        let page = |signs: Vec<u32>| Scripted {
            signs,
            at: Cell::new(0),
            info,
        };
        // Stable: two loads.
        let r = ClockInfoReader::new(page(vec![4, 4]));
        assert_eq!(r.read_with_sign(), Ok((info, 4)));
        // Update bit set twice, then a change under the read, then stable.
        let r = ClockInfoReader::new(page(vec![5, 5, 6, 8, 8, 8]));
        assert_eq!(r.read_with_sign(), Ok((info, 8)));
        assert_eq!(r.source().at.get(), 6);
        // Always updating: Busy after exactly `tries` loads.
        let r = ClockInfoReader::with_tries(page(vec![1; 3]), 3);
        assert_eq!(r.read(), Err(ClockInfoError::Busy { tries: 3 }));
        // Zero tries means one.
        let r = ClockInfoReader::with_tries(page(vec![2, 2]), 0);
        assert_eq!(r.read(), Ok(info));
    }

    #[test]
    fn shared_page_follows_the_kernel_update_rule() {
        let c = clock_156();
        let p = SharedClockInfo::new(c, 12_345);
        let r = ClockInfoReader::new(&p);
        assert_eq!(r.read_with_sign(), Ok((c, 0)));
        let n = c.advanced_to(c.last_cycles + 1_000_000);
        p.update(&n);
        assert_eq!(r.read_with_sign(), Ok((n, 2)));
        assert!(r.changed_since(0));
        assert!(!r.changed_since(2));
        // shift and mask are fixed at creation.
        p.update(&ClockInfo {
            shift: 1,
            mask: 1,
            ..n
        });
        assert_eq!(r.read(), Ok(n));
        assert_eq!(p.overflow_period(), 12_345);
    }

    #[test]
    fn byte_view_reads_native_order_and_refuses_short_buffers() {
        let c = clock_156();
        let mut b = [0u8; page::LEN];
        b[page::SIGN..page::SIGN + 4].copy_from_slice(&6u32.to_ne_bytes());
        b[page::NSEC..page::NSEC + 8].copy_from_slice(&c.nsec.to_ne_bytes());
        b[page::CYCLES..page::CYCLES + 8].copy_from_slice(&c.last_cycles.to_ne_bytes());
        b[page::FRAC..page::FRAC + 8].copy_from_slice(&c.frac.to_ne_bytes());
        b[page::MULT..page::MULT + 4].copy_from_slice(&c.mult.to_ne_bytes());
        b[page::SHIFT..page::SHIFT + 4].copy_from_slice(&c.shift.to_ne_bytes());
        b[page::MASK..page::MASK + 8].copy_from_slice(&c.mask.to_ne_bytes());
        b[page::OVERFLOW_PERIOD..].copy_from_slice(&99u64.to_ne_bytes());
        let v = ClockInfoBytes::new_checked(&b[..]).unwrap();
        assert_eq!(v.overflow_period(), 99);
        assert_eq!(ClockInfoReader::new(v).read_with_sign(), Ok((c, 6)));
        assert_eq!(
            ClockInfoBytes::new_checked(&b[..55]).err(),
            Some(ClockInfoError::Truncated(55))
        );
    }

    #[test]
    fn concurrent_reader_never_sees_a_torn_page() {
        // The writer keeps nsec == 3 * last_cycles and frac == last_cycles; a torn read
        // would break one of the two equalities.
        let base = ClockInfo {
            nsec: 0,
            last_cycles: 0,
            frac: 0,
            mult: 1,
            shift: 0,
            mask: u64::MAX,
        };
        let p = std::sync::Arc::new(SharedClockInfo::new(base, 0));
        let writer = {
            let p = p.clone();
            std::thread::spawn(move || {
                for i in 1..=20_000u64 {
                    p.update(&ClockInfo {
                        nsec: 3 * i,
                        last_cycles: i,
                        frac: i,
                        ..base
                    });
                }
            })
        };
        let r = ClockInfoReader::with_tries(p.clone(), 1_000_000);
        let mut last = 0;
        while last < 20_000 {
            let info = r.read().unwrap();
            assert_eq!(info.nsec, 3 * info.last_cycles);
            assert_eq!(info.frac, info.last_cycles);
            assert!(info.last_cycles >= last);
            last = info.last_cycles;
        }
        writer.join().unwrap();
    }
}
