//! The first-light ladder: the first thing to run on a new device. A ladder of rungs, each a
//! small real operation; the first that fails stops the ladder with what was expected and
//! what happened.
//!
//! The rungs (see `rungs.rs`): load libibverbs / libmlx5 → list → open → port and GID →
//! PD and MR → CQ → thread domain and parent domain → DV QP (`mlx5dv_create_qp`) →
//! `mlx5dv_init_obj` sanity (ring sizes, strides, dbrec alignment, bfreg size) → RESET→RTS
//! on a self-connected RC QP → one inline WRITE through the 8-byte doorbell → one through
//! BlueFlame → SEND/RECV → READ → atomics → the CQE fields of all of them → a timestamped CQ
//! and the clock-info page → arm and wake through a completion channel → teardown in
//! libmlx5's order.
//!
//! Contract:
//! - [`climb`] runs the ladder on the provider chosen for the device
//!   ([`crate::providers::choice`]): the mlx5 ladder on an mlx5 device, the same data rungs on
//!   the sim (no device) and on the verbs provider (rxe), where the mlx5-only rungs are
//!   [`Outcome::NotApplicable`] with the reason. [`missing`] is the ladder of a device that is
//!   not there: the list rung failing with the given diagnosis.
//! - Each rung is handed to the caller's `seen` as it ends (a tool shows progress; a rung
//!   that hangs is then visible), and all of them come back in a [`Report`]. Nothing is
//!   printed.
//! - After the first [`Outcome::Fail`] no further rung runs.
//! - [`text`] words a rung as the table's lines and the ladder as one JSON document.
//! - Each rung waits at most a few seconds for its completions: a device that never completes
//!   fails the rung, it does not hang the ladder.

mod dv;
mod rungs;
pub mod text;

use crate::providers::ProviderKind;

/// What a rung found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Did what was expected.
    Pass,
    /// Did not: the ladder stops here.
    Fail,
    /// Does not apply to this device or provider.
    NotApplicable,
}

/// One rung's record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rung {
    /// Short name.
    pub name: &'static str,
    /// The outcome.
    pub outcome: Outcome,
    /// What was expected.
    pub expected: String,
    /// What happened (what was seen on success, the error on failure, why on n/a).
    pub happened: String,
}

/// The rungs climbed, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Every rung that ran (none after the first failure).
    pub rungs: Vec<Rung>,
}

impl Report {
    fn count(&self, o: Outcome) -> usize {
        self.rungs.iter().filter(|r| r.outcome == o).count()
    }

    /// Rungs passed.
    pub fn passed(&self) -> usize {
        self.count(Outcome::Pass)
    }

    /// Rungs that did not apply.
    pub fn not_applicable(&self) -> usize {
        self.count(Outcome::NotApplicable)
    }

    /// The index of the rung that failed (the last one), if one did.
    pub fn failed(&self) -> Option<usize> {
        self.rungs.iter().position(|r| r.outcome == Outcome::Fail)
    }
}

/// A rung's failure: what happened.
type Failed = String;

/// The ladder being climbed: records each rung and hands it to the observer.
struct Ladder<'a> {
    report: Report,
    stopped: bool,
    seen: &'a mut dyn FnMut(usize, &Rung),
}

impl<'a> Ladder<'a> {
    fn new(seen: &'a mut dyn FnMut(usize, &Rung)) -> Ladder<'a> {
        Ladder {
            report: Report::default(),
            stopped: false,
            seen,
        }
    }

    /// Climb a rung: `f` returns what was seen, or what went wrong. `None` once the ladder
    /// has stopped (this rung or an earlier one failed).
    fn rung<T>(
        &mut self,
        name: &'static str,
        expected: &str,
        f: impl FnOnce() -> Result<(T, String), Failed>,
    ) -> Option<T> {
        if self.stopped {
            return None;
        }
        let (out, outcome, happened) = match f() {
            Ok((t, seen)) => (Some(t), Outcome::Pass, seen),
            Err(e) => (None, Outcome::Fail, e),
        };
        self.stopped = outcome == Outcome::Fail;
        self.push(Rung {
            name,
            outcome,
            expected: expected.to_string(),
            happened,
        });
        out
    }

    /// A rung that does not apply here, and why.
    fn not_applicable(&mut self, name: &'static str, expected: &str, why: &str) {
        if self.stopped {
            return;
        }
        self.push(Rung {
            name,
            outcome: Outcome::NotApplicable,
            expected: expected.to_string(),
            happened: why.to_string(),
        });
    }

    fn push(&mut self, r: Rung) {
        (self.seen)(self.report.rungs.len(), &r);
        self.report.rungs.push(r);
    }
}

/// Climb the ladder on the provider `kind` (on the device `dev`; none for the sim), through
/// the GID index `gid` (`None`: the first non-zero GID). `seen(index, rung)` is called as
/// each rung ends.
pub fn climb(
    kind: ProviderKind,
    dev: Option<&str>,
    gid: Option<u8>,
    seen: &mut dyn FnMut(usize, &Rung),
) -> Report {
    let mut l = Ladder::new(seen);
    rungs::climb(&mut l, kind, dev, gid);
    l.report
}

/// The ladder of a device that is not there: libibverbs loaded, then the list rung failing
/// with `why` (the diagnosis of the missing device).
pub fn missing(why: &str, seen: &mut dyn FnMut(usize, &Rung)) -> Report {
    let mut l = Ladder::new(seen);
    rungs::missing(&mut l, why);
    l.report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sim_climbs_every_rung_that_applies_and_reports_each_as_it_ends() {
        let mut seen = Vec::new();
        let r = climb(ProviderKind::Sim, None, None, &mut |i, r: &Rung| {
            seen.push((i, r.name))
        });
        assert_eq!(r.failed(), None, "{:#?}", r.rungs);
        assert!(r.passed() >= 10, "{:#?}", r.rungs);
        assert_eq!(r.passed() + r.not_applicable(), r.rungs.len());
        let names: Vec<_> = r.rungs.iter().map(|r| r.name).collect();
        assert_eq!(seen, names.iter().copied().enumerate().collect::<Vec<_>>());
    }

    #[test]
    fn a_missing_device_stops_at_the_list_rung_with_the_diagnosis() {
        let r = missing("no RDMA device 'mlx5_9'", &mut |_, _| {});
        let i = r.failed().expect("a rung fails");
        assert_eq!(i, r.rungs.len() - 1);
        if crate::control::loaded_libraries(false).is_err() {
            // A host without libibverbs (the aarch64 stage under qemu-user): the ladder stops
            // one rung earlier, at loading it, and never reaches the list.
            assert_eq!((i, r.rungs[i].name), (0, "load libraries"));
            return;
        }
        assert_eq!(r.rungs[i].name, "list");
        assert_eq!(r.rungs[i].happened, "no RDMA device 'mlx5_9'");
    }

    #[test]
    fn no_rung_runs_after_a_failure() {
        let mut calls = 0;
        let mut count = |_: usize, _: &Rung| calls += 1;
        let mut l = Ladder::new(&mut count);
        assert_eq!(l.rung("a", "x", || Ok((1, "fine".into()))), Some(1));
        assert_eq!(l.rung::<()>("b", "y", || Err("broke".into())), None);
        let mut ran = false;
        assert_eq!(
            l.rung("c", "z", || {
                ran = true;
                Ok(((), String::new()))
            }),
            None
        );
        l.not_applicable("d", "w", "why");
        let r = l.report;
        assert!(!ran);
        assert_eq!((r.passed(), r.failed(), r.rungs.len()), (1, Some(1), 2));
        assert_eq!(calls, 2);
    }
}
