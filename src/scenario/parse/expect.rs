//! Expectations: `expect` lines (one completion, or `repeat=` counted ones), `expect
//! any-order { ... }` blocks, and their checks against the requests posted so far (the wr
//! id was posted, on a queue of that type, not expected twice in one variant); `event`
//! lines (an asynchronous event, of a QP or a port) and the `fault` lines that cause them.

use super::lex::{
    parse_counted_u32, parse_duration, parse_range_u32, parse_u32, parse_u64, PResult,
};
use super::{overlap, Parser, WrTarget, MAX_REPEAT};
use crate::providers::{AsyncEventKind as K, Fault, WcOpcode, WcStatus};
use crate::scenario::{ExpectCqe, ExpectEvent, RecvTarget, Step, StepKind, EVENT_NAMES};

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
            within: None,
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
                    "within" => e.within = Some(parse_duration(v)?),
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
            return Err("usage: expect wr=N STATUS [OPCODE] [len=N] [imm=V] [qp=Q] [src_qp=Q] [grh] [covered=N] [repeat=N] [within=DURATION]".into());
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

    /// `event KIND [QP] [port=N] [within=DURATION]`.
    pub(super) fn event(
        &mut self,
        line: usize,
        args: &[&str],
        variant: Option<String>,
    ) -> PResult<()> {
        const USAGE: &str = "usage: event KIND [QP] [port=N] [within=DURATION] \
                             (KIND: QP_FATAL, PORT_ERR, PORT_ACTIVE, CQ_ERR, ...)";
        let Some((name, rest)) = args.split_first() else {
            return Err(USAGE.into());
        };
        let kind = EVENT_NAMES
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, k)| *k)
            .ok_or_else(|| {
                let all: Vec<&str> = EVENT_NAMES.iter().map(|(n, _)| *n).collect();
                format!("unknown event '{name}' ({})", all.join(", "))
            })?;
        let mut e = ExpectEvent {
            kind,
            qp: None,
            port: None,
            within: None,
            line,
        };
        for a in rest {
            match a.split_once('=') {
                Some(("port", v)) => e.port = Some(parse_range_u32(v, 1, 255, "port")? as u8),
                Some(("within", v)) => e.within = Some(parse_duration(v)?),
                Some((k, _)) => return Err(format!("unknown event option '{k}' ({USAGE})")),
                None if e.qp.is_none() => e.qp = Some(self.qp_ref(a)?),
                None => return Err(format!("unexpected '{a}' ({USAGE})")),
            }
        }
        let qp_event = matches!(
            kind,
            K::QpFatal
                | K::QpReqErr
                | K::QpAccessErr
                | K::CommEst
                | K::SqDrained
                | K::QpLastWqeReached
        );
        let port_event = matches!(kind, K::PortActive | K::PortErr | K::GidChange);
        if e.qp.is_some() && !qp_event {
            return Err(format!("{name} concerns no QP: drop the QP name"));
        }
        if e.port.is_some() && !port_event {
            return Err(format!("{name} concerns no port: drop port="));
        }
        self.push(line, variant, StepKind::Event(e));
        Ok(())
    }

    /// `fault qp QP` | `fault port N down|up`.
    pub(super) fn fault(
        &mut self,
        line: usize,
        args: &[&str],
        variant: Option<String>,
    ) -> PResult<()> {
        let (fault, qp) = match args {
            ["qp", q] => (Fault::QpFatal, Some(self.qp_ref(q)?)),
            ["port", n, dir @ ("down" | "up")] => {
                let port = parse_range_u32(n, 1, 255, "port")? as u8;
                let f = if *dir == "down" {
                    Fault::PortDown(port)
                } else {
                    Fault::PortUp(port)
                };
                (f, None)
            }
            _ => return Err("usage: fault qp QP | fault port N down|up".into()),
        };
        self.push(line, variant, StepKind::Fault { fault, qp });
        Ok(())
    }
}
