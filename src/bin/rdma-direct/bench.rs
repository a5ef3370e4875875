//! `rdma-direct bench post|poll`: the mlx5 hot path's own cost, perftest style.
//!
//! Runs the mlx5 provider's queues on plain memory with this program acting as the device
//! (`Loopback` of the bench rig `benches/rig/plain.rs`, compiled into this program): what
//! is measured is the driver's work (writing WQEs, doorbell record, doorbell or BlueFlame
//! stores; parsing CQEs), not a NIC.
//! Figures are labelled "plain memory, not hardware".

use std::time::Instant;

use rdma_direct_rig as plain;

use plain::{BenchOp, Loopback};
use rdma_direct::providers::mlx5::{AddressVector, DoorbellMode, Mlx5Sq};
use rdma_direct::providers::{
    Completion, CompletionQueue, PostError, QueuePair, SendQueue, SendWr,
};
use rdma_direct::report::table::table_line;

const USAGE: &str = "\
usage: rdma-direct bench post|poll|batching [options]

  post      cost of post + ring per work request
  poll      cost of polling per completion
  batching  the doorbell-batching curve (see `rdma-direct bench batching --help`)

options:
  -s, --size BYTES     message size (default 8; inline ops: at most 256)
  -n, --iters N        requests / completions measured (default 100000)
  -l, --post_list N    requests per doorbell (post) / completions per poll call (poll);
                       default 1 (post) and 16 (poll), at most 64
  -o, --op OP          post: write_inline (default), write, send, send_inline, read,
                       fetch_add, cmp_swap
      --bf             ring single posts with BlueFlame (libmlx5's rule)
      --db             always the 8-byte doorbell (default)
      --json FILE      also append the figures as one JSON object (one line) to FILE,
                       with the samples taken and the operations each timed
      --per-sample N   operations timed per sample, at least (64..=512, default 64)
      --provider P     auto or mlx5 (the same: the mlx5 provider's queues on plain memory);
                       verbs and sim are refused (no device is involved)

Timing: each sample times at least 64 operations between two clock reads (post: whole
batches of -l requests and their doorbells; poll: whole poll calls), so the clock's own
cost (~20-60 ns a read) stays small against a 3 ns post; the figures are per operation.
benches/bench_check.sh checks them against callgrind's instruction count.

Measured on plain memory with this program playing the device: the driver's own cost, not
a NIC's latency.
";

/// A perftest-style operation name (`write`, `write_inline`, `send`, `send_inline`, `read`,
/// `fetch_add`, `cmp_swap`).
fn parse_op(s: &str) -> Option<BenchOp> {
    Some(match s {
        "write_inline" | "write-inline" => BenchOp::WriteInline,
        "write" => BenchOp::Write,
        "send" => BenchOp::Send,
        "send_inline" | "send-inline" => BenchOp::SendInline,
        "read" => BenchOp::Read,
        "fetch_add" | "fetch-add" | "fa" => BenchOp::FetchAdd,
        "cmp_swap" | "cmp-swap" | "cs" => BenchOp::CompareSwap,
        _ => return None,
    })
}

struct Opts {
    size: u32,
    iters: u32,
    batch: u32,
    op: BenchOp,
    mode: DoorbellMode,
    json: Option<String>,
    /// Operations timed per sample, at least (`--per-sample`).
    per_sample: u32,
}

/// Operations timed per sample, at least: a sample is whole batches (post) or whole poll
/// calls (poll) covering this many.
const OPS_PER_SAMPLE: u32 = 64;

/// Largest `--per-sample`: a post sample's requests (up to 5 WQEBBs each) fit the 4096-WQEBB
/// send queue.
const MAX_PER_SAMPLE: u32 = 512;

fn parse(args: &[String], poll: bool) -> Result<Opts, String> {
    let mut o = Opts {
        size: 8,
        iters: 100_000,
        batch: if poll { 16 } else { 1 },
        op: BenchOp::WriteInline,
        mode: DoorbellMode::Doorbell,
        json: None,
        per_sample: OPS_PER_SAMPLE,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = |name: &str| -> Result<String, String> {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        let num = |s: String, name: &str| -> Result<u32, String> { crate::number(name, &s) };
        match a.as_str() {
            "-s" | "--size" => o.size = num(val(a)?, a)?,
            "-n" | "--iters" => o.iters = num(val(a)?, a)?,
            "-l" | "--post_list" => o.batch = num(val(a)?, a)?,
            "-o" | "--op" => {
                let v = val(a)?;
                o.op = parse_op(&v).ok_or_else(|| format!("unknown op '{v}'"))?;
            }
            "--provider" => match val(a)?.as_str() {
                "auto" | "mlx5" => {}
                p => {
                    return Err(format!(
                        "--provider {p}: bench measures the mlx5 provider's queues on plain \
                         memory with this program as the device; no device or other provider \
                         is involved (auto and mlx5 only)"
                    ))
                }
            },
            "--bf" => o.mode = DoorbellMode::Auto,
            "--db" => o.mode = DoorbellMode::Doorbell,
            "--json" => o.json = Some(val(a)?),
            "--per-sample" => o.per_sample = num(val(a)?, a)?,
            "-d" | "--ib-dev" => {
                return Err(format!(
                    "{a}: post and poll measure the mlx5 provider's queues on plain memory, no \
                     device is involved (bench batching -d DEV runs on a device)"
                ))
            }
            other => return Err(format!("unknown option '{other}'")),
        }
    }
    if o.batch == 0 || o.batch > 64 {
        return Err(format!("-l {}: must be 1..=64", o.batch));
    }
    if !(OPS_PER_SAMPLE..=MAX_PER_SAMPLE).contains(&o.per_sample) {
        return Err(format!(
            "--per-sample {}: must be {OPS_PER_SAMPLE}..={MAX_PER_SAMPLE}",
            o.per_sample
        ));
    }
    if o.iters == 0 {
        return Err("-n 0: nothing to measure".into());
    }
    let inline = matches!(o.op, BenchOp::WriteInline | BenchOp::SendInline);
    if inline && o.size > 256 {
        return Err(format!(
            "-s {}: inline payloads are at most 256 bytes here (use -o write or send)",
            o.size
        ));
    }
    if matches!(o.op, BenchOp::FetchAdd | BenchOp::CompareSwap) {
        o.size = 8;
    }
    if o.op == BenchOp::Read && o.size == 0 {
        return Err("-s 0: a zero-length READ is refused".into());
    }
    Ok(o)
}

/// perftest's latency statistics over per-operation samples (ns): sorted, the two largest
/// dropped for the typical/avg/stdev/percentiles, t_max the second-largest raw sample.
fn table(size: u32, iters: u32, samples: &mut [f64], total_ns: f64) -> Stats {
    samples.sort_by(|a, b| a.total_cmp(b));
    let n_raw = samples.len();
    let t_max = if n_raw >= 2 {
        samples[n_raw - 2]
    } else {
        samples[n_raw - 1]
    };
    let kept = &samples[..n_raw.saturating_sub(2).max(1)];
    let n = kept.len();
    let avg = kept.iter().sum::<f64>() / n as f64;
    let var = kept.iter().map(|x| (x - avg) * (x - avg)).sum::<f64>() / n as f64;
    let pct = |p: f64| kept[((p * n as f64).ceil() as usize).min(n - 1)];
    outln!(" provider: mlx5 (plain memory, not hardware: this program plays the device)");
    // perftest's table rule (the perf tables'): each cell in its title's width, two spaces
    // between cells, no trailing blanks.
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
        f(kept[0]),
        f(t_max),
        f(kept[n / 2]),
        f(avg),
        f(var.sqrt()),
        f(pct(0.99)),
        f(pct(0.999)),
        format!("{:.3}", iters as f64 / total_ns * 1e3),
    ];
    let header: Vec<String> = titles.iter().map(|t| t.to_string()).collect();
    outln!("{}", table_line(&titles, &header));
    outln!("{}", table_line(&titles, &cells));
    Stats {
        t_min: kept[0],
        t_max,
        t_typical: kept[n / 2],
        t_avg: avg,
        t_stdev: var.sqrt(),
        p99: pct(0.99),
        p999: pct(0.999),
        mpps: iters as f64 / total_ns * 1e3,
    }
}

/// Per-operation figures of one run (ns; Mpps).
struct Stats {
    t_min: f64,
    t_max: f64,
    t_typical: f64,
    t_avg: f64,
    t_stdev: f64,
    p99: f64,
    p999: f64,
    mpps: f64,
}

/// Append one JSON object (one line) to `path`; the table on stdout stays as it is. `counts`:
/// the operations each sample timed, as counted while it ran (`samples`, their median
/// `ops_per_sample` and smallest `min_ops_per_sample`; the last sample may be a remainder).
fn write_json(path: &str, head: &str, counts: &mut [u32], st: &Stats) -> Result<(), String> {
    use std::io::Write;
    counts.sort_unstable();
    let n = counts.len();
    let (median, least) = if n == 0 {
        (0, 0)
    } else {
        (counts[n / 2], counts[0])
    };
    let line = format!(
        "{{{head},\"samples\":{n},\"ops_per_sample\":{median},\"min_ops_per_sample\":{least},\
         \"t_min_ns\":{:.3},\"t_max_ns\":{:.3},\
         \"t_typical_ns\":{:.3},\"t_avg_ns\":{:.3},\"t_stdev_ns\":{:.3},\"p99_ns\":{:.3},\
         \"p999_ns\":{:.3},\"mpps\":{:.4},\"memory\":\"plain memory, not hardware\"}}\n",
        st.t_min, st.t_max, st.t_typical, st.t_avg, st.t_stdev, st.p99, st.p999, st.mpps
    );
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(line.as_bytes()))
        .map_err(|e| format!("--json {path}: {e} (check the directory exists and is writable)"))
}

fn bench_post(o: &Opts) {
    let mut lb = Loopback::new(4096);
    lb.qp.set_doorbell_mode(o.mode);
    let sge = lb.sge(o.size);
    let payload = vec![0x5au8; o.size.min(256) as usize];
    // Whole batches per sample, at least `--per-sample` requests.
    let per_sample = o.per_sample.div_ceil(o.batch);
    let batches = o.iters.div_ceil(o.batch);
    let mut samples = Vec::with_capacity(batches.div_ceil(per_sample) as usize);
    // Operations timed by each sample (between its two clock reads).
    let mut counts = Vec::with_capacity(samples.capacity());
    let mut total = 0f64;
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
        if let Err(e) = done {
            errln!("rdma-direct bench: post refused: {e}");
            std::process::exit(1);
        }
        total += ns;
        samples.push(ns / wrs.len() as f64);
        counts.push(wrs.len() as u32);
    }
    lb.drain();
    outln!(
        " mlx5 post+ring: {} {} B, {} per doorbell, {} — plain memory, not hardware",
        o.op.name(),
        o.size,
        o.batch,
        if o.mode == DoorbellMode::Doorbell {
            "8-byte doorbell"
        } else {
            "BlueFlame for single WQEs"
        }
    );
    let st = table(o.size, batches * o.batch, &mut samples, total);
    if let Some(path) = &o.json {
        let head = format!(
            "\"bench\":\"post\",\"op\":\"{}\",\"size\":{},\"batch\":{},\"doorbell\":\"{}\",\"iters\":{}",
            o.op.name(),
            o.size,
            o.batch,
            if o.mode == DoorbellMode::Doorbell { "db" } else { "bf" },
            batches * o.batch
        );
        if let Err(e) = write_json(path, &head, &mut counts, &st) {
            errln!("rdma-direct bench: {e}");
            std::process::exit(1);
        }
    }
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

fn bench_poll(o: &Opts) {
    let mut lb = Loopback::new(4096);
    let sge = lb.sge(8);
    let payload = [0u8; 8];
    let mut out = vec![Completion::EMPTY; o.batch as usize];
    let mut samples = Vec::new();
    let mut counts = Vec::new();
    let mut total = 0f64;
    let mut done = 0u32;
    let mut id = 0u64;
    while done < o.iters {
        // The "device" fills the CQ with up to 1024 completions (untimed)...
        let n = (o.iters - done).min(1024);
        for _ in 0..n {
            let wr = lb.wr(BenchOp::Send, &sge, &payload, id).signaled();
            if lb.qp.sq().post(wr).is_err() {
                errln!("rdma-direct bench: could not stage the completions to poll");
                std::process::exit(1);
            }
            id += 1;
        }
        lb.qp.sq().ring();
        lb.dev.complete_sends(&mut lb.dcq);
        // ...and they are polled in batches (timed).
        // Whole poll calls per sample, at least `--per-sample` completions.
        let mut got = 0;
        while got < n {
            let want = (n - got).min(o.per_sample.max(o.batch));
            let mut k = 0;
            let t = Instant::now();
            while k < want {
                let m = lb.cq.poll(&mut out[..(want - k).min(o.batch) as usize]);
                if m == 0 {
                    break;
                }
                k += m as u32;
            }
            let ns = t.elapsed().as_nanos() as f64;
            if k == 0 {
                errln!("rdma-direct bench: CQ ran dry after {got} of {n}");
                std::process::exit(1);
            }
            total += ns;
            samples.push(ns / f64::from(k));
            counts.push(k);
            got += k;
        }
        done += n;
    }
    outln!(
        " mlx5 poll: {} completions per poll call — plain memory, not hardware",
        o.batch
    );
    let st = table(64, o.iters, &mut samples, total);
    if let Some(path) = &o.json {
        let head = format!(
            "\"bench\":\"poll\",\"batch\":{},\"iters\":{}",
            o.batch, o.iters
        );
        if let Err(e) = write_json(path, &head, &mut counts, &st) {
            errln!("rdma-direct bench: {e}");
            std::process::exit(1);
        }
    }
}

pub fn run(args: &[String]) -> i32 {
    let (which, rest) = match args.split_first() {
        Some((w, r)) => (w.as_str(), r),
        None => {
            return crate::usage_error("bench", "which benchmark? (post, poll or batching)");
        }
    };
    if matches!(which, "post" | "poll") && rest.iter().any(|a| a == "-h" || a == "--help") {
        out!("{USAGE}");
        return 0;
    }
    match which {
        "post" | "poll" => match parse(rest, which == "poll") {
            Ok(o) => {
                if let Some(p) = &o.json {
                    if let Err(e) = crate::check_output("--json", std::path::Path::new(p)) {
                        errln!("rdma-direct bench {which}: {e}");
                        return 1;
                    }
                }
                // Plain memory: the one thread is the poster and the "device".
                crate::cpu_room::warn(&format!("bench {which}"), 1, "the benchmark's thread");
                if which == "post" {
                    bench_post(&o)
                } else {
                    bench_poll(&o)
                }
                0
            }
            Err(e) => crate::usage_error(&format!("bench {which}"), &e),
        },
        "batching" => crate::batching::run(rest),
        "-h" | "--help" | "help" => {
            out!("{USAGE}");
            0
        }
        other => crate::usage_error(
            "bench",
            &format!("unknown benchmark '{other}' (post, poll or batching)"),
        ),
    }
}
