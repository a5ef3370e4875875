//! `rdma-direct bench post|poll`: the mlx5 hot path's own cost, perftest style.
//!
//! Parses the options, runs [`rdma_direct::bench::hot`] (the mlx5 provider's queues on plain
//! memory with the bench rig playing the device: the driver's work, not a NIC) and prints
//! its figures perftest style, labelled "plain memory, not hardware".

use rdma_direct::bench::hot::{self, BenchOp, Samples, Stats, MAX_PER_SAMPLE, OPS_PER_SAMPLE};
use rdma_direct::providers::mlx5::DoorbellMode;

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

/// perftest's table of one run, on plain memory.
fn table(size: u32, st: &Stats, iters: u32) {
    outln!(" provider: mlx5 (plain memory, not hardware: this program plays the device)");
    out!("{}", st.table(size, iters));
}

/// The run's statistics, or the exit status once the failure is said.
fn measured(which: &str, run: Result<Samples, String>) -> Result<(Samples, Stats), i32> {
    let s = run.map_err(|e| {
        errln!("rdma-direct bench {which}: {e}");
        1
    })?;
    match Stats::perftest(&s.ns_per_op, s.measured, s.total_ns) {
        Some(st) => Ok((s, st)),
        None => {
            errln!("rdma-direct bench {which}: no sample taken");
            Err(1)
        }
    }
}

/// Append [`Stats::json_line`] to `path`; the table on stdout stays as it is.
fn write_json(path: &str, head: &str, counts: &mut [u32], st: &Stats) -> Result<(), String> {
    use std::io::Write;
    let line = st.json_line(head, counts);
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(line.as_bytes()))
        .map_err(|e| format!("--json {path}: {e} (check the directory exists and is writable)"))
}

impl Opts {
    fn params(&self) -> hot::Params {
        hot::Params {
            size: self.size,
            iters: self.iters,
            batch: self.batch,
            op: self.op,
            mode: self.mode,
            per_sample: self.per_sample,
        }
    }
}

fn bench_post(o: &Opts) -> i32 {
    let (mut s, st) = match measured("post", hot::post(&o.params())) {
        Ok(v) => v,
        Err(status) => return status,
    };
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
    table(o.size, &st, s.measured);
    if let Some(path) = &o.json {
        let head = format!(
            "\"bench\":\"post\",\"op\":\"{}\",\"size\":{},\"batch\":{},\"doorbell\":\"{}\",\"iters\":{}",
            o.op.name(),
            o.size,
            o.batch,
            if o.mode == DoorbellMode::Doorbell { "db" } else { "bf" },
            s.measured
        );
        if let Err(e) = write_json(path, &head, &mut s.ops, &st) {
            errln!("rdma-direct bench: {e}");
            return 1;
        }
    }
    0
}

fn bench_poll(o: &Opts) -> i32 {
    let (mut s, st) = match measured("poll", hot::poll(&o.params())) {
        Ok(v) => v,
        Err(status) => return status,
    };
    outln!(
        " mlx5 poll: {} completions per poll call — plain memory, not hardware",
        o.batch
    );
    table(64, &st, o.iters);
    if let Some(path) = &o.json {
        let head = format!(
            "\"bench\":\"poll\",\"batch\":{},\"iters\":{}",
            o.batch, o.iters
        );
        if let Err(e) = write_json(path, &head, &mut s.ops, &st) {
            errln!("rdma-direct bench: {e}");
            return 1;
        }
    }
    0
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
