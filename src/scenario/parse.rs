//! The scenario file parser: line-oriented, every error names its line, no panics.

use std::collections::HashMap;

use super::*;
use crate::providers::Access;

/// Largest buffer a scenario may declare (a typo must not allocate the machine away).
const MAX_BUF: usize = 64 << 20;
/// Largest `repeat=`.
const MAX_REPEAT: u32 = 4096;
/// Most SGEs one line may list.
const MAX_SGES: usize = 64;

type PResult<T> = Result<T, String>;

/// Parse the text of one scenario file. `file` is used in messages, `default_name` when the
/// file has no `name` line.
pub fn parse(file: &str, default_name: &str, text: &str) -> Result<Scenario, ParseError> {
    let mut p = Parser {
        sc: Scenario {
            name: default_name.to_string(),
            file: file.to_string(),
            desc: String::new(),
            differs: Vec::new(),
            bufs: Vec::new(),
            cqs: Vec::new(),
            srqs: Vec::new(),
            qps: Vec::new(),
            sets: Vec::new(),
            finals: Vec::new(),
            steps: Vec::new(),
        },
        names: HashMap::new(),
        wrs: HashMap::new(),
        expected: HashMap::new(),
        variant_lines: Vec::new(),
        block: None,
        new_group: false,
    };
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        p.line(line, raw).map_err(|msg| ParseError {
            file: file.to_string(),
            line,
            msg,
        })?;
    }
    p.finish().map_err(|(line, msg)| ParseError {
        file: file.to_string(),
        line,
        msg,
    })
}

/// What a name refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Obj {
    Buf(usize),
    Cq(usize),
    Srq(usize),
    Qp(usize),
}

/// Where a posted request went (to check `expect` lines).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WrTarget {
    Sq(usize),
    Recv(RecvTarget),
}

struct Parser {
    sc: Scenario,
    names: HashMap<String, Obj>,
    /// wr_id -> (variant, where) of every accepted post.
    wrs: HashMap<u64, Vec<(Option<String>, WrTarget)>>,
    /// wr_id -> variants already expected.
    expected: HashMap<u64, Vec<Option<String>>>,
    /// Lines with a `[variant]` tag (they need a `differs` line).
    variant_lines: Vec<usize>,
    /// The open `expect any-order {` block: its line and whether it has an expect yet.
    block: Option<(usize, bool)>,
    /// The next `expect` starts a new group (after a block closed).
    new_group: bool,
}

/// The kinds of device a tag can tell apart, for [`overlap`].
const SIM: u8 = 1;
const MLX5_HW: u8 = 2;
const RXE: u8 = 4;
const OTHER_VERBS: u8 = 8;
const ANY: u8 = SIM | MLX5_HW | RXE | OTHER_VERBS;

/// The kinds of device a tag term names (see [`super::tags_for`]): `sim`, `mlx5` (the sim
/// and hardware), `verbs` (any device through libibverbs), `rxe`; a device name by its
/// prefix (`sim0`, `mlx5_*`, `rxe*`), any other name any device.
fn kinds_of(term: &str) -> u8 {
    match term {
        "sim" => SIM,
        "mlx5" => SIM | MLX5_HW,
        "verbs" => MLX5_HW | RXE | OTHER_VERBS,
        "rxe" => RXE,
        d if d.starts_with("sim") => SIM,
        d if d.starts_with("mlx5") => MLX5_HW,
        d if d.starts_with("rxe") => RXE,
        _ => MLX5_HW | RXE | OTHER_VERBS,
    }
}

/// The kinds of device a whole tag (`a,!b`: every term holds) may apply on. Conservative: a
/// named device counts as every kind it could be.
fn kinds(tag: &Option<String>) -> u8 {
    let Some(t) = tag else { return ANY };
    t.split(',')
        .fold(ANY, |k, term| match term.strip_prefix('!') {
            // `!mlx5_0` still leaves other mlx5 devices: only whole kinds are excluded.
            Some(not) if matches!(not, "sim" | "mlx5" | "verbs" | "rxe") => k & !kinds_of(not),
            Some(_) => k,
            None => k & kinds_of(term),
        })
}

/// Two variant tags can both apply in one run.
fn overlap(a: &Option<String>, b: &Option<String>) -> bool {
    kinds(a) & kinds(b) != 0
}

impl Parser {
    fn line(&mut self, line: usize, raw: &str) -> PResult<()> {
        let text = raw.split('#').next().unwrap_or("").trim();
        if text.is_empty() {
            return Ok(());
        }
        let mut toks = text.split_whitespace();
        let head = toks.next().unwrap_or("");
        let (kw, variant) = split_variant(head)?;
        if variant.is_some() {
            self.variant_lines.push(line);
            if !matches!(
                kw,
                "post"
                    | "post_recv"
                    | "ring"
                    | "ring_recv"
                    | "error"
                    | "expect"
                    | "final"
                    | "state"
            ) {
                return Err(format!(
                    "'{kw}' takes no [variant]: only steps and 'final' lines may differ by provider"
                ));
            }
        }
        let args: Vec<&str> = toks.collect();
        let rest = text[head.len()..].trim();
        if let Some((open, _)) = self.block {
            match kw {
                "}" if args.is_empty() => {
                    if self.block != Some((open, true)) {
                        return Err(format!("the any-order block of line {open} is empty"));
                    }
                    self.block = None;
                    self.new_group = true;
                    return Ok(());
                }
                "expect" if args.last() != Some(&"{") => {}
                _ => {
                    return Err(format!(
                        "only expect lines may stand in the any-order block of line {open} \
                         (close it with '}}')"
                    ))
                }
            }
        }
        match kw {
            "expect" if args == ["any-order", "{"] => {
                if variant.is_some() {
                    return Err("tag the block's expect lines, not the block".into());
                }
                self.block = Some((line, false));
            }
            "}" => return Err("'}' without an open 'expect any-order {' block".into()),
            "name" => {
                let n = one_arg(&args, "name NAME")?;
                check_ident(n)?;
                self.sc.name = n.to_string();
            }
            "desc" => self.sc.desc = rest.to_string(),
            "differs" => {
                if rest.is_empty() {
                    return Err("'differs' needs the reason the providers differ".into());
                }
                self.sc.differs.push(rest.to_string());
            }
            "buf" => self.buf(line, &args)?,
            "cq" => self.cq(line, &args)?,
            "srq" => self.srq(line, &args)?,
            "qp" => self.qp(line, &args)?,
            "set" => {
                let e = self.edits(line, &args, None, false)?;
                self.sc.sets.extend(e);
            }
            "final" => {
                let e = self.edits(line, &args, variant, true)?;
                self.sc.finals.extend(e);
            }
            "connect" => self.connect(line, &args)?,
            "post" => self.post(line, &args, variant)?,
            "post_recv" => self.post_recv(line, &args, variant)?,
            "ring" => {
                let q = self.qp_ref(one_arg(&args, "ring QP")?)?;
                self.push(line, variant, StepKind::Ring(q));
            }
            "ring_recv" => {
                let t = self.recv_target(one_arg(&args, "ring_recv QP|SRQ")?)?;
                self.push(line, variant, StepKind::RingRecv(t));
            }
            "error" => {
                let q = self.qp_ref(one_arg(&args, "error QP")?)?;
                self.push(line, variant, StepKind::ToError(q));
            }
            "expect" => self.expect(line, &args, variant)?,
            "state" => {
                let [q, st] = args[..] else {
                    return Err("usage: state QP RESET|INIT|RTR|RTS|SQD|SQE|ERR".into());
                };
                let qp = self.qp_ref(q)?;
                let state = QpState::from_name(st)
                    .filter(|s| !matches!(s, QpState::Unknown(_)))
                    .ok_or_else(|| {
                        format!("unknown QP state '{st}' (RESET, INIT, RTR, RTS, SQD, SQE, ERR)")
                    })?;
                self.push(line, variant, StepKind::State { qp, state });
            }
            other => return Err(format!("unknown keyword '{other}'")),
        }
        Ok(())
    }

    fn finish(mut self) -> Result<Scenario, (usize, String)> {
        if let Some((open, _)) = self.block {
            return Err((open, "the any-order block is never closed with '}'".into()));
        }
        if self.sc.qps.is_empty() {
            return Err((0, "no 'qp' line: a scenario needs at least one QP".into()));
        }
        if let (Some(&l), true) = (self.variant_lines.first(), self.sc.differs.is_empty()) {
            return Err((
                l,
                "a [variant] line needs a 'differs REASON' line saying why the providers differ"
                    .into(),
            ));
        }
        if !self
            .sc
            .steps
            .iter()
            .any(|s| matches!(s.kind, StepKind::Expect(_)))
        {
            return Err((
                0,
                "no 'expect' line: a scenario must expect completions".into(),
            ));
        }
        // Every QP is connected exactly once (a post to an unconnected QP would be a
        // bad_state test: those are written with reject=bad_state and need no connect).
        let mut connected = vec![false; self.sc.qps.len()];
        for s in &self.sc.steps {
            if let StepKind::Connect { a, b, .. } = s.kind {
                for q in [a, b] {
                    if connected[q] {
                        return Err((
                            s.line,
                            format!("QP '{}' is connected twice", self.sc.qps[q].name),
                        ));
                    }
                    connected[q] = true;
                }
            }
        }
        self.sc.steps.shrink_to_fit();
        Ok(self.sc)
    }

    fn push(&mut self, line: usize, variant: Option<String>, kind: StepKind) {
        self.sc.steps.push(Step {
            kind,
            variant,
            line,
        });
    }

    fn declare(&mut self, name: &str, obj: Obj) -> PResult<()> {
        check_ident(name)?;
        if self.names.contains_key(name) {
            return Err(format!("'{name}' is already declared"));
        }
        self.names.insert(name.to_string(), obj);
        Ok(())
    }

    fn lookup(&self, name: &str) -> PResult<Obj> {
        self.names
            .get(name)
            .copied()
            .ok_or_else(|| format!("'{name}' is not declared (declare it before use)"))
    }

    fn qp_ref(&self, name: &str) -> PResult<usize> {
        match self.lookup(name)? {
            Obj::Qp(i) => Ok(i),
            _ => Err(format!("'{name}' is not a QP")),
        }
    }

    fn cq_ref(&self, name: &str) -> PResult<usize> {
        match self.lookup(name)? {
            Obj::Cq(i) => Ok(i),
            _ => Err(format!("'{name}' is not a CQ")),
        }
    }

    fn buf_ref(&self, name: &str) -> PResult<usize> {
        match self.lookup(name)? {
            Obj::Buf(i) => Ok(i),
            _ => Err(format!("'{name}' is not a buffer")),
        }
    }

    fn recv_target(&self, name: &str) -> PResult<RecvTarget> {
        match self.lookup(name)? {
            Obj::Qp(i) => {
                if self.sc.qps[i].srq.is_some() {
                    return Err(format!(
                        "QP '{name}' uses an SRQ: post its receives to the SRQ"
                    ));
                }
                Ok(RecvTarget::Qp(i))
            }
            Obj::Srq(i) => Ok(RecvTarget::Srq(i)),
            _ => Err(format!("'{name}' is neither a QP nor an SRQ")),
        }
    }

    fn buf(&mut self, line: usize, args: &[&str]) -> PResult<()> {
        let (name, size) = match args {
            [n, s, ..] => (*n, *s),
            _ => return Err("usage: buf NAME SIZE [fill=PATTERN] [access=LIST]".into()),
        };
        let size = parse_usize(size)?;
        if size == 0 || size > MAX_BUF {
            return Err(format!(
                "buffer size {size} out of range (1 .. {MAX_BUF} bytes)"
            ));
        }
        let mut fill = Fill::Zero;
        let mut access = Access::ALL.0;
        for a in &args[2..] {
            let (k, v) = kv(a)?;
            match k {
                "fill" => fill = parse_fill(v)?,
                "access" => access = parse_access(v)?,
                _ => return Err(format!("unknown buf option '{k}'")),
            }
        }
        let idx = self.sc.bufs.len();
        self.declare(name, Obj::Buf(idx))?;
        self.sc.bufs.push(BufDecl {
            name: name.to_string(),
            size,
            fill,
            access,
            line,
        });
        Ok(())
    }

    fn cq(&mut self, line: usize, args: &[&str]) -> PResult<()> {
        let (name, size) = match args {
            [n, s] => (*n, *s),
            _ => return Err("usage: cq NAME SIZE".into()),
        };
        let size = parse_u32(size)?;
        if size == 0 || size > 65536 {
            return Err(format!("CQ size {size} out of range (1 .. 65536)"));
        }
        let idx = self.sc.cqs.len();
        self.declare(name, Obj::Cq(idx))?;
        self.sc.cqs.push(CqDecl {
            name: name.to_string(),
            size,
            line,
        });
        Ok(())
    }

    fn srq(&mut self, line: usize, args: &[&str]) -> PResult<()> {
        let name = args
            .first()
            .ok_or("usage: srq NAME [wr=N] [sge=N]")?
            .to_string();
        let mut max_wr = 64;
        let mut max_sge = 1;
        for a in &args[1..] {
            let (k, v) = kv(a)?;
            match k {
                "wr" => max_wr = parse_range_u32(v, 1, 16384, "wr")?,
                "sge" => max_sge = parse_range_u32(v, 1, 32, "sge")?,
                _ => return Err(format!("unknown srq option '{k}'")),
            }
        }
        let idx = self.sc.srqs.len();
        self.declare(&name, Obj::Srq(idx))?;
        self.sc.srqs.push(SrqDecl {
            name,
            max_wr,
            max_sge,
            line,
        });
        Ok(())
    }

    fn qp(&mut self, line: usize, args: &[&str]) -> PResult<()> {
        let (name, ty) = match args {
            [n, t, ..] => (*n, *t),
            _ => return Err("usage: qp NAME rc|uc|ud [options]".into()),
        };
        let qp_type = match ty {
            "rc" => QpType::Rc,
            "uc" => QpType::Uc,
            "ud" => QpType::Ud,
            _ => return Err(format!("QP type must be rc, uc or ud, not '{ty}'")),
        };
        let mut d = QpDecl {
            name: name.to_string(),
            qp_type,
            sq: 16,
            rq: 16,
            send_sge: 4,
            recv_sge: 4,
            inline: 64,
            send_cq: None,
            recv_cq: None,
            srq: None,
            sig_all: false,
            line,
        };
        for a in &args[2..] {
            if *a == "sig_all" {
                d.sig_all = true;
                continue;
            }
            let (k, v) = kv(a)?;
            match k {
                "sq" => d.sq = parse_range_u32(v, 1, 16384, "sq")?,
                "rq" => d.rq = parse_range_u32(v, 1, 16384, "rq")?,
                "send_sge" => d.send_sge = parse_range_u32(v, 1, 32, "send_sge")?,
                "recv_sge" => d.recv_sge = parse_range_u32(v, 1, 32, "recv_sge")?,
                "inline" => d.inline = parse_range_u32(v, 0, 1024, "inline")?,
                "cq" => {
                    let c = self.cq_ref(v)?;
                    d.send_cq = Some(c);
                    d.recv_cq = Some(c);
                }
                "scq" => d.send_cq = Some(self.cq_ref(v)?),
                "rcq" => d.recv_cq = Some(self.cq_ref(v)?),
                "srq" => match self.lookup(v)? {
                    Obj::Srq(i) => d.srq = Some(i),
                    _ => return Err(format!("'{v}' is not an SRQ")),
                },
                _ => return Err(format!("unknown qp option '{k}'")),
            }
        }
        if d.recv_cq.is_some() && d.send_cq.is_none() {
            return Err("rcq= needs scq= (or use cq= for both)".into());
        }
        if d.srq.is_some() && qp_type == QpType::Ud {
            return Err("UD QPs with an SRQ are not supported by the runner".into());
        }
        let idx = self.sc.qps.len();
        self.declare(name, Obj::Qp(idx))?;
        self.sc.qps.push(d);
        Ok(())
    }

    /// `NAME[+OFF][:LEN]`; `len` None when not given.
    fn range_tok(&self, tok: &str) -> PResult<(usize, usize, Option<usize>)> {
        let (head, len) = match tok.split_once(':') {
            Some((h, l)) => (h, Some(parse_usize(l)?)),
            None => (tok, None),
        };
        let (name, off) = match head.split_once('+') {
            Some((n, o)) => (n, parse_usize(o)?),
            None => (head, 0),
        };
        let b = self.buf_ref(name)?;
        Ok((b, off, len))
    }

    /// A range that must lie inside its buffer (`LEN` defaults to the rest of the buffer).
    fn range_in(&self, tok: &str, len_default: Option<usize>) -> PResult<Range> {
        let (buf, off, len) = self.range_tok(tok)?;
        let size = self.sc.bufs[buf].size;
        let len = match len.or(len_default) {
            Some(l) => l,
            None => size.checked_sub(off).ok_or_else(|| {
                format!(
                    "offset {off} is past the end of '{}' ({size} B)",
                    self.sc.bufs[buf].name
                )
            })?,
        };
        self.check_in(buf, off, len)?;
        Ok(Range { buf, off, len })
    }

    fn check_in(&self, buf: usize, off: usize, len: usize) -> PResult<()> {
        let size = self.sc.bufs[buf].size;
        match off.checked_add(len) {
            Some(end) if end <= size => Ok(()),
            _ => Err(format!(
                "range {off}..{off}+{len} is outside '{}' ({size} B)",
                self.sc.bufs[buf].name
            )),
        }
    }

    /// A `set`/`final` line, `repeat=N step=S` unrolled: repetition `i` edits the range
    /// (and a `copy=` source) `i * S` bytes further, a counted `u64=V+i*K` / `u32=` writes
    /// `V + i * K`.
    fn edits(
        &mut self,
        line: usize,
        args: &[&str],
        variant: Option<String>,
        is_final: bool,
    ) -> PResult<Vec<Edit>> {
        let (mut repeat, mut step) = (1u32, 0usize);
        let mut main: Vec<&str> = Vec::new();
        for a in args {
            match a.split_once('=') {
                Some(("repeat", v)) => repeat = parse_range_u32(v, 1, MAX_REPEAT, "repeat")?,
                Some(("step", v)) => step = parse_usize(v)?,
                _ => main.push(a),
            }
        }
        if repeat > 1 && step == 0 {
            return Err(
                "repeat= on a set/final line needs step= (the bytes each repetition edits)".into(),
            );
        }
        let counted = match main.get(1).and_then(|w| w.split_once('=')) {
            Some((k @ ("u64" | "u32"), v)) if v.contains("+i") => {
                let (base, per) = parse_counted_u64(v)?;
                if repeat < 2 {
                    return Err(format!(
                        "{k}=V+i counts with the repetition: it needs repeat= of at least 2"
                    ));
                }
                Some((k, base, per))
            }
            _ => None,
        };
        let mut out = Vec::with_capacity(repeat as usize);
        for i in 0..repeat as usize {
            let what;
            let args_i: Vec<&str> = match counted {
                Some((k, base, per)) => {
                    let v = base
                        .checked_add(
                            (i as u64)
                                .checked_mul(per)
                                .ok_or("counted value overflows")?,
                        )
                        .ok_or("counted value overflows")?;
                    what = format!("{k}={v}");
                    vec![main[0], what.as_str()]
                }
                None => main.clone(),
            };
            let mut e = self.edit(line, &args_i, variant.clone(), is_final)?;
            let shift = i.checked_mul(step).ok_or("repeat × step overflows")?;
            e.range.off = e.range.off.checked_add(shift).ok_or("offset overflows")?;
            self.check_in(e.range.buf, e.range.off, e.range.len)?;
            if let EditKind::Copy(src) = &mut e.kind {
                src.off = src.off.checked_add(shift).ok_or("offset overflows")?;
                self.check_in(src.buf, src.off, src.len)?;
            }
            out.push(e);
        }
        Ok(out)
    }

    fn edit(
        &mut self,
        line: usize,
        args: &[&str],
        variant: Option<String>,
        is_final: bool,
    ) -> PResult<Edit> {
        let kw = if is_final { "final" } else { "set" };
        let (target, what) = match args {
            [t, w] => (*t, *w),
            _ => {
                return Err(format!(
                    "usage: {kw} BUF[+OFF][:LEN] fill=P|hex=BYTES|u64=V|u32=V|copy=BUF[+OFF]{}",
                    if is_final { "|any" } else { "" }
                ))
            }
        };
        let (tbuf, toff, tlen) = self.range_tok(target)?;
        let (range, kind) = if what == "any" {
            if !is_final {
                return Err("'any' is only for final lines".into());
            }
            (self.range_in(target, None)?, EditKind::Any)
        } else {
            let (k, v) = kv(what)?;
            let bytes = match k {
                "hex" => Some(parse_hex(v)?),
                "u64" => Some(parse_u64(v)?.to_ne_bytes().to_vec()),
                "u32" => Some(parse_u32(v)?.to_ne_bytes().to_vec()),
                _ => None,
            };
            if let Some(b) = bytes {
                if tlen.is_some_and(|l| l != b.len()) {
                    return Err(format!(
                        "{kw}: the range length differs from the {} bytes given",
                        b.len()
                    ));
                }
                self.check_in(tbuf, toff, b.len())?;
                (
                    Range {
                        buf: tbuf,
                        off: toff,
                        len: b.len(),
                    },
                    EditKind::Bytes(b),
                )
            } else {
                match k {
                    "fill" => (self.range_in(target, None)?, EditKind::Fill(parse_fill(v)?)),
                    "copy" => {
                        let (sbuf, soff, slen) = self.range_tok(v)?;
                        let len = match (tlen, slen) {
                            (Some(a), Some(b)) if a != b => {
                                return Err(format!("copy: lengths differ ({a} vs {b})"))
                            }
                            (Some(a), _) | (None, Some(a)) => a,
                            (None, None) => {
                                return Err("copy: give the length on either range".into())
                            }
                        };
                        self.check_in(tbuf, toff, len)?;
                        self.check_in(sbuf, soff, len)?;
                        (
                            Range {
                                buf: tbuf,
                                off: toff,
                                len,
                            },
                            EditKind::Copy(Range {
                                buf: sbuf,
                                off: soff,
                                len,
                            }),
                        )
                    }
                    _ => return Err(format!("unknown {kw} form '{k}='")),
                }
            }
        };
        Ok(Edit {
            range,
            kind,
            variant,
            line,
        })
    }

    fn connect(&mut self, line: usize, args: &[&str]) -> PResult<()> {
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

    fn note_wrs(
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

    fn post(&mut self, line: usize, args: &[&str], variant: Option<String>) -> PResult<()> {
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

    fn post_recv(&mut self, line: usize, args: &[&str], variant: Option<String>) -> PResult<()> {
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

    fn expect(&mut self, line: usize, args: &[&str], variant: Option<String>) -> PResult<()> {
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
    fn expect_one(&mut self, line: usize, e: ExpectCqe, variant: &Option<String>) -> PResult<()> {
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

fn op_kw(op: PostOp) -> &'static str {
    match op {
        PostOp::Send => "send",
        PostOp::SendImm => "send_imm",
        PostOp::Write => "write",
        PostOp::WriteImm => "write_imm",
        PostOp::Read => "read",
        PostOp::Cas => "cas",
        PostOp::Faa => "faa",
    }
}

fn split_variant(head: &str) -> PResult<(&str, Option<String>)> {
    match head.split_once('[') {
        None => Ok((head, None)),
        Some((kw, rest)) => {
            let v = rest
                .strip_suffix(']')
                .ok_or_else(|| format!("'{head}': a variant is written KEYWORD[tag]"))?;
            for term in v.split(',') {
                let name = term.strip_prefix('!').unwrap_or(term);
                if name.is_empty()
                    || !name
                        .bytes()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_')
                {
                    return Err(format!(
                        "bad variant tag '{v}' (names of lowercase letters, digits and '_', \
                         '!' for not, ',' for and: sim, mlx5, verbs, rxe or a device name)"
                    ));
                }
            }
            if kinds(&Some(v.to_string())) == 0 {
                return Err(format!("tag '{v}' applies on no device"));
            }
            Ok((kw, Some(v.to_string())))
        }
    }
}

fn one_arg<'a>(args: &[&'a str], usage: &str) -> PResult<&'a str> {
    match args {
        [a] => Ok(a),
        _ => Err(format!("usage: {usage}")),
    }
}

fn check_ident(n: &str) -> PResult<()> {
    let ok = !n.is_empty()
        && n.bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
        && n.as_bytes()[0].is_ascii_alphabetic();
    if ok {
        Ok(())
    } else {
        Err(format!(
            "bad name '{n}' (a letter, then letters, digits, '_' or '-')"
        ))
    }
}

fn kv(tok: &str) -> PResult<(&str, &str)> {
    tok.split_once('=')
        .filter(|(k, v)| !k.is_empty() && !v.is_empty())
        .ok_or_else(|| format!("expected KEY=VALUE, got '{tok}'"))
}

/// A number: decimal, `0x` hex, `_` separators, and for sizes a `K` / `M` suffix (KiB, MiB).
pub(crate) fn parse_u64(s: &str) -> PResult<u64> {
    let t: String = s.chars().filter(|&c| c != '_').collect();
    let (digits, mult) = if let Some(d) = t.strip_suffix('K') {
        (d, 1u64 << 10)
    } else if let Some(d) = t.strip_suffix('M') {
        (d, 1u64 << 20)
    } else {
        (t.as_str(), 1)
    };
    let v = if let Some(h) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        u64::from_str_radix(h, 16)
    } else {
        digits.parse::<u64>()
    }
    .map_err(|_| format!("bad number '{s}'"))?;
    v.checked_mul(mult)
        .ok_or_else(|| format!("number '{s}' overflows"))
}

/// [`parse_counted_u32`] for 64-bit values.
fn parse_counted_u64(s: &str) -> PResult<(u64, u64)> {
    match s.split_once("+i") {
        None => Ok((parse_u64(s)?, 0)),
        Some((base, "")) => Ok((parse_u64(base)?, 1)),
        Some((base, rest)) => match rest.strip_prefix('*') {
            Some(k) => Ok((parse_u64(base)?, parse_u64(k)?)),
            None => Err(format!("'{s}': a counted value is V, V+i or V+i*K")),
        },
    }
}

/// A value that may count with a repetition: `V`, `V+i` or `V+i*K` (`i` = 0, 1, ...).
/// Returns (V, K).
fn parse_counted_u32(s: &str) -> PResult<(u32, u32)> {
    match s.split_once("+i") {
        None => Ok((parse_u32(s)?, 0)),
        Some((base, "")) => Ok((parse_u32(base)?, 1)),
        Some((base, rest)) => match rest.strip_prefix('*') {
            Some(k) => Ok((parse_u32(base)?, parse_u32(k)?)),
            None => Err(format!("'{s}': a counted value is V, V+i or V+i*K")),
        },
    }
}

fn parse_u32(s: &str) -> PResult<u32> {
    u32::try_from(parse_u64(s)?).map_err(|_| format!("'{s}' does not fit in 32 bits"))
}

fn parse_usize(s: &str) -> PResult<usize> {
    usize::try_from(parse_u64(s)?).map_err(|_| format!("'{s}' is too large"))
}

fn parse_range_u32(s: &str, lo: u32, hi: u32, what: &str) -> PResult<u32> {
    let v = parse_u32(s)?;
    if v < lo || v > hi {
        return Err(format!("{what}={v} out of range ({lo} ..= {hi})"));
    }
    Ok(v)
}

fn parse_fill(s: &str) -> PResult<Fill> {
    let (k, v) = match s.split_once(':') {
        Some((k, v)) => (k, Some(v)),
        None => (s, None),
    };
    let byte = |v: &str| -> PResult<u8> {
        u8::try_from(parse_u64(v)?).map_err(|_| format!("'{v}' is not a byte"))
    };
    Ok(match (k, v) {
        ("zero", None) => Fill::Zero,
        ("byte", Some(v)) => Fill::Byte(byte(v)?),
        ("seq", None) => Fill::Seq(0),
        ("seq", Some(v)) => Fill::Seq(byte(v)?),
        ("rand", Some(v)) => Fill::Rand(parse_u64(v)?),
        _ => {
            return Err(format!(
                "bad fill '{s}' (zero, byte:N, seq, seq:START, rand:SEED)"
            ))
        }
    })
}

fn parse_access(s: &str) -> PResult<u32> {
    let mut a = 0;
    for part in s.split(',') {
        a |= match part {
            "all" => Access::ALL.0,
            "none" => 0,
            "lw" => Access::LOCAL_WRITE.0,
            "rw" => Access::REMOTE_WRITE.0,
            "rr" => Access::REMOTE_READ.0,
            "ra" => Access::REMOTE_ATOMIC.0,
            _ => {
                return Err(format!(
                    "bad access '{part}' (all, none, lw, rw, rr, ra; comma separated)"
                ))
            }
        };
    }
    Ok(a)
}

fn parse_hex(s: &str) -> PResult<Vec<u8>> {
    let s = s.strip_prefix("0x").unwrap_or(s);
    if s.is_empty() || s.len() % 2 != 0 || !s.bytes().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!(
            "hex= needs an even number of hex digits, got '{s}'"
        ));
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|_| format!("bad hex '{s}'")))
        .collect()
}

fn parse_reject(s: &str) -> PResult<String> {
    if POST_ERROR_NAMES.contains(&s) {
        Ok(s.to_string())
    } else {
        Err(format!(
            "unknown rejection '{s}' (one of {})",
            POST_ERROR_NAMES.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "\
# a comment
name tiny
desc one send
buf src 4K fill=seq
buf dst 4096 fill=byte:0xee access=lw
qp a rc sq=8
qp b rc
connect a b rnr_retry=3
post_recv b wr=1 sge=dst+16:100
ring_recv b
post a send wr=2 sge=src+4:100 signaled   # trailing comment
ring a
expect wr=2 SUCCESS SEND
expect wr=1 SUCCESS RECV len=100
final dst+16 copy=src+4:100
";

    fn err(text: &str) -> ParseError {
        match parse("t.scn", "t", text) {
            Ok(_) => panic!("parsed but should not:\n{text}"),
            Err(e) => e,
        }
    }

    #[test]
    fn parses_a_small_scenario() {
        let sc = parse("t.scn", "t", GOOD).unwrap();
        assert_eq!(sc.name, "tiny");
        assert_eq!(sc.bufs.len(), 2);
        assert_eq!(sc.bufs[0].size, 4096);
        assert_eq!(sc.bufs[0].fill, Fill::Seq(0));
        assert_eq!(sc.bufs[1].fill, Fill::Byte(0xee));
        assert_eq!(sc.bufs[1].access, 1);
        assert_eq!(sc.qps[0].sq, 8);
        assert_eq!(sc.steps.len(), 6);
        match &sc.steps[0].kind {
            StepKind::Connect { a: 0, b: 1, opts } => assert_eq!(opts.rnr_retry, Some(3)),
            k => panic!("{k:?}"),
        }
        match &sc.steps[3].kind {
            StepKind::Post(p) => {
                assert_eq!(p.wr_id, 2);
                assert_eq!(p.signal, Signal::All);
                assert_eq!(
                    p.sges,
                    vec![Range {
                        buf: 0,
                        off: 4,
                        len: 100
                    }]
                );
            }
            k => panic!("{k:?}"),
        }
        match &sc.steps[5].kind {
            StepKind::Expect(g) => {
                assert_eq!(g.len(), 2);
                assert_eq!(g[1].len, Some(100));
                assert_eq!(g[1].opcode, Some(WcOpcode::Recv));
                assert_eq!(g[1].line, 14);
            }
            k => panic!("{k:?}"),
        }
        assert_eq!(
            sc.finals[0].kind,
            EditKind::Copy(Range {
                buf: 0,
                off: 4,
                len: 100
            })
        );
        assert_eq!(sc.finals[0].range.off, 16);
    }

    /// Counted immediates, `repeat=` on expect lines, an any-order block as a group of its
    /// own, and tags that exclude each other expecting one wr twice.
    #[test]
    fn second_edition_forms() {
        let text = "\
buf s 4096
buf d 4096
differs the sim and rxe report it differently
qp a rc
qp b rc
connect a b
post_recv b wr=10 sge=d:64 repeat=4 step=64
ring_recv b
post a send_imm wr=1 sge=s:64 imm=0x100+i*2 repeat=4 step=64 signal=last
ring a
expect wr=4 SUCCESS SEND covered=3
expect any-order {
expect wr=10 SUCCESS RECV len=64 imm=0x100+i*2 repeat=2
expect wr=12 SUCCESS RECV len=64 imm=0x104+i repeat=2
}
expect[sim] wr=12 SUCCESS RECV
expect[!sim] wr=12 SUCCESS RECV
";
        // The two tagged lines after the block would expect wr=12 twice: refused. Without
        // them, the file parses.
        let e = err(text);
        assert!(e.msg.contains("already expected"), "{e}");
        assert_eq!(e.line, 16);
        let text = text.replace(
            "expect[sim] wr=12 SUCCESS RECV\nexpect[!sim] wr=12 SUCCESS RECV\n",
            "",
        );
        let sc = parse("t.scn", "t", &text).unwrap();
        let StepKind::Post(p) = &sc.steps[3].kind else {
            panic!("{:?}", sc.steps[3])
        };
        assert_eq!((p.imm, p.imm_step, p.repeat), (0x100, 2, 4));
        let groups: Vec<Vec<(u64, Option<u32>, bool)>> = sc
            .steps
            .iter()
            .filter_map(|s| match &s.kind {
                StepKind::Expect(g) => {
                    Some(g.iter().map(|e| (e.wr_id, e.imm, e.any_order)).collect())
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            groups,
            vec![
                vec![(4, None, false)],
                vec![
                    (10, Some(0x100), true),
                    (11, Some(0x102), true),
                    (12, Some(0x104), true),
                    (13, Some(0x105), true)
                ]
            ]
        );
        // Tags that cannot both apply may each expect the same request.
        for (a, b, ok) in [
            ("sim", "!sim", true),
            ("mlx5,!sim", "sim", true),
            ("rxe", "mlx5", true),
            ("verbs", "sim", true),
            ("verbs", "mlx5", false), // mlx5 hardware through libibverbs is both
            ("mlx5_0", "mlx5", false),
            ("rxe0", "sim", true),
        ] {
            let t = format!(
                "buf s 64\ndiffers x\nqp a rc\nqp b rc\nconnect a b\npost a send wr=1 sge=s:8 signaled\nring a\nexpect[{a}] wr=1 SUCCESS SEND\nexpect[{b}] wr=1 SUCCESS SEND\n"
            );
            let got = parse("t.scn", "t", &t);
            assert_eq!(got.is_ok(), ok, "[{a}] and [{b}]: {got:?}");
        }
    }

    #[test]
    fn errors_name_the_line() {
        let bad = GOOD.replace("ring a\n", "ring nosuch\n");
        let e = err(&bad);
        assert_eq!(e.line, 12);
        assert!(e.msg.contains("'nosuch' is not declared"), "{e}");
        assert!(e.to_string().starts_with("t.scn:12: "), "{e}");
    }

    #[test]
    fn malformed_inputs_are_errors_not_panics() {
        let cases: &[(&str, &str)] = &[
            ("buf x 0", "out of range"),
            ("buf x 1G", "bad number"),
            ("buf x 0xffffffffffffffffff", "bad number"),
            ("buf x 99999999999999999M", "overflows"),
            ("buf x 8 fill=seq:300", "not a byte"),
            ("buf x 8 fill=wat", "bad fill"),
            ("buf 9x 8", "bad name"),
            ("buf x 8\nbuf x 8", "already declared"),
            ("qp a xx", "QP type"),
            ("qp a rc sq=0", "out of range"),
            ("qp a rc\npost a send wr=1 sge=nope:4", "not declared"),
            ("buf s 8\nqp a rc\npost a send wr=1 sge=s+4:8", "outside"),
            (
                "buf s 8\nqp a rc\npost a send wr=1 sge=s+18446744073709551615:8",
                "outside",
            ),
            ("buf s 8\nqp a rc\npost a send wr=1 sge=s", "needs a length"),
            (
                "buf s 8\nqp a rc\npost a write wr=1 sge=s:8",
                "needs remote",
            ),
            ("buf s 8\nqp a rc\npost a send wr=1 imm=3", "no immediate"),
            (
                "buf s 64\nqp a rc\npost a send wr=1 sge=s:8 repeat=9 step=8",
                "outside",
            ),
            (
                "buf s 64\nqp a rc\npost a send wr=18446744073709551615 sge=s:8 repeat=2",
                "overflows",
            ),
            (
                "qp a rc\npost a send wr=1\npost a send wr=1",
                "already used",
            ),
            ("qp a rc\npost a send wr=1 reject=nope", "unknown rejection"),
            ("qp a rc\nexpect wr=1 SUCCESS SEND", "not posted"),
            (
                "qp a rc\npost a send wr=1\nexpect wr=1 SUCCESS",
                "needs its opcode",
            ),
            (
                "qp a rc\npost a send wr=1\nexpect wr=1 WR_FLUSH_ERR SEND",
                "only wr=",
            ),
            (
                "qp a rc\npost a send wr=1\nexpect wr=1 SUCCESS RECV",
                "send request",
            ),
            (
                "qp a rc\npost a send wr=1\nexpect wr=1 BOGUS",
                "unknown status",
            ),
            (
                "qp a rc\npost[rxe] a send wr=1\nexpect wr=1 SUCCESS SEND",
                "differs",
            ),
            ("qp a rc\nqp[rxe] b rc", "takes no [variant]"),
            ("qp a rc\npost[RXE] a send wr=1", "bad variant"),
            ("qp a rc\npost[rxe a send wr=1", "variant is written"),
            ("qp a rc\nfrobnicate", "unknown keyword"),
            ("qp a rc\npost[sim,!mlx5] a send wr=1", "applies on no device"),
            ("qp a rc\npost[rxe,!verbs] a send wr=1", "applies on no device"),
            ("qp a rc\npost[sim,] a send wr=1", "bad variant"),
            ("qp a rc\nexpect any-order {", "never closed"),
            ("qp a rc\nexpect any-order {\n}", "is empty"),
            ("qp a rc\n}", "without an open"),
            (
                "qp a rc\nexpect any-order {\nring a\n}",
                "only expect lines",
            ),
            (
                "qp a rc\nexpect any-order {\nexpect any-order {",
                "only expect lines",
            ),
            ("qp a rc\nexpect[rxe] any-order {", "not the block"),
            ("qp a rc\nstate a", "usage: state QP"),
            ("qp a rc\nstate a BROKEN", "unknown QP state"),
            ("qp a rc\nstate nope RTS", "not declared"),
            ("buf s 64\nfinal s:8 u64=1 repeat=2", "needs step="),
            ("buf s 64\nfinal s:8 u64=1+i", "repeat= of at least 2"),
            ("buf s 64\nfinal s:8 u64=1+i repeat=9 step=8", "outside"),
            ("buf s 64\nbuf t 64\nfinal s:8 copy=t+60 repeat=2 step=8", "outside"),
            ("buf s 64\nfinal s:4 u32=0xffffffff+i repeat=2 step=4", "does not fit in 32 bits"),
            ("buf s 8\nqp a rc\npost a send_imm wr=1 sge=s:8 imm=1+i", "repeat= of at least 2"),
            ("buf s 8\nqp a rc\npost a send_imm wr=1 sge=s:4 imm=1+j repeat=2", "bad number"),
            ("buf s 8\nqp a rc\npost a send_imm wr=1 sge=s:4 imm=1+ix2 repeat=2", "V+i*K"),
            (
                "buf s 64\nqp a rc\nqp b rc\nconnect a b\npost_recv b wr=1 sge=s:8 repeat=2 step=8\nexpect wr=1 SUCCESS RECV repeat=3",
                "wr=3 was not posted",
            ),
            ("qp a rc\nqp b uc\nconnect a b", "different types"),
            ("qp a rc\nconnect a a", "two different"),
            ("qp a rc\nconnect a nope", "not declared"),
            ("qp a rc\nqp b rc\nconnect a b rnr_retry=8", "0..=7"),
            ("buf s 8\nset s+4 u64=1", "outside"),
            ("buf s 8\nset s hex=abc", "even number"),
            ("buf s 8\nset s any", "only for final"),
            ("buf s 8\nbuf t 8\nfinal s copy=t", "give the length"),
            ("buf s 8\nbuf t 4\nfinal s copy=t:8", "outside"),
            (
                "srq s\nqp a rc srq=s\npost_recv a wr=1",
                "post its receives to the SRQ",
            ),
            ("", "no 'qp' line"),
            ("qp a rc", "no 'expect' line"),
        ];
        for (text, want) in cases {
            let e = err(text);
            assert!(
                e.msg.contains(want),
                "input {text:?}: error {e} does not mention {want:?}"
            );
        }
    }

    #[test]
    fn binary_garbage_does_not_panic() {
        for seed in 1u64..=200 {
            let mut bytes = [0u8; 96];
            Fill::Rand(seed).apply(&mut bytes);
            let text = String::from_utf8_lossy(&bytes).replace('\u{0}', "\n");
            let _ = parse("g.scn", "g", &text);
            let with_kw = format!("qp a rc\npost a {text}\nexpect {text}\nbuf {text}");
            let _ = parse("g.scn", "g", &with_kw);
        }
    }

    #[test]
    fn variants_may_reuse_a_wr_id() {
        let text = "\
differs rxe reports the local error differently
buf s 8
qp a rc
qp b rc
connect a b
post[rxe] a send wr=1 sge=s:8 signaled
post[mlx5] a send wr=1 sge=s:4 signaled
ring a
expect[rxe] wr=1 LOC_QP_OP_ERR
expect[mlx5] wr=1 LOC_LEN_ERR
";
        let sc = parse("v.scn", "v", text).unwrap();
        assert_eq!(sc.differs.len(), 1);
        match &sc.steps.last().unwrap().kind {
            StepKind::Expect(g) => {
                assert_eq!(g.len(), 2);
                assert_eq!(g[0].variant.as_deref(), Some("rxe"));
            }
            k => panic!("{k:?}"),
        }
    }

    #[test]
    fn numbers() {
        assert_eq!(parse_u64("1M").unwrap(), 1 << 20);
        assert_eq!(parse_u64("0x10").unwrap(), 16);
        assert_eq!(parse_u64("1_000").unwrap(), 1000);
        assert!(parse_u64("").is_err());
        assert!(parse_u64("-1").is_err());
        assert_eq!(parse_hex("0a0B").unwrap(), vec![0x0a, 0x0b]);
    }
}
