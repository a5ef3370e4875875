//! Completion timestamps of the CQ: the timestamped poll, the CQ's clock and the raw
//! timestamp of a consumed CQE. Cold beside the plain poll, which reads no timestamp (see
//! `ts.rs` for the clock format).

use super::{cqe, cqe_ptr, Mlx5Cq};
use crate::mlx5::owners::Owners;
use crate::Completion;

impl<D: Owners> Mlx5Cq<D> {
    /// Poll as [`CompletionQueue::poll`](crate::CompletionQueue::poll), and give each completion's time in ns: `ns[i]` is
    /// the timestamp of the CQE that gave `out[i]`, converted with the CQ's clock (see
    /// [`Mlx5Cq::set_clock`]; refresh its clock info with [`Mlx5Cq::clock_mut`] at least
    /// once per kernel refresh period). At most `min(out.len(), ns.len())` completions. A
    /// CQ without a clock gives the raw values (zero on a CQ not created for timestamps).
    /// The plain `poll` does not read timestamps at all.
    pub fn poll_ts(&mut self, out: &mut [Completion], ns: &mut [u64]) -> usize {
        let m = out.len().min(ns.len());
        let n = self.poll_inner::<true>(&mut out[..m], &mut ns[..m]);
        if let Some(c) = self.clock.as_deref() {
            for t in &mut ns[..n] {
                *t = c.to_ns(*t);
            }
        }
        n
    }

    /// Declare that this CQ's CQEs carry timestamps in `clock`'s format (the CQ must have
    /// been created so; see `ts.rs`).
    pub fn set_clock(&mut self, clock: super::super::ts::CqClock) {
        self.clock = Some(Box::new(clock));
    }
    /// The CQ's timestamp format and clock info, if it carries timestamps.
    pub fn clock(&self) -> Option<&super::super::ts::CqClock> {
        self.clock.as_deref()
    }
    /// As [`Mlx5Cq::clock`], to refresh the clock info.
    pub fn clock_mut(&mut self) -> Option<&mut super::super::ts::CqClock> {
        self.clock.as_deref_mut()
    }
    /// The raw timestamp field of the CQE at position `pos` (free-running, as `ci`). A
    /// consumed CQE keeps its bytes until the device reuses its slot, so right after a poll
    /// `ci() - k` is the `k`-th last CQE consumed. Cold path (tests, tools).
    pub fn cqe_timestamp_at(&self, pos: u32) -> u64 {
        let cqe = cqe_ptr(&self.dv, pos);
        // SAFETY: `cqe` is a 64-byte CQE of this CQ (from_dv's contract).
        unsafe { cqe::timestamp(cqe) }
    }
    /// [`Mlx5Cq::cqe_timestamp_at`] in ns with the CQ's clock; `None` when the CQ carries no
    /// timestamps.
    pub fn cqe_timestamp_ns_at(&self, pos: u32) -> Option<u64> {
        let c = self.clock.as_deref()?;
        Some(c.to_ns(self.cqe_timestamp_at(pos)))
    }
}
