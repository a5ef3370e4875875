//! CQ arming and completion events, as the device sees them.
//!
//! Reads: each CQ's 8-byte CQ doorbell in its UAR stub (`uar + MLX5_CQ_DOORBELL`, written
//! big-endian by the host's `CqArm::arm`) — a value that changed since the last pass is an
//! arm. Writes: one event (the CQN, 4 bytes) into the CQ's completion channel (a pipe).
//!
//! Rules (the device's side of `mlx5_arm_cq`):
//! - An arm whose `sn` is not the number of events this CQ has sent (mod 4) is stale (the
//!   host had not yet taken the last event when it armed) and is ignored
//!   (`EngineStats::stale_arms`); one whose `cqn` is not this CQ's is ignored too.
//! - An armed CQ fires once: at arm time if the CQ already holds CQEs past the armed
//!   consumer index, else at the next CQE written (solicited arms: the next CQE with the
//!   solicited bit or an error CQE). Firing disarms. A solicited arm behind unconsumed CQEs
//!   fires at once too, whatever they are: a spurious wake-up costs one poll, a missed one
//!   a hang.
//! - A CQ without a channel is never armed.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use super::Engine;
use crate::wire;

/// The arm state of a sim CQ.
#[derive(Debug, Default)]
pub(crate) struct ArmState {
    /// Where the events go (the write end of the channel's pipe).
    pub(crate) channel: Option<Arc<OwnedFd>>,
    /// The doorbell value last seen.
    last_db: u64,
    /// Armed: (solicited only, armed consumer index).
    armed: Option<(bool, u32)>,
    /// Events sent.
    sent: u32,
}

impl Engine {
    /// Look at every CQ's arm doorbell; fire those armed behind their producer index.
    pub(super) fn poll_arms(&mut self) -> usize {
        if !self.any_channel {
            return 0;
        }
        let mut work = 0;
        for (&cqn, cq) in self.cqs.iter_mut() {
            if cq.arm.channel.is_none() {
                continue;
            }
            let db = u64::from_be(cq.mem.load_raw64(cq.uar_off + wire::MLX5_CQ_DOORBELL));
            if db == cq.arm.last_db {
                continue;
            }
            cq.arm.last_db = db;
            work += 1;
            let word = (db >> 32) as u32;
            let sn = (word >> wire::MLX5_CQ_ARM_SN_SHIFT) & wire::MLX5_CQ_ARM_SN_MASK;
            if db as u32 & wire::MLX5_QPN_MASK != cqn
                || sn != cq.arm.sent & wire::MLX5_CQ_ARM_SN_MASK
            {
                self.stats.stale_arms += 1;
                continue;
            }
            let solicited = word & wire::MLX5_CQ_DB_REQ_NOT_SOL != 0;
            let ci = word & wire::MLX5_CQ_CI_MASK;
            self.stats.arms += 1;
            if cq.pi & wire::MLX5_CQ_CI_MASK != ci {
                // CQEs already past the armed index: the event fires now.
                fire(cqn, &mut cq.arm, &mut self.stats.events);
            } else {
                cq.arm.armed = Some((solicited, ci));
            }
        }
        work
    }
}

/// A CQE was written to CQ `cqn` (`solicited`: SE bit or error): fire if armed for it.
pub(super) fn on_cqe(cqn: u32, arm: &mut ArmState, solicited: bool, events: &mut u64) {
    if let Some((sol_only, _)) = arm.armed {
        if !sol_only || solicited {
            fire(cqn, arm, events);
        }
    }
}

fn fire(cqn: u32, arm: &mut ArmState, events: &mut u64) {
    arm.armed = None;
    let Some(ch) = &arm.channel else { return };
    arm.sent = arm.sent.wrapping_add(1);
    *events += 1;
    let b = cqn.to_ne_bytes();
    // SAFETY: writing 4 bytes from a live buffer to the pipe's write end (non-blocking; a
    // write of at most PIPE_BUF bytes is atomic). A full pipe (the host not reading) drops
    // the event, as nothing else can be done without blocking the device.
    unsafe { libc::write(ch.as_raw_fd(), b.as_ptr().cast(), b.len()) };
}
