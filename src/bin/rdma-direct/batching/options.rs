//! Options of `bench batching`: the usage text, the parsed [`Opts`] and the configurations
//! they expand to ([`Config`]: doorbell mode x signaling period x payload x size).
//!
//! Contract: [`parse`] refuses every option the measurement could not honour (a batch outside
//! 1..=64, an inline payload over 128 bytes, `bf-last`, `--instructions` off plain memory,
//! ...) with a message naming the option, and fills in each provider's defaults; nothing
//! here measures or prints.

use rdma_direct::pcie::Link;
use rdma_direct::providers::mlx5::DoorbellMode;

pub(super) const USAGE: &str = "\
usage: rdma-direct bench batching [options]

The doorbell-batching curve: RDMA WRITEs posted in batches of 1, 2, 4, ... 64 requests per
doorbell, for every doorbell mode x signaling period x payload x size.

  --provider P         plain (default without -d): the mlx5 driver's own cost on plain
                       memory; sim: the software mlx5 device, device thread consuming;
                       verbs (default with -d): libibverbs on DEV, one ibv_post_send per
                       batch; mlx5: the mlx5 provider on a ConnectX NIC (untested)
  -d, --ib-dev DEV     device for verbs / mlx5
  -i, --ib-port N      port (default 1)
  -x, --gid-index N    GID index (default 0; RoCE on rxe needs the IPv4-mapped one)
  -l, --batches LIST   batch sizes, e.g. 1,2,4 (default 1,2,4,8,16,32,64; each 1..=64)
  -m, --modes LIST     doorbell modes: db8, bf-single (default both; mlx5 providers only)
  -Q, --signal LIST    signaling periods: any N >= 1 (every N-th request; 1 every request)
                       or batch (once per batch); default 1,16,batch. The last request
                       of a sample is always signaled
  -p, --payload LIST   inline, sge (default inline)
  -s, --size LIST      message sizes in bytes (default 8; inline at most 128)
  -r, --reps N         samples per point (default: plain 101, sim 9, verbs/mlx5 5)
  -w, --warmup N       samples thrown away first (default: plain 20, others 2)
  -n, --wqes N         WQEs per sample (default: plain 1024, sim and verbs/mlx5 2048)
      --json FILE      write the results as JSON
      --svg FILE       plot message rate and ns/WQE against the batch size
      --explain        say where the cost per WQE goes, from the measured curve
      --pcie LINK      PCIe link for the link-bound rate (mlx5 providers): gen3x8 (default),
                       gen3x16, gen4x8, gen4x16, gen5x8, gen5x16; overrides after commas:
                       mps=N, mrrs=N, rcb=N (bytes), addr32
      --instructions   plain only: instructions per WQE under callgrind (needs valgrind)
  -h, --help           this text

Plain-memory and sim figures are not hardware figures.
";

/// Largest batch (the send queue depth keeps two batches in flight).
const MAX_BATCH: u32 = 64;
/// Largest inline payload asked for (fits a 256-byte BlueFlame half with its segments).
pub(super) const MAX_INLINE: u32 = 128;

/// Where the sweep runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Where {
    /// mlx5 queues on plain memory, this program as the device.
    Plain,
    /// The software mlx5 device, device thread.
    Sim,
    /// libibverbs on a device.
    Verbs,
    /// The mlx5 provider on a NIC.
    Mlx5,
}

impl Where {
    pub(super) fn name(self) -> &'static str {
        match self {
            Where::Plain => "plain",
            Where::Sim => "sim",
            Where::Verbs => "verbs",
            Where::Mlx5 => "mlx5",
        }
    }
    pub(super) fn describe(self, dev: Option<&str>) -> String {
        match self {
            Where::Plain => "plain memory (mlx5 driver, this program plays the device)".into(),
            Where::Sim => "sim (software mlx5 device, device thread consuming)".into(),
            Where::Verbs => format!("verbs on {} (libibverbs ibv_post_send)", dev.unwrap_or("?")),
            Where::Mlx5 => format!("mlx5 on {} (hand-rolled mlx5 provider)", dev.unwrap_or("?")),
        }
    }
    pub(super) fn hardware(self) -> bool {
        matches!(self, Where::Verbs | Where::Mlx5)
    }
}

/// How a batch is announced to the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The 8-byte doorbell, always.
    Db8,
    /// BlueFlame for a single staged WQE (libmlx5's rule), else the 8-byte doorbell.
    BfSingle,
    /// Whatever `ibv_post_send` does (verbs).
    Verbs,
}

impl Mode {
    pub(super) fn name(self) -> &'static str {
        match self {
            Mode::Db8 => "db8",
            Mode::BfSingle => "bf-single",
            Mode::Verbs => "ibv_post_send",
        }
    }
    pub(super) fn doorbell(self) -> DoorbellMode {
        match self {
            Mode::BfSingle => DoorbellMode::Auto,
            _ => DoorbellMode::Doorbell,
        }
    }
}

/// Which requests ask for a completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// Every `n`-th request (and the last of a sample).
    Every(u32),
    /// The last request of each batch.
    PerBatch,
}

impl Signal {
    pub(super) fn name(self) -> String {
        match self {
            Signal::Every(1) => "signal every WR".into(),
            Signal::Every(n) => format!("signal every {n}"),
            Signal::PerBatch => "signal once per batch".into(),
        }
    }
    pub(super) fn key(self) -> String {
        match self {
            Signal::Every(n) => n.to_string(),
            Signal::PerBatch => "batch".into(),
        }
    }
    /// Is request `i` of a sample of `total`, in batches of `batch`, signaled?
    #[inline(always)]
    pub(super) fn wants(self, i: u32, batch: u32, total: u32) -> bool {
        i + 1 == total
            || match self {
                Signal::Every(n) => (i + 1) % n == 0,
                Signal::PerBatch => (i + 1) % batch == 0,
            }
    }
}

/// Payload kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PayloadKind {
    /// Copied into the WQE.
    Inline,
    /// One scatter/gather entry.
    Sge,
}

impl PayloadKind {
    pub(super) fn name(self) -> &'static str {
        match self {
            PayloadKind::Inline => "inline",
            PayloadKind::Sge => "sge",
        }
    }
}

/// One line of the curve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    pub(super) mode: Mode,
    pub(super) signal: Signal,
    pub(super) payload: PayloadKind,
    pub(super) size: u32,
}

/// The parsed command line.
#[derive(Clone, Debug)]
pub struct Opts {
    pub(super) at: Where,
    pub(super) device: Option<String>,
    pub(super) port: u8,
    pub(super) gid_index: u8,
    pub(super) batches: Vec<u32>,
    pub(super) modes: Vec<Mode>,
    pub(super) signals: Vec<Signal>,
    pub(super) payloads: Vec<PayloadKind>,
    pub(super) sizes: Vec<u32>,
    pub(super) reps: u32,
    pub(super) warmup: u32,
    pub(super) wqes: u32,
    pub(super) json: Option<String>,
    pub(super) svg: Option<String>,
    pub(super) explain: bool,
    pub(super) instructions: bool,
    /// The link the PCIe model's rate is reported for.
    pub(super) pcie: Link,
    /// The command line, for the JSON.
    pub(super) argv: Vec<String>,
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
        at: Where::Plain,
        device: None,
        port: 1,
        gid_index: 0,
        batches: vec![1, 2, 4, 8, 16, 32, 64],
        modes: vec![Mode::Db8, Mode::BfSingle],
        signals: vec![Signal::Every(1), Signal::Every(16), Signal::PerBatch],
        payloads: vec![PayloadKind::Inline],
        sizes: vec![8],
        reps: 0,
        warmup: u32::MAX,
        wqes: 0,
        json: None,
        svg: None,
        explain: false,
        instructions: false,
        pcie: Link::preset("gen3x8")?,
        argv: args.to_vec(),
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
            "--json" => o.json = Some(val()?),
            "--svg" => o.svg = Some(val()?),
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
    let (reps, warm, wqes) = match o.at {
        Where::Plain => (101, 20, 1024),
        Where::Sim => (9, 2, 2048),
        Where::Verbs | Where::Mlx5 => (5, 2, 2048),
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
    Ok(Some(o))
}

impl Opts {
    pub(super) fn configs(&self) -> Vec<Config> {
        let mut v = Vec::new();
        for &payload in &self.payloads {
            for &size in &self.sizes {
                for &mode in &self.modes {
                    for &signal in &self.signals {
                        v.push(Config {
                            mode,
                            signal,
                            payload,
                            size,
                        });
                    }
                }
            }
        }
        v
    }
    /// WQEs per sample for `batch`: whole batches, at least one.
    pub(super) fn sample_wqes(&self, batch: u32) -> u32 {
        self.wqes.div_ceil(batch).max(1) * batch
    }
    /// Does the series name need the payload and the size?
    pub(super) fn many_payloads(&self) -> bool {
        self.payloads.len() * self.sizes.len() > 1
    }
}
