//! Executing steps: `connect` (both QPs here, or this side's across the link), `post`
//! (SGEs into the runner's buffers, remote addresses and rkeys of the target buffer, address
//! handles on first use, expected rejections), `post_recv`, rings (checking the staged
//! count first), `error` moves and `state` checks. In a split run, a step of the other
//! side's queues is skipped.

use crate::endpoint::{connect_qp_client, connect_qp_server};
use crate::providers::{
    MemoryRegion, Payload, Provider, QueuePair, RecvQueue, RecvWr, SendFlags, SendOp, SendQueue,
    SendWr, Sge, UdDest,
};

use super::{Owner, Runner, BAD_RKEY_XOR};
use crate::scenario::split::{Link, Side};
use crate::scenario::{
    post_error_name, ExpectCqe, ExpectEvent, Failure, PostOp, PostStep, Range, RecvStep,
    RecvTarget, Signal, Step, StepKind,
};

impl<'s, P: Provider> Runner<'s, P> {
    /// One step of a split run: this side's part of it.
    pub(super) fn step_split(
        &mut self,
        p: &mut P,
        step: &Step,
        link: &mut Link,
    ) -> Result<(), Failure> {
        let line = step.line;
        match &step.kind {
            StepKind::Connect { a, b, opts } => {
                let co = self.connect_opts(opts);
                let to = self.opts.poll_timeout;
                let (q, res) = match link.side {
                    Side::A => {
                        let Some(addr) = link.peer else {
                            return Err(self.fail(
                                line,
                                "connect",
                                "side A without a peer address",
                            ));
                        };
                        (
                            *a,
                            connect_qp_client(p, &mut self.qps[*a], addr, &co, None, to),
                        )
                    }
                    Side::B => {
                        let Some(l) = link.listener.as_ref() else {
                            return Err(self.fail(line, "connect", "side B without a listener"));
                        };
                        (
                            *b,
                            connect_qp_server(p, &mut self.qps[*b], l, &co, None, to),
                        )
                    }
                };
                let conn = res.map_err(|e| {
                    self.fail(
                        line,
                        "connect",
                        format!("QP '{}' across the link: {e}", self.sc.qps[q].name),
                    )
                })?;
                self.qkey = co.qkey;
                self.eps[q] = Some((conn.local, co));
                Ok(())
            }
            StepKind::Post(ps) if !self.own_qp(ps.qp) => Ok(()),
            StepKind::PostRecv(rs) if !self.own_recv(rs.target) => Ok(()),
            StepKind::Ring(q) | StepKind::ToError(q) if !self.own_qp(*q) => Ok(()),
            StepKind::State { qp, .. } if !self.own_qp(*qp) => Ok(()),
            StepKind::RingRecv(t) if !self.own_recv(*t) => Ok(()),
            // A QP's event or fault on the QP's side; a port's on side A.
            StepKind::Event(ExpectEvent { qp: Some(q), .. })
            | StepKind::Fault { qp: Some(q), .. }
                if !self.own_qp(*q) =>
            {
                Ok(())
            }
            StepKind::Event(ExpectEvent { qp: None, .. }) | StepKind::Fault { qp: None, .. }
                if link.side == Side::B =>
            {
                Ok(())
            }
            StepKind::Expect(group) => {
                let Some(s) = &self.split else {
                    return self.expect(p, group);
                };
                // This side's queues only (a wr_id no post names stays: `expect` says so).
                let mine: Vec<ExpectCqe> = group
                    .iter()
                    .filter(|e| s.plan.wr.get(&e.wr_id).is_none_or(|w| *w == s.side))
                    .cloned()
                    .collect();
                self.expect(p, &mine)
            }
            _ => self.step(p, step),
        }
    }

    pub(super) fn step(&mut self, p: &mut P, step: &Step) -> Result<(), Failure> {
        let line = step.line;
        match &step.kind {
            StepKind::Connect { a, b, opts } => {
                let co = self.connect_opts(opts);
                let (a, b) = (*a, *b);
                let ea = p
                    .endpoint(&self.qps[a], &co)
                    .map_err(|e| self.fail(line, "connect: endpoint", e.to_string()))?;
                let eb = p
                    .endpoint(&self.qps[b], &co)
                    .map_err(|e| self.fail(line, "connect: endpoint", e.to_string()))?;
                for (q, l, r) in [(a, &ea, &eb), (b, &eb, &ea)] {
                    p.connect(&mut self.qps[q], l, r, &co).map_err(|e| {
                        self.fail(
                            line,
                            "connect",
                            format!("QP '{}': {e}", self.sc.qps[q].name),
                        )
                    })?;
                }
                self.qkey = co.qkey;
                self.eps[a] = Some((ea, co));
                self.eps[b] = Some((eb, co));
            }
            StepKind::Post(ps) => self.post(p, ps, line)?,
            StepKind::PostRecv(rs) => self.post_recv(rs, line)?,
            StepKind::Ring(q) => {
                let staged = self.qps[*q].sq().staged();
                if staged != self.staged[*q] {
                    return Err(self.fail(
                        line,
                        "ring",
                        format!(
                            "QP '{}': the SQ reports {staged} staged requests, {} were posted since the last ring",
                            self.sc.qps[*q].name, self.staged[*q]
                        ),
                    ));
                }
                self.qps[*q].sq().ring();
                self.staged[*q] = 0;
            }
            StepKind::RingRecv(t) => match *t {
                RecvTarget::Qp(q) => self.qps[q].rq().ring(),
                RecvTarget::Srq(s) => self.srqs[s].ring(),
            },
            StepKind::ToError(q) => {
                p.to_error(&mut self.qps[*q])
                    .map_err(|e| self.fail(line, "error", e.to_string()))?;
            }
            StepKind::Expect(group) => self.expect(p, group)?,
            StepKind::Event(e) => self.await_event(p, e)?,
            StepKind::Fault { fault, qp } => {
                let q = qp.map(|q| &self.qps[q]);
                p.inject_fault(q, *fault)
                    .map_err(|e| self.fail(line, "fault", e.to_string()))?;
            }
            StepKind::State { qp, state } => {
                let got = self.qps[*qp].state();
                if got != *state {
                    let f = self.fail(
                        line,
                        "state",
                        format!("QP '{}' is {got}, expected {state}", self.sc.qps[*qp].name),
                    );
                    if !self.opts.keep_going {
                        return Err(f);
                    }
                    self.recorded.extend(f.mismatches);
                }
            }
        }
        Ok(())
    }

    pub(super) fn sge(&self, r: &Range, shift: usize) -> Sge {
        Sge {
            addr: self.base[r.buf] as u64 + (r.off + shift) as u64,
            length: r.len as u32,
            lkey: self.mrs[r.buf].lkey(),
        }
    }

    pub(super) fn post(&mut self, p: &mut P, ps: &PostStep, line: usize) -> Result<(), Failure> {
        // The destination's address handle, created on first use.
        if let Some(d) = ps.dest {
            if self.ahs[d].is_none() {
                let Some((ep, co)) = self.eps[d] else {
                    return Err(self.fail(
                        line,
                        "post",
                        format!("dest={}: that QP is not connected", self.sc.qps[d].name),
                    ));
                };
                let ah = p
                    .create_ah(&self.pd, &ep, &co)
                    .map_err(|e| self.fail(line, "post: create_ah", e.to_string()))?;
                self.ahs[d] = Some(ah);
            }
        }
        for i in 0..ps.repeat as usize {
            let shift = i * ps.step;
            let wr_id = ps.wr_id + i as u64;
            let sges: Vec<Sge> = ps.sges.iter().map(|r| self.sge(r, shift)).collect();
            let inline: Vec<u8> = match &ps.inline {
                Some(r) => self.initial[r.buf][r.off + shift..r.off + shift + r.len].to_vec(),
                None => Vec::new(),
            };
            let (raddr, rkey) = match ps.remote {
                Some((b, off)) => {
                    // Split: the peer process's buffer.
                    let (base, k) = match &self.split {
                        Some(s) => s.peer_bufs[b],
                        None => (self.base[b] as u64, self.mrs[b].rkey()),
                    };
                    (
                        base + (off + shift) as u64,
                        if ps.bad_rkey { k ^ BAD_RKEY_XOR } else { k },
                    )
                }
                None => (0, 0),
            };
            let imm = ps.imm.wrapping_add((i as u32).wrapping_mul(ps.imm_step));
            let op = match ps.op {
                PostOp::Send => SendOp::Send,
                PostOp::SendImm => SendOp::SendImm { imm },
                PostOp::Write => SendOp::Write { raddr, rkey },
                PostOp::WriteImm => SendOp::WriteImm { raddr, rkey, imm },
                PostOp::Read => SendOp::Read { raddr, rkey },
                PostOp::Cas => SendOp::CompareSwap {
                    raddr,
                    rkey,
                    compare: ps.compare,
                    swap: ps.swap,
                },
                PostOp::Faa => SendOp::FetchAdd {
                    raddr,
                    rkey,
                    add: ps.add,
                },
            };
            let signaled = match ps.signal {
                Signal::All => true,
                Signal::Last => i + 1 == ps.repeat as usize,
                Signal::None => false,
            };
            let mut flags = SendFlags::NONE;
            if signaled {
                flags = flags | SendFlags::SIGNALED;
            }
            if ps.fence {
                flags = flags | SendFlags::FENCE;
            }
            if ps.solicited {
                flags = flags | SendFlags::SOLICITED;
            }
            let ud = match ps.dest {
                Some(d) => {
                    let ah = self.ahs[d].as_ref().ok_or_else(|| {
                        self.fail(
                            line,
                            "post",
                            format!("dest={}: that QP is not connected", self.sc.qps[d].name),
                        )
                    })?;
                    Some(UdDest {
                        ah,
                        remote_qpn: self.qps[d].qpn(),
                        remote_qkey: self.qkey,
                    })
                }
                None => None,
            };
            let wr = SendWr {
                wr_id,
                op,
                payload: if ps.inline.is_some() {
                    Payload::Inline(&inline)
                } else {
                    Payload::Sges(&sges)
                },
                flags,
                ud,
            };
            let qp = ps.qp;
            let res = self.qps[qp].sq().post(wr);
            match (res, &ps.reject) {
                (Ok(()), None) => {
                    let sig = signaled || self.sc.qps[qp].sig_all;
                    self.sq_out[qp].push_back((wr_id, sig));
                    self.owner.insert(wr_id, Owner::Sq(qp));
                    self.staged[qp] += 1;
                    self.posted += 1;
                }
                (Ok(()), Some(want)) => {
                    return Err(self.fail(
                        line,
                        "post",
                        format!(
                            "wr={wr_id}: expected rejection '{want}', but the post was accepted"
                        ),
                    ))
                }
                (Err(rej), want) => {
                    let got = post_error_name(&rej.error);
                    if want.as_deref() != Some(got) {
                        return Err(self.fail(
                            line,
                            "post",
                            format!(
                                "wr={wr_id}: expected {}, got rejection '{got}': {}",
                                want.as_deref()
                                    .map_or("the post to be accepted".to_string(), |w| format!(
                                        "rejection '{w}'"
                                    )),
                                rej.error
                            ),
                        ));
                    }
                    if rej.wr.wr_id != wr_id {
                        return Err(self.fail(
                            line,
                            "post",
                            format!(
                                "rejected request handed back with wr_id {} instead of {wr_id}",
                                rej.wr.wr_id
                            ),
                        ));
                    }
                    self.rejected += 1;
                }
            }
        }
        Ok(())
    }

    pub(super) fn post_recv(&mut self, rs: &RecvStep, line: usize) -> Result<(), Failure> {
        for i in 0..rs.repeat as usize {
            let shift = i * rs.step;
            let wr_id = rs.wr_id + i as u64;
            let sges: Vec<Sge> = rs.sges.iter().map(|r| self.sge(r, shift)).collect();
            let wr = RecvWr { wr_id, sges: &sges };
            let res = match rs.target {
                RecvTarget::Qp(q) => self.qps[q].rq().post_recv(wr),
                RecvTarget::Srq(s) => self.srqs[s].post_recv(wr),
            };
            match (res, &rs.reject) {
                (Ok(()), None) => {
                    self.recv_out.entry(rs.target).or_default().push_back(wr_id);
                    self.owner.insert(wr_id, Owner::Recv(rs.target));
                    self.posted += 1;
                }
                (Ok(()), Some(want)) => {
                    return Err(self.fail(
                        line,
                        "post_recv",
                        format!(
                            "wr={wr_id}: expected rejection '{want}', but the post was accepted"
                        ),
                    ))
                }
                (Err(rej), want) => {
                    let got = post_error_name(&rej.error);
                    if want.as_deref() != Some(got) || rej.wr.wr_id != wr_id {
                        return Err(self.fail(
                            line,
                            "post_recv",
                            format!(
                                "wr={wr_id}: expected {}, got rejection '{got}' (wr_id {}): {}",
                                want.as_deref()
                                    .map_or("the post to be accepted".to_string(), |w| format!(
                                        "rejection '{w}'"
                                    )),
                                rej.wr.wr_id,
                                rej.error
                            ),
                        ));
                    }
                    self.rejected += 1;
                }
            }
        }
        Ok(())
    }
}
