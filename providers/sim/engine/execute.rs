//! Execution of the send WQE at the head of an SQ, requester side, and the responder's
//! checks for the operations that need no receive.
//!
//! Reads: the parsed WQE (from `fetch`), the MR table (lkeys of the requester, rkeys of the
//! responder), both QPs' state and attributes, the fault injector's error rate. Writes: the
//! responder's memory (WRITE, atomics), the requester's memory (READ data, the atomic's old
//! value), the requester QP's SQ index, retry counters and state, `EngineStats::bytes`;
//! completions go out through `cqe` (`push_cqe`), receive-consuming operations through
//! `recv` (`consume_recv`).
//!
//! Invariants: every local SGE is checked against its MR (PD, bounds, LOCAL_WRITE where the
//! device writes) and every remote range against the responder's MR and QP rights before a
//! byte moves; a failed WQE gets exactly one error CQE (whatever `CQ_UPDATE` says) and moves
//! the QP to ERR; a blocked WQE (RNR or transport retry) stays at the head, the SQ index
//! unchanged.

use super::dma::{gather_into, scatter_from, Span, EMPTY_SPAN};
use super::fetch::{seg_len, Scratch, Wqe, MAX_SEGS, MAX_WQE};
use super::objects::QpCtx;
use super::{stream, Engine};
use crate::wire::{self, CqeOpcode, CqeRepr, CtrlSeg, Opcode, Syndrome};
use crate::{Access, QpState, QpType};

/// What happened to the WQE at the head of the SQ.
pub(super) enum Step {
    /// Consumed (done, failed or flushed).
    Advanced,
    /// Waiting (RNR or transport retry forever, or retries left).
    Blocked { retried: bool },
}

/// What the responder said.
pub(super) enum Resp {
    Ok,
    /// No receive posted.
    Rnr,
    /// The peer is not there / not ready: no response at all.
    NoPeer,
    /// UC/UD: dropped silently.
    Dropped,
    /// NAK with this requester syndrome (responder side already handled).
    Nak(u8),
}

impl Engine {
    /// Check one local SGE against its MR: known lkey, same PD, in bounds, and LOCAL_WRITE
    /// when the device writes it. Violations are LOC_PROT.
    pub(super) fn local_span(
        &self,
        pd: u32,
        addr: u64,
        len: u32,
        lkey: u32,
        write: bool,
    ) -> Result<Span, u8> {
        let len = u64::from(len);
        let mr = self
            .mrs
            .get(&lkey)
            .ok_or(wire::MLX5_CQE_SYNDROME_LOCAL_PROT_ERR)?;
        if mr.pd != pd
            || addr < mr.addr
            || addr.checked_add(len).is_none_or(|e| e > mr.addr + mr.len)
            || (write && !mr.access.contains(Access::LOCAL_WRITE))
        {
            return Err(wire::MLX5_CQE_SYNDROME_LOCAL_PROT_ERR);
        }
        Ok(Span {
            ptr: addr as usize as *mut u8,
            len: len as usize,
        })
    }

    /// Check a remote range against the responder's MR and QP rights: REM_ACCESS otherwise.
    pub(super) fn remote_span(
        &self,
        resp: &QpCtx,
        raddr: u64,
        len: u64,
        rkey: u32,
        need: Access,
    ) -> Result<Span, u8> {
        let mr = self
            .mrs
            .get(&rkey)
            .ok_or(wire::MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR)?;
        if mr.pd != resp.pd
            || raddr < mr.addr
            || raddr.checked_add(len).is_none_or(|e| e > mr.addr + mr.len)
            || !mr.access.contains(need)
            || !resp.attr.access.contains(need)
        {
            return Err(wire::MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR);
        }
        Ok(Span {
            ptr: raddr as usize as *mut u8,
            len: len as usize,
        })
    }

    /// The gather (or, for READ and atomics, scatter) list of `w`: its inline pieces, or
    /// its data segments checked against the MRs of `pd` (LOCAL_WRITE where the device
    /// writes). Returns how many spans went into `out`.
    pub(super) fn local_spans(
        &self,
        pd: u32,
        w: &Wqe,
        out: &mut [Span; MAX_SEGS],
    ) -> Result<usize, u8> {
        if w.ninline > 0 {
            out[..w.ninline].copy_from_slice(&w.inline[..w.ninline]);
            return Ok(w.ninline);
        }
        let writes_local = matches!(
            w.opcode,
            Opcode::RdmaRead | Opcode::AtomicCs | Opcode::AtomicFa
        );
        for (i, &(addr, bc, lkey)) in w.segs[..w.nsegs].iter().enumerate() {
            out[i] = self.local_span(pd, addr, seg_len(bc), lkey, writes_local)?;
        }
        Ok(w.nsegs)
    }

    pub(super) fn exec_head(&mut self, qpn: u32, torn_ok: bool) -> Step {
        // The engine's scratch, lent to this WQE (a fresh one only if it is out, which no
        // caller does today).
        let mut s = self.scratch.take().unwrap_or_else(Scratch::new);
        let step = self.exec_head_with(qpn, torn_ok, &mut s);
        self.scratch = Some(s);
        step
    }

    fn exec_head_with(&mut self, qpn: u32, torn_ok: bool, s: &mut Scratch) -> Step {
        let q = self.qps.get(&qpn).expect("present");
        if let Some(t) = q.retry_at {
            if std::time::Instant::now() < t {
                return Step::Blocked { retried: false };
            }
        }
        if q.remote.is_some() {
            // (A parked head never gets here: `run_qp` skips the QP.)
            if let Some(d) = self.fabric_head_done(qpn) {
                let byte_cnt = d.len as u32;
                self.complete_head(
                    qpn, d.opcode, d.wqe_idx, d.signaled, d.nbb, byte_cnt, torn_ok,
                );
                return Step::Advanced;
            }
        }
        let q = self.qps.get(&qpn).expect("present");
        let buf = &mut s.buf;
        let (ring_len, nbb) = Self::read_head(q, buf);
        if let Some((idx, bf)) = &q.bf_copy {
            if u32::from(*idx) == q.sq_ci & wire::MLX5_WQE_INDEX_MASK {
                match Self::compare_bf(q, buf, ring_len, nbb, bf) {
                    Some(true) => self.stats.bf_copies += 1,
                    Some(false) => self.stats.bf_mismatches += 1,
                    None => {}
                }
            }
        }
        let q = self.qps.get(&qpn).expect("present");
        let w = &mut s.wqe;
        match Self::parse_into(q, q.sq_ci, buf, ring_len, w) {
            Ok(()) => {}
            Err(s) => {
                let idx = q.sq_ci as u16;
                let head = ((q.sq_ci as usize) * wire::MLX5_SEND_WQE_BB) & (ring_len - 1);
                self.fail_head(
                    qpn,
                    CtrlSeg::new_unchecked(&buf[head..]).opcode(),
                    idx,
                    nbb,
                    s,
                    torn_ok,
                );
                return Step::Advanced;
            }
        };
        // Injected transport error (fault injector).
        if let Some(f) = self.fault.as_mut() {
            if f.rng.chance(f.cfg.error_ppm) {
                f.stats.errors += 1;
                self.fail_head(
                    qpn,
                    w.opcode,
                    w.idx,
                    nbb,
                    wire::MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR,
                    torn_ok,
                );
                return Step::Advanced;
            }
        }
        let w = &*w;
        let q = self.qps.get(&qpn).expect("present");
        let local = &mut s.local;
        let nlocal = match self.local_spans(q.pd, w, local) {
            Ok(n) => n,
            Err(s) => {
                self.fail_head(qpn, w.opcode, w.idx, nbb, s, torn_ok);
                return Step::Advanced;
            }
        };
        let local = &local[..nlocal];
        let len = w.len();
        let (resp, byte_cnt) = match (q.qp_type, w.opcode) {
            (_, Opcode::Nop) => (Resp::Ok, 0),
            (QpType::Ud, _) => {
                if len > u64::from(q.attr.path_mtu) {
                    // A UD message never exceeds one MTU: local length error.
                    self.fail_head(
                        qpn,
                        w.opcode,
                        w.idx,
                        nbb,
                        wire::MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR,
                        torn_ok,
                    );
                    return Step::Advanced;
                }
                if w.dgid != self.gid && w.dgid != [0; 16] && self.port.is_some() {
                    // Another process's device: a datagram over the fabric (None: its
                    // ring is full, sent by a later pass).
                    match self.fabric_datagram(qpn, w, local) {
                        Some(r) => (r, len as u32),
                        None => return Step::Blocked { retried: false },
                    }
                } else {
                    (self.deliver_ud(qpn, w, local, torn_ok), len as u32)
                }
            }
            (_, _) if q.remote.is_some() => match self.fabric_send(qpn, w, local, nbb) {
                Some(r) => (r, len as u32),
                None => return Step::Blocked { retried: false },
            },
            (_, _) => {
                let peer = q.attr.remote_qpn;
                (
                    self.deliver_connected(qpn, peer, w, local, torn_ok),
                    len as u32,
                )
            }
        };
        // Across processes the RNR NAK brings the responder's timer, and the requester
        // waits real time in either mode (a pass of this engine is no time for the other).
        let fabric = self.qps[&qpn].remote.is_some();
        let peer_rnr_timer = match (&resp, fabric) {
            (Resp::Rnr, true) => self.fabric_rnr_timer(qpn),
            (Resp::Rnr, false) => self
                .qps
                .get(&self.qps[&qpn].attr.remote_qpn)
                .map_or(12, |p| p.attr.min_rnr_timer),
            _ => 12,
        };
        let q = self.qps.get_mut(&qpn).expect("present");
        match resp {
            Resp::Ok | Resp::Dropped => {
                let (opcode, idx, signaled) = (w.opcode, w.idx, w.signaled);
                self.complete_head(qpn, opcode, idx, signaled, nbb, byte_cnt, torn_ok);
                Step::Advanced
            }
            Resp::Nak(s) => {
                self.fail_head(qpn, w.opcode, w.idx, nbb, s, torn_ok);
                Step::Advanced
            }
            Resp::Rnr => {
                // The responder's RNR NAK carries its min_rnr_timer; the requester waits
                // that long before retrying (device-thread mode or across processes; a
                // pass otherwise).
                if torn_ok || fabric {
                    q.retry_at = Some(std::time::Instant::now() + rnr_timer(peer_rnr_timer));
                }
                if q.attr.rnr_retry >= 7 {
                    return Step::Blocked { retried: false };
                }
                let left = q.rnr_left.get_or_insert(q.attr.rnr_retry);
                if *left == 0 {
                    self.fail_head(
                        qpn,
                        w.opcode,
                        w.idx,
                        nbb,
                        wire::MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR,
                        torn_ok,
                    );
                    return Step::Advanced;
                }
                *left -= 1;
                Step::Blocked { retried: true }
            }
            Resp::NoPeer => {
                // (Across processes the fabric has waited its ACK timeout already.)
                if torn_ok && !fabric {
                    // Local ACK timeout: 4.096 µs × 2^timeout.
                    let t = std::time::Duration::from_nanos(4096 << q.attr.timeout.min(31));
                    q.retry_at = Some(std::time::Instant::now() + t);
                }
                // mlx5 counts every retry_cnt down, 7 included (only rnr_retry 7 is
                // "forever"): a dead peer always ends in RETRY_EXC.
                let left = q.retry_left.get_or_insert(q.attr.retry_cnt.min(7));
                if *left == 0 {
                    self.fail_head(
                        qpn,
                        w.opcode,
                        w.idx,
                        nbb,
                        wire::MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR,
                        torn_ok,
                    );
                    return Step::Advanced;
                }
                *left -= 1;
                Step::Blocked { retried: true }
            }
        }
    }

    /// The head WQE (`opcode`, WQE counter `idx`, `nbb` WQEBBs, `byte_cnt` bytes) completed:
    /// the SQ moves past it and, if `signaled`, its CQE is written.
    #[allow(clippy::too_many_arguments)]
    fn complete_head(
        &mut self,
        qpn: u32,
        opcode: Opcode,
        idx: u16,
        signaled: bool,
        nbb: u32,
        byte_cnt: u32,
        torn_ok: bool,
    ) {
        let Some(q) = self.qps.get_mut(&qpn) else {
            return;
        };
        q.rnr_left = None;
        q.retry_left = None;
        q.retry_at = None;
        q.sq_ci = q.sq_ci.wrapping_add(nbb);
        let byte_cnt = match opcode {
            Opcode::AtomicCs | Opcode::AtomicFa => 8,
            _ => byte_cnt,
        };
        if signaled {
            let f = CqeRepr {
                opcode: CqeOpcode::Req,
                qpn,
                s_wqe_opcode: u8::from(opcode),
                wqe_counter: idx,
                byte_cnt,
                ..Default::default()
            };
            let cqn = q.send_cqn;
            self.push_cqe(cqn, f, stream(qpn, false), torn_ok);
        }
    }

    /// The head WQE failed: error CQE (always, whatever CQ_UPDATE says), QP to ERR.
    pub(super) fn fail_head(
        &mut self,
        qpn: u32,
        wqe_opcode: Opcode,
        idx: u16,
        nbb: u32,
        s: u8,
        torn_ok: bool,
    ) {
        let Some(q) = self.qps.get_mut(&qpn) else {
            return;
        };
        q.sq_ci = q.sq_ci.wrapping_add(nbb);
        q.state = QpState::Err;
        q.rnr_left = None;
        q.retry_left = None;
        q.retry_at = None;
        let cqn = q.send_cqn;
        let f = CqeRepr {
            opcode: CqeOpcode::ReqErr,
            qpn,
            s_wqe_opcode: u8::from(wqe_opcode),
            wqe_counter: idx,
            syndrome: Syndrome::from(s),
            ..Default::default()
        };
        self.push_cqe(cqn, f, stream(qpn, false), torn_ok);
    }

    /// Flush the head WQE of a QP in ERR.
    pub(super) fn flush_head(&mut self, qpn: u32, torn_ok: bool) {
        let mut buf = [0u8; MAX_WQE];
        let q = self.qps.get_mut(&qpn).expect("present");
        let (ring_len, nbb) = Self::read_head(q, &mut buf);
        let idx = q.sq_ci as u16;
        let head = ((q.sq_ci as usize) * wire::MLX5_SEND_WQE_BB) & (ring_len - 1);
        q.sq_ci = q.sq_ci.wrapping_add(nbb);
        let cqn = q.send_cqn;
        let f = CqeRepr {
            opcode: CqeOpcode::ReqErr,
            qpn,
            s_wqe_opcode: u8::from(CtrlSeg::new_unchecked(&buf[head..]).opcode()),
            wqe_counter: idx,
            syndrome: Syndrome::WrFlush,
            ..Default::default()
        };
        self.push_cqe(cqn, f, stream(qpn, false), torn_ok);
    }

    /// Move a responder QP to ERR (the requester learns of it through its NAK).
    pub(super) fn responder_error(&mut self, qpn: u32) {
        if let Some(q) = self.qps.get_mut(&qpn) {
            q.state = QpState::Err;
        }
    }

    /// RC / UC delivery to `peer`.
    pub(super) fn deliver_connected(
        &mut self,
        qpn: u32,
        peer: u32,
        w: &Wqe,
        local: &[Span],
        torn_ok: bool,
    ) -> Resp {
        let reliable = self.qps.get(&qpn).map(|q| q.qp_type) == Some(QpType::Rc);
        let lost = if reliable {
            Resp::NoPeer
        } else {
            Resp::Dropped
        };
        let Some(p) = self.qps.get(&peer) else {
            return lost;
        };
        if !matches!(p.state, QpState::Rtr | QpState::Rts) || p.qp_type != self.qps[&qpn].qp_type {
            return lost;
        }
        let len = w.len();
        // Remote checks first (the responder validates the RETH before touching anything).
        let remote = match w.opcode {
            // A zero-length RDMA READ or WRITE carries no address or rkey the responder checks
            // (IBA C9-88; rxe does the same).
            Opcode::RdmaWrite | Opcode::RdmaWriteImm | Opcode::RdmaRead if len == 0 => {
                Ok(EMPTY_SPAN)
            }
            Opcode::RdmaWrite | Opcode::RdmaWriteImm => {
                self.remote_span(p, w.raddr, len, w.rkey, Access::REMOTE_WRITE)
            }
            Opcode::RdmaRead => self.remote_span(p, w.raddr, len, w.rkey, Access::REMOTE_READ),
            Opcode::AtomicCs | Opcode::AtomicFa => {
                if w.raddr % 8 != 0 {
                    // A misaligned atomic: the responder NAKs it as an invalid request.
                    self.responder_error(peer);
                    return Resp::Nak(wire::MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR);
                }
                self.remote_span(p, w.raddr, 8, w.rkey, Access::REMOTE_ATOMIC)
            }
            _ => Ok(EMPTY_SPAN),
        };
        let remote = match remote {
            Ok(r) => r,
            Err(s) => {
                if !reliable {
                    return Resp::Dropped;
                }
                // rxe and the IBA agree: a remote access violation puts the responder QP in
                // ERR too (its posted receives are then flushed).
                self.responder_error(peer);
                return Resp::Nak(s);
            }
        };
        match w.opcode {
            Opcode::RdmaWrite => {
                // SAFETY: `remote` was checked against an MR of the responder's PD and
                // `local` against MRs of the requester (or points into the WQE buffer); the
                // registration contract keeps both valid.
                unsafe { gather_into(local, remote) };
                self.stats.bytes += len;
                Resp::Ok
            }
            Opcode::RdmaRead => {
                // SAFETY: as above, direction reversed (local spans need LOCAL_WRITE, checked).
                unsafe { scatter_from(remote, local) };
                self.stats.bytes += len;
                Resp::Ok
            }
            Opcode::AtomicCs | Opcode::AtomicFa => {
                let target = remote.ptr as *mut u64;
                // SAFETY: `remote` is an 8-byte, 8-aligned range of a registered MR; the
                // device's atomic is modelled as an unaligned-safe read-modify-write. The old
                // value lands in host byte order (mlx5 with the kernel's atomic endian mode).
                unsafe {
                    let old = std::ptr::read_volatile(target);
                    let new = if w.opcode == Opcode::AtomicCs {
                        if old == w.compare {
                            w.swap_add
                        } else {
                            old
                        }
                    } else {
                        old.wrapping_add(w.swap_add)
                    };
                    std::ptr::write_volatile(target, new);
                    std::ptr::write_unaligned(local[0].ptr as *mut u64, old);
                }
                self.stats.bytes += 8;
                Resp::Ok
            }
            Opcode::Send | Opcode::SendImm | Opcode::RdmaWriteImm => {
                let r = self.consume_recv(qpn, peer, w, local, remote, None, torn_ok);
                if !reliable && matches!(r, Resp::Rnr | Resp::Nak(_)) {
                    // UC has no acks: the requester never hears of the responder's trouble
                    // (the responder side, a LOC_LEN CQE and ERR, has happened already).
                    return Resp::Dropped;
                }
                r
            }
            _ => Resp::Ok,
        }
    }

    /// UD delivery: address vector → destination QP, Q_Key check, 40-byte GRH space.
    pub(super) fn deliver_ud(&mut self, qpn: u32, w: &Wqe, local: &[Span], torn_ok: bool) -> Resp {
        let Some(p) = self.qps.get(&w.dqpn) else {
            return Resp::Dropped;
        };
        if p.qp_type != QpType::Ud || !matches!(p.state, QpState::Rtr | QpState::Rts) {
            return Resp::Dropped;
        }
        // IBA: a Q_Key with its high-order bit set in the request means "use the sending
        // QP's own Q_Key". A mismatch drops the datagram silently.
        /// The high-order bit of a request's Q_Key (IBA): use the sending QP's own Q_Key.
        const QKEY_USE_OWN: u32 = 0x8000_0000;
        let qkey = if w.qkey & QKEY_USE_OWN != 0 {
            self.qps.get(&qpn).map_or(0, |q| q.attr.qkey)
        } else {
            w.qkey
        };
        if p.attr.qkey != qkey {
            return Resp::Dropped;
        }
        let peer = w.dqpn;
        let gid = self.gid;
        match self.consume_recv(qpn, peer, w, local, EMPTY_SPAN, Some(gid), torn_ok) {
            Resp::Rnr | Resp::Nak(_) | Resp::NoPeer => Resp::Dropped,
            r => r,
        }
    }
}

/// The RNR NAK timer of an IBA-encoded `min_rnr_timer` (0 = 655.36 ms, 1 = 0.01 ms, ...,
/// 12 = 0.64 ms, 31 = 491.52 ms).
pub(super) fn rnr_timer(code: u8) -> std::time::Duration {
    const US: [u32; 32] = [
        655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560,
        3_840, 5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880,
        163_840, 245_760, 327_680, 491_520,
    ];
    std::time::Duration::from_micros(u64::from(US[usize::from(code & 31)]))
}
