//! The doorbell, in rdma-core's order (see the `sq` module doc): WQEs written, the to-device
//! store barrier, the send dbrec, then the 8-byte doorbell or a BlueFlame copy of a single
//! staged WQE between the write-combining barriers; and the choice of doorbell mode.

use std::sync::atomic::{AtomicU32, Ordering};

use super::{Mlx5Sq, DS_PER_BB};
use crate::barrier::{to_device_store_barrier, wc_flush, wc_start};
use crate::mlx5::owners::Owners;
use crate::mlx5::DoorbellMode;
use crate::mmio;
use crate::wire::{
    MLX5_SEND_WQE_BB, MLX5_WQE_CTRL_DS_MASK, MLX5_WQE_CTRL_WQE_INDEX_SHIFT, MLX5_WQE_DS_UNITS,
    MLX5_WQE_INDEX_MASK,
};

impl<D: Owners> Mlx5Sq<D> {
    /// Choose doorbell or BlueFlame.
    pub(crate) fn set_mode(&mut self, m: DoorbellMode) {
        let max = self.bf_size / MLX5_WQE_DS_UNITS as u32;
        (self.bf_min_ds, self.bf_max_ds) = match m {
            DoorbellMode::Doorbell => (1, 0),
            DoorbellMode::BlueFlame => (1, max),
            DoorbellMode::Auto => (2, max),
        };
        self.rung.bf_bbs = self.bf_max_ds.div_ceil(DS_PER_BB);
    }

    /// Publish the `staged_bbs` (> 0) staged WQEBBs: dbrec, then the 8-byte doorbell, or,
    /// when `maybe_bf`, [`Self::ring_bf`].
    #[inline(always)]
    pub(super) fn ring_doorbell(&mut self, staged_bbs: u32, maybe_bf: bool) {
        if maybe_bf {
            self.publish_pi(false);
            self.ring_bf(staged_bbs);
            return;
        }
        self.ring_db(self.last_ctrl, false);
    }

    /// Publish everything staged with the 8-byte doorbell `ctrl` (the first 8 bytes of the
    /// last staged WQE's ctrl segment). `idle_db`: the caller found `Rung::idle_db` true (see
    /// `publish_pi`).
    #[inline(always)]
    pub(super) fn ring_db(&mut self, ctrl: u64, idle_db: bool) {
        self.publish_pi(idle_db);
        // Orders the dbrec store before the write-combining store to the bfreg.
        wc_start();
        // SAFETY: `bf_cur` is this QP's 8-aligned doorbell register half (or the sink).
        unsafe { mmio::write64(self.bf_cur as *mut u64, ctrl) };
        // Pushes the WC store out before anything later.
        wc_flush();
        self.bf_cur = (self.bf_cur as usize ^ self.bf_flip) as *mut u8;
    }

    /// Nothing staged from here on; the WQEs written, then the send dbrec. `idle_db` (the
    /// caller knows `rung.bf_bbs` is 0): `rung` is stored whole, so the next
    /// `post_and_ring`'s 8-byte load of it is forwarded from this store; else `rung.pi`
    /// alone, one store and no load of `bf_bbs` on `ring`'s path.
    #[inline(always)]
    fn publish_pi(&mut self, idle_db: bool) {
        if idle_db {
            self.rung.set(self.pi, 0);
        } else {
            self.rung.pi = self.pi;
        }
        // Orders the WQE stores before the dbrec store the device may act on.
        to_device_store_barrier();
        // SAFETY: `dbrec_sq` is the QP's 4-aligned send doorbell record (`dbrec[1]`), host
        // memory; the poller reads it atomically too (the published producer position).
        unsafe {
            (*(self.dbrec_sq as *const AtomicU32))
                .store((self.pi & MLX5_WQE_INDEX_MASK).to_be(), Ordering::Release)
        };
    }

    /// The doorbell when BlueFlame may be used: a BlueFlame copy of a single staged WQE whose
    /// `ds` fits the mode, else the 8-byte doorbell.
    #[inline(never)]
    pub(super) fn ring_bf(&mut self, staged_bbs: u32) {
        // The last WQE's index and ds, from its ctrl segment's first 8 bytes; it is the only
        // one staged when it covers every staged WQEBB.
        let ctrl = self.last_ctrl;
        let idx = u32::from_be(ctrl as u32) >> MLX5_WQE_CTRL_WQE_INDEX_SHIFT & MLX5_WQE_INDEX_MASK;
        let ds = u32::from_be((ctrl >> 32) as u32) & MLX5_WQE_CTRL_DS_MASK;
        let single = ds.div_ceil(DS_PER_BB).max(1) == staged_bbs;
        let use_bf = single && ds <= self.bf_max_ds && ds >= self.bf_min_ds;
        let dst = self.bf_cur as *mut u64;
        // Orders the dbrec store before the write-combining stores to the bfreg.
        wc_start();
        if use_bf {
            let chunks = (ds as usize * MLX5_WQE_DS_UNITS).div_ceil(MLX5_SEND_WQE_BB);
            // SAFETY: `dst` is this QP's BlueFlame half (`bf_size` bytes, 8-aligned) and
            // `chunks * 64 <= bf_size` (`bf_max_ds = bf_size / 16`); the source is the staged
            // WQE in our ring, starting at a WQEBB.
            unsafe {
                mmio::bf_copy(
                    dst,
                    self.buf,
                    self.byte_mask + 1,
                    (idx & self.mask) as usize * MLX5_SEND_WQE_BB,
                    chunks,
                )
            };
        } else {
            // SAFETY: `dst` is the 8-aligned doorbell register half.
            unsafe { mmio::write64(dst, ctrl) };
        }
        // Pushes the WC stores out before anything later.
        wc_flush();
        self.bf_cur = (self.bf_cur as usize ^ self.bf_flip) as *mut u8;
    }
}
