//! Options of `bench batching`: the usage text, the parsed [`Opts`] and the configurations
//! they expand to ([`Config`]: doorbell mode x signaling period x payload x size).
//!
//! Contract: [`parse`] refuses every option the measurement could not honour (a batch outside
//! 1..=64, an inline payload over 128 bytes, `bf-last`, `--instructions` off plain memory,
//! ...) with a message naming the option, and fills in each provider's defaults; nothing
//! here measures or prints.

use rdma_direct::pcie::Link;

pub(super) const USAGE: &str = "\
usage: rdma-direct bench batching [options]

The doorbell-batching curve: RDMA WRITEs posted in batches of 1, 2, 4, ... 64 requests per
doorbell, for every doorbell mode x signaling period x payload x size.

  --provider P         plain (default without -d): the mlx5 driver's own cost on plain
                       memory; sim: the software mlx5 device, device thread consuming;
                       verbs (default with -d): libibverbs on DEV, one ibv_post_send per
                       batch; mlx5: the mlx5 provider on a ConnectX NIC (untested);
                       mlx5,verbs: both on DEV in one sweep, verbs as the baseline (where
                       libibverbs cannot post, one line says so and the mlx5 points stand)
  -d, --ib-dev DEV     device for verbs / mlx5
  -i, --ib-port N      port (default 1)
  -x, --gid-index N    GID index (default 0; RoCE on rxe needs the IPv4-mapped one)
  -l, --batches LIST   batch sizes, e.g. 1,2,4 (default 1,2,4,8,16,32,64; each 1..=64)
  -m, --modes LIST     doorbell modes: db8, bf-single (default both; mlx5 providers only)
  -Q, --signal LIST    signaling periods: any N >= 1 (every N-th request; 1 every request)
                       or batch (once per batch); default 1,16,batch. The last request
                       of a sample is always signaled
  -o, --op LIST        write (RDMA WRITE on RC, the default), ud-send (SEND on UD; the
                       peer receives every datagram, its receives posted ahead and taken
                       back between samples, untimed); ud-send on devices only
  -q, --qps N          client QPs taking the batches in turn, one CQ (default 1, at most 16;
                       devices only)
      --threads N      N measuring threads side by side, each on its own queues (plain: its
                       own rig queue; sim: its own device, QP and CQ) and pinned to a CPU of
                       its own; the JSON holds each thread's points and their total Mpps
  -p, --payload LIST   inline, sge (default inline)
  -s, --size LIST      message sizes in bytes (default 8; inline at most 128, sge any up to
                       1 MiB, e.g. 4096; ud-send at most the path MTU)
  -r, --reps N         samples per point (default 101 on every provider)
  -w, --warmup N       samples thrown away first (default: plain 20, others 5)
  -n, --wqes N         WQEs per sample (default: plain 1024, sim and verbs/mlx5 2048)
      --runs N         repeat the whole sweep N times (default 1); each point reports every
                       run's median and the run-to-run spread
      --window W       steady pipeline: at most W WQEs outstanding (at least the largest
                       batch and signaling period; devices: at most 256, their default);
                       plain memory's default posts a sample's WQEs, then polls them all
      --latency        one signaled request at a time (post, ring, poll its completion):
                       ns per round trip for each doorbell mode; batch 1, -l and -Q ignored
      --cpu N          pin the measuring thread to CPU N
      --unpin          do not pin (default: pinned to a CPU local to the device where sysfs
                       says, else the last CPU this process may use)
      --json FILE      write the results as JSON
      --svg FILE       plot message rate and ns/WQE against the batch size
      --explain        say where the cost per WQE goes, from the measured curve
      --report DIR     write DIR/batching.json, DIR/batching.svg and DIR/summary.md (setup,
                       host, tables with intervals and bounds, the fitted model, caveats)
      --pcie LINK      PCIe link for the link-bound rate (mlx5 providers): gen3x8 (default),
                       gen3x16, gen4x8, gen4x16, gen5x8, gen5x16; overrides after commas:
                       mps=N, mrrs=N, rcb=N (bytes), addr32
      --instructions   plain only: instructions per WQE under callgrind (needs valgrind)
  -h, --help           this text

Plain-memory and sim figures are not hardware figures.
";

pub use rdma_direct::bench::batching::setup::Setup;
pub use rdma_direct::bench::batching::{
    Config, Mode, Op, Params, PayloadKind, Pin, Signal, Where, MAX_BATCH, MAX_INLINE, MAX_QPS,
    MAX_THREADS,
};

/// The parsed command line: what the sweep measures and its report states ([`Setup`], and
/// through it [`Params`], reached through `Deref`) and what the command does with it.
#[derive(Clone, Debug)]
pub struct Opts {
    pub(super) setup: Setup,
    pub(super) json: Option<String>,
    pub(super) svg: Option<String>,
    /// `--report DIR`: the JSON, the SVG and a Markdown summary in DIR.
    pub(super) report: Option<String>,
    pub(super) explain: bool,
    pub(super) instructions: bool,
}

impl std::ops::Deref for Opts {
    type Target = Setup;
    fn deref(&self) -> &Setup {
        &self.setup
    }
}

impl std::ops::DerefMut for Opts {
    fn deref_mut(&mut self) -> &mut Setup {
        &mut self.setup
    }
}

fn list<T>(flag: &str, v: &str, f: impl Fn(&str) -> Option<T>) -> Result<Vec<T>, String> {
    let out: Option<Vec<T>> = v.split(',').map(|s| f(s.trim())).collect();
    match out {
        Some(o) if !o.is_empty() => Ok(o),
        _ => Err(format!("{flag}: '{v}' is not a valid list")),
    }
}

/// Parse the arguments after `batching`. `Ok(None)`: help asked for.
pub fn parse(args: &[String]) -> Result<Option<Opts>, String> {
    let mut provider: Option<Where> = None;
    let mut o = Opts {
        setup: Setup {
            params: Params {
                at: Where::Plain,
                device: None,
                port: 1,
                gid_index: 0,
                batches: vec![1, 2, 4, 8, 16, 32, 64],
                modes: vec![Mode::Db8, Mode::BfSingle],
                signals: vec![Signal::Every(1), Signal::Every(16), Signal::PerBatch],
                payloads: vec![PayloadKind::Inline],
                sizes: vec![8],
                ops: vec![Op::Write],
                qps: 1,
                threads: 1,
                verbs_baseline: false,
                reps: 0,
                warmup: u32::MAX,
                wqes: 0,
                runs: 1,
                window: None,
                latency: false,
                pin: Pin::Auto,
                stop: None,
            },
            pcie: Link::preset("gen3x8")?,
            argv: args.to_vec(),
        },
        json: None,
        svg: None,
        report: None,
        explain: false,
        instructions: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (flag, attached) = crate::split_flag(a);
        let mut val = || crate::flag_value(flag, attached, &mut it);
        let num = |v: String| -> Result<u32, String> {
            v.parse::<u32>()
                .map_err(|_| format!("{flag}: '{v}' is not a number"))
        };
        match flag {
            "-h" | "--help" => return Ok(None),
            "--provider" => {
                let v = val()?;
                // mlx5 with the verbs baseline, in either order.
                let v = match v.as_str() {
                    "mlx5,verbs" | "verbs,mlx5" => {
                        o.verbs_baseline = true;
                        "mlx5".to_string()
                    }
                    _ => v,
                };
                provider = Some(match v.as_str() {
                    "plain" => Where::Plain,
                    "sim" => Where::Sim,
                    "verbs" => Where::Verbs,
                    "mlx5" => Where::Mlx5,
                    "auto" => {
                        provider = None;
                        continue;
                    }
                    _ => {
                        return Err(format!(
                            "--provider: '{v}' is not plain, sim, verbs, mlx5 or auto"
                        ))
                    }
                });
            }
            "-d" | "--ib-dev" => o.device = Some(val()?),
            "-i" | "--ib-port" => {
                o.port = u8::try_from(num(val()?)?).map_err(|_| "-i: a port is 1..=255")?
            }
            "-x" | "--gid-index" => {
                o.gid_index =
                    u8::try_from(num(val()?)?).map_err(|_| "-x: a GID index is 0..=255")?
            }
            "-l" | "--batches" | "--post_list" => {
                o.batches = list(flag, &val()?, |s| s.parse::<u32>().ok())?
            }
            "-m" | "--modes" => {
                o.modes = list(flag, &val()?, |s| match s {
                    "db8" | "db" => Some(Some(Mode::Db8)),
                    "bf-single" | "bf" | "libmlx5" => Some(Some(Mode::BfSingle)),
                    "bf-last" => Some(None),
                    _ => None,
                })?
                .into_iter()
                .collect::<Option<Vec<Mode>>>()
                .ok_or_else(|| {
                    "-m bf-last: a BlueFlame copy of the last WQE of a list needs a doorbell \
                     mode the mlx5 send queue does not offer (it copies single WQEs only, as \
                     libmlx5 does); use db8 or bf-single"
                        .to_string()
                })?
            }
            "-Q" | "--signal" | "--cq-mod" => {
                o.signals = list(flag, &val()?, |s| match s {
                    "batch" | "b" => Some(Signal::PerBatch),
                    n => n.parse::<u32>().ok().filter(|&n| n >= 1).map(Signal::Every),
                })?
            }
            "-p" | "--payload" => {
                o.payloads = list(flag, &val()?, |s| match s {
                    "inline" => Some(PayloadKind::Inline),
                    "sge" => Some(PayloadKind::Sge),
                    _ => None,
                })?
            }
            "-s" | "--size" => o.sizes = list(flag, &val()?, |s| s.parse::<u32>().ok())?,
            "-r" | "--reps" => o.reps = num(val()?)?,
            "-w" | "--warmup" => o.warmup = num(val()?)?,
            "-n" | "--wqes" => o.wqes = num(val()?)?,
            "--runs" => o.runs = num(val()?)?,
            "-o" | "--op" => {
                o.ops = list(flag, &val()?, |s| match s {
                    "write" => Some(Op::Write),
                    "ud-send" | "ud_send" | "send" => Some(Op::UdSend),
                    _ => None,
                })?
            }
            "-q" | "--qps" => o.qps = num(val()?)?,
            "--threads" => o.threads = num(val()?)?,
            "--window" => o.window = Some(num(val()?)?),
            "--unpin" => o.pin = Pin::Off,
            "--latency" => o.latency = true,
            "--cpu" => o.pin = Pin::Cpu(num(val()?)? as usize),
            "--json" => o.json = Some(val()?),
            "--svg" => o.svg = Some(val()?),
            "--report" => o.report = Some(val()?),
            "--explain" => o.explain = true,
            "--pcie" => o.pcie = Link::parse(&val()?).map_err(|e| format!("--pcie: {e}"))?,
            "--instructions" => o.instructions = true,
            other => return Err(format!("unknown option '{other}'")),
        }
    }
    // -d sim0: the software device, as --provider sim.
    if o.device.as_deref() == Some(crate::provider::SIM_DEVICE) {
        o.device = None;
        provider = Some(provider.unwrap_or(Where::Sim));
    }
    o.at = match (provider, &o.device) {
        (Some(p @ (Where::Plain | Where::Sim)), Some(d)) => {
            return Err(format!(
                "--provider {} runs without a device; drop -d {d}",
                p.name()
            ))
        }
        (Some(p @ (Where::Verbs | Where::Mlx5)), None) => {
            return Err(format!("--provider {} needs -d DEV", p.name()))
        }
        (Some(p), _) => p,
        (None, Some(_)) => Where::Verbs,
        (None, None) => Where::Plain,
    };
    if let Some(&b) = o.batches.iter().find(|&&b| b == 0 || b > MAX_BATCH) {
        return Err(format!("-l {b}: a batch is 1..={MAX_BATCH} requests"));
    }
    o.batches.sort_unstable();
    o.batches.dedup();
    for &s in &o.sizes {
        if o.payloads.contains(&PayloadKind::Inline) && s > MAX_INLINE {
            return Err(format!(
                "-s {s}: inline payloads are at most {MAX_INLINE} bytes here (-p sge for more)"
            ));
        }
        if s > 1 << 20 {
            return Err(format!("-s {s}: at most 1 MiB"));
        }
    }
    if o.at == Where::Verbs {
        o.modes = vec![Mode::Verbs];
    }
    if o.instructions && o.at != Where::Plain {
        return Err(
            "--instructions counts the driver's instructions on plain memory only \
                    (--provider plain)"
                .into(),
        );
    }
    // The same sample count on every provider (the medians' intervals comparable).
    let (reps, warm, wqes) = match o.at {
        Where::Plain => (101, 20, 1024),
        Where::Sim | Where::Verbs | Where::Mlx5 => (101, 5, 2048),
    };
    if o.reps == 0 {
        o.reps = reps;
    }
    if o.warmup == u32::MAX {
        o.warmup = warm;
    }
    if o.wqes == 0 {
        o.wqes = wqes;
    }
    if o.wqes > 1 << 24 {
        return Err(format!(
            "-n {}: at most {} WQEs per sample",
            o.wqes,
            1 << 24
        ));
    }
    if o.latency {
        if o.window.is_some() || o.instructions {
            return Err(
                "--latency runs one request at a time: no --window or --instructions".into(),
            );
        }
        o.setup.params = o.setup.params.clone().latency_params();
    }
    if o.qps == 0 || o.qps > MAX_QPS {
        return Err(format!("--qps {}: 1..={MAX_QPS} QPs", o.qps));
    }
    if o.threads == 0 || o.threads > MAX_THREADS {
        return Err(format!(
            "--threads {}: 1..={MAX_THREADS} measuring threads",
            o.threads
        ));
    }
    if o.threads > 1 && o.instructions {
        return Err("--threads with --instructions: callgrind counts one thread".into());
    }
    if o.at == Where::Plain && (o.qps > 1 || o.ops.contains(&Op::UdSend)) {
        return Err(
            "plain memory runs one RC QP (the rig's): UD SEND (-o ud-send) and --qps run on a \
             device (--provider sim)"
                .into(),
        );
    }
    if o.runs == 0 {
        return Err("--runs 0: at least one run".into());
    }
    if let Some(w) = o.window {
        let most = o.batches.iter().copied().max().unwrap_or(1);
        let period = o
            .signals
            .iter()
            .map(|s| match s {
                Signal::Every(n) => *n,
                Signal::PerBatch => 1,
            })
            .max()
            .unwrap_or(1);
        if w < most || w < period {
            return Err(format!(
                "--window {w}: a window holds at least the largest batch ({most}) and the \
                 longest signaling period ({period}), or no completion could free it"
            ));
        }
        if o.at != Where::Plain && w > 256 {
            return Err(format!(
                "--window {w}: at most the send queue depth (256) on a device"
            ));
        }
        if o.instructions {
            return Err(
                "--window with --instructions: instructions are counted for the post-all, \
                 poll-all sample only"
                    .into(),
            );
        }
    }
    Ok(Some(o))
}
