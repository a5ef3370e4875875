//! Setting a run up: the initial byte images (fill, then `set` lines), one anonymous
//! mapping and MR per buffer, the CQs, SRQs and QPs the file declares (a QP without `cq=`
//! gets its own CQ sized for both its queues), and the connection options a `connect` line
//! asks for (retry count below 7 so that a scenario always ends).

use std::collections::{HashMap, VecDeque};

use memmap2::MmapMut;

use super::diff::apply_edit;
use super::{two_mut, Runner};
use crate::providers::{Access, ConnectOpts, Provider, QpCaps, QpConfig};
use crate::scenario::{ConnectOverrides, Failure, Mismatch, RunOpts, Scenario, StepKind};

impl<'s, P: Provider> Runner<'s, P> {
    pub(super) fn setup(p: &mut P, sc: &'s Scenario, opts: &'s RunOpts) -> Result<Self, Failure> {
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
            watch_events: sc
                .steps
                .iter()
                .any(|s| matches!(s.kind, StepKind::Event(_)) && opts.applies(&s.variant)),
            events: Vec::new(),
        })
    }

    pub(super) fn connect_opts(&self, o: &ConnectOverrides) -> ConnectOpts {
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
}
