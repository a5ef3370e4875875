//! Polling several CQs: one sweep ([`poll_any`]) and a wait for what each CQ still owes,
//! with one stall deadline ([`wait_each`]).

use crate::error::{Error, Result};
use crate::helpers::Stall;
use crate::{Completion, CompletionQueue, Provider};
use std::borrow::BorrowMut;
use std::fmt::Write as _;
use std::time::Duration;

/// Polls the CQs once each, starting after the one `*turn` names (so no CQ starves the
/// others), and returns the first that had completions: its index and how many it wrote
/// into `out`. `*turn` moves to that CQ. Does not run the device: call
/// [`Provider::progress`] between sweeps on the deterministic sim.
///
/// `cqs` may be the CQs themselves (`&mut [P::Cq]`) or borrows of them (`&mut [&mut P::Cq]`).
#[inline]
pub fn poll_any<C: CompletionQueue, T: BorrowMut<C>>(
    cqs: &mut [T],
    out: &mut [Completion],
    turn: &mut usize,
) -> Option<(usize, usize)> {
    let k = cqs.len();
    for step in 1..=k {
        let i = (*turn + step) % k;
        let n = cqs[i].borrow_mut().poll(out);
        if n > 0 {
            *turn = i;
            return Some((i, n));
        }
    }
    None
}

/// Polls until every CQ `i` has delivered what `missing[i]` says, handing each completion to
/// `each(i, &c)`, which returns how much of `missing[i]` it settles (e.g. `1 + c.covered`
/// for a send completion counted in requests, 1 for a receive, 0 for one not waited for) or
/// an error that ends the wait (e.g. `c.check()?`). Only CQs still owed something are polled,
/// and at most as many completions as they owe, so completions not waited for stay queued
/// for the next wait (a completion settling more than one, a covering send completion, may
/// leave `each` seeing one it did not wait for: it still counts it).
///
/// When no completion arrives for `stall` while something is missing, the error (an
/// [`Error::Stalled`]) names every CQ still owed and how much: a missing
/// receive, a dead peer or a QP in ERR show up as an error, not a hang. The clock is read as
/// [`crate::helpers::Stall`] reads it; nothing is allocated until that error.
pub fn wait_each<P: Provider, T: BorrowMut<P::Cq>>(
    p: &mut P,
    cqs: &mut [T],
    missing: &mut [usize],
    stall: Duration,
    mut each: impl FnMut(usize, &Completion) -> Result<usize>,
) -> Result<()> {
    if missing.len() != cqs.len() {
        return Err(Error::InvalidArgument {
            context: "wait_each",
            detail: format!(
                "{} CQs but {} missing counts: give one count per CQ",
                cqs.len(),
                missing.len()
            ),
        });
    }
    let mut wc = [Completion::EMPTY; 32];
    let mut stall = Stall::new(stall);
    while missing.iter().any(|&m| m > 0) {
        p.progress();
        let mut got = false;
        for (i, cq) in cqs.iter_mut().enumerate() {
            if missing[i] == 0 {
                continue;
            }
            // No more completions than are owed (each settles at least one, as a rule),
            // so what is not waited for stays queued.
            let n = cq.borrow_mut().poll(&mut wc[..missing[i].min(32)]);
            for c in &wc[..n] {
                let settled = each(i, c)?;
                missing[i] = missing[i].saturating_sub(settled);
            }
            got |= n > 0;
        }
        if got {
            stall.progressed();
            continue;
        }
        stall.idle("wait_each", || owed(missing))?;
    }
    Ok(())
}

/// What `missing` says is still owed: `2 by CQ 1 of 2`, per CQ owing any.
fn owed(missing: &[usize]) -> String {
    let mut owed = String::new();
    for (i, m) in missing.iter().enumerate().filter(|e| *e.1 > 0) {
        let sep = if owed.is_empty() { "" } else { ", " };
        let _ = write!(owed, "{sep}{m} by CQ {i} of {}", missing.len());
    }
    owed
}
