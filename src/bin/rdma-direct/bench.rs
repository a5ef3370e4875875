//! `rdma-direct bench post|poll`: the mlx5 hot path's own cost, perftest style.
//!
//! Runs the mlx5 provider's queues on plain memory with this program acting as the device
//! ([`rdma_direct::providers::mlx5::plain::Loopback`]): what is measured is the driver's work
//! (writing WQEs, doorbell record, doorbell or BlueFlame stores; parsing CQEs), not a NIC.
//! Figures are labelled "plain memory, not hardware".

use std::time::Instant;

use rdma_direct::providers::mlx5::plain::{BenchOp, Loopback};
use rdma_direct::providers::mlx5::DoorbellMode;
use rdma_direct::providers::{Completion, CompletionQueue, QueuePair, SendQueue};

const USAGE: &str = "\
usage: rdma-direct bench post|poll [options]

  post   cost of post + ring per work request
  poll   cost of polling per completion

options:
  -s, --size BYTES     message size (default 8; inline ops: at most 256)
  -n, --iters N        requests / completions measured (default 100000)
  -l, --post_list N    requests per doorbell (post) / completions per poll call (poll);
                       default 1 (post) and 16 (poll), at most 64
  -o, --op OP          post: write_inline (default), write, send, send_inline, read,
                       fetch_add, cmp_swap
      --bf             ring single posts with BlueFlame (libmlx5's rule)
      --db             always the 8-byte doorbell (default)
      --provider P     auto or mlx5 (the same: the mlx5 provider's queues on plain memory);
                       verbs and sim are refused (no device is involved)

Measured on plain memory with this program playing the device: the driver's own cost, not
a NIC's latency.
";

struct Opts {
    size: u32,
    iters: u32,
    batch: u32,
    op: BenchOp,
    mode: DoorbellMode,
}

fn parse(args: &[String], poll: bool) -> Result<Opts, String> {
    let mut o = Opts {
        size: 8,
        iters: 100_000,
        batch: if poll { 16 } else { 1 },
        op: BenchOp::WriteInline,
        mode: DoorbellMode::Doorbell,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = |name: &str| -> Result<String, String> {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        let num = |s: String, name: &str| -> Result<u32, String> {
            s.parse::<u32>()
                .map_err(|_| format!("{name}: '{s}' is not a number"))
        };
        match a.as_str() {
            "-s" | "--size" => o.size = num(val(a)?, a)?,
            "-n" | "--iters" => o.iters = num(val(a)?, a)?,
            "-l" | "--post_list" => o.batch = num(val(a)?, a)?,
            "-o" | "--op" => {
                let v = val(a)?;
                o.op = BenchOp::parse(&v).ok_or_else(|| format!("unknown op '{v}'"))?;
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
            other => return Err(format!("unknown option '{other}'")),
        }
    }
    if o.batch == 0 || o.batch > 64 {
        return Err(format!("-l {}: must be 1..=64", o.batch));
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
fn table(size: u32, iters: u32, samples: &mut [f64], total_ns: f64) {
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
    println!(" provider: mlx5 (plain memory, not hardware: this program plays the device)");
    println!(
        " {:<8} {:<12} {:<12} {:<12} {:<16} {:<12} {:<14} {:<20} {:<22} {:<14}",
        "#bytes",
        "#iterations",
        "t_min[nsec]",
        "t_max[nsec]",
        "t_typical[nsec]",
        "t_avg[nsec]",
        "t_stdev[nsec]",
        "99% percentile[nsec]",
        "99.9% percentile[nsec]",
        "MsgRate[Mpps]"
    );
    println!(
        " {:<8} {:<12} {:<12.2} {:<12.2} {:<16.2} {:<12.2} {:<14.2} {:<20.2} {:<22.2} {:<14.3}",
        size,
        iters,
        kept[0],
        t_max,
        kept[n / 2],
        avg,
        var.sqrt(),
        pct(0.99),
        pct(0.999),
        iters as f64 / total_ns * 1e3
    );
}

fn bench_post(o: &Opts) {
    let mut lb = Loopback::new(4096);
    lb.qp.set_doorbell_mode(o.mode);
    let sge = lb.sge(o.size);
    let payload = vec![0x5au8; o.size.min(256) as usize];
    let batches = o.iters.div_ceil(o.batch);
    let mut samples = Vec::with_capacity(batches as usize);
    let mut total = 0f64;
    let mut id = 0u64;
    for _ in 0..batches {
        if lb.qp.sq().free_slots() < o.batch * 4 {
            lb.drain();
        }
        let t = Instant::now();
        for k in 0..o.batch {
            let mut wr = lb.wr(o.op, &sge, &payload, id);
            if k + 1 == o.batch {
                wr = wr.signaled();
            }
            if let Err(r) = lb.qp.sq().post(wr) {
                eprintln!("rdma-direct bench: post refused: {}", r.error);
                std::process::exit(1);
            }
            id += 1;
        }
        lb.qp.sq().ring();
        let ns = t.elapsed().as_nanos() as f64;
        total += ns;
        samples.push(ns / o.batch as f64);
    }
    lb.drain();
    println!(
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
    table(o.size, batches * o.batch, &mut samples, total);
}

fn bench_poll(o: &Opts) {
    let mut lb = Loopback::new(4096);
    let sge = lb.sge(8);
    let payload = [0u8; 8];
    let mut out = vec![Completion::EMPTY; o.batch as usize];
    let mut samples = Vec::new();
    let mut total = 0f64;
    let mut done = 0u32;
    let mut id = 0u64;
    while done < o.iters {
        // The "device" fills the CQ with up to 1024 completions (untimed)...
        let n = (o.iters - done).min(1024);
        for _ in 0..n {
            let wr = lb.wr(BenchOp::Send, &sge, &payload, id).signaled();
            if lb.qp.sq().post(wr).is_err() {
                eprintln!("rdma-direct bench: could not stage the completions to poll");
                std::process::exit(1);
            }
            id += 1;
        }
        lb.qp.sq().ring();
        lb.dev.complete_sends(&mut lb.dcq);
        // ...and they are polled in batches (timed).
        let mut got = 0;
        while got < n {
            let t = Instant::now();
            let k = lb.cq.poll(&mut out);
            let ns = t.elapsed().as_nanos() as f64;
            if k == 0 {
                eprintln!("rdma-direct bench: CQ ran dry after {got} of {n}");
                std::process::exit(1);
            }
            total += ns;
            samples.push(ns / k as f64);
            got += k as u32;
        }
        done += n;
    }
    println!(
        " mlx5 poll: {} completions per poll call — plain memory, not hardware",
        o.batch
    );
    table(64, o.iters, &mut samples, total);
}

pub fn run(args: &[String]) -> i32 {
    let (which, rest) = match args.split_first() {
        Some((w, r)) => (w.as_str(), r),
        None => {
            eprint!("{USAGE}");
            return 2;
        }
    };
    match which {
        "post" | "poll" => match parse(rest, which == "poll") {
            Ok(o) => {
                if which == "post" {
                    bench_post(&o)
                } else {
                    bench_poll(&o)
                }
                0
            }
            Err(e) => {
                eprintln!("rdma-direct bench: {e}\n\n{USAGE}");
                2
            }
        },
        "-h" | "--help" | "help" => {
            print!("{USAGE}");
            0
        }
        other => {
            eprintln!("rdma-direct bench: unknown benchmark '{other}'\n\n{USAGE}");
            2
        }
    }
}
