//! Declarations and byte images: `buf`, `cq`, `srq` and `qp` lines, byte ranges
//! (`NAME[+OFF][:LEN]`, checked inside their buffer) and the edits of `set` and `final`
//! lines (fill, bytes, copy, `any`, counted with `repeat=`).

use super::lex::{
    kv, parse_access, parse_counted_u64, parse_fill, parse_hex, parse_range_u32, parse_u32,
    parse_u64, parse_usize, PResult,
};
use super::{Obj, Parser, MAX_BUF, MAX_REPEAT};
use crate::providers::{Access, QpType};
use crate::scenario::{BufDecl, CqDecl, Edit, EditKind, Fill, QpDecl, Range, SrqDecl};

impl Parser {
    pub(super) fn buf(&mut self, line: usize, args: &[&str]) -> PResult<()> {
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

    pub(super) fn cq(&mut self, line: usize, args: &[&str]) -> PResult<()> {
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

    pub(super) fn srq(&mut self, line: usize, args: &[&str]) -> PResult<()> {
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

    pub(super) fn qp(&mut self, line: usize, args: &[&str]) -> PResult<()> {
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
    pub(super) fn range_tok(&self, tok: &str) -> PResult<(usize, usize, Option<usize>)> {
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
    pub(super) fn range_in(&self, tok: &str, len_default: Option<usize>) -> PResult<Range> {
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

    pub(super) fn check_in(&self, buf: usize, off: usize, len: usize) -> PResult<()> {
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
    pub(super) fn edits(
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

    pub(super) fn edit(
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
}
