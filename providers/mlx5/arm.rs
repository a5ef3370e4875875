//! Arming a CQ for a completion event, written by hand as rdma-core's `mlx5_arm_cq` does,
//! and the blocking wait built on it.
//!
//! Contract:
//!
//! - [`arm_doorbell`] is the arithmetic: `sn = arm_sn & 3`, `ci = cons_index & 0xffffff`,
//!   `cmd` = `MLX5_CQ_DB_REQ_NOT_SOL` (solicited only) or `MLX5_CQ_DB_REQ_NOT`,
//!   `word = sn << 28 | cmd | ci`; the doorbell is `word << 32 | cqn`.
//! - [`CqArm::arm`] stores `be32(word)` into the CQ doorbell record's second word
//!   (`dbrec[1]`, `MLX5_CQ_ARM_DB`; `dbrec[0]` untouched), then — after the write-combining
//!   start barrier, so the record is visible before the doorbell — one 8-byte big-endian
//!   store of the doorbell at `cq_uar + MLX5_CQ_DOORBELL` (0x20), then the flush barrier.
//!   The bytes match `fixtures/mlx5/arm.txt` (tests/golden_clock.rs).
//! - `arm_sn` is counted here: `mlx5dv_cq` has none, so every event taken from the channel
//!   must go through [`CqArm::event_received`] (libmlx5's `mlx5_cq_event`), or the device
//!   and the host disagree on `sn` and the device ignores the arm.
//! - One arm gives at most one event. [`CqWaiter::wait`] polls, arms, polls again, and only
//!   then blocks, so a completion landing between the first poll and the arm is seen by the
//!   second poll or fires the event (the device raises it at once when the CQ already holds
//!   CQEs past the armed consumer index). Every event read is acknowledged
//!   ([`EventChannel::ack`]).
//! - The channel is a file descriptor ([`std::os::fd::AsRawFd`]) an epoll loop or an async
//!   runtime can wait on: readable when an event is pending.

use std::os::fd::AsRawFd;

use super::cq::Mlx5Cq;
use crate::barrier::{wc_flush, wc_start};
use crate::mmio;
use crate::wire::{
    MLX5_CQ_ARM_DB, MLX5_CQ_ARM_SN_MASK, MLX5_CQ_ARM_SN_SHIFT, MLX5_CQ_CI_MASK, MLX5_CQ_DB_REQ_NOT,
    MLX5_CQ_DB_REQ_NOT_SOL, MLX5_CQ_DOORBELL,
};
use crate::{Completion, CompletionQueue};

/// `mlx5_arm_cq`'s arithmetic: the arm word for `dbrec[1]` and the 64-bit UAR doorbell.
#[inline]
pub const fn arm_doorbell(arm_sn: u32, cons_index: u32, cqn: u32, solicited: bool) -> (u32, u64) {
    let sn = arm_sn & MLX5_CQ_ARM_SN_MASK;
    let ci = cons_index & MLX5_CQ_CI_MASK;
    let cmd = if solicited {
        MLX5_CQ_DB_REQ_NOT_SOL
    } else {
        MLX5_CQ_DB_REQ_NOT
    };
    let word = (sn << MLX5_CQ_ARM_SN_SHIFT) | cmd | ci;
    (word, ((word as u64) << 32) | cqn as u64)
}

/// The arm state of one CQ: where its arm word and doorbell go, and the event count.
#[derive(Debug)]
pub struct CqArm {
    cqn: u32,
    dbrec: *mut u32,
    uar: *mut u8,
    arm_sn: u32,
    /// Keeps the CQ's memory (record and UAR) alive when set.
    keep: Option<std::sync::Arc<dyn std::any::Any + Send + Sync>>,
}

// SAFETY: plain addresses of device memory; `&mut self` serialises the stores.
unsafe impl Send for CqArm {}

impl CqArm {
    /// Arm state for CQ `cqn`.
    ///
    /// # Safety
    /// `dbrec` is the CQ's 8-byte doorbell record (4-aligned) and `uar` the CQ's UAR page
    /// (`mlx5dv_cq.cq_uar`; 8 bytes at 0x20 writable, 8-aligned), both valid while this
    /// lives.
    pub unsafe fn new(cqn: u32, dbrec: *mut u32, uar: *mut u8) -> CqArm {
        CqArm {
            cqn,
            dbrec,
            uar,
            arm_sn: 0,
            keep: None,
        }
    }

    /// Keep `owner` (whatever keeps the CQ's record and UAR mapped) alive as long as this.
    pub fn keep_alive(&mut self, owner: std::sync::Arc<dyn std::any::Any + Send + Sync>) {
        self.keep = Some(owner);
    }

    /// Events received so far (`arm_sn`).
    pub fn arm_sn(&self) -> u32 {
        self.arm_sn
    }

    /// Arm for the next completion (`solicited`: the next solicited or error one) after
    /// consumer index `ci`.
    pub fn arm(&mut self, ci: u32, solicited: bool) {
        let (word, db) = arm_doorbell(self.arm_sn, ci, self.cqn, solicited);
        // SAFETY: `dbrec` is the CQ's doorbell record (new's contract); word 1 is the arm word.
        unsafe { mmio::write32(self.dbrec.add(MLX5_CQ_ARM_DB), word.to_be()) };
        // The record before the doorbell (rdma-core: mmio_wc_start).
        wc_start();
        // SAFETY: `uar + 0x20` is the CQ doorbell, 8 bytes, 8-aligned (new's contract).
        unsafe { mmio::write64(self.uar.add(MLX5_CQ_DOORBELL).cast(), db.to_be()) };
        wc_flush();
    }

    /// One event was taken from the channel for this CQ (`mlx5_cq_event`).
    pub fn event_received(&mut self) {
        self.arm_sn = self.arm_sn.wrapping_add(1);
    }
}

/// A completion channel: a file descriptor that becomes readable when a CQ's event fires.
pub trait EventChannel: AsRawFd {
    /// Take one event: the CQN it is for, or `None` if none is pending. With `block`, sleep
    /// until one is (`None` then only on a signal interruption).
    fn get_event(&self, block: bool) -> crate::Result<Option<u32>>;
    /// Acknowledge `n` events taken (`ibv_ack_cq_events`).
    fn ack(&self, n: u32);
}

/// Sleeps on a CQ until its next completion: poll, arm, poll, block.
#[derive(Debug)]
pub struct CqWaiter<C: EventChannel> {
    arm: CqArm,
    channel: C,
    /// Events read and not yet acknowledged.
    unacked: u32,
    /// Times the waiter slept (read an event).
    sleeps: u64,
}

impl<C: EventChannel> CqWaiter<C> {
    /// A waiter for the CQ `arm` belongs to, whose events come on `channel`.
    pub fn new(arm: CqArm, channel: C) -> CqWaiter<C> {
        CqWaiter {
            arm,
            channel,
            unacked: 0,
            sleeps: 0,
        }
    }

    /// The channel (its fd for epoll).
    pub fn channel(&self) -> &C {
        &self.channel
    }

    /// How many times [`CqWaiter::wait`] slept on the channel.
    pub fn sleeps(&self) -> u64 {
        self.sleeps
    }

    /// Arm the CQ for its next completion after what `cq` consumed (for callers running
    /// their own epoll loop: arm, poll once more, then wait for the fd).
    pub fn arm<D: super::Owners>(&mut self, cq: &Mlx5Cq<D>, solicited: bool) {
        self.arm.arm(cq.ci(), solicited);
    }

    /// Take a pending event without blocking (after the fd became readable); true if one was.
    pub fn take_event(&mut self) -> crate::Result<bool> {
        self.read_event(false)
    }

    fn read_event(&mut self, block: bool) -> crate::Result<bool> {
        match self.channel.get_event(block)? {
            Some(_) => {
                self.arm.event_received();
                self.unacked += 1;
                self.sleeps += 1;
                if self.unacked >= 64 {
                    self.channel.ack(self.unacked);
                    self.unacked = 0;
                }
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Poll `cq` into `out`; if nothing is there, arm, poll again, and sleep on the channel
    /// until the CQ's event fires, then poll. Returns at least one completion (or an error
    /// reading the channel). Never misses a completion: see the module doc.
    pub fn wait<D: super::Owners>(
        &mut self,
        cq: &mut Mlx5Cq<D>,
        out: &mut [Completion],
    ) -> crate::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        loop {
            let n = cq.poll(out);
            if n > 0 {
                return Ok(n);
            }
            self.arm.arm(cq.ci(), false);
            let n = cq.poll(out);
            if n > 0 {
                // The arm stays; its event (if it fires) wakes a later wait early, which
                // then polls and arms again.
                return Ok(n);
            }
            self.read_event(true)?;
        }
    }
}

impl<C: EventChannel> Drop for CqWaiter<C> {
    fn drop(&mut self) {
        if self.unacked > 0 {
            self.channel.ack(self.unacked);
        }
    }
}
