//! The scenario runner, generic over [`Provider`].
//!
//! [`run_scenario`] runs a whole scenario in this process; [`run_scenario_split`] runs one
//! side of it against a peer process (see [`super::split`]). Both set up every resource the
//! file declares ([`setup`]), walk its steps ([`exec`]: posts, rings, connects, state
//! checks), match arrived completions against the expectations ([`matching`]: fields,
//! per-queue order, any-order blocks, selective-signaling coverage, accounting, nothing
//! extra) and compare the final buffers byte for byte ([`diff`]). A mismatch becomes a
//! [`Failure`] naming the file's line; under [`RunOpts::keep_going`] field mismatches are
//! recorded and the run goes on.
//!
//! The runner is control-path code: it allocates freely (SGE lists, bookkeeping). The
//! provider's post/poll path it drives is what the scenarios test.

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use memmap2::MmapMut;

use super::split::{Link, Plan, Side};
use super::{Failure, Mismatch, RecvTarget, Report, RunOpts, Scenario};
use crate::providers::{AsyncEvent, ConnectOpts, MemoryRegion, Provider, QpEndpoint};

mod diff;
mod exec;
mod matching;
mod setup;
#[cfg(test)]
mod tests;

/// The rkey bits flipped to make a deliberately wrong key (an MR index far beyond any
/// device's table, and a different key byte).
const BAD_RKEY_XOR: u32 = 0x8000_00ff;

/// Which queue a request went to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Owner {
    Sq(usize),
    Recv(RecvTarget),
}

/// Run `sc` on `p`. See the module documentation of this module for what is checked.
pub fn run_scenario<P: Provider>(
    p: &mut P,
    sc: &Scenario,
    opts: &RunOpts,
) -> Result<Report, Failure> {
    let start = Instant::now();
    let mut r = Runner::setup(p, sc, opts)?;
    let res = (|| {
        for step in &sc.steps {
            if opts.applies(&step.variant) {
                r.step(p, step)?;
            }
        }
        r.settle(p)?;
        r.check_accounting()?;
        r.check_buffers()
    })();
    let bytes_checked = r.conclude(res)?;
    Ok(Report {
        name: sc.name.clone(),
        posted: r.posted,
        rejected: r.rejected,
        completions: r.completions,
        bytes_checked,
        elapsed: start.elapsed(),
    })
}

/// Run this process's side of `sc` (planned by [`super::split::plan`]) against the peer
/// process on `link`; see [`super::split`]. The report counts this side's requests,
/// completions and bytes.
pub fn run_scenario_split<P: Provider>(
    p: &mut P,
    sc: &Scenario,
    opts: &RunOpts,
    plan: &Plan,
    link: &mut Link,
) -> Result<Report, Failure> {
    let start = Instant::now();
    let mut r = Runner::setup(p, sc, opts)?;
    let mine: Vec<(u64, u32)> = (0..sc.bufs.len())
        .map(|i| (r.base[i] as u64, r.mrs[i].rkey()))
        .collect();
    let peer_bufs = link
        .swap_bufs(&mine)
        .map_err(|e| r.fail(0, "split: buffer tables", e))?;
    r.split = Some(SplitState {
        side: link.side,
        plan: plan.clone(),
        peer_bufs,
    });
    let res = (|| {
        for (i, step) in sc.steps.iter().enumerate() {
            link.meet(i as u32)
                .map_err(|e| r.fail(step.line, "split: lockstep", e))?;
            if opts.applies(&step.variant) {
                r.step_split(p, step, link)?;
            }
        }
        // Every completion of both sides has arrived before either checks its bytes: a
        // responder's memory is final only once the requester has its ACKs.
        link.meet(u32::MAX - 1)
            .map_err(|e| r.fail(0, "split: before the final check", e))?;
        r.settle(p)?;
        r.check_accounting()?;
        r.check_buffers()
    })();
    let bytes_checked = r.conclude(res)?;
    // Neither side tears down while the other still polls.
    link.meet(u32::MAX)
        .map_err(|e| r.fail(0, "split: end", e))?;
    Ok(Report {
        name: sc.name.clone(),
        posted: r.posted,
        rejected: r.rejected,
        completions: r.completions,
        bytes_checked,
        elapsed: start.elapsed(),
    })
}

/// Two-process mode: this side, who owns what, and the peer's buffers.
struct SplitState {
    side: Side,
    plan: Plan,
    /// (address, rkey) of each of the peer's buffers.
    peer_bufs: Vec<(u64, u32)>,
}

/// Everything a run creates. Fields drop in declaration order: AHs and QPs before SRQs and
/// CQs, those before the MRs, the MRs before the PD, and the memory last.
struct Runner<'s, P: Provider> {
    sc: &'s Scenario,
    opts: &'s RunOpts,
    ahs: Vec<Option<P::Ah>>,
    qps: Vec<P::Qp>,
    srqs: Vec<P::Srq>,
    cqs: Vec<P::Cq>,
    mrs: Vec<P::Mr>,
    pd: P::Pd,
    /// Base address of each buffer (inside `mem`).
    base: Vec<*mut u8>,
    mem: Vec<MmapMut>,
    /// The initial contents (fill + `set` lines).
    initial: Vec<Vec<u8>>,
    /// (send CQ, receive CQ) of each QP, as indices into `cqs`.
    qp_cq: Vec<(usize, usize)>,
    qkey: u32,
    /// Each connected QP's endpoint and the options it was connected with (for AHs).
    eps: Vec<Option<(QpEndpoint, ConnectOpts)>>,
    /// Outstanding send requests per QP, in post order: (wr_id, signaled).
    sq_out: Vec<VecDeque<(u64, bool)>>,
    /// Outstanding receives per queue.
    recv_out: HashMap<RecvTarget, VecDeque<u64>>,
    /// Which queue each accepted request went to.
    owner: HashMap<u64, Owner>,
    /// Requests posted since the last ring, per QP.
    staged: Vec<u32>,
    posted: u32,
    rejected: u32,
    completions: u32,
    /// Two-process mode (`None`: both sides in this process).
    split: Option<SplitState>,
    /// Mismatches recorded under [`RunOpts::keep_going`].
    recorded: Vec<Mismatch>,
    /// The scenario has `event` lines: every asynchronous event must be expected.
    watch_events: bool,
    /// Asynchronous events that arrived and no `event` line has taken yet.
    events: Vec<AsyncEvent>,
}

fn two_mut<T>(v: &mut [T], i: usize, j: usize) -> (&mut T, &mut T) {
    debug_assert_ne!(i, j);
    if i < j {
        let (a, b) = v.split_at_mut(j);
        (&mut a[i], &mut b[0])
    } else {
        let (a, b) = v.split_at_mut(i);
        (&mut b[0], &mut a[j])
    }
}

impl<'s, P: Provider> Runner<'s, P> {
    fn fail(&self, line: usize, step: &str, detail: impl Into<String>) -> Failure {
        Failure {
            scenario: self.sc.name.clone(),
            file: self.sc.file.clone(),
            mismatches: vec![Mismatch {
                line,
                step: step.to_string(),
                detail: detail.into(),
            }],
        }
    }

    /// The run's end: `res` (the steps' outcome), with the mismatches recorded under
    /// [`RunOpts::keep_going`] before it.
    fn conclude<T>(&mut self, res: Result<T, Failure>) -> Result<T, Failure> {
        let recorded = std::mem::take(&mut self.recorded);
        match res {
            Ok(v) if recorded.is_empty() => Ok(v),
            Ok(_) => Err(Failure {
                scenario: self.sc.name.clone(),
                file: self.sc.file.clone(),
                mismatches: recorded,
            }),
            Err(mut f) => {
                let mut all = recorded;
                all.append(&mut f.mismatches);
                f.mismatches = all;
                Err(f)
            }
        }
    }

    /// Whether this process runs the steps of QP `q` (always, unless split).
    fn own_qp(&self, q: usize) -> bool {
        self.split.as_ref().is_none_or(|s| s.plan.qp[q] == s.side)
    }

    fn own_recv(&self, t: RecvTarget) -> bool {
        match (t, &self.split) {
            (_, None) => true,
            (RecvTarget::Qp(q), Some(_)) => self.own_qp(q),
            (RecvTarget::Srq(i), Some(s)) => s.plan.srq[i] == Some(s.side),
        }
    }
}
