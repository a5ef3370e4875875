//! After a failed completion: [`Flow::drain`] polls until every request outstanding at that
//! moment has completed (the failing one with its error, the others flushed once the QP is in
//! the error state) or [`DRAIN`] has passed, and [`drain_line`] says how each completed, so a
//! test can check that nothing outstanding was lost.

use std::time::{Duration, Instant};

use rdma_direct::providers::{Completion, CompletionQueue, WcStatus};

use super::flow::Flow;

/// After a failed completion, how long the outstanding requests get to complete (flushed).
pub(super) const DRAIN: Duration = Duration::from_secs(10);

impl Flow {
    /// After a failed completion (`first[0]`; the rest of its poll follows it): poll until
    /// every request outstanding at that moment has completed, or [`DRAIN`] has passed, and
    /// say how each completed (counts per status, in order of first appearance).
    pub(super) fn drain<C: CompletionQueue>(&self, cq: &mut C, first: &[Completion]) -> String {
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
        let mut seen = tally(&mut counts, first);
        let t0 = Instant::now();
        let mut wc = [Completion::EMPTY; 16];
        while seen < outstanding && t0.elapsed() < DRAIN {
            let n = cq.poll(&mut wc);
            if n == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
            seen += tally(&mut counts, &wc[..n]);
        }
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
    use super::*;

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
