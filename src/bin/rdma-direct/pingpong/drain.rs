//! After a failed completion: [`Flow::drain`] polls (the library's
//! [`drain`](rdma_direct::providers::helpers::drain)) until every request outstanding at that
//! moment has completed (the failing one with its error, the others flushed once the QP is in
//! the error state) or nothing completed for [`DRAIN`], and [`drain_line`] says how each
//! completed, so a test can check that nothing outstanding was lost.

use std::time::{Duration, Instant};

use rdma_direct::providers::helpers::drain;
use rdma_direct::providers::{Completion, Provider, WcStatus};

use super::flow::Flow;

/// After a failed completion, how long the drain waits for the next completion (a flush).
pub(super) const DRAIN: Duration = Duration::from_secs(10);

impl Flow {
    /// After a failed completion (`first[0]`; the rest of its poll follows it): poll until
    /// every request outstanding at that moment has completed, or nothing completed for
    /// [`DRAIN`], and say how each completed (counts per status, in order of first
    /// appearance).
    pub(super) fn drain<P: Provider>(
        &self,
        p: &mut P,
        cq: &mut P::Cq,
        first: &[Completion],
    ) -> String {
        let outstanding = self.souts + self.routs;
        let mut counts: Vec<(WcStatus, u32)> = Vec::new();
        let tally = |counts: &mut Vec<(WcStatus, u32)>, done: &[Completion]| {
            for c in done {
                match counts.iter_mut().find(|(s, _)| *s == c.status) {
                    Some((_, k)) => *k += 1,
                    None => counts.push((c.status, 1)),
                }
            }
            done.len() as u32
        };
        let seen = tally(&mut counts, first);
        let t0 = Instant::now();
        // A stall leaves the rest counted as without a completion.
        let _ = drain(
            p,
            cq,
            outstanding.saturating_sub(seen) as usize,
            DRAIN,
            |c| {
                tally(&mut counts, std::slice::from_ref(c));
            },
        );
        drain_line(outstanding, self.souts, self.routs, &counts, t0.elapsed())
    }
}

/// The drain's report: `drain: N outstanding at the first error (S sends, R receives): 1
/// RETRY_EXC_ERR, 8 WR_FLUSH_ERR, 0 without a completion (0.00 s)`.
fn drain_line(
    outstanding: u32,
    sends: u32,
    recvs: u32,
    counts: &[(WcStatus, u32)],
    took: Duration,
) -> String {
    let seen: u32 = counts.iter().map(|(_, k)| k).sum();
    let mut s = format!(
        "drain: {outstanding} outstanding at the first error ({sends} send{}, {recvs} receive{}):",
        if sends == 1 { "" } else { "s" },
        if recvs == 1 { "" } else { "s" }
    );
    for (st, k) in counts {
        s.push_str(&format!(" {k} {st},"));
    }
    s.push_str(&format!(
        " {} without a completion ({:.2} s)",
        outstanding.saturating_sub(seen),
        took.as_secs_f64()
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::super::args::parse_args;
    use super::super::bring_up::open_end;
    use super::*;
    use rdma_direct::providers::flow::connect_pair;
    use rdma_direct::providers::sim::SimDevice;
    use rdma_direct::providers::ConnectOpts;

    /// The flushes come only when the drain runs the (deterministic) device: it polls until
    /// all of them are in.
    #[test]
    fn the_drain_waits_for_every_outstanding_request() {
        let a = parse_args(&["-r".to_string(), "4".to_string()])
            .unwrap()
            .unwrap();
        let mut dev = SimDevice::new();
        let mut end = open_end(&mut dev, &a).unwrap();
        let mut peer = open_end(&mut dev, &a).unwrap();
        connect_pair(&mut dev, &mut end.qp, &mut peer.qp, &ConnectOpts::default()).unwrap();
        let mut flow = Flow::new(&end, &a, false);
        flow.fill(&mut end.qp).unwrap();
        // As if a send were outstanding and its error completion the poll's first.
        flow.souts = 1;
        let first = [Completion {
            status: WcStatus::RetryExcErr,
            ..Completion::EMPTY
        }];
        dev.to_error(&mut end.qp).unwrap();
        let line = flow.drain(&mut dev, &mut end.cq, &first);
        assert!(
            line.starts_with(
                "drain: 5 outstanding at the first error (1 send, 4 receives): \
                 1 RETRY_EXC_ERR, 4 WR_FLUSH_ERR, 0 without a completion"
            ),
            "{line}"
        );
    }

    #[test]
    fn the_drain_line_counts_every_outstanding_request() {
        let counts = [(WcStatus::RetryExcErr, 1), (WcStatus::WrFlushErr, 8)];
        assert_eq!(
            drain_line(9, 1, 8, &counts, Duration::from_millis(20)),
            "drain: 9 outstanding at the first error (1 send, 8 receives): 1 RETRY_EXC_ERR, \
             8 WR_FLUSH_ERR, 0 without a completion (0.02 s)"
        );
        assert_eq!(
            drain_line(3, 0, 3, &counts[..1], Duration::ZERO),
            "drain: 3 outstanding at the first error (0 sends, 3 receives): 1 RETRY_EXC_ERR, \
             2 without a completion (0.00 s)"
        );
    }
}
