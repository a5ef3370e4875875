//! Expectations: `expect` lines (one completion, or `repeat=` counted ones), `expect
//! any-order { ... }` blocks, and their checks against the requests posted so far (the wr
//! id was posted, on a queue of that type, not expected twice in one variant).

use super::lex::{parse_counted_u32, parse_range_u32, parse_u32, parse_u64, PResult};
use super::{overlap, Parser, WrTarget, MAX_REPEAT};
use crate::providers::{WcOpcode, WcStatus};
use crate::scenario::{ExpectCqe, RecvTarget, Step, StepKind};

impl Parser {
    pub(super) fn expect(
        &mut self,
        line: usize,
        args: &[&str],
        variant: Option<String>,
    ) -> PResult<()> {
        let mut e = ExpectCqe {
            wr_id: 0,
            status: WcStatus::Success,
            opcode: None,
            len: None,
            imm: None,
            qp: None,
            src_qp: None,
            grh: false,
            covered: None,
            variant: variant.clone(),
            any_order: self.block.is_some(),
            line,
        };
        let mut repeat = 1u32;
        let mut imm_step = 0u32;
        let mut have_wr = false;
        let mut have_status = false;
        for a in args {
            if *a == "grh" {
                e.grh = true;
                continue;
            }
            if let Some((k, v)) = a.split_once('=') {
                match k {
                    "wr" => {
                        e.wr_id = parse_u64(v)?;
                        have_wr = true;
                    }
                    "len" => e.len = Some(parse_u32(v)?),
                    "imm" => {
                        let (base, step) = parse_counted_u32(v)?;
                        e.imm = Some(base);
                        imm_step = step;
                    }
                    "repeat" => repeat = parse_range_u32(v, 1, MAX_REPEAT, "repeat")?,
                    "qp" => e.qp = Some(self.qp_ref(v)?),
                    "src_qp" => e.src_qp = Some(self.qp_ref(v)?),
                    "covered" => e.covered = Some(parse_u32(v)?),
                    _ => return Err(format!("unknown expect option '{k}'")),
                }
                continue;
            }
            if !have_status {
                e.status = WcStatus::from_name(a).ok_or_else(|| {
                    format!("unknown status '{a}' (SUCCESS, WR_FLUSH_ERR, REM_ACCESS_ERR, ...)")
                })?;
                have_status = true;
            } else if e.opcode.is_none() {
                e.opcode = Some(WcOpcode::from_name(a).ok_or_else(|| {
                    format!("unknown opcode '{a}' (SEND, RDMA_WRITE, RDMA_READ, COMP_SWAP, FETCH_ADD, RECV, RECV_RDMA_WITH_IMM)")
                })?);
            } else {
                return Err(format!("unexpected '{a}'"));
            }
        }
        if !have_wr || !have_status {
            return Err("usage: expect wr=N STATUS [OPCODE] [len=N] [imm=V] [qp=Q] [src_qp=Q] [grh] [covered=N] [repeat=N]".into());
        }
        if imm_step != 0 && repeat < 2 {
            return Err(
                "imm=V+i counts with the repetition: it needs repeat= of at least 2".into(),
            );
        }
        // `repeat=N` stands for N lines: wr=ID+i, imm=V+i*K.
        for i in 0..repeat {
            let mut one = e.clone();
            one.wr_id = e
                .wr_id
                .checked_add(u64::from(i))
                .ok_or("wr_id overflows with this repeat")?;
            one.imm = e.imm.map(|v| v.wrapping_add(i.wrapping_mul(imm_step)));
            self.expect_one(line, one, &variant)?;
        }
        Ok(())
    }

    /// One expectation (after `repeat=` is unrolled), checked against the posts so far and
    /// added to its group.
    pub(super) fn expect_one(
        &mut self,
        line: usize,
        e: ExpectCqe,
        variant: &Option<String>,
    ) -> PResult<()> {
        if e.status == WcStatus::Success {
            if e.opcode.is_none() {
                return Err("a SUCCESS expectation needs its opcode".into());
            }
        } else if e.opcode.is_some() || e.len.is_some() || e.imm.is_some() || e.grh {
            return Err(format!(
                "{}: only wr=, qp= and covered= are meaningful on an error completion",
                e.status
            ));
        }
        // The request must have been posted earlier, to a queue this expectation fits.
        let posts = self
            .wrs
            .get(&e.wr_id)
            .ok_or_else(|| format!("wr={} was not posted before this line", e.wr_id))?;
        let (_, target) = posts
            .iter()
            .find(|(v, _)| overlap(v, variant))
            .ok_or_else(|| format!("wr={} was not posted for this variant", e.wr_id))?;
        match *target {
            WrTarget::Recv(RecvTarget::Srq(_)) if e.qp.is_none() => {
                return Err("a receive from an SRQ needs qp=NAME (the QP it arrived on)".into())
            }
            WrTarget::Sq(_) if e.opcode.is_some_and(|o| o.is_recv()) => {
                return Err(format!(
                    "wr={} is a send request: it cannot complete as a receive",
                    e.wr_id
                ))
            }
            WrTarget::Recv(_) if e.opcode.is_some_and(|o| !o.is_recv()) => {
                return Err(format!(
                    "wr={} is a receive: it completes as RECV or RECV_RDMA_WITH_IMM",
                    e.wr_id
                ))
            }
            WrTarget::Recv(_) if e.covered.is_some() => {
                return Err("covered= is for send completions".into())
            }
            _ => {}
        }
        let seen = self.expected.entry(e.wr_id).or_default();
        if seen.iter().any(|v| overlap(v, variant)) {
            return Err(format!("wr={} is already expected", e.wr_id));
        }
        seen.push(variant.clone());
        // Consecutive expect lines form one group; an any-order block is a group of its own.
        let fresh = match &mut self.block {
            Some((_, started)) => !std::mem::replace(started, true),
            None => std::mem::take(&mut self.new_group),
        };
        match self.sc.steps.last_mut() {
            Some(Step {
                kind: StepKind::Expect(group),
                ..
            }) if !fresh => group.push(e),
            _ => self.push(line, None, StepKind::Expect(vec![e])),
        }
        Ok(())
    }
}
