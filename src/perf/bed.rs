//! The test bed of an in-process run: a client and a server QP on one device, each with its
//! CQ, its memory region and its buffer, connected to each other ([`setup`]).
//!
//! Contract: [`Bed`] owns everything [`setup`] made and drops it in the order its doc
//! states; on SEND tests each side's receive queue is kept full ([`refill_recvs`]), every
//! receive as long as the largest message of the run ([`Bed::recv_len`]): a receive posted
//! while one size runs may be consumed by the next, larger one (a receive sized for the
//! message it was posted beside ends the next size in `LOC_LEN_ERR`). Nothing
//! here is timed.

use crate::providers::flow::connect_pair;
use crate::providers::{
    Access, ConnectOpts, MemoryRegion, Pages, Provider, QpCaps, QpConfig, QpEndpoint, QpType,
    QueuePair, RecvQueue, RecvWr, RegisteredBuf,
};
use crate::Result;

use super::params::GRH;
use super::pingpong::RECV_WRID;
use super::{perr, Params, RX_DEPTH, TX_DEPTH};

/// One side: its QP, CQ and registered buffer, in halves (`[0, half)` outgoing,
/// `[half, 2 half)` incoming). Field order is drop order: the QP before its CQ and its memory.
pub(super) struct Side<P: Provider> {
    pub(super) qp: P::Qp,
    pub(super) cq: P::Cq,
    pub(super) buf: RegisteredBuf<P::Mr>,
    /// What the QP was connected with.
    pub(super) ep: QpEndpoint,
    /// The start of `buf`, for the loops' volatile reads and writes of the last byte.
    pub(super) base: *mut u8,
    /// Receives still posted (SEND tests).
    pub(super) routs: u32,
}

/// Everything a run sets up. Field order is drop order: AHs, then the sides (QPs, CQs and
/// memory), the PD last.
pub(super) struct Bed<P: Provider> {
    pub(super) ahs: Option<(P::Ah, P::Ah)>,
    pub(super) client: Side<P>,
    pub(super) server: Side<P>,
    _pd: P::Pd,
    pub(super) half: usize,
    /// The length of every receive: the run's largest message (plus the GRH on UD).
    pub(super) recv_len: u32,
    pub(super) max_inline: u32,
    pub(super) mtu: u32,
}

/// A side before it is connected: its QP, CQ and memory.
type Parts<P> = (
    <P as Provider>::Qp,
    <P as Provider>::Cq,
    RegisteredBuf<<P as Provider>::Mr>,
);

pub(super) fn setup<P: Provider>(p: &mut P, o: &Params, max_size: u32) -> Result<Bed<P>> {
    let grh = if o.qp_type == QpType::Ud { GRH } else { 0 };
    // Each half holds one message (plus the GRH on UD), 64-byte aligned.
    let half = ((max_size + grh) as usize).next_multiple_of(64).max(64);
    let pd = p.alloc_pd()?;
    let send = o.test.is_send();
    let caps = QpCaps {
        max_send_wr: TX_DEPTH,
        max_recv_wr: if send { RX_DEPTH } else { 1 },
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: o.inline,
    };
    let cfg = QpConfig {
        qp_type: o.qp_type,
        caps,
        sq_sig_all: false,
    };
    let copts = connect_opts(o);
    let mk = |p: &mut P| -> Result<Parts<P>> {
        let cqe = caps.max_send_wr + caps.max_recv_wr + 1;
        let mut cq = if o.hw_ts {
            p.create_cq_ts(cqe)?
        } else {
            p.create_cq(cqe)?
        };
        let qp = p.create_qp(&pd, &mut cq, None, None, &cfg)?;
        let buf = p.alloc_buf(&pd, 2 * half, Access::ALL, Pages::Normal)?;
        Ok((qp, cq, buf))
    };
    let (mut cqp, ccq, cbuf) = mk(p)?;
    let (mut sqp, scq, sbuf) = mk(p)?;
    let (ce, se) = connect_pair(p, &mut cqp, &mut sqp, &copts)?;
    let side = |qp: P::Qp, cq: P::Cq, mut buf: RegisteredBuf<P::Mr>, ep| Side::<P> {
        qp,
        cq,
        base: buf.as_mut_slice().as_mut_ptr(),
        buf,
        ep,
        routs: 0,
    };
    let (client, server) = (side(cqp, ccq, cbuf, ce), side(sqp, scq, sbuf, se));
    let ahs = if o.qp_type == QpType::Ud {
        Some((
            p.create_ah(&pd, &se, &copts)?,
            p.create_ah(&pd, &ce, &copts)?,
        ))
    } else {
        None
    };
    let mtu = ce.mtu.min(se.mtu).bytes();
    let max_inline = client
        .qp
        .caps()
        .max_inline_data
        .min(server.qp.caps().max_inline_data);
    let mut bed = Bed {
        ahs,
        client,
        server,
        _pd: pd,
        half,
        recv_len: max_size + grh,
        max_inline,
        mtu,
    };
    if send {
        for s in [&mut bed.client, &mut bed.server] {
            refill_recvs(s, half, bed.recv_len)?;
        }
    }
    Ok(bed)
}

fn connect_opts(o: &Params) -> ConnectOpts {
    let rd = if o.test.is_read_like() { 16 } else { 1 };
    ConnectOpts {
        port: o.port,
        gid_index: o.gid_index,
        max_rd_atomic: rd,
        max_dest_rd_atomic: rd,
        // perftest's: the receiver re-posts as it consumes, a sender ahead of it waits.
        rnr_retry: 7,
        ..ConnectOpts::default()
    }
}

/// Post receives until the queue holds [`RX_DEPTH`] (one ring).
pub(super) fn refill_recvs<P: Provider>(s: &mut Side<P>, half: usize, len: u32) -> Result<()> {
    let sge = [s.buf.mr().sge(half, len)];
    let rq = s.qp.rq();
    let mut added = 0;
    while s.routs < RX_DEPTH {
        if let Err(r) = rq.post_recv(RecvWr {
            wr_id: RECV_WRID,
            sges: &sge,
        }) {
            rq.ring();
            return Err(perr(format!("post_recv: {}", r.error)));
        }
        s.routs += 1;
        added += 1;
    }
    if added > 0 {
        rq.try_ring().map_err(|e| perr(format!("post_recv: {e}")))?;
    }
    Ok(())
}
