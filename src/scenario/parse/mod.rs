//! The scenario file parser: line-oriented, every error names its line, no panics.
//!
//! [`parse`] turns the text of one file into a [`Scenario`] or the first [`ParseError`]
//! (file, line, message). The parser is split by concern: this module holds the line
//! dispatcher, the name table and the provider-tag logic; [`lex`] the tokens (numbers, fills,
//! access flags, hex, `key=value`); [`decl`] the declarations (`buf`, `cq`, `srq`, `qp`) and
//! byte ranges and edits (`set`, `final`); [`statements`] `connect`, `post` and `post_recv`;
//! [`expect`] the expectations (`expect` lines and blocks, `event`, `within`). Every
//! reference is checked when its line is read (names declared before use, ranges inside
//! their buffer, wr ids unique per variant), and [`Parser::finish`] checks what needs the
//! whole file (every posted request expected, variant tags declared by `differs`).

use std::collections::HashMap;

use super::{ParseError, RecvTarget, Scenario, Step, StepKind, VERSION};
use crate::providers::QpState;
use lex::{check_ident, one_arg, split_variant, PResult};

mod decl;
mod expect;
mod lex;
mod statements;
#[cfg(test)]
mod tests;

/// Largest buffer a scenario may declare (a typo must not allocate the machine away).
const MAX_BUF: usize = 64 << 20;
/// Largest `repeat=`.
const MAX_REPEAT: u32 = 4096;
/// Most SGEs one line may list.
const MAX_SGES: usize = 64;

/// Parse the text of one scenario file. `file` is used in messages, `default_name` when the
/// file has no `name` line.
pub fn parse(file: &str, default_name: &str, text: &str) -> Result<Scenario, ParseError> {
    let mut p = Parser {
        sc: Scenario {
            name: default_name.to_string(),
            file: file.to_string(),
            desc: String::new(),
            version: 1,
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
                    | "event"
                    | "fault"
            ) {
                return Err(format!(
                    "'{kw}' takes no [variant]: only steps and 'final' lines may differ by provider"
                ));
            }
        }
        let mut args: Vec<String> = Vec::new();
        let mut toks = toks.peekable();
        while let Some(t) = toks.next() {
            // `within 50ms` reads as `within=50ms`.
            match (t, toks.peek()) {
                ("within", Some(d)) if kw == "expect" || kw == "event" => {
                    args.push(format!("within={d}"));
                    toks.next();
                }
                _ => args.push(t.to_string()),
            }
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
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
            "version" => {
                let v = one_arg(&args, "version N")?;
                self.sc.version = match v.parse::<u32>() {
                    Ok(n @ 1..=VERSION) => n,
                    Ok(n) if n > VERSION => {
                        return Err(format!(
                            "version {n}: this runner reads versions 1 to {VERSION}; \
                             a newer rdma-direct reads this file"
                        ))
                    }
                    _ => return Err(format!("version '{v}': a number from 1 to {VERSION}")),
                };
                if self.sc.steps.len() + self.sc.bufs.len() + self.sc.qps.len() > 0 {
                    return Err("the version line comes before any declaration or step".into());
                }
            }
            "event" => self.event(line, &args, variant)?,
            "fault" => self.fault(line, &args, variant)?,
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
            .any(|s| matches!(s.kind, StepKind::Expect(_) | StepKind::Event(_)))
        {
            return Err((
                0,
                "no 'expect' or 'event' line: a scenario must expect completions or events".into(),
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
}
