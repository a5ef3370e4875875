//! The CQ-room rule of QP creation: a CQ must absorb everything its queues may have
//! outstanding at once.
//!
//! Every send request (signaled or not: a QP that fails flushes each outstanding request
//! with its own completion) and every receive of a QP's own receive queue may complete on its
//! CQ. The providers reserve one CQ entry per request at post time so that a CQ can never
//! overrun. If the queues on a CQ could hold more than the CQ's depth, a post could find the
//! CQ full while only unsignaled requests are outstanding: no completion arrives for them
//! until a signaled one is posted, so polling frees nothing and the queue wedges.
//!
//! So every provider refuses, at QP creation, a QP unless each of its CQs can absorb the
//! sum over every QP that completes on it of `max_send_wr` (on its send CQ) and
//! `max_recv_wr` (on its receive CQ, own receive queue only), and an SRQ's depth once per
//! CQ it completes into. With that rule a post is refused because the CQ is full
//! ([`crate::types::PostError::CqFull`]) only while CQEs a reset or dropped QP left behind
//! still occupy the ring (they keep their entries until the CQ is polled; on mlx5 and the sim
//! the poller discards them); a run of
//! unsignaled requests ends at `max_send_wr` with `QueueFull`, as in every verbs stack
//! (signal at least one request per `max_send_wr`).
//!
//! [`CqCommit`] keeps the sum per CQ; the error of [`CqCommit::commit`] names the CQ's depth
//! (on mlx5 and the sim the depth the device granted, a power of two; on verbs the depth
//! asked for, which is what that provider accounts against), this QP's share, what the other
//! QPs already hold, and the fix.
//!
//! The rule belongs to `Provider::create_qp`. The raw constructors below it — the mlx5
//! `Mlx5Qp::from_dv` over memory the caller brings and the control-path `control::Qp::new` —
//! do not apply it: a QP made there on a smaller CQ can still see `CqFull` at post time
//! (`from_dv`), or overrun the CQ (`control::Qp`, which keeps no accounting).

use std::sync::Mutex;

use crate::error::{Error, Result};

/// What one QP asks of one CQ.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Need {
    /// `max_send_wr` of a QP whose send queue completes on the CQ (else 0).
    pub send: u32,
    /// `max_recv_wr` of a QP whose own receive queue completes on the CQ (else 0).
    pub recv: u32,
    /// The depth of an SRQ not yet counted on this CQ (else 0).
    pub srq: u32,
}

impl Need {
    fn total(self) -> u64 {
        u64::from(self.send) + u64::from(self.recv) + u64::from(self.srq)
    }

    /// "max_send_wr 128 + max_recv_wr 64" (the parts that are not zero).
    fn parts(self) -> String {
        let mut v = Vec::new();
        if self.send != 0 {
            v.push(format!("max_send_wr {}", self.send));
        }
        if self.recv != 0 {
            v.push(format!("max_recv_wr {}", self.recv));
        }
        if self.srq != 0 {
            v.push(format!("SRQ depth {}", self.srq));
        }
        v.join(" + ")
    }

    /// "max_send_wr/max_recv_wr" (what the caller may lower).
    fn knobs(self) -> String {
        let mut v = Vec::new();
        if self.send != 0 {
            v.push("max_send_wr");
        }
        if self.recv != 0 {
            v.push("max_recv_wr");
        }
        if self.srq != 0 {
            v.push("the SRQ's max_wr");
        }
        v.join("/")
    }
}

#[derive(Default)]
struct Held {
    /// Entries committed by the queues created on the CQ.
    entries: u64,
    /// QPs that hold a commitment on the CQ.
    qps: u32,
}

/// The entries the queues on one CQ may have outstanding (see the module doc). Control path
/// only: a lock, taken at QP creation and drop.
#[derive(Default)]
pub(crate) struct CqCommit {
    held: Mutex<Held>,
}

impl CqCommit {
    /// Commit `need` on a CQ of `cqe` entries for one more QP, or refuse (nothing committed)
    /// with an `EINVAL` error of `verb` naming the numbers and the fix. `role` names the CQ
    /// in the message ("CQ", "send CQ", "receive CQ"). A `need` of zero commits nothing.
    pub fn commit(&self, verb: &'static str, role: &str, cqe: u32, need: Need) -> Result<()> {
        if need.total() == 0 {
            return Ok(());
        }
        let mut h = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let total = h.entries + need.total();
        if total > u64::from(cqe) {
            let others = match h.qps {
                0 => "no other QP is on it".to_string(),
                1 => format!("1 other QP on it holds {}", h.entries),
                n => format!("{n} other QPs on it hold {}", h.entries),
            };
            return Err(Error::verb(
                verb,
                libc::EINVAL,
                format!(
                    "the {role} has {cqe} entries but would have to absorb {total}: this QP's \
                     {} ({}), and {others}. Every request, signaled or not, may complete on \
                     the CQ, so a smaller CQ could fill with unsignaled requests that polling \
                     cannot free. Create the CQ with at least {total} entries (create_cq) or \
                     lower {}",
                    need.parts(),
                    need.total(),
                    need.knobs()
                ),
            ));
        }
        h.entries = total;
        h.qps += 1;
        Ok(())
    }

    /// Give back what [`Self::commit`] took for one QP (`need` as committed).
    pub fn release(&self, need: Need) {
        if need.total() == 0 {
            return;
        }
        let mut h = self.held.lock().unwrap_or_else(|p| p.into_inner());
        h.entries = h.entries.saturating_sub(need.total());
        h.qps = h.qps.saturating_sub(1);
    }

    /// Entries committed so far.
    #[cfg(test)]
    pub fn committed(&self) -> u64 {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).entries
    }
}

/// The verb named by a refusal (every provider's `create_qp`).
pub(crate) const VERB: &str = "create_qp";

/// Commit a new QP's queues: `send_wr` on the send CQ, `recv_wr` (its own receive queue;
/// 0 with an SRQ) on the receive CQ, which is the send CQ when `recv` is `None`. Each CQ is
/// given as its commitments and depth. Returns what was committed on each (to give back
/// with [`release_qp`]); on a refusal nothing stays committed.
pub(crate) fn commit_qp(
    send: (&CqCommit, u32),
    recv: Option<(&CqCommit, u32)>,
    send_wr: u32,
    recv_wr: u32,
) -> Result<[Need; 2]> {
    let Some(recv) = recv else {
        let need = Need {
            send: send_wr,
            recv: recv_wr,
            srq: 0,
        };
        send.0.commit(VERB, "CQ", send.1, need)?;
        return Ok([need, Need::default()]);
    };
    let s = Need {
        send: send_wr,
        ..Need::default()
    };
    let r = Need {
        recv: recv_wr,
        ..Need::default()
    };
    send.0.commit(VERB, "send CQ", send.1, s)?;
    if let Err(e) = recv.0.commit(VERB, "receive CQ", recv.1, r) {
        send.0.release(s);
        return Err(e);
    }
    Ok([s, r])
}

/// Give back what [`commit_qp`] committed.
pub(crate) fn release_qp(send: &CqCommit, recv: &CqCommit, need: [Need; 2]) {
    send.release(need[0]);
    recv.release(need[1]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(n: u32) -> Need {
        Need {
            send: n,
            ..Need::default()
        }
    }

    #[test]
    fn sq_deeper_than_its_cq_is_refused_with_both_numbers() {
        let c = CqCommit::default();
        let e = c.commit("create_qp", "CQ", 16, send(128)).unwrap_err();
        assert_eq!(e.errno(), Some(libc::EINVAL));
        assert_eq!(
            e.to_string(),
            "create_qp: EINVAL (Invalid argument) — the CQ has 16 entries but would have to \
             absorb 128: this QP's max_send_wr 128 (128), and no other QP is on it. Every \
             request, signaled or not, may complete on the CQ, so a smaller CQ could fill \
             with unsignaled requests that polling cannot free. Create the CQ with at least \
             128 entries (create_cq) or lower max_send_wr"
        );
        assert_eq!(c.committed(), 0);
    }

    #[test]
    fn a_shared_cq_must_absorb_the_sum() {
        let c = CqCommit::default();
        c.commit("create_qp", "CQ", 64, send(32)).unwrap();
        c.commit("create_qp", "CQ", 64, send(16)).unwrap();
        let both = Need {
            send: 16,
            recv: 1,
            srq: 0,
        };
        let e = c.commit("create_qp", "CQ", 64, both).unwrap_err();
        let s = e.to_string();
        assert!(
            s.contains("has 64 entries but would have to absorb 65: this QP's max_send_wr 16 + max_recv_wr 1 (17), and 2 other QPs on it hold 48."),
            "{s}"
        );
        assert!(s.ends_with("lower max_send_wr/max_recv_wr"), "{s}");
        // Exactly the depth fits; a dropped QP gives its share back.
        c.commit("create_qp", "CQ", 64, send(16)).unwrap();
        assert_eq!(c.committed(), 64);
        c.release(send(32));
        assert_eq!(c.committed(), 32);
        c.commit("create_qp", "CQ", 64, both).unwrap();
        let e = c
            .commit(
                "create_qp",
                "receive CQ",
                64,
                Need {
                    srq: 16,
                    ..Need::default()
                },
            )
            .unwrap_err();
        assert!(e.to_string().contains("the receive CQ has 64 entries but would have to absorb 65: this QP's SRQ depth 16 (16), and 3 other QPs on it hold 49."), "{e}");
    }

    #[test]
    fn separate_cqs_each_absorb_their_queue_and_a_refusal_keeps_nothing() {
        let (sc, rc) = (CqCommit::default(), CqCommit::default());
        let need = commit_qp((&sc, 8), Some((&rc, 4)), 8, 4).unwrap();
        assert_eq!((sc.committed(), rc.committed()), (8, 4));
        let e = commit_qp((&sc, 16), Some((&rc, 4)), 8, 1).unwrap_err();
        assert!(
            e.to_string().contains("the receive CQ has 4 entries but would have to absorb 5: this QP's max_recv_wr 1 (1), and 1 other QP on it holds 4."),
            "{e}"
        );
        assert_eq!((sc.committed(), rc.committed()), (8, 4));
        release_qp(&sc, &rc, need);
        assert_eq!((sc.committed(), rc.committed()), (0, 0));
        let e = commit_qp((&sc, 8), None, 8, 1).unwrap_err();
        assert!(e.to_string().contains("the CQ has 8 entries but would have to absorb 9: this QP's max_send_wr 8 + max_recv_wr 1 (9)"), "{e}");
    }

    #[test]
    fn nothing_asked_commits_nothing() {
        let c = CqCommit::default();
        c.commit("create_qp", "CQ", 0, Need::default()).unwrap();
        c.release(Need::default());
        assert_eq!(c.committed(), 0);
    }
}
