//! The final byte check and how the runner prints what it compares: the expected images
//! (initial fill, `set` edits, then `final` edits; `any` ranges not compared), every
//! differing range of every buffer (up to [`MAX_RANGES`] each) with a hex window of both and
//! the line of the `final` edit that covers it, and one-line forms of a completion and an
//! expectation.

use std::fmt::Write as _;

use super::Runner;
use crate::providers::{Completion, Provider, WcFlags};
use crate::scenario::{Edit, EditKind, ExpectCqe, Failure, Mismatch, Scenario, MAX_RANGES};

/// One completion, printed in full.
pub(super) fn fmt_cqe(c: &Completion) -> String {
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

pub(super) fn fmt_expect(e: &ExpectCqe, sc: &Scenario) -> String {
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
pub(super) fn hex_window(bytes: &[u8], at: usize, end: usize) -> String {
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
pub(super) fn diff_ranges(got: &[u8], want: &[u8], care: &[bool]) -> (u64, Vec<(usize, usize)>) {
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
    pub(super) fn check_buffers(&self) -> Result<u64, Failure> {
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

pub(super) fn apply_edit(images: &mut [Vec<u8>], care: Option<&mut Vec<Vec<bool>>>, e: &Edit) {
    let src = images.to_vec();
    apply_edit_from(images, &src, care, e);
}

/// Apply one `set`/`final` edit to `images`; `copy=` reads from `source` (the initial images).
pub(super) fn apply_edit_from(
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
