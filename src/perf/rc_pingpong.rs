//! One end of rdma-core's `ibv_rc_pingpong`, for any provider: its resources ([`open_end`]:
//! a buffer of the message size filled with 0x7b, registered for local write, a CQ of
//! `rx_depth + 1`, a QP of the asked type with one send and `rx_depth` receives), its
//! address lines ([`ep_line`], [`msg_line`]: LID, QPN, PSN and GID as rc_pingpong prints
//! them), and what an end does after a failed completion ([`drain`]). What `rdma-direct
//! pingpong` runs its loop on.
//!
//! Contract: nothing here parses a command line or prints; every function returns its
//! resources, text or error. [`drain`] polls until every request outstanding at the first
//! error has completed (the failing one with its error, the others flushed once the QP is in
//! the error state) or nothing completed for its `wait`, and returns one line that says how
//! each completed, so nothing outstanding goes unaccounted for.

use std::net::Ipv6Addr;
use std::time::{Duration, Instant};

use crate::endpoint::PingpongMsg;
use crate::providers::helpers;
use crate::providers::{
    Access, Completion, Pages, Provider, QpCaps, QpConfig, QpEndpoint, QpType, RegisteredBuf,
    WcStatus,
};
use crate::Result;

/// After a failed completion, how long a drain waits for the next completion (a flush).
pub const DRAIN: Duration = Duration::from_secs(10);

/// rc_pingpong's address line: `  local address:  LID 0x0000, QPN 0x000100, ...`.
fn dest_line(which: &str, lid: u16, qpn: u32, psn: u32, gid: &[u8; 16]) -> String {
    format!(
        "  {:<16}LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {}\n",
        format!("{which} address:"),
        lid,
        qpn,
        psn,
        Ipv6Addr::from(*gid)
    )
}

/// The address line of an end (`which`: `local` or `remote`).
pub fn ep_line(which: &str, e: &QpEndpoint) -> String {
    dest_line(which, e.lid, e.qpn, e.psn, &e.gid)
}

/// The address line of an end as rc_pingpong's exchange carried it.
pub fn msg_line(which: &str, m: &PingpongMsg) -> String {
    dest_line(which, m.lid, m.qpn, m.psn, &m.gid)
}

/// One end's resources, as rc_pingpong's `pp_init_ctx`. Field order is drop order: the QP
/// before its CQ, the registered buffer before the PD.
pub struct End<P: Provider> {
    pub qp: P::Qp,
    pub cq: P::Cq,
    /// `size` bytes of page-aligned memory, registered for local write (rc_pingpong's buffer,
    /// filled with 0x7b as its is).
    pub buf: RegisteredBuf<P::Mr>,
    pub _pd: P::Pd,
}

/// Opens one end on `p`: messages of `size` bytes, `rx_depth` receives, a `qp_type` QP in
/// RESET.
pub fn open_end<P: Provider>(
    p: &mut P,
    size: usize,
    rx_depth: u32,
    qp_type: QpType,
) -> Result<End<P>> {
    let pd = p.alloc_pd()?;
    let mut buf = p.alloc_buf(&pd, size, Access::LOCAL_WRITE, Pages::Normal)?;
    buf.as_mut_slice().fill(0x7b);
    let mut cq = p.create_cq(rx_depth + 1)?;
    let cfg = QpConfig {
        qp_type,
        caps: QpCaps {
            max_send_wr: 1,
            max_recv_wr: rx_depth,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        sq_sig_all: false,
    };
    let qp = p.create_qp(&pd, &mut cq, None, None, &cfg)?;
    Ok(End {
        qp,
        cq,
        buf,
        _pd: pd,
    })
}

/// After a failed completion (`first[0]`; the rest of its poll follows it) with `sends`
/// and `recvs` requests outstanding: poll `cq` until each has completed, or nothing
/// completed for `wait`, and say how each completed (counts per status, in order of first
/// appearance).
pub fn drain<P: Provider>(
    p: &mut P,
    cq: &mut P::Cq,
    sends: u32,
    recvs: u32,
    first: &[Completion],
    wait: Duration,
) -> String {
    let outstanding = sends + recvs;
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
    let _ = helpers::drain(
        p,
        cq,
        outstanding.saturating_sub(seen) as usize,
        wait,
        |c| {
            tally(&mut counts, std::slice::from_ref(c));
        },
    );
    drain_line(outstanding, sends, recvs, &counts, t0.elapsed())
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

    /// The flushes come only when the drain runs the (deterministic) device: it polls until
    /// all of them are in.
    #[cfg(feature = "sim")]
    #[test]
    fn the_drain_waits_for_every_outstanding_request() {
        use crate::providers::flow::connect_pair;
        use crate::providers::sim::SimDevice;
        use crate::providers::{ConnectOpts, MemoryRegion, QueuePair, RecvQueue, RecvWr};

        let mut dev = SimDevice::new();
        let mut end = open_end(&mut dev, 4096, 4, QpType::Rc).unwrap();
        let mut peer = open_end(&mut dev, 4096, 4, QpType::Rc).unwrap();
        connect_pair(&mut dev, &mut end.qp, &mut peer.qp, &ConnectOpts::default()).unwrap();
        let sge = [end.buf.mr().sge(0, 4096)];
        for _ in 0..4 {
            let wr = RecvWr {
                wr_id: 1,
                sges: &sge,
            };
            end.qp.rq().post_recv(wr).map_err(|r| r.error).unwrap();
        }
        end.qp.rq().ring();
        // As if a send were outstanding and its error completion the poll's first.
        let first = [Completion {
            status: WcStatus::RetryExcErr,
            ..Completion::EMPTY
        }];
        dev.to_error(&mut end.qp).unwrap();
        let line = drain(&mut dev, &mut end.cq, 1, 4, &first, DRAIN);
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

    #[test]
    fn the_address_line_is_rc_pingpongs() {
        let mut gid = [0u8; 16];
        gid[10] = 0xff;
        gid[11] = 0xff;
        gid[12..].copy_from_slice(&[10, 0, 2, 15]);
        assert_eq!(
            dest_line("local", 0, 0x11, 0xabcdef, &gid),
            "  local address:  LID 0x0000, QPN 0x000011, PSN 0xabcdef, GID ::ffff:10.0.2.15\n"
        );
    }
}
