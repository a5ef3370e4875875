//! The scenario runner, generic over [`Provider`].
//!
//! The runner is control-path code: it allocates freely (SGE lists, bookkeeping). The
//! provider's post/poll path it drives is what the scenarios test.

use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use memmap2::MmapMut;

use super::split::{Link, Plan, Side};
use super::*;
use crate::endpoint::{connect_qp_client, connect_qp_server};
use crate::providers::{
    Access, Completion, CompletionQueue, ConnectOpts, MemoryRegion, Payload, Provider, QpCaps,
    QpConfig, QueuePair, RecvQueue, RecvWr, SendFlags, SendOp, SendQueue, SendWr, Sge, UdDest,
    WcFlags,
};

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
    eps: Vec<Option<(crate::providers::QpEndpoint, ConnectOpts)>>,
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

/// One completion, printed in full.
pub(crate) fn fmt_cqe(c: &Completion) -> String {
    let mut s = format!("wr={} {}", c.wr_id, c.status);
    let _ = write!(
        s,
        " opcode={} len={} qp_num={:#x} src_qp={:#x}",
        c.opcode.name(),
        c.byte_len,
        c.qp_num,
        c.src_qp
    );
    if c.flags.contains(WcFlags::WITH_IMM) {
        let _ = write!(s, " imm={:#x}", c.imm);
    }
    if c.flags.contains(WcFlags::GRH) {
        s.push_str(" grh");
    }
    if c.covered > 0 {
        let _ = write!(s, " covered={} from={}", c.covered, c.covered_from);
    }
    if c.vendor_err != 0 {
        let _ = write!(s, " vendor_err={:#x}", c.vendor_err);
    }
    s
}

fn fmt_expect(e: &ExpectCqe, sc: &Scenario) -> String {
    let mut s = format!("wr={} {}", e.wr_id, e.status);
    if let Some(o) = e.opcode {
        let _ = write!(s, " {}", o.name());
    }
    if let Some(l) = e.len {
        let _ = write!(s, " len={l}");
    }
    if let Some(i) = e.imm {
        let _ = write!(s, " imm={i:#x}");
    }
    if let Some(q) = e.qp {
        let _ = write!(s, " qp={}", sc.qps[q].name);
    }
    if let Some(q) = e.src_qp {
        let _ = write!(s, " src_qp={}", sc.qps[q].name);
    }
    if e.grh {
        s.push_str(" grh");
    }
    if let Some(c) = e.covered {
        let _ = write!(s, " covered={c}");
    }
    let _ = write!(s, " (line {})", e.line);
    s
}

/// A hex window of `bytes` from a little before `at` to a little after `end` (at most 32
/// bytes), the bytes of `at..end` in brackets.
fn hex_window(bytes: &[u8], at: usize, end: usize) -> String {
    let start = at.saturating_sub(8) & !7;
    let stop = (end + 8).min(start + 32).min(bytes.len()).max(at + 1);
    let mut s = format!("{start:#08x}:");
    for (i, b) in bytes[start..stop].iter().enumerate() {
        if (at..end).contains(&(start + i)) {
            let _ = write!(s, " [{b:02x}]");
        } else {
            let _ = write!(s, " {b:02x}");
        }
    }
    s
}

/// Bytes compared (those `care` marks) and the half-open ranges where `got` differs from
/// `want`.
fn diff_ranges(got: &[u8], want: &[u8], care: &[bool]) -> (u64, Vec<(usize, usize)>) {
    let mut n = 0u64;
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for k in 0..want.len() {
        if !care[k] {
            continue;
        }
        n += 1;
        if got[k] != want[k] {
            match ranges.last_mut() {
                Some(r) if r.1 == k => r.1 = k + 1,
                _ => ranges.push((k, k + 1)),
            }
        }
    }
    (n, ranges)
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

    fn setup(p: &mut P, sc: &'s Scenario, opts: &'s RunOpts) -> Result<Self, Failure> {
        let fail = |line: usize, step: &str, detail: String| Failure {
            scenario: sc.name.clone(),
            file: sc.file.clone(),
            mismatches: vec![Mismatch {
                line,
                step: step.to_string(),
                detail,
            }],
        };
        // Initial images: fill, then the `set` lines in order.
        let mut initial: Vec<Vec<u8>> = sc
            .bufs
            .iter()
            .map(|b| {
                let mut v = vec![0u8; b.size];
                b.fill.apply(&mut v);
                v
            })
            .collect();
        for e in &sc.sets {
            apply_edit(&mut initial, None, e);
        }
        let mut mem = Vec::with_capacity(sc.bufs.len());
        let mut base = Vec::with_capacity(sc.bufs.len());
        for (b, img) in sc.bufs.iter().zip(&initial) {
            let mut m = MmapMut::map_anon(b.size)
                .map_err(|e| fail(b.line, "setup: buf", format!("mmap of {} B: {e}", b.size)))?;
            m.copy_from_slice(img);
            base.push(m.as_mut_ptr());
            mem.push(m);
        }
        let pd = p
            .alloc_pd()
            .map_err(|e| fail(0, "setup: alloc_pd", e.to_string()))?;
        let mut mrs = Vec::with_capacity(sc.bufs.len());
        for (i, b) in sc.bufs.iter().enumerate() {
            // SAFETY: `base[i]` points to `b.size` bytes of the anonymous mapping `mem[i]`,
            // which the runner keeps until after the MRs are dropped (field order).
            let mr = unsafe { p.reg_mr(&pd, base[i], b.size, Access(b.access)) }
                .map_err(|e| fail(b.line, "setup: reg_mr", e.to_string()))?;
            mrs.push(mr);
        }
        let mut cqs = Vec::new();
        for c in &sc.cqs {
            cqs.push(
                p.create_cq(c.size)
                    .map_err(|e| fail(c.line, "setup: create_cq", e.to_string()))?,
            );
        }
        let mut srqs = Vec::new();
        for s in &sc.srqs {
            srqs.push(
                p.create_srq(&pd, s.max_wr, s.max_sge)
                    .map_err(|e| fail(s.line, "setup: create_srq", e.to_string()))?,
            );
        }
        let mut qps = Vec::new();
        let mut qp_cq = Vec::new();
        for q in &sc.qps {
            let scq = match q.send_cq {
                Some(c) => c,
                None => {
                    let recv = match q.srq {
                        Some(s) => sc.srqs[s].max_wr,
                        None => q.rq,
                    };
                    cqs.push(
                        p.create_cq(q.sq + recv)
                            .map_err(|e| fail(q.line, "setup: create_cq", e.to_string()))?,
                    );
                    cqs.len() - 1
                }
            };
            let rcq = q.recv_cq.unwrap_or(scq);
            let cfg = QpConfig {
                qp_type: q.qp_type,
                caps: QpCaps {
                    max_send_wr: q.sq,
                    max_recv_wr: q.rq,
                    max_send_sge: q.send_sge,
                    max_recv_sge: q.recv_sge,
                    max_inline_data: q.inline,
                },
                sq_sig_all: q.sig_all,
            };
            let srq = q.srq.map(|s| &mut srqs[s]);
            let qp = if rcq == scq {
                p.create_qp(&pd, &mut cqs[scq], None, srq, &cfg)
            } else {
                let (s, r) = two_mut(&mut cqs, scq, rcq);
                p.create_qp(&pd, s, Some(r), srq, &cfg)
            }
            .map_err(|e| fail(q.line, "setup: create_qp", e.to_string()))?;
            qps.push(qp);
            qp_cq.push((scq, rcq));
        }
        let n = sc.qps.len();
        Ok(Runner {
            sc,
            opts,
            ahs: (0..n).map(|_| None).collect(),
            qps,
            srqs,
            cqs,
            mrs,
            pd,
            base,
            mem,
            initial,
            qp_cq,
            qkey: ConnectOpts::default().qkey,
            eps: vec![None; n],
            sq_out: vec![VecDeque::new(); n],
            recv_out: HashMap::new(),
            owner: HashMap::new(),
            staged: vec![0; n],
            posted: 0,
            rejected: 0,
            completions: 0,
            split: None,
            recorded: Vec::new(),
        })
    }

    fn connect_opts(&self, o: &ConnectOverrides) -> ConnectOpts {
        let mut c = ConnectOpts {
            port: self.opts.port,
            gid_index: self.opts.gid_index,
            // Below 7: rxe never gives up at 7, and a scenario must end.
            retry_cnt: 6,
            ..ConnectOpts::default()
        };
        if let Some(v) = o.timeout {
            c.timeout = v;
        }
        if let Some(v) = o.retry_cnt {
            c.retry_cnt = v;
        }
        if let Some(v) = o.rnr_retry {
            c.rnr_retry = v;
        }
        if let Some(v) = o.min_rnr_timer {
            c.min_rnr_timer = v;
        }
        c
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

    /// One step of a split run: this side's part of it.
    fn step_split(&mut self, p: &mut P, step: &Step, link: &mut Link) -> Result<(), Failure> {
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

    fn step(&mut self, p: &mut P, step: &Step) -> Result<(), Failure> {
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

    fn sge(&self, r: &Range, shift: usize) -> Sge {
        Sge {
            addr: self.base[r.buf] as u64 + (r.off + shift) as u64,
            length: r.len as u32,
            lkey: self.mrs[r.buf].lkey(),
        }
    }

    fn post(&mut self, p: &mut P, ps: &PostStep, line: usize) -> Result<(), Failure> {
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

    fn post_recv(&mut self, rs: &RecvStep, line: usize) -> Result<(), Failure> {
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

    /// Poll every CQ once into `buf`; returns (cq index, completion) pairs.
    fn poll_all(&mut self, buf: &mut [Completion], out: &mut Vec<(usize, Completion)>) {
        out.clear();
        for (ci, cq) in self.cqs.iter_mut().enumerate() {
            let n = cq.poll(buf);
            out.extend(buf[..n].iter().map(|c| (ci, *c)));
        }
    }

    fn expect(&mut self, p: &mut P, group: &[ExpectCqe]) -> Result<(), Failure> {
        let group: Vec<&ExpectCqe> = group
            .iter()
            .filter(|e| self.opts.applies(&e.variant))
            .collect();
        if group.is_empty() {
            return Ok(());
        }
        let mut owners = Vec::with_capacity(group.len());
        for e in &group {
            let o = self.owner.get(&e.wr_id).copied().ok_or_else(|| {
                self.fail(
                    e.line,
                    "expect",
                    format!("wr={} was never accepted by a post", e.wr_id),
                )
            })?;
            owners.push(o);
        }
        let mut matched = vec![false; group.len()];
        let mut seen: Vec<String> = Vec::new();
        let deadline = Instant::now() + self.opts.poll_timeout;
        let mut buf = [Completion::EMPTY; 16];
        let mut got = Vec::new();
        let mut idle_since = Instant::now();
        while matched.iter().any(|m| !m) {
            self.poll_all(&mut buf, &mut got);
            if got.is_empty() {
                let now = Instant::now();
                if now > deadline {
                    let missing: Vec<String> = group
                        .iter()
                        .zip(&matched)
                        .filter(|(_, m)| !**m)
                        .map(|(e, _)| format!("  missing:  {}", fmt_expect(e, self.sc)))
                        .collect();
                    let line = group
                        .iter()
                        .zip(&matched)
                        .find(|(_, m)| !**m)
                        .map_or(0, |(e, _)| e.line);
                    return Err(self.fail(
                        line,
                        "expect",
                        format!(
                            "timed out after {:?} waiting for completions\n{}\n  arrived:  {}",
                            self.opts.poll_timeout,
                            missing.join("\n"),
                            if seen.is_empty() {
                                "(none)".to_string()
                            } else {
                                seen.join("; ")
                            }
                        ),
                    ));
                }
                p.progress();
                if now.duration_since(idle_since) > Duration::from_millis(1) {
                    std::thread::sleep(Duration::from_micros(100));
                } else {
                    std::thread::yield_now();
                }
                continue;
            }
            idle_since = Instant::now();
            for &(ci, c) in &got {
                seen.push(fmt_cqe(&c));
                self.take(ci, &c, &group, &owners, &mut matched)?;
            }
        }
        Ok(())
    }

    fn qp_name_of(&self, qpn: u32) -> String {
        self.qps
            .iter()
            .position(|q| q.qpn() == qpn)
            .map_or(format!("{qpn:#x} (not ours)"), |i| {
                self.sc.qps[i].name.clone()
            })
    }

    /// What differs between completion `c` (polled from CQ `ci`) and expectation `e` of a
    /// request of queue `owner`: its CQ, QP and fields (not the accounting).
    fn field_errs(&self, ci: usize, c: &Completion, e: &ExpectCqe, owner: Owner) -> Vec<String> {
        let mut errs: Vec<String> = Vec::new();
        // Which QP and CQ.
        let want_qp = match (e.qp, owner) {
            (Some(q), _) => q,
            (None, Owner::Sq(q)) | (None, Owner::Recv(RecvTarget::Qp(q))) => q,
            (None, Owner::Recv(RecvTarget::Srq(_))) => {
                return vec!["an SRQ receive expected without qp= (the parser requires it)".into()]
            }
        };
        let want_cq = match owner {
            Owner::Sq(q) => self.qp_cq[q].0,
            Owner::Recv(_) => self.qp_cq[want_qp].1,
        };
        if ci != want_cq {
            errs.push(format!("arrived on CQ #{ci}, expected CQ #{want_cq}"));
        }
        let want_qpn = self.qps[want_qp].qpn();
        if c.qp_num != want_qpn {
            errs.push(format!(
                "qp_num {:#x} ({}), expected {want_qpn:#x} ({})",
                c.qp_num,
                self.qp_name_of(c.qp_num),
                self.sc.qps[want_qp].name
            ));
        }
        if c.status != e.status {
            errs.push(format!("status {}, expected {}", c.status, e.status));
        }
        if e.status == WcStatus::Success && c.status == WcStatus::Success {
            if let Some(o) = e.opcode {
                if c.opcode != o {
                    errs.push(format!("opcode {}, expected {}", c.opcode.name(), o.name()));
                }
            }
            if let Some(l) = e.len {
                if c.byte_len != l {
                    errs.push(format!("byte_len {}, expected {l}", c.byte_len));
                }
            }
            let is_recv = matches!(owner, Owner::Recv(_));
            match e.imm {
                Some(v) => {
                    if !c.flags.contains(WcFlags::WITH_IMM) {
                        errs.push(format!("no immediate, expected imm={v:#x}"));
                    } else if c.imm != v {
                        errs.push(format!("imm={:#x}, expected {v:#x}", c.imm));
                    }
                }
                None if is_recv && c.flags.contains(WcFlags::WITH_IMM) => {
                    errs.push(format!("immediate {:#x} present, none expected", c.imm));
                }
                None => {}
            }
            // Only a UD receive buffer holds the GRH; on RC/UC over RoCE the flag is set
            // (rxe, mlx5) but means nothing to the receiver.
            let ud = self.sc.qps[want_qp].qp_type == crate::providers::QpType::Ud;
            if is_recv && ud && c.flags.contains(WcFlags::GRH) != e.grh {
                errs.push(format!(
                    "GRH flag {}, expected {}",
                    c.flags.contains(WcFlags::GRH),
                    e.grh
                ));
            }
            if let Some(s) = e.src_qp {
                let want = self.qps[s].qpn();
                if c.src_qp != want {
                    errs.push(format!("src_qp {:#x}, expected {want:#x}", c.src_qp));
                }
            }
        }
        errs
    }

    /// Which expectation of `group` completion `c` answers: the unmatched one with its wr_id;
    /// inside an any-order block, for a receive of an SRQ whose wr_id the block lists, the
    /// first unmatched expectation of the block on that SRQ whose fields all agree (which
    /// receive of an SRQ a sender's message lands in depends on the arrival order).
    fn pick(
        &self,
        ci: usize,
        c: &Completion,
        group: &[&ExpectCqe],
        owners: &[Owner],
        matched: &[bool],
    ) -> Option<usize> {
        let n = group.len();
        let exact = (0..n).find(|&k| !matched[k] && group[k].wr_id == c.wr_id);
        let Some(o @ Owner::Recv(RecvTarget::Srq(_))) = self.owner.get(&c.wr_id).copied() else {
            return exact;
        };
        let in_block = |j: usize| group[j].any_order && owners[j] == o;
        if !(0..n).any(|j| in_block(j) && group[j].wr_id == c.wr_id) {
            return exact;
        }
        let cands: Vec<usize> = (0..n).filter(|&j| !matched[j] && in_block(j)).collect();
        cands
            .iter()
            .copied()
            .find(|&j| self.field_errs(ci, c, group[j], owners[j]).is_empty())
            .or(exact.filter(|k| cands.contains(k)))
            .or(cands.first().copied())
    }

    /// Check one arrived completion against the group.
    fn take(
        &mut self,
        ci: usize,
        c: &Completion,
        group: &[&ExpectCqe],
        owners: &[Owner],
        matched: &mut [bool],
    ) -> Result<(), Failure> {
        let Some(k) = self.pick(ci, c, group, owners, matched) else {
            let pending: Vec<String> = group
                .iter()
                .zip(matched.iter())
                .filter(|(_, m)| !**m)
                .map(|(e, _)| fmt_expect(e, self.sc))
                .collect();
            let waiting = if pending.is_empty() {
                // It came in the same poll as the group's last expected completion.
                let all: Vec<String> = group.iter().map(|e| fmt_expect(e, self.sc)).collect();
                format!(
                    "nothing more: every completion of this group had arrived ({})",
                    all.join("; ")
                )
            } else {
                pending.join("; ")
            };
            return Err(self.fail(
                group[0].line,
                "expect",
                format!(
                    "unexpected completion: {}\n  (QP {}; waiting for: {waiting})",
                    fmt_cqe(c),
                    self.qp_name_of(c.qp_num),
                ),
            ));
        };
        let e = group[k];
        let owner = owners[k];
        // Order within one queue (none inside an any-order block).
        if let Some(j) = (0..k)
            .find(|&j| !matched[j] && owners[j] == owner && !(e.any_order && group[j].any_order))
        {
            return Err(self.fail(
                e.line,
                "expect",
                format!(
                    "out of order on one queue: got {} before {}",
                    fmt_cqe(c),
                    fmt_expect(group[j], self.sc)
                ),
            ));
        }
        let mut errs = self.field_errs(ci, c, e, owner);
        // Accounting.
        match owner {
            Owner::Sq(q) => {
                let out = &self.sq_out[q];
                match out.iter().position(|&(w, _)| w == c.wr_id) {
                    None => errs.push("this request was already retired".to_string()),
                    Some(pos) => {
                        if let Some(&(w, _)) = out.iter().take(pos).find(|&&(_, sig)| sig) {
                            errs.push(format!(
                                "signaled wr={w}, posted earlier on this SQ, has not completed yet"
                            ));
                        }
                        let want_from = out.front().map_or(0, |&(w, _)| w);
                        if c.covered as usize != pos || (pos > 0 && c.covered_from != want_from) {
                            errs.push(format!(
                                "covers {} from wr={}, but {pos} unsignaled requests are outstanding before it{}",
                                c.covered,
                                c.covered_from,
                                if pos > 0 { format!(" (from wr={want_from})") } else { String::new() }
                            ));
                        }
                        if let Some(cv) = e.covered {
                            if cv as usize != pos {
                                errs.push(format!(
                                    "the file expects covered={cv}, but {pos} requests are outstanding before it"
                                ));
                            }
                        }
                        self.sq_out[q].drain(..=pos);
                    }
                }
            }
            Owner::Recv(t) => {
                let out = self.recv_out.entry(t).or_default();
                match out.iter().position(|&w| w == c.wr_id) {
                    Some(pos) => {
                        out.remove(pos);
                    }
                    None => errs.push("this receive was already retired".to_string()),
                }
            }
        }
        if !errs.is_empty() {
            let f = self.fail(
                e.line,
                "expect",
                format!(
                    "completion mismatch\n  expected: {}\n  got:      {}\n  - {}",
                    fmt_expect(e, self.sc),
                    fmt_cqe(c),
                    errs.join("\n  - ")
                ),
            );
            if !self.opts.keep_going {
                return Err(f);
            }
            // Recorded; the completion counts as the one expected, and the run goes on.
            self.recorded.extend(f.mismatches);
        }
        matched[k] = true;
        self.completions += 1;
        Ok(())
    }

    fn settle(&mut self, p: &mut P) -> Result<(), Failure> {
        let end = Instant::now() + self.opts.settle;
        let mut buf = [Completion::EMPTY; 16];
        let mut got = Vec::new();
        loop {
            p.progress();
            self.poll_all(&mut buf, &mut got);
            if let Some((_, c)) = got.first() {
                return Err(self.fail(
                    0,
                    "after the last step",
                    format!(
                        "extra completion nobody expected: {} (QP {})",
                        fmt_cqe(c),
                        self.qp_name_of(c.qp_num)
                    ),
                ));
            }
            if Instant::now() >= end {
                return Ok(());
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    fn check_accounting(&self) -> Result<(), Failure> {
        let mut lost = Vec::new();
        for (q, out) in self.sq_out.iter().enumerate() {
            for (w, sig) in out {
                lost.push(format!(
                    "wr={w} ({} send on QP '{}')",
                    if *sig { "signaled" } else { "unsignaled" },
                    self.sc.qps[q].name
                ));
            }
        }
        for (t, out) in &self.recv_out {
            let name = match *t {
                RecvTarget::Qp(q) => &self.sc.qps[q].name,
                RecvTarget::Srq(s) => &self.sc.srqs[s].name,
            };
            for w in out {
                lost.push(format!("wr={w} (receive on '{name}')"));
            }
        }
        if lost.is_empty() {
            Ok(())
        } else {
            lost.sort();
            Err(self.fail(
                0,
                "accounting",
                format!(
                    "requests never retired (no completion, not covered, not flushed; a scenario must \
                     expect every one, e.g. with 'error QP' and the flushes):\n  {}",
                    lost.join("\n  ")
                ),
            ))
        }
    }

    fn check_buffers(&self) -> Result<u64, Failure> {
        let mut expected = self.initial.clone();
        let mut care: Vec<Vec<bool>> = self.initial.iter().map(|b| vec![true; b.len()]).collect();
        for e in &self.sc.finals {
            if self.opts.applies(&e.variant) {
                apply_edit_from(&mut expected, &self.initial, Some(&mut care), e);
            }
        }
        let mut checked = 0u64;
        let mut mismatches = Vec::new();
        for (i, b) in self.sc.bufs.iter().enumerate() {
            // Split: the other side's buffers are checked there.
            if let Some(s) = &self.split {
                if s.plan.buf[i] == Some(s.side.other()) {
                    continue;
                }
            }
            let got: &[u8] = &self.mem[i];
            let (n, ranges) = diff_ranges(got, &expected[i], &care[i]);
            checked += n;
            let ndiff: usize = ranges.iter().map(|&(a, b)| b - a).sum();
            let shown = ranges.len().min(MAX_RANGES);
            for (k, &(at, end)) in ranges.iter().take(MAX_RANGES).enumerate() {
                // The last `final` edit covering the range's first byte, else the buffer.
                let line = self
                    .sc
                    .finals
                    .iter()
                    .filter(|e| {
                        self.opts.applies(&e.variant)
                            && e.range.buf == i
                            && e.range.off <= at
                            && at < e.range.off + e.range.len
                    })
                    .map(|e| e.line)
                    .next_back()
                    .unwrap_or(b.line);
                let more = if k + 1 == shown && ranges.len() > shown {
                    format!("\n  ({} more ranges not shown)", ranges.len() - shown)
                } else {
                    String::new()
                };
                mismatches.push(Mismatch {
                    line,
                    step: "final buffers".to_string(),
                    detail: format!(
                        "buffer '{}': bytes {at}..{end} ({at:#x}..{end:#x}, {} B) differ ({ndiff} B in {} range(s) in all)\n  expected {}\n  got      {}{more}",
                        b.name,
                        end - at,
                        ranges.len(),
                        hex_window(&expected[i], at, end),
                        hex_window(got, at, end)
                    ),
                });
            }
        }
        if !mismatches.is_empty() {
            return Err(Failure {
                scenario: self.sc.name.clone(),
                file: self.sc.file.clone(),
                mismatches,
            });
        }
        Ok(checked)
    }
}

fn apply_edit(images: &mut [Vec<u8>], care: Option<&mut Vec<Vec<bool>>>, e: &Edit) {
    let src = images.to_vec();
    apply_edit_from(images, &src, care, e);
}

/// Apply one `set`/`final` edit to `images`; `copy=` reads from `source` (the initial images).
fn apply_edit_from(
    images: &mut [Vec<u8>],
    source: &[Vec<u8>],
    care: Option<&mut Vec<Vec<bool>>>,
    e: &Edit,
) {
    let r = e.range;
    let dst = &mut images[r.buf][r.off..r.off + r.len];
    match &e.kind {
        EditKind::Fill(f) => f.apply(dst),
        EditKind::Bytes(b) => dst.copy_from_slice(b),
        EditKind::Copy(s) => dst.copy_from_slice(&source[s.buf][s.off..s.off + s.len]),
        EditKind::Any => {
            if let Some(care) = care {
                care[r.buf][r.off..r.off + r.len].fill(false);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_window_marks_the_byte() {
        let b: Vec<u8> = (0..40).collect();
        assert_eq!(
            hex_window(&b, 17, 18),
            "0x000008: 08 09 0a 0b 0c 0d 0e 0f 10 [11] 12 13 14 15 16 17 18 19"
        );
        assert_eq!(
            hex_window(&b, 9, 11),
            "0x000000: 00 01 02 03 04 05 06 07 08 [09] [0a] 0b 0c 0d 0e 0f 10 11 12"
        );
        assert_eq!(hex_window(&b[..3], 0, 1), "0x000000: [00] 01 02");
    }

    #[test]
    fn every_differing_range_is_found() {
        let want = [0u8; 12];
        let mut got = want;
        got[1] = 1;
        got[2] = 1;
        got[5] = 9;
        got[11] = 3;
        let mut care = [true; 12];
        care[5] = false; // an `any` byte
        assert_eq!(
            diff_ranges(&got, &want, &care),
            (11, vec![(1, 3), (11, 12)])
        );
    }

    #[test]
    fn edits_copy_from_the_initial_image() {
        let mut imgs = vec![vec![1u8, 2, 3, 4], vec![0u8; 4]];
        let src = imgs.clone();
        let e = Edit {
            range: Range {
                buf: 1,
                off: 1,
                len: 2,
            },
            kind: EditKind::Copy(Range {
                buf: 0,
                off: 2,
                len: 2,
            }),
            variant: None,
            line: 1,
        };
        apply_edit_from(&mut imgs, &src, None, &e);
        assert_eq!(imgs[1], vec![0, 3, 4, 0]);
    }
}
