//! Matching arrived completions against `expect` groups: which expectation a completion
//! answers (its wr id; inside an any-order block, the first SRQ receive whose fields agree),
//! its CQ, QP and fields, the order within one queue, the send queue's coverage of unsignaled
//! requests, and the accounting at the end (nothing extra within [`RunOpts::settle`], every
//! accepted request retired exactly once). What was awaited and what arrived are listed in
//! every timeout and every unexpected completion.
//!
//! [`RunOpts::settle`]: crate::scenario::RunOpts::settle

use std::time::{Duration, Instant};

use super::diff::{fmt_cqe, fmt_expect};
use super::{Owner, Runner};
use crate::providers::{AsyncElement, AsyncEvent};
use crate::providers::{Completion, CompletionQueue, Provider, QueuePair, WcFlags, WcStatus};
use crate::scenario::{event_name, ExpectCqe, ExpectEvent, Failure, RecvTarget};

impl<'s, P: Provider> Runner<'s, P> {
    /// Poll every CQ once into `buf`; returns (cq index, completion) pairs.
    pub(super) fn poll_all(&mut self, buf: &mut [Completion], out: &mut Vec<(usize, Completion)>) {
        out.clear();
        for (ci, cq) in self.cqs.iter_mut().enumerate() {
            let n = cq.poll(buf);
            out.extend(buf[..n].iter().map(|c| (ci, *c)));
        }
    }

    pub(super) fn expect(&mut self, p: &mut P, group: &[ExpectCqe]) -> Result<(), Failure> {
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
        // The group's shortest `within=` bound, else the run's.
        let wait = group
            .iter()
            .filter_map(|e| e.within)
            .min()
            .unwrap_or(self.opts.poll_timeout);
        let deadline = Instant::now() + wait;
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
                            wait,
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

    pub(super) fn qp_name_of(&self, qpn: u32) -> String {
        self.qps
            .iter()
            .position(|q| q.qpn() == qpn)
            .map_or(format!("{qpn:#x} (not ours)"), |i| {
                self.sc.qps[i].name.clone()
            })
    }

    /// What differs between completion `c` (polled from CQ `ci`) and expectation `e` of a
    /// request of queue `owner`: its CQ, QP and fields (not the accounting).
    pub(super) fn field_errs(
        &self,
        ci: usize,
        c: &Completion,
        e: &ExpectCqe,
        owner: Owner,
    ) -> Vec<String> {
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
    pub(super) fn pick(
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
    pub(super) fn take(
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

    /// Read the provider's asynchronous events into `self.events`.
    fn drain_events(&mut self, p: &mut P, line: usize) -> Result<(), Failure> {
        match p.async_events() {
            Ok(Some(v)) => {
                self.events.extend(v);
                Ok(())
            }
            Ok(None) => Err(self.fail(
                line,
                "event",
                format!(
                    "{} reports no asynchronous events to the runner: an 'event' line cannot \
                     be checked on it (tag the line, e.g. [sim])",
                    p.device_name()
                ),
            )),
            Err(e) => Err(self.fail(line, "event", e.to_string())),
        }
    }

    /// One event, printed: `QP_FATAL qp a (0x12)`, `PORT_ERR port 1`.
    fn fmt_event(&self, ev: &AsyncEvent) -> String {
        let name = event_name(ev.kind);
        match ev.element {
            AsyncElement::Qp { qpn, .. } => format!("{name} qp {}", self.qp_name_of(qpn)),
            AsyncElement::Port(n) => format!("{name} port {n}"),
            AsyncElement::Cq(c) => format!("{name} cq {c:#x}"),
            AsyncElement::Srq(s) => format!("{name} srq {s:#x}"),
            AsyncElement::Device => format!("{name} device"),
        }
    }

    /// Wait (up to its `within=`, else [`RunOpts::poll_timeout`]) for the event `e` names;
    /// the first arrived event of its kind and object is taken.
    ///
    /// [`RunOpts::poll_timeout`]: crate::scenario::RunOpts::poll_timeout
    pub(super) fn await_event(&mut self, p: &mut P, e: &ExpectEvent) -> Result<(), Failure> {
        let want_qpn = e.qp.map(|q| self.qps[q].qpn());
        let fits = |ev: &AsyncEvent| {
            ev.kind == e.kind
                && match ev.element {
                    AsyncElement::Qp { qpn, .. } => want_qpn.is_none_or(|w| w == qpn),
                    AsyncElement::Port(n) => e.port.is_none_or(|w| i32::from(w) == n),
                    _ => true,
                }
        };
        let wait = e.within.unwrap_or(self.opts.poll_timeout);
        let deadline = Instant::now() + wait;
        loop {
            p.progress();
            self.drain_events(p, e.line)?;
            if let Some(i) = self.events.iter().position(fits) {
                self.events.remove(i);
                return Ok(());
            }
            if Instant::now() > deadline {
                let mut want = event_name(e.kind);
                if let Some(q) = e.qp {
                    want = format!("{want} qp {}", self.sc.qps[q].name);
                }
                if let Some(n) = e.port {
                    want = format!("{want} port {n}");
                }
                let arrived: Vec<String> = self.events.iter().map(|v| self.fmt_event(v)).collect();
                return Err(self.fail(
                    e.line,
                    "event",
                    format!(
                        "timed out after {wait:?} waiting for the asynchronous event {want}\n  arrived (not taken): {}",
                        if arrived.is_empty() { "(none)".to_string() } else { arrived.join("; ") }
                    ),
                ));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    pub(super) fn settle(&mut self, p: &mut P) -> Result<(), Failure> {
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
                if self.watch_events {
                    self.drain_events(p, 0)?;
                    if let Some(ev) = self.events.first() {
                        return Err(self.fail(
                            0,
                            "after the last step",
                            format!(
                                "asynchronous event nobody expected: {} (a scenario with 'event' lines lists every event)",
                                self.fmt_event(ev)
                            ),
                        ));
                    }
                }
                return Ok(());
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    pub(super) fn check_accounting(&self) -> Result<(), Failure> {
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
}
