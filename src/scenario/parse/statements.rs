//! The statements that act on queues: `connect` (with its overrides), `post` (every
//! opcode, SGE lists, flags, expected rejections, `repeat=`) and `post_recv`. Each accepted
//! request's wr id is noted per variant so that `expect` lines can be checked against it.

use super::lex::{
    kv, op_kw, parse_counted_u32, parse_range_u32, parse_reject, parse_u64, parse_usize, PResult,
};
use super::{overlap, Parser, WrTarget, MAX_REPEAT, MAX_SGES};
use crate::providers::QpType;
use crate::scenario::{ConnectOverrides, PostOp, PostStep, Range, RecvStep, Signal, StepKind};

impl Parser {
    pub(super) fn connect(&mut self, line: usize, args: &[&str]) -> PResult<()> {
        let (a, b) = match args {
            [a, b, ..] => (self.qp_ref(a)?, self.qp_ref(b)?),
            _ => return Err(
                "usage: connect QP_A QP_B [timeout=N] [retry=N] [rnr_retry=N] [min_rnr_timer=N]"
                    .into(),
            ),
        };
        if a == b {
            return Err("connect needs two different QPs (loopback is between two QPs)".into());
        }
        if self.sc.qps[a].qp_type != self.sc.qps[b].qp_type {
            return Err("connect: the two QPs have different types".into());
        }
        let mut o = ConnectOverrides::default();
        for t in &args[2..] {
            let (k, v) = kv(t)?;
            let n = parse_range_u32(v, 0, 31, k)? as u8;
            match k {
                "timeout" => o.timeout = Some(n),
                "retry" | "rnr_retry" if n > 7 => return Err(format!("{k} must be 0..=7")),
                "retry" => o.retry_cnt = Some(n),
                "rnr_retry" => o.rnr_retry = Some(n),
                "min_rnr_timer" => o.min_rnr_timer = Some(n),
                _ => return Err(format!("unknown connect option '{k}'")),
            }
        }
        self.push(line, None, StepKind::Connect { a, b, opts: o });
        Ok(())
    }

    pub(super) fn note_wrs(
        &mut self,
        first: u64,
        n: u32,
        variant: &Option<String>,
        target: WrTarget,
    ) -> PResult<()> {
        for i in 0..n as u64 {
            let id = first
                .checked_add(i)
                .ok_or("wr_id overflows with this repeat")?;
            let e = self.wrs.entry(id).or_default();
            if e.iter().any(|(v, _)| overlap(v, variant)) {
                return Err(format!("wr={id} is already used by an earlier post"));
            }
            e.push((variant.clone(), target));
        }
        Ok(())
    }

    pub(super) fn post(
        &mut self,
        line: usize,
        args: &[&str],
        variant: Option<String>,
    ) -> PResult<()> {
        let (qp, op) = match args {
            [q, o, ..] => (
                self.qp_ref(q)?,
                PostOp::from_name(o).ok_or_else(|| {
                    format!("unknown op '{o}' (send, send_imm, write, write_imm, read, cas, faa)")
                })?,
            ),
            _ => return Err("usage: post QP OP wr=N [options] (see README)".into()),
        };
        let mut p = PostStep {
            qp,
            op,
            wr_id: 0,
            sges: Vec::new(),
            inline: None,
            remote: None,
            bad_rkey: false,
            imm: 0,
            imm_step: 0,
            compare: 0,
            swap: 0,
            add: 0,
            signal: Signal::None,
            fence: false,
            solicited: false,
            dest: None,
            repeat: 1,
            step: 0,
            reject: None,
        };
        let mut have_wr = false;
        let (mut have_imm, mut have_cas, mut have_add) = (false, false, false);
        for a in &args[2..] {
            match *a {
                "signaled" => {
                    p.signal = Signal::All;
                    continue;
                }
                "fence" => {
                    p.fence = true;
                    continue;
                }
                "solicited" => {
                    p.solicited = true;
                    continue;
                }
                _ => {}
            }
            let (k, v) = kv(a)?;
            match k {
                "wr" => {
                    p.wr_id = parse_u64(v)?;
                    have_wr = true;
                }
                "sge" => {
                    let (b, off, len) = self.range_tok(v)?;
                    let len = len.ok_or("sge= needs a length: BUF[+OFF]:LEN")?;
                    p.sges.push(Range { buf: b, off, len });
                }
                "inline" => {
                    let (b, off, len) = self.range_tok(v)?;
                    let len = len.ok_or("inline= needs a length: BUF[+OFF]:LEN")?;
                    p.inline = Some(Range { buf: b, off, len });
                }
                "remote" => {
                    let (b, off, len) = self.range_tok(v)?;
                    if len.is_some() {
                        return Err("remote= takes BUF[+OFF] (the length is the local one)".into());
                    }
                    p.remote = Some((b, off));
                }
                "rkey" if v == "bad" => p.bad_rkey = true,
                "rkey" => return Err("rkey= only takes 'bad' (a deliberately wrong key)".into()),
                "imm" => {
                    (p.imm, p.imm_step) = parse_counted_u32(v)?;
                    have_imm = true;
                }
                "compare" => {
                    p.compare = parse_u64(v)?;
                    have_cas = true;
                }
                "swap" => {
                    p.swap = parse_u64(v)?;
                    have_cas = true;
                }
                "add" => {
                    p.add = parse_u64(v)?;
                    have_add = true;
                }
                "signal" if v == "last" => p.signal = Signal::Last,
                "signal" if v == "all" => p.signal = Signal::All,
                "signal" => return Err("signal= takes 'last' or 'all'".into()),
                "dest" => p.dest = Some(self.qp_ref(v)?),
                "repeat" => p.repeat = parse_range_u32(v, 1, MAX_REPEAT, "repeat")?,
                "step" => p.step = parse_usize(v)?,
                "reject" => p.reject = Some(parse_reject(v)?),
                _ => return Err(format!("unknown post option '{k}'")),
            }
        }
        if !have_wr {
            return Err("post needs wr=ID".into());
        }
        if p.sges.len() > MAX_SGES {
            return Err(format!("more than {MAX_SGES} SGEs on one line"));
        }
        if p.inline.is_some() && !p.sges.is_empty() {
            return Err("inline= and sge= exclude each other".into());
        }
        if op.needs_remote() && p.remote.is_none() {
            return Err(format!("{} needs remote=BUF[+OFF]", op_kw(op)));
        }
        if !op.needs_remote() && (p.remote.is_some() || p.bad_rkey) {
            return Err(format!("{} takes no remote=/rkey=", op_kw(op)));
        }
        if have_imm && !op.has_imm() {
            return Err(format!("{} carries no immediate", op_kw(op)));
        }
        if have_cas && op != PostOp::Cas {
            return Err("compare=/swap= are for cas".into());
        }
        if have_add && op != PostOp::Faa {
            return Err("add= is for faa".into());
        }
        if p.dest.is_some() && self.sc.qps[qp].qp_type != QpType::Ud && p.reject.is_none() {
            return Err("dest= is for UD QPs (or a post with reject=ud_dest)".into());
        }
        if p.imm_step != 0 && p.repeat < 2 {
            return Err(
                "imm=V+i counts with the repetition: it needs repeat= of at least 2".into(),
            );
        }
        if p.signal == Signal::Last && p.repeat < 2 {
            return Err("signal=last needs repeat= of at least 2".into());
        }
        if p.reject.is_some() && p.repeat != 1 {
            return Err("a rejected post cannot repeat".into());
        }
        // Every repetition stays inside its buffers.
        for i in 0..p.repeat as usize {
            let shift = i.checked_mul(p.step).ok_or("repeat × step overflows")?;
            for r in p.sges.iter().chain(p.inline.iter()) {
                let off = r.off.checked_add(shift).ok_or("offset overflows")?;
                self.check_in(r.buf, off, r.len)?;
            }
        }
        if p.reject.is_none() {
            self.note_wrs(p.wr_id, p.repeat, &variant, WrTarget::Sq(qp))?;
        }
        self.push(line, variant, StepKind::Post(p));
        Ok(())
    }

    pub(super) fn post_recv(
        &mut self,
        line: usize,
        args: &[&str],
        variant: Option<String>,
    ) -> PResult<()> {
        let target = match args.first() {
            Some(t) => self.recv_target(t)?,
            None => return Err("usage: post_recv QP|SRQ wr=N [sge=BUF+OFF:LEN]...".into()),
        };
        let mut r = RecvStep {
            target,
            wr_id: 0,
            sges: Vec::new(),
            repeat: 1,
            step: 0,
            reject: None,
        };
        let mut have_wr = false;
        for a in &args[1..] {
            let (k, v) = kv(a)?;
            match k {
                "wr" => {
                    r.wr_id = parse_u64(v)?;
                    have_wr = true;
                }
                "sge" => {
                    let (b, off, len) = self.range_tok(v)?;
                    let len = len.ok_or("sge= needs a length: BUF[+OFF]:LEN")?;
                    r.sges.push(Range { buf: b, off, len });
                }
                "repeat" => r.repeat = parse_range_u32(v, 1, MAX_REPEAT, "repeat")?,
                "step" => r.step = parse_usize(v)?,
                "reject" => r.reject = Some(parse_reject(v)?),
                _ => return Err(format!("unknown post_recv option '{k}'")),
            }
        }
        if !have_wr {
            return Err("post_recv needs wr=ID".into());
        }
        if r.sges.len() > MAX_SGES {
            return Err(format!("more than {MAX_SGES} SGEs on one line"));
        }
        if r.reject.is_some() && r.repeat != 1 {
            return Err("a rejected post cannot repeat".into());
        }
        for i in 0..r.repeat as usize {
            let shift = i.checked_mul(r.step).ok_or("repeat × step overflows")?;
            for s in &r.sges {
                let off = s.off.checked_add(shift).ok_or("offset overflows")?;
                self.check_in(s.buf, off, s.len)?;
            }
        }
        if r.reject.is_none() {
            self.note_wrs(r.wr_id, r.repeat, &variant, WrTarget::Recv(target))?;
        }
        self.push(line, variant, StepKind::PostRecv(r));
        Ok(())
    }
}
