//! Receive queues: the QP's own RQ and the shared receive queue (SRQ).
//!
//! ## RQ
//!
//! `head` (free-running, written by the poster) counts receives posted; slot
//! `head & (wqe_cnt - 1)` holds data segments (zero-length SGEs skipped) and, when fewer than
//! `rq_stride / 16`, a terminator (`byte_count 0, lkey 0x100` = MLX5_INVALID_LKEY). `ring()`:
//! store barrier, `dbrec[0] = be32(head & 0xffff)`. The device consumes in order; the poller
//! advances `tail`. Free slots = `wqe_cnt - (head - tail)`.
//!
//! ## SRQ
//!
//! Each entry is a 16-byte "next" segment (`next_wqe_index` big-endian at byte 2) and data
//! segments. Free entries form a list from `head` (next to fill) to `tail` (last free; never
//! filled, so the device always has a next pointer to follow). Posting fills `head` and moves
//! to its next; completions (from any CQ, any thread) set a bit in a free bitmap; when the
//! list runs dry the poster links the freed entries after `tail`. `ring()`: store barrier,
//! `dbrec[0] = be32(counter)` (receives posted, 16 bits).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::dv::DvSrq;
use super::owners::Owners;
use super::shared::{CqShared, QpShared, SrqShared};
use super::Mlx5Device;
use crate::barrier::to_device_store_barrier;
use crate::mmio;
use crate::wire::offset::{data, srq_next};
use crate::wire::{MLX5_INVALID_LKEY, MLX5_RCV_DBR, MLX5_WQE_DS_UNITS as U, MLX5_WQE_INDEX_MASK};
use crate::{PostError, QpState, QpType, RecvQueue, RecvWr, Rejected, Sge};

/// Write data segments for `sges` at `p` (room for `max` segments), with the terminator.
///
/// # Safety
/// `p` is valid for `max * 16` bytes of writes the device is not reading.
#[inline(always)]
unsafe fn write_recv_segs(p: *mut u8, sges: &[Sge], max: usize) {
    let mut k = 0usize;
    for s in sges.iter().filter(|s| s.length != 0) {
        // SAFETY: `k < max` (checked by the caller: non-zero SGEs <= max).
        unsafe {
            let d = p.add(k * U);
            core::ptr::write_unaligned(d.add(data::BYTE_COUNT) as *mut u32, s.length.to_be());
            core::ptr::write_unaligned(d.add(data::LKEY) as *mut u32, s.lkey.to_be());
            core::ptr::write_unaligned(d.add(data::ADDR) as *mut u64, s.addr.to_be());
        }
        k += 1;
    }
    if k < max {
        // SAFETY: `k < max`.
        unsafe {
            let d = p.add(k * U);
            core::ptr::write_unaligned(d.add(data::BYTE_COUNT) as *mut u32, 0);
            core::ptr::write_unaligned(d.add(data::LKEY) as *mut u32, MLX5_INVALID_LKEY.to_be());
            core::ptr::write_unaligned(d.add(data::ADDR) as *mut u64, 0);
        }
    }
}

/// The receive queue of an [`super::Mlx5Qp`].
pub struct Mlx5Rq {
    buf: *mut u8,
    wqe_cnt: u32,
    /// Receives allowed outstanding: the granted `max_recv_wr`, at most `wqe_cnt`.
    max_wr: u32,
    stride: u32,
    max_sge: u32,
    qp_type: QpType,
    pub(crate) state: QpState,
    /// True when the QP receives through an SRQ: posting here is refused.
    has_srq: bool,
    head: u32,
    cached_tail: u32,
    staged: u32,
    dbrec: *mut u32,
    shared: Arc<QpShared>,
    cq: Arc<CqShared>,
}

// SAFETY: the pointers point into this QP's RQ ring and dbrec, kept alive by the QP's owner;
// only this queue (one producer) writes through them.
unsafe impl Send for Mlx5Rq {}

impl std::fmt::Debug for Mlx5Rq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mlx5Rq")
            .field("wqe_cnt", &self.wqe_cnt)
            .field("head", &self.head)
            .finish_non_exhaustive()
    }
}

impl Mlx5Rq {
    pub(crate) fn new(
        dv: &super::dv::DvQp,
        qp_type: QpType,
        max_wr: u32,
        max_sge: u32,
        has_srq: bool,
        shared: Arc<QpShared>,
        cq: Arc<CqShared>,
    ) -> Mlx5Rq {
        Mlx5Rq {
            buf: dv.rq_buf,
            wqe_cnt: dv.rq_wqe_cnt,
            max_wr: max_wr.min(dv.rq_wqe_cnt),
            stride: dv.rq_stride,
            max_sge: max_sge.min(dv.rq_stride / U as u32),
            qp_type,
            state: QpState::Reset,
            has_srq,
            head: 0,
            cached_tail: 0,
            staged: 0,
            dbrec: dv.dbrec,
            shared,
            cq,
        }
    }

    pub(crate) fn reset(&mut self) {
        self.head = 0;
        self.cached_tail = 0;
        self.staged = 0;
        if let Some(rq) = &self.shared.rq {
            rq.tail.store(0, Ordering::Relaxed);
            rq.head.store(0, Ordering::Release);
        }
    }

    /// Receives posted and not yet completed.
    pub(crate) fn outstanding(&self) -> u32 {
        match &self.shared.rq {
            Some(rq) => self.head.wrapping_sub(rq.tail.load(Ordering::Acquire)),
            None => 0,
        }
    }
}

impl RecvQueue for Mlx5Rq {
    #[inline]
    fn post_recv<'a>(&mut self, wr: RecvWr<'a>) -> Result<(), Rejected<RecvWr<'a>>> {
        let reject = |error| Err(Rejected { wr, error });
        if self.has_srq {
            return reject(PostError::OpNotSupported {
                op: "post_recv on a QP that receives through an SRQ",
                qp_type: self.qp_type,
            });
        }
        if !matches!(self.state, QpState::Init | QpState::Rtr | QpState::Rts) {
            return reject(PostError::BadState { state: self.state });
        }
        // The poller returned an error completion for the QP: the device moved it to ERR.
        if self.shared.failed.load(Ordering::Relaxed) {
            return reject(self.shared.failed_error());
        }
        // Every SGE counts against max_recv_sge, empty or not, as on the send queue (rdma-core
        // and rxe refuse num_sge > max on both); only the non-empty ones are written.
        let n = wr.sges.len() as u32;
        if n > self.max_sge {
            return reject(PostError::TooManySges {
                n: wr.sges.len() as u32,
                max: self.max_sge,
            });
        }
        let Some(rq) = &self.shared.rq else {
            return reject(PostError::QueueFull { capacity: 0 });
        };
        if self.head.wrapping_sub(self.cached_tail) >= self.max_wr {
            self.cached_tail = rq.tail.load(Ordering::Acquire);
            if self.head.wrapping_sub(self.cached_tail) >= self.max_wr {
                return reject(PostError::QueueFull {
                    capacity: self.max_wr,
                });
            }
        }
        if !self.cq.try_reserve(1) {
            return reject(PostError::CqFull {
                cqe: self.cq.dv.cqe_cnt,
            });
        }
        let slot = self.head & (self.wqe_cnt - 1);
        let p = self.buf.wrapping_add(slot as usize * self.stride as usize);
        // SAFETY: the slot is inside the RQ ring and free (head - tail < wqe_cnt), so the
        // device is not reading it; `max_sge <= stride / 16`.
        unsafe { write_recv_segs(p, wr.sges, self.stride as usize / U) };
        rq.wrid[slot as usize].store(wr.wr_id, Ordering::Relaxed);
        self.head = self.head.wrapping_add(1);
        self.staged += 1;
        Ok(())
    }

    #[inline]
    fn ring(&mut self) {
        if self.staged == 0 {
            return;
        }
        if let Some(rq) = &self.shared.rq {
            rq.head.store(self.head, Ordering::Release);
        }
        // Orders the receive WQE stores before the dbrec store that hands them to the device.
        to_device_store_barrier();
        // SAFETY: `dbrec[0]` is the QP's receive counter.
        unsafe {
            mmio::write32(
                self.dbrec.add(MLX5_RCV_DBR),
                (self.head & MLX5_WQE_INDEX_MASK).to_be(),
            )
        };
        self.staged = 0;
    }

    fn free_slots(&self) -> u32 {
        match &self.shared.rq {
            Some(rq) if !self.has_srq => self
                .max_wr
                .saturating_sub(self.head.wrapping_sub(rq.tail.load(Ordering::Acquire))),
            _ => 0,
        }
    }
}

/// A shared receive queue.
pub struct Mlx5Srq<D: Owners = Mlx5Device> {
    dv: DvSrq,
    max_sge: u32,
    /// Next entry to fill; last free entry (never filled).
    head: u32,
    tail: u32,
    /// Free entries in the list from `head` to `tail`, `tail` excluded.
    free: u32,
    /// Receives posted (16 significant bits go to dbrec).
    counter: u32,
    staged: u32,
    pub(crate) shared: Arc<SrqShared>,
    /// Keeps the SRQ memory alive; every QP attached to this SRQ holds it too.
    pub(crate) owner: Arc<D::Srq>,
}

// SAFETY: the pointers in `dv` point into SRQ memory the owner keeps alive; only this queue
// writes WQEs and the dbrec.
unsafe impl<D: Owners> Send for Mlx5Srq<D> {}

impl<D: Owners> std::fmt::Debug for Mlx5Srq<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mlx5Srq")
            .field("srqn", &self.dv.srqn)
            .field("wqe_cnt", &self.dv.wqe_cnt)
            .field("free", &self.free)
            .finish_non_exhaustive()
    }
}

impl<D: Owners> Mlx5Srq<D> {
    /// Wrap an SRQ's memory. Links every entry into the free list `0 -> 1 -> ... -> n-1`
    /// starting from `dv.head`... as the device expects from a fresh SRQ: the list given by
    /// `dv.head` / `dv.tail` is taken as is when `dv.head != dv.tail`.
    ///
    /// # Safety
    /// `dv` memory stays valid and is used as an mlx5 SRQ (by this object and the device)
    /// until drop; `owner` keeps it alive; the entries' next pointers form a list from
    /// `dv.head` to `dv.tail` covering every entry (as `mlx5dv_init_obj` hands it out).
    pub unsafe fn from_dv(dv: DvSrq, max_sge: u32, owner: D::Srq) -> crate::Result<Mlx5Srq<D>> {
        let bad = |detail: String| crate::Error::InvalidArgument {
            context: "Mlx5Srq::from_dv",
            detail,
        };
        if dv.buf.is_null() || dv.dbrec.is_null() {
            return Err(bad("null SRQ buffer or doorbell record".into()));
        }
        if dv.wqe_cnt < 2 || dv.wqe_cnt > 0x1_0000 {
            return Err(bad(format!(
                "wqe_cnt {} out of range 2..=65536",
                dv.wqe_cnt
            )));
        }
        if dv.stride < 32 || dv.stride % 16 != 0 {
            return Err(bad(format!(
                "stride {} is not a multiple of 16 >= 32",
                dv.stride
            )));
        }
        if dv.head >= dv.wqe_cnt || dv.tail >= dv.wqe_cnt {
            return Err(bad(format!(
                "head {} / tail {} out of range",
                dv.head, dv.tail
            )));
        }
        let seg_room = (dv.stride - U as u32) / U as u32;
        if max_sge > seg_room {
            return Err(bad(format!(
                "max_sge {max_sge} does not fit the stride {} ({seg_room} data segments)",
                dv.stride
            )));
        }
        // Walk the list to count the free entries (and reject a broken one).
        let mut free = 0u32;
        let mut i = dv.head;
        while i != dv.tail {
            free += 1;
            if free >= dv.wqe_cnt {
                return Err(bad("SRQ free list does not end at tail".into()));
            }
            i = Self::next_of(&dv, i);
            if i >= dv.wqe_cnt {
                return Err(bad(format!("SRQ free list points outside the ring ({i})")));
            }
        }
        Ok(Mlx5Srq {
            shared: Arc::new(SrqShared::new(dv.wqe_cnt, dv.buf, dv.stride)),
            owner: Arc::new(owner),
            dv,
            max_sge,
            head: dv.head,
            tail: dv.tail,
            free,
            counter: 0,
            staged: 0,
        })
    }

    fn next_of(dv: &DvSrq, i: u32) -> u32 {
        let p = dv
            .buf
            .wrapping_add(i as usize * dv.stride as usize + srq_next::NEXT_WQE_INDEX)
            as *const u16;
        // SAFETY: entry `i < wqe_cnt` is inside the ring; bytes 2..4 are next_wqe_index,
        // 2-aligned because the stride is a multiple of 16.
        u16::from_be(unsafe { mmio::read16(p) }) as u32
    }

    fn set_next(dv: &DvSrq, i: u32, next: u32) {
        let p = dv
            .buf
            .wrapping_add(i as usize * dv.stride as usize + srq_next::NEXT_WQE_INDEX)
            as *mut u16;
        // SAFETY: as in `next_of`; entry `i` is free (the list tail), not read by the device
        // until it is posted.
        unsafe { core::ptr::write_volatile(p, (next as u16).to_be()) };
    }

    /// What keeps the SRQ memory alive (on hardware the verbs SRQ).
    pub fn owner(&self) -> &D::Srq {
        &self.owner
    }

    /// SRQ number.
    pub fn srqn(&self) -> u32 {
        self.dv.srqn
    }

    /// Link entries completed since the last call after `tail`.
    fn reclaim(&mut self) {
        for (w, word) in self.shared.freed.iter().enumerate() {
            let mut bits = word.swap(0, Ordering::Acquire);
            while bits != 0 {
                let b = bits.trailing_zeros();
                bits &= bits - 1;
                let idx = w as u32 * 64 + b;
                Self::set_next(&self.dv, self.tail, idx);
                self.tail = idx;
                self.free += 1;
            }
        }
    }
}

impl<D: Owners> RecvQueue for Mlx5Srq<D> {
    #[inline]
    fn post_recv<'a>(&mut self, wr: RecvWr<'a>) -> Result<(), Rejected<RecvWr<'a>>> {
        let n = wr.sges.len() as u32; // every SGE counts, as on the receive queue
        if n > self.max_sge {
            return Err(Rejected {
                wr,
                error: PostError::TooManySges {
                    n: wr.sges.len() as u32,
                    max: self.max_sge,
                },
            });
        }
        if self.free == 0 {
            self.reclaim();
            if self.free == 0 {
                return Err(Rejected {
                    wr,
                    error: PostError::QueueFull {
                        capacity: self.dv.wqe_cnt - 1,
                    },
                });
            }
        }
        let idx = self.head;
        let p = self
            .dv
            .buf
            .wrapping_add(idx as usize * self.dv.stride as usize + U);
        // SAFETY: entry `idx` is free (in the list before tail); its data segments follow the
        // 16-byte next segment, `(stride - 16) / 16` of them.
        unsafe { write_recv_segs(p, wr.sges, (self.dv.stride as usize - U) / U) };
        self.shared.wrid[idx as usize].store(wr.wr_id, Ordering::Relaxed);
        self.head = Self::next_of(&self.dv, idx);
        self.free -= 1;
        self.counter = self.counter.wrapping_add(1);
        self.staged += 1;
        Ok(())
    }

    #[inline]
    fn ring(&mut self) {
        if self.staged == 0 {
            return;
        }
        // Orders the WQE (and next-pointer) stores before the dbrec store.
        to_device_store_barrier();
        // SAFETY: `dbrec[0]` is the SRQ's receive counter.
        unsafe { mmio::write32(self.dv.dbrec, (self.counter & MLX5_WQE_INDEX_MASK).to_be()) };
        self.staged = 0;
    }

    fn free_slots(&self) -> u32 {
        let pending: u32 = self
            .shared
            .freed
            .iter()
            .map(|w| w.load(Ordering::Relaxed).count_ones())
            .sum();
        self.free + pending
    }
}
