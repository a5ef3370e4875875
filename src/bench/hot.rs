//! `bench post|poll`: the mlx5 hot path's own cost per operation, on plain memory.
//!
//! Contract: the mlx5 provider's queues run on plain memory with the bench rig
//! (`rdma-direct-rig`'s `Loopback`) playing the device, so what is timed is the driver's work
//! (writing WQEs, doorbell record, doorbell or BlueFlame stores; parsing CQEs), not a NIC.
//! Each sample times at least [`Params::per_sample`] operations between two clock reads
//! (post: whole batches and their doorbells, the requests built before the clock; poll:
//! whole poll calls, the rig's CQE writing outside the clock), so the clock's own cost stays
//! small against a few-ns post. [`post`] and [`poll`] return the samples (ns per operation)
//! and the operations each timed; [`Stats::perftest`] reduces them as perftest does, and
//! (feature `report`) [`Stats::table`] and [`Stats::json_line`] word them; nothing prints.

use std::time::Instant;

use crate::providers::mlx5::{AddressVector, DoorbellMode, Mlx5Sq};
use crate::providers::{Completion, CompletionQueue, PostError, QueuePair, SendQueue, SendWr};
use rdma_direct_rig as plain;

pub use plain::BenchOp;

/// Operations timed per sample, at least (the default of [`Params::per_sample`]).
pub const OPS_PER_SAMPLE: u32 = 64;

/// Largest [`Params::per_sample`]: a post sample's requests (up to 5 WQEBBs each) fit the
/// 4096-WQEBB send queue.
pub const MAX_PER_SAMPLE: u32 = 512;

/// One `bench post` / `bench poll` run.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// Message size in bytes (post).
    pub size: u32,
    /// Requests (post) or completions (poll) measured.
    pub iters: u32,
    /// Requests per doorbell (post) or completions per poll call (poll), 1..=64.
    pub batch: u32,
    /// The operation posted (post).
    pub op: BenchOp,
    /// Doorbell or BlueFlame for single WQEs (post).
    pub mode: DoorbellMode,
    /// Operations timed per sample, at least ([`OPS_PER_SAMPLE`]..=[`MAX_PER_SAMPLE`]).
    pub per_sample: u32,
}

/// What a run measured.
#[derive(Clone, Debug, Default)]
pub struct Samples {
    /// ns per operation, one per sample.
    pub ns_per_op: Vec<f64>,
    /// The operations each sample timed (the last may be a remainder).
    pub ops: Vec<u32>,
    /// The timed ns, summed over the samples.
    pub total_ns: f64,
    /// Operations measured in all.
    pub measured: u32,
}

impl Samples {
    fn push(&mut self, ns: f64, ops: u32) {
        self.total_ns += ns;
        self.ns_per_op.push(ns / f64::from(ops));
        self.ops.push(ops);
    }
}

/// perftest's latency statistics over per-operation samples (ns; Mpps).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stats {
    pub t_min: f64,
    pub t_max: f64,
    pub t_typical: f64,
    pub t_avg: f64,
    pub t_stdev: f64,
    pub p99: f64,
    pub p999: f64,
    pub mpps: f64,
}

impl Stats {
    /// perftest's rule: the samples sorted, the two largest dropped for the typical (median),
    /// average, standard deviation and percentiles; `t_max` the second-largest raw sample;
    /// the rate `ops` over `total_ns`. `None` without samples.
    pub fn perftest(samples: &[f64], ops: u32, total_ns: f64) -> Option<Stats> {
        if samples.is_empty() {
            return None;
        }
        let mut s = samples.to_vec();
        s.sort_by(|a, b| a.total_cmp(b));
        let n_raw = s.len();
        let t_max = if n_raw >= 2 {
            s[n_raw - 2]
        } else {
            s[n_raw - 1]
        };
        let kept = &s[..n_raw.saturating_sub(2).max(1)];
        let n = kept.len();
        let avg = kept.iter().sum::<f64>() / n as f64;
        let var = kept.iter().map(|x| (x - avg) * (x - avg)).sum::<f64>() / n as f64;
        let pct = |p: f64| kept[((p * n as f64).ceil() as usize).min(n - 1)];
        Some(Stats {
            t_min: kept[0],
            t_max,
            t_typical: kept[n / 2],
            t_avg: avg,
            t_stdev: var.sqrt(),
            p99: pct(0.99),
            p999: pct(0.999),
            mpps: f64::from(ops) / total_ns * 1e3,
        })
    }
}

/// Post + ring: `iters` requests (rounded up to whole batches) of `op`, a doorbell per
/// `batch`, the last of each batch signaled; the CQ drained between samples (untimed).
pub fn post(o: &Params) -> Result<Samples, String> {
    let mut lb = plain::Loopback::new(4096);
    lb.qp.set_doorbell_mode(o.mode);
    let sge = lb.sge(o.size);
    let payload = vec![0x5au8; o.size.min(256) as usize];
    // Whole batches per sample, at least `per_sample` requests.
    let per_sample = o.per_sample.div_ceil(o.batch);
    let batches = o.iters.div_ceil(o.batch);
    let mut out = Samples {
        ns_per_op: Vec::with_capacity(batches.div_ceil(per_sample) as usize),
        ops: Vec::with_capacity(batches.div_ceil(per_sample) as usize),
        total_ns: 0.0,
        measured: batches * o.batch,
    };
    let mut id = 0u64;
    // The requests are built before the clock starts (WQEBBs per request: at most 5 here).
    let mut wrs = Vec::with_capacity((o.batch * per_sample) as usize);
    let mut left = batches;
    while left > 0 {
        let these = left.min(per_sample);
        left -= these;
        if lb.qp.sq().free_slots() < o.batch * per_sample * 5 {
            lb.drain();
        }
        wrs.clear();
        for _ in 0..these {
            for k in 0..o.batch {
                let wr = lb.wr(o.op, &sge, &payload, id);
                wrs.push(if k + 1 == o.batch { wr.signaled() } else { wr });
                id += 1;
            }
        }
        let sq = lb.qp.sq();
        let t = Instant::now();
        let done = post_sample(sq, &wrs, o.batch as usize);
        let ns = t.elapsed().as_nanos() as f64;
        done.map_err(|e| format!("post refused: {e}"))?;
        out.push(ns, wrs.len() as u32);
    }
    lb.drain();
    Ok(out)
}

/// The timed part of one `bench post` sample: post `wrs` in order, ringing the doorbell after
/// every `batch` of them. Out of line so that callgrind can count its instructions alone
/// (`--toggle-collect='*post_sample*'`, benches/README.md): the clock reads stay outside.
#[inline(never)]
fn post_sample(
    sq: &mut Mlx5Sq<plain::Plain>,
    wrs: &[SendWr<'_, AddressVector>],
    batch: usize,
) -> Result<(), PostError> {
    for chunk in wrs.chunks(batch) {
        for wr in chunk {
            sq.post(*wr).map_err(|r| r.error)?;
        }
        sq.ring();
    }
    Ok(())
}

/// Poll: the rig writes up to 1024 completions at a time (untimed), which are polled
/// `batch` per call (timed), `iters` in all.
pub fn poll(o: &Params) -> Result<Samples, String> {
    let mut lb = plain::Loopback::new(4096);
    let sge = lb.sge(8);
    let payload = [0u8; 8];
    let mut wcs = vec![Completion::EMPTY; o.batch as usize];
    let mut out = Samples {
        measured: o.iters,
        ..Samples::default()
    };
    let mut done = 0u32;
    let mut id = 0u64;
    while done < o.iters {
        // The "device" fills the CQ with up to 1024 completions (untimed)...
        let n = (o.iters - done).min(1024);
        for _ in 0..n {
            let wr = lb.wr(BenchOp::Send, &sge, &payload, id).signaled();
            if lb.qp.sq().post(wr).is_err() {
                return Err("could not stage the completions to poll".into());
            }
            id += 1;
        }
        lb.qp.sq().ring();
        lb.dev.complete_sends(&mut lb.dcq);
        // ...and they are polled in batches (timed): whole poll calls per sample, at least
        // `per_sample` completions.
        let mut got = 0;
        while got < n {
            let want = (n - got).min(o.per_sample.max(o.batch));
            let mut k = 0;
            let t = Instant::now();
            while k < want {
                let m = lb.cq.poll(&mut wcs[..(want - k).min(o.batch) as usize]);
                if m == 0 {
                    break;
                }
                k += m as u32;
            }
            let ns = t.elapsed().as_nanos() as f64;
            if k == 0 {
                return Err(format!("CQ ran dry after {got} of {n}"));
            }
            out.push(ns, k);
            got += k;
        }
        done += n;
    }
    Ok(out)
}

#[cfg(feature = "report")]
impl Stats {
    /// perftest's table of a run (`size` bytes, `iters` operations): the title line and
    /// the figures' line, each cell in its title's width, two spaces between cells.
    pub fn table(&self, size: u32, iters: u32) -> String {
        use crate::report::table::table_line;
        let titles = [
            "#bytes",
            "#iterations",
            "t_min[nsec]",
            "t_max[nsec]",
            "t_typical[nsec]",
            "t_avg[nsec]",
            "t_stdev[nsec]",
            "99% percentile[nsec]",
            "99.9% percentile[nsec]",
            "MsgRate[Mpps]",
        ];
        let f = |v: f64| format!("{v:.2}");
        let cells = [
            size.to_string(),
            iters.to_string(),
            f(self.t_min),
            f(self.t_max),
            f(self.t_typical),
            f(self.t_avg),
            f(self.t_stdev),
            f(self.p99),
            f(self.p999),
            format!("{:.3}", self.mpps),
        ];
        let header: Vec<String> = titles.iter().map(|t| t.to_string()).collect();
        format!(
            "{}\n{}\n",
            table_line(&titles, &header),
            table_line(&titles, &cells)
        )
    }

    /// The run as one JSON object on one line: `head` (the run's own fields, JSON members
    /// without braces) then `counts`, the operations each sample timed (`samples`, their
    /// median `ops_per_sample` and smallest `min_ops_per_sample`; sorted here), then the
    /// figures in ns and Mpps, marked plain memory.
    pub fn json_line(&self, head: &str, counts: &mut [u32]) -> String {
        counts.sort_unstable();
        let n = counts.len();
        let (median, least) = if n == 0 {
            (0, 0)
        } else {
            (counts[n / 2], counts[0])
        };
        format!(
            "{{{head},\"samples\":{n},\"ops_per_sample\":{median},\"min_ops_per_sample\":{least},\
             \"t_min_ns\":{:.3},\"t_max_ns\":{:.3},\
             \"t_typical_ns\":{:.3},\"t_avg_ns\":{:.3},\"t_stdev_ns\":{:.3},\"p99_ns\":{:.3},\
             \"p999_ns\":{:.3},\"mpps\":{:.4},\"memory\":\"plain memory, not hardware\"}}\n",
            self.t_min,
            self.t_max,
            self.t_typical,
            self.t_avg,
            self.t_stdev,
            self.p99,
            self.p999,
            self.mpps
        )
    }
}

#[cfg(all(test, feature = "report"))]
mod tests {
    use super::*;

    #[test]
    fn the_table_and_the_json_line_carry_every_figure() {
        let st = Stats {
            t_min: 3.0,
            t_max: 9.5,
            t_typical: 3.25,
            t_avg: 3.5,
            t_stdev: 0.125,
            p99: 7.0,
            p999: 9.0,
            mpps: 307.6923,
        };
        assert_eq!(
            st.table(8, 1000),
            " #bytes   #iterations  t_min[nsec]  t_max[nsec]  t_typical[nsec]  t_avg[nsec]  \
             t_stdev[nsec]  99% percentile[nsec]  99.9% percentile[nsec]  MsgRate[Mpps]\n \
             8        1000         3.00         9.50         3.25             3.50         \
             0.12           7.00                  9.00                    307.692\n"
        );
        let mut counts = [64, 16, 64];
        assert_eq!(
            st.json_line("\"bench\":\"poll\"", &mut counts),
            "{\"bench\":\"poll\",\"samples\":3,\"ops_per_sample\":64,\"min_ops_per_sample\":16,\
             \"t_min_ns\":3.000,\"t_max_ns\":9.500,\"t_typical_ns\":3.250,\"t_avg_ns\":3.500,\
             \"t_stdev_ns\":0.125,\"p99_ns\":7.000,\"p999_ns\":9.000,\"mpps\":307.6923,\
             \"memory\":\"plain memory, not hardware\"}\n"
        );
    }
}
