//! Declarative transfer scenarios (`.scn` files) and their runner, as a product: a team
//! writes its own scenarios and runs them on the software mlx5 device, on rxe or any verbs
//! device, on mlx5 hardware, or through the stand-in libibverbs, with
//! `rdma-direct scenario FILE...` or from its own test crate with [`run_file`]. Behind the
//! `scenario` feature (part of the default `cli` build).
//!
//! A scenario is a small text file: the QPs, CQs, SRQs and buffers it needs, a sequence of
//! posts, doorbells and expected completions, and the expected final contents of every
//! buffer. The format is documented in `fixtures/scenarios/README.md` of the repository.
//!
//! ## The API
//!
//! - [`load_file`] / [`load_paths`] / [`parse()`] read files (a directory stands for its
//!   `*.scn` files, sorted). Every error is a [`ParseError`] naming `file:line`; bad input
//!   never panics.
//! - [`RunOpts::for_provider`] picks the options for an opened provider: its tags (which
//!   `[tag]` lines apply), the GID index to connect through.
//! - [`run_scenario`] runs a parsed scenario on any [`Provider`]
//!   and returns a [`Report`] or a [`Failure`] listing every [`Mismatch`] with its line;
//!   [`run_file`] parses and runs in one call.
//! - [`run_scenario_split`] runs one side of a scenario in each of two processes (requester
//!   and responder on two hosts); [`split`] says which scenarios can and why not the others.
//!
//! The runner allocates, registers and creates everything a scenario declares and destroys
//! it before returning, so one provider can run many scenarios in a row. It reads no
//! environment variable and prints nothing: the caller decides what to run and how to show
//! the result.
//!
//! ## What the runner checks
//!
//! - Every expected completion arrives (within [`RunOpts::poll_timeout`], or the group's
//!   shortest `within=` bound: a bound on waiting, not a claim about speed) with the expected
//!   status, and on success the expected opcode, byte length (where the file gives one),
//!   immediate (host order), GRH flag and source QP; on the CQ and with the `qp_num` of the
//!   queue its request was posted to.
//! - Order: completions of one queue (one SQ, one RQ, one SRQ) arrive in the order the file
//!   lists them, except inside an `expect any-order { ... }` block; completions of different
//!   queues may interleave in any order (the spec orders nothing across queues, and an SQ and
//!   an RQ sharing a CQ are different queues).
//! - Selective signaling: the runner keeps its own list of outstanding send requests per SQ;
//!   a send completion must cover exactly the unsignaled requests still outstanding before it
//!   ([`Completion::covered`](crate::providers::Completion::covered) and `covered_from`).
//! - Nothing is lost and nothing is extra: after the last step no further completion may
//!   arrive within [`RunOpts::settle`], and every request posted (and not rejected) must have
//!   been retired exactly once.
//! - `post` lines that expect a rejection get exactly that [`PostError`] kind back, with the
//!   request handed back unchanged (same `wr_id`).
//! - `state QP STATE` lines: the QP's [`QueuePair::state`](crate::providers::QueuePair::state)
//!   (as `connect`/`error` set it, or ERR once an error completion of the QP was polled).
//! - `event` lines: the asynchronous event arrives (of the QP or port named), read through
//!   [`Provider::async_events`]; a scenario with any `event` line must list every event the
//!   device raises by the end. `fault` lines inject through [`Provider::inject_fault`] (the
//!   sim; other providers refuse, and the run fails at that line naming the fix).
//! - Staging: before each `ring`, the SQ reports as many staged requests as were posted since
//!   the last `ring`.
//! - Every byte of every buffer at the end equals the expected image (the initial fill with
//!   the file's `final` edits applied), except ranges marked `any`.
//!
//! A run stops at the first mismatch unless [`RunOpts::keep_going`]: then a completion that
//! arrived with wrong fields is recorded and the run goes on (a timeout, an unexpected
//! completion or a setup error still end it). The final byte check always reports every
//! differing range of every buffer (up to [`MAX_RANGES`] per buffer), each with the line of
//! the `final` edit that covers it.
//!
//! [`Provider`]: crate::providers::Provider
//! [`Provider::async_events`]: crate::providers::Provider::async_events
//! [`Provider::inject_fault`]: crate::providers::Provider::inject_fault

use std::fmt;

use std::time::Duration;

use crate::providers::{AsyncEventKind, Fault, PostError, QpState, QpType, WcOpcode, WcStatus};

mod load;
mod outcome;
mod parse;
mod run;
pub mod split;

pub use load::{files, load_dir, load_file, load_paths, run_file};
pub use outcome::{tags_for, Failure, Mismatch, Report, RunError, RunOpts, MAX_RANGES};
pub use parse::parse;
pub use run::{run_scenario, run_scenario_split};

/// A parsed scenario file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scenario {
    /// `name` line (defaults to the file stem).
    pub name: String,
    /// Where it came from (for messages).
    pub file: String,
    /// `desc` line.
    pub desc: String,
    /// `version` line: the edition of the language the file is written in (1 when the file
    /// has none; [`VERSION`] is the newest this runner reads).
    pub version: u32,
    /// `differs` lines: why some lines are provider-specific.
    pub differs: Vec<String>,
    /// Buffers, each registered as its own MR.
    pub bufs: Vec<BufDecl>,
    /// Completion queues declared explicitly (QPs without `cq=` get their own).
    pub cqs: Vec<CqDecl>,
    /// Shared receive queues.
    pub srqs: Vec<SrqDecl>,
    /// Queue pairs.
    pub qps: Vec<QpDecl>,
    /// Edits of the initial buffer contents (`set` lines), in file order.
    pub sets: Vec<Edit>,
    /// Edits of the expected final contents (`final` lines), in file order.
    pub finals: Vec<Edit>,
    /// The actions, in file order.
    pub steps: Vec<Step>,
}

impl Scenario {
    /// Index of the buffer called `name`.
    pub fn buf_index(&self, name: &str) -> Option<usize> {
        self.bufs.iter().position(|b| b.name == name)
    }
}

/// How a buffer's bytes are initialised (or expected).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fill {
    /// All zero.
    Zero,
    /// Every byte the same.
    Byte(u8),
    /// Byte `i` of the range is `(i + start) & 0xff`.
    Seq(u8),
    /// A xorshift64* stream seeded with the value (never all zero).
    Rand(u64),
}

impl Fill {
    /// Write the pattern into `out` (byte 0 of `out` is pattern index 0).
    pub fn apply(self, out: &mut [u8]) {
        match self {
            Fill::Zero => out.fill(0),
            Fill::Byte(b) => out.fill(b),
            Fill::Seq(start) => {
                for (i, b) in out.iter_mut().enumerate() {
                    *b = (i as u8).wrapping_add(start);
                }
            }
            Fill::Rand(seed) => {
                let mut x = seed ^ 0x9e37_79b9_7f4a_7c15;
                if x == 0 {
                    x = 1;
                }
                for chunk in out.chunks_mut(8) {
                    x ^= x >> 12;
                    x ^= x << 25;
                    x ^= x >> 27;
                    let v = x.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes();
                    chunk.copy_from_slice(&v[..chunk.len()]);
                }
            }
        }
    }
}

/// `buf NAME SIZE [fill=PATTERN] [access=...]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufDecl {
    /// Name.
    pub name: String,
    /// Size in bytes (> 0).
    pub size: usize,
    /// Initial fill.
    pub fill: Fill,
    /// MR access flags ([`crate::providers::Access`] bits).
    pub access: u32,
    /// Declaring line.
    pub line: usize,
}

/// `cq NAME SIZE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CqDecl {
    /// Name.
    pub name: String,
    /// Entries.
    pub size: u32,
    /// Declaring line.
    pub line: usize,
}

/// `srq NAME [wr=N] [sge=N]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SrqDecl {
    /// Name.
    pub name: String,
    /// Max outstanding receives.
    pub max_wr: u32,
    /// Max SGEs per receive.
    pub max_sge: u32,
    /// Declaring line.
    pub line: usize,
}

/// `qp NAME rc|uc|ud [sq=N] [rq=N] [send_sge=N] [recv_sge=N] [inline=N] [cq=C] [scq=C]
/// [rcq=C] [srq=S] [sig_all]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QpDecl {
    /// Name.
    pub name: String,
    /// Transport.
    pub qp_type: QpType,
    /// Max outstanding sends.
    pub sq: u32,
    /// Max outstanding receives.
    pub rq: u32,
    /// SGEs per send.
    pub send_sge: u32,
    /// SGEs per receive.
    pub recv_sge: u32,
    /// Max inline bytes.
    pub inline: u32,
    /// Send CQ: index into [`Scenario::cqs`], or `None` = the QP's own CQ.
    pub send_cq: Option<usize>,
    /// Receive CQ: index into [`Scenario::cqs`], or `None` = the same as the send CQ.
    pub recv_cq: Option<usize>,
    /// Index into [`Scenario::srqs`].
    pub srq: Option<usize>,
    /// Every send signaled.
    pub sig_all: bool,
    /// Declaring line.
    pub line: usize,
}

/// A byte range of a buffer: `NAME[+OFF][:LEN]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    /// Buffer index.
    pub buf: usize,
    /// Offset.
    pub off: usize,
    /// Length.
    pub len: usize,
}

/// What a `set` / `final` line writes into an image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EditKind {
    /// A pattern over the range.
    Fill(Fill),
    /// These bytes.
    Bytes(Vec<u8>),
    /// The *initial* contents of another range (same length).
    Copy(Range),
    /// Not compared (device-specific bytes such as a UD GRH). `final` only.
    Any,
}

/// `set RANGE ...` or `final RANGE ...`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edit {
    /// Where.
    pub range: Range,
    /// What.
    pub kind: EditKind,
    /// Only for this variant (`final[rxe]`).
    pub variant: Option<String>,
    /// File line.
    pub line: usize,
}

/// A send operation as written in a `post` line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PostOp {
    /// `send`
    Send,
    /// `send_imm`
    SendImm,
    /// `write`
    Write,
    /// `write_imm`
    WriteImm,
    /// `read`
    Read,
    /// `cas`
    Cas,
    /// `faa`
    Faa,
}

impl PostOp {
    /// From the file keyword.
    pub fn from_name(s: &str) -> Option<PostOp> {
        Some(match s {
            "send" => PostOp::Send,
            "send_imm" => PostOp::SendImm,
            "write" => PostOp::Write,
            "write_imm" => PostOp::WriteImm,
            "read" => PostOp::Read,
            "cas" => PostOp::Cas,
            "faa" => PostOp::Faa,
            _ => return None,
        })
    }
    /// Needs a `remote=`.
    pub fn needs_remote(self) -> bool {
        !matches!(self, PostOp::Send | PostOp::SendImm)
    }
    /// Carries an immediate.
    pub fn has_imm(self) -> bool {
        matches!(self, PostOp::SendImm | PostOp::WriteImm)
    }
}

/// The kind of a [`PostError`], as written after `reject=` (snake case of the variant).
pub fn post_error_name(e: &PostError) -> &'static str {
    match e {
        PostError::QueueFull { .. } => "queue_full",
        PostError::CqFull { .. } => "cq_full",
        PostError::InlineTooLarge { .. } => "inline_too_large",
        PostError::TooManySges { .. } => "too_many_sges",
        PostError::AtomicMisaligned { .. } => "atomic_misaligned",
        PostError::AtomicLocalLen { .. } => "atomic_local_len",
        PostError::InlineNotAllowed => "inline_not_allowed",
        PostError::ZeroLengthRead => "zero_length_read",
        PostError::OpNotSupported { .. } => "op_not_supported",
        PostError::BadState { .. } => "bad_state",
        PostError::CqError { .. } => "cq_error",
        PostError::UdDest => "ud_dest",
        PostError::UdTooLarge { .. } => "ud_too_large",
        PostError::Device { .. } => "device",
    }
}

/// Every name [`post_error_name`] can return.
pub const POST_ERROR_NAMES: [&str; 14] = [
    "queue_full",
    "cq_full",
    "inline_too_large",
    "too_many_sges",
    "atomic_misaligned",
    "atomic_local_len",
    "inline_not_allowed",
    "zero_length_read",
    "op_not_supported",
    "bad_state",
    "cq_error",
    "ud_dest",
    "ud_too_large",
    "device",
];

/// A `post` line (one line may stand for `repeat` requests).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostStep {
    /// QP index.
    pub qp: usize,
    /// Operation.
    pub op: PostOp,
    /// wr_id of the first request; request `i` of a repeat gets `wr_id + i`.
    pub wr_id: u64,
    /// Local SGEs (empty with `inline=`).
    pub sges: Vec<Range>,
    /// Inline payload taken from a buffer's *current* contents at post time.
    pub inline: Option<Range>,
    /// Remote target: buffer and offset (its MR's rkey).
    pub remote: Option<(usize, usize)>,
    /// Use a deliberately wrong rkey.
    pub bad_rkey: bool,
    /// Immediate (host order) of the first request; request `i` of a repeat gets
    /// `imm + i * imm_step` (`imm=V+i*K`).
    pub imm: u32,
    /// What the immediate grows by per repetition.
    pub imm_step: u32,
    /// CAS compare.
    pub compare: u64,
    /// CAS swap.
    pub swap: u64,
    /// FAA addend.
    pub add: u64,
    /// Signaled: all (`signaled`), none, or the last of a repeat (`signal=last`).
    pub signal: Signal,
    /// Fence flag.
    pub fence: bool,
    /// Solicited flag.
    pub solicited: bool,
    /// UD destination QP.
    pub dest: Option<usize>,
    /// Number of requests this line posts.
    pub repeat: u32,
    /// Offset step per repetition (added to every local and remote offset).
    pub step: usize,
    /// Expected rejection kind (see [`POST_ERROR_NAMES`]).
    pub reject: Option<String>,
}

/// Which requests of a `post` line are signaled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// None (unless the QP is `sig_all`).
    None,
    /// Every one.
    All,
    /// Only the last of the repeat.
    Last,
}

/// Where a `post_recv` goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RecvTarget {
    /// A QP's own receive queue.
    Qp(usize),
    /// An SRQ.
    Srq(usize),
}

/// A `post_recv` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecvStep {
    /// Where.
    pub target: RecvTarget,
    /// First wr_id.
    pub wr_id: u64,
    /// Scatter list (may be empty).
    pub sges: Vec<Range>,
    /// Number of receives.
    pub repeat: u32,
    /// Offset step per repetition.
    pub step: usize,
    /// Expected rejection kind.
    pub reject: Option<String>,
}

/// Overrides of the connection parameters on a `connect` line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ConnectOverrides {
    /// `timeout=`
    pub timeout: Option<u8>,
    /// `retry=`
    pub retry_cnt: Option<u8>,
    /// `rnr_retry=`
    pub rnr_retry: Option<u8>,
    /// `min_rnr_timer=`
    pub min_rnr_timer: Option<u8>,
}

/// One expected completion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectCqe {
    /// The request's wr_id.
    pub wr_id: u64,
    /// Status.
    pub status: WcStatus,
    /// Opcode (success only).
    pub opcode: Option<WcOpcode>,
    /// Byte length, when given.
    pub len: Option<u32>,
    /// Immediate (host order); on a successful receive, `None` means "no immediate".
    pub imm: Option<u32>,
    /// The QP it belongs to (required for SRQ receives; defaults to the posting QP).
    pub qp: Option<usize>,
    /// The source QP (UD receives).
    pub src_qp: Option<usize>,
    /// GRH flag expected (successful receives).
    pub grh: bool,
    /// Covered count, when given (the runner always checks its own count).
    pub covered: Option<u32>,
    /// Only for this variant (`expect[rxe]`).
    pub variant: Option<String>,
    /// Inside an `expect any-order { ... }` block: no order against the block's other
    /// completions of its queue.
    pub any_order: bool,
    /// `within=DURATION`: how long the group may wait for this completion (the shortest
    /// bound of a group applies to the group), instead of [`RunOpts::poll_timeout`]. A bound
    /// on waiting, so that a hang fails early: not a claim about speed.
    pub within: Option<Duration>,
    /// File line.
    pub line: usize,
}

/// The newest edition of the scenario language this runner reads (`version 2`).
pub const VERSION: u32 = 2;

/// The asynchronous event names an `event` line may give (`IBV_EVENT_` dropped).
pub const EVENT_NAMES: [(&str, AsyncEventKind); 13] = [
    ("CQ_ERR", AsyncEventKind::CqErr),
    ("QP_FATAL", AsyncEventKind::QpFatal),
    ("QP_REQ_ERR", AsyncEventKind::QpReqErr),
    ("QP_ACCESS_ERR", AsyncEventKind::QpAccessErr),
    ("COMM_EST", AsyncEventKind::CommEst),
    ("SQ_DRAINED", AsyncEventKind::SqDrained),
    ("QP_LAST_WQE_REACHED", AsyncEventKind::QpLastWqeReached),
    ("SRQ_ERR", AsyncEventKind::SrqErr),
    ("SRQ_LIMIT_REACHED", AsyncEventKind::SrqLimitReached),
    ("PORT_ACTIVE", AsyncEventKind::PortActive),
    ("PORT_ERR", AsyncEventKind::PortErr),
    ("GID_CHANGE", AsyncEventKind::GidChange),
    ("DEVICE_FATAL", AsyncEventKind::DeviceFatal),
];

/// The `event` line's name of `kind` (`EVENT_n` for one without a name).
pub fn event_name(kind: AsyncEventKind) -> String {
    EVENT_NAMES
        .iter()
        .find(|(_, k)| *k == kind)
        .map_or_else(|| format!("{kind:?}"), |(n, _)| n.to_string())
}

/// One expected asynchronous event (`event KIND [QP] [port=N] [within=DURATION]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectEvent {
    /// Which event.
    pub kind: AsyncEventKind,
    /// The QP it must concern (QP events), by index.
    pub qp: Option<usize>,
    /// The port it must concern (port events).
    pub port: Option<u8>,
    /// How long to wait for it (default [`RunOpts::poll_timeout`]).
    pub within: Option<Duration>,
    /// File line.
    pub line: usize,
}

/// One action of a scenario.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepKind {
    /// Bring two QPs up towards each other (`connect a b`).
    Connect {
        /// First QP.
        a: usize,
        /// Second QP.
        b: usize,
        /// Parameter overrides.
        opts: ConnectOverrides,
    },
    /// Stage send requests.
    Post(PostStep),
    /// Stage receives.
    PostRecv(RecvStep),
    /// Ring a QP's SQ.
    Ring(usize),
    /// Ring a receive queue / SRQ.
    RingRecv(RecvTarget),
    /// Move a QP to ERR.
    ToError(usize),
    /// The QP's state as its provider reports it (as set by `connect`/`error`, or ERR once
    /// an error completion of the QP was polled) must be this.
    State {
        /// QP index.
        qp: usize,
        /// The state.
        state: QpState,
    },
    /// Wait for these completions (consecutive `expect` lines).
    Expect(Vec<ExpectCqe>),
    /// Wait for an asynchronous event (`event` line).
    Event(ExpectEvent),
    /// Inject a fault through [`Provider::inject_fault`] (`fault qp QP`, `fault port N
    /// down|up`); refused by providers that cannot (all but the sim).
    ///
    /// [`Provider::inject_fault`]: crate::providers::Provider::inject_fault
    Fault {
        /// What.
        fault: Fault,
        /// The QP it concerns (`Fault::QpFatal`).
        qp: Option<usize>,
    },
}

/// A step with its line and variant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// What.
    pub kind: StepKind,
    /// Only for this variant.
    pub variant: Option<String>,
    /// First file line.
    pub line: usize,
}

/// A scenario file that could not be read or parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// The file.
    pub file: String,
    /// 1-based line, 0 when the error concerns the whole file.
    pub line: usize,
    /// What is wrong.
    pub msg: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.msg)
        } else {
            write!(f, "{}:{}: {}", self.file, self.line, self.msg)
        }
    }
}

impl std::error::Error for ParseError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_are_deterministic() {
        let mut a = [0u8; 20];
        Fill::Seq(250).apply(&mut a);
        assert_eq!(&a[..8], &[250, 251, 252, 253, 254, 255, 0, 1]);
        let mut r1 = [0u8; 13];
        let mut r2 = [0u8; 13];
        Fill::Rand(7).apply(&mut r1);
        Fill::Rand(7).apply(&mut r2);
        assert_eq!(r1, r2);
        let mut r3 = [0u8; 13];
        Fill::Rand(8).apply(&mut r3);
        assert_ne!(r1, r3);
        Fill::Byte(0x5a).apply(&mut a);
        assert!(a.iter().all(|&b| b == 0x5a));
    }

    #[test]
    fn post_error_names_are_complete() {
        let all = [
            PostError::QueueFull { capacity: 1 },
            PostError::CqFull { cqe: 1 },
            PostError::InlineTooLarge { len: 1, max: 0 },
            PostError::TooManySges { n: 2, max: 1 },
            PostError::AtomicMisaligned { raddr: 1 },
            PostError::AtomicLocalLen { len: 1 },
            PostError::InlineNotAllowed,
            PostError::ZeroLengthRead,
            PostError::OpNotSupported {
                op: "READ",
                qp_type: QpType::Uc,
            },
            PostError::BadState {
                state: crate::providers::QpState::Init,
            },
            PostError::CqError { cqn: 0x40 },
            PostError::UdDest,
            PostError::UdTooLarge { len: 2, mtu: 1 },
            PostError::Device {
                verb: crate::providers::RingVerb::PostSend,
                errno: 22,
                count: 1,
            },
        ];
        let names: Vec<_> = all.iter().map(post_error_name).collect();
        assert_eq!(names, POST_ERROR_NAMES);
    }
}
